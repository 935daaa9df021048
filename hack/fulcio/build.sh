#!/usr/bin/env bash
# Builds Fulcio, Sigstore's certificate authority, at the version of
# hack/fulcio/VERSION, into bin/: the tests of keyless signing run it on
# loopback with an ephemeral CA, trusting the test API server as an OIDC
# issuer (a service account's token of audience sigstore), as a private
# Sigstore deployment trusts a cluster's. Prints the binary's path.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../goinstall.sh" fulcio "$(cat "$here/VERSION")" github.com/sigstore/fulcio
