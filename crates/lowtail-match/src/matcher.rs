//! Streaming join of the two capture sides.
//!
//! The pipeline feeds both sides merged in timestamp order. Every PRE packet enters a
//! ring in PRE order; its POST copy (found by id) fills it in. An entry leaves the ring
//! once the merged clock has moved `horizon` past its departure: then it is final —
//! received, lost, or received with a negative latency — and goes to the sink, still
//! in PRE order. Memory is therefore bounded by rate × horizon, not by capture length.
//!
//! Id lookups are O(1): sequential ids (the normal case) are found by arithmetic from
//! an anchor, and only ids that break the sequence go through a hash map.
//!
//! Reordering (RFC 4737) is decided in POST arrival order. A POST copy that arrives
//! before its PRE packet (a clock skew) has no PRE position yet, so the arrivals after
//! it wait in a queue until it gets one (or expires): at most a horizon of POST traffic,
//! and nothing at all while no such copy is waiting.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

/// One PRE packet once its fate is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Matched {
    /// Position in PRE (0 = first packet with an id, trimmed ones included).
    pub index: u64,
    /// The packet id (32-bit ids unwrapped).
    pub id: u64,
    /// When PRE saw it.
    pub pre_ts: i64,
    /// Meaningless for `Outcome::Lost`.
    pub post_ts: i64,
}

/// What became of a PRE packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Found in POST after it was sent.
    Received,
    /// Received, but timestamped before it was sent: a clock problem.
    Negative,
    /// Not found in POST within the horizon.
    Lost,
}

/// Receives every PRE packet's fate, in PRE order.
pub trait MatchSink {
    /// One packet's fate.
    fn resolved(&mut self, outcome: Outcome, m: &Matched);
}

/// Packet counts of one analysis (trimmed packets excluded unless named).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// PRE packets after the trim.
    pub sent: u64,
    /// Of those, found in POST (first copies).
    pub received: u64,
    /// Of those, never found in POST.
    pub lost: u64,
    /// Extra POST copies.
    pub duplicates: u64,
    /// RFC 4737: arrivals whose PRE position is below the next expected one.
    pub reordered: u64,
    /// Received before they were sent (a clock problem).
    pub negative: u64,
    /// POST packets whose id was never sent (within the horizon).
    pub unmatched: u64,
    /// Ids sent more than once: the later copies are ignored.
    pub pre_duplicates: u64,
    /// PRE packets inside the warm-up trim.
    pub trimmed_pre: u64,
    /// POST copies of trimmed PRE packets.
    pub trimmed_post: u64,
}

const PENDING: i64 = i64::MIN;
const TRIMMED: i64 = i64::MIN + 1;

/// Queued arrivals are PRE positions, or one of these (positions never get this high).
const AWAITING_PRE: u64 = u64::MAX;
/// An early copy whose id was never sent, or was trimmed: not an arrival after all.
const NOT_AN_ARRIVAL: u64 = u64::MAX - 1;

/// A POST copy seen before any PRE packet with its id.
#[derive(Debug, Clone, Copy)]
struct EarlyPost {
    first_ts: i64,
    copies: u64,
    /// Its place in `Matcher::arrivals`.
    arrival: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Entry {
    id: u64,
    pre_ts: i64,
    /// `PENDING`, `TRIMMED`, or the first POST timestamp.
    post_ts: i64,
}

/// A FIFO addressed by absolute position (PRE entries by PRE index, arrivals by
/// arrival number), in a power-of-two ring: `index & mask` finds a slot with no
/// division and no wrap-around branch.
#[derive(Debug)]
struct Ring<T> {
    slots: Vec<T>,
    mask: u64,
    /// Index of the oldest entry held.
    base: u64,
    /// Index the next entry gets.
    next: u64,
}

impl<T: ZeroDefault> Ring<T> {
    fn new() -> Ring<T> {
        Ring { slots: vec![T::default(); 1024], mask: 1023, base: 0, next: 0 }
    }

    #[inline]
    fn len(&self) -> u64 {
        self.next - self.base
    }

    #[inline]
    fn contains(&self, index: u64) -> bool {
        index.wrapping_sub(self.base) < self.len()
    }

    #[inline]
    fn get(&self, index: u64) -> &T {
        &self.slots[(index & self.mask) as usize]
    }

    #[inline]
    fn get_mut(&mut self, index: u64) -> &mut T {
        &mut self.slots[(index & self.mask) as usize]
    }

