//! lowtail-fwd: a busy-polling userspace forwarder with synthetic work and batching.

use std::io::Write;
use std::mem::zeroed;
use std::path::PathBuf;

use clap::Parser;
use lowtail_stats::ExactHistogram;
use serde_json::json;

use lowtail_net::clock::{monotonic_ns, spin_until};
use lowtail_net::netns::IfaceRef;
use lowtail_net::ring::{FrameRing, RxFrame};
use lowtail_net::signal;
use lowtail_net::socket::PacketSocket;
use lowtail_net::summary::{fmt_ns, summarize};
use lowtail_program::flags::{Placement, StatsJson};
use lowtail_program::{say, Exit, Fatal};

/// Forward frames unchanged from one interface to another, busy-polling, with
/// synthetic per-packet work and batch release: a controllable stand-in for an IPS.
///
/// The forwarder busy-polls a TPACKET_V2 receive ring on --in. Each time it finds
/// frames waiting it takes up to --batch of them (as DPDK's rx_burst does), spends
/// --work-ns of busy CPU time per frame (spinning on the clock), and only then sends the
/// whole batch to --out with one sendmmsg: every frame of a batch waits until the whole
/// batch is processed, as the URLLC studies' DPDK Snort did. With --batch-timeout-us it
/// first waits, up to that long, for the batch to fill: at a low rate the first frame of a
/// batch then waits for the rest to arrive (the latency sawtooth of a batch size). When work outpaces arrivals the
/// ring (--rx-ring frames) fills and the kernel drops frames: overload as it happens.
///
/// By default it never sleeps (a core of its own, as DPDK has). With --spin-us it
/// busy-polls only that long after the last frame and then sleeps in poll() until the
/// next one: on a core shared with other tasks a forwarder that never sleeps is either
/// preempted for whole time slices (ordinary scheduling: frames wait milliseconds) or
/// starves the others until the kernel throttles it (real-time: tens of milliseconds).
///
/// Runs until SIGINT/SIGTERM, then writes its statistics: received, forwarded, dropped
/// (ring overflow, send errors, oversized frames), batch sizes, busy fraction. Prints
/// "ready" on stdout (and creates --ready-file) once forwarding.
///
/// LOWTAIL_TIME_LIMIT in the environment (a duration: 90s, 2m) stops it after that long
/// as SIGTERM would: lowtail sets it, so that a controller that hangs leaves no real-time
/// program spinning (one that dies stops it at once).
///
/// Scheduling: under --rt-priority ordinary tasks do not preempt it, and a busy-polling
/// forwarder then leaves everything else on its core only what the kernel lends (50 ms
/// per second): a timestamper sharing the core then needs a higher priority.
///
/// Exit codes: 0 stopped cleanly; 2 bad arguments or set-up (no such interface, not
/// root, bad core); 1 other failures.
#[derive(Parser, Debug)]
#[command(verbatim_doc_comment)]
struct Args {
    /// Interface frames arrive on: NAME or NAME@NETNS.
    #[arg(long = "in", value_name = "IF[@NETNS]")]
    input: IfaceRef,
    /// Interface frames leave on: NAME or NAME@NETNS.
    #[arg(long = "out", value_name = "IF[@NETNS]")]
    output: IfaceRef,
    /// Synthetic work per frame, in nanoseconds of busy CPU time.
    #[arg(long, default_value_t = 0, value_name = "NS")]
    work_ns: u64,
    /// Frames taken, processed and released together (at most).
    #[arg(long, default_value_t = 1, value_name = "B")]
    batch: usize,
    /// Wait up to this long after a batch's first frame for the batch to fill before
    /// working on it (a batcher with a fill timeout, as DPDK's l2fwd drains its TX buffer).
    /// Default: take what is waiting and never wait for more.
    #[arg(long, value_name = "US")]
    batch_timeout_us: Option<u64>,
    /// Receive ring size in frames (the forwarder's queue: where overload drops happen).
    #[arg(long, default_value_t = 4096, value_name = "FRAMES")]
    rx_ring: usize,
    #[command(flatten)]
    placement: Placement,
    /// Busy-poll this long after the last frame, then sleep in poll() until the next
    /// one (0: sleep at once). Default: never sleep.
    #[arg(long, value_name = "US")]
    spin_us: Option<u64>,
    /// Send with PACKET_QDISC_BYPASS (skips the qdisc and packet taps on --out).
    #[arg(long)]
    qdisc_bypass: bool,
    /// Create this file once forwarding (for orchestrators).
    #[arg(long, value_name = "FILE")]
    ready_file: Option<PathBuf>,
    #[command(flatten)]
    stats_json: StatsJson,
}

const PROGRAM: &str = "lowtail-fwd";

fn main() {
    lowtail_program::run(PROGRAM, run)
}

/// What the forwarder counted.
#[derive(Default)]
struct Counts {
    received: u64,
    forwarded: u64,
    send_errors: u64,
    oversized: u64,
    kernel_drops: u64,
    batches: u64,
    busy_ns: i64,
    /// Times the forwarder slept in poll() for want of frames (--spin-us).
    sleeps: u64,
    first_send_errno: Option<i32>,
}

