#!/usr/bin/env bash
# Builds Local KMS (github.com/nsmithuk/local-kms), a server of AWS KMS's
# API that encrypts for real with keys of its own, at the version of
# hack/local-kms/VERSION, from the Go module proxy with its own go.mod,
# into bin/local-kms/<version>/local-kms (git-ignored), unless it is
# there: the tests of SOPS files encrypted for an AWS KMS key use it.
# Prints the binary's path.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
version=$(cat "$here/VERSION")
out=$root/bin/local-kms/$version
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
if [ ! -x "$out/local-kms" ]; then
  echo "building local-kms $version..." >&2
  (cd "$out" && CGO_ENABLED=0 GOFLAGS=-mod=mod GOBIN="$out/.tmp" go install -trimpath -ldflags "-s -w" \
    "github.com/nsmithuk/local-kms@$version")
  mv "$out/.tmp/local-kms" "$out/local-kms"
  rmdir "$out/.tmp"
fi
echo "$out/local-kms"
