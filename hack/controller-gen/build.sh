#!/usr/bin/env bash
# Builds controller-gen (sigs.k8s.io/controller-tools), which makes the
# CRDs in config/crd and the DeepCopy methods of api/v1alpha1 from the Go
# types, into bin/controller-gen/<version>/controller-gen (git-ignored),
# unless it is there. Prints the binary's path.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
version=$(cat "$here/VERSION")
out=$root/bin/controller-gen/$version
. "$here/../toolcache.sh"
cached_dir "$out"
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
if [ ! -x "$out/controller-gen" ]; then
  echo "building controller-gen $version..." >&2
  (cd "$out" && GOFLAGS=-mod=mod GOBIN="$out/.tmp" go install "sigs.k8s.io/controller-tools/cmd/controller-gen@$version")
  mv "$out/.tmp/controller-gen" "$out/controller-gen"
  rmdir "$out/.tmp"
fi
echo "$out/controller-gen"
