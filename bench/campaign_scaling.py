"""The campaign part of `make bench`: `lowtail campaign analyze` over N pairs on a Dask
cluster of 1 worker against the same cluster with 2 workers (the speed-up, beside the ideal).

A real cluster on localhost: `dask scheduler` and `dask worker` processes (one thread each,
no nanny) are started before the clock starts, and every timed campaign gets a new database
(a campaign run against a database that holds it would resume, and analyse nothing).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from local_dask import LocalDask


def timed_campaign(lowtail: str, directory: Path, address: str, workdir: Path) -> tuple[float, dict]:
    """One whole `lowtail campaign analyze` process against the cluster, on a new database."""
    db = Path(tempfile.mkdtemp(dir=workdir)) / "campaign.duckdb"
    argv = [lowtail, "campaign", "analyze", str(directory), "--scheduler", address, "--db", str(db)]
    started = time.perf_counter()
    r = subprocess.run([*argv, "--no-series", "--json"], capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if r.returncode:
        raise RuntimeError(f"lowtail campaign analyze exited {r.returncode}: {r.stderr.strip()[-500:]}")
    return seconds, json.loads(r.stdout)


def run_campaign_scaling(lowtail: str, synth_pair, workdir: Path, pairs: int, packets: int, rate: float, model: dict):
    """Generate `pairs` pairs of `packets` packets, time the campaign on 1 then 2 workers
    (best of `repeat`), and return the figures; the pairs are deleted afterwards."""
    directory = workdir / "campaign"
    directory.mkdir()
    try:
        for i in range(pairs):
            synth_pair(directory / f"pair{i:02d}-pre.pcap", directory / f"pair{i:02d}-post.pcap", packets, rate, model)
        bytes_total = sum(f.stat().st_size for f in directory.iterdir())
        subprocess.run(["cat", *map(str, sorted(directory.iterdir()))], stdout=subprocess.DEVNULL, check=True)
        result = {"pairs": pairs, "packets_per_side": packets, "bytes": bytes_total, "cpus": os.cpu_count()}
        for workers in (1, 2):
            with LocalDask(workdir, workers) as cluster:
                seconds, doc = timed_campaign(lowtail, directory, cluster.address, workdir)
            if len(doc["pairs"]) != pairs or doc["failed"]:
                raise RuntimeError(f"the campaign on {workers} workers analysed {len(doc['pairs'])} of {pairs} pairs")
            used = sum(1 for w in doc["workers"] if w["pairs"])
            result[f"workers_{workers}"] = {"seconds": seconds, "workers_used": used}
        result["speedup"] = result["workers_1"]["seconds"] / result["workers_2"]["seconds"]
        result["ideal"] = float(min(2, os.cpu_count() or 1))
        return result
    finally:
        for f in directory.iterdir():
            f.unlink()
        directory.rmdir()


def render_campaign(c: dict) -> list[str]:
    """The campaign section of the bench's table."""
    one, two = c["workers_1"]["seconds"], c["workers_2"]["seconds"]
    packets = 2 * c["pairs"] * c["packets_per_side"]
    return [
        f"  campaign: {c['pairs']} pairs of {c['packets_per_side']:,} packets per side ({c['bytes'] / 1e6:,.0f} MB), "
        "`lowtail campaign analyze DIR --scheduler ADDR --no-series`, a new database each",
        f"  {'':36}{'wall':>11}{'packets/s':>14}{'speed-up':>11}{'ideal':>8}",
        f"  {'1 dask worker':36}{one:>9.2f} s{packets / one:>14,.0f}{1.0:>10.2f}×{1.0:>7.1f}×",
        f"  {'2 dask workers':36}{two:>9.2f} s{packets / two:>14,.0f}{c['speedup']:>10.2f}×{c['ideal']:>7.1f}×",
        f"  (ideal: min(2 workers, {c['cpus']} CPUs); each worker also runs the analyzer's reader threads, "
        "so on 2 cores the workers compete for them)",
    ]
