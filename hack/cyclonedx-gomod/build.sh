#!/usr/bin/env bash
# Builds cyclonedx-gomod, which writes a release's SBOMs (CycloneDX, from
# the module information Go links into each binary), at the version of
# hack/cyclonedx-gomod/VERSION, into bin/. Prints the binary's path.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../goinstall.sh" cyclonedx-gomod "$(cat "$here/VERSION")" github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod
