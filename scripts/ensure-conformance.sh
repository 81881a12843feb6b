#!/usr/bin/env bash
# Makes sure the MCP conformance suite (`@modelcontextprotocol/conformance`) and the Node.js 22
# it needs are installed in tests/conformance for tests/tools/mcp/test_conformance.py: `npm ci`
# from the lock file with Debian's npm (installed when missing). Node 22 is npm's `node`
# package, whose install step fetches the same version's binary from the npm registry. Only
# when the lock file changed since the last install, so the tests themselves never need a
# network.
set -euo pipefail

"$(dirname "$0")/ensure-debian-package.sh" node nodejs
"$(dirname "$0")/ensure-debian-package.sh" npm npm
cd "$(dirname "$0")/../tests/conformance"
STAMP=node_modules/.installed-package-lock.json
if ! cmp -s package-lock.json "$STAMP" 2>/dev/null || ! [ -x node_modules/.bin/node ]; then
  npm ci --no-audit --no-fund --loglevel=error >/dev/null
  # The `node` package's own install step fetches the binary: fail here if it did not run.
  node_modules/.bin/node --version >/dev/null
  cp package-lock.json "$STAMP"
fi
