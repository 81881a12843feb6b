#!/usr/bin/env bash
# Makes sure Debian's Chromium is installed for the browser tests (Playwright launches it by
# its path; no browser is downloaded): installed from Debian's packages when missing.
set -euo pipefail

CHROMIUM=${CHROMIUM_PATH:-/usr/bin/chromium}
if [ ! -x "$CHROMIUM" ]; then
  echo "ensure-chromium: Chromium not found at $CHROMIUM, installing it from Debian's packages" >&2
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