    #[inline]
    fn front(&self) -> Option<&T> {
        (self.next > self.base).then(|| self.get(self.base))
    }

    #[inline]
    fn push(&mut self, e: T) {
        if self.len() == self.slots.len() as u64 {
            self.grow();
        }
        let next = self.next;
        *self.get_mut(next) = e;
        self.next += 1;
    }

    #[cold]
    fn grow(&mut self) {
        let mut slots = huge_page_vec(self.slots.len() * 2);
        let mask = slots.len() as u64 - 1;
        for i in self.base..self.next {
            slots[(i & mask) as usize] = *self.get(i);
        }
        self.slots = slots;
        self.mask = mask;
    }

    #[inline]
    fn pop(&mut self) -> (u64, T) {
        let index = self.base;
        self.base += 1;
        (index, *self.get(index))
    }
}

/// Types whose all-zero bit pattern is their `Default` value, so that a ring of them can
/// start as memory the kernel zeroes lazily, page by page as slots are first used.
///
/// # Safety
/// Every field must be an integer (or another `ZeroDefault`): all zero bytes is a valid
/// value, equal to `Default::default()`.
unsafe trait ZeroDefault: Copy + Default {}

// SAFETY: three integers; the derived Default is all zeros.
unsafe impl ZeroDefault for Entry {}
// SAFETY: an integer.
unsafe impl ZeroDefault for u64 {}

/// `len` default values in memory the kernel may back with 2 MiB pages. At 1 Mpps and
/// a 10 s horizon the PRE ring holds 10 million entries (384 MiB once grown): in 4 KiB
/// pages, faulting them in cost about a fifth of the analysis's CPU time. The memory comes
/// zeroed from the allocator (fresh pages from the kernel) rather than written with
/// defaults: slots the ring never reaches are never touched, and the kernel's zeroing of
/// each page is the only pass over it (it was half the CPU time of a 20-million-packet
/// pair at 1 Mpps when every slot was also written up front).
fn huge_page_vec<T: ZeroDefault>(len: usize) -> Vec<T> {
    let layout = std::alloc::Layout::array::<T>(len).expect("ring size overflows");
    assert!(layout.size() > 0, "rings are never empty or zero-sized");
    // SAFETY: a non-zero-sized layout; a null result is handled; `T: ZeroDefault` makes the
    // zeroed memory `len` valid values, so the Vec owns `len` initialised elements of an
    // allocation made with the global allocator and `T`'s layout, as from_raw_parts requires.
    unsafe {
        let ptr = std::alloc::alloc_zeroed(layout);
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        advise_huge_pages(ptr, layout.size());
        Vec::from_raw_parts(ptr as *mut T, len, len)
    }
}

#[cfg(target_os = "linux")]
fn advise_huge_pages(start: *mut u8, bytes: usize) {
    const HUGE: usize = 2 << 20;
    let first = (start as usize).next_multiple_of(HUGE);
    let end = (start as usize + bytes) / HUGE * HUGE;
    if end > first {
        // SAFETY: advice on whole pages inside an allocation this function's caller
        // owns and has not touched yet; it changes how the pages are backed, never
        // their contents. A kernel without transparent huge pages ignores it.
        unsafe { libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE) };
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_start: *mut u8, _bytes: usize) {}

/// The streaming PRE/POST join: feed both sides in merged time order (`push_pre`,
/// `push_post`), read the fates from the sink, `finish` for the counters.
pub struct Matcher<S: MatchSink> {
    sink: S,
    horizon_ns: i64,
    trim_ns: i64,
    trim_until: Option<i64>,
    ring: Ring<Entry>,
    /// (id, index) of the start of the current run of consecutive ids.
    anchor: Option<(u64, u64)>,
    /// Entries before this index were hashed when their run ended.
    segment_start: u64,
    by_id: FxHashMap<u64, u64>,
    early_posts: VecDeque<(i64, u64)>,
    early_by_id: FxHashMap<u64, EarlyPost>,
    /// POST arrivals (PRE positions) by arrival number, in POST order, from the oldest
    /// early copy whose PRE position is unknown; empty while there is none.
    arrivals: Ring<u64>,
    /// RFC 4737 NextExp: 1 + the highest PRE position that has arrived.
    next_expected: u64,
    /// Nothing can expire before the merged clock passes this (cached bound).
    expire_after: i64,
    counters: Counters,
}

impl<S: MatchSink> Matcher<S> {
    /// `trim_ns`: PRE packets within this time of the first PRE packet are ignored,
    /// with their POST copies. `horizon_ns`: the longest latency that still counts as
    /// a delivery rather than a loss.
    pub fn new(sink: S, trim_ns: i64, horizon_ns: i64) -> Self {
        Matcher {
            sink,
            horizon_ns: horizon_ns.max(1),
            trim_ns: trim_ns.max(0),
            trim_until: None,
            ring: Ring::new(),
            anchor: None,
            segment_start: 0,
            by_id: FxHashMap::default(),
            early_posts: VecDeque::new(),
            early_by_id: FxHashMap::default(),
            arrivals: Ring::new(),
            next_expected: 0,
            expire_after: i64::MAX,
            counters: Counters::default(),
        }
    }

