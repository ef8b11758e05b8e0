use std::path::PathBuf;

/// Errors a user can act on; each renders as one line.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: the file is empty")]
    Empty { path: PathBuf },
    #[error("{path}: not a capture file (starts with {head}); lowtail reads pcap, pcapng and MoonSniff .mscap records, optionally zstd- or gzip-compressed")]
    NotACapture { path: PathBuf, head: String },
    #[error("{path}: truncated {format} header ({got} of {need} bytes)")]
    TruncatedHeader { path: PathBuf, format: &'static str, got: usize, need: usize },
    #[error("{path}: link type {linktype} is not supported (lowtail reads Ethernet, raw IP, Linux cooked SLL/SLL2 and BSD loopback captures)")]
    UnsupportedLinkType { path: PathBuf, linktype: i32 },
    #[error("{path}: corrupt {format} data near byte {offset}: {detail}")]
    Corrupt { path: PathBuf, format: &'static str, offset: u64, detail: String },
    #[error("{path}: packet refers to interface {interface}, which the pcapng file never described")]
    UnknownInterface { path: PathBuf, interface: u32 },
    #[error("{path}: cannot decompress ({codec}): {detail}")]
    Decompress { path: PathBuf, codec: &'static str, detail: String },
    #[error("analysis cancelled")]
    Cancelled,
}
