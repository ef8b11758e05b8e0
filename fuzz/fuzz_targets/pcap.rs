//! Classic pcap reader: the first byte picks one of the six magics (µs/ns/modified,
//! both byte orders) and the read path; the rest follows the magic.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else { return };
    let mut bytes = common::PCAP_MAGICS[(sel as usize) % 6].to_vec();
    bytes.extend_from_slice(rest);
    let len = bytes.len();
    common::read_stream(bytes, "fuzz.pcap", false, sel & 0x80 != 0, Some(len));
});
