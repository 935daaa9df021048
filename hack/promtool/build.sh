#!/usr/bin/env bash
# Builds promtool, Prometheus's own checker of rule files (promtool check
# rules), at the version of hack/promtool/VERSION, into bin/: the tests
# check the chart's PrometheusRule and docs/monitoring's rules with it.
# Prints the binary's path.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../goinstall.sh" promtool "$(cat "$here/VERSION")" github.com/prometheus/prometheus/cmd/promtool
