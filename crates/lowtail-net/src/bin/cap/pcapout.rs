//! Capture files written off the capture thread.
//!
//! The capture thread formats pcap records (through lowtail-capture's writer) into
//! 1 MiB chunks and passes full chunks to a writer thread, which writes them to the
//! file, zstd-compressing on the way if asked. Disk stalls and compression then never
//! hold up the ring; if the writer does fall behind, the bounded queue blocks the
//! capture thread, the ring fills and the kernel counts the drops (visible, not silent).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

use lowtail_capture::write::{Endian, PcapWriter};
use lowtail_capture::LinkType;

use lowtail_program::Fatal;

const CHUNK: usize = 1 << 20;
/// Chunks queued for the writer at most (64 MiB per file).
const QUEUE: usize = 64;

/// A nanosecond pcap file being written.
pub struct CaptureFile {
    path: PathBuf,
    pcap: PcapWriter<ChunkSink>,
    writer: JoinHandle<io::Result<u64>>,
}

impl CaptureFile {
    /// Create `path` (zstd-compressed if asked) and start its writer thread.
    pub fn create(path: &Path, snaplen: u32, zstd: bool) -> Result<CaptureFile, Fatal> {
        let file = File::create(path).map_err(|e| match e.raw_os_error() {
            Some(libc::ENOSPC) | Some(libc::EDQUOT) => {
                Fatal::write(format_args!("cannot create {}", path.display()), &e)
            }
            _ => Fatal::usage(format!("cannot create {}: {e}", path.display())),
        })?;
        let (full_tx, full_rx) = sync_channel::<Vec<u8>>(QUEUE);
        let (empty_tx, empty_rx) = sync_channel::<Vec<u8>>(QUEUE + 2);
        let writer = std::thread::Builder::new()
            .name("pcap-writer".into())
            .spawn(move || write_chunks(file, zstd, full_rx, empty_tx))
            .map_err(|e| Fatal::failed(format!("starting a writer thread: {e}")))?;
        let sink = ChunkSink { buf: Vec::with_capacity(CHUNK), full: Some(full_tx), empty: empty_rx };
        let pcap = PcapWriter::new(sink, LinkType::Ethernet, true, Endian::Little, snaplen)
            .map_err(|e| Fatal::write(format_args!("writing {}", path.display()), &e))?;
        Ok(CaptureFile { path: path.to_path_buf(), pcap, writer })
    }

    /// Append one frame. An error means the writer thread failed (disk full, say):
    /// stop writing and call `finish`, which says why.
    #[inline]
    pub fn write(&mut self, ts_ns: i64, data: &[u8], wire_len: u32) -> io::Result<()> {
        self.pcap.write(ts_ns, data, wire_len)
    }

    /// Flush everything and close the file; returns the bytes written to disk.
    pub fn finish(self) -> Result<u64, Fatal> {
        let mut sink = self.pcap.into_inner();
        let flushed = sink.flush_chunk();
        drop(sink);
        let written = self.writer.join().expect("the writer thread does not panic");
        match (flushed, written) {
            (_, Err(e)) | (Err(e), _) => Err(Fatal::write(format_args!("writing {}", self.path.display()), &e)),
            (Ok(()), Ok(bytes)) => Ok(bytes),
        }
    }
}

struct ChunkSink {
    buf: Vec<u8>,
    full: Option<SyncSender<Vec<u8>>>,
    empty: Receiver<Vec<u8>>,
}

impl ChunkSink {
    fn flush_chunk(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let next = self.empty.try_recv().unwrap_or_else(|_| Vec::with_capacity(CHUNK));
        let full = std::mem::replace(&mut self.buf, next);
        let sender = self.full.as_ref().expect("sink open");
        sender.send(full).map_err(|_| io::Error::other("the writer thread stopped"))
    }
}

impl Write for ChunkSink {
    #[inline]
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK {
            self.flush_chunk()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for ChunkSink {
    fn drop(&mut self) {
        // Closing the channel tells the writer thread to finish the file.
        self.full.take();
    }
}

fn write_chunks(file: File, zstd: bool, full: Receiver<Vec<u8>>, empty: SyncSender<Vec<u8>>) -> io::Result<u64> {
    let out = CountingWriter { inner: BufWriter::with_capacity(1 << 20, file), bytes: 0 };
    if zstd {
        // Level 1: capture files of fixed-format frames compress well even at the
        // fastest level, and the writer must keep up with 1 Mpps.
        let mut enc = zstd::stream::Encoder::new(out, 1)?;
        pump(&mut enc, &full, &empty)?;
        let mut out = enc.finish()?;
        out.flush()?;
        out.inner.get_ref().sync_data()?;
        Ok(out.bytes)
    } else {
        let mut out = out;
        pump(&mut out, &full, &empty)?;
        out.flush()?;
        out.inner.get_ref().sync_data()?;
        Ok(out.bytes)
    }
}

fn pump(out: &mut impl Write, full: &Receiver<Vec<u8>>, empty: &SyncSender<Vec<u8>>) -> io::Result<()> {
    while let Ok(mut chunk) = full.recv() {
        out.write_all(&chunk)?;
        chunk.clear();
        let _ = empty.try_send(chunk);
    }
    Ok(())
}

struct CountingWriter<W: Write> {
    inner: W,
    bytes: u64,
}

impl<W: Write> Write for CountingWriter<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(data)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_written_are_read_back_exactly() {
        let dir = std::env::temp_dir().join(format!("lowtail-net-pcapout-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for zstd in [false, true] {
            let path = dir.join(if zstd { "t.pcap.zst" } else { "t.pcap" });
            let mut f = CaptureFile::create(&path, 128, zstd).unwrap();
            // Enough frames to cross several chunks.
            for i in 0..40_000i64 {
                let data = vec![(i % 251) as u8; 60 + (i % 100) as usize];
                f.write(1_700_000_000_000_000_000 + i * 1_000, &data, data.len() as u32 + 4).unwrap();
            }
            let bytes = f.finish().unwrap();
            assert_eq!(bytes, std::fs::metadata(&path).unwrap().len());
            let mut reader = lowtail_capture::open(&path, &Default::default()).unwrap();
            let mut n = 0i64;
            while let Some(item) = reader.next_item().unwrap() {
                let lowtail_capture::Item::Frame(frame) = item else { panic!("a frame") };
                assert_eq!(frame.ts_ns, 1_700_000_000_000_000_000 + n * 1_000);
                let len = (60 + n % 100) as usize;
                assert_eq!(frame.data.len(), len.min(128), "cut to the snap length");
                assert_eq!(frame.orig_len as usize, len + 4);
                assert!(frame.data.iter().all(|&b| b == (n % 251) as u8));
                n += 1;
            }
            assert_eq!(n, 40_000);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
