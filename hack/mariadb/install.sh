#!/usr/bin/env bash
# Makes sure Debian's MariaDB server is installed: Trillian (hack/trillian),
# under the tests' Rekor, keeps its tree in a database of its own that
# each test run starts. Installs it with apt-get when missing (as root, or
# through sudo); no service is started. Prints mariadbd's path.
set -euo pipefail
if ! command -v mariadbd >/dev/null 2>&1; then
  echo "installing Debian's mariadb-server (the transparency log's database in tests)..." >&2
  sudo=""
  if [ "$(id -u)" != 0 ]; then sudo=sudo; fi
  $sudo apt-get install -y -qq mariadb-server >/dev/null 2>&1 || {
    $sudo apt-get update -qq >/dev/null
    $sudo apt-get install -y -qq mariadb-server >/dev/null
  }
fi
command -v mariadbd
