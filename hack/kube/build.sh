#!/usr/bin/env bash
# Builds the test control plane's binaries from the Go module proxy, unless
# they are already there: kube-apiserver and kube-controller-manager from
# k8s.io/kubernetes and etcd from go.etcd.io/etcd/server/v3, into
# bin/kube/<versions>/ (git-ignored). Prints the directory. A cold build
# takes about 13 minutes on 2 cores.
# With --check it builds nothing, and fails when a binary is missing.
set -euo pipefail
check=false
if [ "${1:-}" = --check ]; then check=true; shift; fi
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
k8s=$(awk '$1=="require" && $2=="k8s.io/kubernetes" {print $3}' "$here/apiserver/go.mod")
etcd=$(awk '$1=="require" && $2=="go.etcd.io/etcd/server/v3" {print $3}' "$here/etcd/go.mod")
out=${1:-$root/bin/kube/k8s-$k8s-etcd-$etcd}
. "$here/../toolcache.sh"
$check || cached_dir "$out" "$here/apiserver/go.mod" "$here/apiserver/go.sum" "$here/etcd/go.mod" "$here/etcd/go.sum"
minor=${k8s#v1.}; minor=${minor%%.*}
if $check; then
  for b in kube-apiserver kube-controller-manager etcd; do
    if [ ! -x "$out/$b" ]; then
      echo "$b is not built in $out: run \`make tools\` (hack/kube/build.sh, about 10 minutes the first time); \`make test\` does" >&2
      exit 3
    fi
  done
  echo "$out"
  exit 0
fi
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
if [ ! -x "$out/kube-apiserver" ]; then
  echo "building kube-apiserver $k8s (about 9 minutes the first time)..." >&2
  (cd "$here/apiserver" && go build -trimpath \
    -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$k8s -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor" \
    -o "$out/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver)
  mv "$out/kube-apiserver.tmp" "$out/kube-apiserver"
fi
if [ ! -x "$out/kube-controller-manager" ]; then
  echo "building kube-controller-manager $k8s..." >&2
  (cd "$here/apiserver" && go build -trimpath \
    -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$k8s -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor" \
    -o "$out/kube-controller-manager.tmp" k8s.io/kubernetes/cmd/kube-controller-manager)
  mv "$out/kube-controller-manager.tmp" "$out/kube-controller-manager"
fi
if [ ! -x "$out/etcd" ]; then
  echo "building etcd $etcd..." >&2
  (cd "$here/etcd" && go build -trimpath -ldflags "-s -w" -o "$out/etcd.tmp" .)
  mv "$out/etcd.tmp" "$out/etcd"
fi
echo "$out"
