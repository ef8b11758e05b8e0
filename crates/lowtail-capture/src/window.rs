//! A forward-only view of a capture's bytes that parsers can ask "at least n bytes
//! from here", refilled with read() into one reused buffer.
//!
//! Measured on the target VM, read() into a small reused buffer beats mmap: the
//! kernel's copy costs about what mapping and unmapping the pages costs, and it leaves
//! the bytes hot in cache for the parser, while first touches of mapped pages miss.
//! It also keeps resident memory at the buffer size however large the file is.

use std::io::{self, Read};

const READ_CHUNK: usize = 256 << 10;
/// No record or block of a sane capture is larger than this.
pub(crate) const MAX_RECORD: usize = 16 << 20;

/// The u32 at `at` in the file's byte order.
#[inline(always)]
pub(crate) fn u32_at(b: &[u8], at: usize, big_endian: bool) -> u32 {
    let raw: [u8; 4] = b[at..at + 4].try_into().expect("four bytes");
    if big_endian {
        u32::from_be_bytes(raw)
    } else {
        u32::from_le_bytes(raw)
    }
}

pub struct Window {
    src: Box<dyn Read + Send>,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
    consumed: u64,
}

impl Window {
    pub(crate) fn new(src: Box<dyn Read + Send>) -> Window {
        Window { src, buf: vec![0; READ_CHUNK], start: 0, end: 0, eof: false, consumed: 0 }
    }

    /// Make at least `need` bytes available from the current position; returns how
    /// many are (fewer only at the end of the input).
    pub(crate) fn ensure(&mut self, need: usize) -> io::Result<usize> {
        while self.end - self.start < need && !self.eof {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            if self.buf.len() - self.end < READ_CHUNK.min(need) {
                let grown = (self.buf.len() * 2).max(need + READ_CHUNK);
                self.buf.resize(grown, 0);
            }
            match self.src.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.end += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(self.end - self.start)
    }

    /// The bytes from the current position (as many as the last `ensure` made ready).
    #[inline]
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    #[inline]
    pub(crate) fn advance(&mut self, n: usize) {
        self.start += n;
        self.consumed += n as u64;
    }

    /// Bytes consumed so far (of the decompressed stream).
    pub(crate) fn offset(&self) -> u64 {
        self.consumed
    }
}
