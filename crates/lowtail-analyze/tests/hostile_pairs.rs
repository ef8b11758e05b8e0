//! Whole analyses of hostile capture pairs: timestamps at the ends of the i64 range,
//! going backwards, identical on both sides, ids that repeat or wrap. `analyze_pair`
//! must return figures or a one-line error, never panic (tests build with overflow
//! checks, so an arithmetic overflow on the way is a panic here).

use std::path::Path;

use lowtail_analyze::{analyze_pair, AnalyzeOptions, Control};
use lowtail_capture::write::MoonSniffWriter;
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

type Rng = Xoshiro256PlusPlus;

/// A timestamp from the places where arithmetic breaks.
fn hostile_ts(rng: &mut Rng, base: i64) -> i64 {
    match rng.random::<u64>() % 8 {
        0 => i64::MAX - (rng.random::<u64>() % 1000) as i64,
        1 => i64::MIN + (rng.random::<u64>() % 1000) as i64,
        2 => (rng.random::<u64>() % 1000) as i64,
        3 => rng.random::<u64>() as i64,
        _ => base.wrapping_add((rng.random::<u64>() % 100_000) as i64),
    }
}

fn write_mscap(path: &Path, records: &[(i64, u32)]) {
    let mut w = MoonSniffWriter::new(Vec::new());
    for &(ts, id) in records {
        w.write(ts, id).unwrap();
    }
    std::fs::write(path, w.into_inner()).unwrap();
}

#[test]
fn hostile_moonsniff_pairs_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let (pre, post) = (dir.path().join("pre.mscap"), dir.path().join("post.mscap"));
    for seed in 0..300u64 {
        let mut rng = Rng::seed_from_u64(seed);
        let base = rng.random::<u64>() as i64;
        let n = 1 + (rng.random::<u64>() % 200) as usize;
        let hostile_every = 1 + rng.random::<u64>() % 20;
        let mut pre_recs = Vec::new();
        let mut post_recs = Vec::new();
        for k in 0..n {
            let ts = if (k as u64).is_multiple_of(hostile_every) {
                hostile_ts(&mut rng, base)
            } else {
                base.wrapping_add(k as i64 * 1000)
            };
            let id = if rng.random::<u64>() % 10 == 0 {
                rng.random::<u64>() as u32
            } else {
                (u32::MAX - 50).wrapping_add(k as u32)
            };
            pre_recs.push((ts, id));
            if rng.random::<u64>() % 5 != 0 {
                let lat = if rng.random::<u64>() % 10 == 0 { rng.random::<u64>() as i64 } else { 3000 };
                post_recs.push((ts.wrapping_add(lat), id));
            }
        }
        write_mscap(&pre, &pre_recs);
        write_mscap(&post, &post_recs);
        let options = AnalyzeOptions {
            trim_ns: [0, 1, 1_000_000_000, i64::MAX][(seed % 4) as usize],
            max_latency_ns: [1, 10_000_000_000, i64::MAX][(seed % 3) as usize],
            ..AnalyzeOptions::default()
        };
        match analyze_pair(&pre, &post, &options, &Control::default()) {
            Ok(a) => {
                assert_eq!(a.sent, a.received + a.lost, "seed {seed}");
                let by_flow =
                    |pick: fn(&lowtail_analyze::FlowFigures) -> u64| a.flows.flows.iter().map(pick).sum::<u64>();
                assert_eq!((by_flow(|f| f.sent), by_flow(|f| f.lost)), (a.sent, a.lost), "seed {seed}: flows add up");
                if let Some(l) = &a.latency_ns {
                    let p50 = l.percentile("p50").unwrap();
                    assert!(l.min <= p50 && p50 <= l.max, "seed {seed}");
                }
            }
            Err(e) => assert!(!e.to_string().contains('\n'), "seed {seed}: {e}"),
        }
    }
}
