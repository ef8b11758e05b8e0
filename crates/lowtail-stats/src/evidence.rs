//! The packets an interval speaks for, indexed once so that every question the intervals,
//! verdicts and advice ask of them is answered in O(log n): one run's summary, or several
//! runs' pooled (their exact distributions merged; their time blocks kept apart, run by run).
//!
//! The exact distribution becomes its distinct values with their cumulative counts (the
//! rank of any value, the value at any rank: a binary search); each time block's latency
//! buckets become their counts from the top (the packets of a block above any value: a
//! binary search among the buckets it used).

use crate::exact::ExactHistogram;
use crate::summary::{bucket_of, TimeBlocks};

/// The exact distribution as distinct values and the packets at or below each.
#[derive(Debug, Clone, Default)]
pub struct Ranked {
    values: Vec<i64>,
    at_most: Vec<u64>,
}

impl Ranked {
    /// The distribution of every sample of `histogram` (one pass over it).
    pub fn new(histogram: &mut ExactHistogram) -> Ranked {
        let mut r = Ranked::default();
        let mut total = 0u64;
        for (v, c) in histogram.iter() {
            total += c;
            r.values.push(v);
            r.at_most.push(total);
        }
        r
    }

    /// Samples counted.
    pub fn count(&self) -> u64 {
        self.at_most.last().copied().unwrap_or(0)
    }

    /// The rank-th smallest sample (1-based); `None` outside 1..=count.
    pub fn value_at_rank(&self, rank: u64) -> Option<i64> {
        if rank == 0 || rank > self.count() {
            return None;
        }
        Some(self.values[self.at_most.partition_point(|&c| c < rank)])
    }

    /// Samples at or below `value`.
    pub fn count_at_most(&self, value: i64) -> u64 {
        match self.values.partition_point(|&v| v <= value) {
            0 => 0,
            i => self.at_most[i - 1],
        }
    }

    /// Samples at or above `value`: what reaches a budget.
    pub fn count_at_least(&self, value: i64) -> u64 {
        self.count() - self.count_at_most(value.saturating_sub(1))
    }
}

/// One time block: its packets, and per latency bucket it used, the packets in that bucket
/// and every higher one.
#[derive(Debug, Clone, Default)]
struct BlockTail {
    packets: u64,
    buckets: Vec<u32>,
    from: Vec<u64>,
}

impl BlockTail {
    fn above(&self, bucket: usize) -> u64 {
        let i = self.buckets.partition_point(|&b| b as usize <= bucket);
        self.from.get(i).copied().unwrap_or(0)
    }
}

/// One run's time blocks, in time order.
#[derive(Debug, Clone, Default)]
pub struct RunBlocks {
    blocks: Vec<BlockTail>,
}

impl RunBlocks {
    /// The blocks of one run's summary.
    pub fn new(t: &TimeBlocks) -> RunBlocks {
        let blocks = t
            .blocks()
            .iter()
            .map(|b| {
                let used: Vec<(usize, u64)> = b.buckets().collect();
                let mut from = vec![0u64; used.len()];
                let mut sum = 0u64;
                for (i, &(_, c)) in used.iter().enumerate().rev() {
                    sum += c;
                    from[i] = sum;
                }
                BlockTail { packets: b.packets, buckets: used.iter().map(|&(bucket, _)| bucket as u32).collect(), from }
            })
            .collect();
        RunBlocks { blocks }
    }

    /// Packets in each block.
    pub fn packets(&self) -> Vec<u64> {
        self.blocks.iter().map(|b| b.packets).collect()
    }

    /// Packets in each block whose latency lies in a bucket above `value`'s.
    pub fn above(&self, value: i64) -> Vec<u64> {
        let bucket = bucket_of(value);
        self.blocks.iter().map(|b| b.above(bucket)).collect()
    }
}

/// The pooled distribution and each run's blocks.
#[derive(Debug, Clone, Default)]
pub struct Evidence {
    /// Every packet, exactly.
    pub ranked: Ranked,
    /// Each run's time blocks.
    pub runs: Vec<RunBlocks>,
}

impl Evidence {
    /// The evidence of these runs, whose packets together are `histogram`.
    pub fn new(histogram: &mut ExactHistogram, runs: &[&TimeBlocks]) -> Evidence {
        Evidence { ranked: Ranked::new(histogram), runs: runs.iter().map(|t| RunBlocks::new(t)).collect() }
    }

    /// Packets.
    pub fn count(&self) -> u64 {
        self.ranked.count()
    }

    /// Blocks holding a packet, over all runs.
    pub fn blocks(&self) -> usize {
        self.runs.iter().map(|r| r.blocks.iter().filter(|b| b.packets > 0).count()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::SeriesSummary;

    #[test]
    fn ranks_and_counts_agree_with_the_histogram() {
        let mut s = SeriesSummary::new();
        for i in 0..10_000i64 {
            s.record(i * 1_000, 3_000 + (i * 7919) % 5_000);
        }
        let ev = Evidence::new(&mut s.exact, &[&s.blocks]);
        assert_eq!(ev.count(), 10_000);
        for rank in [1u64, 2, 500, 9_999, 10_000] {
            let direct = s.exact.values_at_ranks(&[rank]).unwrap()[0];
            assert_eq!(ev.ranked.value_at_rank(rank), Some(direct));
            assert!(ev.ranked.count_at_most(direct) >= rank);
            assert!(ev.ranked.count_at_most(direct - 1) < rank);
        }
        assert_eq!(ev.ranked.value_at_rank(0), None);
        assert_eq!(ev.ranked.count_at_least(3_000), 10_000);
        assert_eq!(ev.ranked.count_at_least(8_000), 0);
        for probe in [0i64, 3_100, 4_999, 7_999] {
            let direct: Vec<u64> = s.blocks.blocks().iter().map(|b| b.above(probe)).collect();
            assert_eq!(ev.runs[0].above(probe), direct);
        }
    }
}
