//! pcapng reader: the input follows a section header block's type code.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else { return };
    let mut bytes = vec![0x0a, 0x0d, 0x0d, 0x0a];
    bytes.extend_from_slice(rest);
    let len = bytes.len();
    common::read_stream(bytes, "fuzz.pcapng", false, sel & 1 != 0, Some(len));
});
