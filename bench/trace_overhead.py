"""What recording a run's kernel trace costs the tail (issue 23): a quiet run's p99.9 and
p99.99 with the trace and without, side by side, in pairs run one after the other with the
order alternating (so a host that gets busier during the benchmark weighs on both alike),
and the trace's bytes per second (the kernel's ring-buffer pages read after the run).

Usage (as root): python bench/trace_overhead.py [--pairs 5] [--duration 5s] [--rate 20000] [--json]"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from lowtail.core.units import format_ns, parse_duration_ns
from lowtail.store import open_store
from lowtail.store.explain import run_trace

EXPERIMENT = """
[experiment]
name = "trace-overhead-{mode}-{n}"
duration = "{duration}"
warmup = "300ms"
calibrate = false
trace = {trace}
[traffic]
rates = ["{rate}pps"]
[[dut]]
name = "fwd"
kind = "lowtail-fwd"
work_ns = 0
"""


def one_run(work: Path, db: Path, n: int, trace: bool, duration: str, rate: int) -> dict[str, Any]:
    """One stored run, with or without the trace; its p99.9, p99.99 and trace bytes."""
    import lowtail

    mode = "traced" if trace else "plain"
    spec = work / f"{mode}-{n}.toml"
    spec.write_text(EXPERIMENT.format(mode=mode, n=n, duration=duration, trace=str(trace).lower(), rate=rate))
    done = subprocess.run([sys.executable, "-m", "lowtail", "run", str(spec), "--db", str(db)], capture_output=True)
    if done.returncode not in (0, 3):
        raise SystemExit(f"lowtail run failed ({done.returncode}): {done.stderr.decode()[-400:]}")
    row = lowtail.open(db).runs("latest").iloc[-1]
    run_id = int(row["run_id"])
    with open_store(db, read_only=True) as store:
        doc = run_trace(store, run_id) or {}
    raw = (doc.get("info") or {}).get("raw_bytes")
    return {
        "run_id": run_id,
        "traced": trace,
        "method": doc.get("method", "none"),
        "p99_9_ns": int(row["p99_9_ns"]),
        "p99_99_ns": int(row["p99_99_ns"]),
        "trace_bytes_per_s": None if raw is None else raw / (parse_duration_ns(duration) / 1e9),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--duration", default="5s")
    ap.add_argument("--rate", type=int, default=20_000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    runs = []
    with tempfile.TemporaryDirectory(prefix="lowtail-trace-bench-") as tmp:
        work, db = Path(tmp), Path(tmp) / "bench.duckdb"
        for n in range(args.pairs):
            for trace in (n % 2 == 0, n % 2 == 1):  # alternating which goes first
                runs.append(one_run(work, db, n, trace, args.duration, args.rate))
    if args.json:
        print(json.dumps(runs, indent=1))
        return
    traced = [r for r in runs if r["traced"]]
    plain = [r for r in runs if not r["traced"]]
    print(f"{args.pairs} pairs, {args.duration} each at {args.rate} pps (lowtail-fwd, work_ns = 0), interleaved")
    print(f"{'pair':>4}  {'p99.9 plain':>12}  {'p99.9 traced':>12}  {'p99.99 plain':>12}  {'p99.99 traced':>13}  trace")
    for n, (a, b) in enumerate(zip(plain, traced)):
        rate = "–" if b["trace_bytes_per_s"] is None else f"{b['trace_bytes_per_s'] / 1e3:,.0f} kB/s"
        print(
            f"{n:>4}  {format_ns(a['p99_9_ns']):>12}  {format_ns(b['p99_9_ns']):>12}  "
            f"{format_ns(a['p99_99_ns']):>12}  {format_ns(b['p99_99_ns']):>13}  {b['method']}, {rate}"
        )
    for key, label in (("p99_9_ns", "p99.9"), ("p99_99_ns", "p99.99")):
        pm = statistics.median(r[key] for r in plain)
        tm = statistics.median(r[key] for r in traced)
        print(f"median {label}: {format_ns(int(pm))} without the trace, {format_ns(int(tm))} with it")
    sizes = [r["trace_bytes_per_s"] for r in traced if r["trace_bytes_per_s"] is not None]
    if sizes:
        print(f"trace: {statistics.median(sizes) / 1e3:,.0f} kB/s of ring-buffer pages (median)")


if __name__ == "__main__":
    main()
