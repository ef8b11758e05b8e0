//! A run's latencies in a compact form that serves what its matched series served the
//! statistics: the exact distribution (pooling, every percentile, order statistics) and
//! coarse per-time-block counts (how much the run's percentiles vary along its time: the
//! dependence between packets that confidence intervals must allow for).
//!
//! Time blocks start at 1 ms, one block per millisecond of PRE time from the first packet;
//! when a packet would open block `MAX_BLOCKS`, neighbouring blocks are merged in pairs and
//! the width doubles, so a run of any length ends with between `MAX_BLOCKS / 2` and
//! `MAX_BLOCKS` blocks of equal width (the last one partly filled), whatever the rate. The
//! same packets give the same blocks whether counted during the analysis or later from the
//! series, because only the order of PRE times and the first one matter.
//!
//! Within a block, latencies are counted in log-linear buckets: exact below 256 ns, then
//! 128 buckets per power of two (a bucket is at most 1/128 of its value wide). The
//! intervals ask for "packets above a value" per block; the exact distribution gives the
//! ranks and the values themselves.

use std::io::Read;

use crate::exact::ExactHistogram;

/// Buckets per power of two above the exact range (2^SUB_BITS).
const SUB_BITS: u32 = 7;
/// Values below this are their own bucket.
const EXACT_BELOW: u64 = 1 << (SUB_BITS + 1);
/// One more than the largest bucket index (that of i64::MAX).
pub const BUCKETS: usize = ((62 - SUB_BITS as usize) << SUB_BITS) + (1 << (SUB_BITS + 1));
/// At most this many blocks; a run ends with between half and all of them.
pub const MAX_BLOCKS: usize = 64;
/// The width of the first blocks.
pub const FIRST_WIDTH_NS: i64 = 1_000_000;

/// The bucket of a latency (negative values share bucket 0 with 0).
#[inline(always)]
pub fn bucket_of(v: i64) -> usize {
    let v = v.max(0) as u64;
    if v < EXACT_BELOW {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros();
    let shift = msb - SUB_BITS;
    ((shift as usize) << SUB_BITS) + (v >> shift) as usize
}

/// The smallest value of a bucket.
pub fn bucket_low(b: usize) -> i64 {
    if (b as u64) < EXACT_BELOW {
        return b as i64;
    }
    let shift = (b >> SUB_BITS) - 1;
    let mantissa = (b - (shift << SUB_BITS)) as i64;
    mantissa << shift
}

/// One time block: the packets in it and their latencies by bucket.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Block {
    /// Packets counted in the block.
    pub packets: u64,
    /// Packets per bucket, up to the highest bucket used.
    counts: Vec<u64>,
}

impl Block {
    #[inline(always)]
    fn add(&mut self, bucket: usize, n: u64) {
        if bucket >= self.counts.len() {
            self.counts.resize(bucket + 1, 0);
        }
        self.counts[bucket] += n;
        self.packets += n;
    }

    fn absorb(&mut self, other: &Block) {
        for (b, &c) in other.counts.iter().enumerate() {
            if c > 0 {
                self.add(b, c);
            }
        }
    }

    /// Packets in buckets above `value`'s own bucket.
    pub fn above(&self, value: i64) -> u64 {
        self.counts.iter().skip(bucket_of(value) + 1).sum()
    }

    /// (bucket, count) of the buckets used, in bucket order.
    pub fn buckets(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.counts.iter().enumerate().filter(|(_, &c)| c > 0).map(|(b, &c)| (b, c))
    }
}

/// Latencies counted per time block of PRE time (see the module's documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeBlocks {
    origin_ns: Option<i64>,
    width_ns: i64,
    blocks: Vec<Block>,
    /// The block the last packet went to and where it ends: the common case is one
    /// comparison per packet.
    current: usize,
    current_end: i64,
}

impl Default for TimeBlocks {
    fn default() -> Self {
        Self::new()
    }
}

impl TimeBlocks {
    /// No packet yet.
    pub fn new() -> Self {
        TimeBlocks { origin_ns: None, width_ns: FIRST_WIDTH_NS, blocks: Vec::new(), current: 0, current_end: i64::MIN }
    }

