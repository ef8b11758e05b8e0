"""Confidence intervals of percentiles that hold when packets are not independent.

A device delays packets in clusters: a stall holds up every packet queued behind it, a
batch releases 32 at once, a slow phase lasts milliseconds. The packets above a
percentile then come in clusters, and their number varies far more from run to run than
for independent packets; intervals that assume independence then hold the true p99.9
in three runs of four instead of nineteen in twenty.

The method (docs/statistics.md says why this one, and what it assumes): each run's
latencies are kept per time block (1/32 to 1/64 of the run, `_native.SeriesSummary`); at
the percentile's estimate the variance of the packets above it is measured between the
blocks (the batch-means estimate of simulation-output analysis, as a ratio estimator over
blocks of unequal size) and divided by what independent packets would give: the
dispersion D ≥ 1. The interval is then the distribution-free order-statistic interval of
n/D effective packets, ranks scaled back by D (`lowtail.confidence`). Three safeguards:

- D is an estimate, from K blocks: it is raised by (t_{df}/z)², the price of estimating a
  variance from df degrees of freedom (df: blocks, or blocks with exceedances, less one);
- where fewer than ANCHOR_CLUSTERS blocks hold a packet above the percentile, the
  dispersion cannot be measured there; it is taken from the highest percentile where it
  can (the anchor), assuming the tail clusters no more than that (an assumption the
  documentation states), and never below what the few exceedances themselves show;
- blocks must be longer than the latency's memory: when neighbouring blocks are
  correlated (lag-1, one-sided 5 %), they are merged in pairs, down to FEWEST_BLOCKS per
  run; a series still correlated then wanders more slowly than the run can show, and its
  percentile is said not to be bounded.

When the data cannot bound a percentile, the interval says so and why (too few packets
for its clustering, or a wandering series), with the packets it would take."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from lowtail import percentiles
from lowtail._native import ExactHistogram, SeriesSummary
from lowtail.confidence import allowed_above, check_level, needed_above, packets_to_bound
from lowtail.documents import BoundsDoc, IntervalDoc
from lowtail.units import format_count

__all__ = ["DEFAULT_LEVEL", "Evidence", "PercentileInterval", "check_level", "interval", "bounds_document"]

# The confidence level of every interval lowtail states, unless asked for another.
DEFAULT_LEVEL = 0.95
# Blocks with a packet above a percentile needed to measure its dispersion there.
ANCHOR_CLUSTERS = 10
# The fewest blocks per run that merging for correlation may leave.
FEWEST_BLOCKS = 8
# One-sided 5 % point of the normal: the lag-1 correlation test of neighbouring blocks.
_LAG1_Z = 1.6448536269514722
# Ranks of the exceedance ladder a bounds document keeps: packets above these ranks from
# the top, so that a verdict can tell about how many packets reach any budget.
_LADDER_GROWTH = 1.25


class Evidence:
    """The packets an interval speaks for: one run's summary, or several runs' pooled
    (their exact distributions merged; their blocks kept apart, run by run)."""

    def __init__(self, summaries: Sequence[SeriesSummary], histogram: ExactHistogram | None = None):
        self.summaries = list(summaries)
        if histogram is None:
            if len(self.summaries) == 1:
                histogram = self.summaries[0].histogram
            else:
                histogram = ExactHistogram()
                for s in self.summaries:
                    histogram.merge(s.histogram)
        self.histogram = histogram
        self.n = histogram.count
        self.packets = [np.asarray(s.block_packets(), dtype=np.float64) for s in self.summaries]

    def value_at_rank(self, rank: int) -> int:
        """The rank-th smallest latency (1-based)."""
        return self.histogram.at_ranks([rank])[0]

    def above(self, value: int) -> list[np.ndarray]:
        """Per run, the packets of each block above `value` (at the blocks' resolution)."""
        return [np.asarray(s.blocks_above(value), dtype=np.float64) for s in self.summaries]

    @property
    def blocks(self) -> int:
        """Blocks with packets, over all runs."""
        return int(sum(np.count_nonzero(p) for p in self.packets))


@dataclass(frozen=True)
class _Dispersion:
    """What the blocks say about the packets above one value."""

    raw: float  # variance over what independent packets would give (may be below 1)
    df: int  # degrees of freedom of that estimate
    clusters: int  # blocks with a packet above the value
    blocks: int  # blocks it was measured over
    merges: int  # times neighbouring blocks were merged against correlation
    lag1: float  # correlation of neighbouring blocks' shares above the value
    wanders: bool  # still correlated with FEWEST_BLOCKS per run


def _merged(x: np.ndarray, times: int) -> np.ndarray:
    for _ in range(times):
        x = np.add.reduceat(x, np.arange(0, len(x), 2)) if len(x) else x
    return x


def _lag1(shares: list[np.ndarray], mean: float) -> float:
    """Correlation of neighbouring blocks' shares within each run."""
    num = sum(float(np.sum((s[1:] - mean) * (s[:-1] - mean))) for s in shares if len(s) > 1)
    den = sum(float(np.sum((s - mean) ** 2)) for s in shares)
    return num / den if den > 0 else 0.0


def _dispersion(ev: Evidence, value: int) -> _Dispersion:
    above = ev.above(value)
    merges = 0
    while True:
        parts = [(_merged(a, merges), _merged(p, merges)) for a, p in zip(above, ev.packets)]
        parts = [(a[p > 0], p[p > 0]) for a, p in parts]
        counts = np.concatenate([a for a, _ in parts]) if parts else np.zeros(0)
        sizes = np.concatenate([p for _, p in parts]) if parts else np.zeros(0)
        k, total = len(sizes), float(sizes.sum())
        share = float(counts.sum()) / total if total else 0.0
        lag1 = _lag1([a / p for a, p in parts], share)
        fewest = min((len(p) for _, p in parts), default=0)
        if k < 2 or lag1 <= _LAG1_Z / math.sqrt(k):
            break
        if fewest // 2 < FEWEST_BLOCKS:
            return _Dispersion(math.inf, 1, 0, k, merges, lag1, True)
        merges += 1
    clusters = int(np.count_nonzero(counts))
    if k < 2 or share <= 0.0 or share >= 1.0:
        return _Dispersion(1.0, max(1, k - 1), clusters, k, merges, lag1, False)
    residuals = counts - share * sizes
    squares = residuals**2
    variance = k / (k - 1) * float(np.sum(squares))
    raw = variance / (total * share * (1.0 - share))
    return _Dispersion(raw, _degrees_of_freedom(squares, clusters), clusters, k, merges, lag1, False)


def _degrees_of_freedom(squares: np.ndarray, clusters: int) -> int:
    """The degrees of freedom of a variance estimated from blocks with these squared
    residuals: K − 1 for normal residuals, fewer when a few blocks carry most of it (the
    kurtosis: Var(s²)/σ⁴ ≈ (κ − 1)/K), and never more than the blocks with exceedances."""
    k = len(squares)
    m2 = float(np.mean(squares))
    kurtosis = float(np.mean(squares**2)) / (m2 * m2) if m2 > 0 else 3.0
    effective = 2.0 * (k - 1) / max(kurtosis - 1.0, 2.0)
    return max(1, min(k - 1, clusters - 1, int(effective)))


def _inflated(d: _Dispersion, tail: float) -> float:
    """The dispersion, at least 1, raised for being estimated from `d.df` degrees of
    freedom: by (t_df / z)² at the interval's tail."""
    from statistics import NormalDist

    return max(1.0, d.raw) * (_student_t(1.0 - tail, d.df) / NormalDist().inv_cdf(1.0 - tail)) ** 2


def _student_t(p: float, df: int) -> float:
    """Student's t quantile: exact for 1 and 2 degrees of freedom, else the Cornish–Fisher
    expansion in the normal quantile (within 0.1 % from 3 degrees of freedom at the tails
    used here; tests/compare/test_intervals.py checks it against scipy)."""
    from statistics import NormalDist

    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        a = 2 * p - 1
        return a * math.sqrt(2 / (1 - a * a))
    z = NormalDist().inv_cdf(p)
    z2 = z * z
    terms = (
        (z2 + 1) * z / 4,
        ((5 * z2 + 16) * z2 + 3) * z / 96,
        (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384,
        ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) * z / 92160,
    )
    return z + sum(t / float(df) ** (i + 1) for i, t in enumerate(terms))


@dataclass(frozen=True)
class PercentileInterval:
    """A percentile with its interval: the nearest-rank value, the bounds (None on a side
    the data cannot bound), their ranks, the dispersion the ranks allow for, and why the
    percentile is not bounded where it is not, with the packets that would bound it."""

    key: str
    level: float
    value_ns: int | None
    lower_ns: int | None
    upper_ns: int | None
    lower_rank: int
    upper_rank: int
    dispersion: float
    blocks: int
    packets_needed: int | None
    why: str | None

    @property
    def resolvable(self) -> bool:
        """Whether the data bound the percentile on both sides."""
        return self.lower_ns is not None and self.upper_ns is not None

    def as_dict(self) -> IntervalDoc:
        """The interval as documents store it."""
        return {
            "value_ns": self.value_ns,
            "lower_ns": self.lower_ns,
            "upper_ns": self.upper_ns,
            "lower_rank": self.lower_rank,
            "upper_rank": self.upper_rank,
            "resolvable": self.resolvable,
            "dispersion": round(self.dispersion, 3) if math.isfinite(self.dispersion) else None,
            "blocks": self.blocks,
            "packets_needed": self.packets_needed,
            "why": self.why,
        }


def interval(ev: Evidence, key: str, level: float = DEFAULT_LEVEL) -> PercentileInterval:
    """The two-sided interval of headline percentile `key` at `level` (each side leaves out
    at most (1 − level)/2; a one-sided bound at confidence c is a side of level 2c − 1)."""
    check_level(level)
    q = percentiles.quantile_of_key(key)
    tail = (1.0 - level) / 2.0
    n = ev.n
    short = percentiles.by_key(key).short if key in percentiles.KEYS else key
    if n == 0:
        return PercentileInterval(key, level, None, None, None, 0, 1, 1.0, 0, packets_to_bound(q, tail), "no packets")
    rank = percentiles.nearest_rank(q, n)
    value = ev.value_at_rank(rank)
    dispersion, why = _dispersion_for(ev, rank, tail)
    if why is not None:
        return PercentileInterval(key, level, value, None, None, 0, n + 1, math.inf, ev.blocks, None, why)
    above = allowed_above(n, q, dispersion, tail)
    needed = needed_above(n, q, dispersion, tail)
    upper = n - above if above is not None else n + 1
    lower = n + 1 - needed if needed is not None else 0
    upper, lower = min(max(upper, rank), n + 1), max(min(lower, rank), 0)
    lower_ns = ev.value_at_rank(lower) if lower >= 1 else None
    upper_ns = ev.value_at_rank(upper) if upper <= n else None
    to_bound = packets_to_bound(q, tail, dispersion)
    if upper_ns is None:
        cluster = f" with its packets as clustered as measured (D = {dispersion:.1f})" if dispersion > 1.05 else ""
        top = " is their maximum and" if rank == n else ""
        why = f"the {short} of {format_count(n)} packets{top} is not bounded from above: that takes about {format_count(to_bound)}{cluster}"
    elif lower_ns is None:
        why = f"the {short} of {format_count(n)} packets is not bounded from below"
    return PercentileInterval(key, level, value, lower_ns, upper_ns, lower, upper, dispersion, ev.blocks, to_bound, why)


def _dispersion_for(ev: Evidence, rank: int, tail: float) -> tuple[float, str | None]:
    """The dispersion the interval at this rank allows for, or why there is none."""
    n = ev.n
    d = _dispersion(ev, ev.value_at_rank(rank))
    if d.wanders:
        return math.inf, _wandering(d)
    anchor = min(ANCHOR_CLUSTERS, max(1, ev.blocks // 2))
    if d.clusters >= anchor:
        return _inflated(d, tail), None
    dispersion = max(1.0, d.raw)
    exceed = max(n - rank, 1)
    while exceed < n // 2:
        exceed *= 2
        lower = _dispersion(ev, ev.value_at_rank(max(1, n - exceed)))
        if lower.wanders:
            return math.inf, _wandering(lower)
        if lower.clusters >= anchor:
            return max(dispersion, _inflated(lower, tail)), None
        dispersion = max(dispersion, lower.raw)
    return dispersion, None


def _wandering(d: _Dispersion) -> str:
    return (
        f"the latency wanders more slowly than the run's time blocks show (neighbouring blocks correlate "
        f"{d.lag1:.2f} with {d.blocks} blocks): one run cannot bound it; its repetitions can"
    )


def _ladder(n: int) -> list[int]:
    """Packet counts from the top whose values the exceedance ladder keeps: 0, 1, 2 … ×1.25
    up to half the packets."""
    out, j = [0], 1.0
    while int(j) < n // 2:
        if int(j) != out[-1]:
            out.append(int(j))
        j = max(j + 1, j * _LADDER_GROWTH)
    return out


def exceedance_ladder(ev: Evidence) -> list[list[int]]:
    """[value, packets above it] at values from the largest down to the median, ~1.25× more
    packets above each: enough to say about how many packets reach any budget."""
    if ev.n == 0:
        return []
    values = sorted(set(ev.histogram.at_ranks([ev.n - j for j in _ladder(ev.n)])))
    return [[v, ev.n - ev.histogram.count_at_most(v)] for v in values]


def bounds_document(
    ev: Evidence, keys: Iterable[str] | None = None, level: float = DEFAULT_LEVEL, confidence: float = DEFAULT_LEVEL
) -> BoundsDoc:
    """Two-sided intervals at `level` and one-sided bounds at `confidence` (the verdict's)
    of these headline percentiles (all of them by default)."""
    check_level(confidence)
    chosen = list(keys) if keys is not None else list(percentiles.KEYS)
    widths = {s.block_width_ns for s in ev.summaries}
    return {
        "level": level,
        "confidence": confidence,
        "samples": ev.n,
        "blocks": ev.blocks,
        "block_ns": widths.pop() if len(widths) == 1 else None,
        "percentiles": {k: interval(ev, k, level).as_dict() for k in chosen},
        "bounds": {k: interval(ev, k, 2.0 * confidence - 1.0).as_dict() for k in chosen},
        "above": exceedance_ladder(ev),
    }


def of_summaries(summaries: Sequence[SeriesSummary], **kwargs: Any) -> BoundsDoc:
    """`bounds_document` of these runs' packets pooled."""
    return bounds_document(Evidence(summaries), **kwargs)


def fraction_of(key: str) -> Fraction:
    """The exact quantile of a headline key."""
    return percentiles.quantile_of_key(key)
