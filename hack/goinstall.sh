#!/usr/bin/env bash
# go-installs one tool from the Go module proxy, with its own go.mod, into
# bin/<name>/<version>/<binary> (git-ignored), unless it is there, and
# prints the binary's path: the body of the tools' build.sh scripts that
# need nothing more.
#   hack/goinstall.sh NAME VERSION PACKAGE [BINARY]
set -euo pipefail
name=$1 version=$2 pkg=$3 binary=${4:-$1}
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/bin/$name/$version
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
if [ ! -x "$out/$binary" ]; then
  echo "building $name $version..." >&2
  (cd "$out" && CGO_ENABLED=0 GOFLAGS=-mod=mod GOBIN="$out/.tmp" go install -trimpath -ldflags "-s -w" "$pkg@$version")
  mv "$out/.tmp/$binary" "$out/$binary"
  rmdir "$out/.tmp"
fi
echo "$out/$binary"
