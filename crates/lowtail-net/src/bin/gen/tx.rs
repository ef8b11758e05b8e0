//! The generator's frames and the two ways it hands them to the kernel.
//!
//! * `copy`: send() for a single frame, sendmmsg() for a burst; the kernel copies the
//!   bytes into a fresh skb.
//! * `ring`: a TPACKET_V2 transmit ring; frames are written into shared slots before
//!   their due time and one send() kicks the kernel to transmit them.
//!
//! Both go through the interface's qdisc and packet taps unless `qdisc_bypass` is set;
//! bypassing also skips the taps, so a timestamper on the same interface would not see
//! the frames leave.

use std::io;
use std::mem::zeroed;

use lowtail_frame::{FlowSchedule, FrameTemplate, MatchShare};

use crate::pacing::BurstSink;
use lowtail_net::ring::{FrameRing, TxSlot};
use lowtail_net::socket::PacketSocket;
use lowtail_program::Fatal;

/// Frame number `k` of the run: the schedule's flow for `k`, sequence id `first_id + k`.
pub struct Frames {
    flows: Vec<FrameTemplate>,
    schedule: FlowSchedule,
    first_id: u64,
    match_share: Option<MatchShare>,
}

impl Frames {
    /// `flows` holds one template per flow (they differ in UDP source port), `schedule`
    /// says which one each frame is of; the frames `match_share` selects by id carry the
    /// match marker (the templates have room for it).
    pub fn new(
        flows: Vec<FrameTemplate>,
        schedule: FlowSchedule,
        first_id: u64,
        match_share: Option<MatchShare>,
    ) -> Frames {
        assert!(!flows.is_empty() && schedule.flows() as usize == flows.len());
        Frames { flows, schedule, first_id, match_share }
    }

    /// Bytes per frame.
    pub fn frame_len(&self) -> usize {
        self.flows[0].len()
    }

    /// Frame number `k` of the run (the schedule's flow, id first_id + k).
    #[inline(always)]
    pub fn frame(&mut self, k: u64) -> &[u8] {
        let flow = self.schedule.flow_of(k) as usize;
        let id = self.first_id.wrapping_add(k);
        if let Some(share) = self.match_share {
            self.flows[flow].set_marked(share.selects(id));
        }
        self.flows[flow].frame(id)
    }
}

/// How frames reach the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxMethod {
    /// send/sendmmsg: the kernel copies each frame.
    Copy,
    /// A TPACKET_V2 transmit ring.
    Ring,
}

impl TxMethod {
    /// "copy" or "ring", as `--tx` takes them.
    pub fn name(self) -> &'static str {
        match self {
            TxMethod::Copy => "copy",
            TxMethod::Ring => "ring",
        }
    }
}

/// Consecutive failed sends after which the interface is taken to be gone.
const GIVE_UP_AFTER: u64 = 10_000;

/// A packet socket the pacing loop sends through.
pub struct SocketSink {
    sock: PacketSocket,
    frames: Frames,
    kind: Kind,
    prepared: u32,
    errors: SendErrors,
}

/// Refused frames, and when to conclude the interface is gone.
#[derive(Default)]
struct SendErrors {
    total: u64,
    first_errno: Option<i32>,
    in_a_row: u64,
}

impl SendErrors {
    fn failed(&mut self, errno: i32, frames: u64, iface: &str) -> Result<(), Fatal> {
        self.total += frames;
        self.first_errno.get_or_insert(errno);
        self.in_a_row += frames;
        if self.in_a_row >= GIVE_UP_AFTER {
            return Err(Fatal::failed(format!(
                "sending on {iface} failed {} times in a row: {}",
                self.in_a_row,
                io::Error::from_raw_os_error(errno)
            )));
        }
        Ok(())
    }
}

enum Kind {
    Copy { bufs: Vec<Vec<u8>>, iovecs: Vec<libc::iovec>, msgs: Vec<libc::mmsghdr> },
    Ring { ring: FrameRing, head: usize, queued: Vec<usize> },
}

impl SocketSink {
    /// Set up sending on `sock` (unbound) for bursts of up to `burst` frames.
    pub fn new(
        sock: PacketSocket,
        frames: Frames,
        method: TxMethod,
        burst: u32,
        qdisc_bypass: bool,
    ) -> Result<SocketSink, Fatal> {
        if qdisc_bypass {
            sock.set_packet_opt(libc::PACKET_QDISC_BYPASS, 1)
                .map_err(|e| Fatal::os(format!("enabling PACKET_QDISC_BYPASS on {}", sock.iface), e))?;
        }
        sock.grow_send_buffer(16 << 20);
        let burst = burst as usize;
        let kind = match method {
            TxMethod::Copy => {
                let mut bufs: Vec<Vec<u8>> = (0..burst).map(|_| vec![0u8; frames.frame_len()]).collect();
                let iovecs: Vec<libc::iovec> = bufs
                    .iter_mut()
                    .map(|b| libc::iovec { iov_base: b.as_mut_ptr() as *mut libc::c_void, iov_len: b.len() })
                    .collect();
                let mut msgs: Vec<libc::mmsghdr> = (0..burst)
                    .map(|_| {
                        // SAFETY: an all-zero mmsghdr is valid (no name, no control data).
                        unsafe { zeroed() }
                    })
                    .collect();
                for (m, iov) in msgs.iter_mut().zip(iovecs.iter()) {
                    m.msg_hdr.msg_iov = iov as *const libc::iovec as *mut libc::iovec;
                    m.msg_hdr.msg_iovlen = 1;
                }
                Kind::Copy { bufs, iovecs, msgs }
            }
            TxMethod::Ring => {
                let slot = FrameRing::slot_size_for(frames.frame_len());
                let ring = FrameRing::transmit(&sock, slot, (burst * 4).max(256))?;
                Kind::Ring { ring, head: 0, queued: Vec::with_capacity(burst) }
            }
        };
        sock.bind_send_only()?;
        Ok(SocketSink { sock, frames, kind, prepared: 0, errors: SendErrors::default() })
    }

