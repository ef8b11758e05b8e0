//! Every reader behind the decompressors: the input is either compressed here (zstd or
//! gzip; the readers then see it whole, in the decompressor's chunks) or put raw behind
//! a zstd/gzip magic (the decompressor sees garbage).
#![no_main]
use std::io::Write;

use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else { return };
    let name = if sel & 8 != 0 { "fuzz.mscap.zst" } else { "fuzz.cap" };
    let bytes = match sel & 3 {
        0 => zstd::encode_all(rest, 1).expect("zstd encodes"),
        1 => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(rest).expect("gzip encodes");
            e.finish().expect("gzip encodes")
        }
        2 => [&[0x28, 0xb5, 0x2f, 0xfd][..], rest].concat(),
        _ => [&[0x1f, 0x8b, 0x08, 0x00][..], rest].concat(),
    };
    // compressed here: the readers see `rest`; garbage behind a magic: unknown
    let plain_len = (sel & 3 < 2).then_some(rest.len());
    common::read_stream(bytes, name, sel & 4 != 0, sel & 0x10 != 0, plain_len);
});
