"""Stored runs for the comparison tests: real synthetic capture pairs (lowtail-synth),
really analysed (their matched series exported), stored as runs of experiments."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from lowtail import _native
from lowtail.analysis import AnalyzeOptions, analyze_pair
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
