#!/usr/bin/env bash
# `make run`: the embedded default experiment (calibration + two DuTs at three rates) on a
# software testbed of network namespaces, stored in the results database every lowtail
# command reads by default (./lowtail.duckdb here, or $LOWTAIL_DB), with its HTML report.
# `lowtail run` prints the per-DuT verdict and the report's link; this adds what to type next.
set -euo pipefail
cd "$(dirname "$0")/.."
lt=.venv/bin/lowtail
if [ "$(id -u)" != 0 ]; then
  echo "make run builds a testbed of network namespaces and needs root: run it as root (e.g. sudo make run)" >&2
  exit 2
fi
echo "==> the default experiment: 9 runs (a plain wire, the kernel's forwarder, lowtail's) at 20, 50, 100 kpps,"
echo "    each long enough for its 99.999th percentile; 1-2 min"
mkdir -p reports
# Exit 3 means some runs are invalid (the table and the report say which and why): still a report.
status=0
$lt run --fresh --report reports/default-experiment.html || status=$?
if [ "$status" != 0 ] && [ "$status" != 3 ]; then exit "$status"; fi
# What to type next, as it works from here: `lowtail` when it is this build on PATH (make install).
if [ "$(command -v lowtail 2>/dev/null | xargs -r readlink -f)" = "$(readlink -f "$lt")" ]; then
  lt=lowtail
fi
echo
echo "next: $lt experiment list                 # what the database holds (this run included)"
echo "      $lt run --print-default > my.toml   # your own sweep: edit it, then: $lt run my.toml"
