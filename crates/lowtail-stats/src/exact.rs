//! Exact nearest-rank quantiles in memory that follows the spread of the values.

use crate::rank::{nearest_rank, Quantile};

const PAGE_BITS: u32 = 14;
const PAGE_LEN: usize = 1 << PAGE_BITS;
/// Values in [0, 2^30 ns) (about 1.07 s) may be counted in pages; the page directory
/// then never exceeds 65536 entries (1 MiB).
const DENSE_LIMIT: i64 = 1 << 30;
/// A page is allocated once this many samples fell into its range...
const PAGE_THRESHOLD: u32 = 256;
/// ...and while fewer than this many pages exist (2048 × 64 KiB = 128 MiB).
const PAGE_BUDGET: usize = 2048;

/// The counters of one page's values, one per nanosecond.
type Page = Box<[u32; PAGE_LEN]>;

fn new_page() -> Page {
    vec![0u32; PAGE_LEN].into_boxed_slice().try_into().expect("one page")
}

/// Exact distribution of integer samples.
///
/// Where samples are dense (a latency distribution's body), each nanosecond value gets
/// a counter in a 64 KiB page covering 16.4 µs. Samples in sparse regions — the tail,
/// negative values, anything past ~1.07 s — are kept individually in a spill list that is
/// sorted once when quantiles are asked for. Memory is thus a few pages for a typical
/// run and at worst 8 bytes per sample, never more than storing the samples would take.
#[derive(Debug, Clone)]
pub struct ExactHistogram {
    /// The counters of each page's range, where they exist (`None`: its samples spill).
    pages: Vec<Option<Page>>,
    /// Samples of each page's range that went to the spill list while it had no counters.
    spilled_hits: Vec<u32>,
    dense_pages: usize,
    spill: Vec<i64>,
    spill_sorted: bool,
    count: u64,
}

impl Default for ExactHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl ExactHistogram {
    /// An empty histogram.
    pub fn new() -> Self {
        ExactHistogram {
            pages: Vec::new(),
            spilled_hits: Vec::new(),
            dense_pages: 0,
            spill: Vec::new(),
            spill_sorted: true,
            count: 0,
        }
    }

    /// Count one sample.
    #[inline]
    pub fn record(&mut self, v: i64) {
        // The common case, a value in a page that has counters, inline; the rest out of line.
        if let Some(slot) = self.counter(v) {
            if let Some(n) = slot.checked_add(1) {
                *slot = n;
                self.count += 1;
                return;
            }
        }
        self.record_n(v, 1);
    }

    /// The counter of `v` when its page has counters. A negative value, or one past
    /// `DENSE_LIMIT`, indexes past every page (there are never pages beyond it).
    #[inline(always)]
    fn counter(&mut self, v: i64) -> Option<&mut u32> {
        let page = self.pages.get_mut((v as u64 >> PAGE_BITS) as usize)?.as_mut()?;
        Some(&mut page[(v as usize) & (PAGE_LEN - 1)])
    }

    /// Count `n` samples of one value (what merging another histogram needs: one call per
    /// distinct value, not per sample).
    #[cold]
    #[inline(never)]
    pub fn record_n(&mut self, v: i64, n: u64) {
        if n == 0 {
            return;
        }
        if (0..DENSE_LIMIT).contains(&v) {
            let p = (v >> PAGE_BITS) as usize;
            if p >= self.pages.len() {
                self.pages.resize(p + 1, None);
                self.spilled_hits.resize(p + 1, 0);
            }
            let slot = (v as usize) & (PAGE_LEN - 1);
            let counted = u32::try_from(n).ok();
            match &mut self.pages[p] {
                Some(slots) => {
                    if let Some(c) = counted.and_then(|n| slots[slot].checked_add(n)) {
                        slots[slot] = c;
                        self.count += n;
                        return;
                    }
                }
                None => {
                    let hits = &mut self.spilled_hits[p];
                    *hits = hits.saturating_add(counted.unwrap_or(u32::MAX));
                    if *hits >= PAGE_THRESHOLD && self.dense_pages < PAGE_BUDGET {
                        if let Some(first) = counted {
                            let mut slots = new_page();
                            slots[slot] = first;
                            self.pages[p] = Some(slots);
                            self.dense_pages += 1;
                            self.count += n;
                            return;
                        }
                    }
                }
            }
        }
        // A count a page cannot hold, or a value outside the pages: kept one by one.
        self.count += n;
        self.spill.resize(self.spill.len() + n as usize, v);
        self.spill_sorted = false;
    }

    /// How many samples `record_n(v, n)` would keep one by one (outside the counter
    /// pages): what a reader of untrusted counts checks before it records them.
    pub(crate) fn spill_if_recorded(&self, v: i64, n: u64) -> u64 {
        if !(0..DENSE_LIMIT).contains(&v) || n > u64::from(u32::MAX) {
            return n;
        }
        let p = (v >> PAGE_BITS) as usize;
        match self.pages.get(p) {
            Some(Some(slots)) => u64::from(slots[(v as usize) & (PAGE_LEN - 1)].checked_add(n as u32).is_none()) * n,
            _ => {
                let hits = self.spilled_hits.get(p).copied().unwrap_or(0).saturating_add(n as u32);
                if hits >= PAGE_THRESHOLD && self.dense_pages < PAGE_BUDGET {
                    0
                } else {
                    n
                }
            }
        }
    }

