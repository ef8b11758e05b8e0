//! lowtail-cap: the timestamper.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Parser, ValueEnum};
use serde_json::json;

use lowtail_frame::IdSpec;
use lowtail_net::clock::monotonic_ns;
use lowtail_net::counters::{dev_counters, softnet_dropped, DevCounters};
use lowtail_net::netns::IfaceRef;
use lowtail_net::ring::{BlockRing, RxFrame, Stamp};
use lowtail_net::signal;
use lowtail_net::socket::PacketSocket;
use lowtail_program::args::parse_duration;
use lowtail_program::flags::{LiveJson, Placement, StatsJson};
use lowtail_program::output::JsonLines;
use lowtail_program::{say, Exit, Fatal};

mod matcher;
mod pcapout;
mod tstamp;

use matcher::LiveMatcher;
use pcapout::CaptureFile;
use tstamp::{enable_hardware_rx, ts_info, HwStamping};

/// Capture frames on one or more interfaces with nanosecond timestamps, into pcap files.
///
/// Give --iface and --out once per interface, in matching order. On the generator's
/// interface it sees the frames leave (outgoing, stamped as they pass the packet tap);
/// on the return interface it sees them come back. Frames go to a memory-mapped
/// TPACKET_V3 ring per interface and are written as nanosecond pcap (zstd-compressed
/// with --zstd) by a writer thread per file.
///
/// Timestamps: hardware (the NIC's clock) where the driver stamps every received frame
/// and --timestamps is auto or hardware; kernel software stamps (CLOCK_REALTIME)
/// otherwise. Outgoing frames always carry software stamps. The statistics record which
/// source every frame had.
///
/// Runs until SIGINT/SIGTERM (or --duration, or LOWTAIL_TIME_LIMIT in the environment: a
/// duration lowtail sets so that a controller that hangs leaves nothing spinning), then
/// drains the rings, flushes the files and writes the statistics, including the kernel's
/// drop counters: a capture with drops is incomplete. Prints "ready" on stdout (and
/// creates --ready-file) once every interface is being captured.
///
/// With --live-json FILE and two interfaces (the first where frames enter the device,
/// the second where they leave), it matches lowtail's frames by id as it writes them and
/// appends one JSON line a second to FILE: frames so far on each side, matched, lost
/// (no copy after --live-horizon), and the running p99 and maximum latency (an HDR
/// histogram's, three significant digits; `lowtail analyze` gives the exact figures).
///
/// Scheduling: --rt-priority lets it drain its rings as soon as the kernel hands a block
/// over; it needs one above the other's when a busy-polling real-time program shares its
/// core.
///
/// Exit codes: 0 complete; 3 finished but frames were dropped; 2 bad arguments or
/// set-up (no such interface, not root, hardware timestamps unavailable); 1 other
/// failures (disk full, ...).
#[derive(Parser, Debug)]
#[command(verbatim_doc_comment)]
struct Args {
    /// Interface to capture on (repeat for several): NAME or NAME@NETNS.
    #[arg(long, value_name = "IF[@NETNS]", required = true)]
    iface: Vec<IfaceRef>,
    /// Output pcap file for the interface in the same position (repeat as often as --iface).
    #[arg(long, value_name = "FILE.pcap", required = true)]
    out: Vec<PathBuf>,
    #[command(flatten)]
    placement: Placement,
    /// Bytes kept of each frame (the id of lowtail's frames is within the first 50).
    #[arg(long, default_value_t = 128, value_name = "BYTES")]
    snaplen: u32,
    /// Timestamp source: hardware if the NIC can (auto), insist on it (hardware), or
    /// the kernel's software stamps (software).
    #[arg(long, value_enum, default_value_t = TsMode::Auto)]
    timestamps: TsMode,
    /// Which frames to keep: both directions, only received (in) or only sent (out).
    #[arg(long, value_enum, default_value_t = Direction::Both)]
    direction: Direction,
    /// Compress the output with zstd (name the files .pcap.zst).
    #[arg(long)]
    zstd: bool,
    /// Stop after this long: 10, 2.5s, 500ms.
    #[arg(long, value_name = "SECS", value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Receive ring size per interface, in MiB (64 MiB holds ~0.4 s at 1 Mpps of 64 B frames).
    #[arg(long, default_value_t = 64, value_name = "MIB")]
    ring_mb: u32,
    /// Create this file once capturing (for orchestrators).
    #[arg(long, value_name = "FILE")]
    ready_file: Option<PathBuf>,
    #[command(flatten)]
    stats_json: StatsJson,
    #[command(flatten)]
    live_json: LiveJson,
    /// Only frames to this UDP port carry ids (for --live-json).
    #[arg(long, value_name = "PORT")]
    live_udp_port: Option<u16>,
    /// A frame with no copy on the second interface this long after the first counts
    /// as lost in the running figures.
    #[arg(long, default_value = "1s", value_parser = parse_duration, value_name = "SECS")]
    live_horizon: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TsMode {
    Auto,
    Hardware,
    Software,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Direction {
    Both,
    In,
    Out,
}

/// Ring blocks: 256 KiB hold ~1800 minimum-size frames; a partly filled block is handed
/// over after `RETIRE_MS`, which bounds how stale the last frames can be at the end.
const BLOCK_SIZE: u32 = 256 << 10;
const RETIRE_MS: u32 = 8;

/// What one interface's capture has seen.
#[derive(Default)]
struct Tally {
    frames: u64,
    bytes: u64,
    hardware: u64,
    software: u64,
    ring: u64,
    other_direction: u64,
    first_ts_ns: Option<i64>,
    last_ts_ns: Option<i64>,
    write_failed: bool,
}

struct Side {
    iface: IfaceRef,
    out: PathBuf,
    sock: PacketSocket,
    ring: BlockRing,
    file: Option<CaptureFile>,
    /// Room to put back VLAN tags the driver offloaded.
    scratch: Vec<u8>,
    keep_outgoing_only: bool,
    tally: Tally,
    hardware_supported: bool,
    phc_index: Option<i32>,
    source: &'static str,
    kernel_packets: u64,
    kernel_drops: u64,
    kernel_freezes: u64,
    counters_before: Option<DevCounters>,
    _hw: Option<HwStamping>,
}

impl Tally {
    #[inline]
    fn record(&mut self, file: &mut Option<CaptureFile>, scratch: &mut Vec<u8>, f: &RxFrame, keep_outgoing_only: bool) {
        if keep_outgoing_only && f.pkttype != libc::PACKET_OUTGOING {
            self.other_direction += 1;
            return;
        }
        match f.stamp {
            Stamp::Hardware => self.hardware += 1,
            Stamp::Software => self.software += 1,
            Stamp::Ring => self.ring += 1,
        }
        let (data, wire_len) = f.on_the_wire(scratch);
        self.frames += 1;
        self.bytes += wire_len as u64;
        self.first_ts_ns.get_or_insert(f.ts_ns);
        self.last_ts_ns = Some(f.ts_ns);
        if let Some(out) = file {
            if out.write(f.ts_ns, data, wire_len).is_err() {
                self.write_failed = true;
            }
        }
    }
}

impl Side {
    fn open(iface: &IfaceRef, out: &Path, args: &Args) -> Result<Side, Fatal> {
        let sock = PacketSocket::open(iface)?;
        let info = ts_info(&sock);
        let hardware_supported = info.is_some_and(|i| i.hardware_rx());
        let mut hw = None;
        if args.timestamps == TsMode::Hardware && !hardware_supported {
            return Err(Fatal::usage(format!(
                "{iface} cannot stamp received frames in hardware (its driver does not offer \
                 HWTSTAMP_FILTER_ALL): use --timestamps software or auto"
            )));
        }
        if args.timestamps != TsMode::Software && hardware_supported {
            match enable_hardware_rx(&sock) {
                Ok(guard) => hw = Some(guard),
                Err(e) if args.timestamps == TsMode::Hardware => {
                    return Err(Fatal::os(format!("switching on hardware timestamps on {iface}"), e))
                }
                Err(_) => {}
            }
        }
        // Software stamps: SO_TIMESTAMPNS makes the kernel stamp packets as they enter
        // the stack (and as they pass the tap on the way out), earlier than the ring copy.
        let on: libc::c_int = 1;
        sock.set(libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, &on)
            .map_err(|e| Fatal::os(format!("enabling timestamps on {iface}"), e))?;
        let mut flags = libc::SOF_TIMESTAMPING_SOFTWARE;
        if hw.is_some() {
            flags |= libc::SOF_TIMESTAMPING_RAW_HARDWARE;
        }
        sock.set_packet_opt(libc::PACKET_TIMESTAMP, flags as libc::c_int)
            .map_err(|e| Fatal::os(format!("choosing the timestamp source on {iface}"), e))?;
        sock.set_snaplen(args.snaplen).map_err(|e| Fatal::os(format!("setting the snap length on {iface}"), e))?;
        if args.direction == Direction::In {
            sock.set_packet_opt(libc::PACKET_IGNORE_OUTGOING, 1)
                .map_err(|e| Fatal::os(format!("ignoring outgoing frames on {iface}"), e))?;
        }
        let block_nr = (args.ring_mb.max(1) as u64 * (1 << 20) / BLOCK_SIZE as u64).max(4) as u32;
        let ring = BlockRing::new(&sock, BLOCK_SIZE, block_nr, RETIRE_MS)?;
        let file = CaptureFile::create(out, args.snaplen, args.zstd)?;
        Ok(Side {
            iface: iface.clone(),
            out: out.to_path_buf(),
            sock,
            ring,
            file: Some(file),
            scratch: Vec::with_capacity(2048),
            keep_outgoing_only: args.direction == Direction::Out,
            tally: Tally::default(),
            hardware_supported,
            phc_index: info.map(|i| i.phc_index).filter(|&i| i >= 0),
            source: if hw.is_some() { "hardware" } else { "software" },
            kernel_packets: 0,
            kernel_drops: 0,
            kernel_freezes: 0,
            counters_before: None,
            _hw: hw,
        })
    }

    /// Drain every block the kernel has handed over, showing each frame to `live` as
    /// captured on `side`; returns whether there were any.
    fn drain(&mut self, mut live: Option<(&mut LiveMatcher, matcher::Side)>) -> bool {
        let mut any = false;
        let (tally, file, scratch, only_out) =
            (&mut self.tally, &mut self.file, &mut self.scratch, self.keep_outgoing_only);
        while self
            .ring
            .drain_block(|f| {
                tally.record(file, scratch, f, only_out);
                if let Some((matcher, side)) = live.as_mut() {
                    matcher.frame(*side, f.data, f.wire_len, f.ts_ns);
                }
            })
            .is_some()
        {
            any = true;
        }
        any
    }

    fn read_kernel_stats(&mut self) {
        if let Ok(s) = self.sock.take_stats() {
            self.kernel_packets += s.tp_packets as u64;
            self.kernel_drops += s.tp_drops as u64;
            self.kernel_freezes += s.tp_freeze_q_cnt as u64;
        }
    }

    /// Close the file and describe what this side captured (and why writing failed).
    fn finish(&mut self) -> (serde_json::Value, Option<Fatal>) {
        let (file_bytes, error) = match self.file.take().map(CaptureFile::finish) {
            Some(Ok(bytes)) => (Some(bytes), None),
            Some(Err(e)) => (None, Some(e)),
            None => (None, None),
        };
        let counters = match (dev_counters(&self.iface), self.counters_before) {
            (Some(after), Some(before)) => Some(after.since(&before)),
            _ => None,
        };
        let t = &self.tally;
        let report = json!({
            "iface": self.iface.name,
            "netns": self.iface.netns,
            "out": self.out,
            "file_bytes": file_bytes,
            "timestamp_source": self.observed_source(),
            "hardware_timestamps_supported": self.hardware_supported,
            "phc_index": self.phc_index,
            "frames": t.frames,
            "bytes": t.bytes,
            "frames_by_timestamp": {"hardware": t.hardware, "software": t.software, "ring": t.ring},
            "skipped_other_direction": t.other_direction,
            "drops": self.kernel_drops,
            "kernel": {"packets": self.kernel_packets, "drops": self.kernel_drops, "ring_freezes": self.kernel_freezes},
            "iface_counters": counters,
            "first_ts_ns": t.first_ts_ns,
            "last_ts_ns": t.last_ts_ns,
        });
        (report, error)
    }

    /// The source the frames actually had: one name if all agree, else "mixed".
    fn observed_source(&self) -> &'static str {
        let t = &self.tally;
        match (t.hardware > 0, t.software + t.ring > 0) {
            (true, true) => "mixed",
            (true, false) => "hardware",
            (false, true) => "software",
            (false, false) => self.source,
        }
    }
}

const PROGRAM: &str = "lowtail-cap";

fn main() {
    lowtail_program::run(PROGRAM, run)
}

fn run(args: Args) -> Result<Exit, Fatal> {
    signal::install()?;
    if args.iface.len() != args.out.len() {
        return Err(Fatal::usage(format!(
            "give one --out per --iface ({} interfaces, {} outputs)",
            args.iface.len(),
            args.out.len()
        )));
    }
    if args.snaplen < 64 {
        return Err(Fatal::usage("--snaplen must be at least 64 bytes"));
    }
    if args.live_json.path().is_some() && args.iface.len() != 2 {
        return Err(Fatal::usage(format!(
            "--live-json needs exactly two interfaces (where frames enter the device, then where they leave), not {}",
            args.iface.len()
        )));
    }
    let mut live = args.live_json.create()?.map(|out| {
        let spec = IdSpec { udp_dst_port: args.live_udp_port, ..IdSpec::default() };
        Live { matcher: LiveMatcher::new(spec, args.live_horizon.as_nanos() as i64), out }
    });
    let mut sides = Vec::new();
    for (iface, out) in args.iface.iter().zip(&args.out) {
        sides.push(Side::open(iface, out, &args)?);
    }
    let scheduling = args.placement.apply(PROGRAM, None)?;
    let softnet_before = softnet_dropped();
    for side in &mut sides {
        side.counters_before = dev_counters(&side.iface);
        side.sock.bind_all()?;
    }
    let started = monotonic_ns();
    announce_ready(&args)?;

    let deadline = args.duration.map(|d| started + d.as_nanos() as i64);
    let stopped_by = capture_until_stopped(&mut sides, deadline, live.as_mut(), started);
    let elapsed = monotonic_ns() - started;
    let softnet = match (softnet_dropped(), softnet_before) {
        (Some(a), Some(b)) => Some(a.wrapping_sub(b)),
        _ => None,
    };

    let mut failure = None;
    let mut reports = Vec::new();
    for side in &mut sides {
        let (report, error) = side.finish();
        reports.push(report);
        if let Some(e) = error {
            failure.get_or_insert(e);
        }
    }
    let drops: u64 = sides.iter().map(|s| s.kernel_drops).sum();
    let frames: u64 = sides.iter().map(|s| s.tally.frames).sum();
    let doc = json!({
        "program": "lowtail-cap",
        "version": env!("CARGO_PKG_VERSION"),
        "interfaces": reports,
        "frames": frames,
        "drops": drops,
        "complete": drops == 0 && failure.is_none(),
        "host_backlog_drops": softnet,
        "snaplen": args.snaplen,
        "timestamps_requested": format!("{:?}", args.timestamps).to_lowercase(),
        "cpu": args.placement.cpu,
        "scheduling": scheduling.to_string(),
        "duration_ns": elapsed,
        "stopped_by": stopped_by,
    });
    args.stats_json.write(&doc)?;
    let per_side: Vec<String> = sides
        .iter()
        .map(|s| format!("{} {} frames ({}, {} dropped)", s.iface, s.tally.frames, s.observed_source(), s.kernel_drops))
        .collect();
    say!("lowtail-cap: {}", per_side.join("; "));
    if let Some(e) = failure {
        return Err(e);
    }
    if drops > 0 {
        say!("lowtail-cap: the kernel dropped {drops} frames: the capture is incomplete (use a bigger --ring-mb or a dedicated --cpu)");
        return Ok(Exit::Degraded);
    }
    Ok(Exit::Ok)
}

/// The running figures of --live-json: the matcher and the file of its lines.
struct Live {
    matcher: LiveMatcher,
    out: JsonLines,
}

/// Drain every side's ring (the first is PRE, the second POST for the live matcher).
fn drain_all(sides: &mut [Side], mut live: Option<&mut Live>) -> bool {
    let mut any = false;
    for (i, side) in sides.iter_mut().enumerate() {
        let role = if i == 0 { matcher::Side::Pre } else { matcher::Side::Post };
        any |= side.drain(live.as_deref_mut().map(|l| (&mut l.matcher, role)));
    }
    any
}

/// Poll and drain the rings until a signal, the deadline or a write error; then drain
/// what the kernel still hands over. Returns what stopped the capture.
fn capture_until_stopped(
    sides: &mut [Side],
    deadline: Option<i64>,
    mut live: Option<&mut Live>,
    started: i64,
) -> &'static str {
    let mut pollfds: Vec<libc::pollfd> = sides
        .iter()
        .map(|s| libc::pollfd { fd: s.sock.raw(), events: libc::POLLIN | libc::POLLERR, revents: 0 })
        .collect();
    let mut next_stats = monotonic_ns() + 1_000_000_000;
    let stopped_by = loop {
        let any = drain_all(sides, live.as_deref_mut());
        if sides.iter().any(|s| s.tally.write_failed) {
            sides.iter_mut().for_each(Side::read_kernel_stats);
            return "write error";
        }
        let now = monotonic_ns();
        if now >= next_stats {
            // The counters are 32 bits wide: read (and reset) them every second.
            sides.iter_mut().for_each(Side::read_kernel_stats);
            next_stats = now + 1_000_000_000;
            if let Some(l) = live.as_deref_mut() {
                // The running figures are a view: failing to write them does not stop the capture.
                let _ = l.out.write(&l.matcher.summary(now - started));
            }
        }
        if signal::stop_requested() {
            break signal::received().unwrap_or("signal");
        }
        if deadline.is_some_and(|d| now >= d) {
            break "duration";
        }
        if !any {
            poll(&mut pollfds, 50);
        }
    };
    // Frames still in partly filled blocks are handed over when the blocks retire: keep
    // draining for a little longer than the retire timeout.
    let until = monotonic_ns() + 3 * RETIRE_MS as i64 * 1_000_000;
    while monotonic_ns() < until {
        drain_all(sides, live.as_deref_mut());
        poll(&mut pollfds, 2);
    }
    if let Some(l) = live {
        let _ = l.out.write(&l.matcher.summary(monotonic_ns() - started));
    }
    sides.iter_mut().for_each(Side::read_kernel_stats);
    stopped_by
}

fn poll(fds: &mut [libc::pollfd], timeout_ms: i32) {
    // SAFETY: polling our own descriptors; EINTR (a signal) just ends the wait early.
    unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
}

fn announce_ready(args: &Args) -> Result<(), Fatal> {
    if let Some(path) = &args.ready_file {
        std::fs::write(path, b"ready\n").map_err(|e| Fatal::create(path, e))?;
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "ready");
    let _ = out.flush();
    Ok(())
}
