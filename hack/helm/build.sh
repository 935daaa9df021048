#!/usr/bin/env bash
# Builds the reference helm binary the render tests compare Sluice with:
# the helm release whose SDK Sluice uses (helm.sh/helm/v4 in go.mod), from
# the Go module proxy with its own go.mod, and with the ldflags helm's
# Makefile gives a release build of a tag. Into bin/helm/<version>/helm
# (git-ignored), unless it is there. Prints the binary's path.
#
# The module proxy carries no git metadata, so the commit a release binary
# names in `helm version` (and .Capabilities.HelmVersion.GitCommit) is
# empty here unless HELM_GIT_COMMIT gives it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
version=$(awk '$1=="helm.sh/helm/v4" {print $2}' "$root/go.mod")
out=$root/bin/helm/$version
. "$here/../toolcache.sh"
cached_dir "$out"
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
if [ ! -x "$out/helm" ]; then
  echo "building helm $version..." >&2
  pkg=helm.sh/helm/v4/internal/version
  (cd "$out" && CGO_ENABLED=0 GOFLAGS=-mod=mod GOBIN="$out/.tmp" go install -trimpath \
    -ldflags "-w -s -X $pkg.version=$version -X $pkg.metadata= -X $pkg.gitCommit=${HELM_GIT_COMMIT:-} -X $pkg.gitTreeState=clean" \
    "helm.sh/helm/v4/cmd/helm@$version")
  mv "$out/.tmp/helm" "$out/helm"
  rmdir "$out/.tmp"
fi
echo "$out/helm"
