#!/usr/bin/env bash
# Builds a part of Argo CD the tests run, NAME (default
# applicationset-controller, which the live-session tests run; or
# argocd-manifests, Argo CD's own manifest generation, which the tests
# compare Sluice's rendering as an Application to; or argocd, its
# application controller and repo-server in one binary, which sync the
# Applications of the live-session tests): from the Go module
# proxy through the wrapper module hack/argocd/NAME (a main of its own over
# argo-cd's packages, argo-cd's go.mod replace lines copied), into
# bin/argocd/NAME-<version>/ (git-ignored), unless it is there. Prints the
# binary's path. About 5 minutes the first time, on 2 cores.
# With --check it builds nothing, and fails when the binary is missing.
set -euo pipefail
check=false
if [ "${1:-}" = --check ]; then check=true; shift; fi
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
name=${1:-applicationset-controller}
version=$(awk '$1=="require" && $2=="github.com/argoproj/argo-cd/v3" {print $3} $1=="github.com/argoproj/argo-cd/v3" {print $2}' "$here/$name/go.mod" | head -1)
# The wrapper's own main is part of what is built: a change to it builds
# anew.
src=$(cat "$here/$name"/*.go | sha256sum | cut -c1-8)
dir=$root/bin/argocd/$name-$version-$src
. "$here/../toolcache.sh"
$check || cached_dir "$dir" "$here/$name/go.mod" "$here/$name/go.sum"
if $check; then
  if [ ! -x "$dir/$name" ]; then
    echo "Argo CD's $name $version is not built in $dir: run \`make tools\` (hack/argocd/build.sh); \`make test\` does" >&2
    exit 3
  fi
  echo "$dir/$name"
  exit 0
fi
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
if [ ! -x "$dir/$name" ]; then
  echo "building Argo CD's $name $version..." >&2
  (cd "$here/$name" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$dir/$name.tmp" .)
  mv "$dir/$name.tmp" "$dir/$name"
fi
echo "$dir/$name"