    /// Count one packet sent at `pre_ts_ns` with latency `latency_ns`. Packets come in
    /// PRE order; one stamped before the first is counted in the first block.
    #[inline(always)]
    pub fn record(&mut self, pre_ts_ns: i64, latency_ns: i64) {
        let bucket = bucket_of(latency_ns);
        if pre_ts_ns < self.current_end && pre_ts_ns >= self.current_end.saturating_sub(self.width_ns) {
            self.blocks[self.current].add(bucket, 1);
            return;
        }
        self.record_elsewhere(pre_ts_ns, bucket);
    }

    #[cold]
    #[inline(never)]
    fn record_elsewhere(&mut self, pre_ts_ns: i64, bucket: usize) {
        let origin = *self.origin_ns.get_or_insert(pre_ts_ns);
        let offset = pre_ts_ns.saturating_sub(origin).max(0);
        let mut index = (offset / self.width_ns) as usize;
        while index >= MAX_BLOCKS {
            self.halve();
            index = (offset / self.width_ns) as usize;
        }
        if index >= self.blocks.len() {
            self.blocks.resize_with(index + 1, Block::default);
        }
        self.blocks[index].add(bucket, 1);
        self.current = index;
        self.current_end = origin.saturating_add(self.width_ns.saturating_mul(index as i64 + 1));
    }

    /// Merge neighbouring blocks in pairs; the width doubles.
    fn halve(&mut self) {
        let old = std::mem::take(&mut self.blocks);
        for pair in old.chunks(2) {
            let mut merged = pair[0].clone();
            if let Some(second) = pair.get(1) {
                merged.absorb(second);
            }
            self.blocks.push(merged);
        }
        self.width_ns = self.width_ns.saturating_mul(2);
        self.current_end = i64::MIN;
    }

    /// The first packet's PRE time (None before any packet).
    pub fn origin_ns(&self) -> Option<i64> {
        self.origin_ns
    }

    /// The width of every block.
    pub fn width_ns(&self) -> i64 {
        self.width_ns
    }

    /// The blocks, in time order (a block no packet fell in has 0 packets).
    pub fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    /// Packets counted, over all blocks.
    pub fn packets(&self) -> u64 {
        self.blocks.iter().map(|b| b.packets).sum()
    }
}

/// The exact distribution of a run's latencies and their time blocks.
#[derive(Debug, Clone, Default)]
pub struct SeriesSummary {
    /// Every latency, exactly.
    pub exact: ExactHistogram,
    /// The same latencies by time block.
    pub blocks: TimeBlocks,
}

/// Why stored bytes are not a summary. The bytes come from a database or a bundle another
/// host made: anything may be in them, and nothing is allocated for a count they claim
/// before it is checked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SummaryError {
    /// Not zstd, or a stream that fails its checks.
    #[error("not a compressed latency summary ({0})")]
    Compression(String),
    /// Larger than any summary lowtail writes.
    #[error("a latency summary larger than {} MiB unpacked", MAX_UNPACKED >> 20)]
    TooLarge,
    /// Bytes that do not follow the format, at this offset of the unpacked bytes.
    #[error("a damaged latency summary at byte {offset}: {what}")]
    Corrupt {
        /// Offset in the unpacked bytes.
        offset: usize,
        /// What was wrong there.
        what: &'static str,
    },
    /// A later format than this lowtail reads.
    #[error("a latency summary of format {0}; this lowtail reads format {FORMAT}")]
    Version(u8),
}

const MAGIC: &[u8; 4] = b"LTSS";
/// The format version written.
pub const FORMAT: u8 = 1;
/// Unpacked summaries above this are refused (a real one is a few MB).
const MAX_UNPACKED: usize = 512 << 20;
/// Samples a summary may hold outside the histogram's counter pages (kept one by one):
/// 2^27 of them take 1 GiB.
const MAX_SPILLED: u64 = 1 << 27;
/// Samples a summary may hold in all.
const MAX_SAMPLES: u64 = 1 << 48;

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn corrupt(&self, what: &'static str) -> SummaryError {
        SummaryError::Corrupt { offset: self.pos, what }
    }

    fn varint(&mut self, what: &'static str) -> Result<u64, SummaryError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let Some(&b) = self.bytes.get(self.pos) else { return Err(self.corrupt(what)) };
            self.pos += 1;
            if shift == 63 && b > 1 {
                return Err(self.corrupt(what));
            }
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(self.corrupt(what))
    }

    /// A count of items each at least `min_bytes` long: never more than the bytes left hold.
    fn length(&mut self, what: &'static str, min_bytes: usize) -> Result<usize, SummaryError> {
        let n = self.varint(what)?;
        let left = (self.bytes.len() - self.pos) as u64;
        if n.saturating_mul(min_bytes as u64) > left {
            return Err(self.corrupt(what));
        }
        Ok(n as usize)
    }
}

