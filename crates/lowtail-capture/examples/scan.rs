//! Read a capture and sum its timestamps: the floor of any analysis.
//! `cargo run --release --example scan -- FILE...`
use std::path::Path;
use std::time::Instant;

use lowtail_capture::{open, OpenOptions};

fn main() {
    for path in std::env::args().skip(1) {
        let t = Instant::now();
        let mut r = open(Path::new(&path), &OpenOptions::default()).expect("open");
        let (mut n, mut sum, mut bytes) = (0u64, 0i64, 0u64);
        while r
            .for_each(4096, |item| {
                n += 1;
                sum = sum.wrapping_add(item.ts_ns());
                if let lowtail_capture::Item::Frame(f) = item {
                    bytes += f.data[f.data.len() - 1] as u64;
                }
            })
            .expect("read")
            > 0
        {}
        println!("{path}: {n} items in {:.1} ms ({sum} {bytes})", t.elapsed().as_secs_f64() * 1e3);
    }
}
