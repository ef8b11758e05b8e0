//! Classic pcap reader: the first byte picks one of the six magics (µs/ns/modified,
//! both byte orders) and the read path, and whether the version is forced to 2.4 (bit
//! 0x40: the records behind a version the reader takes) or left to the input (the
//! version check); the rest follows the magic.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else { return };
    let magic = common::PCAP_MAGICS[(sel as usize) % 6];
    let mut bytes = magic.to_vec();
    bytes.extend_from_slice(rest);
    if sel & 0x40 != 0 && bytes.len() >= 8 {
        // 2.4 in the byte order the magic announces
        let big = magic[0] == 0xa1;
        bytes[4..8].copy_from_slice(if big { &[0, 2, 0, 4] } else { &[2, 0, 4, 0] });
    }
    let len = bytes.len();
    common::read_stream(bytes, "fuzz.pcap", false, sel & 0x80 != 0, Some(len));
});
