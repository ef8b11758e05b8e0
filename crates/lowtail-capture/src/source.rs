//! Opening a capture: compression and format are detected from the bytes themselves,
//! never from the file name (except MoonSniff records, which have no magic).

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::CaptureError;
use crate::format::Compression;
use crate::moonsniff::MoonSniffReader;
use crate::pcap::PcapReader;
use crate::pcapng::PcapngReader;
use crate::reader::{CaptureReader, Readers};
use crate::stream::{CountingRead, DecodeErrors, Greedy, Progress, RegularFile, StreamCut};
use crate::window::Window;

/// How to open a capture.
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    /// Treat a file without pcap/pcapng magic as MoonSniff records even when its name
    /// does not end in `.mscap`.
    pub force_moonsniff: bool,
    /// Shared byte counter for progress reports (bytes of the file on disk).
    pub progress: Option<Progress>,
    /// Set to stop waiting for a FIFO's writer (the open then fails as interrupted).
    pub cancel: Option<Arc<AtomicBool>>,
}

/// How long `open` waits for a FIFO's writer to appear (and write, or close).
pub const FIFO_WRITER_WAIT: Duration = Duration::from_secs(10);

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
///
/// A regular file is read as it is; a FIFO (a pipe, `/dev/stdin` fed by one) as the
/// stream it is, once a writer has opened it: `open` waits for one at most
/// `FIFO_WRITER_WAIT` and then refuses, so a FIFO nobody writes to never hangs the
/// caller. Devices, sockets and directories are refused without reading a byte
/// (`/dev/zero` would never end, a terminal would wait for typing).
pub fn open(path: &Path, options: &OpenOptions) -> Result<CaptureReader, CaptureError> {
    let io_err = |source| CaptureError::Io { path: path.to_path_buf(), source };
    let kind = std::fs::metadata(path).map_err(io_err)?.file_type();
    let raw: Box<dyn Read + Send> = if kind.is_file() {
        let file = File::open(path).map_err(io_err)?;
        let size = file.metadata().map_err(io_err)?.len();
        if size == 0 {
            return Err(CaptureError::Empty { path: path.to_path_buf() });
        }
        Box::new(RegularFile::new(file, size))
    } else if kind.is_fifo() {
        Box::new(open_fifo(path, options).map_err(io_err)?)
    } else {
        let what = match () {
            _ if kind.is_dir() => "a directory",
            _ if kind.is_char_device() => "a character device",
            _ if kind.is_block_device() => "a block device",
            _ if kind.is_socket() => "a socket",
            _ => "not a regular file",
        };
        return Err(io_err(io::Error::other(format!(
            "is {what}, not a capture file (lowtail reads regular files and FIFOs)"
        ))));
    };
    let counted = CountingRead { inner: raw, counter: options.progress.clone() };
    open_reader(Box::new(counted), path, options)
}

/// Open a FIFO without blocking, wait until a writer has written or closed it, then
/// hand it over in blocking mode.
fn open_fifo(path: &Path, options: &OpenOptions) -> io::Result<File> {
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    let fd = file.as_raw_fd();
    let started = Instant::now();
    loop {
        let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd for the duration of the call.
        let ready = unsafe { libc::poll(&mut pfd, 1, 100) };
        if ready < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        // Data, or a writer that came and went (POLLHUP: the stream is then empty).
        if ready > 0 && pfd.revents != 0 {
            break;
        }
        if options.cancel.as_ref().is_some_and(|c| c.load(Ordering::Relaxed)) {
            return Err(io::Error::new(io::ErrorKind::Interrupted, "cancelled while waiting for a writer"));
        }
        if started.elapsed() >= FIFO_WRITER_WAIT {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("a FIFO with no writer (waited {} s for one)", FIFO_WRITER_WAIT.as_secs()),
            ));
        }
    }
    // SAFETY: F_GETFL/F_SETFL on a file descriptor this function owns.
    let cleared = unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) >= 0
    };
    if !cleared {
        return Err(io::Error::last_os_error());
    }
    Ok(file)
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
    let decoder: Box<dyn Read + Send> =
        match compression {
            Compression::None => {
                // No decoder in between: the window reads the file directly.
                let kind = kind_of(&raw.prefix, path, options)?;
                return reader_for(kind, Window::new(Box::new(raw)), path_buf, compression, None);
            }
            Compression::Zstd => Box::new(zstd::stream::read::Decoder::new(raw).map_err(|e| {
                CaptureError::Decompress { path: path_buf.clone(), codec: "zstd", detail: e.to_string() }
            })?),
            Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(raw)),
        };
    // The same rule from the first byte on: a stream that ends early is a capture cut
    // short, a decoder that fails is a damaged file.
    let cut = StreamCut::new(path_buf.clone(), compression);
    let mut stream = Greedy::new(DecodeErrors { inner: decoder, cut: cut.clone() });
    let head = read_head(&mut stream, &path_buf)?;
    if head.len() < 4 && cut.is_cut() {
        let format = match compression {
            Compression::Zstd => "zstd-compressed capture",
            _ => "gzip-compressed capture",
        };
        return Err(CaptureError::TruncatedHeader { path: path_buf, format, got: head.len(), need: 4 });
    }
    if head.is_empty() {
        return Err(CaptureError::Empty { path: path_buf });
    }
    let kind = kind_of(&head, path, options)?;
    stream.prefix = head;
    reader_for(kind, Window::new(Box::new(stream)), path_buf, compression, Some(cut))
}

fn read_head(r: &mut impl Read, path: &Path) -> Result<Vec<u8>, CaptureError> {
    let mut head = vec![0u8; 32];
    let n = r.read(&mut head).map_err(|e| CaptureError::read(path, e))?;
    head.truncate(n);
    Ok(head)
}

fn is_mscap_name(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("").to_ascii_lowercase();
    let base = name.trim_end_matches(".zst").trim_end_matches(".gz");
    base.ends_with(".mscap") || base.ends_with(".msrec")
}
