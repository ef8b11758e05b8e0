//! A regular file read through a sliding memory mapping instead of `read()`.
//!
//! Copying page-cache pages into a buffer was a third of each reader thread's time on a
//! large pair (measured: a 100-million-packet pair on this project's 2-core VM, 3.3 s with
//! `read()`, 2.9 s mapped, a tenth less CPU). The mapping slides over the file in
//! `CHUNK`-sized pieces, each unmapped once passed, so resident memory stays bounded
//! however large the file is. Each piece is mapped whole at once (`MAP_POPULATE`: one call
//! instead of a page fault per 64 KiB, a tenth less time on that pair) while the kernel is
//! asked to read the next piece ahead, so a file not in the page cache is still read from
//! the disk while the previous piece is decoded.
//!
//! A mapped file that another process truncates while it is read would kill the process
//! with SIGBUS on the next access past the new end. A handler, installed once, catches
//! SIGBUS at addresses inside a live mapping of this module (each is registered between
//! its `mmap` and `munmap`), maps zero pages over the rest of that mapping so that the
//! access can complete, and marks the mapping: its window then reports the file as
//! changed while it was read, an error, never a crash. Faults anywhere else go to the
//! handler that was there before (or the default action).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Once};

use crate::stream::Progress;

/// How much of the file is mapped at a time.
const CHUNK: usize = 64 << 20;
const PAGE: u64 = 4096;

/// What a window reports after another process cut its file short mid-read.
#[derive(Debug, thiserror::Error)]
#[error("the file was cut shorter while lowtail read it (it held {opened} bytes when opened): analyse a copy that nothing writes to")]
pub(crate) struct FileShrank {
    opened: u64,
}

/// A regular file read through a moving mapping.
pub(crate) struct MappedFile {
    file: File,
    /// The file's size as last seen (it is looked at again when the reading reaches it: a
    /// capture still being written goes on, as `read()` would).
    size: u64,
    opened_size: u64,
    map: *mut u8,
    map_offset: u64,
    map_len: usize,
    /// File offset of the current position.
    pos: u64,
    /// Set by the SIGBUS handler when the file was cut short under the mapping.
    shrank: Arc<AtomicBool>,
    guard: Option<Guard>,
    progress: Option<Progress>,
}

// SAFETY: the mapping is owned by this value alone; the raw pointer is only read through
// `bytes()`, which borrows `self`.
unsafe impl Send for MappedFile {}

impl MappedFile {
    /// Map a regular file; `None` where it cannot be (the caller reads it instead).
    pub(crate) fn open(file: File, progress: Option<Progress>) -> Option<MappedFile> {
        let size = file.metadata().ok()?.len();
        let mut m = MappedFile {
            file,
            size,
            opened_size: size,
            map: std::ptr::null_mut(),
            map_offset: 0,
            map_len: 0,
            pos: 0,
            shrank: Arc::default(),
            guard: None,
            progress,
        };
        m.remap(0).ok()?;
        Some(m)
    }

    /// Bytes mapped from the current position on.
    #[inline]
    fn available(&self) -> usize {
        (self.map_offset + self.map_len as u64).saturating_sub(self.pos) as usize
    }

    /// At least `need` bytes from the current position, or all that is left: how many.
    pub(crate) fn ensure(&mut self, need: usize) -> io::Result<usize> {
        self.check()?;
        if self.available() < need {
            if self.map_offset + self.map_len as u64 >= self.size {
                // At the end as last seen: the file may have grown since.
                self.size = self.file.metadata()?.len().max(self.size);
            }
            if self.map_offset + (self.map_len as u64) < self.size {
                self.remap(need)?;
            }
        }
        Ok(self.available())
    }

    /// The mapped bytes from the current position (as many as the last `ensure` made ready).
    #[inline]
    pub(crate) fn bytes(&self) -> &[u8] {
        if self.map.is_null() {
            return &[];
        }
        // SAFETY: [map, map + map_len) is mapped readable while `self` lives, and the
        // position lies inside it (or at its end).
        unsafe { std::slice::from_raw_parts(self.map.add((self.pos - self.map_offset) as usize), self.available()) }
    }

    #[inline]
    pub(crate) fn advance(&mut self, n: usize) {
        self.pos += n as u64;
        if let Some(p) = &self.progress {
            p.0.store(self.pos, Ordering::Relaxed);
        }
    }

