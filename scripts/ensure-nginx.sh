#!/usr/bin/env bash
# Makes sure Debian's nginx is installed for the reverse-proxy test (tests/deploy): installed
# from Debian's packages when missing. The test runs it unprivileged; the system service that
# the package may start is left alone.
set -euo pipefail

NGINX=${NGINX_PATH:-/usr/sbin/nginx}
if [ ! -x "$NGINX" ]; then
  echo "ensure-nginx: nginx not found at $NGINX, installing it from Debian's packages" >&2
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nginx >/dev/null
fi
