//! What `open` does with files that are not regular: FIFOs are read as streams once a
//! writer comes (and refused after a bounded wait when none does), devices are refused
//! without reading a byte.

mod common;

use std::io::Write;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use lowtail_capture::write::{Endian, NgInterface, PcapNgWriter, PcapWriter};
use lowtail_capture::{open, CaptureError, LinkType, OpenOptions, FIFO_WRITER_WAIT};

fn pcap_bytes(n: usize) -> Vec<u8> {
    let mut w = PcapWriter::new(Vec::new(), LinkType::Ethernet, true, Endian::Little, 65535).unwrap();
    for k in 0..n {
        w.write(k as i64, &[k as u8; 100], 100).unwrap();
    }
    w.into_inner()
}

fn mkfifo(dir: &tempfile::TempDir, name: &str) -> std::path::PathBuf {
    let path = dir.path().join(name);
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    path
}

#[test]
fn fifo_is_read_as_a_stream() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = pcap_bytes(20_000); // more than a pipe holds: the writer blocks while we read
    for delay in [Duration::ZERO, Duration::from_millis(500)] {
        let fifo = mkfifo(&dir, &format!("p{}.pcap", delay.as_millis()));
        let (path, data) = (fifo.clone(), bytes.clone());
        let writer = std::thread::spawn(move || {
            std::thread::sleep(delay);
            std::fs::OpenOptions::new().write(true).open(path).unwrap().write_all(&data).unwrap();
        });
        let mut r = open(&fifo, &OpenOptions::default()).unwrap();
        let (got, warnings, err) = drain(&mut r, usize::MAX);
        writer.join().unwrap();
        assert!(err.is_none() && warnings.is_empty() && !r.is_cut(), "{err:?} {warnings:?}");
        assert_eq!(got.len(), 20_000);
    }
}

#[test]
fn fifo_without_a_writer_is_refused_after_a_bounded_wait_or_at_once_when_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = mkfifo(&dir, "nobody.pcap");
    let cancel = Arc::new(AtomicBool::new(true));
    let started = Instant::now();
    let err = open(&fifo, &OpenOptions { cancel: Some(cancel), ..OpenOptions::default() }).err().unwrap();
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    assert!(matches!(&err, CaptureError::Io { source, .. } if source.kind() == std::io::ErrorKind::Interrupted));

    let started = Instant::now();
    let err = open(&fifo, &OpenOptions::default()).err().unwrap();
    let waited = started.elapsed();
    // Bounded, not fast: the upper bound catches a wait that never ends, not a slow host (a
    // fresh clone's run on this VM once measured 75 s for the 10 s wait; a margin of seconds
    // is a claim about the machine being idle).
    assert!(waited >= FIFO_WRITER_WAIT && waited < FIFO_WRITER_WAIT + Duration::from_secs(300), "{waited:?}");
    let text = err.to_string();
    assert!(text.contains("nobody.pcap") && text.contains("FIFO with no writer"), "{text}");
}

#[test]
fn fifo_whose_writer_closes_at_once_is_empty() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = mkfifo(&dir, "empty.pcap");
    let path = fifo.clone();
    let writer = std::thread::spawn(move || drop(std::fs::OpenOptions::new().write(true).open(path).unwrap()));
    let err = open(&fifo, &OpenOptions::default()).err().unwrap();
    writer.join().unwrap();
    assert!(matches!(err, CaptureError::Empty { .. }), "{err:?}");
}

#[test]
fn devices_and_directories_are_refused_for_what_they_are() {
    for (path, what) in [("/dev/zero", "character device"), ("/dev/null", "character device"), ("/", "directory")] {
        let err = open(std::path::Path::new(path), &OpenOptions::default()).err().unwrap();
        let text = err.to_string();
        assert!(text.contains(path) && text.contains(what), "{text}");
    }
}

fn pcapng_bytes(n: usize) -> Vec<u8> {
    let mut w = PcapNgWriter::new(Vec::new(), Endian::Little).unwrap();
    w.add_interface(NgInterface { link: LinkType::Ethernet, snaplen: 0, tsresol: 9, tsoffset_s: 0 }).unwrap();
    for k in 0..n {
        w.write_enhanced(0, k as i64, &[k as u8; 100], 100).unwrap();
    }
    w.into_inner()
}

/// Another process cutting a regular file short while it is read is one error saying so,
/// never a crash, nor a shorter capture taken as whole, nor corruption.
#[test]
fn a_capture_cut_short_while_it_is_read_is_an_error_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes) in [("cut.pcap", pcap_bytes(100_000)), ("cut.pcapng", pcapng_bytes(100_000))] {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap(); // 12 MB: within one mapped chunk
        let mut r = open(&path, &OpenOptions::default()).unwrap();
        let (first, _, err) = drain(&mut r, 1_000);
        assert_eq!((first.len(), err.is_none()), (1_000, true), "{name}");
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(4096).unwrap();
        let (_, _, err) = drain(&mut r, usize::MAX);
        let err = err.expect("the file was cut under the reader: an error");
        assert!(matches!(&err, CaptureError::Io { .. }), "{name}: {err:?}");
        assert!(err.to_string().contains("cut shorter while lowtail read it"), "{name}: {err}");
    }
}

/// Cut exactly at a record's end, the rest still reads as a whole capture: only the size the
/// file had when it was opened tells it was cut, and it does.
#[test]
fn a_capture_cut_at_a_record_boundary_while_it_is_read_is_still_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("boundary.pcap");
    let bytes = pcap_bytes(100_000);
    std::fs::write(&path, &bytes).unwrap();
    let mut r = open(&path, &OpenOptions::default()).unwrap();
    let (first, _, err) = drain(&mut r, 10);
    assert_eq!((first.len(), err.is_none()), (10, true));
    let record = 16 + 100;
    let boundary = 24 + 50_000 * record; // past what the first read took in: the cut is met by reading
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(boundary as u64).unwrap();
    let (rest, _, err) = drain(&mut r, usize::MAX);
    let err = err.expect("the file held more when it was opened: an error");
    assert!(err.to_string().contains("cut shorter while lowtail read it"), "{err}");
    assert!(rest.len() < 100_000 - 10, "{}", rest.len());
}

/// A capture still being written is read to the end it has when the reading gets there.
#[test]
fn a_capture_that_grows_while_it_is_read_is_read_to_its_new_end() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("growing.pcap");
    let bytes = pcap_bytes(20_000);
    let half = 24 + 10_000 * (16 + 100);
    std::fs::write(&path, &bytes[..half]).unwrap();
    let mut r = open(&path, &OpenOptions::default()).unwrap();
    let (first, _, err) = drain(&mut r, 10);
    assert_eq!((first.len(), err.is_none()), (10, true));
    std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(&bytes[half..]).unwrap();
    let (rest, _, err) = drain(&mut r, usize::MAX);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(first.len() + rest.len(), 20_000);
}
