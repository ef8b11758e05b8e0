//! Memory-mapped AF_PACKET rings shared with the kernel.
//!
//! * `BlockRing` (TPACKET_V3, receive): the kernel packs frames into blocks and hands a
//!   block over when it is full or its timeout expires; one poll() wake-up then drains
//!   thousands of frames. The timestamper uses it: it must keep up at high rates and
//!   its latency to user space does not matter (stamps are taken in the kernel).
//! * `FrameRing` (TPACKET_V2, receive or transmit): one status word per frame, handed
//!   over frame by frame. The forwarder busy-polls it for low latency; the generator
//!   can transmit from it.
//!
//! Ownership of a block or frame moves through its status word: the side that reads
//! it with Acquire owns the memory until it writes it back with Release.

use std::io;
use std::mem::size_of;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::socket::PacketSocket;
use lowtail_program::Fatal;

/// Where a frame's timestamp came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stamp {
    /// The NIC's clock (SOF_TIMESTAMPING_RAW_HARDWARE).
    Hardware,
    /// The kernel's stamp on the packet when it entered (or left) the stack.
    Software,
    /// No stamp on the packet: the kernel read the clock while copying it to the ring.
    Ring,
}

/// A received frame, borrowed from the ring.
pub struct RxFrame<'a> {
    /// Receive time in nanoseconds since the epoch (`stamp` says whose clock).
    pub ts_ns: i64,
    /// Where the time came from.
    pub stamp: Stamp,
    /// The captured bytes.
    pub data: &'a [u8],
    /// The frame's length on the wire (`data` may be cut by the snap length).
    pub wire_len: u32,
    /// PACKET_HOST, PACKET_OUTGOING, ... from the frame's sockaddr_ll.
    pub pkttype: u8,
    /// An 802.1Q tag the driver took out of the frame into metadata (VLAN offload, which
    /// veth does): it must be put back to have the frame as it was on the wire.
    pub vlan_tag: Option<[u8; 4]>,
}

impl RxFrame<'_> {
    /// The frame's bytes and wire length as they were on the wire: `data` itself, or a
    /// copy in `scratch` with the offloaded VLAN tag put back after the MAC addresses.
    #[inline]
    pub fn on_the_wire<'s>(&'s self, scratch: &'s mut Vec<u8>) -> (&'s [u8], u32) {
        match self.vlan_tag {
            Some(tag) if self.data.len() >= 12 => {
                scratch.clear();
                scratch.extend_from_slice(&self.data[..12]);
                scratch.extend_from_slice(&tag);
                scratch.extend_from_slice(&self.data[12..]);
                (scratch, self.wire_len + 4)
            }
            _ => (self.data, self.wire_len),
        }
    }
}

fn vlan_tag(status: u32, tci: u16, tpid: u16) -> Option<[u8; 4]> {
    if status & libc::TP_STATUS_VLAN_VALID == 0 {
        return None;
    }
    let tpid = if status & libc::TP_STATUS_VLAN_TPID_VALID != 0 { tpid } else { 0x8100 };
    let [a, b] = tpid.to_be_bytes();
    let [c, d] = tci.to_be_bytes();
    Some([a, b, c, d])
}

fn stamp_of(status: u32) -> Stamp {
    if status & libc::TP_STATUS_TS_RAW_HARDWARE != 0 {
        Stamp::Hardware
    } else if status & libc::TP_STATUS_TS_SOFTWARE != 0 {
        Stamp::Software
    } else {
        Stamp::Ring
    }
}

const fn tpacket_align(x: usize) -> usize {
    (x + libc::TPACKET_ALIGNMENT - 1) & !(libc::TPACKET_ALIGNMENT - 1)
}

/// A shared mapping of a socket's ring(s).
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