impl SeriesSummary {
    /// An empty summary.
    pub fn new() -> Self {
        Self::default()
    }

    /// Count one latency of a packet sent at `pre_ts_ns` (packets in PRE order).
    #[inline(always)]
    pub fn record(&mut self, pre_ts_ns: i64, latency_ns: i64) {
        self.exact.record(latency_ns);
        self.blocks.record(pre_ts_ns, latency_ns);
    }

    /// The summary as stored: versioned, varint-coded, zstd-compressed.
    pub fn to_bytes(&mut self) -> Vec<u8> {
        let mut raw = Vec::with_capacity(1 << 16);
        raw.extend_from_slice(MAGIC);
        raw.push(FORMAT);
        let pairs: Vec<(i64, u64)> = self.exact.iter().collect();
        put_varint(&mut raw, pairs.len() as u64);
        let mut last = 0i64;
        for (v, c) in pairs {
            put_varint(&mut raw, zigzag(v.wrapping_sub(last)));
            put_varint(&mut raw, c);
            last = v;
        }
        let origin = self.blocks.origin_ns;
        put_varint(&mut raw, u64::from(origin.is_some()));
        put_varint(&mut raw, zigzag(origin.unwrap_or(0)));
        put_varint(&mut raw, self.blocks.width_ns as u64);
        put_varint(&mut raw, self.blocks.blocks.len() as u64);
        for block in &self.blocks.blocks {
            let used: Vec<(usize, u64)> = block.buckets().collect();
            put_varint(&mut raw, used.len() as u64);
            let mut last = 0usize;
            for (b, c) in used {
                put_varint(&mut raw, (b - last) as u64);
                put_varint(&mut raw, c);
                last = b;
            }
        }
        zstd::bulk::compress(&raw, 3).expect("compressing into memory does not fail")
    }

