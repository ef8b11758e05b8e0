//! Figures the programs report: exact nearest-rank percentiles of nanosecond samples
//! (the same figures `lowtail analyze` gives, keyed the same way) and readable units.

use lowtail_stats::{Bin, ExactHistogram, Quantile, HEADLINE_PERCENTILES};
use serde::Serialize;

/// Exact figures of a set of nanosecond samples (the object's key ends in `_ns`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Summary {
    /// How many samples.
    pub samples: u64,
    /// The smallest.
    pub min: i64,
    /// The mean.
    pub mean: f64,
    /// Median.
    pub p50: i64,
    /// 90th percentile.
    pub p90: i64,
    /// 99th percentile.
    pub p99: i64,
    /// 99.9th percentile.
    pub p99_9: i64,
    /// 99.99th percentile.
    pub p99_99: i64,
    /// The largest.
    pub max: i64,
}

/// The summary of `h`, or None when it holds no sample.
pub fn summarize(h: &mut ExactHistogram) -> Option<Summary> {
    // p50 … p99.99
    let qs: Vec<Quantile> = HEADLINE_PERCENTILES[..5].iter().map(|(_, q)| *q).collect();
    let q = h.quantiles(&qs)?;
    let (mean, _) = h.mean_stddev()?;
    Some(Summary {
        samples: h.count(),
        min: h.min()?,
        mean,
        p50: q[0],
        p90: q[1],
        p99: q[2],
        p99_9: q[3],
        p99_99: q[4],
        max: h.max()?,
    })
}

/// Histogram bins with 1-2-5 edges per decade ([0, 10) ns, [10, 20), [20, 50), ...,
/// [1, 2) µs, ...): pacing errors span nanoseconds (a good loop) to milliseconds (a
/// preemption) and every decade matters. Only non-empty bins; negative values (none
/// are expected) share one bin below zero.
pub fn log_bins(h: &mut ExactHistogram) -> Vec<Bin> {
    let mut bins: Vec<Bin> = Vec::new();
    for (v, count) in h.iter() {
        let (lo, hi) = decade_bin(v);
        match bins.last_mut() {
            Some(b) if b.lo_ns == lo => b.count += count,
            _ => bins.push(Bin { lo_ns: lo, hi_ns: hi, count }),
        }
    }
    bins
}

fn decade_bin(v: i64) -> (i64, i64) {
    if v < 0 {
        return (i64::MIN, 0);
    }
    if v < 10 {
        return (0, 10);
    }
    let mut decade = 10i64;
    while v >= decade * 10 {
        decade *= 10;
    }
    match v / decade {
        1 => (decade, 2 * decade),
        2..=4 => (2 * decade, 5 * decade),
        _ => (5 * decade, 10 * decade),
    }
}

/// A duration with its unit: "850 ns", "1.25 µs", "3.40 ms", "2.000 s".
pub fn fmt_ns(ns: i64) -> String {
    let a = ns.unsigned_abs() as f64;
    let sign = if ns < 0 { "-" } else { "" };
    if a < 1e3 {
        format!("{ns} ns")
    } else if a < 1e6 {
        format!("{sign}{:.2} µs", a / 1e3)
    } else if a < 1e9 {
        format!("{sign}{:.2} ms", a / 1e6)
    } else {
        format!("{sign}{:.3} s", a / 1e9)
    }
}

/// A packet rate with its unit: "950 pps", "100.0 kpps", "1.000 Mpps".
pub fn fmt_rate(pps: f64) -> String {
    if pps < 1e3 {
        format!("{pps:.0} pps")
    } else if pps < 1e6 {
        format!("{:.1} kpps", pps / 1e3)
    } else {
        format!("{:.3} Mpps", pps / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut h = ExactHistogram::new();
        for v in 1..=1000 {
            h.record(v);
        }
        let s = summarize(&mut h).unwrap();
        assert_eq!((s.min, s.p50, s.p90, s.p99, s.p99_9, s.max), (1, 500, 900, 990, 999, 1000));
        assert_eq!(s.samples, 1000);
        assert!(summarize(&mut ExactHistogram::new()).is_none());
    }

    #[test]
    fn log_bins_follow_one_two_five() {
        let mut h = ExactHistogram::new();
        for v in [3, 9, 10, 19, 20, 49, 50, 99, 1_500, 2_000_000, 7_000_000] {
            h.record(v);
        }
        let got: Vec<(i64, i64, u64)> = log_bins(&mut h).iter().map(|b| (b.lo_ns, b.hi_ns, b.count)).collect();
        assert_eq!(
            got,
            vec![
                (0, 10, 2),
                (10, 20, 2),
                (20, 50, 2),
                (50, 100, 2),
                (1_000, 2_000, 1),
                (2_000_000, 5_000_000, 1),
                (5_000_000, 10_000_000, 1)
            ]
        );
    }

    #[test]
    fn units_are_readable() {
        assert_eq!(fmt_ns(850), "850 ns");
        assert_eq!(fmt_ns(1250), "1.25 µs");
        assert_eq!(fmt_ns(-3_400_000), "-3.40 ms");
        assert_eq!(fmt_ns(2_000_000_000), "2.000 s");
        assert_eq!(fmt_rate(100_000.0), "100.0 kpps");
        assert_eq!(fmt_rate(1_000_000.0), "1.000 Mpps");
    }
}
