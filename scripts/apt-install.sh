#!/usr/bin/env bash
# `scripts/apt-install.sh WHO [APT-OPTION...] PACKAGE...`: Debian packages, as root or through sudo, for the installers of
# system tools (install-browser.sh, install-fleet-tools.sh); WHO names the caller in its messages.
set -euo pipefail
who=$1
shift
if ! command -v apt-get >/dev/null 2>&1; then
  echo "$who: no apt-get here; install $* yourself" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "$who: run as root or install sudo (apt-get install $*)" >&2; exit 1; }
  SUDO=sudo
fi
packages=()
for arg in "$@"; do [[ $arg == -* ]] || packages+=("$arg"); done
echo "$who: installing Debian's ${packages[*]} (once)"
$SUDO apt-get update -qq || echo "$who: apt-get update failed; trying the package lists we have" >&2
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
