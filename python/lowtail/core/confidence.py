"""The arithmetic of percentile bounds: which order statistics bound a percentile of n
packets at a confidence, when their exceedances are over-dispersed by a factor D, and how
many packets a bound or a verdict needs.

Among n independent packets, the number E above the true p-quantile is Binomial(n, 1 − p)
whatever the distribution, so order statistics bound the percentile with an exactly known
confidence (the classical distribution-free interval). Packets of a real device are not
independent: a stall delays the packets queued behind it, so exceedances come in clusters
and E varies D times more than the binomial says (D, the dispersion, is measured from the
run's time blocks: `compare.intervals`). E/D then behaves as a binomial count of n/D
packets — the effective sample — and the ranks are those of n/D independent packets,
scaled back by D (rounded outward, so the bound is never tighter than the effective sample
allows). With D = 1 these are the classical ranks.

The bounds' own uncertainty (D is estimated) is `compare.intervals`' business; this module
is exact arithmetic given D: binomial tails summed term by term, or for counts with a
standard deviation above a few thousand, where a rank more or less does not matter, the
normal approximation with its skewness term (Cornish–Fisher). The arithmetic is native
(crates/lowtail-stats, `confidence`: the intervals computed there use the same functions);
this module gives it to Python with its quantiles exact."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from lowtail import _native


def binomial_cdf(n: int, x: float, k: int) -> float:
    """P(E ≤ k) for E ~ Binomial(n, x)."""
    return _native.binomial_cdf(n, x, k)


def binomial_ppf(n: int, x: float, p: float) -> int:
    """The smallest k with P(E ≤ k) ≥ p, E ~ Binomial(n, x)."""
    return _native.binomial_ppf(n, x, p)


def student_t(p: float, df: int) -> float:
    """Student's t quantile: exact for 1 and 2 degrees of freedom, else the Cornish–Fisher
    expansion in the normal quantile (within 0.1 % from 3 degrees of freedom at the tails
    used here; tests/compare/test_intervals.py checks it against scipy)."""
    return _native.student_t(p, df)


def check_level(level: float) -> None:
    """ValueError unless 0 < level < 1."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"a confidence level is between 0 and 1 (got {level})")


def _exact(q: Fraction | float) -> Fraction:
    """A quantile as the exact fraction its decimal names (0.99999 is 99999/100000)."""
    return Fraction(repr(q)) if isinstance(q, float) else Fraction(q)


@dataclass(frozen=True)
class RankInterval:
    """The ranks (1-based) of the order statistics that bound a percentile of `n` packets:
    `lower` is 0 when nothing bounds it from below, `upper` is n + 1 when nothing bounds it
    from above."""

    n: int
    lower: int
    upper: int

    @property
    def bounded_below(self) -> bool:
        """Whether a packet bounds the percentile from below."""
        return self.lower >= 1

    @property
    def bounded_above(self) -> bool:
        """Whether a packet bounds the percentile from above."""
        return self.upper <= self.n

    @property
    def resolvable(self) -> bool:
        """Whether the packets bound the percentile on both sides."""
        return self.bounded_below and self.bounded_above


def rank_interval(n: int, q: Fraction | float, level: float, dispersion: float = 1.0) -> RankInterval:
    """The ranks of the two-sided interval of the q-quantile at `level` (each side leaves
    out at most (1 − level)/2) among n packets with this dispersion."""
    check_level(level)
    lower, upper = _native.rank_interval(max(n, 0), _exact(q), level, dispersion)
    return RankInterval(n, lower, upper)


def packets_to_bound(q: Fraction | float, tail: float, dispersion: float = 1.0) -> int:
    """The fewest packets whose largest bounds the q-quantile from above with error `tail`
    (q^(n/D) ≤ tail): the packets a percentile needs before any interval can be stated."""
    return _native.packets_to_bound(_exact(q), tail, dispersion)


def packets_to_pass(q: Fraction | float, share_above: float, dispersion: float, tail: float) -> int | None:
    """Packets in all a run needs for its upper bound of the q-quantile to fall below a
    budget that a `share_above` of its packets reach, if that share stays as measured;
    None when it never would (the share is at or above 1 − q)."""
    return _native.packets_to_pass(_exact(q), share_above, dispersion, tail)


def packets_to_fail(q: Fraction | float, share_above: float, dispersion: float, tail: float) -> int | None:
    """Packets in all a run needs for its lower bound of the q-quantile to reach a budget
    that a `share_above` of its packets reach, if that share stays as measured; None when
    it never would (the share is at or below 1 − q)."""
    return _native.packets_to_fail(_exact(q), share_above, dispersion, tail)
