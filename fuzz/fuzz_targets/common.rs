//! What every capture target does with a reader: read it to the end through
//! `next_item` or `for_each`, and check the invariants a garbage input must keep.
#![allow(dead_code)]

use std::io::{Cursor, Read};
use std::path::Path;

use lowtail_capture::{open_reader, CaptureReader, Item, OpenOptions};

/// Open `bytes` as a stream named `name` and read it all; `plain_len`: how many bytes
/// the readers see after decompression, when known.
pub fn read_stream(bytes: Vec<u8>, name: &str, force_moonsniff: bool, use_for_each: bool, plain_len: Option<usize>) {
    let options = OpenOptions { force_moonsniff, ..OpenOptions::default() };
    let stream: Box<dyn Read + Send> = Box::new(Cursor::new(bytes));
    match open_reader(stream, Path::new(name), &options) {
        Ok(mut r) => drain(&mut r, name, use_for_each, plain_len),
        Err(e) => one_line(&e.to_string(), name),
    }
}

/// Read everything; `plain_len` (bytes after decompression) bounds the item count:
/// every item needs at least 12 of them.
pub fn drain(r: &mut CaptureReader, name: &str, use_for_each: bool, plain_len: Option<usize>) {
    let mut items = 0usize;
    loop {
        let step = if use_for_each {
            r.for_each(97, touch)
        } else {
            match r.next_item() {
                Ok(Some(item)) => {
                    touch(item);
                    Ok(1)
                }
                Ok(None) => Ok(0),
                Err(e) => Err(e),
            }
        };
        match step {
            Ok(0) => break,
            Ok(n) => items += n,
            Err(e) => {
                one_line(&e.to_string(), name);
                // reading ends where the damage is
                assert!(matches!(r.next_item(), Ok(None)), "an item after the error {e}");
                break;
            }
        }
        if let Some(len) = plain_len {
            assert!(items * 12 <= len, "{items} items from {len} bytes");
        }
        // decompression bombs: stop after a bounded amount of work
        if items > 1 << 20 {
            break;
        }
    }
    for w in r.take_warnings() {
        one_line(&w, name);
    }
}

/// Touch every byte of a frame: a slice past the mapping would fault here.
fn touch(item: Item<'_>) {
    if let Item::Frame(f) = item {
        std::hint::black_box(f.data.iter().fold(0u8, |a, b| a ^ b));
    }
}

/// Whether the readers will decompress these bytes (zstd's or gzip's magic first): then the
/// input's length does not bound what they read.
pub fn starts_compressed(bytes: &[u8]) -> bool {
    bytes.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) || bytes.starts_with(&[0x1f, 0x8b])
}

pub fn one_line(message: &str, name: &str) {
    assert!(!message.contains('\n'), "multi-line message: {message:?}");
    assert!(message.contains(name), "message without the file name: {message:?}");
}

pub const PCAP_MAGICS: [[u8; 4]; 6] = [
    [0xd4, 0xc3, 0xb2, 0xa1],
    [0xa1, 0xb2, 0xc3, 0xd4],
    [0x4d, 0x3c, 0xb2, 0xa1],
    [0xa1, 0xb2, 0x3c, 0x4d],
    [0x34, 0xcd, 0xb2, 0xa1],
    [0xa1, 0xb2, 0xcd, 0x34],
];
