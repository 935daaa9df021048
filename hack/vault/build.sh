#!/usr/bin/env bash
# Builds HashiCorp Vault (its server and CLI) from the Go module proxy
# through the wrapper module hack/vault (Vault's go.mod replaces its own
# api and sdk, which `go install` refuses), into
# bin/vault/<version>-<src>/vault (git-ignored), unless it is there.
# Prints the binary's path. About 15 minutes the first time on 2 cores,
# and several GB of build cache.
# With --check it builds nothing, and fails when the binary is missing.
set -euo pipefail
check=false
if [ "${1:-}" = --check ]; then check=true; shift; fi
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
version=$(awk '$1=="require" && $2=="github.com/hashicorp/vault" {print $3}' "$here/go.mod")
src=$(cat "$here"/*.go "$here/go.mod" | sha256sum | cut -c1-8)
dir=$root/bin/vault/$version-$src
. "$here/../toolcache.sh"
$check || cached_dir "$dir" "$here/go.mod" "$here/go.sum"
if $check; then
  if [ ! -x "$dir/vault" ]; then
    echo "HashiCorp Vault $version is not built in $dir: run \`make tools\` (hack/vault/build.sh); \`make test\` does" >&2
    exit 3
  fi
  echo "$dir/vault"
  exit 0
fi
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
if [ ! -x "$dir/vault" ]; then
  echo "building HashiCorp Vault $version..." >&2
  (cd "$here" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$dir/vault.tmp" .)
  mv "$dir/vault.tmp" "$dir/vault"
fi
echo "$dir/vault"
