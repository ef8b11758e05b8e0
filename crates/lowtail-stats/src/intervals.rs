//! Confidence intervals of percentiles that hold when packets are not independent, every
//! one a run's figures need computed in one native call over its `Evidence`.
//!
//! A device delays packets in clusters: a stall holds up every packet queued behind it, a
//! batch releases 32 at once. The packets above a percentile then come in clusters, and
//! their number varies far more from run to run than for independent packets. The method
//! (docs/statistics.md says why this one, and what it assumes): at the percentile's
//! estimate the variance of the packets above it is measured between the run's time
//! blocks (batch means, as a ratio estimator over blocks of unequal size) and divided by
//! what independent packets would give: the dispersion D ≥ 1 (`dispersion`). The interval
//! is then the distribution-free order-statistic interval of n/D effective packets, ranks
//! scaled back by D (`confidence`).
//!
//! How D is estimated is `dispersion`'s business alone: this module asks it for the
//! dispersion at a rank and turns the answer into ranks, values and reasons.

use crate::confidence::{allowed_above, exceed, needed_above, packets_to_bound};
use crate::dispersion::{dispersion_for, Unmeasurable, MIN_CLUSTERS};
use crate::evidence::Evidence;
use crate::rank::{nearest_rank, Quantile};

/// Why a percentile has no bound on a side.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Unbounded {
    /// No packet at all.
    NoPackets,
    /// The dispersion could not be measured (see `Unmeasurable`): not bounded by one run.
    Unmeasurable(Unmeasurable),
    /// Too few packets for their clustering to bound it from above; `at_maximum` when the
    /// nearest-rank value is the largest packet.
    Above {
        /// The nearest-rank value is the largest packet.
        at_maximum: bool,
    },
    /// Too few packets to bound it from below.
    Below,
}

/// A percentile with its interval: the nearest-rank value, the bounds (None on a side the
/// data cannot bound), their ranks, the dispersion the ranks allow for, the packets that
/// would bound it at that dispersion, and why it is not bounded where it is not.
#[derive(Debug, Clone, PartialEq)]
pub struct Interval {
    /// The quantile.
    pub quantile: Quantile,
    /// The two-sided level (each side leaves out at most (1 − level)/2).
    pub level: f64,
    /// The nearest-rank value.
    pub value: Option<i64>,
    /// The lower bound.
    pub lower: Option<i64>,
    /// The upper bound.
    pub upper: Option<i64>,
    /// The lower bound's rank (0: none).
    pub lower_rank: u64,
    /// The upper bound's rank (count + 1: none).
    pub upper_rank: u64,
    /// The dispersion the ranks allow for (infinite where it could not be measured).
    pub dispersion: f64,
    /// Blocks with packets the evidence has.
    pub blocks: usize,
    /// Packets that would bound the percentile from above at this dispersion (None where
    /// the dispersion could not be measured).
    pub packets_to_bound: Option<u64>,
    /// Why a side is not bounded.
    pub why: Option<Unbounded>,
}

impl Interval {
    /// Whether both sides are bounded.
    pub fn resolvable(&self) -> bool {
        self.lower.is_some() && self.upper.is_some()
    }
}

/// The two-sided interval of quantile `q` at `level` over the evidence (a one-sided bound
/// at confidence c is a side of level 2c − 1).
pub fn interval(ev: &Evidence, q: Quantile, level: f64) -> Interval {
    let tail = (1.0 - level) / 2.0;
    let x = exceed(q);
    let n = ev.count();
    let blocks = ev.blocks();
    let empty = Interval {
        quantile: q,
        level,
        value: None,
        lower: None,
        upper: None,
        lower_rank: 0,
        upper_rank: n + 1,
        dispersion: 1.0,
        blocks: 0,
        packets_to_bound: Some(packets_to_bound(x, tail, 1.0)),
        why: Some(Unbounded::NoPackets),
    };
    if n == 0 {
        return empty;
    }
    let rank = nearest_rank(q, n);
    let value = ev.ranked.value_at_rank(rank);
    let dispersion = match dispersion_for(ev, rank, tail) {
        Ok(d) => d,
        Err(why) => {
            // Too few clusters: a run long enough to hold MIN_CLUSTERS of them (at the rate this
            // one saw them), and never fewer packets than independent ones would need. A
            // wandering series: no length of one run is known to help.
            let packets_to_bound = match why {
                Unmeasurable::FewClusters { clusters, .. } => {
                    let longer = (n as f64 * MIN_CLUSTERS as f64 / clusters.max(1) as f64).ceil() as u64;
                    Some(longer.max(packets_to_bound(x, tail, 1.0)))
                }
                Unmeasurable::Wanders { .. } => None,
            };
            return Interval {
                value,
                dispersion: f64::INFINITY,
                blocks,
                packets_to_bound,
                why: Some(Unbounded::Unmeasurable(why)),
                ..empty
            };
        }
    };
    let upper = allowed_above(n, x, dispersion, tail).map_or(n + 1, |a| n - a).clamp(rank, n + 1);
    let lower = needed_above(n, x, dispersion, tail).map_or(0, |f| n + 1 - f).min(rank);
    let lower_ns = if lower >= 1 { ev.ranked.value_at_rank(lower) } else { None };
    let upper_ns = if upper <= n { ev.ranked.value_at_rank(upper) } else { None };
    let why = if upper_ns.is_none() {
        Some(Unbounded::Above { at_maximum: rank == n })
    } else if lower_ns.is_none() {
        Some(Unbounded::Below)
    } else {
        None
    };
    Interval {
        value,
        lower: lower_ns,
        upper: upper_ns,
        lower_rank: lower,
        upper_rank: upper,
        dispersion,
        blocks,
        packets_to_bound: Some(packets_to_bound(x, tail, dispersion)),
        why,
        ..empty
    }
}

