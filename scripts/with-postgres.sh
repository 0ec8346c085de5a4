#!/usr/bin/env bash
# with-postgres.sh CMD [ARGS...]
#
# Runs CMD with a throwaway PostgreSQL 15 cluster: a fresh data directory in a temp dir, a free
# loopback port, fsync left on (so figures measured under it are honest), and TEST_DATABASE_URL
# exported. The cluster is stopped and removed when CMD exits, whatever its exit code, and that
# code is returned.
#
# initdb refuses to run as root, so when we are root the cluster belongs to the `postgres` user.
set -euo pipefail

PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
if [ ! -x "$PGBIN/initdb" ]; then
  echo "with-postgres: $PGBIN/initdb not found; installing postgresql" >&2
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  else
    echo "with-postgres: run 'apt-get install -y postgresql' as root first" >&2
    exit 1
  fi
fi

RUNAS=()
if [ "$(id -u)" = 0 ]; then
  RUNAS=(runuser -u postgres --)
fi

DIR=$(mktemp -d /tmp/jobs-pg.XXXXXX)
chmod 755 "$DIR"
[ "$(id -u)" = 0 ] && chown postgres "$DIR"

# A free port: ask the kernel for one, then hand it to postgres.
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null \
  || echo $((20000 + RANDOM % 20000)))

cleanup() {
  "${RUNAS[@]}" "$PGBIN/pg_ctl" -D "$DIR/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$DIR"
}
trap cleanup EXIT INT TERM

"${RUNAS[@]}" "$PGBIN/initdb" -D "$DIR/data" -U postgres -A trust --no-sync >"$DIR/initdb.log" 2>&1 \
  || { cat "$DIR/initdb.log" >&2; exit 1; }

# Settings shared by tests and benchmarks: enough connections for parallel packages, and the
# statistics that the benchmarks read (pg_stat_statements).
cat >>"$DIR/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$DIR'
max_connections = ${PG_MAX_CONNECTIONS:-300}
shared_buffers = 256MB
shared_preload_libraries = 'pg_stat_statements'
log_min_messages = warning
CONF

"${RUNAS[@]}" "$PGBIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w -t 60 start >/dev/null \
  || { cat "$DIR/server.log" >&2; exit 1; }

export TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$PORT/postgres?sslmode=disable"
export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
echo "with-postgres: PostgreSQL $("$PGBIN/postgres" --version | awk '{print $3}') on 127.0.0.1:$PORT" >&2

set +e
"$@"
rc=$?
set -e
exit $rc