impl Mapping {
    fn new(sock: &PacketSocket, len: usize) -> io::Result<Mapping> {
        // SAFETY: mapping the ring the kernel just allocated for this socket.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_LOCKED | libc::MAP_POPULATE,
                sock.raw(),
                0,
            )
        };
        let ptr = if ptr == libc::MAP_FAILED {
            // MAP_LOCKED can exceed RLIMIT_MEMLOCK for an unprivileged caller: retry unlocked.
            // SAFETY: as above.
            let ptr = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    sock.raw(),
                    0,
                )
            };
            if ptr == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            ptr
        } else {
            ptr
        };
        Ok(Mapping { ptr: NonNull::new(ptr as *mut u8).expect("mmap never returns null"), len })
    }

    #[inline(always)]
    fn at(&self, offset: usize) -> *mut u8 {
        debug_assert!(offset < self.len);
        // SAFETY: callers stay inside the mapping (offsets come from the ring geometry).
        unsafe { self.ptr.as_ptr().add(offset) }
    }

    /// The status word at `offset`, shared with the kernel.
    #[inline(always)]
    fn status(&self, offset: usize) -> &AtomicU32 {
        // SAFETY: status words are 4-byte aligned u32s inside the mapping; the kernel
        // and we only ever access them as whole words.
        unsafe { &*(self.at(offset) as *const AtomicU32) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping what `new` mapped.
        unsafe { libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, self.len) };
    }
}

// SAFETY: the mapping is plain shared memory; the rings synchronise through status words.
unsafe impl Send for Mapping {}

fn ring_error(sock: &PacketSocket, what: &str, e: io::Error) -> Fatal {
    match e.raw_os_error() {
        Some(libc::ENOMEM) => Fatal::failed(format!(
            "setting up the {what} ring on {}: not enough memory (use a smaller ring)",
            sock.iface
        )),
        _ => Fatal::os(format!("setting up the {what} ring on {}", sock.iface), e),
    }
}

/// A TPACKET_V3 receive ring.
pub struct BlockRing {
    map: Mapping,
    block_size: usize,
    block_nr: usize,
    next: usize,
}

impl BlockRing {
    /// Set up the ring on an unbound socket (bind afterwards so that no frame arrives
    /// before the ring exists). `retire_ms` bounds how long a partly filled block waits.
    pub fn new(sock: &PacketSocket, block_size: u32, block_nr: u32, retire_ms: u32) -> Result<BlockRing, Fatal> {
        let version = libc::tpacket_versions::TPACKET_V3 as libc::c_int;
        sock.set_packet_opt(libc::PACKET_VERSION, version).map_err(|e| ring_error(sock, "receive", e))?;
        let frame_size = 2048u32;
        let req = libc::tpacket_req3 {
            tp_block_size: block_size,
            tp_block_nr: block_nr,
            tp_frame_size: frame_size,
            tp_frame_nr: block_size / frame_size * block_nr,
            tp_retire_blk_tov: retire_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        sock.set(libc::SOL_PACKET, libc::PACKET_RX_RING, &req).map_err(|e| ring_error(sock, "receive", e))?;
        let map =
            Mapping::new(sock, block_size as usize * block_nr as usize).map_err(|e| ring_error(sock, "receive", e))?;
        Ok(BlockRing { map, block_size: block_size as usize, block_nr: block_nr as usize, next: 0 })
    }

    /// If the kernel has handed over the next block, show each of its frames to `visit`,
    /// give the block back, and return the number of frames; None if it is not ready.
    #[inline]
    pub fn drain_block(&mut self, mut visit: impl FnMut(&RxFrame)) -> Option<u32> {
        let block = self.next * self.block_size;
        // tpacket_block_desc: version, offset_to_priv, then tpacket_hdr_v1 whose first
        // three words are block_status, num_pkts, offset_to_first_pkt.
        let status = self.map.status(block + 8);
        if status.load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
            return None;
        }
        // SAFETY: the block is ours until we write its status back; the kernel laid
        // out `num_pkts` frames starting at `offset_to_first_pkt`, linked by
        // `tp_next_offset`, all inside the block.
        let n = unsafe {
            let num_pkts = *(self.map.at(block + 12) as *const u32);
            let mut at = block + *(self.map.at(block + 16) as *const u32) as usize;
            for _ in 0..num_pkts {
                let h = &*(self.map.at(at) as *const libc::tpacket3_hdr);
                let sll =
                    &*(self.map.at(at + tpacket_align(size_of::<libc::tpacket3_hdr>())) as *const libc::sockaddr_ll);
                let data = std::slice::from_raw_parts(self.map.at(at + h.tp_mac as usize), h.tp_snaplen as usize);
                visit(&RxFrame {
                    ts_ns: h.tp_sec as i64 * 1_000_000_000 + h.tp_nsec as i64,
                    stamp: stamp_of(h.tp_status),
                    data,
                    wire_len: h.tp_len,
                    pkttype: sll.sll_pkttype,
                    vlan_tag: vlan_tag(h.tp_status, h.hv1.tp_vlan_tci as u16, h.hv1.tp_vlan_tpid),
                });
                at += h.tp_next_offset as usize;
            }
            num_pkts
        };
        status.store(libc::TP_STATUS_KERNEL, Ordering::Release);
        self.next = (self.next + 1) % self.block_nr;
        Some(n)
    }
}

