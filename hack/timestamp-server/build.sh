#!/usr/bin/env bash
# Builds Sigstore's RFC 3161 timestamp authority (timestamp-server) at the
# version of hack/timestamp-server/VERSION, into bin/: the tests of
# keyless signing timestamp each signature with it, on loopback, its
# signing key in memory. Prints the binary's path.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../goinstall.sh" timestamp-server "$(cat "$here/VERSION")" github.com/sigstore/timestamp-authority/v2/cmd/timestamp-server timestamp-server
