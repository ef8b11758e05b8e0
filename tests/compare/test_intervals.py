"""Confidence intervals of percentiles: the rank arithmetic is the classical one where
packets are independent (checked against scipy), and on simulated runs whose true
percentiles are known the stated 95 % intervals hold them in at least 93 % of runs — for
independent packets and for a FIFO behind stalls, whose clustered packets made the
classical intervals hold the true p99.9 in about a third of runs (issue 22). Percentiles the
packets cannot bound are said to be so, with the packets it would take."""

from __future__ import annotations

import math
import re
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import binom
from scipy.stats import t as student

import latency_models as models
from lowtail import _native
from lowtail.compare.intervals import Evidence, interval
from lowtail.core import confidence

SIMULATIONS = 200
PACKETS = 200_000


def consistent_with(held: int, stated: int, coverage: float = 0.93) -> bool:
    """Whether `held` of `stated` intervals is consistent with a coverage of at least
    `coverage`: a run of simulations that would show less than 1 % of the time fails. (200
    simulations measure a coverage to ±1.5 %; bench/stated_confidence.py measures with thousands.)"""
    return binom.cdf(held, stated, coverage) >= 0.01


def test_the_binomial_tails_are_scipys():
    rng = np.random.default_rng(11)
    for _ in range(400):
        n = int(rng.choice([7, 50, 101, 1_000, 5_000, 90_000, 368_887, 10**6, 10**8]))
        x = float(rng.choice([0.5, 0.1, 0.01, 1e-3, 1e-4, 1e-5, 1e-6]))
        p = float(rng.choice([1e-6, 0.025, 0.05, 0.5, 0.95, 0.975]))
        assert confidence.binomial_ppf(n, x, p) == int(binom.ppf(p, n, x)), (n, x, p)
        k = int(rng.integers(0, n + 1))
        assert confidence.binomial_cdf(n, x, k) == pytest.approx(binom.cdf(k, n, x), abs=2e-6), (n, x, k)


def test_students_t_is_scipys_within_a_tenth_of_a_percent():
    for df in (1, 2, 3, 5, 9, 30, 61, 500):
        for p in (0.95, 0.975):
            assert confidence.student_t(p, df) == pytest.approx(student.ppf(p, df), rel=1.5e-3), (df, p)


@pytest.mark.parametrize(
    ("n", "q", "level"), [(101, "0.5", 0.95), (1_000, "0.99", 0.95), (5_000, "0.999", 0.95), (2_000, "0.9", 0.90)]
)
def test_independent_packets_get_the_classical_ranks_and_their_exact_coverage(n, q, level):
    ri = confidence.rank_interval(n, Fraction(q), level)
    tail = (1 - level) / 2
    p = float(q)
    # The classical ranks: l the smallest k with P(K ≤ k) ≥ tail, u − 1 the smallest with ≥ 1 − tail.
    assert (ri.lower, ri.upper) == (int(binom.ppf(tail, n, p)), int(binom.ppf(1 - tail, n, p)) + 1)
    coverage = binom.cdf(ri.upper - 1, n, p) - binom.cdf(ri.lower - 1, n, p)
    rng = np.random.default_rng(20_240_611 + n)
    true = -math.log(1.0 - p)  # the exponential distribution's quantile
    samples = np.sort(rng.exponential(size=(2_000, n)), axis=1)
    covered = np.mean((samples[:, ri.lower - 1] <= true) & (true <= samples[:, ri.upper - 1]))
    assert abs(covered - coverage) <= 4 * math.sqrt(coverage * (1 - coverage) / 2_000)


