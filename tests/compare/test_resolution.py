"""Whether an experiment's repetitions bound a percentile (compare/resolution.py), on stored
synthetic runs with a known tail: independent jitter bounds p99.9 in 20,000 packets; two
10 ms stalls in 2 s (a hypervisor's, say) hold the whole p99.9 tail in two clusters, and the
packets a repetition would need are said, with the seconds at its rate."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))
from lowtail.compare.resolution import resolution  # noqa: E402
from lowtail.store import open_store  # noqa: E402
from test_host_interrupts import store_synthetic_run  # noqa: E402

JITTER = {"packets": 20000, "rate_pps": 10000, "base_latency_ns": 20000, "jitter_ns": 5000.0}
# A 10 ms stall once a second: every packet behind it waits, 100 in a row.
STALLS = JITTER | {"irq_period_ns": 1_000_000_000, "irq_durations_ns": [10_000_000]}


def _stored(tmp_path: Path, synth: dict, repetitions: int = 2) -> Path:
    db = tmp_path / "r.duckdb"
    with open_store(db) as store:
        for rep in range(repetitions):
            store_synthetic_run(store, tmp_path, synth, rep)
    return db


def test_independent_packets_bound_p99_9(tmp_path):
    with open_store(_stored(tmp_path, JITTER), read_only=True) as store:
        found = resolution(store, 1, "p99_9")
    assert found["bounded"] and found["unbounded_runs"] == [] and found["why"] is None
    assert found["packets_needed"] is None and found["seconds_needed"] is None


def test_rare_long_stalls_leave_p99_9_unbounded_and_say_how_long_a_repetition_must_be(tmp_path):
    with open_store(_stored(tmp_path, STALLS), read_only=True) as store:
        found = resolution(store, 1, "p99_9")
        median = resolution(store, 1, "p50")
    assert not found["bounded"] and len(found["unbounded_runs"]) == 2
    # More than the 20,000 packets each run has, and its seconds at 10 kpps.
    assert found["packets_needed"] is not None and found["packets_needed"] > 20000
    assert found["seconds_needed"] == -(-found["packets_needed"] // 10000)
    assert "lengthen `duration`" in found["why"] and "p99.9" in found["why"]
    # The median of the same runs is bounded: the stalls hold 1 % of the packets.
    assert median["bounded"]


def test_a_repetition_as_long_as_said_bounds_it(tmp_path):
    """The claim checked against the process it was made from: runs of the packets said
    (about 460,000 here: 46 s at 10 kpps) of the same stalls, other seeds, bound p99.9."""
    import json

    from lowtail import _native
    from lowtail.analyze.pair import AnalyzeOptions, analyze_pair
    from lowtail.compare.pooling import read_series

    with open_store(_stored(tmp_path, STALLS), read_only=True) as store:
        needed = resolution(store, 1, "p99_9")["packets_needed"]
    assert needed is not None
    for seed in (11, 12):
        pre, post, series = tmp_path / "pre.pcap", tmp_path / "post.pcap", tmp_path / f"long{seed}.parquet"
        _native.synth_pair(str(pre), str(post), json.dumps(STALLS | {"packets": needed, "seed": seed}), None)
        analyze_pair(pre, post, AnalyzeOptions(trim_ns=0, export=str(series)))
        assert read_series(series).interval("p99_9")["resolvable"], seed