    /// Final after `finish`; before, `reordered` may still miss arrivals that wait
    /// behind an early POST copy.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The sink, for reading what it gathered so far.
    pub fn sink(&self) -> &S {
        &self.sink
    }

    /// Timestamp of the first PRE packet, once seen.
    pub fn start_ts(&self) -> Option<i64> {
        self.trim_until.map(|t| t - self.trim_ns)
    }

    #[inline]
    fn lookup(&self, id: u64) -> Option<u64> {
        if let Some((aid, aidx)) = self.anchor {
            let cand = aidx.wrapping_add(id.wrapping_sub(aid));
            if self.ring.contains(cand) && self.ring.get(cand).id == id {
                return Some(cand);
            }
        }
        if self.by_id.is_empty() {
            None
        } else {
            self.by_id.get(&id).copied()
        }
    }

    /// The first copy of PRE position `index` arrived in POST (now, in POST order).
    #[inline]
    fn note_arrival(&mut self, index: u64) {
        if self.arrivals.len() == 0 {
            self.count_in_order(index);
        } else {
            self.arrivals.push(index);
        }
    }

    /// RFC 4737 §3.3: an arrival below NextExp is reordered, any other moves NextExp.
    #[inline]
    fn count_in_order(&mut self, index: u64) {
        if index < self.next_expected {
            self.counters.reordered += 1;
        } else {
            self.next_expected = index + 1;
        }
    }

    /// An early POST copy arrived: hold its place in arrival order.
    fn await_pre(&mut self) -> u64 {
        let arrival = self.arrivals.next;
        self.arrivals.push(AWAITING_PRE);
        arrival
    }

    /// An early copy's PRE position is known (or it turned out not to be an arrival):
    /// count the arrivals that no longer wait for anything. The queue always starts
    /// with an early copy still awaiting its PRE packet, so only settling that one
    /// lets arrivals through.
    fn settle(&mut self, arrival: u64, index: u64) {
        if arrival != self.arrivals.base {
            *self.arrivals.get_mut(arrival) = index;
            return;
        }
        let mut next = index;
        loop {
            self.arrivals.pop();
            if next != NOT_AN_ARRIVAL {
                self.count_in_order(next);
            }
            match self.arrivals.front() {
                Some(&queued) if queued != AWAITING_PRE => next = queued,
                _ => break,
            }
        }
    }

    /// A packet seen on the PRE side, in merged time order.
    #[inline]
    pub fn push_pre(&mut self, ts: i64, id: u64) {
        self.expire(ts);
        let trim_until = *self.trim_until.get_or_insert(ts.saturating_add(self.trim_ns));
        if self.lookup(id).is_some() {
            self.counters.pre_duplicates += 1;
            return;
        }
        let index = self.ring.next;
        let trimmed = ts < trim_until;
        let mut post_ts = if trimmed { TRIMMED } else { PENDING };
        if trimmed {
            self.counters.trimmed_pre += 1;
        } else {
            self.counters.sent += 1;
        }
        if !self.early_by_id.is_empty() {
            if let Some(early) = self.early_by_id.remove(&id) {
                if trimmed {
                    self.counters.trimmed_post += early.copies;
                    self.settle(early.arrival, NOT_AN_ARRIVAL);
                } else {
                    post_ts = early.first_ts;
                    self.counters.received += 1;
                    self.counters.duplicates += early.copies - 1;
                    self.settle(early.arrival, index);
                }
            }
        }
        self.extend_run(id, index);
        if self.ring.len() == 0 {
            self.expire_after = self.expire_after.min(ts.saturating_add(self.horizon_ns));
        }
        self.ring.push(Entry { id, pre_ts: ts, post_ts });
    }