    /// How this sink sends.
    pub fn method(&self) -> TxMethod {
        match self.kind {
            Kind::Copy { .. } => TxMethod::Copy,
            Kind::Ring { .. } => TxMethod::Ring,
        }
    }

    /// Frames the kernel refused.
    pub fn send_errors(&self) -> u64 {
        self.errors.total
    }

    /// The first send error seen, for the report.
    pub fn first_error(&self) -> Option<String> {
        self.errors.first_errno.map(|e| io::Error::from_raw_os_error(e).to_string())
    }
}

impl BurstSink for SocketSink {
    #[inline]
    fn prepare(&mut self, first: u64, len: u32) {
        self.prepared = len;
        match &mut self.kind {
            Kind::Copy { bufs, iovecs, msgs } => {
                for i in 0..len as usize {
                    let f = self.frames.frame(first + i as u64);
                    bufs[i][..f.len()].copy_from_slice(f);
                    iovecs[i].iov_len = f.len();
                    msgs[i].msg_len = 0;
                }
            }
            Kind::Ring { ring, head, queued } => {
                queued.clear();
                for i in 0..len as u64 {
                    // The ring holds four bursts or more: a slot is normally long free
                    // when it comes round again; wait if the kernel still holds it.
                    loop {
                        match ring.tx_slot(*head) {
                            TxSlot::Free => break,
                            TxSlot::Busy => std::hint::spin_loop(),
                            TxSlot::Rejected => {
                                self.errors.total += 1;
                                break;
                            }
                        }
                    }
                    ring.queue(*head, self.frames.frame(first + i));
                    queued.push(*head);
                    *head = (*head + 1) % ring.len();
                }
            }
        }
    }

    #[inline]
    fn send(&mut self) -> Result<u32, Fatal> {
        let len = self.prepared as usize;
        let fd = self.sock.raw();
        let iface = &self.sock.iface.name;
        let errors = &mut self.errors;
        let mut accepted = 0u32;
        match &mut self.kind {
            Kind::Copy { bufs, iovecs, msgs } => {
                let mut done = 0usize;
                while done < len {
                    let n = if len - done == 1 {
                        // SAFETY: sending one prepared buffer.
                        let rc = unsafe {
                            libc::send(fd, bufs[done].as_ptr() as *const libc::c_void, iovecs[done].iov_len, 0)
                        };
                        if rc < 0 {
                            -1
                        } else {
                            1
                        }
                    } else {
                        // SAFETY: the headers point at prepared iovecs and buffers.
                        unsafe { libc::sendmmsg(fd, msgs[done..].as_mut_ptr(), (len - done) as u32, 0) }
                    };
                    if n < 0 {
                        let errno = io::Error::last_os_error().raw_os_error().unwrap_or(0);
                        if errno == libc::EINTR {
                            continue;
                        }
                        // The frame at `done` was refused; carry on with the rest.
                        done += 1;
                        errors.failed(errno, 1, iface)?;
                    } else {
                        done += n as usize;
                        accepted += n as u32;
                        errors.in_a_row = 0;
                    }
                }
            }
            Kind::Ring { ring: _, head: _, queued } => {
                // Kick without waiting for the frames to be freed (a blocking kick sleeps
                // until every skb is released, which may happen on another core much
                // later); slots are checked for reuse in `prepare`.
                loop {
                    // SAFETY: a zero-length send on a socket with a transmit ring.
                    let rc = unsafe { libc::send(fd, std::ptr::null(), 0, libc::MSG_DONTWAIT) };
                    if rc >= 0 {
                        accepted = queued.len() as u32;
                        errors.in_a_row = 0;
                        break;
                    }
                    let errno = io::Error::last_os_error().raw_os_error().unwrap_or(0);
                    // Out of socket buffer: the frames are still queued, kick again.
                    if errno == libc::EINTR || errno == libc::EAGAIN || errno == libc::ENOBUFS {
                        std::hint::spin_loop();
                        continue;
                    }
                    errors.failed(errno, queued.len() as u64, iface)?;
                    break;
                }
            }
        }
        Ok(accepted)
    }
}
