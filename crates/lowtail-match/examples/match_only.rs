//! Cost of matching alone: 2 M sequential packets with a little loss, fed in merged
//! time order to the matcher with a counting sink. `perf stat -e instructions:u` on
//! this gives the matcher's instructions per packet without threads or I/O.
//! `POST_OFFSET=-3000000` shifts the POST clock: every copy then comes before its PRE
//! packet (the early-copy path).
use lowtail_match::{MatchSink, Matched, Matcher, Outcome};

struct Sum(i64, u64);

impl MatchSink for Sum {
    fn resolved(&mut self, outcome: Outcome, m: &Matched) {
        if outcome == Outcome::Received {
            self.0 += m.post_ts - m.pre_ts;
            self.1 += 1;
        }
    }
}

fn main() {
    let n: i64 = 2_000_000;
    let post_offset: i64 = std::env::var("POST_OFFSET").ok().and_then(|o| o.parse().ok()).unwrap_or(0);
    let mut events: Vec<(i64, bool, u64)> = Vec::with_capacity(2 * n as usize);
    for i in 0..n {
        let pre = i * 10_000;
        events.push((pre, true, i as u64));
        if i % 10_000 != 7 {
            events.push((pre + 3_300 + (i * 7919 % 500) + post_offset, false, i as u64));
        }
    }
    events.sort_by_key(|e| (e.0, !e.1));
    if std::env::var_os("SETUP_ONLY").is_some() {
        println!("{}", events.len());
        return;
    }
    let t = std::time::Instant::now();
    let mut m = Matcher::new(
        Sum(0, 0),
        1_000_000_000,
        std::env::var("HORIZON").ok().and_then(|h| h.parse().ok()).unwrap_or(10_000_000_000),
    );
    for (ts, is_pre, id) in events {
        if is_pre {
            m.push_pre(ts, id)
        } else {
            m.push_post(ts, id)
        }
    }
    let (c, s) = m.finish();
    println!("{c:?} sum {} n {} in {:.1} ms", s.0, s.1, t.elapsed().as_secs_f64() * 1e3);
}
