//! A forward-only view of a capture's bytes that parsers can ask "at least n bytes
//! from here".
//!
//! Every input — a regular file (`stream::RegularFile`), a FIFO, a decompressor's output — is
//! read with `read()` into one reused, page-aligned buffer, which keeps resident memory at
//! the buffer size however large the stream is.

use std::io::{self, Read};

const READ_CHUNK: usize = 256 << 10;
/// No record or block of a sane capture is larger than this.
pub(crate) const MAX_RECORD: usize = 16 << 20;
/// Bytes land in the buffer at the same offset within a page as they have in the stream.
/// The kernel copies a page-cache page into a buffer several times slower when the two are
/// misaligned (measured on this project's 2-core AMD VM: 7.6 GB read with `read()` in 2.9 s
/// into a buffer 16 bytes off, 0.7 s aligned), and a plain `Vec`'s bytes sit 16 bytes into
/// a page; after each compaction the leftover would shift the alignment again.
const ALIGN: usize = 4096;

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

/// The bytes of a capture from the current position, read into a buffer.
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
        let mut w = Window { src, buf: vec![0; READ_CHUNK + ALIGN], start: 0, end: 0, eof: false, consumed: 0 };
        w.start = w.aligned_slot();
        w.end = w.start;
        w
    }

    /// Where the bytes from `start` should sit so that each keeps its stream offset's place
    /// within a page: the index in `[0, ALIGN)` whose address is congruent to `consumed`.
    fn aligned_slot(&self) -> usize {
        let addr = self.buf.as_ptr() as usize;
        (self.consumed as usize).wrapping_sub(addr) % ALIGN
    }

    /// Make at least `need` bytes available from the current position; returns how
    /// many are (fewer only at the end of the input).
    pub(crate) fn ensure(&mut self, need: usize) -> io::Result<usize> {
        while self.end - self.start < need && !self.eof {
            let held = self.end - self.start;
            if self.buf.len() < ALIGN + held + READ_CHUNK.min(need) {
                let grown = (self.buf.len() * 2).max(ALIGN + need + READ_CHUNK);
                self.buf.resize(grown, 0);
            }
            let slot = self.aligned_slot();
            if slot != self.start {
                self.buf.copy_within(self.start..self.end, slot);
                self.start = slot;
                self.end = slot + held;
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A stream that hands out its bytes in the chunk sizes it is given, as a pipe or a
    /// decompressor does.
    struct Chunky {
        data: Vec<u8>,
        pos: usize,
        chunks: Vec<usize>,
    }

    impl Read for Chunky {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let chunk = self.chunks.pop().unwrap_or(usize::MAX).max(1);
            let n = chunk.min(buf.len()).min(self.data.len() - self.pos);
            buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
            self.pos += n;
            Ok(n)
        }
    }

    proptest! {
        /// Whatever the reads return and the parsers ask for, the window shows the stream's
        /// bytes in order (the alignment keeping moves them around inside the buffer).
        #[test]
        fn the_window_shows_the_stream_in_order(
            len in 0usize..1_500_000,
            chunks in prop::collection::vec(1usize..400_000, 0..40),
            steps in prop::collection::vec((1usize..600_000, 0usize..300_000), 1..60),
        ) {
            let data: Vec<u8> = (0..len).map(|i| (i * 7 + i / 251) as u8).collect();
            let mut w = Window::new(Box::new(Chunky { data: data.clone(), pos: 0, chunks }));
            let mut at = 0usize;
            for (need, advance) in steps {
                let have = w.ensure(need).unwrap();
                prop_assert_eq!(have.min(need), need.min(len - at));
                prop_assert_eq!(w.bytes(), &data[at..at + have]);
                let step = advance.min(have);
                w.advance(step);
                at += step;
                prop_assert_eq!(w.offset(), at as u64);
            }
        }
    }
}
