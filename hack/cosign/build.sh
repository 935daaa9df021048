#!/usr/bin/env bash
# Builds the cosign CLI that tests sign images with, at the version of
# hack/cosign/VERSION, into bin/cosign/<version>/cosign (about 4 minutes
# on 2 cores). Prints the binary's path.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../goinstall.sh" cosign "$(cat "$here/VERSION")" github.com/sigstore/cosign/v3/cmd/cosign
