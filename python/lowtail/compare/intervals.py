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
n/D effective packets, ranks scaled back by D (`lowtail.core.confidence`). Three safeguards:

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
for its clustering, or a wandering series), with the packets it would take.

The arithmetic runs natively (`_native.Evidence`, crates/lowtail-stats: `evidence`,
`dispersion`, `intervals`): the packets are indexed once, and every interval, bound and
count of a document is computed in one call; this module turns the answers into the
documents and sentences people read."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from lowtail import _native
from lowtail._native import Evidence as NativeEvidence
from lowtail._native import ExactHistogram, Interval, SeriesSummary
from lowtail.analyze.document import BoundsDoc, IntervalDoc
from lowtail.core import percentiles
from lowtail.core.confidence import check_level
from lowtail.core.units import format_count, format_counted

__all__ = ["DEFAULT_LEVEL", "Evidence", "PercentileInterval", "check_level", "interval", "bounds_document"]

# The confidence level of every interval lowtail states, unless asked for another.
DEFAULT_LEVEL = 0.95
# The fewest clusters a clustered percentile is bounded from (crates/lowtail-stats, dispersion.rs).
MIN_CLUSTERS = _native.MIN_CLUSTERS


class Evidence:
    """The packets an interval speaks for: one run's summary, or several runs' pooled
    (their exact distributions merged; their blocks kept apart, run by run), indexed once
    natively (`native`)."""

    def __init__(self, summaries: Sequence[SeriesSummary], histogram: ExactHistogram | None = None):
        self.summaries = list(summaries)
        self.native = NativeEvidence(self.summaries, histogram)
        self.n = self.native.count

    def value_at_rank(self, rank: int) -> int:
        """The rank-th smallest latency (1-based)."""
        return self.native.value_at_rank(rank)

    def count_at_least(self, value: int) -> int:
        """Packets at or above `value`: those that reach a budget of `value`."""
        return self.native.count_at_least(value)

    @property
    def blocks(self) -> int:
        """Blocks with packets, over all runs."""
        return self.native.blocks


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


def _why(iv: Interval, key: str, n: int) -> str | None:
    """Why the native interval is not bounded on a side, in words."""
    short = percentiles.by_key(key).short if key in percentiles.KEYS else key
    if iv.unbounded is None:
        return None
    if iv.unbounded == "no packets":
        return "no packets"
    if iv.unbounded == "wanders":
        return (
            f"the latency wanders more slowly than the run's time blocks show (neighbouring blocks still correlate "
            f"{iv.lag1:.2f} when merged down to {iv.lag1_blocks}): one run cannot bound it; its repetitions' spread "
            f"(`lowtail compare`) shows how far it moves from run to run"
        )
    if iv.unbounded == "few clusters":
        clusters, per_cluster = iv.clusters or 0, round(iv.per_cluster or 0)
        return (
            f"the packets above the {short} come in {format_counted(clusters, 'cluster')} of about "
            f"{format_counted(per_cluster, 'packet')} ({'a stall' if clusters == 1 else 'stalls'}), fewer than the "
            f"{MIN_CLUSTERS} it takes to measure how much their number varies: "
            f"one run does not bound it (a longer run, with more of them, can)"
        )
    if iv.unbounded == "below":
        return f"the {short} of {format_count(n)} packets is not bounded from below"
    d = iv.dispersion
    cluster = f", as clustered as measured (D = {d:.1f})" if d > 1.05 else ""
    top = " is their maximum and" if iv.at_maximum else ""
    return (
        f"the {short} of {format_count(n)} packets{top} is not bounded from above: "
        f"that takes about {format_count(iv.packets_to_bound)} packets{cluster}"
    )


def _percentile_interval(iv: Interval, key: str, level: float, n: int) -> PercentileInterval:
    return PercentileInterval(
        key,
        level,
        iv.value_ns,
        iv.lower_ns,
        iv.upper_ns,
        iv.lower_rank,
        iv.upper_rank,
        iv.dispersion,
        iv.blocks,
        iv.packets_to_bound,
        _why(iv, key, n),
    )


def interval(ev: Evidence, key: str, level: float = DEFAULT_LEVEL) -> PercentileInterval:
    """The two-sided interval of headline percentile `key` at `level` (each side leaves out
    at most (1 − level)/2; a one-sided bound at confidence c is a side of level 2c − 1)."""
    check_level(level)
    native = ev.native.interval(percentiles.quantile_of_key(key), level)
    return _percentile_interval(native, key, level, ev.n)


def bounds_document(
    ev: Evidence,
    keys: Iterable[str] | None = None,
    level: float = DEFAULT_LEVEL,
    confidence: float = DEFAULT_LEVEL,
    budgets: Iterable[int] = (),
) -> BoundsDoc:
    """Two-sided intervals at `level` and one-sided bounds at `confidence` (the verdict's)
    of these headline percentiles (all of them by default), with the exceedance ladder and,
    for each of `budgets`, the exact count of packets that reach it (what a verdict's advice
    is computed from): one native call computes the bounds."""
    check_level(confidence)
    chosen = list(keys) if keys is not None else list(percentiles.KEYS)
    two_sided, one_sided, ladder = ev.native.bounds([percentiles.quantile_of_key(k) for k in chosen], level, confidence)
    widths = {s.block_width_ns for s in ev.summaries}
    return {
        "level": level,
        "confidence": confidence,
        "samples": ev.n,
        "blocks": ev.blocks,
        "block_ns": widths.pop() if len(widths) == 1 else None,
        "percentiles": {k: _percentile_interval(iv, k, level, ev.n).as_dict() for k, iv in zip(chosen, two_sided)},
        "bounds": {
            k: _percentile_interval(iv, k, 2.0 * confidence - 1.0, ev.n).as_dict() for k, iv in zip(chosen, one_sided)
        },
        "above": [[v, c] for v, c in ladder],
        "reach": [[b, ev.count_at_least(b)] for b in sorted(set(budgets))],
    }


def of_summaries(summaries: Sequence[SeriesSummary], **kwargs: Any) -> BoundsDoc:
    """`bounds_document` of these runs' packets pooled."""
    return bounds_document(Evidence(summaries), **kwargs)


def fraction_of(key: str) -> Fraction:
    """The exact quantile of a headline key."""
    return percentiles.quantile_of_key(key)
