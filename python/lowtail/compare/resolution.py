"""Whether an experiment's repetitions can resolve a percentile, and what it would take.

A difference is judged at a percentile only where every repetition's own packets bound it
(compare/differences.py). When a host's stalls are long and rare, each repetition's tail is
a handful of clusters, its percentile is not bounded from above, and no difference at that
percentile can be called however many repetitions are measured: only longer repetitions
(more clusters each) help. `tune` reads this from its before, so that an engineer learns
before trying changes that trials of this length are unlikely to be called, and how long a
repetition would have to be."""

from __future__ import annotations

import math

from lowtail.compare.intervals import DEFAULT_LEVEL
from lowtail.compare.pooling import read_run
from lowtail.core import percentiles
from lowtail.core.errors import UserError
from lowtail.core.units import format_count, format_minutes
from lowtail.store import analyses as analysisstore
from lowtail.store import runs as runstore
from lowtail.store.db import Store
from lowtail.tune.document import ResolutionDocument


def resolution(store: Store, experiment_id: int, key: str, level: float = DEFAULT_LEVEL) -> ResolutionDocument:
    """Whether each repetition of the experiment (its calibration runs left out) bounds
    percentile `key` at `level`; for those that do not, the packets and seconds per
    repetition that would, at their measured clustering and rate."""
    runs = [r for r in runstore.runs(store, experiment_id) if not r.get("calibration") and r["run_id"] is not None]
    stored = analysisstore.summary_bytes(store, [a for r in runs if (a := r.get("analysis_id")) is not None])
    unbounded: list[int] = []
    packets = seconds = 0.0
    reason = ""  # the first unbounded run's, said when the packets needed are not known
    for r in runs:
        try:
            summary = stored.get(r["analysis_id"]) if r["analysis_id"] is not None else None
            iv = read_run(summary, r.get("series_path")).interval(key, level)
        except UserError:
            continue  # a run whose latencies cannot be read is compare's to report
        if iv["resolvable"]:
            continue
        unbounded.append(int(r["run_id"] or 0))
        reason = reason or iv["why"] or ""
        needed = iv["packets_needed"]
        if needed:
            packets = max(packets, needed)
            if r.get("rate_pps"):
                seconds = max(seconds, needed / r["rate_pps"])
    doc = ResolutionDocument(
        percentile=key,
        bounded=not unbounded,
        unbounded_runs=unbounded,
        packets_needed=int(packets) if packets else None,
        seconds_needed=math.ceil(seconds) if seconds else None,
        why=None,
    )
    if unbounded:
        doc["why"] = _why(doc, experiment_id, reason)
    return doc


def _why(doc: ResolutionDocument, experiment_id: int, reason: str) -> str:
    short = percentiles.by_key(doc["percentile"]).short
    runs = ", ".join(map(str, doc["unbounded_runs"]))
    text = f"the {short} is not bounded by the packets of runs {runs} of experiment {experiment_id}"
    if doc["packets_needed"] and doc["seconds_needed"]:
        return (
            f"{text}: at their clustering a repetition takes about {format_count(doc['packets_needed'])} packets "
            f"(about {format_minutes(doc['seconds_needed'])} at its rate), so a difference at {short} "
            "cannot be called with repetitions this short — lengthen `duration` in [experiment], "
            "or judge a lower percentile ([verdict] percentile)"
        )
    return f"{text} ({reason}), so a difference at {short} cannot be called with these repetitions"
