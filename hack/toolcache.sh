# Sourced by the tools' build scripts: tools are built once per machine,
# into a cache outside the clone, and each clone's bin/ links to them (as
# setup-envtest keeps its binaries): every later clone, worktree and CI
# run of the machine reuses what an earlier one built.
#
#   cached_dir BIN_DIR [FILE...]
#
# makes BIN_DIR (a directory under the clone's bin/) a symbolic link to
# $SLUICE_TOOLS_CACHE/<its path under bin>-<recipe>, the recipe being a
# digest of the calling script, the FILEs (a wrapper module's go.mod and
# go.sum, a VERSION file), $TOOL_RECIPE (build tags) and the Go
# toolchain: another version, another
# recipe or another Go is another directory. A BIN_DIR left as a real
# directory by an older layout is moved into the cache. The default cache
# is ~/.cache/sluice/tools ($XDG_CACHE_HOME/sluice/tools, or
# $SLUICE_TOOLS_CACHE), recorded in bin/.tools-cache at the first link.
cached_dir() {
  local bin_dir=$1; shift
  local root; root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  local rel=${bin_dir#"$root/bin/"}
  if [ "$rel" = "$bin_dir" ]; then
    return 0 # not under this clone's bin/: built where it was asked
  fi
  # The cache this clone's bin/ links into is recorded at its first link
  # (bin/.tools-cache): a test or guide run with a HOME of its own finds
  # the machine's tools, not a cache of its own to build.
  local cache
  if [ -s "$root/bin/.tools-cache" ] && [ -z "${SLUICE_TOOLS_CACHE:-}" ]; then
    cache=$(cat "$root/bin/.tools-cache")
  else
    cache=${SLUICE_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice/tools}
    mkdir -p "$root/bin" "$cache"
    echo "$cache" > "$root/bin/.tools-cache.tmp$$"
    mv -f "$root/bin/.tools-cache.tmp$$" "$root/bin/.tools-cache"
  fi
  local recipe
  recipe=$({ echo "$rel ${TOOL_RECIPE:-}"; go env GOVERSION GOOS GOARCH; cat "$0" "$@" 2>/dev/null; } | sha256sum | cut -c1-12)
  local dir=$cache/$rel-$recipe
  mkdir -p "$(dirname "$dir")" "$(dirname "$bin_dir")"
  if [ -d "$bin_dir" ] && [ ! -L "$bin_dir" ]; then
    if [ ! -e "$dir" ]; then
      mv "$bin_dir" "$dir"
    else
      rm -rf "$bin_dir"
    fi
  fi
  mkdir -p "$dir"
  if [ "$(readlink "$bin_dir" 2>/dev/null)" != "$dir" ]; then
    ln -sfn "$dir" "$bin_dir.tmp$$"
    mv -Tf "$bin_dir.tmp$$" "$bin_dir"
  fi
}
