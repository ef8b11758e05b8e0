//! `CaptureReader`: one type over every format's reader, dispatched statically so the
//! per-packet path inlines.

use crate::error::CaptureError;
use crate::format::{Compression, Format};
use crate::item::Item;
use crate::moonsniff::MoonSniffReader;
use crate::pcap::PcapReader;
use crate::pcapng::PcapngReader;
use crate::stream::StreamCut;

/// A streaming capture reader of any format lowtail reads.
pub struct CaptureReader {
    format: Readers,
    compression: Compression,
    /// Compressed input whose stream ended inside a frame (the file was cut short).
    stream_cut: Option<StreamCut>,
}

pub(crate) enum Readers {
    Pcap(PcapReader),
    Pcapng(PcapngReader),
    MoonSniff(MoonSniffReader),
}

impl CaptureReader {
    pub(crate) fn new(format: Readers, compression: Compression, stream_cut: Option<StreamCut>) -> Self {
        CaptureReader { format, compression, stream_cut }
    }

    /// The next frame or record; it is lent until the next call.
    #[inline]
    pub fn next_item(&mut self) -> Result<Option<Item<'_>>, CaptureError> {
        match &mut self.format {
            Readers::Pcap(r) => r.next_item(),
            Readers::Pcapng(r) => r.next_item(),
            Readers::MoonSniff(r) => r.next_item(),
        }
    }

    /// Hand up to `budget` items to `visit`; returns how many (0 at the end). Faster
    /// than `next_item` for classic pcap, which walks its window in one tight loop.
    #[inline]
    pub fn for_each(&mut self, budget: usize, mut visit: impl FnMut(Item<'_>)) -> Result<usize, CaptureError> {
        if let Readers::Pcap(r) = &mut self.format {
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

    /// The container format (after decompression).
    pub fn format(&self) -> Format {
        match &self.format {
            Readers::Pcap(r) => r.format(),
            Readers::Pcapng(_) => Format::PcapNg,
            Readers::MoonSniff(_) => Format::MoonSniff,
        }
    }

    /// Non-fatal problems found so far (a truncated last record, ...), drained.
    pub fn take_warnings(&mut self) -> Vec<String> {
        let mut warnings = match &mut self.format {
            Readers::Pcap(r) => r.take_warnings(),
            Readers::Pcapng(r) => r.take_warnings(),
            Readers::MoonSniff(r) => r.take_warnings(),
        };
        if let Some(w) = self.stream_cut.as_mut().and_then(|cut| cut.take_warning()) {
            warnings.push(w);
        }
        warnings
    }

    /// The input ended before the capture did: inside a record or block, or a compressed
    /// stream before its end marker (a capture whose writer was killed). What came
    /// before was read; a result from it is partial. Known once the reader has ended.
    pub fn is_cut(&self) -> bool {
        let reader_cut = match &self.format {
            Readers::Pcap(r) => r.is_cut(),
            Readers::Pcapng(r) => r.is_cut(),
            Readers::MoonSniff(r) => r.is_cut(),
        };
        reader_cut || self.stream_cut.as_ref().is_some_and(StreamCut::is_cut)
    }

    /// Snap length announced by the file (0 when the format has none).
    pub fn snaplen(&self) -> u32 {
        match &self.format {
            Readers::Pcap(r) => r.snaplen(),
            Readers::Pcapng(r) => r.snaplen(),
            Readers::MoonSniff(_) => 0,
        }
    }

    /// The compression the file was read through.
    pub fn compression(&self) -> Compression {
        self.compression
    }
}
