#!/usr/bin/env bash
# Builds the Notation CLI that tests sign images with, at the version of
# hack/notation/VERSION, into bin/notation/<version>/notation (seconds).
# Prints the binary's path. Built in the module's own directory after `go
# mod download` (with its go.mod and go.sum): the module proxy here
# refuses the version list that `go install module@version` reads for
# deprecations.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
version=$(cat "$here/VERSION")
out=$(cd "$here/../.." && pwd)/bin/notation/$version
. "$here/../toolcache.sh"
cached_dir "$out"
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
if [ ! -x "$out/notation" ]; then
  echo "building notation $version..." >&2
  dir=$(go mod download -json "github.com/notaryproject/notation@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  (cd "$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/.notation" ./cmd/notation)
  mv "$out/.notation" "$out/notation"
fi
cd "$out" && echo "$(pwd)/notation"