    /// Add every sample of `other`: the histogram of the two sample sets together, exactly.
    pub fn merge(&mut self, other: &mut ExactHistogram) {
        for (v, c) in other.iter() {
            self.record_n(v, c);
        }
    }

    /// Samples recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Smallest sample.
    pub fn min(&mut self) -> Option<i64> {
        self.iter().next().map(|(v, _)| v)
    }

    /// Largest sample.
    pub fn max(&mut self) -> Option<i64> {
        self.sort_spill();
        let spilled = self.spill.last().copied();
        let paged =
            self.pages.iter().enumerate().rev().find_map(|(p, page)| {
                page.as_ref()?.iter().rposition(|&c| c > 0).map(|i| ((p << PAGE_BITS) + i) as i64)
            });
        spilled.max(paged)
    }

    /// Mean and population standard deviation, computed exactly from the counts (the
    /// sum in 128-bit integers, the deviations around the exact mean).
    pub fn mean_stddev(&mut self) -> Option<(f64, f64)> {
        if self.count == 0 {
            return None;
        }
        let n = self.count as f64;
        let sum: i128 = self.iter().map(|(v, c)| v as i128 * c as i128).sum();
        let mean = sum as f64 / n;
        let var: f64 = self.iter().map(|(v, c)| (v as f64 - mean).powi(2) * c as f64).sum::<f64>() / n;
        Some((mean, var.sqrt()))
    }

    fn sort_spill(&mut self) {
        if !self.spill_sorted {
            self.spill.sort_unstable();
            self.spill_sorted = true;
        }
    }

    /// Every (value, count) in ascending value order.
    pub fn iter(&mut self) -> impl Iterator<Item = (i64, u64)> + '_ {
        self.sort_spill();
        let dense = self.pages.iter().enumerate().flat_map(|(p, page)| {
            let slots: &[u32] = page.as_ref().map_or(&[], |s| &s[..]);
            slots
                .iter()
                .enumerate()
                .filter(|(_, &c)| c > 0)
                .map(move |(i, &c)| (((p << PAGE_BITS) + i) as i64, c as u64))
        });
        Merge { dense: dense.peekable(), spill: &self.spill, pos: 0 }
    }

    /// Values at the given quantiles, exactly as `percentile_disc` would return them;
    /// `None` when empty.
    pub fn quantiles(&mut self, qs: &[Quantile]) -> Option<Vec<i64>> {
        if self.count == 0 {
            return None;
        }
        let ranks: Vec<u64> = qs.iter().map(|&q| nearest_rank(q, self.count)).collect();
        self.values_at_ranks(&ranks)
    }

    /// The order statistics at the given 1-based ranks (rank 1 is the smallest sample,
    /// `count()` the largest), in the order asked; `None` when a rank is outside 1..=count.
    /// Confidence intervals of percentiles are pairs of such ranks.
    pub fn values_at_ranks(&mut self, ranks: &[u64]) -> Option<Vec<i64>> {
        if ranks.iter().any(|&r| r == 0 || r > self.count) {
            return None;
        }
        let mut order: Vec<(usize, u64)> = ranks.iter().copied().enumerate().collect();
        order.sort_by_key(|&(_, r)| r);
        let mut out = vec![0i64; ranks.len()];
        let mut seen = 0u64;
        let mut current = 0i64;
        let mut it = self.iter();
        for (i, rank) in order {
            while seen < rank {
                let (v, c) = it.next().expect("rank within count");
                seen += c;
                current = v;
            }
            out[i] = current;
        }
        Some(out)
    }

    /// The nearest-rank value of quantile `q`; `None` when empty.
    pub fn quantile(&mut self, q: Quantile) -> Option<i64> {
        self.quantiles(&[q]).map(|v| v[0])
    }

    /// Approximate heap use in bytes.
    pub fn memory_bytes(&self) -> usize {
        self.dense_pages * PAGE_LEN * 4
            + self.pages.capacity() * 8
            + self.spilled_hits.capacity() * 4
            + self.spill.capacity() * 8
    }
}

/// Merges the page counters with the sorted spill list.
struct Merge<'a, I: Iterator<Item = (i64, u64)>> {
    dense: std::iter::Peekable<I>,
    spill: &'a [i64],
    pos: usize,
}

