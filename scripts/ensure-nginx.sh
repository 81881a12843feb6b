#!/usr/bin/env bash
# Makes sure Debian's nginx is installed for the reverse-proxy test (tests/deploy), which runs
# it unprivileged; a system service the package may start is left alone.
set -euo pipefail
"$(dirname "$0")/ensure-debian-package.sh" "${NGINX_PATH:-/usr/sbin/nginx}" nginx
