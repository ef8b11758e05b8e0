//! pcapng reader: the input follows a section header block's type code; bit 2 of the
//! first byte forces the first section's version to 1.0 (so the blocks behind it are
//! read), else the version is the input's (the version check).
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else { return };
    let mut bytes = vec![0x0a, 0x0d, 0x0d, 0x0a];
    bytes.extend_from_slice(rest);
    if sel & 4 != 0 && bytes.len() >= 16 {
        // 1.0 in the byte order of the byte-order magic (big-endian unless it reads 4d 3c 2b 1a)
        let little = bytes[8..12] == [0x4d, 0x3c, 0x2b, 0x1a];
        bytes[12..16].copy_from_slice(if little { &[1, 0, 0, 0] } else { &[0, 1, 0, 0] });
    }
    let len = bytes.len();
    common::read_stream(bytes, "fuzz.pcapng", false, sel & 1 != 0, Some(len));
});
