//! The streaming matcher against a naive reference: sort both sides, join by id.
//!
//! Random PRE/POST streams with loss, duplicates on both sides, reordering, clock skew,
//! id gaps, foreign (never sent) ids and 32-bit wrap are fed to `Matcher` in merged
//! time order, exactly as the analysis pipeline feeds it; every counter and every
//! resolved packet must equal what the reference computes from the definitions:
//!
//! - a PRE id's first occurrence is the sent packet, later ones are PRE duplicates;
//! - PRE packets within `trim` of the first PRE packet are trimmed, with their copies;
//! - an id's first copy in POST order is its departure, the other copies duplicates;
//! - a departure timestamped before its PRE packet is a negative latency;
//! - reordered (RFC 4737): a departure whose PRE position is below 1 + the highest PRE
//!   position that departed before it, in POST (arrival) order.

use std::collections::HashMap;

use lowtail_match::{Counters, MatchSink, Matched, Matcher, Outcome, Unwrapper};
use proptest::prelude::*;

#[derive(Default)]
struct Collect(Vec<(Outcome, Matched)>);

impl MatchSink for Collect {
    fn resolved(&mut self, outcome: Outcome, m: &Matched) {
        self.0.push((outcome, *m));
    }
}

/// One capture side's packet: (timestamp, id).
type Event = (i64, u64);

/// Merge the sides in time order, PRE first on equal timestamps (the pipeline's rule),
/// each side in its own order.
fn merged(pre: &[Event], post: &[Event]) -> Vec<(bool, Event)> {
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::with_capacity(pre.len() + post.len());
    while i < pre.len() || j < post.len() {
        let take_pre = j == post.len() || (i < pre.len() && pre[i].0 <= post[j].0);
        if take_pre {
            out.push((true, pre[i]));
            i += 1;
        } else {
            out.push((false, post[j]));
            j += 1;
        }
    }
    out
}

fn run_matcher(pre: &[Event], post: &[Event], trim: i64, horizon: i64) -> (Counters, Vec<(Outcome, Matched)>) {
    let mut m = Matcher::new(Collect::default(), trim, horizon);
    for (is_pre, (ts, id)) in merged(pre, post) {
        if is_pre {
            m.push_pre(ts, id);
        } else {
            m.push_post(ts, id);
        }
    }
    let (c, sink) = m.finish();
    (c, sink.0)
}

/// The reference, valid when no packet is older than the horizon when the run ends
/// (every event within `horizon` of every other): a join by id.
fn reference(pre: &[Event], post: &[Event], trim: i64) -> (Counters, Vec<(Outcome, Matched)>) {
    let mut c = Counters::default();
    let start = pre.first().map(|e| e.0).unwrap_or(0);
    // index of each sent id (first occurrence; trimmed ones included, as the matcher counts them)
    let mut sent: HashMap<u64, (u64, i64)> = HashMap::new();
    let mut order = Vec::new();
    for &(ts, id) in pre {
        if sent.contains_key(&id) {
            c.pre_duplicates += 1;
            continue;
        }
        let index = order.len() as u64;
        sent.insert(id, (index, ts));
        order.push((ts, id));
    }
    let trimmed = |ts: i64| ts < start.saturating_add(trim);
    // copies of each id in POST order
    let mut first_copy: HashMap<u64, i64> = HashMap::new();
    let mut arrivals = Vec::new();
    for &(ts, id) in post {
        match sent.get(&id) {
            None => c.unmatched += 1,
            Some(&(index, pre_ts)) => {
                if trimmed(pre_ts) {
                    c.trimmed_post += 1;
                } else if let std::collections::hash_map::Entry::Vacant(e) = first_copy.entry(id) {
                    e.insert(ts);
                    arrivals.push(index);
                } else {
                    c.duplicates += 1;
                }
            }
        }
    }
    c.reordered = rfc4737_reordered(arrivals);
    let mut resolved = Vec::new();
    for (index, &(pre_ts, id)) in order.iter().enumerate() {
        if trimmed(pre_ts) {
            c.trimmed_pre += 1;
            continue;
        }
        c.sent += 1;
        let index = index as u64;
        match first_copy.get(&id) {
            None => {
                c.lost += 1;
                // post_ts is meaningless for a loss: copy whatever the matcher says below
                resolved.push((Outcome::Lost, Matched { index, id, pre_ts, post_ts: 0, flow: 0 }));
            }
            Some(&post_ts) => {
                c.received += 1;
                let outcome = if post_ts < pre_ts {
                    c.negative += 1;
                    Outcome::Negative
                } else {
                    Outcome::Received
                };
                resolved.push((outcome, Matched { index, id, pre_ts, post_ts, flow: 0 }));
            }
        }
    }
    (c, resolved)
}

