//! Time `analyze_pair` on a capture pair without Python: `cargo run --release
//! --example time_pair -- PRE POST [runs]` prints the best wall time of the runs.
use std::path::Path;
use std::time::Instant;

use lowtail_analyze::{analyze_pair, AnalyzeOptions, Control};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runs: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(5);
    let mut best = f64::MAX;
    for _ in 0..runs {
        let t = Instant::now();
        let mut options = AnalyzeOptions::default();
        if let Some(ns) = std::env::var("MAX_LATENCY_NS").ok().and_then(|v| v.parse().ok()) {
            options.max_latency_ns = ns;
        }
        match analyze_pair(Path::new(&args[1]), Path::new(&args[2]), &options, &Control::default()) {
            Ok(a) => assert!(a.sent > 0),
            Err(e) => eprintln!("{e}"),
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    println!("best of {runs}: {:.1} ms", best * 1e3);
}
