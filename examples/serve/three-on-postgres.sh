#!/usr/bin/env bash
# The same server as three processes over one PostgreSQL database. Each run is driven by one
# process at a time (SQL leases); kill one and the others' recovery sweep (every 60 s, and at
# start) resumes its unfinished runs without repeating a settled write.
#   DATABASE_URL=postgres://postgres@127.0.0.1:54329/postgres bash examples/serve/three-on-postgres.sh
set -euo pipefail
: "${DATABASE_URL:?set DATABASE_URL}"
cd "$(dirname "$0")/../.."
pids=()
for port in 8081 8082 8083; do
  PORT=$port SINGLE_INSTANCE=0 ROOT_DIR="${TMPDIR:-/tmp}/knap-serve-$port" node examples/serve/server.mjs &
  pids+=($!)
done
trap 'kill "${pids[@]}" 2>/dev/null' EXIT
wait
