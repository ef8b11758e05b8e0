//! Packets per second.

/// Packets per one-second interval since a start time.
#[derive(Debug, Clone, Default)]
pub struct PerSecond {
    start_ns: Option<i64>,
    counts: Vec<u64>,
    before_start: u64,
    /// [bin_start, bin_end) of the bin counted last: the common case needs no division.
    bin_start: i64,
    bin_end: i64,
    bin: usize,
}

const NS: i64 = 1_000_000_000;
/// A day of seconds: a timestamp further out is a corrupt one, not a reason to allocate.
const MAX_SECONDS: i64 = 86_400;

impl PerSecond {
    /// Second 0 starts at the first packet counted, unless `set_start` comes first.
    pub fn new() -> Self {
        Self::default()
    }

    /// Second 0 starts at `start_ns` (the first call wins).
    pub fn set_start(&mut self, start_ns: i64) {
        self.start_ns.get_or_insert(start_ns);
    }

    /// Count one packet at `ts_ns` (one before the start or a day after it is set apart).
    #[inline]
    pub fn count(&mut self, ts_ns: i64) {
        if ts_ns >= self.bin_start && ts_ns < self.bin_end {
            self.counts[self.bin] += 1;
            return;
        }
        self.count_slow(ts_ns);
    }

    fn count_slow(&mut self, ts_ns: i64) {
        let start = *self.start_ns.get_or_insert(ts_ns);
        // (corrupt timestamps can be a whole i64 range apart)
        let Some(rel) = ts_ns.checked_sub(start).filter(|r| (0..MAX_SECONDS * NS).contains(r)) else {
            self.before_start += 1;
            return;
        };
        let s = (rel / NS) as usize;
        if s >= self.counts.len() {
            self.counts.resize(s + 1, 0);
        }
        self.counts[s] += 1;
        self.bin = s;
        self.bin_start = start + s as i64 * NS;
        self.bin_end = self.bin_start.saturating_add(NS);
    }

    /// Packets in each second since the start.
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    /// Packets outside [start, start + 1 day).
    pub fn outside(&self) -> u64 {
        self.before_start
    }
}
