#!/usr/bin/env bash
# Makes the separate environment `.venv-mcp1` with the `mcp` package's 1.x line, whose server
# (tests/fakes/mcp_v1_server.py) the tests run as a server of the handshake era. Installed once
# (uv's cache keeps the files); afterwards the tests need no network.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=1.30.0
STAMP=.venv-mcp1/.installed-mcp-$VERSION
[ -f "$STAMP" ] && exit 0
"$(dirname "$0")/ensure-uv.sh"
python3 -m uv venv --quiet --allow-existing --python "${PYTHON:-python3}" .venv-mcp1
python3 -m uv pip install --quiet --python .venv-mcp1/bin/python "mcp==$VERSION"
touch "$STAMP"
