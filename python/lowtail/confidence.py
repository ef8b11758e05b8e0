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
is exact arithmetic given D: binomial tails summed term by term (standard library only, so
that every command and page can judge a verdict without importing scipy), or for counts
with a standard deviation above a few thousand, where a rank more or less does not
matter, the normal approximation with its skewness term (Cornish–Fisher)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

# The most packets a projection searches up to: beyond, "no number of packets".
_MOST_PACKETS = 10**15
# Binomial counts with a standard deviation above this are taken as normal (with their
# skewness): summing their terms would cost more than a rank is worth.
_EXACT_SD = 2_000.0


def _pmf(n: int, x: float, k: int) -> float:
    """P(E = k) for E ~ Binomial(n, x), 0 < x < 1."""
    if k < 0 or k > n:
        return 0.0
    log = math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * math.log(x) + (n - k) * math.log1p(-x)
    return math.exp(log)


def _approx_cdf(n: int, x: float, k: int) -> float:
    """P(E ≤ k) by the normal approximation with continuity and skewness corrections."""
    from statistics import NormalDist

    mean, sd = n * x, math.sqrt(n * x * (1 - x))
    w = (k + 0.5 - mean) / sd
    skew = (1 - 2 * x) / sd
    unit = NormalDist()
    return min(1.0, max(0.0, unit.cdf(w) - unit.pdf(w) * skew * (w * w - 1) / 6))


def binomial_cdf(n: int, x: float, k: int) -> float:
    """P(E ≤ k) for E ~ Binomial(n, x): the terms summed from k away from the mean (the
    side with the smaller sum), until they no longer count."""
    if k < 0:
        return 0.0
    if k >= n or x <= 0.0:
        return 1.0
    if x >= 1.0:
        return 0.0
    mean, sd = n * x, math.sqrt(n * x * (1 - x))
    if sd > _EXACT_SD:
        return _approx_cdf(n, x, k)
    if k <= mean:  # the lower tail: pmf(i − 1) = pmf(i) · i/(n − i + 1) · (1 − x)/x
        term = total = _pmf(n, x, k)
        i, ratio = k, (1 - x) / x
        while i > 0 and term > total * 1e-17:
            term *= i / (n - i + 1) * ratio
            total += term
            i -= 1
        return min(1.0, total)
    term = total = _pmf(n, x, k + 1)  # 1 − the upper tail: pmf(i + 1) = pmf(i) · (n − i)/(i + 1) · x/(1 − x)
    i, ratio = k + 1, x / (1 - x)
    while i < n and term > total * 1e-17:
        term *= (n - i) / (i + 1) * ratio
        total += term
        i += 1
    return max(0.0, 1.0 - total)


def binomial_ppf(n: int, x: float, p: float) -> int:
    """The smallest k with P(E ≤ k) ≥ p, E ~ Binomial(n, x): from the Cornish–Fisher
    guess, stepped a term at a time to the exact answer (where the terms are summed)."""
    from statistics import NormalDist

    if p <= 0.0:
        return 0
    mean, sd = n * x, math.sqrt(n * x * (1 - x))
    z = NormalDist().inv_cdf(min(max(p, 1e-300), 1 - 1e-16))
    skew = (1 - 2 * x) / sd if sd > 0 else 0.0
    k = min(n, max(0, math.ceil(mean + sd * (z + skew * (z * z - 1) / 6) - 0.5)))
    if sd > _EXACT_SD:
        return k
    c = binomial_cdf(n, x, k)
    if c >= p:
        while k > 0 and c - _pmf(n, x, k) >= p:
            c -= _pmf(n, x, k)
            k -= 1
        return k
    while c < p and k < n:
        k += 1
        c += _pmf(n, x, k)
    return k


