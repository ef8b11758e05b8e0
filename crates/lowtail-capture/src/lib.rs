//! Capture files in, timestamped frames out.
//!
//! Every reader streams: memory stays constant however large the capture is, so a
//! 100-million-packet pair can be analysed on a laptop. Compression (zstd, gzip) is
//! detected from the file's magic bytes, never from its name.

mod error;
pub mod legacy;
mod link;
pub mod moonsniff;
pub mod ng;
mod source;
mod window;
pub mod write;

pub use error::CaptureError;
pub use link::LinkType;
pub use source::{open, open_reader, Compression, Format, OpenOptions, Progress};

/// One frame as captured, with its timestamp converted to integer nanoseconds.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    pub ts_ns: i64,
    pub link: LinkType,
    /// The captured bytes (may be shorter than the frame on the wire: see `orig_len`).
    pub data: &'a [u8],
    /// The frame's length on the wire.
    pub orig_len: u32,
}

/// What a capture yields: a frame to decode, or (MoonSniff) a record that already
/// carries the packet id.
#[derive(Debug, Clone, Copy)]
pub enum Item<'a> {
    Frame(Frame<'a>),
    Record { ts_ns: i64, id: u32 },
}

impl Item<'_> {
    pub fn ts_ns(&self) -> i64 {
        match self {
            Item::Frame(f) => f.ts_ns,
            Item::Record { ts_ns, .. } => *ts_ns,
        }
    }
}

/// A streaming capture reader (static dispatch: the per-packet path inlines).
pub enum CaptureReader {
    Legacy(legacy::LegacyReader),
    Ng(ng::NgReader),
    MoonSniff(moonsniff::MoonSniffReader),
}

impl CaptureReader {
    /// The next frame or record; it is lent until the next call.
    #[inline]
    pub fn next_item(&mut self) -> Result<Option<Item<'_>>, CaptureError> {
        match self {
            CaptureReader::Legacy(r) => r.next_item(),
            CaptureReader::Ng(r) => r.next_item(),
            CaptureReader::MoonSniff(r) => r.next_item(),
        }
    }

    /// Hand up to `budget` items to `visit`; returns how many (0 at the end). Faster
    /// than `next_item` for classic pcap, which walks its window in one tight loop.
    #[inline]
    pub fn for_each(&mut self, budget: usize, mut visit: impl FnMut(Item<'_>)) -> Result<usize, CaptureError> {
        if let CaptureReader::Legacy(r) = self {
            return r.for_each(budget, visit);
        }
        let mut n = 0;
        while n < budget {
            match self.next_item()? {
                Some(item) => visit(item),
                None => break,
            }
            n += 1;
        }
        Ok(n)
    }

    pub fn format(&self) -> Format {
        match self {
            CaptureReader::Legacy(r) => r.format(),
            CaptureReader::Ng(_) => Format::PcapNg,
            CaptureReader::MoonSniff(_) => Format::MoonSniff,
        }
    }

    /// Non-fatal problems found so far (a truncated last record, ...), drained.
    pub fn take_warnings(&mut self) -> Vec<String> {
        match self {
            CaptureReader::Legacy(r) => r.take_warnings(),
            CaptureReader::Ng(r) => r.take_warnings(),
            CaptureReader::MoonSniff(r) => r.take_warnings(),
        }
    }

    /// Snap length announced by the file (0 when the format has none).
    pub fn snaplen(&self) -> u32 {
        match self {
            CaptureReader::Legacy(r) => r.snaplen(),
            CaptureReader::Ng(r) => r.snaplen(),
            CaptureReader::MoonSniff(_) => 0,
        }
    }

    pub fn compression(&self) -> Compression {
        match self {
            CaptureReader::Legacy(r) => r.compression(),
            CaptureReader::Ng(r) => r.compression(),
            CaptureReader::MoonSniff(r) => r.compression(),
        }
    }
}

pub(crate) const NS_PER_SEC: i64 = 1_000_000_000;
