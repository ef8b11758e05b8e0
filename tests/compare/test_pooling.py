"""Pooled exact percentiles: the native exact histogram exposed to Python, merged over
several runs' series, equals a brute-force sort of all their packets at every nearest rank
(PostgreSQL's percentile_disc), and a single run's pool equals its stored analysis."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pyarrow.parquet as pq
import pytest
from compare_support import analysed

from lowtail import _native
from lowtail.compare.pooling import curve_fractions, pooled, read_series
from lowtail.core import percentiles


def nearest(sorted_values: np.ndarray, q: float) -> int:
    """percentile_disc: the value at rank ceil(q·n) (double precision), at least 1."""
    rank = max(1, math.ceil(q * len(sorted_values)))
    return int(sorted_values[rank - 1])


def test_the_native_histogram_is_exact_at_every_rank_and_quantile():
    rng = np.random.default_rng(3)
    values = np.concatenate(
        [
            rng.integers(-500, 500, 3_000),  # negative values, spilled
            rng.integers(0, 70_000, 50_000),  # a dense body
            rng.integers(1 << 31, 1 << 34, 200),  # a sparse tail past the pages
        ]
    ).astype(np.int64)
    h = _native.ExactHistogram()
    for part in np.array_split(values, 7):
        h.record(part)
    s = np.sort(values)
    assert h.count == len(values) and h.min() == s[0] and h.max() == s[-1]
    qs = [
        Fraction(0),
        Fraction(1, 2),
        Fraction(9, 10),
        Fraction(99, 100),
        Fraction(999, 1000),
        Fraction(99999, 100000),
        1,
    ]
    assert h.quantiles(qs) == [nearest(s, q) for q in qs]
    with pytest.raises(TypeError, match="must be exact"):
        h.quantiles([0.999])  # a float ranks one too high where q·n is whole
    ranks = [1, 2, 1_000, 40_000, len(s)]
    assert h.at_ranks(ranks) == [int(s[r - 1]) for r in ranks]
    with pytest.raises(ValueError, match="outside 1.."):
        h.at_ranks([len(s) + 1])
    assert _native.ExactHistogram().quantiles([Fraction(1, 2)]) is None


def test_pooled_percentiles_equal_a_sort_of_all_packets(tmp_path):
    # Three "repetitions" of different shapes: a tight one, one with periodic interrupts,
    # one with rare spikes.
    specs = [
        {"seed": 1, "jitter_ns": 500.0},
        {"seed": 2, "irq_period_ns": 1_000_000, "irq_durations_ns": [5_500, 8_200]},
        {"seed": 3, "spike_probability": 0.001, "spike_ns": 300_000},
    ]
    docs = [analysed(tmp_path, f"rep{i}", packets=20_000, **spec)[0] for i, spec in enumerate(specs)]
    parts = [read_series(d["export_path"]) for d in docs]
    pool = pooled(parts)
    everything = np.sort(
        np.concatenate([pq.read_table(d["export_path"], columns=["latency_ns"]).column(0).to_numpy() for d in docs])
    )
    assert pool.samples == len(everything) == sum(d["latency_ns"]["samples"] for d in docs)
    keys = [*percentiles.KEYS, "max", "min"]
    figures = pool.figures(keys)
    for key in keys:
        assert figures[key] == nearest(everything, percentiles.fraction(key)), key
    # One repetition alone is exactly its analysis.
    for d, part in zip(docs, parts):
        assert part.figures(percentiles.KEYS) | {"samples": d["latency_ns"]["samples"]} == {
            **{k: d["latency_ns"][k] for k in percentiles.KEYS},
            "samples": d["latency_ns"]["samples"],
        }
    # The curve is exact at every point and ends at the maximum.
    grid = curve_fractions(pool.samples)
    assert grid[-1] == 1.0 and 1 / (1 - grid[-2]) <= pool.samples
    assert pool.curve(grid) == [(q, nearest(everything, q)) for q in grid]
    # The interval brackets the value, from the sorted packets' own ranks.
    # The interval brackets the value, from the sorted packets' own ranks (one repetition:
    # the three pooled wander apart, and their p99.9 lies in the third's spikes).
    own = np.sort(pq.read_table(docs[0]["export_path"], columns=["latency_ns"]).column(0).to_numpy())
    iv = parts[0].interval("p99_9")
    assert iv["resolvable"] and iv["lower_ns"] <= parts[0].figures(["p99_9"])["p99_9"] <= iv["upper_ns"], iv
    assert (iv["lower_ns"], iv["upper_ns"]) == (own[iv["lower_rank"] - 1], own[iv["upper_rank"] - 1])
    # Pooled, p99.9 is made of about 20 spike episodes: fewer than a clustered percentile is
    # bounded from (issue 35), and said so.
    top = pool.interval("p99_9")
    assert not top["resolvable"] and "clusters" in (top["why"] or ""), top


def test_plain_analyses_are_configurations_by_their_configured_rate_never_a_measured_one(tmp_path):
    """Issue 22: plain analyses took sent/duration as their rate, so repetitions of slightly
    different length became separate configurations, both printed as "10 kpps"."""
    from lowtail.compare.comparison import CompareOptions, compare
    from lowtail.store import open_store
    from lowtail.store.analyses import save_analysis

    with open_store(tmp_path / "t.duckdb") as store:
        ids = []
        for i, packets in enumerate((5_000, 5_003, 5_001)):
            doc, options = analysed(tmp_path, f"r{i}", packets=packets, seed=i + 1)
            if i == 2:
                doc["nominal_rate_pps"] = 20_000.0  # `analyze --rate 20k`: configured otherwise
            ids.append(save_analysis(store, doc, options, label="fwd"))
        result = compare(store, [f"analysis:{i}" for i in ids], CompareOptions()).document
    configurations = {c["label"]: c["repetitions"] for c in result["configurations"]}
    assert sorted(configurations.values()) == [1, 2], configurations
    assert any("20 kpps" in label for label in configurations), configurations
