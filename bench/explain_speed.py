"""How long `lowtail explain` takes for a 10 s run at 10 kpps (issue 36): the computation (the
run's series and trace read, the tail explained, the explanation stored) and a repeated
`lowtail explain` of the same run (answered from the store), side by side, each repeated and
measured in one session on one host — a busy host slows both alike, so their ratio is the
claim, not either figure alone.

The run is recorded here with its kernel trace (as root: namespaces and tracefs), unless
`--db` and `--run` name one already stored.

Usage: python bench/explain_speed.py [--duration 10s] [--rate 10000] [--repeat 3] [--db DB --run ID] [--json]"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lowtail.explain.run import compute, read_inputs
from lowtail.store import open_store
from lowtail.store.explain import run_trace, save_explanation
from lowtail.store.runs import run_figures

EXPERIMENT = """
[experiment]
name = "explain-speed"
duration = "{duration}"
warmup = "300ms"
calibrate = false
[traffic]
rates = [{rate}]
[[dut]]
name = "fwd"
kind = "lowtail-fwd"
work_ns = 0
"""


def record(work: Path, duration: str, rate: int) -> tuple[Path, int]:
    """A stored traced run of lowtail-fwd: (its database, its id)."""
    spec = work / "explain-speed.toml"
    spec.write_text(EXPERIMENT.format(duration=duration, rate=rate))
    db = work / "bench.duckdb"
    done = subprocess.run([sys.executable, "-m", "lowtail", "run", str(spec), "--db", str(db)], capture_output=True)
    if done.returncode not in (0, 3):
        raise SystemExit(f"lowtail run failed ({done.returncode}): {done.stderr.decode()[-400:]}")
    with open_store(db, read_only=True) as store:
        (run_id,) = store.con.execute("SELECT max(run_id) FROM runs").fetchone()
    return db, int(run_id)


def computation_s(db: Path, run_id: int) -> tuple[float, dict[str, float]]:
    """One explanation worked out and stored, as `lowtail run` does after storing a run: the
    whole, and its parts (reading the database, computing from the files, writing)."""
    t0 = time.perf_counter()
    with open_store(db) as store:
        inputs = read_inputs(store, run_id)
        store.release()
        t1 = time.perf_counter()
        doc = compute(inputs)
        t2 = time.perf_counter()
        save_explanation(store, dict(doc))
    t3 = time.perf_counter()
    return t3 - t0, {"read_s": t1 - t0, "compute_s": t2 - t1, "write_s": t3 - t2}


def repeated_s(db: Path, run_id: int) -> float:
    """`lowtail explain RUN` as a user types it, once the explanation is stored (process start included)."""
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "lowtail", "explain", str(run_id), "--db", str(db), "--json"], capture_output=True
    )
    if done.returncode not in (0, 3):
        raise SystemExit(f"lowtail explain failed ({done.returncode}): {done.stderr.decode()[-400:]}")
    return time.perf_counter() - t0


def bench(db: Path, run_id: int, repeat: int) -> dict[str, Any]:
    with open_store(db, read_only=True) as store:
        trace = run_trace(store, run_id) or {}
        packets = run_figures(store, run_id)["sent"]
    computed, parts, repeated = [], [], []
    for _ in range(repeat):  # interleaved: a host busier for a while weighs on both
        total, split = computation_s(db, run_id)
        computed.append(total)
        parts.append(split)
        repeated.append(repeated_s(db, run_id))
    return {
        "run_id": run_id,
        "packets": packets,
        "trace_intervals": _intervals(trace),
        "computation_s": computed,
        "computation_parts_s": parts,
        "repeated_explain_s": repeated,
    }


def _intervals(trace: dict[str, Any]) -> int | None:
    import pyarrow.parquet as pq

    path = trace.get("path")
    return pq.ParquetFile(path).metadata.num_rows if path and Path(path).exists() else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", default="10s")
    ap.add_argument("--rate", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--db", type=Path)
    ap.add_argument("--run", type=int)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if (args.db is None) != (args.run is None):
        raise SystemExit("give both --db and --run, or neither")
    with tempfile.TemporaryDirectory(prefix="lowtail-explain-bench-") as tmp:
        db, run_id = (args.db, args.run) if args.db else record(Path(tmp), args.duration, args.rate)
        result = bench(db, run_id, args.repeat)
    if args.json:
        print(json.dumps(result, indent=1))
        return
    med_c = statistics.median(result["computation_s"])
    med_r = statistics.median(result["repeated_explain_s"])
    print(
        f"run {run_id}: {result['packets'] or '?'} packets, {result['trace_intervals'] or '?'} trace intervals; "
        f"{args.repeat} repetitions, interleaved"
    )
    print(f"{'#':>3}  {'computation':>12}  {'(read':>7} {'compute':>8} {'write)':>7}  {'repeated explain':>17}")
    for i, (c, p, r) in enumerate(
        zip(result["computation_s"], result["computation_parts_s"], result["repeated_explain_s"])
    ):
        print(f"{i:>3}  {c:>10.2f} s  {p['read_s']:>6.2f} {p['compute_s']:>8.2f} {p['write_s']:>6.2f}   {r:>15.2f} s")
    print(
        f"median: computation {med_c:.2f} s, repeated explain {med_r:.2f} s (from the store, process start "
        f"included): {med_c / med_r:.1f}× "
    )


if __name__ == "__main__":
    main()