impl<I: Iterator<Item = (i64, u64)>> Iterator for Merge<'_, I> {
    type Item = (i64, u64);

    fn next(&mut self) -> Option<(i64, u64)> {
        let spill_head = self.spill.get(self.pos).copied();
        let dense_head = self.dense.peek().map(|&(v, _)| v);
        let v = match (dense_head, spill_head) {
            (None, None) => return None,
            (Some(d), Some(s)) => d.min(s),
            (Some(d), None) => d,
            (None, Some(s)) => s,
        };
        let mut count = 0;
        if dense_head == Some(v) {
            count += self.dense.next().unwrap().1;
        }
        while self.spill.get(self.pos) == Some(&v) {
            count += 1;
            self.pos += 1;
        }
        Some((v, count))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn reference(values: &mut [i64], q: Quantile) -> i64 {
        values.sort_unstable();
        values[nearest_rank(q, values.len() as u64) as usize - 1]
    }

    #[test]
    fn small_known_answer() {
        let mut h = ExactHistogram::new();
        for v in [5, 1, 4, 2, 3] {
            h.record(v);
        }
        let qs = [Quantile::decimal(2, 1), Quantile::decimal(5, 1), Quantile::decimal(8, 1), Quantile::decimal(1, 0)];
        assert_eq!(h.quantiles(&qs).unwrap(), vec![1, 3, 4, 5]);
        assert_eq!(h.quantile(Quantile::decimal(0, 0)), Some(1));
        let (mean, sd) = h.mean_stddev().unwrap();
        assert_eq!(mean, 3.0);
        assert!((sd - 2f64.sqrt()).abs() < 1e-12);
    }

    #[test]
    fn dense_and_spilled_values_merge() {
        let mut h = ExactHistogram::new();
        // 1000 samples at 3000 ns make its page dense; the first 255 went to the spill.
        for _ in 0..1000 {
            h.record(3000);
        }
        h.record(-5);
        h.record(1 << 40);
        assert_eq!(h.iter().collect::<Vec<_>>(), vec![(-5, 1), (3000, 1000), (1 << 40, 1)]);
        assert_eq!(h.dense_pages, 1);
    }

    #[test]
    fn memory_stays_small_for_a_wide_sparse_spread() {
        let mut h = ExactHistogram::new();
        for i in 0..100_000i64 {
            h.record(i * 100_000); // 100 µs apart: no page ever gets dense
        }
        assert_eq!(h.dense_pages, 0);
        assert!(h.memory_bytes() < 2 * 100_000 * 8 + (1 << 20) * 2, "{}", h.memory_bytes());
        assert_eq!(h.quantile(Quantile::decimal(5, 1)), Some(49_999 * 100_000));
    }

    #[test]
    fn ranks_are_order_statistics() {
        let mut h = ExactHistogram::new();
        for v in [50, 10, 40, 20, 30] {
            h.record(v);
        }
        assert_eq!(h.values_at_ranks(&[5, 1, 3]), Some(vec![50, 10, 30]));
        assert_eq!(h.values_at_ranks(&[0]), None);
        assert_eq!(h.values_at_ranks(&[6]), None);
        assert_eq!(ExactHistogram::new().values_at_ranks(&[]), Some(vec![]));
    }

    #[test]
    fn record_n_fills_pages_and_spill_alike() {
        let mut once = ExactHistogram::new();
        let mut many = ExactHistogram::new();
        for (v, n) in [(3000i64, 1000u64), (3001, 10), (-7, 3), (1 << 40, 2), (5, 300)] {
            for _ in 0..n {
                once.record(v);
            }
            many.record_n(v, n);
        }
        assert_eq!(once.iter().collect::<Vec<_>>(), many.iter().collect::<Vec<_>>());
        assert_eq!(many.count(), 1315);
        assert!(many.dense_pages >= 1);
    }

    proptest! {
        #[test]
        fn merging_equals_recording_both(
            a in prop::collection::vec(prop_oneof![-100i64..100, 0i64..70_000, (1i64 << 31)..(1i64 << 32)], 0..1500),
            b in prop::collection::vec(prop_oneof![0i64..500, 0i64..70_000, (1i64 << 33)..(1i64 << 34)], 0..1500)) {
            let (mut ha, mut hb, mut both) = (ExactHistogram::new(), ExactHistogram::new(), ExactHistogram::new());
            for &v in &a { ha.record(v); both.record(v); }
            for &v in &b { hb.record(v); both.record(v); }
            ha.merge(&mut hb);
            prop_assert_eq!(ha.count(), both.count());
            prop_assert_eq!(ha.iter().collect::<Vec<_>>(), both.iter().collect::<Vec<_>>());
        }
    }

    proptest! {
        #[test]
        fn matches_sorting(values in prop::collection::vec(prop_oneof![
                -1000i64..1000, 0i64..2000, 0i64..200_000, (1i64 << 36)..(1i64 << 37)], 1..2000),
            qs in prop::collection::vec((0u64..=1000).prop_map(|p| Quantile::decimal(p, 3)), 1..8)) {
            let mut h = ExactHistogram::new();
            for &v in &values { h.record(v); }
            let mut sorted = values.clone();
            let got = h.quantiles(&qs).unwrap();
            for (q, g) in qs.iter().zip(got) {
                prop_assert_eq!(g, reference(&mut sorted, *q));
            }
            prop_assert_eq!(h.min().unwrap(), *sorted.iter().min().unwrap());
            prop_assert_eq!(h.max().unwrap(), *sorted.iter().max().unwrap());
            prop_assert_eq!(h.iter().map(|(_, c)| c).sum::<u64>(), values.len() as u64);
        }
    }
}
