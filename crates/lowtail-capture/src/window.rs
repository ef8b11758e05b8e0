//! A forward-only view of a capture's bytes that parsers can ask "at least n bytes
//! from here". Plain files are memory-mapped a window at a time (no copy, and the
//! mapping is dropped as the window moves on, so resident memory stays small however
//! large the file); compressed or piped input is read into a growing buffer.

use std::fs::File;
use std::io::{self, Read};
use std::sync::atomic::Ordering;

use memmap2::{Advice, Mmap, MmapOptions};

use crate::source::Progress;

const MAP_WINDOW: u64 = 16 << 20;
const READ_CHUNK: usize = 1 << 20;
/// No record or block of a sane capture is larger than this.
pub(crate) const MAX_RECORD: usize = 16 << 20;

pub enum Window {
    Mapped(Mapped),
    Buffered(Buffered),
}

pub struct Mapped {
    file: File,
    len: u64,
    map: Option<Mmap>,
    /// File offset of `map[0]`.
    map_at: u64,
    pos: u64,
    progress: Option<Progress>,
}

pub struct Buffered {
    src: Box<dyn Read + Send>,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
    consumed: u64,
}

impl Window {
    pub(crate) fn mapped(file: File, len: u64, progress: Option<Progress>) -> Window {
        Window::Mapped(Mapped { file, len, map: None, map_at: 0, pos: 0, progress })
    }

    pub(crate) fn buffered(src: Box<dyn Read + Send>) -> Window {
        Window::Buffered(Buffered { src, buf: vec![0; READ_CHUNK], start: 0, end: 0, eof: false, consumed: 0 })
    }

    /// Make at least `need` bytes available from the current position; returns how
    /// many are (fewer only at the end of the input).
    pub(crate) fn ensure(&mut self, need: usize) -> io::Result<usize> {
        match self {
            Window::Mapped(m) => m.ensure(need),
            Window::Buffered(b) => b.ensure(need),
        }
    }

    /// The bytes from the current position (as many as the last `ensure` made ready).
    #[inline]
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Window::Mapped(m) => match &m.map {
                Some(map) => &map[(m.pos - m.map_at) as usize..],
                None => &[],
            },
            Window::Buffered(b) => &b.buf[b.start..b.end],
        }
    }

    #[inline]
    pub(crate) fn advance(&mut self, n: usize) {
        match self {
            Window::Mapped(m) => m.pos += n as u64,
            Window::Buffered(b) => {
                b.start += n;
                b.consumed += n as u64;
            }
        }
    }

    /// Bytes consumed so far (of the decompressed stream).
    pub(crate) fn offset(&self) -> u64 {
        match self {
            Window::Mapped(m) => m.pos,
            Window::Buffered(b) => b.consumed,
        }
    }
}

impl Mapped {
    fn ensure(&mut self, need: usize) -> io::Result<usize> {
        let available_in_map = match &self.map {
            Some(map) => (self.map_at + map.len() as u64).saturating_sub(self.pos),
            None => 0,
        };
        let left_in_file = self.len.saturating_sub(self.pos);
        if available_in_map >= need as u64 || available_in_map == left_in_file && self.map.is_some() {
            return Ok(available_in_map as usize);
        }
        if let Some(p) = &self.progress {
            p.0.store(self.pos, Ordering::Relaxed);
        }
        // Remap from the page holding `pos`, large enough for `need`.
        let page = 4096u64;
        let at = self.pos / page * page;
        let want = (self.pos - at + (need as u64).max(MAP_WINDOW)).min(self.len - at);
        self.map = None;
        if want == 0 {
            return Ok(0);
        }
        // SAFETY: the file is opened read-only by us; if another process truncates it
        // while we read, accessing the vanished pages raises SIGBUS — the same risk
        // every mmap-based capture reader (libpcap included) accepts.
        let map = unsafe { MmapOptions::new().offset(at).len(want as usize).populate().map(&self.file)? };
        let _ = map.advise(Advice::Sequential);
        self.map_at = at;
        self.map = Some(map);
        Ok((at + want - self.pos) as usize)
    }
}

impl Buffered {
    fn ensure(&mut self, need: usize) -> io::Result<usize> {
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
}
