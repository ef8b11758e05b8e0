"""Distribution-free confidence intervals of percentiles, from order statistics.

Among n samples, the number K at or below the true p-quantile ξ_p is Binomial(n, p)
whatever the distribution. So [X_(l), X_(u)] — the l-th and u-th smallest samples —
holds ξ_p whenever l ≤ K ≤ u − 1, with probability P(l ≤ K ≤ u − 1), computed exactly
from the binomial distribution (scipy). The ranks are chosen around the nearest rank
⌈p·n⌉ with at most (1 − level)/2 left out on each side, so the coverage is at least the
level asked (more where the binomial's steps are coarse; ties only raise it).

When no rank l ≥ 1 (or u ≤ n) leaves out little enough, the data cannot bound the
percentile on that side: a 99.999th percentile of 30,000 packets is above their maximum
with probability 0.99999^30000 = 74 %, so the maximum does not bound it. Such a
percentile is not resolvable with these packets; `packets_to_resolve` says how many
would make it so."""

from __future__ import annotations

import math
from dataclasses import dataclass

# The confidence level of every interval lowtail states, unless asked for another.
DEFAULT_LEVEL = 0.95


@dataclass(frozen=True)
class RankInterval:
    """The ranks (1-based) of the order statistics that bound a percentile: `lower` is 0
    when nothing bounds it from below, `upper` is n + 1 when nothing bounds it from above.
    `coverage` is the exact probability that [X_(lower), X_(upper)] holds the percentile
    (for a continuous distribution; ties only raise it)."""

    n: int
    fraction: float
    level: float
    lower: int
    upper: int
    coverage: float

    @property
    def bounded_below(self) -> bool:
        """Whether a sample bounds the percentile from below."""
        return self.lower >= 1

    @property
    def bounded_above(self) -> bool:
        """Whether a sample bounds the percentile from above."""
        return self.upper <= self.n

    @property
    def resolvable(self) -> bool:
        """Whether the data bound the percentile on both sides."""
        return self.bounded_below and self.bounded_above


def rank_interval(n: int, fraction: float, level: float = DEFAULT_LEVEL) -> RankInterval:
    """The order-statistic interval of the `fraction`-quantile among `n` samples at
    confidence `level` (0.95)."""
    from scipy.stats import binom

    check_level(level)
    if n <= 0:
        return RankInterval(n, fraction, level, 0, n + 1, 0.0)
    tail = (1.0 - level) / 2.0
    # K ~ Binomial(n, p): samples at or below the percentile. lower: the smallest k with
    # P(K ≤ k) ≥ tail, so P(K < lower) < tail; upper − 1: the smallest k with
    # P(K ≤ k) ≥ 1 − tail, so P(K ≥ upper) ≤ tail.
    lower = int(binom.ppf(tail, n, fraction))
    upper = int(binom.ppf(1.0 - tail, n, fraction)) + 1
    lower, upper = max(lower, 0), min(upper, n + 1)
    coverage = float(binom.cdf(upper - 1, n, fraction) - (binom.cdf(lower - 1, n, fraction) if lower >= 1 else 0.0))
    return RankInterval(n, fraction, level, lower, upper, coverage)


def packets_to_resolve(fraction: float, level: float = DEFAULT_LEVEL) -> int:
    """The fewest samples whose maximum bounds the `fraction`-quantile from above at this
    level: fraction^n ≤ (1 − level)/2 (the lower side is bounded long before)."""
    check_level(level)
    tail = (1.0 - level) / 2.0
    n = max(1, math.ceil(math.log(tail) / math.log(fraction)))
    # Guard the floating-point edge: step to the exact first n the interval resolves at.
    while n > 1 and rank_interval(n - 1, fraction, level).resolvable:
        n -= 1
    while not rank_interval(n, fraction, level).resolvable:
        n += 1
    return n


def check_level(level: float) -> None:
    """ValueError unless 0 < level < 1."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"a confidence level is between 0 and 1 (got {level})")
