//! Histogram bins of latencies or gaps, chosen from the data (`auto_bins`).

use crate::{ExactHistogram, Quantile};

/// Where the linear bins end: the body is everything up to the 99.9th percentile.
const BODY: Quantile = Quantile::decimal(999, 3);

/// A histogram bin [lo_ns, hi_ns) and its count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Bin {
    /// Lower bound, included.
    pub lo_ns: i64,
    /// Upper bound, excluded.
    pub hi_ns: i64,
    /// Samples in the bin.
    pub count: u64,
}

/// Bins that show both the body and the tail: linear bins of a "nice" width over
/// [min, p99.9] (about `target` of them), then ten logarithmic bins per decade above.
/// Only non-empty bins are returned.
pub fn auto_bins(h: &mut ExactHistogram, target: usize) -> Vec<Bin> {
    let (Some(min), Some(body_end)) = (h.min(), h.quantile(BODY)) else {
        return Vec::new();
    };
    // In i128 and saturating: corrupt timestamps make values a whole i64 range apart.
    let wide = |x: i128| x.clamp(i64::MIN as i128, i64::MAX as i128) as i64;
    let width = nice_width(((body_end as i128 - min as i128) as f64 / target.max(1) as f64).max(1.0));
    let start = wide((min as i128).div_euclid(width as i128) * width as i128);
    let linear_end = wide(start as i128 + width as i128 * ((body_end as i128 - start as i128) / width as i128 + 1));
    let mut bins: Vec<Bin> = Vec::new();
    for (v, c) in h.iter() {
        let (lo, hi) = if v < linear_end {
            let lo = wide(start as i128 + (v as i128 - start as i128).div_euclid(width as i128) * width as i128);
            (lo, lo.saturating_add(width))
        } else {
            log_bin(v, linear_end)
        };
        match bins.last_mut() {
            Some(b) if b.lo_ns == lo => b.count += c,
            _ => bins.push(Bin { lo_ns: lo, hi_ns: hi, count: c }),
        }
    }
    bins
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
fn nice_width(raw: f64) -> i64 {
    let exp = raw.log10().floor();
    let base = 10f64.powf(exp);
    for m in [1.0, 2.0, 5.0, 10.0] {
        if m * base >= raw {
            return (m * base).round().max(1.0) as i64;
        }
    }
    (10.0 * base) as i64
}

/// Ten log-spaced bins per decade, never starting below `floor`.
fn log_bin(v: i64, floor: i64) -> (i64, i64) {
    let x = (v.max(1)) as f64;
    let k = (x.log10() * 10.0).floor();
    let lo = (10f64.powf(k / 10.0).ceil() as i64).max(floor);
    let hi = (10f64.powf((k + 1.0) / 10.0).ceil() as i64).max(lo.saturating_add(1));
    if v >= hi {
        return (v, v.saturating_add(1));
    }
    (lo.min(v), hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_linear_tail_logarithmic() {
        let mut h = ExactHistogram::new();
        for i in 0..100_000i64 {
            h.record(3_000 + (i % 1000));
        }
        h.record(2_000_000);
        let bins = auto_bins(&mut h, 100);
        assert_eq!(bins.iter().map(|b| b.count).sum::<u64>(), 100_001);
        assert!(bins.windows(2).all(|w| w[0].hi_ns <= w[1].lo_ns));
        let last = bins.last().unwrap();
        assert!(last.lo_ns <= 2_000_000 && 2_000_000 < last.hi_ns);
        assert_eq!(bins[0].hi_ns - bins[0].lo_ns, 10);
    }

    #[test]
    fn nice_widths() {
        assert_eq!(nice_width(0.3), 1);
        assert_eq!(nice_width(13.0), 20);
        assert_eq!(nice_width(480.0), 500);
    }
}
