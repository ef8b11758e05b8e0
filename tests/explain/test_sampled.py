"""The interrupts at their sampling resolution (explain/sampled.py) against a known truth: how
often a kind that has nothing to do with the tail is called "beyond chance" (at most the 5 %
the test is set at, with independent counts and with counts that drift slowly), how often
one that brings tail packets with it is found, and the rates it states."""

from __future__ import annotations

import numpy as np
import pytest

from lowtail.explain.sampled import SIGNIFICANCE, correlations, rates, sampled_doc

T0 = 1_700_000_000_000_000_000
PERIOD = 1_000_000_000
TRIALS = 400


def _samples(counts: np.ndarray, kind: str = "TLB", cpu: int = 2) -> list[tuple[int, int, str, int, int]]:
    """Non-zero per-period counts as stored samples (each closes its period)."""
    return [(T0 + (k + 1) * PERIOD, cpu, kind, int(c), PERIOD) for k, c in enumerate(counts) if c]


def _tail_times(rng: np.random.Generator, per_period: np.ndarray) -> np.ndarray:
    """Tail packets' PRE times: that many in each period, at random within it."""
    return np.concatenate(
        [T0 + k * PERIOD + rng.integers(1, PERIOD, n) for k, n in enumerate(per_period)] + [np.zeros(0, np.int64)]
    ).astype(np.int64)


def _significant(rng: np.random.Generator, irq: np.ndarray, tail: np.ndarray) -> bool:
    # A timer in every period gives the grid every period's end, as a real recording's does.
    samples = _samples(irq) + _samples(np.full(irq.size, 250), "LOC")
    found = correlations(samples, _tail_times(rng, tail), T0, T0 + irq.size * PERIOD, {2})
    return any(c["significant"] for c in found if c["kind"] == "TLB")


def _ar1(rng: np.random.Generator, n: int, phi: float, scale: float) -> np.ndarray:
    x = np.zeros(n)
    for i in range(1, n):
        x[i] = phi * x[i - 1] + rng.normal()
    return np.maximum(0.0, scale * (1 + 0.5 * x / max(1e-9, float(np.std(x)))))


@pytest.mark.parametrize("drift", [False, True])
def test_a_kind_unrelated_to_the_tail_is_called_beyond_chance_at_most_at_the_stated_rate(drift):
    """60 one-second periods; interrupt counts and tail counts independent — Poisson, or
    Poisson around rates that drift slowly and independently (AR(1), φ = 0.8): the share of
    runs in which the kind is called beyond chance stays within the 5 % stated (plus three
    standard errors of 400 trials)."""
    rng = np.random.default_rng(11 + drift)
    n, hits = 60, 0
    for _ in range(TRIALS):
        irq_rate = _ar1(rng, n, 0.8, 6.0) if drift else np.full(n, 6.0)
        tail_rate = _ar1(rng, n, 0.8, 3.0) if drift else np.full(n, 3.0)
        hits += _significant(rng, rng.poisson(irq_rate), rng.poisson(tail_rate))
    bound = SIGNIFICANCE + 3 * np.sqrt(SIGNIFICANCE * (1 - SIGNIFICANCE) / TRIALS)
    assert hits / TRIALS <= bound, hits / TRIALS


def test_a_kind_that_brings_tail_packets_is_found():
    """Each interrupt of the kind brings a tail packet with probability 0.3 (the rest of the
    tail at random): over 60 periods it is found beyond chance in at least 90 % of runs."""
    rng = np.random.default_rng(21)
    found = 0
    for _ in range(200):
        irq = rng.poisson(6.0, 60)
        tail = rng.binomial(irq, 0.3) + rng.poisson(1.0, 60)
        found += _significant(rng, irq, tail)
    assert found / 200 >= 0.9, found / 200


def test_too_few_periods_are_said_to_be_too_few():
    """Ten periods cannot put a p-value under 5 % (the shifts give at least 1/10): said, not hidden."""
    rng = np.random.default_rng(3)
    irq = rng.poisson(6.0, 10)
    samples = _samples(irq) + _samples(np.full(10, 250), "LOC")
    doc = sampled_doc("host", samples, _tail_times(rng, irq), T0, T0 + 10 * PERIOD, {2})
    assert not any(c["significant"] for c in doc["correlation"])
    assert any("too few to tell a correlation from chance" in s for s in doc["sentences"]), doc["sentences"]


def test_rates_are_counts_over_the_time_the_samples_cover():
    """250 a second and one in three of them: 250 Hz and 83.33 Hz over 30 s, exactly."""
    loc = _samples(np.full(30, 250), "LOC")
    iwi = _samples(np.array([83, 84, 83] * 10), "IWI")
    found = {r["kind"]: r["rate_hz"] for r in rates(loc + iwi, {2})}
    assert found["LOC"] == pytest.approx(250.0, rel=1e-12)
    assert found["IWI"] == pytest.approx(2500 / 30, rel=1e-12)
