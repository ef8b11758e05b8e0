//! Helpers shared by the capture crate's integration tests.
#![allow(dead_code)]

use std::io::{Cursor, Read, Write};
use std::path::Path;

use lowtail_capture::{open, open_reader, CaptureError, CaptureReader, Item, LinkType, OpenOptions};

/// An owned copy of what a reader yielded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Got {
    Frame { ts_ns: i64, link: LinkType, data: Vec<u8>, orig_len: u32 },
    Record { ts_ns: i64, id: u32 },
}

pub fn own(item: Item<'_>) -> Got {
    match item {
        Item::Frame(f) => Got::Frame { ts_ns: f.ts_ns, link: f.link, data: f.data.to_vec(), orig_len: f.orig_len },
        Item::Record { ts_ns, id } => Got::Record { ts_ns, id },
    }
}

/// Everything a reader yields through `next_item`, the warnings, and the error that
/// ended it (if any). Stops after `limit` items so garbage cannot run for ever.
pub fn drain(r: &mut CaptureReader, limit: usize) -> (Vec<Got>, Vec<String>, Option<CaptureError>) {
    let mut items = Vec::new();
    let mut error = None;
    while items.len() < limit {
        match r.next_item() {
            Ok(Some(item)) => items.push(own(item)),
            Ok(None) => break,
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    (items, r.take_warnings(), error)
}

/// The same through `for_each` with the given budgets (cycled).
pub fn drain_for_each(
    r: &mut CaptureReader,
    budgets: &[usize],
    limit: usize,
) -> (Vec<Got>, Vec<String>, Option<CaptureError>) {
    let mut items = Vec::new();
    let mut error = None;
    let mut k = 0;
    while items.len() < limit {
        let budget = budgets[k % budgets.len()].max(1);
        k += 1;
        match r.for_each(budget, |item| items.push(own(item))) {
            Ok(0) => break,
            Ok(n) => assert!(n <= budget, "for_each visited {n} items on a budget of {budget}"),
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    (items, r.take_warnings(), error)
}

pub fn zstd_bytes(raw: &[u8]) -> Vec<u8> {
    zstd::encode_all(Cursor::new(raw), 1).unwrap()
}

pub fn gzip_bytes(raw: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(raw).unwrap();
    e.finish().unwrap()
}

/// How a test hands bytes to the readers: a file, a stream, or a compressed stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    File,
    Stream,
    Zstd,
    Gzip,
    ZstdFile,
}

pub const ALL_VIAS: [Via; 5] = [Via::File, Via::Stream, Via::Zstd, Via::Gzip, Via::ZstdFile];

pub fn open_via(via: Via, bytes: &[u8], name: &str, options: &OpenOptions) -> Result<CaptureReader, CaptureError> {
    match via {
        Via::File | Via::ZstdFile => {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join(name);
            let content = if via == Via::ZstdFile { zstd_bytes(bytes) } else { bytes.to_vec() };
            std::fs::write(&path, content).unwrap();
            // The reader keeps the file open; the directory may go now.
            open(&path, options)
        }
        Via::Stream => open_reader(boxed(bytes.to_vec()), Path::new(name), options),
        Via::Zstd => open_reader(boxed(zstd_bytes(bytes)), Path::new(name), options),
        Via::Gzip => open_reader(boxed(gzip_bytes(bytes)), Path::new(name), options),
    }
}

pub fn boxed(bytes: Vec<u8>) -> Box<dyn Read + Send> {
    Box::new(Cursor::new(bytes))
}

/// A stream that hands out at most `step` bytes per read (a pipe, a slow decompressor).
pub struct Dribble {
    pub bytes: Vec<u8>,
    pub pos: usize,
    pub step: usize,
}

impl Read for Dribble {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(self.step).min(self.bytes.len() - self.pos);
        buf[..n].copy_from_slice(&self.bytes[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}
