#!/usr/bin/env bash
# Starts a throwaway PostgreSQL for the durable store tests and prints its URL on stdout
# (everything else goes to stderr):
#
#   export KNAP_TEST_POSTGRES_URL=$(bash .ci/postgres.sh)
#
# Installs Debian's postgresql when no server binaries are found, creates a cluster in
# $KNAP_PG_DIR (default /tmp/knap-postgres) with trust auth, listening on 127.0.0.1:$KNAP_PG_PORT
# (default 54329) only, and starts it. Idempotent: a cluster already running there is reused.
set -euo pipefail
port="${KNAP_PG_PORT:-54329}"
dir="${KNAP_PG_DIR:-/tmp/knap-postgres}"
log() { echo "postgres.sh: $*" >&2; }

bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
  log "installing postgresql (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq postgresql >&2
  bindir=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
fi

# initdb and postgres refuse to run as root: run them as the postgres user then.
as_owner() {
  if [ "$(id -u)" = "0" ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

url="postgres://postgres@127.0.0.1:${port}/postgres"
if as_owner "$bindir/pg_isready" -q -h 127.0.0.1 -p "$port" 2>/dev/null; then
  log "already running on 127.0.0.1:${port}"
  echo "$url"
  exit 0
fi

init_cluster() {
  log "initdb $dir"
  mkdir -p "$dir"
  [ "$(id -u)" = "0" ] && chown postgres:postgres "$dir"
  chmod 700 "$dir"
  as_owner "$bindir/initdb" -D "$dir" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 >&2
  # Marks the directory as this script's throwaway cluster (it may be wiped and re-made).
  as_owner touch "$dir/.knap-test-cluster"
}

start_cluster() {
  # A server killed without shutdown leaves postmaster.pid behind; if its pid now belongs to
  # another process (pid reuse), postgres would refuse to start. Drop it when it is stale.
  if [ -f "$dir/postmaster.pid" ]; then
    pid=$(head -n 1 "$dir/postmaster.pid" 2>/dev/null || true)
    if [ -z "$pid" ] || ! tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q postgres; then
      log "removing stale postmaster.pid (pid ${pid:-?})"
      rm -f "$dir/postmaster.pid"
    fi
  fi
  log "starting on 127.0.0.1:${port}"
  as_owner "$bindir/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p ${port} -k ${dir} -c max_connections=100 -c fsync=on" start >&2
}

[ -f "$dir/PG_VERSION" ] || init_cluster
if ! start_cluster; then
  if [ -f "$dir/.knap-test-cluster" ]; then
    log "start failed; making a fresh cluster"
    rm -rf "$dir"
    init_cluster
    start_cluster
  else
    log "start failed (see $dir/server.log)"
    exit 1
  fi
fi
as_owner "$bindir/pg_isready" -q -h 127.0.0.1 -p "$port"
echo "$url"
