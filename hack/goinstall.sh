#!/usr/bin/env bash
# go-installs one tool from the Go module proxy, with its own go.mod, into
# bin/<name>/<version>/<binary> (git-ignored; a link into the machine's
# tool cache, hack/toolcache.sh), unless it is there, and prints the
# binary's path: the body of the tools' build.sh scripts that need nothing
# more. $GOINSTALL_TAGS are build tags (part of the cached recipe).
#   hack/goinstall.sh NAME VERSION PACKAGE [BINARY]
set -euo pipefail
name=$1 version=$2 pkg=$3 binary=${4:-$1}
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/bin/$name/$version
. "$root/hack/toolcache.sh"
TOOL_RECIPE="tags ${GOINSTALL_TAGS:-}" cached_dir "$out"
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
if [ ! -x "$out/$binary" ]; then
  echo "building $name $version..." >&2
  (cd "$out" && CGO_ENABLED=0 GOFLAGS=-mod=mod GOBIN="$out/.tmp" go install -trimpath -tags "${GOINSTALL_TAGS:-}" -ldflags "-s -w" "$pkg@$version")
  mv "$out/.tmp/$binary" "$out/$binary"
  rmdir "$out/.tmp"
fi
echo "$out/$binary"
