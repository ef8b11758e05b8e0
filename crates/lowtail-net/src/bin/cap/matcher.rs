//! Running figures of a run while it is captured: the timestamper matches the frames it
//! sees leave (PRE) with the copies it sees come back (POST) by their id as it writes
//! them, and once a second appends one JSON line with the counts so far and an HDR
//! histogram's p99 and maximum latency. `lowtail run` shows these lines live; the exact
//! figures still come from analysing the captures afterwards.
//!
//! Matching is a direct-mapped table indexed by id: lowtail-gen's ids are consecutive,
//! so id `i` sits in slot `i mod capacity` until `capacity` later ids overwrite it
//! (2²¹ slots hold 21 s at 100 kpps). Either copy may come first: the two interfaces'
//! rings hand their blocks over independently (a partly filled block after up to 8 ms),
//! so a POST copy is often read before its PRE frame. A PRE frame with no POST copy
//! `horizon` after it was seen counts as lost; the cursor that judges them moves over
//! each id once.

use lowtail_capture::LinkType;
use lowtail_frame::{extract_id, Extracted, IdSpec};
use lowtail_stats::HdrRecorder;
use serde_json::json;

/// Slots of the id table (a power of two). Allocated zeroed, so only the slots a run
/// uses are ever touched.
const SLOTS: usize = 1 << 21;
/// Set in a slot's stored id once its PRE frame was seen.
const PRE_SEEN: u64 = 1 << 63;
/// Set in a slot's stored id once its POST copy was seen.
const POST_SEEN: u64 = 1 << 62;
const ID_BITS: u64 = !(PRE_SEEN | POST_SEEN);

/// Which side of the device a frame was captured on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Before the device: the frame as the generator sent it.
    Pre,
    /// After the device: the copy that came back.
    Post,
}

/// Frames matched by id as they are captured, and their latency so far.
pub struct LiveMatcher {
    spec: IdSpec,
    /// id + 1 (0: empty), with `PRE_SEEN` and `POST_SEEN` saying which copies arrived.
    ids: Vec<u64>,
    /// The stamp of the copy that arrived first.
    first_ts: Vec<i64>,
    horizon_ns: i64,
    pre_frames: u64,
    post_frames: u64,
    matched: u64,
    lost: u64,
    duplicates: u64,
    /// Highest id seen, and the next id the loss cursor will judge.
    newest: Option<u64>,
    next_to_judge: Option<u64>,
    /// Latest timestamp of any frame: the capture's own "now".
    now_ns: i64,
    total: HdrRecorder,
    interval: HdrRecorder,
}

impl LiveMatcher {
    /// A matcher for frames whose id `spec` says where to find; a PRE frame with no
    /// POST copy `horizon_ns` later counts as lost.
    pub fn new(spec: IdSpec, horizon_ns: i64) -> LiveMatcher {
        LiveMatcher {
            spec,
            ids: vec![0; SLOTS],
            first_ts: vec![0; SLOTS],
            horizon_ns,
            pre_frames: 0,
            post_frames: 0,
            matched: 0,
            lost: 0,
            duplicates: 0,
            newest: None,
            next_to_judge: None,
            now_ns: i64::MIN,
            total: HdrRecorder::new(),
            interval: HdrRecorder::new(),
        }
    }

    /// One captured frame (its bytes as captured, its length on the wire, its stamp).
    #[inline]
    pub fn frame(&mut self, side: Side, data: &[u8], wire_len: u32, ts_ns: i64) {
        let Extracted::Id(id) = extract_id(LinkType::Ethernet, data, wire_len, &self.spec) else {
            return;
        };
        let id = id & ID_BITS;
        self.now_ns = self.now_ns.max(ts_ns);
        self.newest = Some(self.newest.map_or(id, |n| n.max(id)));
        self.next_to_judge.get_or_insert(id);
        let (seen, other) = match side {
            Side::Pre => {
                self.pre_frames += 1;
                (PRE_SEEN, POST_SEEN)
            }
            Side::Post => {
                self.post_frames += 1;
                (POST_SEEN, PRE_SEEN)
            }
        };
        let slot = (id as usize) & (SLOTS - 1);
        let stored = self.ids[slot];
        if stored & ID_BITS != id + 1 {
            // The first copy of this id (an older id's slot is taken over).
            self.ids[slot] = (id + 1) | seen;
            self.first_ts[slot] = ts_ns;
        } else if stored & seen != 0 {
            self.duplicates += 1;
        } else if stored & other != 0 {
            self.ids[slot] = stored | seen;
            self.matched += 1;
            let first = self.first_ts[slot];
            let latency = if side == Side::Post { ts_ns - first } else { first - ts_ns };
            self.total.record(latency);
            self.interval.record(latency);
        }
    }