/// RFC 4737 §3.3 over PRE positions in arrival order: a position below NextExp
/// (1 + the highest arrived so far) is reordered.
fn rfc4737_reordered(arrivals: impl IntoIterator<Item = u64>) -> u64 {
    let mut next_expected = 0;
    let mut reordered = 0;
    for index in arrivals {
        if index < next_expected {
            reordered += 1;
        } else {
            next_expected = index + 1;
        }
    }
    reordered
}

fn assert_same(
    got: (Counters, Vec<(Outcome, Matched)>),
    want: (Counters, Vec<(Outcome, Matched)>),
) -> Result<(), TestCaseError> {
    let (gc, gr) = got;
    let (wc, wr) = want;
    prop_assert_eq!(gc, wc);
    prop_assert_eq!(gr.len(), wr.len());
    for (g, w) in gr.iter().zip(&wr) {
        if w.0 == Outcome::Lost {
            prop_assert_eq!((g.0, g.1.index, g.1.id, g.1.pre_ts), (w.0, w.1.index, w.1.id, w.1.pre_ts));
        } else {
            prop_assert_eq!(g, w);
        }
    }
    Ok(())
}

/// What happens to one sent packet in the device under test.
#[derive(Debug, Clone)]
struct Fate {
    /// PRE gap before this packet (ns; 0 = same timestamp as the previous one).
    gap: i64,
    /// Id step from the previous packet (1 = sequential; larger = an id gap).
    id_step: u64,
    /// Send this id again right after (a PRE duplicate).
    pre_repeat: bool,
    lost: bool,
    latency: i64,
    /// Extra copies in POST, each this much after the first.
    extra_copies: Vec<i64>,
}

fn fate(min_latency: i64, max_latency: i64) -> impl Strategy<Value = Fate> {
    (
        prop_oneof![4 => Just(100i64), 2 => 0i64..300, 1 => Just(0i64)],
        prop_oneof![8 => Just(1u64), 1 => 2u64..5, 1 => 0u64..1],
        prop::bool::weighted(0.03),
        prop::bool::weighted(0.1),
        prop_oneof![3 => Just(min_latency.max(0).min(max_latency)), 3 => min_latency..=max_latency],
        prop::collection::vec(0i64..500, 0..3).prop_map(|mut v| {
            // most packets have no duplicate
            if v.len() == 2 {
                v.clear();
            }
            v
        }),
    )
        .prop_map(|(gap, id_step, pre_repeat, lost, latency, extra_copies)| Fate {
            gap,
            id_step,
            pre_repeat,
            lost,
            latency,
            extra_copies,
        })
}

/// Build the two sides from fates; POST is sorted by time (stable: generation order
/// breaks ties), as a real capture would hold it.
fn streams(first_id: u64, fates: &[Fate], foreign_ids: &[(usize, i64)]) -> (Vec<Event>, Vec<Event>) {
    let mut pre = Vec::new();
    let mut post = Vec::new();
    let mut ts = 1_000_000i64;
    let mut id = first_id;
    for (k, f) in fates.iter().enumerate() {
        ts += f.gap;
        if k > 0 {
            id = id.wrapping_add(f.id_step);
        }
        pre.push((ts, id));
        if f.pre_repeat {
            pre.push((ts, id));
        }
        if !f.lost {
            post.push((ts + f.latency, id));
            for d in &f.extra_copies {
                post.push((ts + f.latency + d, id));
            }
        }
    }
    for &(k, off) in foreign_ids {
        // ids far from the sent ones: never sent
        post.push((1_000_000 + (k as i64) * 100 + off, first_id.wrapping_add(1 << 40).wrapping_add(k as u64)));
    }
    post.sort_by_key(|e| e.0);
    (pre, post)
}

