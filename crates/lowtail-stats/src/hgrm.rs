//! HdrHistogram percentile distributions and their `.hgrm` text.

use std::fmt::Write;

use hdrhistogram::Histogram;

const SIGNIFICANT_DIGITS: u8 = 3;

/// HdrHistogram recorder for the percentile distribution (the `.hgrm` text that
/// HdrHistogram's plotter and most latency tooling read). Headline figures come from
/// the exact histogram; this one gives the familiar log-scale percentile curve.
#[derive(Debug, Clone)]
pub struct HdrRecorder {
    hist: Histogram<u64>,
}

impl Default for HdrRecorder {
    fn default() -> Self {
        Self::new()
    }
}

/// One row of a percentile distribution.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct PercentileRow {
    /// The value at this percentile.
    pub value_ns: u64,
    /// The percentile, as a fraction.
    pub percentile: f64,
    /// Samples at or below the value.
    pub total_count: u64,
}

impl HdrRecorder {
    /// An empty recorder.
    pub fn new() -> Self {
        HdrRecorder { hist: Histogram::new(SIGNIFICANT_DIGITS).expect("3 significant digits is valid") }
    }

    /// Record a non-negative value (negative ones are ignored: they are counted apart).
    #[inline]
    pub fn record(&mut self, v: i64) {
        self.record_n(v, 1);
    }

    /// Record `n` samples of one value.
    #[inline]
    pub fn record_n(&mut self, v: i64, n: u64) {
        if v >= 0 {
            // Auto-resizing histogram: recording cannot fail for u64 values.
            let _ = self.hist.record_n(v as u64, n);
        }
    }

    /// The HDR view of an exact distribution (one update per distinct value).
    pub fn from_exact(exact: &mut crate::ExactHistogram) -> Self {
        let mut r = HdrRecorder::new();
        for (v, c) in exact.iter() {
            r.record_n(v, c);
        }
        r
    }

    /// Samples recorded.
    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// The value at quantile `q` (0.99 for p99) within HDR's three significant digits;
    /// None when empty. For running figures: headline figures are exact elsewhere.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        (!self.hist.is_empty()).then(|| self.hist.highest_equivalent(self.hist.value_at_quantile(q)))
    }

    /// The largest value recorded (within three significant digits); None when empty.
    pub fn max(&self) -> Option<u64> {
        (!self.hist.is_empty()).then(|| self.hist.max())
    }

    /// Forget every sample, keeping the memory (a new interval of running figures).
    pub fn clear(&mut self) {
        self.hist.reset();
    }

    /// Rows of the distribution, `ticks_per_half_distance` as in HdrHistogram (5 is
    /// its default and gives ~100 rows for six nines).
    pub fn rows(&self, ticks_per_half_distance: u32) -> Vec<PercentileRow> {
        let mut total = 0u64;
        self.hist
            .iter_quantiles(ticks_per_half_distance)
            .map(|it| {
                total += it.count_since_last_iteration();
                PercentileRow {
                    value_ns: self.hist.highest_equivalent(it.value_iterated_to()),
                    percentile: as_written(it.quantile_iterated_to()),
                    total_count: total,
                }
            })
            .collect()
    }

    /// HdrHistogram's `outputPercentileDistribution` text, values divided by
    /// `unit_ratio` (1000 = microseconds, the unit lowtail's `.hgrm` files use).
    pub fn hgrm(&self, ticks_per_half_distance: u32, unit_ratio: f64) -> String {
        let d = SIGNIFICANT_DIGITS as usize;
        let mut out = String::new();
        let _ = write!(out, "{:>12} {:>14} {:>10} {:>14}\n\n", "Value", "Percentile", "TotalCount", "1/(1-Percentile)");
        if self.hist.is_empty() {
            return out;
        }
        for row in self.rows(ticks_per_half_distance) {
            let value = row.value_ns as f64 / unit_ratio;
            if row.percentile < 1.0 {
                let inv = 1.0 / (1.0 - row.percentile);
                let _ = writeln!(out, "{value:>12.d$} {:>2.12} {:>10} {inv:>14.2}", row.percentile, row.total_count);
            } else {
                let _ = writeln!(out, "{value:>12.d$} {:>2.12} {:>10}", row.percentile, row.total_count);
            }
        }
        let mean = self.hist.mean() / unit_ratio;
        let sd = self.hist.stdev() / unit_ratio;
        let max = self.hist.max() as f64 / unit_ratio;
        let _ = writeln!(out, "#[Mean    = {mean:>12.d$}, StdDeviation   = {sd:>12.d$}]");
        let _ = writeln!(out, "#[Max     = {max:>12.d$}, Total count    = {:>12}]", self.hist.len());
        let sub_buckets = 2u64 * 10u64.pow(SIGNIFICANT_DIGITS as u32);
        let sub_buckets = sub_buckets.next_power_of_two();
        let _ = writeln!(out, "#[Buckets = {:>12}, SubBuckets     = {:>12}]", self.hist.buckets(), sub_buckets);
        out
    }
}

/// A quantile as the `.hgrm` text writes it (12 decimals): the iterator's steps are sums of
/// floats (0.1 + 0.2 is 0.30000000000000004), which a JSON document would print as such.
fn as_written(quantile: f64) -> f64 {
    (quantile * 1e12).round() / 1e12
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_quantiles_are_within_three_digits_and_clear_forgets() {
        let mut r = HdrRecorder::new();
        assert_eq!((r.quantile(0.99), r.max()), (None, None));
        for v in 1..=100_000i64 {
            r.record(v * 10);
        }
        let p99 = r.quantile(0.99).unwrap() as f64;
        assert!((p99 - 990_000.0).abs() / 990_000.0 < 1e-3, "{p99}");
        assert!((r.max().unwrap() as f64 - 1e6).abs() / 1e6 < 1e-3);
        r.clear();
        assert_eq!((r.count(), r.max()), (0, None));
    }

    #[test]
    fn hgrm_has_header_rows_and_footer() {
        let mut r = HdrRecorder::new();
        for v in 1..=10_000i64 {
            r.record(v * 1000);
        }
        let text = r.hgrm(5, 1000.0);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].contains("Value") && lines[0].contains("1/(1-Percentile)"));
        assert!(lines.iter().any(|l| l.starts_with("#[Mean")));
        assert!(lines.iter().any(|l| l.contains("Total count    =        10000")));
        let last_row = lines.iter().rev().find(|l| !l.starts_with('#')).unwrap();
        assert!(last_row.contains("1.000000000000"));
        // values are in µs: the maximum is 10000 µs within HDR's 3 digits
        let max_line = lines.iter().find(|l| l.starts_with("#[Max")).unwrap();
        let max: f64 = max_line[11..].split(',').next().unwrap().trim().parse().unwrap();
        assert!((max - 10000.0).abs() / 10000.0 < 1e-3, "{max_line}");
    }
}
