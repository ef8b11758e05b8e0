"""Exact distributions of matched packets: one run's, from the summary its analysis stored
(or, for runs stored before analyses kept one, made again from its Parquet series), and a
configuration's, pooled from its repetitions — the union of their packets, counted in the
native exact histogram (the one every analysis computes its figures with), so a pooled
percentile is what one analysis of all those packets would report. The runs' time blocks
stay apart, run by run: the intervals measure how the packets cluster within each run."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from lowtail._native import ExactHistogram, SeriesSummary, SummaryError
from lowtail.analyze.document import BoundsDoc, IntervalDoc
from lowtail.compare.intervals import DEFAULT_LEVEL, Evidence, bounds_document, interval
from lowtail.core import percentiles, series
from lowtail.core.errors import UserError

# Points per decade of 1/(1−p) on the percentile curves a comparison stores, and the
# fractions of its CDF points (0, 1/1000, ..., 1).
CURVE_STEPS_PER_DECADE = 20
CDF_POINTS = 1000


@dataclass
class Distribution:
    """The exact distribution of some packets (one run's, or several runs' pooled), with
    the time blocks of each run they came from."""

    summaries: list[SeriesSummary] = field(default_factory=list)
    hist: ExactHistogram = field(default_factory=ExactHistogram)
    # The packets indexed for the intervals (once: every interval asked of it is then a few
    # binary searches), made again if packets were added since.
    _evidence: Evidence | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def of(cls, summary: SeriesSummary) -> Distribution:
        """One run's packets."""
        return cls([summary], summary.histogram)

    @property
    def samples(self) -> int:
        """Packets counted."""
        return self.hist.count

    def figures(self, keys: Iterable[str]) -> dict[str, int | None]:
        """Nearest-rank values at these figures ("p99_9", "min", "max"), and `samples`."""
        keys = list(keys)
        found = self.hist.quantiles([percentiles.quantile_of_key(k) for k in keys])
        values: list[int | None] = list(found) if found is not None else [None] * len(keys)
        return {**dict(zip(keys, values)), "samples": self.samples}

    def evidence(self) -> Evidence:
        """What the intervals read: the pooled histogram and each run's blocks."""
        ev = self._evidence
        if ev is None or ev.n != self.hist.count or len(ev.summaries) != len(self.summaries):
            ev = self._evidence = Evidence(self.summaries, self.hist)
        return ev

    def interval(self, key: str, level: float = DEFAULT_LEVEL) -> IntervalDoc:
        """The interval of a headline percentile that allows for clustered packets (see
        `compare.intervals`)."""
        return interval(self.evidence(), key, level).as_dict()

    def bounds(self, keys: Iterable[str], level: float, confidence: float, budgets: Iterable[int] = ()) -> BoundsDoc:
        """Intervals at `level` and one-sided bounds at `confidence` of these percentiles, and
        the exact count of packets reaching each of `budgets`."""
        return bounds_document(self.evidence(), keys, level, confidence, budgets)

    def curve(self, fractions: list[float]) -> list[tuple[float, int]]:
        """(fraction, value) at each fraction: an HDR percentile curve, exact at every point."""
        values = self.hist.quantiles(_exact_grid(tuple(fractions))) or []
        return list(zip(fractions, values))

    def cdf(self, points: int = CDF_POINTS) -> list[tuple[float, int]]:
        """(fraction, value) at the fractions k/points, k = 0..points."""
        return self.curve([k / points for k in range(points + 1)])


@functools.lru_cache(maxsize=4)
def _exact_grid(fractions: tuple[float, ...]) -> list[Fraction]:
    """The exact quantiles of a curve's grid, made once for all the curves a comparison draws
    on it (the pooled one, each repetition's, the floor's)."""
    return [percentiles.exact_quantile(f) for f in fractions]


def read_run(
    stored: bytes | None, series_path: str | Path | None, on_rows: Callable[[int], None] | None = None
) -> Distribution:
    """One run's distribution: from its stored summary, else from its matched series (made
    again as its analysis made it). UserError when neither can be read."""
    problem = None
    if stored is not None:
        try:
            summary = SeriesSummary.from_bytes(stored)
        except SummaryError as e:
            problem = f"its stored latency summary is damaged ({e})"
        else:
            if on_rows:
                on_rows(summary.count)
            return Distribution.of(summary)
    if series_path:
        summary = series.summary_of(series_path)
        if on_rows:
            on_rows(summary.count)
        return Distribution.of(summary)
    raise UserError(problem or "neither its latency summary nor its matched series was kept")


def read_series(path: str | Path) -> Distribution:
    """The distribution of a matched series file (streamed)."""
    return Distribution.of(series.summary_of(path))


def pooled(parts: Iterable[Distribution]) -> Distribution:
    """The distribution of all these parts' packets together."""
    out = Distribution()
    for part in parts:
        out.hist.merge(part.hist)
        out.summaries += part.summaries
    return out


def curve_fractions(samples: int) -> list[float]:
    """Where a percentile curve is evaluated: 1/(1−p) = 10^(k/20) for k = 0, 1, ... while it
    stays within the packets there are (beyond, every percentile is their maximum), and 1
    (the maximum itself)."""
    out, k = [], 0
    while 10 ** (k / CURVE_STEPS_PER_DECADE) <= max(samples, 1):
        out.append(1.0 - 10 ** (-k / CURVE_STEPS_PER_DECADE))
        k += 1
    return [*out, 1.0]