const NO_EXPIRY: i64 = 1 << 50;

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// Non-negative latencies (a sane clock): every counter and resolution matches.
    #[test]
    fn matches_reference(first_id in prop_oneof![Just(0u64), any::<u64>()],
                         fates in prop::collection::vec(fate(0, 2_000), 0..300),
                         foreign in prop::collection::vec((0usize..300, 0i64..100), 0..5),
                         trim in prop_oneof![Just(0i64), 0i64..20_000]) {
        let (pre, post) = streams(first_id, &fates, &foreign);
        assert_same(run_matcher(&pre, &post, trim, NO_EXPIRY), reference(&pre, &post, trim))?;
    }

    /// A skewed POST clock: latencies on both sides of zero, so many POST copies arrive
    /// before their PRE packet (some before trimmed ones, some of never-sent ids). Every
    /// counter matches, reordering included: it is decided in POST order all the same.
    #[test]
    fn matches_reference_with_clock_skew(first_id in any::<u64>(),
                         fates in prop::collection::vec(fate(-3_000, 1_500), 0..300),
                         foreign in prop::collection::vec((0usize..300, -5000i64..100), 0..5),
                         trim in prop_oneof![Just(0i64), 0i64..20_000]) {
        let (pre, post) = streams(first_id, &fates, &foreign);
        assert_same(run_matcher(&pre, &post, trim, NO_EXPIRY), reference(&pre, &post, trim))?;
    }

    /// Latencies around the horizon: a copy within ±horizon of its PRE packet is a
    /// delivery, anything further is a loss plus an unmatched POST packet. Memory stays
    /// bounded by what the horizon spans.
    #[test]
    fn horizon_separates_late_from_lost(fates in prop::collection::vec(
                (0i64..400, prop::bool::weighted(0.1), -12_000i64..12_000), 1..400),
                horizon in 500i64..10_000) {
        let mut pre = Vec::new();
        let mut post = Vec::new();
        let mut ts = 0i64;
        for (k, &(gap, lost, latency)) in fates.iter().enumerate() {
            ts += gap;
            pre.push((ts, k as u64));
            if !lost {
                post.push((ts + latency, k as u64));
            }
        }
        post.sort_by_key(|e| e.0);
        let (c, resolved) = run_matcher(&pre, &post, 0, horizon);
        let mut want = Counters::default();
        // ids are PRE positions; copies beyond the horizon are not arrivals
        let arrivals = post.iter().filter(|&&(_, k)| fates[k as usize].2.abs() <= horizon).map(|&(_, k)| k);
        want.reordered = rfc4737_reordered(arrivals);
        let mut late_post = 0;
        for (k, &(_, lost, latency)) in fates.iter().enumerate() {
            want.sent += 1;
            let r = &resolved[k];
            prop_assert_eq!(r.1.index, k as u64);
            if lost || latency.abs() > horizon {
                want.lost += 1;
                late_post += (!lost) as u64;
                prop_assert_eq!(r.0, Outcome::Lost);
            } else {
                want.received += 1;
                prop_assert_eq!(r.1.post_ts - r.1.pre_ts, latency);
                if latency < 0 {
                    want.negative += 1;
                }
            }
        }
        want.unmatched = late_post;
        prop_assert_eq!(c, want);
    }

    /// 32-bit ids that wrap, fed through `Unwrapper` as the pipeline does (each side
    /// anchored to the other side's latest id), match exactly as the true 64-bit ids
    /// would: the same counters and the same latencies.
    #[test]
    fn wrapped_32_bit_ids_match_like_their_true_ids(
            below_wrap in 0u64..400,
            fates in prop::collection::vec(fate(0, 3_000), 1..400),
            trim in prop_oneof![Just(0i64), 0i64..20_000]) {
        let fates: Vec<Fate> = fates.into_iter().map(|f| Fate { pre_repeat: false, ..f }).collect();
        let first = (1u64 << 32) - below_wrap;
        let (pre, post) = streams(first, &fates, &[]);
        let want = reference(&pre, &post, trim);

        let mut m = Matcher::new(Collect::default(), trim, NO_EXPIRY);
        let (mut up, mut uq) = (Unwrapper::default(), Unwrapper::default());
        for (is_pre, (ts, id)) in merged(&pre, &post) {
            if is_pre {
                let near = uq.last();
                m.push_pre(ts, up.unwrap(id as u32, near));
            } else {
                let near = up.last();
                m.push_post(ts, uq.unwrap(id as u32, near));
            }
        }
        let (gc, Collect(gr)) = m.finish();
        let (wc, wr) = want;
        prop_assert_eq!(gc, wc);
        prop_assert_eq!(gr.len(), wr.len());
        // unwrapped ids are the true ids shifted by one constant
        let shift = gr.first().map(|g| g.1.id.wrapping_sub(wr[0].1.id)).unwrap_or(0);
        for (g, w) in gr.iter().zip(&wr) {
            prop_assert_eq!(g.0, w.0);
            prop_assert_eq!(g.1.id.wrapping_sub(shift), w.1.id);
            if w.0 != Outcome::Lost {
                prop_assert_eq!(g.1.post_ts - g.1.pre_ts, w.1.post_ts - w.1.pre_ts);
            }
        }
    }
}