    /// Whether another process cut the file short under the mapping.
    pub(crate) fn check(&self) -> io::Result<()> {
        if self.shrank.load(Ordering::Acquire) {
            return Err(io::Error::other(FileShrank { opened: self.opened_size }));
        }
        Ok(())
    }

    /// Map from the page holding the current position, `CHUNK` bytes or `need` more.
    fn remap(&mut self, need: usize) -> io::Result<()> {
        self.unmap();
        let offset = self.pos / PAGE * PAGE;
        let want = ((self.pos - offset) as usize + need).max(CHUNK) as u64;
        let len = want.min(self.size - offset) as usize;
        if len == 0 {
            self.map_offset = offset;
            return Ok(());
        }
        // SAFETY: a fresh read-only private mapping of this file, no address hint; failure
        // is checked.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_POPULATE,
                self.file.as_raw_fd(),
                offset as libc::off_t,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let next = offset + len as u64;
        if next < self.size {
            // Advice only (read-ahead of the next piece); its failure changes nothing.
            // SAFETY: a plain system call on this file's descriptor.
            unsafe {
                libc::posix_fadvise(
                    self.file.as_raw_fd(),
                    next as libc::off_t,
                    CHUNK as libc::off_t,
                    libc::POSIX_FADV_WILLNEED,
                )
            };
        }
        self.map = map as *mut u8;
        self.map_offset = offset;
        self.map_len = len;
        self.guard = None; // its slot is free again before the new mapping takes one
        self.guard = Guard::register(map as usize, len, &self.shrank);
        Ok(())
    }

    fn unmap(&mut self) {
        if self.map.is_null() {
            return;
        }
        // Out of the registry before the pages go: a registered range is always mapped.
        if let Some(g) = &self.guard {
            g.release();
        }
        // SAFETY: the mapping this value made, with its length, unmapped once.
        unsafe { libc::munmap(self.map as *mut libc::c_void, self.map_len) };
        self.map = std::ptr::null_mut();
        self.map_len = 0;
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        self.unmap();
    }
}

// -- the SIGBUS guard --------------------------------------------------------------------------

/// Live mappings the handler may repair. A slot is free while its start is 0.
const SLOTS: usize = 64;

struct Slot {
    start: AtomicUsize,
    end: AtomicUsize,
    /// The `AtomicBool` (inside an `Arc` its mapping holds) to set on a fault.
    shrank: AtomicUsize,
}

#[allow(clippy::declare_interior_mutable_const)] // the initialiser of the array below, copied per slot
const FREE: Slot = Slot { start: AtomicUsize::new(0), end: AtomicUsize::new(0), shrank: AtomicUsize::new(0) };
static REGISTRY: [Slot; SLOTS] = [FREE; SLOTS];
/// Slots being filled in (claimed by their owner, not yet published by `start`).
static CLAIMED: [AtomicBool; SLOTS] = [const { AtomicBool::new(false) }; SLOTS];

/// A mapping's place in the registry.
struct Guard {
    slot: usize,
    /// Keeps the flag the slot points at alive while the slot is registered.
    _shrank: Arc<AtomicBool>,
}

impl Guard {
    /// Register [start, start + len); `None` when every slot is taken (the mapping then
    /// has no guard: its reading works, a truncation under it is not caught).
    fn register(start: usize, len: usize, shrank: &Arc<AtomicBool>) -> Option<Guard> {
        install_handler();
        let slot = CLAIMED
            .iter()
            .position(|c| c.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).is_ok())?;
        let s = &REGISTRY[slot];
        s.shrank.store(Arc::as_ptr(shrank) as usize, Ordering::Relaxed);
        s.end.store(start + len, Ordering::Relaxed);
        s.start.store(start, Ordering::Release); // published last
        Some(Guard { slot, _shrank: shrank.clone() })
    }

    fn release(&self) {
        REGISTRY[self.slot].start.store(0, Ordering::Release);
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.release();
        CLAIMED[self.slot].store(false, Ordering::Release);
    }
}

/// The handler that was installed before ours.
static mut PREVIOUS: std::mem::MaybeUninit<libc::sigaction> = std::mem::MaybeUninit::uninit();
static INSTALL: Once = Once::new();

fn install_handler() {
    INSTALL.call_once(|| {
        // SAFETY: sigaction with a zeroed, then filled struct; PREVIOUS is written here once,
        // before the handler that reads it can run.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_sigbus as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_NODEFER;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(libc::SIGBUS, &action, std::ptr::addr_of_mut!(PREVIOUS) as *mut libc::sigaction);
        }
    });
}

