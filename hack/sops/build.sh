#!/usr/bin/env bash
# Builds the sops CLI that tests encrypt with: the release of
# github.com/getsops/sops/v3 in go.mod (the library Sluice decrypts with),
# from the Go module proxy with its own go.mod, into
# bin/sops/<version>/sops (git-ignored), unless it is there. Prints the
# binary's path.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
version=$(awk '$1=="github.com/getsops/sops/v3" {print $2}' "$root/go.mod")
out=$root/bin/sops/$version
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
if [ ! -x "$out/sops" ]; then
  echo "building sops $version..." >&2
  (cd "$out" && CGO_ENABLED=0 GOFLAGS=-mod=mod GOBIN="$out/.tmp" go install -trimpath -ldflags "-s -w" \
    "github.com/getsops/sops/v3/cmd/sops@$version")
  mv "$out/.tmp/sops" "$out/sops"
  rmdir "$out/.tmp"
fi
echo "$out/sops"
