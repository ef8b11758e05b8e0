#!/usr/bin/env bash
# `make run`: the embedded default experiment (calibration + two DuTs at a few rates) on a
# software testbed of network namespaces, stored in run-output/, with its HTML report.
set -euo pipefail
cd "$(dirname "$0")/.."
out=run-output
mkdir -p "$out"
lt=.venv/bin/lowtail
if [ "$(id -u)" != 0 ]; then
  echo "make run builds a testbed of network namespaces and needs root: run it as root (e.g. sudo make run)" >&2
  exit 2
fi
# Exit 3 means some runs are invalid (the table and the report say which and why): still a report.
status=0
$lt run --db "$out/lowtail.duckdb" --data-dir "$out/data" --report "$out/report.html" --fresh || status=$?
if [ "$status" != 0 ] && [ "$status" != 3 ]; then exit "$status"; fi
echo "report: $out/report.html"
