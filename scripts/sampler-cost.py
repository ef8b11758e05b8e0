#!/usr/bin/env python3
"""What the /proc/interrupts sampler costs, to choose its default interval
(lowtail.host.interrupts.DEFAULT_INTERVAL_S).

1. The cost of one read (open + read) and of one read + parse, on the housekeeping core.
2. The noise the probed core sees with no sampler, and with the sampler on the
   housekeeping core at several intervals — and, for contrast, on the probed core itself.
   Configurations are interleaved over repetitions so drifting background load hits all.

    .venv/bin/python scripts/sampler-cost.py [--probe-cpu 1] [--housekeeping 0] [--seconds 3] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from lowtail.host.interrupts import parse_interrupts
from lowtail.host.noise import NoiseOptions, run_noise


def read_cost(cpu: int, n: int = 2000) -> dict:
    os.sched_setaffinity(0, {cpu})
    path = Path("/proc/interrupts")
    raw, parsed = [], []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        text = path.read_text()
        t1 = time.perf_counter_ns()
        parse_interrupts(text)
        t2 = time.perf_counter_ns()
        raw.append(t1 - t0)
        parsed.append(t2 - t0)
    raw.sort()
    parsed.sort()
    return {"reads": n, "bytes": len(text),
            "read_median_ns": raw[n // 2], "read_p99_ns": raw[int(n * 0.99)],
            "read_parse_median_ns": parsed[n // 2], "read_parse_p99_ns": parsed[int(n * 0.99)]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--probe-cpu", type=int, default=1)
    ap.add_argument("--housekeeping", type=int, default=0)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    cost = read_cost(a.housekeeping)
    os.sched_setaffinity(0, {a.housekeeping})
    configs = [("none", None, a.housekeeping)] + [
        (f"every {iv * 1e3:g} ms on CPU {a.housekeeping}", iv, a.housekeeping) for iv in (1.0, 0.1, 0.01, 0.001)
    ] + [(f"every 10 ms on CPU {a.probe_cpu} (the probed core)", 0.01, a.probe_cpu)]
    results: dict[str, list[dict]] = {name: [] for name, _, _ in configs}
    for _ in range(a.repeat):
        for name, interval, hk in configs:
            r = run_noise(NoiseOptions(cpus=[a.probe_cpu], duration_ns=int(a.seconds * 1e9),
                                       sample_interval_ns=int(interval * 1e9) if interval else None,
                                       housekeeping_cpu=hk))
            c = r["cores"][0]
            results[name].append({"rate_hz": c["rate_hz"], "noise_ns_per_s": c["noise_ns_per_s"],
                                  "p99_ns": c["p99_ns"], "max_ns": c["max_ns"],
                                  "reads": (r["sampler"] or {}).get("reads", 0)})
    summary = {name: {k: statistics.median(x[k] or 0 for x in runs) for k in runs[0]} for name, runs in results.items()}
    if a.json:
        print(json.dumps({"read_cost": cost, "noise": summary, "runs": results}))
        return
    print(f"/proc/interrupts ({cost['bytes']} bytes) on CPU {a.housekeeping}: read {cost['read_median_ns'] / 1e3:.1f} µs "
          f"median ({cost['read_p99_ns'] / 1e3:.1f} µs p99); read + parse {cost['read_parse_median_ns'] / 1e3:.1f} µs "
          f"median ({cost['read_parse_p99_ns'] / 1e3:.1f} µs p99)")
    print(f"noise on CPU {a.probe_cpu}, {a.seconds:g} s per probe, median of {a.repeat} (interleaved):")
    print(f"  {'sampler':<42} {'gaps/s':>10} {'lost µs/s':>10} {'p99 µs':>9} {'max µs':>10}")
    for name, s in summary.items():
        print(f"  {name:<42} {s['rate_hz']:>10.1f} {s['noise_ns_per_s'] / 1e3:>10.1f} {s['p99_ns'] / 1e3:>9.1f} "
              f"{s['max_ns'] / 1e3:>10.1f}")


if __name__ == "__main__":
    main()
