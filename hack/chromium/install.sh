#!/usr/bin/env bash
# Makes sure Debian's chromium is installed: the dashboard's tests drive a
# real headless Chromium. Installs it with apt-get when missing (as root,
# or through sudo). Prints its path.
set -euo pipefail
if ! command -v chromium >/dev/null 2>&1; then
  echo "installing Debian's chromium (the dashboard's browser tests)..." >&2
  sudo=""
  if [ "$(id -u)" != 0 ]; then sudo=sudo; fi
  $sudo apt-get install -y -qq chromium >/dev/null 2>&1 || {
    $sudo apt-get update -qq >/dev/null
    $sudo apt-get install -y -qq chromium >/dev/null
  }
fi
command -v chromium
