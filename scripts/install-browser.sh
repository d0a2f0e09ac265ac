#!/usr/bin/env bash
# Debian's Chromium for the demo page's browser tests (Playwright drives it; `playwright install` cannot
# download browsers on an offline machine). A no-op when /usr/bin/chromium is there.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
bash "$(dirname "$0")/apt-install.sh" install-browser chromium
/usr/bin/chromium --version