/// The state of a transmit slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxSlot {
    /// Free for a new frame.
    Free,
    /// The kernel still holds the frame queued in it.
    Busy,
    /// The kernel refused the frame queued in it (now free).
    Rejected,
}

/// A TPACKET_V2 ring of fixed-size frames, for receiving or transmitting.
pub struct FrameRing {
    map: Mapping,
    frame_size: usize,
    frame_nr: usize,
}

/// Blocks of 64 KiB hold a whole number of power-of-two frames, so frame `i` simply
/// starts at `i · frame_size`.
const V2_BLOCK: usize = 1 << 16;
/// Where a transmitted frame's data starts in its slot (no PACKET_TX_HAS_OFF).
const TX_DATA_OFFSET: usize = tpacket_align(size_of::<libc::tpacket2_hdr>());

impl FrameRing {
    /// The slot size for frames up to `max_frame` bytes (a power of two, at most 64 KiB).
    pub fn slot_size_for(max_frame: usize) -> usize {
        (max_frame + tpacket_align(size_of::<libc::tpacket2_hdr>()) + size_of::<libc::sockaddr_ll>() + 16)
            .next_power_of_two()
            .clamp(2048, V2_BLOCK)
    }

    /// A receive ring of `frame_nr` frames (rounded up to fill whole blocks).
    pub fn receive(sock: &PacketSocket, frame_size: usize, frame_nr: usize) -> Result<FrameRing, Fatal> {
        Self::new(sock, libc::PACKET_RX_RING, "receive", frame_size, frame_nr)
    }

    /// A transmit ring of `frame_nr` frames (rounded up to fill whole blocks).
    pub fn transmit(sock: &PacketSocket, frame_size: usize, frame_nr: usize) -> Result<FrameRing, Fatal> {
        Self::new(sock, libc::PACKET_TX_RING, "transmit", frame_size, frame_nr)
    }

    fn new(
        sock: &PacketSocket,
        which: libc::c_int,
        what: &str,
        frame_size: usize,
        frame_nr: usize,
    ) -> Result<FrameRing, Fatal> {
        assert!(frame_size.is_power_of_two() && frame_size <= V2_BLOCK);
        let version = libc::tpacket_versions::TPACKET_V2 as libc::c_int;
        sock.set_packet_opt(libc::PACKET_VERSION, version).map_err(|e| ring_error(sock, what, e))?;
        let per_block = V2_BLOCK / frame_size;
        let block_nr = frame_nr.div_ceil(per_block).max(1);
        let req = libc::tpacket_req {
            tp_block_size: V2_BLOCK as u32,
            tp_block_nr: block_nr as u32,
            tp_frame_size: frame_size as u32,
            tp_frame_nr: (block_nr * per_block) as u32,
        };
        sock.set(libc::SOL_PACKET, which, &req).map_err(|e| ring_error(sock, what, e))?;
        let map = Mapping::new(sock, V2_BLOCK * block_nr).map_err(|e| ring_error(sock, what, e))?;
        Ok(FrameRing { map, frame_size, frame_nr: block_nr * per_block })
    }

