"""Synthetic latency series whose true percentiles are known: the models lowtail's
confidence intervals, verdicts and differences are checked against (tests/compare and
bench/stated_confidence.py). Every series is one latency per packet, one packet every
`INTERVAL_NS` (100 kpps), integer nanoseconds, in PRE order.

- `independent`: every packet on its own (a shifted gamma): the classical assumption.
- `stalls`: a FIFO behind random stalls. Each packet starts a stall with probability
  `stall_rate · T`; a stall of exponential length holds every packet that arrives while
  it lasts until its end (they leave at once: the queue drains instantly), so the packets
  behind a stall have decreasing latencies — the clusters a real device makes after a
  spike. Its latency distribution is known exactly (`stalls_quantile`).
- `lindley`: the same stalls in front of a server that drains the queue at its own pace
  (a Lindley recursion): longer clusters; the truth comes from a long seeded series.

Run-to-run variation (`repetitions`): each run's latencies shifted by a run-level normal
offset and scaled by a run-level lognormal factor, as reboots, placements and clock
phases move a device's latency between runs."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

INTERVAL_NS = 10_000
BASE_NS = 5_000
# The jitter every packet has: gamma with shape 4 and scale 500 ns (mean 2 µs).
JITTER_SHAPE, JITTER_SCALE = 4.0, 500.0


def timestamps(n: int) -> np.ndarray:
    """PRE timestamps of n packets at 100 kpps."""
    return np.arange(n, dtype=np.int64) * INTERVAL_NS


def _jitter(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.gamma(JITTER_SHAPE, JITTER_SCALE, n)


def independent(rng: np.random.Generator, n: int) -> np.ndarray:
    """Independent packets: BASE + gamma jitter."""
    return (BASE_NS + _jitter(rng, n)).astype(np.int64)


def independent_quantile(q: float) -> int:
    """The exact q-quantile of `independent` (of its integer latencies)."""
    from scipy.stats import gamma

    return math.floor(BASE_NS + gamma.ppf(q, JITTER_SHAPE, scale=JITTER_SCALE))


@dataclass(frozen=True)
class Stalls:
    """Stalls: `rate` per second (at INTERVAL_NS per packet), exponential with `mean_ns`."""

    rate: float = 20.0
    mean_ns: float = 100_000.0

    @property
    def per_packet(self) -> float:
        return self.rate * INTERVAL_NS / 1e9


def stalls(rng: np.random.Generator, n: int, model: Stalls = Stalls()) -> np.ndarray:
    """A FIFO behind stalls that drains instantly: packet i waits max over earlier stalls j
    of (their length − (i − j)·T), and 0 without one; plus the jitter."""
    hit = rng.random(n) < model.per_packet
    ends = np.full(n, -np.inf)
    index = np.flatnonzero(hit)
    ends[index] = rng.exponential(model.mean_ns, len(index)) + index * float(INTERVAL_NS)
    wait = np.maximum(np.maximum.accumulate(ends) - np.arange(n) * float(INTERVAL_NS), 0.0)
    return (BASE_NS + wait + _jitter(rng, n)).astype(np.int64)


def _wait_cdf(w: float, model: Stalls) -> float:
    """P(wait ≤ w): no earlier packet started a stall that lasts past this one plus w: the
    product over k ≥ 0 of (1 − t_k), t_k = s·e^(−(w + kT)/μ), summed in closed form as
    log(1 − t) = −t − t²/2 − t³/3 − … over the geometric t_k (t ≤ s, a few 1e-3 at most:
    four terms are exact to double precision, and long stalls need no million-term loop)."""
    if w < 0:
        return 0.0
    s, mu = model.per_packet, model.mean_ns
    first, ratio = s * math.exp(-w / mu), math.exp(-INTERVAL_NS / mu)
    log = -sum(first**j / j / (1.0 - ratio**j) for j in range(1, 6))
    return math.exp(log)


def stalls_quantile(q: float, model: Stalls = Stalls()) -> int:
    """The exact q-quantile of `stalls` (of its integer latencies): the wait's distribution
    convolved with the jitter's, inverted numerically."""
    from scipy import integrate, optimize
    from scipy.stats import gamma

    jitter = gamma(JITTER_SHAPE, scale=JITTER_SCALE)
    none = _wait_cdf(0.0, model)
    widest = float(jitter.isf(1e-16))  # the jitter's mass lies below this

    def cdf(x: float) -> float:
        # The wait is 0 with probability `none`, else continuous: P(J ≤ x) · none + ∫ ...
        body = jitter.cdf(x) * none
        top = min(x, widest)
        inner, _ = integrate.quad(lambda g: (_wait_cdf(x - g, model) - none) * jitter.pdf(g), 0.0, top, limit=200)
        return body + inner

    hi = 50 * model.mean_ns + widest
    x = optimize.brentq(lambda v: cdf(v) - q, 0.0, hi, xtol=1e-2, rtol=1e-13)
    return math.floor(BASE_NS + x)


def lindley(rng: np.random.Generator, n: int, model: Stalls = Stalls(), service_ns: float = 3_000.0) -> np.ndarray:
    """A server that takes `service_ns` plus gamma noise per packet, and a stall's length
    on the packet it hits; the queue drains at the server's pace (Lindley's recursion)."""
    service = service_ns + rng.gamma(2.0, 400.0, n)
    hit = rng.random(n) < model.per_packet
    service[hit] += rng.exponential(model.mean_ns, int(hit.sum()))
    c = np.concatenate(([0.0], np.cumsum(service - INTERVAL_NS)))[:-1]
    wait = c - np.minimum.accumulate(np.minimum(c, 0.0))
    return (BASE_NS + wait + service).astype(np.int64)


# Rare stalls, the unit a percentile's interval must count when they dominate it (issue 35):
# 1 ms stalls about 5 times in a 200,000-packet run, 10 times in a 1,000,000-packet one, and
# 60 ms stalls about 3 times in a 200,000-packet run.
RARE_200K = Stalls(rate=2.5, mean_ns=1_000_000.0)
RARE_1M = Stalls(rate=1.0, mean_ns=1_000_000.0)
LONG_RARE = Stalls(rate=1.5, mean_ns=60_000_000.0)


def stalls_of(model: Stalls):  # type: ignore[no-untyped-def]
    """`stalls` with this model, as a (rng, n) → latencies function."""
    return lambda rng, n: stalls(rng, n, model)


def microseconds(x: np.ndarray) -> np.ndarray:
    """Latencies as a capture with microsecond timestamps gives them: both stamps rounded
    down to the microsecond, so their difference is a whole number of microseconds (ties)."""
    pre = rng_free_phase = np.arange(len(x), dtype=np.int64) * INTERVAL_NS
    del rng_free_phase
    return (pre + x) // 1_000 * 1_000 - pre // 1_000 * 1_000


def two_level(x: np.ndarray, rng: np.random.Generator, levels_ns: tuple[int, int] = (0, 300)) -> np.ndarray:
    """One run's latencies on one of two base levels, equally likely (one core placement or
    another: base latency 3300 or 3600 ns in issue 35's runs)."""
    return x + int(levels_ns[int(rng.integers(0, 2))])


def shifted(x: np.ndarray, rng: np.random.Generator, shift_sd_ns: float, scale_sd: float) -> np.ndarray:
    """One run's latencies moved by run-to-run variation: + N(0, shift_sd) ns, × lognormal(0, scale_sd)."""
    return (x * math.exp(rng.normal(0.0, scale_sd)) + rng.normal(0.0, shift_sd_ns)).astype(np.int64)
