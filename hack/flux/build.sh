#!/usr/bin/env bash
# Builds the real Flux controllers the live-session tests hand clusters back
# to: kustomize-controller, source-controller and helm-controller, each from
# the Go module proxy through its own wrapper module here (the controller's
# go.mod replace lines copied, its api module required at the same
# version), into bin/flux/<name>-<version>/ (git-ignored), unless they are
# there. Prints the directory holding the three binaries' folders.
# About 3 minutes a controller the first time, on 2 cores.
# With --check it builds nothing, and fails when a binary is missing.
set -euo pipefail
check=false
if [ "${1:-}" = --check ]; then check=true; shift; fi
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=$root/bin/flux
. "$here/../toolcache.sh"
mkdir -p "$out"
for name in source-controller kustomize-controller helm-controller; do
  version=$(awk -v m="github.com/fluxcd/$name" '$1==m {print $2}' "$here/$name/go.mod")
  dir=$out/$name-$version
  $check || cached_dir "$dir" "$here/$name/go.mod" "$here/$name/go.sum"
  if $check; then
    if [ ! -x "$dir/$name" ]; then
      echo "$name $version is not built in $dir: run \`make tools\` (hack/flux/build.sh); \`make test\` does" >&2
      exit 3
    fi
    continue
  fi
  mkdir -p "$dir"
  exec 9>"$dir/.lock"
  flock 9
  if [ ! -x "$dir/$name" ]; then
    echo "building $name $version..." >&2
    (cd "$here/$name" && CGO_ENABLED=0 go build -mod=mod -trimpath -ldflags "-s -w" \
      -o "$dir/$name.tmp" "github.com/fluxcd/$name")
    mv "$dir/$name.tmp" "$dir/$name"
  fi
  exec 9>&-
done
echo "$out"