    /// Frames the ring holds.
    pub fn len(&self) -> usize {
        self.frame_nr
    }

    /// A ring without frames (never, once set up).
    pub fn is_empty(&self) -> bool {
        self.frame_nr == 0
    }

    /// Largest frame a transmit slot holds.
    pub fn tx_capacity(&self) -> usize {
        self.frame_size - TX_DATA_OFFSET
    }

    #[inline(always)]
    fn status(&self, i: usize) -> &AtomicU32 {
        self.map.status(i * self.frame_size)
    }

    #[inline(always)]
    fn header(&self, i: usize) -> *mut libc::tpacket2_hdr {
        self.map.at(i * self.frame_size) as *mut libc::tpacket2_hdr
    }

    /// The received frame in slot `i`, if the kernel has filled it (it stays ours until
    /// `release`).
    #[inline(always)]
    pub fn received(&self, i: usize) -> Option<RxFrame<'_>> {
        let status = self.status(i).load(Ordering::Acquire);
        if status & libc::TP_STATUS_USER == 0 {
            return None;
        }
        // SAFETY: the slot is ours (status USER); the kernel wrote a tpacket2_hdr, the
        // sockaddr_ll after it and `tp_snaplen` bytes of frame at `tp_mac`.
        unsafe {
            let h = &*self.header(i);
            let base = i * self.frame_size;
            let sll =
                &*(self.map.at(base + tpacket_align(size_of::<libc::tpacket2_hdr>())) as *const libc::sockaddr_ll);
            Some(RxFrame {
                ts_ns: h.tp_sec as i64 * 1_000_000_000 + h.tp_nsec as i64,
                stamp: stamp_of(status),
                data: std::slice::from_raw_parts(self.map.at(base + h.tp_mac as usize), h.tp_snaplen as usize),
                wire_len: h.tp_len,
                pkttype: sll.sll_pkttype,
                vlan_tag: vlan_tag(status, h.tp_vlan_tci, h.tp_vlan_tpid),
            })
        }
    }

    /// Give a received frame's slot back to the kernel.
    #[inline(always)]
    pub fn release(&self, i: usize) {
        self.status(i).store(libc::TP_STATUS_KERNEL, Ordering::Release);
    }

    /// Whether transmit slot `i` can take a new frame. A frame the kernel rejected as
    /// malformed is reported once, and its slot freed.
    #[inline(always)]
    pub fn tx_slot(&self, i: usize) -> TxSlot {
        let s = self.status(i).load(Ordering::Acquire);
        if s & libc::TP_STATUS_WRONG_FORMAT != 0 {
            self.status(i).store(libc::TP_STATUS_AVAILABLE, Ordering::Release);
            return TxSlot::Rejected;
        }
        if s == libc::TP_STATUS_AVAILABLE {
            TxSlot::Free
        } else {
            TxSlot::Busy
        }
    }

    /// Copy `frame` into free slot `i` and mark it for sending at the next kick.
    #[inline(always)]
    pub fn queue(&self, i: usize, frame: &[u8]) {
        assert!(frame.len() <= self.tx_capacity());
        // SAFETY: the slot is free (checked by the caller with `tx_slot`) and the copy
        // stays inside it.
        unsafe {
            let base = i * self.frame_size;
            std::ptr::copy_nonoverlapping(frame.as_ptr(), self.map.at(base + TX_DATA_OFFSET), frame.len());
            let h = &mut *self.header(i);
            h.tp_len = frame.len() as u32;
            h.tp_snaplen = frame.len() as u32;
        }
        self.status(i).store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
    }
}
