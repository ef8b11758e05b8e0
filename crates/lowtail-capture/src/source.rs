use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use crate::legacy::LegacyReader;
use crate::moonsniff::MoonSniffReader;
use crate::ng::NgReader;
use crate::window::Window;
use crate::{CaptureError, CaptureReader, Readers};

/// The container format of a capture, after decompression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    PcapMicro,
    PcapNano,
    PcapNg,
    MoonSniff,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::PcapMicro => "pcap-us",
            Format::PcapNano => "pcap-ns",
            Format::PcapNg => "pcapng",
            Format::MoonSniff => "moonsniff",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Zstd,
    Gzip,
}

impl Compression {
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Zstd => "zstd",
            Compression::Gzip => "gzip",
        }
    }

    fn sniff(head: &[u8]) -> Compression {
        match head {
            [0x28, 0xb5, 0x2f, 0xfd, ..] => Compression::Zstd,
            [0x1f, 0x8b, ..] => Compression::Gzip,
            _ => Compression::None,
        }
    }
}

/// How to open a capture.
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    /// Treat a file without pcap/pcapng magic as MoonSniff records even when its name
    /// does not end in `.mscap`.
    pub force_moonsniff: bool,
    /// Shared byte counter for progress reports (bytes of the file on disk).
    pub progress: Option<Progress>,
}

/// Bytes consumed so far from the file on disk, readable from another thread.
#[derive(Debug, Clone, Default)]
pub struct Progress(pub(crate) Arc<AtomicU64>);

impl Progress {
    pub fn bytes(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

struct CountingRead<R> {
    inner: R,
    counter: Option<Progress>,
}

impl<R: Read> Read for CountingRead<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(c) = &self.counter {
            c.0.fetch_add(n as u64, Ordering::Relaxed);
        }
        Ok(n)
    }
}

/// Reads greedily: each `read` fills the buffer unless the stream ends, so format
/// sniffing sees whole headers even through a decompressor.
pub(crate) struct Greedy<R> {
    prefix: Vec<u8>,
    pos: usize,
    inner: R,
}

impl<R: Read> Read for Greedy<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut filled = 0;
        if self.pos < self.prefix.len() {
            let n = (self.prefix.len() - self.pos).min(buf.len());
            buf[..n].copy_from_slice(&self.prefix[self.pos..self.pos + n]);
            self.pos += n;
            filled = n;
        }
        while filled < buf.len() {
            match self.inner.read(&mut buf[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return if filled > 0 { Ok(filled) } else { Err(e) },
            }
        }
        Ok(filled)
    }
}

/// What the first bytes say the (decompressed) content is.
enum Kind {
    Legacy,
    Ng,
    MoonSniff,
}

fn kind_of(head: &[u8], path: &Path, options: &OpenOptions) -> Result<Kind, CaptureError> {
    let magic = head.get(..4).map(|m| u32::from_le_bytes([m[0], m[1], m[2], m[3]]));
    match magic {
        Some(0xa1b2c3d4 | 0xd4c3b2a1 | 0xa1b23c4d | 0x4d3cb2a1 | 0xa1b2cd34 | 0x34cdb2a1) => Ok(Kind::Legacy),
        Some(0x0a0d0d0a) => Ok(Kind::Ng),
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
        Kind::Legacy => Readers::Legacy(LegacyReader::new(window, path, compression)?),
        Kind::Ng => Readers::Ng(NgReader::new(window, path, compression)?),
        Kind::MoonSniff => Readers::MoonSniff(MoonSniffReader::new(window, path, compression)),
    };
    Ok(CaptureReader { format, stream_cut })
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
    let mut raw = Greedy { prefix: Vec::new(), pos: 0, inner: raw };
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
    let mut stream = Greedy { prefix: Vec::new(), pos: 0, inner: decoded };
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
    let cut = StreamCut { cut: Arc::default(), path: path_buf.clone(), codec: compression };
    let window = Window::new(Box::new(DecodeErrors { inner: stream, cut: cut.clone() }));
    let stream_cut = (compression != Compression::None).then_some(cut);
    reader_for(kind, window, path_buf, compression, stream_cut)
}

/// Remembers that a compressed stream ended before its end marker: a capture whose
/// writer was killed. Its readers then see the end of their input there, as with a
/// plain file cut short, and this adds a warning saying what happened.
#[derive(Debug, Clone)]
pub(crate) struct StreamCut {
    cut: Arc<AtomicBool>,
    path: PathBuf,
    codec: Compression,
}

impl StreamCut {
    pub(crate) fn take_warning(&self) -> Option<String> {
        self.cut.swap(false, Ordering::Relaxed).then(|| {
            format!(
                "{}: the {} stream ends early (file cut short?): analysed what it held",
                self.path.display(),
                self.codec.name()
            )
        })
    }
}

/// Labels read errors from a decompressor as such ("corrupt zstd stream ..."), so a
/// damaged compressed file does not read as a disk problem; a stream that merely ends
/// early ends the input instead.
struct DecodeErrors<R> {
    inner: R,
    cut: StreamCut,
}

impl<R: Read> Read for DecodeErrors<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match (self.inner.read(buf), self.cut.codec) {
            (Ok(n), _) => Ok(n),
            (Err(e), Compression::None) => Err(e),
            (Err(e), _) if e.kind() == io::ErrorKind::UnexpectedEof => {
                self.cut.cut.store(true, Ordering::Relaxed);
                Ok(0)
            }
            (Err(e), c) => Err(io::Error::new(e.kind(), format!("{} stream is damaged: {e}", c.name()))),
        }
    }
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
