#!/usr/bin/env bash
# Runs the given command with TEST_DATABASE_URL pointing at a throwaway PostgreSQL server on
# 127.0.0.1: installed from Debian's packages when missing, started in a temporary data
# directory, stopped and removed afterwards whatever the command's outcome.
set -euo pipefail

pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }

BIN=$(pg_bin)
if [ -z "$BIN" ] || [ ! -x "$BIN/initdb" ]; then
  echo "with-postgres: PostgreSQL not found, installing it from Debian's packages" >&2
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq postgresql >/dev/null
  BIN=$(pg_bin)
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/controlcenter-pg.XXXXXX")
RUNAS=()
if [ "$(id -u)" = 0 ]; then
  # PostgreSQL refuses to run as root.
  chown postgres: "$WORK"
  RUNAS=(runuser -u postgres --)
fi
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

cleanup() {
  "${RUNAS[@]}" "$BIN/pg_ctl" -D "$WORK/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

"${RUNAS[@]}" "$BIN/initdb" -D "$WORK/data" -U postgres --auth=trust -E UTF8 >/dev/null
# Durability settings off: the data directory is thrown away after the run.
"${RUNAS[@]}" "$BIN/pg_ctl" -D "$WORK/data" -l "$WORK/server.log" -w -o \
  "-c listen_addresses=127.0.0.1 -p $PORT -k $WORK -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=400" \
  start >/dev/null
"$BIN/psql" -h 127.0.0.1 -p "$PORT" -U postgres -q -c "CREATE DATABASE controlcenter_test" >/dev/null

export TEST_DATABASE_URL="postgresql+asyncpg://postgres@127.0.0.1:$PORT/controlcenter_test"
echo "with-postgres: PostgreSQL $("$BIN/postgres" --version | awk '{print $3}') on 127.0.0.1:$PORT" >&2
"$@"
