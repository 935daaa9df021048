#!/usr/bin/env bash
# Builds Gitea (a real forge, for the webhook tests) from the Go module
# proxy into bin/gitea/<version>/gitea (git-ignored), unless it is there.
# Its source is kept beside it: without the bindata tag Gitea reads its
# locales and templates from there (STATIC_ROOT_PATH). The module
# declares its path as gitea.dev, so it is built in a copy of its own
# tree rather than required by a wrapper module. Prints the binary's path.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
version=$(cat "$here/VERSION")
out=$root/bin/gitea/$version
. "$here/../toolcache.sh"
cached_dir "$out"
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
if [ ! -x "$out/gitea" ]; then
  echo "building gitea $version (about 5 minutes)..." >&2
  dir=$(cd "$out" && go mod download -json "code.gitea.io/gitea@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  rm -rf "$out/src"
  cp -r "$dir" "$out/src"
  chmod -R u+w "$out/src"
  (cd "$out/src" && GOFLAGS=-mod=mod CGO_ENABLED=1 go build -trimpath -tags 'sqlite sqlite_unlock_notify' -o "$out/gitea.tmp" .)
  mv "$out/gitea.tmp" "$out/gitea"
fi
echo "$out/gitea"
