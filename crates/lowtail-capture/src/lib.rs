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
pub struct CaptureReader {
    format: Readers,
    /// Compressed input whose stream ended inside a frame (the file was cut short).
    stream_cut: Option<source::StreamCut>,
}

pub(crate) enum Readers {
    Legacy(legacy::LegacyReader),
    Ng(ng::NgReader),
    MoonSniff(moonsniff::MoonSniffReader),
}

impl CaptureReader {
    /// The next frame or record; it is lent until the next call.
    #[inline]
    pub fn next_item(&mut self) -> Result<Option<Item<'_>>, CaptureError> {
        match &mut self.format {
            Readers::Legacy(r) => r.next_item(),
            Readers::Ng(r) => r.next_item(),
            Readers::MoonSniff(r) => r.next_item(),
        }
    }

    /// Hand up to `budget` items to `visit`; returns how many (0 at the end). Faster
    /// than `next_item` for classic pcap, which walks its window in one tight loop.
    #[inline]
    pub fn for_each(&mut self, budget: usize, mut visit: impl FnMut(Item<'_>)) -> Result<usize, CaptureError> {
        if let Readers::Legacy(r) = &mut self.format {
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
        match &self.format {
            Readers::Legacy(r) => r.format(),
            Readers::Ng(_) => Format::PcapNg,
            Readers::MoonSniff(_) => Format::MoonSniff,
        }
    }

    /// Non-fatal problems found so far (a truncated last record, ...), drained.
    pub fn take_warnings(&mut self) -> Vec<String> {
        let mut warnings = match &mut self.format {
            Readers::Legacy(r) => r.take_warnings(),
            Readers::Ng(r) => r.take_warnings(),
            Readers::MoonSniff(r) => r.take_warnings(),
        };
        if let Some(w) = self.stream_cut.as_ref().and_then(|cut| cut.take_warning()) {
            warnings.push(w);
        }
        warnings
    }

    /// Snap length announced by the file (0 when the format has none).
    pub fn snaplen(&self) -> u32 {
        match &self.format {
            Readers::Legacy(r) => r.snaplen(),
            Readers::Ng(r) => r.snaplen(),
            Readers::MoonSniff(_) => 0,
        }
    }

    pub fn compression(&self) -> Compression {
        match &self.format {
            Readers::Legacy(r) => r.compression(),
            Readers::Ng(r) => r.compression(),
            Readers::MoonSniff(r) => r.compression(),
        }
    }
}

pub(crate) const NS_PER_SEC: i64 = 1_000_000_000;
