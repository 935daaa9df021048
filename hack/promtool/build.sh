#!/usr/bin/env bash
# Builds promtool, Prometheus's own checker of rule files (promtool check
# rules), at the version of hack/promtool/VERSION, into bin/: the tests
# check the chart's PrometheusRule and docs/monitoring's rules with it.
# Prints the binary's path.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# Without Prometheus's service discovery (its remove_all_sd tag): rule
# files need none, and it is most of promtool's build.
GOINSTALL_TAGS=remove_all_sd exec "$here/../goinstall.sh" promtool "$(cat "$here/VERSION")" github.com/prometheus/prometheus/cmd/promtool