/// Forward until SIGINT/SIGTERM: take what is waiting (up to a batch), work on it, send
/// it all, give the slots back.
fn forward(
    rx: &PacketSocket,
    ring: &FrameRing,
    sender: &mut Sender,
    args: &Args,
    batch_sizes: &mut ExactHistogram,
) -> Counts {
    let mut c = Counts::default();
    let mut head = 0usize;
    let mut idle_polls = 0u32;
    let work = args.work_ns as i64;
    let spin_ns = args.spin_us.map(|us| us as i64 * 1000);
    let batch_timeout_ns = args.batch_timeout_us.map(|us| us as i64 * 1000);
    let mut last_frame_ns = monotonic_ns();
    loop {
        // Take what is waiting, up to a batch.
        let mut taken = 0usize;
        let mut to_send = 0usize;
        take(ring, head, args.batch, sender, &mut taken, &mut to_send, &mut c.oversized);
        if taken > 0 && taken < args.batch {
            if let Some(timeout) = batch_timeout_ns {
                // Wait for the batch to fill, at most the timeout after its first frame.
                let deadline = monotonic_ns() + timeout;
                while taken < args.batch && monotonic_ns() < deadline && !signal::stop_requested() {
                    std::hint::spin_loop();
                    take(ring, head, args.batch, sender, &mut taken, &mut to_send, &mut c.oversized);
                }
            }
        }
        if taken == 0 {
            idle_polls = idle_polls.wrapping_add(1);
            if idle_polls & 0x3f == 0 {
                if signal::stop_requested() {
                    break;
                }
                if let Some(spin) = spin_ns {
                    let now = monotonic_ns();
                    if now - last_frame_ns >= spin {
                        wait_for_frames(rx);
                        c.sleeps += 1;
                        last_frame_ns = monotonic_ns();
                    }
                }
            }
            std::hint::spin_loop();
            continue;
        }
        let t0 = monotonic_ns();
        if work > 0 {
            spin_until(t0 + work * taken as i64);
        }
        let (sent, failed, errno) = sender.send(to_send);
        for i in 0..taken {
            ring.release((head + i) % ring.len());
        }
        head = (head + taken) % ring.len();
        c.received += taken as u64;
        c.forwarded += sent;
        c.send_errors += failed;
        if c.first_send_errno.is_none() {
            c.first_send_errno = errno;
        }
        c.batches += 1;
        batch_sizes.record(taken as i64);
        last_frame_ns = monotonic_ns();
        c.busy_ns += last_frame_ns - t0;
        if signal::stop_requested() {
            break;
        }
        if c.batches & 0xfff == 0 {
            // The kernel's counters are 32 bits wide: collect them now and then.
            if let Ok(s) = rx.take_stats() {
                c.kernel_drops += s.tp_drops as u64;
            }
        }
    }
    c
}

/// Take the frames waiting in the ring after the `taken` already taken, up to `batch`,
/// staging each for sending (an oversized one is taken but not sent).
fn take(
    ring: &FrameRing,
    head: usize,
    batch: usize,
    sender: &mut Sender,
    taken: &mut usize,
    to_send: &mut usize,
    oversized: &mut u64,
) {
    while *taken < batch {
        let slot = (head + *taken) % ring.len();
        let Some(frame) = ring.received(slot) else { break };
        *taken += 1;
        if (frame.data.len() as u32) < frame.wire_len {
            *oversized += 1;
            continue;
        }
        sender.stage(*to_send, &frame);
        *to_send += 1;
    }
}

/// Sleep until the receive ring has a frame for us (poll() checks the ring's head under
/// the socket's wait queue, so a frame arriving meanwhile is never missed), a signal, or
/// a timeout that lets the caller look at the stop flag.
fn wait_for_frames(rx: &PacketSocket) {
    let mut fd = libc::pollfd { fd: rx.raw(), events: libc::POLLIN | libc::POLLERR, revents: 0 };
    // SAFETY: polling our own descriptor; EINTR (a signal) just ends the wait early.
    unsafe { libc::poll(&mut fd, 1, 100) };
}

/// The outgoing side: one sendmmsg per batch.
struct Sender {
    sock: PacketSocket,
    bufs: Vec<Vec<u8>>,
    iovecs: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
}

impl Sender {
    fn new(sock: PacketSocket, batch: usize) -> Sender {
        Sender {
            sock,
            bufs: (0..batch).map(|_| Vec::with_capacity(2048)).collect(),
            iovecs: vec![libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; batch],
            // SAFETY: all-zero mmsghdrs are valid (no name, no control data).
            msgs: (0..batch).map(|_| unsafe { zeroed() }).collect(),
        }
    }

    /// Make message `i` the frame as it was on the wire: the ring slot itself (no copy),
    /// or a copy with the VLAN tag the driver offloaded put back.
    #[inline]
    fn stage(&mut self, i: usize, frame: &RxFrame) {
        let iov = &mut self.iovecs[i];
        if frame.vlan_tag.is_none() {
            iov.iov_base = frame.data.as_ptr() as *mut libc::c_void;
            iov.iov_len = frame.data.len();
        } else {
            let len = frame.on_the_wire(&mut self.bufs[i]).0.len();
            iov.iov_base = self.bufs[i].as_ptr() as *mut libc::c_void;
            iov.iov_len = len;
        }
    }