#[test]
fn rfc4737_example() {
    // RFC 4737 section 4.1.2 style: arrivals 1, 2, 4, 3, 5 (ids = PRE positions) — one reordered.
    let pre: Vec<Event> = (1..=5).map(|i| (i * 10, i as u64)).collect();
    let arrival = [1u64, 2, 4, 3, 5];
    let post: Vec<Event> = arrival.iter().enumerate().map(|(k, &id)| (100 + k as i64, id)).collect();
    let (c, _) = run_matcher(&pre, &post, 0, NO_EXPIRY);
    assert_eq!(c.reordered, 1);
    // 1, 4, 2, 3, 5: packets 2 and 3 both arrive after 4
    let arrival = [1u64, 4, 2, 3, 5];
    let post: Vec<Event> = arrival.iter().enumerate().map(|(k, &id)| (100 + k as i64, id)).collect();
    assert_eq!(run_matcher(&pre, &post, 0, NO_EXPIRY).0.reordered, 2);
}

#[test]
fn memory_is_bounded_by_the_horizon() {
    // A million packets at 1 per 100 ns with a 10 µs horizon: never more than ~100 + slack in flight.
    let mut m = Matcher::new(Collect::default(), 0, 10_000);
    let mut most = 0;
    for k in 0..1_000_000u64 {
        let ts = k as i64 * 100;
        m.push_pre(ts, k);
        // packet k - 50 leaves now (5 µs latency); every 7th is lost
        if k >= 50 && k % 7 != 0 {
            m.push_post(ts, k - 50);
        }
        most = most.max(m.in_flight());
    }
    assert!(most < 400, "{most} entries in flight");
}

#[test]
fn memory_is_bounded_by_the_horizon_when_posts_come_first() {
    // A POST clock 5 µs behind: every copy arrives before its PRE packet, and every
    // 1000th is of a never-sent id, which holds the arrivals behind it (for reordering
    // in POST order) until its horizon passes. Still ~100 + slack in flight.
    const N: u64 = 1_000_000;
    let mut m = Matcher::new(Collect::default(), 0, 10_000);
    let mut most = 0;
    for k in 0..N {
        let ts = k as i64 * 100;
        if k % 1000 == 999 {
            m.push_post(ts, 1 << 40 | k);
        } else if k + 50 < N {
            m.push_post(ts, k + 50);
        }
        m.push_pre(ts + 1, k);
        most = most.max(m.in_flight());
    }
    let (c, _) = m.finish();
    assert!(most < 400, "{most} entries in flight");
    assert_eq!((c.unmatched, c.reordered), (1000, 0));
}
