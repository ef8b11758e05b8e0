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

/// What reading reports when another process cut the file short while it was read.
#[derive(Debug, thiserror::Error)]
#[error("the file was cut shorter while lowtail read it (it held {opened} bytes when opened): analyse a copy that nothing writes to")]
pub(crate) struct FileShrank {
    opened: u64,
}

/// A regular file read with `read()` into the window's page-aligned buffer. The kernel
/// copies page-cache pages into it faster than a mapping of them can be built and torn down
/// (measured on this project's 2-core AMD VM, interleaved runs of both builds: the native
/// analysis of a 20-million-packet pair 0.38–0.43 s read, 0.57–0.66 s through the sliding
/// 64 MiB mapping it replaced, whose page tables and unmapping took a third of the CPU; the
/// whole `lowtail analyze --db` 0.557 s against 0.632 s, the 100-million-packet pair 2.01 s
/// against 2.20–2.37 s at half the peak memory, 134 MB against 265 MB).
///
/// A file that ends before the size it had when it was opened was cut short by another
/// process while it was read: an error, never a shorter capture taken as whole. A file that
/// grows meanwhile (a capture still being written) is read to its end, as `read()` goes.
pub(crate) struct RegularFile {
    file: std::fs::File,
    opened: u64,
    read: u64,
}

impl RegularFile {
    pub(crate) fn new(file: std::fs::File, opened: u64) -> RegularFile {
        advise_sequential(&file);
        RegularFile { file, opened, read: 0 }
    }
}

impl Read for RegularFile {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.file.read(buf)?;
        self.read += n as u64;
        if n == 0 && !buf.is_empty() && self.read < self.opened {
            return Err(io::Error::other(FileShrank { opened: self.opened }));
        }
        Ok(n)
    }
}

/// Ask the kernel to read ahead further (the whole file is read once, in order): a file not
/// in the page cache comes from the disk while the previous piece is decoded.
fn advise_sequential(file: &std::fs::File) {
    use std::os::fd::AsRawFd;
    // SAFETY: advice on a file descriptor the caller owns; its failure changes nothing.
    unsafe {
        libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_SEQUENTIAL);
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
/// sniffing sees whole headers even through a decompressor. An error that comes after
/// some bytes were filled is returned by the next call, never lost: a decompressor
/// reports a failed checksum once, after the data it covers, and reads 0 after it.
pub(crate) struct Greedy<R> {
    pub(crate) prefix: Vec<u8>,
    pub(crate) pos: usize,
    pub(crate) inner: R,
    pending_error: Option<io::Error>,
}

impl<R> Greedy<R> {
    pub(crate) fn new(inner: R) -> Self {
        Greedy { prefix: Vec::new(), pos: 0, inner, pending_error: None }
    }
}

impl<R: Read> Read for Greedy<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(e) = self.pending_error.take() {
            return Err(e);
        }
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
                Err(e) if filled > 0 => {
                    self.pending_error = Some(e);
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(filled)
    }
}

/// Remembers that a compressed stream ended before its end marker: a capture whose
/// writer was killed. Its readers then see the end of their input there, as with a
/// plain file cut short; the capture is cut (its figures partial), and this adds a
/// warning saying what happened.
#[derive(Debug, Clone)]
pub(crate) struct StreamCut {
    cut: Arc<AtomicBool>,
    warned: bool,
    path: PathBuf,
    codec: Compression,
}

impl StreamCut {
    pub(crate) fn new(path: PathBuf, codec: Compression) -> Self {
        StreamCut { cut: Arc::default(), warned: false, path, codec }
    }

    /// The stream ended before its end marker.
    pub(crate) fn is_cut(&self) -> bool {
        self.cut.load(Ordering::Relaxed)
    }

    pub(crate) fn take_warning(&mut self) -> Option<String> {
        (self.is_cut() && !std::mem::replace(&mut self.warned, true)).then(|| {
            format!(
                "{}: the {} stream ends early (file cut short?): analysed what it held",
                self.path.display(),
                self.codec.name()
            )
        })
    }
}

/// What a decompressor said about its data (bad data, a checksum that fails): carried
/// inside the `io::Error` of a read so the reader reports `CaptureError::Decompress`.
#[derive(Debug, thiserror::Error)]
#[error("{codec} stream is damaged: {detail}")]
pub(crate) struct DecodeFailure {
    pub(crate) codec: &'static str,
    pub(crate) detail: String,
}

/// Between a decompressor and the readers: a stream that merely ends early ends the
/// input (and marks the capture cut); any other error of the decoder is a
/// `DecodeFailure`, so a damaged compressed file does not read as a disk problem.
pub(crate) struct DecodeErrors<R> {
    pub(crate) inner: R,
    pub(crate) cut: StreamCut,
}

impl<R: Read> Read for DecodeErrors<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.inner.read(buf) {
            Ok(n) => Ok(n),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                self.cut.cut.store(true, Ordering::Relaxed);
                Ok(0)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Err(e),
            Err(e) => {
                Err(io::Error::new(e.kind(), DecodeFailure { codec: self.cut.codec.name(), detail: e.to_string() }))
            }
        }
    }
}