/// Ranks of the exceedance ladder: packets above these ranks from the top (0, 1, 2 … each
/// about 1.25× the last, up to half the packets).
const LADDER_GROWTH: f64 = 1.25;

/// [value, packets above it] at values from the largest down to the median, ~1.25× more
/// packets above each: what a stored document keeps so that a verdict judged later without
/// the distribution can still say about how many packets reach a budget.
pub fn exceedance_ladder(ev: &Evidence) -> Vec<(i64, u64)> {
    let n = ev.count();
    if n == 0 {
        return Vec::new();
    }
    let (mut from_top, mut j) = (vec![0u64], 1.0f64);
    while (j as u64) < n / 2 {
        if j as u64 != *from_top.last().expect("starts with 0") {
            from_top.push(j as u64);
        }
        j = (j + 1.0).max(j * LADDER_GROWTH);
    }
    let mut values: Vec<i64> = from_top.iter().filter_map(|&k| ev.ranked.value_at_rank(n - k)).collect();
    values.sort_unstable();
    values.dedup();
    values.into_iter().map(|v| (v, n - ev.ranked.count_at_most(v))).collect()
}

/// Every figure of a bounds document: intervals at `level`, one-sided bounds at
/// `confidence` (sides of level 2·confidence − 1), and the exceedance ladder.
#[derive(Debug, Clone)]
pub struct Bounds {
    /// Two-sided intervals at the level, in the order of the quantiles asked.
    pub intervals: Vec<Interval>,
    /// One-sided bounds at the confidence, in the same order.
    pub bounds: Vec<Interval>,
    /// The exceedance ladder.
    pub above: Vec<(i64, u64)>,
}

/// The bounds document's figures for these quantiles.
pub fn bounds(ev: &Evidence, quantiles: &[Quantile], level: f64, confidence: f64) -> Bounds {
    Bounds {
        intervals: quantiles.iter().map(|&q| interval(ev, q, level)).collect(),
        bounds: quantiles.iter().map(|&q| interval(ev, q, 2.0 * confidence - 1.0)).collect(),
        above: exceedance_ladder(ev),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::SeriesSummary;

    fn evidence(values: impl Fn(i64) -> i64, n: i64) -> Evidence {
        let mut s = SeriesSummary::new();
        for i in 0..n {
            s.record(i * 10_000, values(i));
        }
        Evidence::new(&mut s.exact, &[&s.blocks])
    }

    #[test]
    fn independent_like_values_get_near_classical_ranks() {
        // A well-mixed sequence (a multiplicative hash): no clustering.
        let ev = evidence(|i| 1_000 + (i * 2_654_435_761) % 100_000, 200_000);
        let iv = interval(&ev, Quantile::decimal(5, 1), 0.95);
        assert!(iv.resolvable(), "{iv:?}");
        assert!(iv.dispersion < 1.5, "{iv:?}");
        assert!(iv.lower.unwrap() <= iv.value.unwrap() && iv.value.unwrap() <= iv.upper.unwrap());
    }

    #[test]
    fn a_few_stalls_above_an_unclustered_median_widen_it() {
        // Independent-like values, and in one copy three stalls of 100 packets in a row far
        // above them: the median is not clustered, yet how many stall packets a run holds moves
        // it. The clusters above set a floor under its dispersion; it stays bounded.
        let base = |i: i64| 1_000 + (i * 2_654_435_761) % 100_000;
        let stalled = |i: i64| if (i % 66_000) < 100 { 5_000_000 - (i % 66_000) * 10_000 } else { base(i) };
        let median = Quantile::decimal(5, 1);
        let clean = interval(&evidence(base, 200_000), median, 0.95);
        let stalls = interval(&evidence(stalled, 200_000), median, 0.95);
        assert!(clean.resolvable() && stalls.resolvable(), "{clean:?} {stalls:?}");
        assert!(clean.dispersion < 1.5, "{clean:?}");
        // The blocks at the median alone gave 1.33 (before the floor); a Poisson count seen
        // three times may be nearly three times as large (λ₊(3) / 3 = 2.9): 2.08 now.
        assert!(stalls.dispersion > 1.9, "{stalls:?}");
    }

    #[test]
    fn no_packets_and_too_few_are_said() {
        let ev = evidence(|i| i, 0);
        assert_eq!(interval(&ev, Quantile::decimal(5, 1), 0.95).why, Some(Unbounded::NoPackets));
        let ev = evidence(|i| 1_000 + (i * 7_919) % 1_000, 1_000);
        let top = interval(&ev, Quantile::decimal(999_999, 6), 0.95);
        assert_eq!(top.why, Some(Unbounded::Above { at_maximum: true }));
        assert!(top.upper.is_none());
    }

    #[test]
    fn the_ladder_counts_packets_above_each_value() {
        let ev = evidence(|i| i, 1_000);
        let ladder = exceedance_ladder(&ev);
        assert_eq!(ladder.last(), Some(&(999, 0)));
        assert!(ladder.iter().all(|&(v, above)| above == 999 - v as u64));
    }
}
