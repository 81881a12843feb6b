#!/usr/bin/env bash
# Makes `python3 -m uv` available, installing uv from PyPI when it is missing.
set -euo pipefail
PY=${PYTHON:-python3}
"$PY" -m uv --version >/dev/null 2>&1 && exit 0
echo "ensure-uv: installing uv from PyPI" >&2
"$PY" -m pip install --quiet --user uv 2>/dev/null \
  || "$PY" -m pip install --quiet --user --break-system-packages uv 2>/dev/null \
  || "$PY" -m pip install --quiet uv
"$PY" -m uv --version >/dev/null
