//! Opening a capture: compression and format are detected from the bytes themselves,
//! never from the file name (except MoonSniff records, which have no magic).

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::error::CaptureError;
use crate::format::Compression;
use crate::moonsniff::MoonSniffReader;
use crate::pcap::PcapReader;
use crate::pcapng::PcapngReader;
use crate::reader::{CaptureReader, Readers};
use crate::stream::{CountingRead, DecodeErrors, Greedy, Progress, StreamCut};
use crate::window::Window;

/// How to open a capture.
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    /// Treat a file without pcap/pcapng magic as MoonSniff records even when its name
    /// does not end in `.mscap`.
    pub force_moonsniff: bool,
    /// Shared byte counter for progress reports (bytes of the file on disk).
    pub progress: Option<Progress>,
}

/// What the first bytes say the (decompressed) content is.
enum Kind {
    Pcap,
    Pcapng,
    MoonSniff,
}

fn kind_of(head: &[u8], path: &Path, options: &OpenOptions) -> Result<Kind, CaptureError> {
    let magic = head.get(..4).map(|m| u32::from_le_bytes([m[0], m[1], m[2], m[3]]));
    match magic {
        Some(0xa1b2c3d4 | 0xd4c3b2a1 | 0xa1b23c4d | 0x4d3cb2a1 | 0xa1b2cd34 | 0x34cdb2a1) => Ok(Kind::Pcap),
        Some(0x0a0d0d0a) => Ok(Kind::Pcapng),
        _ if options.force_moonsniff || is_mscap_name(path) => Ok(Kind::MoonSniff),
        _ => {
            let head_hex: Vec<String> = head.iter().take(8).map(|b| format!("{b:02x}")).collect();
            let hint = if head.len() < 4 { "too short to hold any magic" } else { "no pcap/pcapng magic" };
            Err(CaptureError::NotACapture {
                path: path.to_path_buf(),
                head: format!("{} — {hint}", head_hex.join(" ")),
            })
        }
    }
}

fn reader_for(
    kind: Kind,
    window: Window,
    path: PathBuf,
    compression: Compression,
    stream_cut: Option<StreamCut>,
) -> Result<CaptureReader, CaptureError> {
    let format = match kind {
        Kind::Pcap => Readers::Pcap(PcapReader::new(window, path)?),
        Kind::Pcapng => Readers::Pcapng(PcapngReader::new(window, path)?),
        Kind::MoonSniff => Readers::MoonSniff(MoonSniffReader::new(window, path)),
    };
    Ok(CaptureReader::new(format, compression, stream_cut))
}

/// Open a capture file: detect compression and format from the bytes themselves.
pub fn open(path: &Path, options: &OpenOptions) -> Result<CaptureReader, CaptureError> {
    let io_err = |source| CaptureError::Io { path: path.to_path_buf(), source };
    let file = File::open(path).map_err(io_err)?;
    let meta = file.metadata().map_err(io_err)?;
    if meta.is_dir() {
        return Err(io_err(io::Error::other("is a directory, not a capture file")));
    }
    if meta.len() == 0 {
        return Err(CaptureError::Empty { path: path.to_path_buf() });
    }
    let counted = CountingRead { inner: file, counter: options.progress.clone() };
    open_reader(Box::new(counted), path, options)
}

/// Open a capture from any byte stream (`path` names it in messages and decides
/// MoonSniff detection by extension).
pub fn open_reader(
    raw: Box<dyn Read + Send>,
    path: &Path,
    options: &OpenOptions,
) -> Result<CaptureReader, CaptureError> {
    let path_buf = path.to_path_buf();
    let mut raw = Greedy::new(raw);
    let head = read_head(&mut raw, &path_buf)?;
    if head.is_empty() {
        return Err(CaptureError::Empty { path: path_buf });
    }
    let compression = Compression::sniff(&head);
    raw.prefix = head;
    if compression == Compression::None {
        // No decoder in between: the window reads the file directly.
        let kind = kind_of(&raw.prefix, path, options)?;
        return reader_for(kind, Window::new(Box::new(raw)), path_buf, compression, None);
    }
    let decoded: Box<dyn Read + Send> =
        match compression {
            Compression::None => unreachable!("handled above"),
            Compression::Zstd => Box::new(zstd::stream::read::Decoder::new(raw).map_err(|e| {
                CaptureError::Decompress { path: path_buf.clone(), codec: "zstd", detail: e.to_string() }
            })?),
            Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(raw)),
        };
    let mut stream = Greedy::new(decoded);
    let head = read_head(&mut stream, &path_buf).map_err(|e| match (compression, e) {
        (Compression::None, e) => e,
        (c, CaptureError::Io { source, .. }) => {
            CaptureError::Decompress { path: path_buf.clone(), codec: c.name(), detail: source.to_string() }
        }
        (_, e) => e,
    })?;
    if head.is_empty() {
        return Err(CaptureError::Empty { path: path_buf });
    }
    let kind = kind_of(&head, path, options)?;
    stream.prefix = head;
    let cut = StreamCut::new(path_buf.clone(), compression);
    let window = Window::new(Box::new(DecodeErrors { inner: stream, cut: cut.clone() }));
    let stream_cut = (compression != Compression::None).then_some(cut);
    reader_for(kind, window, path_buf, compression, stream_cut)
}

fn read_head(r: &mut impl Read, path: &Path) -> Result<Vec<u8>, CaptureError> {
    let mut head = vec![0u8; 32];
    let n = r.read(&mut head).map_err(|source| CaptureError::Io { path: path.to_path_buf(), source })?;
    head.truncate(n);
    Ok(head)
}

fn is_mscap_name(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("").to_ascii_lowercase();
    let base = name.trim_end_matches(".zst").trim_end_matches(".gz");
    base.ends_with(".mscap") || base.ends_with(".msrec")
}
