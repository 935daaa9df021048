#!/usr/bin/env bash
# Builds the kustomize CLI the render benchmark measures Sluice against:
# the release matching sigs.k8s.io/kustomize/api in go.mod (api v0.21.2 is
# kustomize v5.8.2), from the Go module proxy with its own go.mod, into
# bin/kustomize/<version>/kustomize (git-ignored), unless it is there.
# Prints the binary's path.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
api=$(awk '$1=="sigs.k8s.io/kustomize/api" {print $2}' "$root/go.mod")
case "$api" in
  v0.21.2) version=v5.8.2 ;;
  *) echo "hack/kustomize/build.sh: which kustomize CLI release matches sigs.k8s.io/kustomize/api $api? Add it here." >&2; exit 1 ;;
esac
out=$root/bin/kustomize/$version
. "$here/../toolcache.sh"
cached_dir "$out"
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
if [ ! -x "$out/kustomize" ]; then
  echo "building kustomize $version..." >&2
  (cd "$out" && CGO_ENABLED=0 GOFLAGS=-mod=mod GOBIN="$out/.tmp" go install -trimpath -ldflags "-s -w" \
    "sigs.k8s.io/kustomize/kustomize/v5@$version")
  mv "$out/.tmp/kustomize" "$out/kustomize"
  rmdir "$out/.tmp"
fi
echo "$out/kustomize"
