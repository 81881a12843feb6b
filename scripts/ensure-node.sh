#!/usr/bin/env bash
# Makes sure Node.js and the Vercel AI SDK client of tests/node are installed for the ui-chat
# tests: Debian's nodejs and npm when missing, then `npm ci` from the lock file (only when
# the lock file changed since the last install, so the tests themselves never need a network).
set -euo pipefail

cd "$(dirname "$0")/../tests/node"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "ensure-node: Node.js not found, installing it from Debian's packages" >&2
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nodejs npm >/dev/null
fi
STAMP=node_modules/.installed-package-lock.json
if ! cmp -s package-lock.json "$STAMP" 2>/dev/null; then
  npm ci --no-audit --no-fund --loglevel=error >/dev/null
  cp package-lock.json "$STAMP"
fi
