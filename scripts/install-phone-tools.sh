#!/usr/bin/env bash
# Debian's baresip (the package baresip-core: the softphone and the modules the tests load - g711, aufile,
# sndfile, alsa, ctrl_tcp), the real SIP softphone that calls the server in tests/unit/transport/test_sip_call.py
# and tests/e2e/test_sip.py (scripts/bench/softphone.py drives it). A no-op when it is installed.
set -euo pipefail
if command -v baresip >/dev/null 2>&1 && [ -f /usr/lib/baresip/modules/ctrl_tcp.so ]; then
  exit 0
fi
bash "$(dirname "$0")/apt-install.sh" install-phone-tools --no-install-recommends baresip-core
command -v baresip >/dev/null 2>&1 || { echo "install-phone-tools: baresip is still missing after apt-get install" >&2; exit 1; }
{ baresip -h 2>&1 || true; } | sed -n 1p  # -h exits 254
