#!/usr/bin/env python3
"""What the /proc/interrupts sampler costs, to choose its default interval
(lowtail.host.interrupts.DEFAULT_INTERVAL_S).

1. One read + parse of /proc/interrupts: the CPU time it costs the core doing it, and its
   wall time (longer when that core is shared).
2. The probed core with no sampler, and with the sampler at several intervals on the
   housekeeping core — and, for contrast, on the probed core itself: gaps per second, lost
   time, p99 and max; and whether gaps on the probed core line up with the reads (the
   share of reads that overlap a gap there, against the share expected by chance).
   Configurations are interleaved over repetitions so drifting background load hits all.

    .venv/bin/python scripts/sampler-cost.py [--probe-cpu 1] [--housekeeping 0] [--seconds 3] [--repeat 3] [--fifo 50]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from lowtail.core.binaries import find_binary
from lowtail.host.interrupts import InterruptSampler, parse_interrupts


def read_cost(cpu: int, n: int = 2000) -> dict:
    os.sched_setaffinity(0, {cpu})
    path = Path("/proc/interrupts")
    cpu_ns, wall_ns = [], []
    for _ in range(n):
        c0, w0 = time.thread_time_ns(), time.perf_counter_ns()
        parse_interrupts(path.read_text())
        wall_ns.append(time.perf_counter_ns() - w0)
        cpu_ns.append(time.thread_time_ns() - c0)
    cpu_ns.sort()
    wall_ns.sort()
    return {
        "reads": n,
        "bytes": len(path.read_text()),
        "cpu_median_ns": cpu_ns[n // 2],
        "cpu_p99_ns": cpu_ns[int(n * 0.99)],
        "wall_median_ns": wall_ns[n // 2],
        "wall_p99_ns": wall_ns[int(n * 0.99)],
    }


def probe(cpu: int, seconds: float, interval: float | None, sampler_cpu: int, fifo: int | None) -> dict:
    with tempfile.TemporaryDirectory(prefix="lowtail-sampler-cost-") as tmp:
        sampler = InterruptSampler(interval, sampler_cpu).start() if interval else None
        cmd = [
            str(find_binary("lowtail-noise")),
            "--cpu",
            str(cpu),
            "--duration",
            f"{int(seconds * 1e9)}ns",
            "--gaps-dir",
            tmp,
        ] + (["--rt-priority", str(fifo)] if fifo else [])
        out = subprocess.run(cmd, capture_output=True, text=True, check=True)
        if sampler:
            sampler.stop()
        core = json.loads(out.stdout)["cores"][0]
        raw = np.fromfile(Path(tmp) / f"cpu{cpu}.gaps", dtype=np.dtype([("t", "<i8"), ("len", "<i8")]))
    r = {
        "rate_hz": core["rate_hz"],
        "noise_ns_per_s": core["noise_ns_per_s"],
        "p99_ns": core["p99_ns"] or 0,
        "max_ns": core["max_ns"],
        "reads": 0,
        "overlap": 0.0,
        "chance": 0.0,
    }
    if sampler:
        start, end = core["start_ns"], core["start_ns"] + core["duration_ns"]
        reads = [(t, w) for t, w in zip(sampler.sample_times_ns, sampler.read_wall_ns) if start <= t and t + w <= end]
        starts, ends = raw["t"], raw["t"] + raw["len"]
        order = np.argsort(starts)
        starts, latest_end = starts[order], np.maximum.accumulate(ends[order]) if len(ends) else ends
        hit = 0
        for t, w in reads:  # a read [t, t+w] overlaps a gap [s, e] when s < t+w and e > t
            i = np.searchsorted(starts, t + w)
            hit += bool(i and latest_end[i - 1] > t)
        mean_wall = statistics.mean(w for _, w in reads) if reads else 0
        lost_share = core["noise_ns_per_s"] / 1e9
        r.update(
            reads=len(reads),
            overlap=hit / len(reads) if reads else 0.0,
            chance=min(1.0, lost_share + core["rate_hz"] * mean_wall / 1e9),
        )
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--probe-cpu", type=int, default=1)
    ap.add_argument("--housekeeping", type=int, default=0)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--fifo",
        type=int,
        help="run the probe under SCHED_FIFO at this priority: other tasks no "
        "longer preempt it, so what remains is interrupts (and RT throttling, 50 ms a second)",
    )
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    cost = read_cost(a.housekeeping)
    os.sched_setaffinity(0, {a.housekeeping})
    configs = (
        [("none", None, a.housekeeping)]
        + [(f"every {iv * 1e3:g} ms on CPU {a.housekeeping}", iv, a.housekeeping) for iv in (1.0, 0.1, 0.01, 0.001)]
        + [(f"every {iv * 1e3:g} ms on CPU {a.probe_cpu} (probed)", iv, a.probe_cpu) for iv in (0.1, 0.01)]
    )
    results: dict[str, list[dict]] = {name: [] for name, _, _ in configs}
    for _ in range(a.repeat):
        for name, interval, cpu in configs:
            results[name].append(probe(a.probe_cpu, a.seconds, interval, cpu, a.fifo))
    summary = {name: {k: statistics.median(x[k] for x in runs) for k in runs[0]} for name, runs in results.items()}
    if a.json:
        print(json.dumps({"read_cost": cost, "noise": summary, "runs": results}))
        return
    print(
        f"/proc/interrupts, {cost['bytes']} bytes, read + parse on CPU {a.housekeeping}: "
        f"{cost['cpu_median_ns'] / 1e3:.1f} µs CPU median ({cost['cpu_p99_ns'] / 1e3:.1f} µs p99), "
        f"{cost['wall_median_ns'] / 1e3:.1f} µs wall median ({cost['wall_p99_ns'] / 1e3:.1f} µs p99)"
    )
    print(f"CPU {a.probe_cpu}, {a.seconds:g} s per probe, median of {a.repeat} interleaved repetitions:")
    print(
        f"  {'sampler':<32} {'gaps/s':>8} {'lost ms/s':>10} {'p99 µs':>9} {'max µs':>9} {'reads on a gap':>15} {'by chance':>10}"
    )
    for name, s in summary.items():
        ov = f"{100 * s['overlap']:.0f} %" if s["reads"] else "–"
        ch = f"{100 * s['chance']:.0f} %" if s["reads"] else "–"
        print(
            f"  {name:<32} {s['rate_hz']:>8.1f} {s['noise_ns_per_s'] / 1e6:>10.1f} {s['p99_ns'] / 1e3:>9.1f} "
            f"{s['max_ns'] / 1e3:>9.1f} {ov:>15} {ch:>10}"
        )


if __name__ == "__main__":
    main()
