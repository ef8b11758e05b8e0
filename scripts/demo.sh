#!/usr/bin/env bash
# `make run`: analyse a generated capture pair and write the HTML report.
set -euo pipefail
cd "$(dirname "$0")/.."
out=run-output
mkdir -p "$out"
lt=.venv/bin/lowtail
# A forwarder-like device: 3.3 µs base latency, 250 Hz interrupts of 5.5/8.2 µs
# (the seeds' aliasing pattern), rare 40 µs spikes and a little loss, at 100 kpps for 12 s.
$lt synth "$out/pre.pcap.zst" "$out/post.pcap.zst" --packets 1200000 --rate 100000 --compression zstd \
    --set irq_period_ns=4000000 --set 'irq_durations_ns=[5500,8200]' \
    --set spike_probability=0.00002 --set spike_ns=40000 --set loss=0.00001
$lt analyze "$out/pre.pcap.zst" "$out/post.pcap.zst" --db "$out/lowtail.duckdb" --label demo \
    --export "$out/series.parquet" --report "$out/report.html"
echo "report: $out/report.html"