/// Async-signal-safe: atomics, `mmap` and `sigaction` only.
extern "C" fn on_sigbus(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    for s in &REGISTRY {
        let start = s.start.load(Ordering::Acquire);
        if start == 0 || addr < start || addr >= s.end.load(Ordering::Relaxed) {
            continue;
        }
        let page = addr & !(PAGE as usize - 1);
        let end = s.end.load(Ordering::Relaxed);
        // SAFETY: zero pages over the rest of one of our live mappings (registered ranges
        // are always mapped, and only their reading thread can fault in them); the access
        // that faulted then reads zeros and the reader is told by the flag.
        let mapped = unsafe {
            libc::mmap(
                page as *mut libc::c_void,
                end - page,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if mapped != libc::MAP_FAILED {
            // SAFETY: the flag outlives the registration (its Arc is held by the mapping).
            unsafe { (*(s.shrank.load(Ordering::Relaxed) as *const AtomicBool)).store(true, Ordering::Release) };
            return;
        }
    }
    // Not ours: what was there before ours decides.
    // SAFETY: PREVIOUS was filled before this handler was installed.
    unsafe {
        let previous = &*std::ptr::addr_of!(PREVIOUS).cast::<libc::sigaction>();
        match previous.sa_sigaction {
            libc::SIG_DFL | libc::SIG_IGN => {
                // Restore the default and return: the access faults again and the process
                // ends as it would have without lowtail.
                libc::sigaction(libc::SIGBUS, previous, std::ptr::null_mut());
            }
            handler if previous.sa_flags & libc::SA_SIGINFO != 0 => {
                let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    std::mem::transmute(handler);
                f(signal, info, context);
            }
            handler => {
                let f: extern "C" fn(libc::c_int) = std::mem::transmute(handler);
                f(signal);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_of(len: usize) -> (tempfile::NamedTempFile, Vec<u8>) {
        let data: Vec<u8> = (0..len).map(|i| (i * 13 + i / 4093) as u8).collect();
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(&data).unwrap();
        (f, data)
    }

    #[test]
    fn the_mapping_slides_over_a_file_larger_than_a_chunk() {
        let (f, data) = file_of(CHUNK * 2 + 12_345);
        let mut m = MappedFile::open(File::open(f.path()).unwrap(), None).unwrap();
        let mut at = 0;
        while at < data.len() {
            let want = 1 + (at * 7919) % 3_000_000;
            let have = m.ensure(want).unwrap();
            assert_eq!(have.min(want), want.min(data.len() - at));
            assert_eq!(m.bytes(), &data[at..at + have]);
            let step = have.min(1 + (at * 104_729) % 5_000_000);
            m.advance(step);
            at += step;
        }
        assert_eq!(m.ensure(1).unwrap(), 0);
    }

    #[test]
    fn a_file_that_grows_is_read_to_its_new_end() {
        let (mut f, mut data) = file_of(10_000);
        let mut m = MappedFile::open(File::open(f.path()).unwrap(), None).unwrap();
        assert_eq!(m.ensure(10_000).unwrap(), 10_000);
        m.advance(10_000);
        let more = vec![7u8; 5_000];
        f.write_all(&more).unwrap();
        data.extend(&more);
        assert_eq!(m.ensure(1).unwrap(), 5_000);
        assert_eq!(m.bytes(), &data[10_000..]);
    }

    /// A file cut short under the mapping: the reader gets an error where the process
    /// would have died of SIGBUS.
    #[test]
    fn a_file_truncated_while_mapped_is_an_error_not_a_crash() {
        let (f, _) = file_of(1 << 20);
        let mut m = MappedFile::open(File::open(f.path()).unwrap(), None).unwrap();
        assert_eq!(m.ensure(1 << 20).unwrap(), 1 << 20);
        f.as_file().set_len(4096).unwrap();
        // Touch every page past the new end, as a parser would: zeros, not a crash.
        let touched: u64 = m.bytes().iter().step_by(4096).map(|b| std::hint::black_box(*b) as u64).sum();
        std::hint::black_box(touched);
        let err = m.ensure(1).unwrap_err();
        assert!(err.to_string().contains("cut shorter while lowtail read it"), "{err}");
    }
}
