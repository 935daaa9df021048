#!/usr/bin/env bash
# Builds Local KMS (github.com/nsmithuk/local-kms), a server of AWS KMS's
# API that encrypts for real with keys of its own, at the version of
# hack/local-kms/VERSION, into bin/local-kms/<version>/local-kms: the
# tests of SOPS files encrypted for an AWS KMS key use it. Prints the
# binary's path.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../goinstall.sh" local-kms "$(cat "$here/VERSION")" github.com/nsmithuk/local-kms
