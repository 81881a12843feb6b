#!/usr/bin/env bash
# ensure-debian-package.sh PROGRAM PACKAGE: installs PACKAGE from Debian's packages when
# PROGRAM (a path, or a name on PATH) is missing. Shared by the ensure-*.sh scripts.
set -euo pipefail

PROGRAM=$1
PACKAGE=$2
if ! command -v "$PROGRAM" >/dev/null; then
  echo "ensure: $PROGRAM not found, installing $PACKAGE from Debian's packages" >&2
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$PACKAGE" >/dev/null
fi
