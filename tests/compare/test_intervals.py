"""Order-statistic confidence intervals of percentiles: their coverage on simulated data is
the one they state (within the binomial error of 2,000 simulations), never below the
level asked, and the percentiles too few packets cannot bound are said to be so."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lowtail.compare.intervals import packets_to_resolve, rank_interval

SIMULATIONS = 2_000


@pytest.mark.parametrize(
    ("n", "fraction", "level"),
    [(101, 0.5, 0.95), (1_000, 0.99, 0.95), (5_000, 0.999, 0.95), (2_000, 0.9, 0.90)],
)
def test_intervals_cover_the_true_percentile_as_often_as_they_state(n, fraction, level):
    rng = np.random.default_rng(20_240_611 + n)
    ri = rank_interval(n, fraction, level)
    assert ri.resolvable and ri.coverage >= level
    true = -math.log(1.0 - fraction)  # the exponential distribution's quantile
    samples = np.sort(rng.exponential(size=(SIMULATIONS, n)), axis=1)
    lower, upper = samples[:, ri.lower - 1], samples[:, ri.upper - 1]
    covered = np.mean((lower <= true) & (true <= upper))
    error = math.sqrt(ri.coverage * (1 - ri.coverage) / SIMULATIONS)
    assert abs(covered - ri.coverage) <= 4 * error, (covered, ri.coverage)
    assert covered >= level - 4 * error


def test_the_ranks_lie_around_the_nearest_rank():
    for n, fraction in [(90_000, 0.9999), (1_000_000, 0.99999), (50, 0.5)]:
        ri = rank_interval(n, fraction)
        nearest = math.ceil(fraction * n)
        assert ri.lower <= nearest <= ri.upper


def test_too_few_packets_cannot_bound_a_high_percentile():
    # 30,000 packets: the 99.999th percentile lies above all of them with probability
    # 0.99999^30000 = 74 %, so nothing bounds it from above.
    ri = rank_interval(30_000, 0.99999)
    assert ri.bounded_below and not ri.bounded_above and ri.upper == 30_001 and not ri.resolvable
    # Three such runs pooled bound the 99.99th percentile (e^-9 chance that all are below).
    assert rank_interval(90_000, 0.9999).resolvable
    assert not rank_interval(30_000, 0.9999).resolvable


@pytest.mark.parametrize("fraction", [0.99, 0.999, 0.9999, 0.99999])
def test_packets_to_resolve_is_the_first_count_that_does(fraction):
    n = packets_to_resolve(fraction)
    assert rank_interval(n, fraction).resolvable
    assert not rank_interval(n - 1, fraction).resolvable
    assert n == math.ceil(math.log(0.025) / math.log(fraction))


def test_a_level_outside_zero_and_one_is_refused():
    with pytest.raises(ValueError, match="between 0 and 1"):
        rank_interval(100, 0.5, 95)
