#!/usr/bin/env bash
# Builds Sigstore's transparency log server (rekor-server) at the version
# of hack/rekor/VERSION, into bin/: the tests of keyless signing log each
# signature in it, on loopback, over Trillian (hack/trillian) and
# Debian's MariaDB (hack/mariadb). Prints the binary's path.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../goinstall.sh" rekor "$(cat "$here/VERSION")" github.com/sigstore/rekor/cmd/rekor-server rekor-server
