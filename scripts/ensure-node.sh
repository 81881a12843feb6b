#!/usr/bin/env bash
# Makes sure Node.js and the Vercel AI SDK client of tests/node are installed for the ui-chat
# tests: Debian's nodejs and npm when missing, then `npm ci` from the lock file (only when
# the lock file changed since the last install, so the tests themselves never need a network).
set -euo pipefail

"$(dirname "$0")/ensure-debian-package.sh" node nodejs
"$(dirname "$0")/ensure-debian-package.sh" npm npm
cd "$(dirname "$0")/../tests/node"
STAMP=node_modules/.installed-package-lock.json
if ! cmp -s package-lock.json "$STAMP" 2>/dev/null; then
  npm ci --no-audit --no-fund --loglevel=error >/dev/null
  cp package-lock.json "$STAMP"
fi
