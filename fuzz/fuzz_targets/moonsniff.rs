//! MoonSniff record reader, chosen by the file name or by the option.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else { return };
    let name = if sel & 1 != 0 { "fuzz.mscap" } else { "fuzz.bin" };
    // Records behind a compressor's magic are decompressed first (found by this target: 97
    // records from 192 bytes of gzip); the bound holds for plain bytes only.
    let plain_len = (!common::starts_compressed(rest)).then_some(rest.len());
    common::read_stream(rest.to_vec(), name, sel & 1 == 0, sel & 2 != 0, plain_len);
});