    /// Keep the anchor on runs of consecutive ids; when a run breaks, hash its entries.
    #[inline]
    fn extend_run(&mut self, id: u64, index: u64) {
        if let Some((aid, aidx)) = self.anchor {
            if aidx.wrapping_add(id.wrapping_sub(aid)) == index {
                return;
            }
        }
        for i in self.segment_start.max(self.ring.base)..index {
            self.by_id.insert(self.ring.get(i).id, i);
        }
        self.anchor = Some((id, index));
        self.segment_start = index;
    }

    /// A packet seen on the POST side, in merged time order.
    #[inline]
    pub fn push_post(&mut self, ts: i64, id: u64) {
        self.expire(ts);
        match self.lookup(id) {
            Some(index) => {
                let e = self.ring.get_mut(index);
                match e.post_ts {
                    TRIMMED => self.counters.trimmed_post += 1,
                    PENDING => {
                        e.post_ts = ts;
                        self.counters.received += 1;
                        self.note_arrival(index);
                    }
                    _ => self.counters.duplicates += 1,
                }
            }
            None => match self.early_by_id.get_mut(&id) {
                Some(early) => early.copies += 1,
                None => {
                    let arrival = self.await_pre();
                    self.early_by_id.insert(id, EarlyPost { first_ts: ts, copies: 1, arrival });
                    if self.early_posts.is_empty() {
                        self.expire_after = self.expire_after.min(ts.saturating_add(self.horizon_ns));
                    }
                    self.early_posts.push_back((ts, id));
                }
            },
        }
    }

    /// Finalise everything older than `now - horizon`.
    #[inline]
    pub fn expire(&mut self, now: i64) {
        if now <= self.expire_after {
            return;
        }
        self.expire_slow(now);
    }

    fn expire_slow(&mut self, now: i64) {
        let limit = now.saturating_sub(self.horizon_ns);
        while let Some(front) = self.ring.front() {
            if front.pre_ts >= limit {
                break;
            }
            self.pop_front();
        }
        while let Some(&(ts, id)) = self.early_posts.front() {
            if ts >= limit {
                break;
            }
            self.early_posts.pop_front();
            self.retire_early(ts, id);
        }
        let ring_oldest = self.ring.front().map_or(i64::MAX, |e| e.pre_ts);
        let early_oldest = self.early_posts.front().map_or(i64::MAX, |e| e.0);
        self.expire_after = ring_oldest.min(early_oldest).saturating_add(self.horizon_ns);
    }

    /// An early copy's horizon has passed: if no PRE packet claimed it, its id was never sent.
    fn retire_early(&mut self, ts: i64, id: u64) {
        // Otherwise a PRE packet claimed it (an entry left under its id is a later early copy).
        if let Some(&early) = self.early_by_id.get(&id) {
            if early.first_ts == ts {
                self.early_by_id.remove(&id);
                self.counters.unmatched += early.copies;
                self.settle(early.arrival, NOT_AN_ARRIVAL);
            }
        }
    }

    #[inline]
    fn pop_front(&mut self) {
        let (index, e) = self.ring.pop();
        if index < self.segment_start {
            self.by_id.remove(&e.id);
        }
        let m = Matched { index, id: e.id, pre_ts: e.pre_ts, post_ts: e.post_ts };
        match e.post_ts {
            TRIMMED => {}
            PENDING => {
                self.counters.lost += 1;
                self.sink.resolved(Outcome::Lost, &m);
            }
            post if post < e.pre_ts => {
                self.counters.negative += 1;
                self.sink.resolved(Outcome::Negative, &m);
            }
            _ => self.sink.resolved(Outcome::Received, &m),
        }
    }

    /// Both captures are exhausted: everything still open is final now.
    pub fn finish(mut self) -> (Counters, S) {
        while self.ring.len() > 0 {
            self.pop_front();
        }
        while let Some((ts, id)) = self.early_posts.pop_front() {
            self.retire_early(ts, id);
        }
        debug_assert_eq!(self.arrivals.len(), 0);
        (self.counters, self.sink)
    }

    /// Entries currently held (for memory accounting and tests).
    pub fn in_flight(&self) -> usize {
        (self.ring.len() + self.arrivals.len()) as usize + self.early_posts.len()
    }
}