    /// PRE frames older than the horizon that no POST copy matched count as lost.
    fn judge_losses(&mut self) {
        let (Some(newest), Some(mut next)) = (self.newest, self.next_to_judge) else {
            return;
        };
        let judged_before = self.now_ns - self.horizon_ns;
        while next <= newest {
            let slot = (next as usize) & (SLOTS - 1);
            let stored = self.ids[slot];
            if stored & ID_BITS == next + 1 {
                if self.first_ts[slot] > judged_before {
                    break;
                }
                if stored & (PRE_SEEN | POST_SEEN) == PRE_SEEN {
                    self.lost += 1;
                }
            }
            // An id never seen, seen only after the device, or already overwritten: not judged.
            next += 1;
        }
        self.next_to_judge = Some(next);
    }

    /// The figures so far as one JSON object, and a new interval begun.
    pub fn summary(&mut self, elapsed_ns: i64) -> serde_json::Value {
        self.judge_losses();
        let doc = json!({
            "elapsed_ns": elapsed_ns,
            "pre_frames": self.pre_frames,
            "post_frames": self.post_frames,
            "matched": self.matched,
            "lost": self.lost,
            "duplicates": self.duplicates,
            "latency_ns": {
                "samples": self.total.count(),
                "p99": self.total.quantile(0.99),
                "max": self.total.max(),
            },
            "interval_latency_ns": {
                "samples": self.interval.count(),
                "p99": self.interval.quantile(0.99),
                "max": self.interval.max(),
            },
        });
        self.interval.clear();
        doc
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lowtail_frame::{FrameTemplate, TemplateSpec};

    fn frames(n: u64) -> Vec<Vec<u8>> {
        let mut t = FrameTemplate::new(&TemplateSpec::default()).unwrap();
        (0..n).map(|id| t.frame(id).to_vec()).collect()
    }

    #[test]
    fn matches_by_id_counts_losses_after_the_horizon_and_reports_the_tail() {
        let frames = frames(1000);
        let mut m = LiveMatcher::new(IdSpec::default(), 1_000_000);
        // Frame k leaves at k µs and comes back 10 µs later, but for every 50th, which
        // takes 1 ms, and ids 500..510, which never come back.
        for (k, f) in frames.iter().enumerate() {
            let t = k as i64 * 1000;
            m.frame(Side::Pre, f, f.len() as u32, t);
            if (500..510).contains(&k) {
                continue;
            }
            let latency = if k % 50 == 0 { 1_000_000 } else { 10_000 };
            m.frame(Side::Post, f, f.len() as u32, t + latency);
        }
        let s = m.summary(1_000_000_000);
        assert_eq!(s["pre_frames"], 1000);
        assert_eq!(s["post_frames"], 990);
        assert_eq!(s["matched"], 990);
        // Only frames 1 ms older than the newest stamp (1.95 ms) are judged: ids 0 to 950.
        assert_eq!(s["lost"], 10);
        let p99 = s["latency_ns"]["p99"].as_u64().unwrap();
        assert!((999_000..=1_001_000).contains(&p99), "{p99}");
        assert_eq!(s["interval_latency_ns"]["samples"], 990);
        // A new interval starts empty; the running figures stay.
        let s = m.summary(2_000_000_000);
        assert_eq!(s["interval_latency_ns"]["samples"], 0);
        assert!(s["interval_latency_ns"]["max"].is_null());
        assert_eq!(s["latency_ns"]["samples"], 990);
    }

    #[test]
    fn a_copy_read_before_its_pre_frame_still_matches() {
        let frames = frames(3);
        let mut m = LiveMatcher::new(IdSpec::default(), 1_000);
        for f in &frames {
            m.frame(Side::Post, f, f.len() as u32, 5_000);
        }
        for (k, f) in frames.iter().enumerate() {
            m.frame(Side::Pre, f, f.len() as u32, 1_000 * k as i64);
        }
        let s = m.summary(0);
        assert_eq!((s["matched"].as_u64(), s["lost"].as_u64()), (Some(3), Some(0)));
        assert!((4_990..=5_010).contains(&s["latency_ns"]["max"].as_u64().unwrap()));
    }

    #[test]
    fn frames_still_within_the_horizon_are_not_lost_yet_and_duplicates_count_once() {
        let frames = frames(10);
        let mut m = LiveMatcher::new(IdSpec::default(), 1_000_000_000);
        for (k, f) in frames.iter().enumerate() {
            m.frame(Side::Pre, f, f.len() as u32, k as i64);
        }
        m.frame(Side::Post, &frames[3], frames[3].len() as u32, 100);
        m.frame(Side::Post, &frames[3], frames[3].len() as u32, 101);
        let s = m.summary(0);
        assert_eq!((s["lost"].as_u64(), s["matched"].as_u64(), s["post_frames"].as_u64()), (Some(0), Some(1), Some(2)));
        assert_eq!(s["duplicates"], 1);
        // Not a frame of lowtail's: ignored.
        m.frame(Side::Pre, &[0u8; 60], 60, 5);
        assert_eq!(m.summary(0)["pre_frames"], 10);
    }
}
