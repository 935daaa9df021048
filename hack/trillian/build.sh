#!/usr/bin/env bash
# Builds Trillian's log server and log signer, the Merkle tree Rekor
# (hack/rekor) keeps its log in, at the version of hack/trillian/VERSION
# (the one rekor-server's go.mod requires), into bin/trillian/VERSION/.
# Prints the directory.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
v=$(cat "$here/VERSION")
"$here/../goinstall.sh" trillian "$v" github.com/google/trillian/cmd/trillian_log_server trillian_log_server >/dev/null
"$here/../goinstall.sh" trillian "$v" github.com/google/trillian/cmd/trillian_log_signer trillian_log_signer >/dev/null
out=$(cd "$here/../.." && pwd)/bin/trillian/$v
# Trillian's MySQL schema, which the tests load into a fresh database.
if [ ! -f "$out/storage.sql" ]; then
  dir=$(cd "$out" && GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' "github.com/google/trillian@$v")
  install -m 0644 "$dir/storage/mysql/schema/storage.sql" "$out/storage.sql"
fi
echo "$out"
