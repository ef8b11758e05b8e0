"""How `lowtail model evt` scales: a series of N samples (default 170 million, 1 Mpps for
170 s as in the URLLC studies) is written once in row groups, then modelled; wall time and the
process's peak resident memory are printed.

    .venv/bin/python bench/evt_scale.py [--samples 170000000] [--path bench/out/evt-170m.parquet]
"""

from __future__ import annotations

import argparse
import math
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lowtail.models import gpd
from lowtail.models.evt import evt_model

CHUNK = 4_000_000


def write_series(path: Path, samples: int, seed: int = 1) -> None:
    """10 µs + exponential(300 ns) body; above its 99th percentile a GPD(400 ns, ξ = −0.1)."""
    rng = np.random.default_rng(seed)
    u = 10_000 + 300 * math.log(100)
    schema = pa.schema(
        [("id", pa.uint64()), ("pre_ts_ns", pa.int64()), ("post_ts_ns", pa.int64()), ("latency_ns", pa.int64())]
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    with pq.ParquetWriter(path, schema, compression="zstd") as w:
        for first in range(0, samples, CHUNK):
            n = min(CHUNK, samples - first)
            lat = 10_000 + rng.exponential(300.0, n)
            tail = lat > u
            lat[tail] = u + gpd.sample(int(tail.sum()), 400.0, -0.1, rng)
            lat = np.round(lat).astype(np.int64)
            ids = np.arange(first, first + n, dtype=np.uint64)
            pre = ids.astype(np.int64) * 1_000 + 10**15
            w.write_table(
                pa.table({"id": ids, "pre_ts_ns": pre, "post_ts_ns": pre + lat, "latency_ns": lat}, schema=schema)
            )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=170_000_000)
    ap.add_argument("--path", type=Path, default=Path("bench/out/evt-170m.parquet"))
    ap.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not args.measure:
        if not args.path.exists() or pq.ParquetFile(args.path).metadata.num_rows != args.samples:
            t = time.perf_counter()
            write_series(args.path, args.samples)
            print(
                f"wrote {args.samples:,} samples to {args.path} ({args.path.stat().st_size / 2**20:,.0f} MiB) "
                f"in {time.perf_counter() - t:.1f} s",
                flush=True,
            )
        # Measure in a fresh process: writing raised this one's memory high-water mark.
        sys.exit(
            subprocess.run(
                [sys.executable, __file__, "--measure", "--samples", str(args.samples), "--path", str(args.path)]
            ).returncode
        )
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = time.perf_counter()
    doc = evt_model(args.path)
    wall = time.perf_counter() - t
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(
        f"evt on {doc['samples']:,} samples: {wall:.1f} s wall, {usage.ru_utime + usage.ru_stime:.1f} s CPU, "
        f"peak RSS {usage.ru_maxrss / 1024:,.0f} MiB (after imports {before / 1024:,.0f} MiB); threshold {doc['threshold_percentile']:g} %, "
        f"ξ = {doc['xi']:.4f} [{doc['xi_ci'][0]:.4f}, {doc['xi_ci'][1]:.4f}] (true −0.1), "
        f"validation exceedances {doc['validation']['exceedances']} (expected 1), "
        f"stationarity {doc['stationarity']['verdict']}"
    )


if __name__ == "__main__":
    main()
