use std::io;
use std::path::{Path, PathBuf};

use crate::stream::DecodeFailure;

/// Why a capture cannot be read; each renders as one line naming the file.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// The operating system refused to open or read the file.
    #[error("{path}: {source}")]
    Io {
        /// The capture.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// The file (or its decompressed content) holds no byte.
    #[error("{path}: the file is empty")]
    Empty {
        /// The capture.
        path: PathBuf,
    },
    /// The first bytes are no format lowtail reads.
    #[error("{path}: not a capture file (starts with {head}); lowtail reads pcap, pcapng and MoonSniff .mscap records, optionally zstd- or gzip-compressed")]
    NotACapture {
        /// The capture.
        path: PathBuf,
        /// The first bytes in hex, with a hint.
        head: String,
    },
    /// The file ends inside its header.
    #[error("{path}: truncated {format} header ({got} of {need} bytes)")]
    TruncatedHeader {
        /// The capture.
        path: PathBuf,
        /// The format the magic announced.
        format: &'static str,
        /// Bytes present.
        got: usize,
        /// Bytes the header needs.
        need: usize,
    },
    /// A format version lowtail does not read: libpcap does not read it either.
    #[error("{path}: {format} version {major}.{minor} at byte {offset} is not one lowtail reads (it reads {supported}, as libpcap does)")]
    UnsupportedVersion {
        /// The capture.
        path: PathBuf,
        /// The format (or part of it: "pcapng section").
        format: &'static str,
        /// Major version number.
        major: u16,
        /// Minor version number.
        minor: u16,
        /// Where the header that names the version starts (0: the file header).
        offset: u64,
        /// The versions that are read.
        supported: &'static str,
    },
    /// A link layer lowtail cannot decode down to UDP.
    #[error("{path}: link type {linktype} is not supported (lowtail reads Ethernet, raw IP, Linux cooked SLL/SLL2 and BSD loopback captures)")]
    UnsupportedLinkType {
        /// The capture.
        path: PathBuf,
        /// The LINKTYPE_ number.
        linktype: i32,
    },
    /// The bytes contradict the format (a length field out of range, a block that does not parse).
    #[error("{path}: corrupt {format} data near byte {offset}: {detail}")]
    Corrupt {
        /// The capture.
        path: PathBuf,
        /// The format being read.
        format: &'static str,
        /// Offset in the (decompressed) content.
        offset: u64,
        /// What is wrong.
        detail: String,
    },
    /// A pcapng packet names an interface no block described.
    #[error("{path}: packet refers to interface {interface}, which the pcapng file never described")]
    UnknownInterface {
        /// The capture.
        path: PathBuf,
        /// The interface number.
        interface: u32,
    },
    /// The compressed stream is damaged: its decoder found bad data or a checksum that fails.
    #[error("{path}: cannot decompress ({codec}): {detail}")]
    Decompress {
        /// The capture.
        path: PathBuf,
        /// zstd or gzip.
        codec: &'static str,
        /// What the decompressor said.
        detail: String,
    },
}

impl CaptureError {
    /// The error of a failed read: a decompressor's verdict on its data is `Decompress`,
    /// anything else the operating system's `Io`.
    pub(crate) fn read(path: &Path, source: io::Error) -> CaptureError {
        match source.get_ref().and_then(|e| e.downcast_ref::<DecodeFailure>()) {
            Some(f) => CaptureError::Decompress { path: path.to_path_buf(), codec: f.codec, detail: f.detail.clone() },
            None => CaptureError::Io { path: path.to_path_buf(), source },
        }
    }
}