    /// A summary from `to_bytes`' output, every part checked: the exact distribution's
    /// values ascending with counts above zero, blocks within `MAX_BLOCKS` and buckets within
    /// range, and the blocks counting the same packets as the distribution.
    pub fn from_bytes(bytes: &[u8]) -> Result<SeriesSummary, SummaryError> {
        let mut raw = Vec::new();
        let decoder = zstd::stream::read::Decoder::new(bytes).map_err(|e| SummaryError::Compression(e.to_string()))?;
        decoder
            .take(MAX_UNPACKED as u64 + 1)
            .read_to_end(&mut raw)
            .map_err(|e| SummaryError::Compression(e.to_string()))?;
        if raw.len() > MAX_UNPACKED {
            return Err(SummaryError::TooLarge);
        }
        let mut r = Reader { bytes: &raw, pos: 0 };
        if raw.get(..4) != Some(MAGIC) {
            return Err(r.corrupt("no summary header"));
        }
        r.pos = 4;
        let version = *raw.get(4).ok_or_else(|| r.corrupt("no format version"))?;
        if version != FORMAT {
            return Err(SummaryError::Version(version));
        }
        r.pos = 5;
        let mut summary = SeriesSummary::new();
        let pairs = r.length("value count", 2)?;
        let (mut value, mut total, mut spilled) = (0i64, 0u64, 0u64);
        for i in 0..pairs {
            let delta = unzigzag(r.varint("value")?);
            let next = value.checked_add(delta).ok_or_else(|| r.corrupt("value out of range"))?;
            if i > 0 && next <= value {
                return Err(r.corrupt("values out of order"));
            }
            value = next;
            let count = r.varint("count")?;
            if count == 0 {
                return Err(r.corrupt("a value counted zero times"));
            }
            total =
                total.checked_add(count).filter(|&t| t <= MAX_SAMPLES).ok_or_else(|| r.corrupt("too many samples"))?;
            spilled = spilled.saturating_add(summary.exact.spill_if_recorded(value, count));
            if spilled > MAX_SPILLED {
                return Err(r.corrupt("too many samples outside the histogram's pages"));
            }
            summary.exact.record_n(value, count);
        }
        let has_origin = r.varint("origin flag")?;
        let origin = unzigzag(r.varint("origin")?);
        if has_origin > 1 {
            return Err(r.corrupt("origin flag"));
        }
        let width = r.varint("block width")?;
        if width == 0 || width > i64::MAX as u64 {
            return Err(r.corrupt("block width"));
        }
        let count = r.length("block count", 1)?;
        if count > MAX_BLOCKS || (has_origin == 0) != (count == 0) {
            return Err(r.corrupt("block count"));
        }
        let mut blocks = Vec::with_capacity(count);
        for _ in 0..count {
            let used = r.length("bucket count", 2)?;
            let mut block = Block::default();
            let mut bucket = 0usize;
            for i in 0..used {
                let step = r.varint("bucket")?;
                if i > 0 && step == 0 {
                    return Err(r.corrupt("buckets out of order"));
                }
                bucket = usize::try_from(step)
                    .ok()
                    .and_then(|s| bucket.checked_add(s))
                    .filter(|&b| b < BUCKETS)
                    .ok_or_else(|| r.corrupt("bucket out of range"))?;
                let c = r.varint("bucket count")?;
                if c == 0 || c > total {
                    return Err(r.corrupt("bucket count"));
                }
                block.add(bucket, c);
                if block.packets > total {
                    return Err(r.corrupt("blocks hold more packets than the distribution"));
                }
            }
            blocks.push(block);
        }
        if r.pos != raw.len() {
            return Err(r.corrupt("bytes after the summary"));
        }
        let in_blocks = blocks.iter().try_fold(0u64, |sum, b| sum.checked_add(b.packets));
        if in_blocks != Some(total) {
            return Err(r.corrupt("blocks and distribution count different packets"));
        }
        summary.blocks = TimeBlocks {
            origin_ns: (has_origin == 1).then_some(origin),
            width_ns: width as i64,
            blocks,
            current: 0,
            current_end: i64::MIN,
        };
        Ok(summary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn buckets_are_exact_below_256_then_128_per_octave() {
        for v in 0..256 {
            assert_eq!(bucket_of(v), v as usize);
            assert_eq!(bucket_low(v as usize), v);
        }
        assert_eq!(bucket_of(-7), 0);
        assert_eq!(bucket_of(256), 256);
        assert_eq!(bucket_of(257), 256); // 256 and 257 share a bucket two wide
        assert_eq!(bucket_of(258), 257);
        assert_eq!(bucket_of(i64::MAX), BUCKETS - 1);
        for b in 0..BUCKETS {
            let low = bucket_low(b);
            assert_eq!(bucket_of(low), b, "bucket {b}");
            if b > 0 {
                assert_eq!(bucket_of(low - 1), b - 1, "bucket {b}");
            }
        }
    }

    #[test]
    fn a_bucket_is_at_most_a_128th_of_its_value_wide() {
        for b in 256..BUCKETS - 1 {
            let (low, next) = (bucket_low(b), bucket_low(b + 1));
            assert!((next - low) * 128 <= low, "bucket {b}: {low}..{next}");
        }
    }

    #[test]
    fn blocks_double_their_width_to_stay_within_max_blocks() {
        let mut t = TimeBlocks::new();
        // 10 s at 10 kpps: 1 ms blocks would be 10,000 of them.
        for i in 0..100_000i64 {
            t.record(5_000 + i * 100_000, 1_000 + i % 7);
        }
        let n = t.blocks().len();
        assert!((MAX_BLOCKS / 2..=MAX_BLOCKS).contains(&n), "{n} blocks");
        assert_eq!(t.width_ns(), FIRST_WIDTH_NS << 8); // 256 ms: 40 blocks
        assert_eq!(t.packets(), 100_000);
        assert!(t.blocks()[..n - 1].iter().all(|b| b.packets == 2_560));
        assert_eq!(t.origin_ns(), Some(5_000));
    }

    #[test]
    fn above_counts_packets_in_higher_buckets() {
        let mut t = TimeBlocks::new();
        for (ts, v) in [(0, 100), (1, 200), (2, 300), (3, 300), (2_000_000, 5_000)] {
            t.record(ts, v);
        }
        assert_eq!(t.blocks().len(), 3);
        assert_eq!(t.blocks()[0].above(200), 2);
        assert_eq!(t.blocks()[0].above(99), 4);
        assert_eq!(t.blocks()[1].packets, 0);
        assert_eq!(t.blocks()[2].above(4_000), 1);
    }

    #[test]
    fn damaged_bytes_are_refused_with_what_was_wrong() {
        let mut s = SeriesSummary::new();
        for i in 0..1000 {
            s.record(i * 10_000, 3_000 + i % 50);
        }
        let good = s.to_bytes();
        assert!(SeriesSummary::from_bytes(&good).is_ok());
        assert!(matches!(SeriesSummary::from_bytes(b"nonsense"), Err(SummaryError::Compression(_))));
        let packed = |raw: &[u8]| zstd::bulk::compress(raw, 1).unwrap();
        assert!(matches!(SeriesSummary::from_bytes(&packed(b"LTSS\x09")), Err(SummaryError::Version(9))));
        // A claimed count of ten billion values in a few bytes: refused before anything is allocated.
        let mut raw = b"LTSS\x01".to_vec();
        put_varint(&mut raw, 10_000_000_000);
        assert!(matches!(
            SeriesSummary::from_bytes(&packed(&raw)),
            Err(SummaryError::Corrupt { what: "value count", .. })
        ));
        // One value counted 10^12 times outside the pages: refused, not a terabyte spilled.
        let mut raw = b"LTSS\x01".to_vec();
        for v in [1, zigzag(-5), 1_000_000_000_000] {
            put_varint(&mut raw, v);
        }
        assert!(matches!(
            SeriesSummary::from_bytes(&packed(&raw)),
            Err(SummaryError::Corrupt { what: "too many samples outside the histogram's pages", .. })
        ));
    }

    fn arbitrary_series() -> impl Strategy<Value = Vec<(i64, i64)>> {
        prop::collection::vec(
            (0i64..5_000_000_000, prop_oneof![0i64..300, 1_000i64..70_000, (1i64 << 31)..(1i64 << 34)]),
            0..2_000,
        )
        .prop_map(|mut v| {
            v.sort_by_key(|&(ts, _)| ts);
            v
        })
    }

    proptest! {
        #[test]
        fn bytes_read_back_as_the_same_summary(series in arbitrary_series()) {
            let mut s = SeriesSummary::new();
            for &(ts, v) in &series { s.record(ts, v); }
            let mut back = SeriesSummary::from_bytes(&s.to_bytes()).unwrap();
            prop_assert_eq!(back.exact.iter().collect::<Vec<_>>(), s.exact.iter().collect::<Vec<_>>());
            prop_assert_eq!(back.blocks.blocks(), s.blocks.blocks());
            prop_assert_eq!(back.blocks.width_ns(), s.blocks.width_ns());
            prop_assert_eq!(back.blocks.origin_ns(), s.blocks.origin_ns());
        }

        #[test]
        fn blocks_count_what_a_direct_count_finds(series in arbitrary_series(), probe in 0i64..80_000) {
            let mut t = TimeBlocks::new();
            for &(ts, v) in &series { t.record(ts, v); }
            prop_assert!(t.blocks().len() <= MAX_BLOCKS);
            let Some(origin) = t.origin_ns() else { return Ok(()) };
            let mut expected = vec![(0u64, 0u64); t.blocks().len()];
            for &(ts, v) in &series {
                let b = ((ts - origin) / t.width_ns()) as usize;
                expected[b].0 += 1;
                expected[b].1 += u64::from(bucket_of(v) > bucket_of(probe));
            }
            let got: Vec<(u64, u64)> = t.blocks().iter().map(|b| (b.packets, b.above(probe))).collect();
            prop_assert_eq!(got, expected);
        }

        #[test]
        fn any_bytes_are_a_summary_or_one_error(bytes in prop::collection::vec(any::<u8>(), 0..300), raw in any::<bool>()) {
            let input = if raw { zstd::bulk::compress(&[b"LTSS\x01".as_slice(), &bytes].concat(), 1).unwrap() } else { bytes };
            if let Ok(mut s) = SeriesSummary::from_bytes(&input) {
                prop_assert_eq!(s.exact.count(), s.blocks.packets());
                let again = SeriesSummary::from_bytes(&s.to_bytes());
                prop_assert!(again.is_ok());
            }
        }
    }
}
