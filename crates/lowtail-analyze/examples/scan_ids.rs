//! Read one capture and extract every id, nothing else: the reader threads' floor.
use std::path::Path;
use std::time::Instant;

use lowtail_capture::{open, Item, OpenOptions};
use lowtail_match::{extract_id, Extracted, IdSpec};

fn main() {
    let spec = IdSpec::default();
    for path in std::env::args().skip(1) {
        let t = Instant::now();
        let mut r = open(Path::new(&path), &OpenOptions::default()).expect("open");
        let (mut n, mut sum) = (0u64, 0u64);
        while r
            .for_each(4096, |item| {
                if let Item::Frame(f) = item {
                    if let Extracted::Id(id) = extract_id(f.link, f.data, f.orig_len, &spec) {
                        n += 1;
                        sum = sum.wrapping_add(id);
                    }
                }
            })
            .expect("read")
            > 0
        {}
        println!("{path}: {n} ids in {:.1} ms ({sum})", t.elapsed().as_secs_f64() * 1e3);
    }
}
