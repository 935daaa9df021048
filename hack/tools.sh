#!/usr/bin/env bash
# Builds (or installs) every tool the tests use, as `make tools` runs it:
# in lanes run side by side ($TOOLS_JOBS, default 2), longest first, the
# tools that share most of their build in one lane one after the other
# (helm then kustomize; cosign, then the Sigstore servers); each tool's
# build time printed as it ends, and the whole at the end, so that the
# budget stays in sight. Built tools live in the machine's tool cache
# (hack/toolcache.sh): a tool built by any clone of this machine is
# reused, and printed as "cached".
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${TOOLS_JOBS:-2}
# Lanes, in the order they start: each a list of "name=command".
lanes=(
  "vault=hack/vault/build.sh"
  "kube=hack/kube/build.sh"
  "flux=hack/flux/build.sh"
  "cosign=hack/cosign/build.sh notation=hack/notation/build.sh fulcio=hack/fulcio/build.sh timestamp-server=hack/timestamp-server/build.sh trillian=hack/trillian/build.sh rekor=hack/rekor/build.sh mariadb=hack/mariadb/install.sh"
  "gitea=hack/gitea/build.sh"
  "promtool=hack/promtool/build.sh"
  "helm=hack/helm/build.sh kustomize=hack/kustomize/build.sh"
  "argocd-applicationset-controller=hack/argocd/build.sh argocd-manifests=hack/argocd/build.sh@argocd-manifests argocd=hack/argocd/build.sh@argocd redis=hack/redis/install.sh"
  "sluice-image=make@bin/image/sluice sops=hack/sops/build.sh local-kms=hack/local-kms/build.sh controller-gen=hack/controller-gen/build.sh cyclonedx-gomod=hack/cyclonedx-gomod/build.sh chromium=hack/chromium/install.sh"
)
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
start=$(date +%s)

lane() {
  local n=$1; shift
  for step in "$@"; do
    local name=${step%%=*} cmd=${step#*=} args=()
    if [[ $cmd == *@* ]]; then args=("${cmd#*@}"); cmd=${cmd%%@*}; fi
    local t0; t0=$(date +%s)
    if ! "$cmd" "${args[@]}" >/dev/null 2>"$logs/$name"; then
      echo "$name: failed after $(( $(date +%s) - t0 ))s" >&2
      cat "$logs/$name" >&2
      return 1
    fi
    local took=$(( $(date +%s) - t0 )) how=cached
    if grep -qE '^(building|installing)' "$logs/$name" || [ "$cmd" = make ]; then how=built; fi
    printf '%-34s %-7s %dm%02ds\n' "$name" "$how" $((took / 60)) $((took % 60))
  done
}

pids=()
for l in "${lanes[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || exit 1; done
  # shellcheck disable=SC2086
  lane ${#pids[@]} $l &
  pids+=($!)
done
fail=0
for p in "${pids[@]}"; do wait "$p" || fail=1; done
took=$(( $(date +%s) - start ))
printf '%-34s %-7s %dm%02ds\n' "all tools" "" $((took / 60)) $((took % 60))
exit $fail
