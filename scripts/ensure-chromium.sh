#!/usr/bin/env bash
# Makes sure Debian's Chromium is installed for the browser tests (Playwright launches it by
# its path; no browser is downloaded): installed from Debian's packages when missing.
set -euo pipefail
"$(dirname "$0")/ensure-debian-package.sh" "${CHROMIUM_PATH:-/usr/bin/chromium}" chromium