    /// Send the first `n` staged frames; returns (sent, failed, first errno).
    fn send(&mut self, n: usize) -> (u64, u64, Option<i32>) {
        for i in 0..n {
            self.msgs[i].msg_hdr.msg_iov = &mut self.iovecs[i];
            self.msgs[i].msg_hdr.msg_iovlen = 1;
        }
        let (mut done, mut sent, mut failed, mut errno) = (0usize, 0u64, 0u64, None);
        while done < n {
            // SAFETY: the headers point at iovecs describing frames in the ring or `bufs`,
            // all alive until the slots are released after this call.
            let rc = unsafe { libc::sendmmsg(self.sock.raw(), self.msgs[done..].as_mut_ptr(), (n - done) as u32, 0) };
            if rc < 0 {
                let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
                if e == libc::EINTR {
                    continue;
                }
                errno.get_or_insert(e);
                failed += 1;
                done += 1;
            } else {
                sent += rc as u64;
                done += rc as usize;
            }
        }
        (sent, failed, errno)
    }
}

/// The largest batch: one sendmmsg sends at most this many frames (the kernel's UIO_MAXIOV).
const MAX_BATCH: usize = 1024;

fn run(args: Args) -> Result<Exit, Fatal> {
    signal::install()?;
    if args.batch == 0 {
        return Err(Fatal::usage("--batch must be at least 1"));
    }
    if args.batch > MAX_BATCH {
        // a buffer per frame of the batch; one sendmmsg sends at most UIO_MAXIOV (1024)
        return Err(Fatal::usage(format!("--batch must be at most {MAX_BATCH}, not {}", args.batch)));
    }
    let rx = PacketSocket::open(&args.input)?;
    let tx = PacketSocket::open(&args.output)?;
    rx.set_packet_opt(libc::PACKET_IGNORE_OUTGOING, 1)
        .map_err(|e| Fatal::os(format!("ignoring outgoing frames on {}", args.input), e))?;
    let largest = rx.mtu as usize + 14 + 8;
    let ring = FrameRing::receive(&rx, FrameRing::slot_size_for(largest), args.rx_ring.max(args.batch))?;
    if args.qdisc_bypass {
        tx.set_packet_opt(libc::PACKET_QDISC_BYPASS, 1)
            .map_err(|e| Fatal::os(format!("enabling PACKET_QDISC_BYPASS on {}", args.output), e))?;
    }
    tx.grow_send_buffer(16 << 20);
    tx.bind_send_only()?;
    let mut sender = Sender::new(tx, args.batch);
    let scheduling = args.placement.apply(PROGRAM, None)?;
    rx.bind_all()?;
    if let Some(path) = &args.ready_file {
        std::fs::write(path, b"ready\n").map_err(|e| Fatal::create(path, e))?;
    }
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "ready");
        let _ = out.flush();
    }

    let started = monotonic_ns();
    let mut batch_sizes = ExactHistogram::new();
    let mut c = forward(&rx, &ring, &mut sender, &args, &mut batch_sizes);
    if let Ok(s) = rx.take_stats() {
        c.kernel_drops += s.tp_drops as u64;
    }
    let elapsed = monotonic_ns() - started;
    let dropped = c.kernel_drops + c.send_errors + c.oversized;
    let doc = json!({
        "program": "lowtail-fwd",
        "version": env!("CARGO_PKG_VERSION"),
        "in": args.input.to_string(),
        "out": args.output.to_string(),
        "work_ns": args.work_ns,
        "batch": args.batch,
        "batch_timeout_us": args.batch_timeout_us,
        "rx_ring_frames": ring.len(),
        "cpu": args.placement.cpu,
        "scheduling": scheduling.to_string(),
        "received": c.received,
        "forwarded": c.forwarded,
        "dropped": dropped,
        "drops": {"rx_ring": c.kernel_drops, "send_errors": c.send_errors, "oversized": c.oversized},
        "first_send_error": c.first_send_errno.map(|e| std::io::Error::from_raw_os_error(e).to_string()),
        "batches": c.batches,
        "spin_us": args.spin_us,
        "sleeps": c.sleeps,
        "batch_size": summarize(&mut batch_sizes),
        "busy_fraction": if elapsed > 0 { c.busy_ns as f64 / elapsed as f64 } else { 0.0 },
        "duration_ns": elapsed,
        "stopped_by": signal::received(),
    });
    args.stats_json.write(&doc)?;
    say!(
        "lowtail-fwd: received {}, forwarded {}, dropped {} ({} ring overflow, {} send errors) in {} batches over {}",
        c.received,
        c.forwarded,
        dropped,
        c.kernel_drops,
        c.send_errors,
        c.batches,
        fmt_ns(elapsed)
    );
    Ok(Exit::Ok)
}