def check_level(level: float) -> None:
    """ValueError unless 0 < level < 1."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"a confidence level is between 0 and 1 (got {level})")


def _exceed(q: Fraction | float) -> float:
    """The share of packets above the q-quantile, 1 − q, as the float scipy takes (from the
    exact fraction, so 0.99999 gives 1e-05, not 1.0000000000065512e-05)."""
    return float(1 - Fraction(q)) if not isinstance(q, float) else float(1 - Fraction(repr(q)))


def _effective(n: int, dispersion: float) -> int:
    """The effective sample of n packets over-dispersed by `dispersion` (at least 1)."""
    return int(math.floor(n / max(1.0, dispersion)))


def allowed_above(n: int, q: Fraction | float, dispersion: float, tail: float) -> int | None:
    """The most packets above a value that still let it bound the q-quantile from above
    with error `tail`: the largest e with P(E ≤ e) ≤ tail, E the over-dispersed count above
    the true quantile. None when not even zero does (too few packets)."""
    ne, d = _effective(n, dispersion), max(1.0, dispersion)
    if ne < 1 or tail <= 0.0:
        return None
    x = _exceed(q)
    k = binomial_ppf(ne, x, tail)  # the smallest k with P(E ≤ k) ≥ tail
    e = k if binomial_cdf(ne, x, k) <= tail else k - 1
    return int(math.floor(e * d)) if e >= 0 else None


def needed_above(n: int, q: Fraction | float, dispersion: float, tail: float) -> int | None:
    """The fewest packets above a value that show it lies below the q-quantile (a lower
    bound) with error `tail`: the smallest f with P(E ≥ f) ≤ tail, scaled by the dispersion.
    None when more than n would be needed."""
    ne, d = _effective(n, dispersion), max(1.0, dispersion)
    if ne < 1 or tail <= 0.0:
        return None
    x = _exceed(q)
    f = binomial_ppf(ne, x, 1.0 - tail) + 1  # the smallest f with P(E ≥ f) ≤ tail
    needed = int(math.ceil(f * d))
    return needed if needed <= n else None


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
    tail = (1.0 - level) / 2.0
    if n <= 0:
        return RankInterval(n, 0, n + 1)
    above = allowed_above(n, q, dispersion, tail)
    needed = needed_above(n, q, dispersion, tail)
    upper = n - above if above is not None else n + 1
    lower = n + 1 - needed if needed is not None else 0
    return RankInterval(n, max(lower, 0), min(max(upper, 1), n + 1))


def packets_to_bound(q: Fraction | float, tail: float, dispersion: float = 1.0) -> int:
    """The fewest packets whose largest bounds the q-quantile from above with error `tail`
    (q^(n/D) ≤ tail): the packets a percentile needs before any interval can be stated."""
    x = _exceed(q)
    base = max(1, math.ceil(math.log(tail) / math.log1p(-x)))
    while base > 1 and allowed_above(base - 1, q, 1.0, tail) is not None:
        base -= 1
    while allowed_above(base, q, 1.0, tail) is None:
        base += 1
    return int(math.ceil(base * max(1.0, dispersion)))


def _first(ok: Callable[[int], bool], start: int) -> int | None:
    """The first n ≥ start with ok(n), for an `ok` that stays true once true (searched by
    doubling, then halving); None when none is below _MOST_PACKETS."""
    lo, hi = start, max(start, 1)
    while not ok(hi):
        lo, hi = hi, hi * 2
        if hi > _MOST_PACKETS:
            return None
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return hi


def packets_to_pass(q: Fraction | float, share_above: float, dispersion: float, tail: float) -> int | None:
    """Packets in all a run needs for its upper bound of the q-quantile to fall below a
    budget that a `share_above` of its packets reach, if that share stays as measured;
    None when it never would (the share is at or above 1 − q)."""
    if share_above >= _exceed(q):
        return None

    def passes(n: int) -> bool:
        allowed = allowed_above(n, q, dispersion, tail)
        return allowed is not None and math.ceil(share_above * n) <= allowed

    return _first(passes, packets_to_bound(q, tail, dispersion))


def packets_to_fail(q: Fraction | float, share_above: float, dispersion: float, tail: float) -> int | None:
    """Packets in all a run needs for its lower bound of the q-quantile to reach a budget
    that a `share_above` of its packets reach, if that share stays as measured; None when
    it never would (the share is at or below 1 − q)."""
    if share_above <= _exceed(q):
        return None

    def fails(n: int) -> bool:
        needed = needed_above(n, q, dispersion, tail)
        return needed is not None and math.floor(share_above * n) >= needed

    return _first(fails, 1)
