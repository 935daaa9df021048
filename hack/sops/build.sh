#!/usr/bin/env bash
# Builds the sops CLI that tests encrypt with: the release of
# github.com/getsops/sops/v3 in go.mod (the library Sluice decrypts with),
# into bin/sops/<version>/sops. Prints the binary's path.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
version=$(awk '$1=="github.com/getsops/sops/v3" {print $2}' "$here/../../go.mod")
exec "$here/../goinstall.sh" sops "$version" github.com/getsops/sops/v3/cmd/sops
