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

use crate::ring::{Ring, ZeroDefault};

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
    /// The flow PRE saw it in (an index the caller chose; 0 when it keeps none).
    pub flow: u32,
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
    flow: u32,
}

// SAFETY: four integers; the derived Default is all zeros.
unsafe impl ZeroDefault for Entry {}

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

    /// A packet seen on the PRE side, in merged time order, in flow 0.
    #[inline(always)]
    pub fn push_pre(&mut self, ts: i64, id: u64) {
        self.push_pre_in_flow(ts, id, 0);
    }

    /// A packet seen on the PRE side, in merged time order, in `flow` (which its fate
    /// carries to the sink).
    #[inline(always)] // into the merge loop, the only caller on the per-packet path
    pub fn push_pre_in_flow(&mut self, ts: i64, id: u64, flow: u32) {
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
        self.ring.push(Entry { id, pre_ts: ts, post_ts, flow });
    }

    /// Keep the anchor on runs of consecutive ids; when a run breaks, hash its entries.
    #[inline(always)] // the common case, a run going on, is one comparison
    fn extend_run(&mut self, id: u64, index: u64) {
        if let Some((aid, aidx)) = self.anchor {
            if aidx.wrapping_add(id.wrapping_sub(aid)) == index {
                return;
            }
        }
        self.start_run(id, index);
    }

    #[cold]
    fn start_run(&mut self, id: u64, index: u64) {
        for i in self.segment_start.max(self.ring.base)..index {
            self.by_id.insert(self.ring.get(i).id, i);
        }
        self.anchor = Some((id, index));
        self.segment_start = index;
    }

    /// A packet seen on the POST side, in merged time order.
    #[inline(always)]
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
        // Each entry's departure is read once: the one that stays sets the next bound.
        let mut ring_oldest = i64::MAX;
        while self.ring.len() > 0 {
            let pre_ts = self.ring.get(self.ring.base).pre_ts;
            if pre_ts >= limit {
                ring_oldest = pre_ts;
                break;
            }
            self.pop_front();
        }
        let mut early_oldest = i64::MAX;
        while let Some(&(ts, id)) = self.early_posts.front() {
            if ts >= limit {
                early_oldest = ts;
                break;
            }
            self.early_posts.pop_front();
            self.retire_early(ts, id);
        }
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

    /// The oldest entry's fate, to the sink. Inlined into the expiry loop (a call per
    /// packet cost more than the work); the rare map removal stays out of line.
    #[inline(always)]
    fn pop_front(&mut self) {
        let (index, e) = self.ring.pop();
        if index < self.segment_start {
            self.forget_hashed(e.id);
        }
        let m = Matched { index, id: e.id, pre_ts: e.pre_ts, post_ts: e.post_ts, flow: e.flow };
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

    /// An entry of a broken run leaves: its id no longer maps to a position.
    #[cold]
    fn forget_hashed(&mut self, id: u64) {
        self.by_id.remove(&id);
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

    /// The memory the matcher holds, in bytes: what its rings and maps have room for
    /// (a ring's room is all written once it wraps), not counting the sink.
    pub fn held_bytes(&self) -> usize {
        // A hash map's slot is its key and value plus a control byte.
        fn map_bytes<K, V>(map: &FxHashMap<K, V>) -> usize {
            map.capacity() * (std::mem::size_of::<(K, V)>() + 1)
        }
        self.ring.capacity_bytes()
            + self.arrivals.capacity_bytes()
            + map_bytes(&self.by_id)
            + map_bytes(&self.early_by_id)
            + self.early_posts.capacity() * std::mem::size_of::<(i64, u64)>()
    }

    /// The PRE packets held and the time from the oldest one's departure to the newest
    /// one's, in ns (0 while fewer than two are held).
    pub fn held_span(&self) -> (u64, i64) {
        let held = self.ring.len();
        if held < 2 {
            return (held, 0);
        }
        let (oldest, newest) = (self.ring.get(self.ring.base).pre_ts, self.ring.get(self.ring.next - 1).pre_ts);
        (held, newest.saturating_sub(oldest).max(0))
    }
}
