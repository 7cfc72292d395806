#!/usr/bin/env bash
# A throw-away PostgreSQL cluster on loopback for the fleet's tests and benchmarks (docs/fleet.md): Debian's
# postgresql package (installed with apt-get if missing), a new cluster in a temporary folder owned by the postgres
# user, listening on 127.0.0.1 only on a free port, with a `beckon` database and role (which may create databases:
# each test makes its own).
#   scripts/postgres.sh start DIR   starts it (DIR is created) and prints its URL, postgres://beckon@127.0.0.1:PORT/beckon
#   scripts/postgres.sh stop DIR    stops it and deletes DIR
set -euo pipefail
cmd=${1:?usage: scripts/postgres.sh start|stop DIR}
dir=${2:?usage: scripts/postgres.sh start|stop DIR}

bin=$(ls -d /usr/lib/postgresql/*/bin 2> /dev/null | sort -V | tail -n 1 || true)
if [ -z "$bin" ]; then
  apt-get install -y postgresql > /tmp/beckon-postgres-install.log 2>&1 ||
    { cat /tmp/beckon-postgres-install.log; echo "cannot install postgresql"; exit 1; }
  bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
fi
# The server refuses to run as root: the cluster belongs to the package's postgres user (or this user, if not root).
as() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

case "$cmd" in
  start)
    mkdir -p "$dir"
    if [ "$(id -u)" = 0 ]; then
      chown postgres: "$dir"
      chmod o+x "$(dirname "$dir")"  # (the postgres user must reach DIR: a mktemp folder is 0700)
    fi
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    as "$bin/initdb" -D "$dir/data" -U postgres --auth=trust --no-sync > "$dir/initdb.log" 2>&1 ||
      { cat "$dir/initdb.log"; exit 1; }
    as "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir -c max_connections=200" \
      start > /dev/null || { cat "$dir/server.log"; exit 1; }
    as "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -q -c "CREATE ROLE beckon LOGIN CREATEDB" \
      -c "CREATE DATABASE beckon OWNER beckon" > /dev/null
    echo "postgres://beckon@127.0.0.1:$port/beckon"
    ;;
  stop)
    [ -d "$dir/data" ] && as "$bin/pg_ctl" -D "$dir/data" -m fast -w stop > /dev/null 2>&1 || true
    rm -rf "$dir"
    ;;
  *)
    echo "usage: scripts/postgres.sh start|stop DIR"
    exit 2
    ;;
esac
