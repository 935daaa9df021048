#!/usr/bin/env bash
# Makes sure Debian's Redis server is installed: Argo CD's application
# controller and repo-server (hack/argocd), which live-session tests run,
# keep their cache in it, one server each test starts. Installs it with
# apt-get when missing (as root, or through sudo); no service is started.
# Prints redis-server's path.
set -euo pipefail
if ! command -v redis-server >/dev/null 2>&1; then
  echo "installing Debian's redis-server (Argo CD's cache in tests)..." >&2
  sudo=""
  if [ "$(id -u)" != 0 ]; then sudo=sudo; fi
  $sudo apt-get install -y -qq redis-server >/dev/null 2>&1 || {
    $sudo apt-get update -qq >/dev/null
    $sudo apt-get install -y -qq redis-server >/dev/null
  }
fi
command -v redis-server
