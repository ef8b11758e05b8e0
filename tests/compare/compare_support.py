"""Stored runs for the comparison tests: real synthetic capture pairs (lowtail-synth),
really analysed (their matched series exported), stored as runs of experiments."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

from lowtail import _native
from lowtail.analyze.pair import AnalyzeOptions, analyze_pair
from lowtail.store import runs as runstore
from lowtail.store.db import Store


def analysed(tmp: Path, name: str, **spec: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """A synthetic pair analysed with its series exported: (analysis document, options)."""
    pre, post = tmp / f"{name}-pre.pcap", tmp / f"{name}-post.pcap"
    full = {"packets": 5_000, "rate_pps": 10_000.0, "base_latency_ns": 10_000, "jitter_ns": 2_000.0, "seed": 1} | spec
    _native.synth_pair(str(pre), str(post), json.dumps(full))
    options = AnalyzeOptions(trim_ns=0, export=str(tmp / f"{name}.parquet"))
    return analyze_pair(pre, post, options), options.to_dict()


def experiment(store: Store, name: str, verdict: dict[str, Any] | None = None, host: str = "lab1") -> int:
    """A stored experiment (its file's [verdict] table, its host's name and kernel)."""
    spec = {"verdict": verdict} if verdict else {}
    return runstore.create_experiment(store, name, spec, name, {"kernel": "6.1.0-rt", "hostname": host}, "/nonexistent")


def store_run(
    store: Store,
    tmp: Path,
    eid: int,
    dut: str,
    kind: str = "lowtail-fwd",
    repetition: int = 0,
    rate: int = 10_000,
    containment: str = "bare",
    options: dict[str, Any] | None = None,
    valid: bool = True,
    virtualization: str | None = None,
    **spec: Any,
) -> int:
    """One run of `dut` (a synthetic pair with `spec`), stored with its analysis."""
    name = f"e{eid}-{dut}-{containment}-{rate}-r{repetition}-{json.dumps(options or {}, sort_keys=True)}"
    name = "".join(c if c.isalnum() or c in "-_" else "_" for c in name)
    doc, opts = analysed(tmp, name, **spec)
    row = {
        "label": name,
        "experiment_id": eid,
        "combination_key": name,
        "dut_name": dut,
        "dut_kind": kind,
        "dut_config": options or {},
        "calibration": kind == "wire",
        "rate_pps": rate,
        "frame_size": 64,
        "burst": 1,
        "repetition": repetition,
        "duration_ns": 10**9,
        "warmup_ns": 0,
        "started_at": datetime.now(),
        "finished_at": datetime.now(),
        "series_path": doc["export_path"],
        "valid": valid,
        "invalid_reasons": [] if valid else ["the timestamper lost 3 frames (kernel capture drops)"],
        "generator": {"kept_up": True},
        "capture": {"interfaces": []},
        "containment": {"mode": containment},
        "energy": None,
        "dut_stats": {},
        "capture_paths": [],
        "traffic": {"flows": 1},
    }
    if virtualization is not None:
        row["virtualization"] = virtualization
    return runstore.save_run(store, row, doc, opts)


def trace_and_explain(store: Store, run_id: int, folder: Path, spike_ns: int = 30_000) -> dict[str, Any]:
    """Give a stored run a kernel trace as a recording would have left it — the DuT's core
    (CPU 2) running lowtail-fwd, preempted by a task "hog" while each packet slower than
    `spike_ns` was in flight (store the run with synth's spikes) — and explain it; returns
    the stored explanation."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lowtail.explain.run import explain_run
    from lowtail.store.explain import save_run_trace
    from lowtail.trace import timeline

    (run,) = runstore.select_runs(store, run_ids=[run_id])
    series = pq.read_table(run["series_path"])
    pre = series.column("pre_ts_ns").to_numpy()
    post = series.column("post_ts_ns").to_numpy()
    hit = series.column("latency_ns").to_numpy() >= spike_ns
    assert hit.any(), "the run has no spikes to explain"
    first, last = int(pre.min()) - 1_000_000, int(post.max()) + 1_000_000
    starts = pre[hit]
    ends = post[hit]
    cuts = np.sort(np.concatenate([[first], starts, ends, [last]]))
    n = starts.size
    # The forwarder between the hog's slices, the hog during each hit packet's flight.
    spans = [(int(cuts[i]), int(cuts[i + 1]), "hog" if i % 2 else "lowtail-fwd") for i in range(2 * n + 1)]
    table = pa.table(
        {
            "cpu": pa.array([2] * len(spans), pa.int16()),
            "start_ns": pa.array([s for s, _, _ in spans], pa.int64()),
            "end_ns": pa.array([e for _, e, _ in spans], pa.int64()),
            "kind": pa.array(["task"] * len(spans)),
            "name": pa.array([name for _, _, name in spans]),
            "pid": pa.array([4242 if name == "hog" else 100 for _, _, name in spans], pa.int32()),
            "prio": pa.array([10 if name == "hog" else 120 for _, _, name in spans], pa.int16()),
            "state": pa.array(["R"] * len(spans)),
            "detail": pa.array([""] * len(spans)),
        },
        schema=timeline.LEGACY_SCHEMA,  # one host's table, as a recording is built: write() adds its host
    )
    coverage = [
        {"cpu": 2, "first_ns": first, "last_ns": last, "events": 2 * len(spans), "dropped": 0, "pages_with_loss": 0}
    ]
    info = timeline.TraceInfo(
        host="lab-a",
        cpus=[2],
        events=["sched:sched_switch"],
        missing_events=[],
        buffer_kb=4096,
        raw_bytes=65536,
        duration_ns=last - first,
        clock={"uncertainty_ns": 1000, "stepped": False, "change_ns": 0},
        coverage=coverage,
    )
    path = folder / f"trace-{run_id}.parquet"
    timeline.write(table, info, path)
    roles = {
        "dut": {"host": "lab-a", "cpus": [2], "pids": [100], "comms": ["lowtail-fwd"]},
        "generator": {"host": "lab-a", "cpus": [0], "pids": [], "comms": ["lowtail-gen"]},
        "timestamper": {"host": "lab-a", "cpus": [1], "pids": [], "comms": ["lowtail-cap"]},
    }
    document = {"method": "tracefs", "path": str(path), "roles": roles, "untraced": [], "info": asdict(info)}
    save_run_trace(store, run_id, document)
    return dict(explain_run(store, run_id))


# Three runs, one of each status against `THREE_STATUS_VERDICT`: PASS (60,000 packets far
# under the budget), FAIL (latency above it) and inconclusive (5,000 packets cannot bound
# p99.99 from above). tests/compare/test_one_verdict.py and test_strict.py judge them.
THREE_STATUS_VERDICT = {"percentile": 99.99, "budget": "100us"}
THREE_STATUS_RUNS = {
    "pass": {"packets": 60_000, "base_latency_ns": 10_000},
    "fail": {"packets": 60_000, "base_latency_ns": 120_000},
    "short": {"packets": 5_000, "base_latency_ns": 10_000},
}


def three_status_experiment(
    store: Store, tmp: Path, name: str, duts: tuple[str, ...] = tuple(THREE_STATUS_RUNS)
) -> tuple[int, dict[str, int]]:
    """An experiment judged by `THREE_STATUS_VERDICT` with one run of each of `duts` (of
    `THREE_STATUS_RUNS`): its id and each DuT's run id."""
    eid = experiment(store, name, THREE_STATUS_VERDICT)
    return eid, {dut: store_run(store, tmp, eid, dut, **THREE_STATUS_RUNS[dut]) for dut in duts}


def lowtail_cli(*args: object) -> subprocess.CompletedProcess[str]:
    """`python -m lowtail ARGS` as a user runs it: its exit code, stdout and stderr."""
    return subprocess.run(
        [sys.executable, "-m", "lowtail", *map(str, args)], capture_output=True, text=True, timeout=300
    )
