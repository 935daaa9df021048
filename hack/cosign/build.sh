#!/usr/bin/env bash
# Builds the cosign CLI that tests sign images with, at the version of
# hack/cosign/VERSION, from the Go module proxy with its own go.mod, into
# bin/cosign/<version>/cosign (git-ignored), unless it is there (about 10
# minutes on 2 cores). Prints the binary's path.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
version=$(cat "$here/VERSION")
out=$root/bin/cosign/$version
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
if [ ! -x "$out/cosign" ]; then
  echo "building cosign $version..." >&2
  (cd "$out" && CGO_ENABLED=0 GOFLAGS=-mod=mod GOBIN="$out/.tmp" go install -trimpath -ldflags "-s -w" \
    "github.com/sigstore/cosign/v3/cmd/cosign@$version")
  mv "$out/.tmp/cosign" "$out/cosign"
  rmdir "$out/.tmp"
fi
echo "$out/cosign"
