//! The matcher's memory limit: an analysis that would hold more than it may stops with one
//! line that says what it would need and the `--max-latency` that fits, instead of being
//! ended by the kernel's OOM killer (or having it end another process of the host).

use std::path::Path;

use lowtail_analyze::{analyze_pair, AnalyzeError, AnalyzeOptions, Control, LimitSource};
use lowtail_capture::write::MoonSniffWriter;

const PACKETS: u32 = 200_000;

/// A pair of MoonSniff captures: PACKETS packets `gap_ns` apart, each received 3 µs later.
fn write_pair(dir: &Path, gap_ns: i64) -> (std::path::PathBuf, std::path::PathBuf) {
    let (pre, post) = (dir.join("pre.mscap"), dir.join("post.mscap"));
    for (path, latency) in [(&pre, 0), (&post, 3_000)] {
        let mut w = MoonSniffWriter::new(Vec::new());
        for id in 0..PACKETS {
            w.write(1_000_000_000 + i64::from(id) * gap_ns + latency, id).unwrap();
        }
        std::fs::write(path, w.into_inner()).unwrap();
    }
    (pre, post)
}

fn options(max_memory_bytes: Option<u64>, max_latency_ns: i64) -> AnalyzeOptions {
    AnalyzeOptions { trim_ns: 0, max_latency_ns, max_memory_bytes, id_width: 4, ..AnalyzeOptions::default() }
}

#[test]
fn an_analysis_that_would_hold_more_than_its_limit_stops_saying_what_fits() {
    let dir = tempfile::tempdir().unwrap();
    // 1 Mpps for 0.2 s: the 10 s horizon holds every packet, 200,000 × 32 B = 6 MiB.
    let (pre, post) = write_pair(dir.path(), 1_000);
    let limit = 1 << 20;
    let err = analyze_pair(&pre, &post, &options(Some(limit), 10_000_000_000), &Control::default()).unwrap_err();
    let AnalyzeError::OutOfMemory { limit: reached, held, span_ns, horizon_ns } = &err else {
        panic!("not out of memory: {err}");
    };
    assert_eq!((reached.bytes, reached.source), (limit, LimitSource::Option));
    assert!(*held > 0 && *held < u64::from(PACKETS), "{held}");
    assert!(*span_ns > 0 && *horizon_ns == 10_000_000_000);
    let text = err.to_string();
    assert!(!text.contains('\n'), "{text}");
    assert!(text.starts_with("matching needs more memory than 1 MiB, the limit set for this analysis"), "{text}");
    // What it advises fits: the same pair within that limit.
    let advised = text.rsplit("e.g. --max-latency ").next().unwrap();
    let advised_ns = advised.strip_suffix("ms").and_then(|v| v.parse::<i64>().ok()).expect(advised) * 1_000_000;
    // About half the 16 ms of packets that filled the limit (rounded down to 1, 2 or 5).
    assert!((1_000_000..=10_000_000).contains(&advised_ns), "{text}");
    let fits = analyze_pair(&pre, &post, &options(Some(limit), advised_ns), &Control::default()).unwrap();
    assert_eq!((fits.sent, fits.received), (u64::from(PACKETS), u64::from(PACKETS)));
}

#[test]
fn without_a_limit_set_the_host_gives_it_and_an_ordinary_pair_is_within_it() {
    let dir = tempfile::tempdir().unwrap();
    let (pre, post) = write_pair(dir.path(), 1_000);
    let a = analyze_pair(&pre, &post, &options(None, 10_000_000_000), &Control::default()).unwrap();
    assert_eq!(a.received, u64::from(PACKETS));
}

#[test]
fn timestamps_that_never_advance_are_named_as_the_cause() {
    let dir = tempfile::tempdir().unwrap();
    let (pre, post) = write_pair(dir.path(), 0);
    let err = analyze_pair(&pre, &post, &options(Some(1 << 20), 10_000_000_000), &Control::default()).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, AnalyzeError::OutOfMemory { span_ns: 0, .. }), "{text}");
    assert!(text.contains("PRE's timestamps do not advance"), "{text}");
    assert!(!text.contains("e.g."), "{text}");
}
