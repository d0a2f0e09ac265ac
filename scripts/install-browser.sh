#!/usr/bin/env bash
# Debian's Chromium for the demo page's browser tests (Playwright drives it; `playwright install` cannot
# download browsers on an offline machine). A no-op when /usr/bin/chromium is there.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-browser: no apt-get here; install Chromium and put it at /usr/bin/chromium" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "install-browser: run as root or install sudo (apt-get install chromium)" >&2; exit 1; }
  SUDO=sudo
fi
echo "install-browser: installing Debian's chromium (once; about 300 MB)"
$SUDO apt-get update -qq || echo "install-browser: apt-get update failed; trying the package lists we have" >&2
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
/usr/bin/chromium --version
