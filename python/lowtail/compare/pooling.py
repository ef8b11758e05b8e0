"""Exact distributions of matched packets: one run's, read from its Parquet series in
batches, and a configuration's, pooled from its repetitions — the union of their packets,
counted in the native exact histogram (the one every analysis computes its figures with),
so a pooled percentile is what one analysis of all those packets would report, in memory
that follows the spread of the values, not their number."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lowtail import percentiles, series
from lowtail._native import ExactHistogram
from lowtail.compare.intervals import DEFAULT_LEVEL, packets_to_resolve, rank_interval

# Points per decade of 1/(1−p) on the percentile curves a comparison stores, and the
# fractions of its CDF points (0, 1/1000, ..., 1).
CURVE_STEPS_PER_DECADE = 20
CDF_POINTS = 1000


@dataclass
class Distribution:
    """The exact distribution of some packets (one run's, or several runs' pooled)."""

    hist: ExactHistogram = field(default_factory=ExactHistogram)

    @property
    def samples(self) -> int:
        """Packets counted."""
        return self.hist.count

    def figures(self, keys: Iterable[str]) -> dict[str, int | None]:
        """Nearest-rank values at these figures ("p99_9", "min", "max"), and `samples`."""
        keys = list(keys)
        found = self.hist.quantiles([percentiles.quantile_of_key(k) for k in keys])
        values: list[int | None] = list(found) if found else [None] * len(keys)
        return {**dict(zip(keys, values)), "samples": self.samples}

    def interval(self, key: str, level: float = DEFAULT_LEVEL) -> dict[str, Any]:
        """The distribution-free interval of a headline percentile (see `intervals`): its
        bounds in ns (None on a side the data cannot bound), their ranks, the exact
        coverage, whether it is resolvable and how many packets would make it so."""
        fraction = percentiles.fraction(key)
        ri = rank_interval(self.samples, fraction, level)
        lower = self.hist.at_ranks([ri.lower])[0] if ri.bounded_below else None
        upper = self.hist.at_ranks([ri.upper])[0] if ri.bounded_above else None
        return {
            "lower_ns": lower,
            "upper_ns": upper,
            "lower_rank": ri.lower,
            "upper_rank": ri.upper,
            "coverage": ri.coverage,
            "resolvable": ri.resolvable,
            "packets_needed": packets_to_resolve(fraction, level),
        }

    def curve(self, fractions: list[float]) -> list[tuple[float, int]]:
        """(fraction, value) at each fraction: an HDR percentile curve, exact at every point."""
        values = self.hist.quantiles([percentiles.exact_quantile(f) for f in fractions]) or []
        return list(zip(fractions, values))

    def cdf(self, points: int = CDF_POINTS) -> list[tuple[float, int]]:
        """(fraction, value) at the fractions k/points, k = 0..points."""
        return self.curve([k / points for k in range(points + 1)])

    def add(self, other: Distribution) -> None:
        """Pool `other`'s packets into this one."""
        self.hist.merge(other.hist)


def read_series(path: str | Path, on_batch: Callable[[int], None] | None = None) -> Distribution:
    """The distribution of a matched series file, streamed; `on_batch(rows)` after each batch."""
    d = Distribution()
    for latencies in series.iter_latencies(path):
        d.hist.record(latencies)  # type: ignore[arg-type]  # an int64 array is a buffer
        if on_batch:
            on_batch(len(latencies))
    return d


def pooled(parts: Iterable[Distribution]) -> Distribution:
    """The distribution of all these parts' packets together."""
    out = Distribution()
    for part in parts:
        out.add(part)
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
