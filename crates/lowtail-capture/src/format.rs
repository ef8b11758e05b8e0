//! What a capture file is: its container format and the compression around it, both
//! told by the bytes themselves.

/// The container format of a capture, after decompression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Classic pcap with microsecond timestamps.
    PcapMicro,
    /// Classic pcap with nanosecond timestamps.
    PcapNano,
    /// pcapng, any timestamp resolution.
    PcapNg,
    /// MoonSniff's record file (timestamp and id, no frame).
    MoonSniff,
}

impl Format {
    /// The name reports and the database use.
    pub fn name(self) -> &'static str {
        match self {
            Format::PcapMicro => "pcap-us",
            Format::PcapNano => "pcap-ns",
            Format::PcapNg => "pcapng",
            Format::MoonSniff => "moonsniff",
        }
    }
}

/// The compression around a capture, detected from its magic bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Plain bytes.
    None,
    /// A zstd stream (one or more frames).
    Zstd,
    /// A gzip stream (one or more members).
    Gzip,
}

impl Compression {
    /// The name reports and the database use.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Zstd => "zstd",
            Compression::Gzip => "gzip",
        }
    }

    pub(crate) fn sniff(head: &[u8]) -> Compression {
        match head {
            [0x28, 0xb5, 0x2f, 0xfd, ..] => Compression::Zstd,
            [0x1f, 0x8b, ..] => Compression::Gzip,
            _ => Compression::None,
        }
    }
}
