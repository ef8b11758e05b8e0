//! The byte stream under a reader: counted for progress, read greedily so sniffing sees
//! whole headers, and, behind a decompressor, with its errors told apart from a stream
//! that merely ends early.

use std::io::{self, Read};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use crate::format::Compression;

/// Bytes consumed so far from the file on disk, readable from another thread.
#[derive(Debug, Clone, Default)]
pub struct Progress(pub(crate) Arc<AtomicU64>);

impl Progress {
    /// Bytes read so far.
    pub fn bytes(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Adds every byte read to a `Progress`.
pub(crate) struct CountingRead<R> {
    pub(crate) inner: R,
    pub(crate) counter: Option<Progress>,
}

impl<R: Read> Read for CountingRead<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(c) = &self.counter {
            c.0.fetch_add(n as u64, Ordering::Relaxed);
        }
        Ok(n)
    }
}

/// Reads greedily: each `read` fills the buffer unless the stream ends, so format
/// sniffing sees whole headers even through a decompressor.
pub(crate) struct Greedy<R> {
    pub(crate) prefix: Vec<u8>,
    pub(crate) pos: usize,
    pub(crate) inner: R,
}

impl<R> Greedy<R> {
    pub(crate) fn new(inner: R) -> Self {
        Greedy { prefix: Vec::new(), pos: 0, inner }
    }
}

impl<R: Read> Read for Greedy<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut filled = 0;
        if self.pos < self.prefix.len() {
            let n = (self.prefix.len() - self.pos).min(buf.len());
            buf[..n].copy_from_slice(&self.prefix[self.pos..self.pos + n]);
            self.pos += n;
            filled = n;
        }
        while filled < buf.len() {
            match self.inner.read(&mut buf[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return if filled > 0 { Ok(filled) } else { Err(e) },
            }
        }
        Ok(filled)
    }
}

/// Remembers that a compressed stream ended before its end marker: a capture whose
/// writer was killed. Its readers then see the end of their input there, as with a
/// plain file cut short, and this adds a warning saying what happened.
#[derive(Debug, Clone)]
pub(crate) struct StreamCut {
    cut: Arc<AtomicBool>,
    path: PathBuf,
    codec: Compression,
}

impl StreamCut {
    pub(crate) fn new(path: PathBuf, codec: Compression) -> Self {
        StreamCut { cut: Arc::default(), path, codec }
    }

    pub(crate) fn take_warning(&self) -> Option<String> {
        self.cut.swap(false, Ordering::Relaxed).then(|| {
            format!(
                "{}: the {} stream ends early (file cut short?): analysed what it held",
                self.path.display(),
                self.codec.name()
            )
        })
    }
}

/// Labels read errors from a decompressor as such ("corrupt zstd stream ..."), so a
/// damaged compressed file does not read as a disk problem; a stream that merely ends
/// early ends the input instead.
pub(crate) struct DecodeErrors<R> {
    pub(crate) inner: R,
    pub(crate) cut: StreamCut,
}

impl<R: Read> Read for DecodeErrors<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match (self.inner.read(buf), self.cut.codec) {
            (Ok(n), _) => Ok(n),
            (Err(e), Compression::None) => Err(e),
            (Err(e), _) if e.kind() == io::ErrorKind::UnexpectedEof => {
                self.cut.cut.store(true, Ordering::Relaxed);
                Ok(0)
            }
            (Err(e), c) => Err(io::Error::new(e.kind(), format!("{} stream is damaged: {e}", c.name()))),
        }
    }
}