def test_dispersion_scales_the_effective_sample():
    # D = 4: the ranks of a quarter of the packets, scaled back, never tighter.
    n, q = 400_000, Fraction(999, 1000)
    plain, dispersed, quarter = (
        confidence.rank_interval(n, q, 0.95),
        confidence.rank_interval(n, q, 0.95, 4.0),
        confidence.rank_interval(n // 4, q, 0.95),
    )
    assert dispersed.lower < plain.lower and dispersed.upper > plain.upper
    assert n - dispersed.upper == 4 * (n // 4 - quarter.upper) or n - dispersed.upper <= 4 * (n // 4 - quarter.upper)
    assert confidence.packets_to_bound(Fraction(99999, 100000), 0.05) == 299_572  # ln 0.05 / ln 0.99999
    assert confidence.packets_to_bound(Fraction(99999, 100000), 0.05, 2.0) == 599_144


def _covered(model, truth, keys, rng, runs=SIMULATIONS, packets=PACKETS):
    """Per key: (intervals stated, of them holding the truth, classical intervals holding it)."""
    out = {k: [0, 0, 0] for k in keys}
    ts = models.timestamps(packets)
    for _ in range(runs):
        x = model(rng, packets)
        s = _native.SeriesSummary()
        s.record(ts, x)
        ev = Evidence([s])
        ordered = np.sort(x)
        for k in keys:
            iv = interval(ev, k)
            classical = confidence.rank_interval(packets, Fraction(truth[k][0]), 0.95)
            out[k][2] += ordered[classical.lower - 1] <= truth[k][1] <= ordered[classical.upper - 1]
            if iv.resolvable:
                out[k][0] += 1
                out[k][1] += iv.lower_ns <= truth[k][1] <= iv.upper_ns
    return out


KEYS = {"p50": "0.5", "p99": "0.99", "p99_9": "0.999", "p99_99": "0.9999"}


@pytest.mark.slow
def test_intervals_hold_independent_packets_percentiles_as_often_as_they_state():
    truth = {k: (q, models.independent_quantile(float(q))) for k, q in KEYS.items()}
    found = _covered(models.independent, truth, list(KEYS), np.random.default_rng(2201))
    for k, (stated, held, _) in found.items():
        # 200,000 independent packets bound p99.99; a run whose blocks look clustered by chance
        # (the test at three levels, each at 99.9 %) is said not bounded: conservative, and rare.
        assert stated >= 0.98 * SIMULATIONS, (k, stated)
        assert consistent_with(held, stated), (k, held, stated)


@pytest.mark.slow
def test_intervals_hold_a_fifo_behind_stalls_where_the_classical_ones_did_not():
    keys = ["p50", "p99", "p99_9", "p99_99"]
    truth = {k: (KEYS[k], models.stalls_quantile(float(KEYS[k]))) for k in keys}
    found = _covered(models.stalls, truth, keys, np.random.default_rng(2202))
    for k in ("p50", "p99", "p99_9"):
        stated, held, classical = found[k]
        # p99.9 lies in about 20 stall episodes a run: bounded only where 15 or more lie above
        # it (issue 35's rule for clustered tails), about half the runs.
        assert stated >= (0.25 if k == "p99_9" else 0.85) * SIMULATIONS, (k, stated)
        assert consistent_with(held, stated), (k, held, stated)
    # The defect: intervals for independent packets held the clustered tail far too rarely.
    assert found["p99_9"][2] / SIMULATIONS < 0.6, found["p99_9"]
    # p99.99 of 200,000 such packets lies in a handful of stalls: mostly not bounded, and said so.
    assert found["p99_99"][0] <= 0.1 * SIMULATIONS, found["p99_99"]


def test_a_percentile_too_few_packets_bound_says_so_and_what_it_takes():
    rng = np.random.default_rng(5)
    x = models.independent(rng, 100_000)
    s = _native.SeriesSummary()
    s.record(models.timestamps(len(x)), x)
    ev = Evidence([s])
    top = interval(ev, "p99_9999")
    assert not top.resolvable and top.upper_ns is None and top.value_ns == int(x.max())
    assert "is their maximum and is not bounded from above" in top.why
    assert top.packets_needed >= 3_688_879  # the classical count (ln 0.025 / ln 0.999999), at least
    assert interval(ev, "p99_9").resolvable


def test_a_series_that_wanders_as_slowly_as_the_run_is_not_bounded():
    rng = np.random.default_rng(8)
    n = 200_000
    # A level shift halfway through the run: the two halves' blocks each agree among themselves.
    x = models.independent(rng, n) + np.where(np.arange(n) < n // 2, 0, 3_000)
    s = _native.SeriesSummary()
    s.record(models.timestamps(n), x)
    iv = interval(Evidence([s]), "p50")
    # It promised "its repetitions can" bound it, which nothing does: a difference is judged
    # only where each repetition's own packets bound the percentile (compare/resolution.py).
    assert not iv.resolvable and "wanders more slowly" in iv.why and "repetitions' spread" in iv.why
    assert "repetitions can" not in iv.why
    # The blocks it names are those it was merged down to ("correlate 0.54 with 10 blocks"
    # read as a count of the run's blocks).
    assert re.search(r"still correlate [0-9.]+ when merged down to [0-9]+\)", iv.why), iv.why


def test_a_level_outside_zero_and_one_is_refused():
    with pytest.raises(ValueError, match="between 0 and 1"):
        confidence.rank_interval(100, Fraction(1, 2), 95)
