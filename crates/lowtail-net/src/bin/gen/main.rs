//! lowtail-gen: constant-rate test traffic with precise pacing.

use std::net::IpAddr;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use lowtail_frame::{FlowSchedule, FrameTemplate, IdSpec, MatchShare, TemplateSpec, Vlan, MIN_FRAME_SIZE};
use serde_json::json;

use lowtail_net::clock::{monotonic_ns, realtime_ns, Monotonic};
use lowtail_net::counters::dev_counters;
use lowtail_net::netns::IfaceRef;
use lowtail_net::signal;
use lowtail_net::socket::PacketSocket;
use lowtail_net::summary::{fmt_ns, fmt_rate, log_bins, summarize, Summary};
use lowtail_program::args::parse_duration;
use lowtail_program::flags::{LiveJson, Placement, StatsJson};
use lowtail_program::output::JsonLines;
use lowtail_program::{say, Exit, Fatal};

mod cpu_wait;
mod pacing;
mod tx;

use cpu_wait::CpuWait;
use pacing::{pace, verdict, Pacing, Plan, SecondReport, Verdict};
use tx::{Frames, SocketSink, TxMethod};

/// Send UDP test frames at a constant rate, each carrying a 64-bit sequence id.
///
/// Bursts of --burst back-to-back frames are due at start + k·burst/rate on
/// CLOCK_MONOTONIC (an absolute schedule: no drift); the generator busy-waits for each
/// due time, so give it a core of its own with --cpu. It reports the rate it achieved
/// and its pacing error (departure minus due time of each burst, where departure is
/// when the send call began) as exact percentiles, and says whether it kept up.
///
/// The id is a big-endian u64 at the start of the UDP payload: what `lowtail analyze`
/// finds by default.
///
/// With --live-json FILE it appends one JSON line a second: frames sent so far, bursts
/// that left late, and the largest pacing error of that second (written by a thread
/// off the pacing core).
///
/// Scheduling: pinned with --cpu on a host with more than one core (the generator owns
/// its core) it runs under SCHED_FIFO 40 unless --rt-priority says otherwise (0: ordinary
/// scheduling) or --nice is given; unpinned, ordinary scheduling.
///
/// LOWTAIL_TIME_LIMIT in the environment (a duration: 90s, 2m) stops it after that long
/// as SIGTERM would: lowtail sets it, so that a controller that hangs leaves nothing
/// spinning.
///
/// Exit codes: 0 done and kept up; 2 bad arguments or set-up (no such interface, not
/// root, bad core); 3 done but the rate was not held or frames were refused (the
/// statistics say which); 130 stopped by SIGINT/SIGTERM or the time limit; 1 other failures.
#[derive(Parser, Debug)]
#[command(verbatim_doc_comment)]
struct Args {
    /// Interface to send on: NAME, or NAME@NETNS for one in a network namespace
    /// (a name under /run/netns or a path such as /proc/PID/ns/net).
    #[arg(long, value_name = "IF[@NETNS]")]
    iface: IfaceRef,
    /// Frames per second (all flows together).
    #[arg(long, value_name = "PPS")]
    rate: u64,
    /// Number of frames to send.
    #[arg(long, value_name = "N", required_unless_present = "duration", conflicts_with = "duration")]
    count: Option<u64>,
    /// Send for this long (rate × duration frames): 10, 2.5s, 500ms.
    #[arg(long, value_name = "SECS", value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Frame size on the wire in bytes, including the 4-byte FCS (RFC 2544: 64 to 1518; more
    /// needs a jumbo MTU). The frame sent, and captured, is the FCS shorter: 1518 → 1514.
    #[arg(long, default_value_t = 64, value_name = "BYTES")]
    frame_size: usize,
    /// Frames sent back to back at each due time.
    #[arg(long, default_value_t = 1, value_name = "N")]
    burst: u32,
    #[arg(long, default_value_t = 53, value_name = "PORT")]
    udp_dst_port: u16,
    /// UDP source port of the first flow; flow i uses this + i.
    #[arg(long, default_value_t = 49152, value_name = "PORT")]
    udp_src_port: u16,
    /// Number of flows (UDP source ports), used round robin.
    #[arg(long, default_value_t = 1, value_name = "N")]
    flows: u16,
    /// Each flow's weight, one per flow (e.g. 8,1,1): flow i sends weight i of every
    /// Σ weights frames, spread through the cycle (lowtail_frame::FlowSchedule).
    #[arg(long, value_name = "W,W,…", value_delimiter = ',')]
    flow_weights: Vec<u32>,
    #[arg(long, default_value = "02:00:00:00:00:01", value_parser = parse_mac, value_name = "MAC")]
    src_mac: [u8; 6],
    #[arg(long, default_value = "02:00:00:00:00:02", value_parser = parse_mac, value_name = "MAC")]
    dst_mac: [u8; 6],
    /// Source address (IPv4 or IPv6, same family as --dst-ip).
    #[arg(long, default_value = "10.0.0.1", value_name = "IP")]
    src_ip: IpAddr,
    #[arg(long, default_value = "10.0.0.2", value_name = "IP")]
    dst_ip: IpAddr,
    /// Tag frames with this 802.1Q VLAN id.
    #[arg(long, value_name = "VID")]
    vlan: Option<u16>,
    /// Sequence id of the first frame.
    #[arg(long, default_value_t = 0, value_name = "ID")]
    first_id: u64,
    /// Share of frames (0 to 1) that carry the match marker right after their id, chosen
    /// by id (lowtail_frame::MatchShare): the frames an IPS rule of lowtail's matches.
    #[arg(long, value_name = "SHARE", value_parser = parse_match_share)]
    match_share: Option<MatchShare>,
    #[command(flatten)]
    placement: Placement,
    #[command(flatten)]
    stats_json: StatsJson,
    /// How frames reach the kernel: copy (send/sendmmsg) or ring (TPACKET_V2 transmit ring).
    #[arg(long, value_enum, default_value_t = TxArg::Copy)]
    tx: TxArg,
    /// Skip the qdisc (PACKET_QDISC_BYPASS). This also skips packet taps: a capture on
    /// the same interface then does not see the frames leave.
    #[arg(long)]
    qdisc_bypass: bool,
    /// Start sending this long after set-up (lets the pinned thread settle).
    #[arg(long, default_value = "1ms", value_parser = parse_duration, value_name = "SECS")]
    start_delay: Duration,
    #[command(flatten)]
    live_json: LiveJson,
}

/// Below the kernel's own real-time threads (50 for threaded interrupts, 99 for
/// migration), above anything ordinary.
const DEFAULT_RT_PRIORITY: i32 = 40;

#[derive(Debug, Clone, Copy, ValueEnum)]
enum TxArg {
    Copy,
    Ring,
}

const PROGRAM: &str = "lowtail-gen";

fn main() {
    lowtail_program::run(PROGRAM, run)
}

fn templates(args: &Args) -> Result<Vec<FrameTemplate>, Fatal> {
    if args.flows == 0 {
        return Err(Fatal::usage("--flows must be at least 1"));
    }
    if args.udp_src_port as u32 + args.flows as u32 - 1 > u16::MAX as u32 {
        return Err(Fatal::usage(format!(
            "{} flows starting at UDP source port {} run past port 65535",
            args.flows, args.udp_src_port
        )));
    }
    if args.frame_size < MIN_FRAME_SIZE {
        return Err(Fatal::usage(format!(
            "frame size {} B is below the Ethernet minimum of {MIN_FRAME_SIZE} B (FCS included)",
            args.frame_size
        )));
    }
    (0..args.flows)
        .map(|flow| {
            let spec = TemplateSpec {
                src_mac: args.src_mac,
                dst_mac: args.dst_mac,
                vlan: args.vlan.map_or(Vlan::None, Vlan::Single),
                src_ip: args.src_ip,
                dst_ip: args.dst_ip,
                src_port: args.udp_src_port + flow,
                dst_port: args.udp_dst_port,
                frame_size: args.frame_size,
                id: IdSpec::default(),
            };
            let template = match args.match_share {
                Some(_) => FrameTemplate::new(&spec).and_then(FrameTemplate::with_marker_room),
                None => FrameTemplate::new(&spec),
            };
            template.map_err(|e| Fatal::usage(e.to_string()))
        })
        .collect()
}

fn run(args: Args) -> Result<Exit, Fatal> {
    signal::install()?;
    let (plan, mut sink) = prepare(&args)?;
    // Started before pinning: the writer thread keeps the process's cores and ordinary
    // scheduling, off the pacing core.
    let live = args.live_json.create()?.map(|lines| LiveWriter::start(lines, plan.frames));
    let scheduling = args.placement.apply(PROGRAM, Some(DEFAULT_RT_PRIORITY))?;
    let counters_before = dev_counters(&args.iface);
    let cpu_wait_before = CpuWait::now();
    let start = monotonic_ns() + args.start_delay.as_nanos() as i64;
    let clock_offset = realtime_ns() - monotonic_ns();
    let each_second = |r: SecondReport| {
        if let Some(l) = &live {
            l.send(r);
        }
    };
    let mut pacing = pace(&plan, start, &mut Monotonic, &mut sink, signal::stop_requested, each_second)?;
    if let Some(l) = live {
        l.finish();
    }
    let counters = match (dev_counters(&args.iface), counters_before) {
        (Some(after), Some(before)) => Some(after.since(&before)),
        _ => None,
    };
    let cpu_wait = CpuWait::now().zip(cpu_wait_before).map(|(after, before)| after.since(&before));
    let v = verdict(&plan, &pacing);
    // Time the generator was runnable but off its core: what made it late, beyond
    // interrupts (which show only in the pacing error).
    let cpu_wait_json = cpu_wait.map(|w| {
        json!({
            "waited_ns": w.waited_ns,
            "share": w.waited_ns as f64 / v.elapsed_ns.max(1) as f64,
            "involuntary_switches": w.involuntary_switches,
        })
    });
    let lateness = summarize(&mut pacing.lateness);
    let mut doc = json!({
        "program": "lowtail-gen",
        "version": env!("CARGO_PKG_VERSION"),
        "iface": args.iface.name,
        "netns": args.iface.netns,
        "rate_pps": args.rate,
        "burst": args.burst,
        "frame_size": args.frame_size,
        "flows": args.flows,
        "udp_dst_port": args.udp_dst_port,
        "match_share": args.match_share.map(|m| m.share()),
        "tx_method": sink.method().name(),
        "qdisc_bypass": args.qdisc_bypass,
        "cpu": args.placement.cpu,
        "scheduling": scheduling.to_string(),
        "planned": plan.frames,
        "attempted": pacing.attempted,
        "sent": pacing.sent,
        "send_errors": sink.send_errors(),
        "first_send_error": sink.first_error(),
        "first_id": args.first_id,
        "last_id": (pacing.attempted > 0).then(|| args.first_id.wrapping_add(pacing.attempted - 1)),
        "start_monotonic_ns": start,
        "start_realtime_ns": start + clock_offset,
        "planned_duration_ns": plan.duration_ns(),
        "duration_ns": v.elapsed_ns,
        "achieved_rate_pps": v.achieved_rate_pps,
        "kept_up": v.kept_up,
        "interrupted": pacing.interrupted,
        "final_lag_ns": pacing.final_lag_ns,
        "last_on_time_ns": pacing.last_on_time_ns,
        "max_lag_ns": pacing.max_lag_ns,
        "late_bursts": pacing.late_bursts,
        "bursts": pacing.bursts,
        "burst_interval_ns": plan.burst_interval_ns(),
        "pacing_error_ns": lateness,
        "pacing_error_histogram": log_bins(&mut pacing.lateness),
        "inter_departure_ns": summarize(&mut pacing.inter_departure),
        "inter_departure_histogram": log_bins(&mut pacing.inter_departure),
        "send_call_ns": summarize(&mut pacing.send_call),
        "iface_counters": counters,
        "cpu_wait": cpu_wait_json,
    });
    // Beside the rest (one json! of every key passes the macro's recursion limit).
    if !args.flow_weights.is_empty() {
        doc["flow_weights"] = json!(args.flow_weights);
    }
    args.stats_json.write(&doc)?;
    Ok(report(&args, &plan, &pacing, &v, lateness.as_ref(), &sink))
}

/// The --live-json lines, written by a thread of their own: the pacing loop only hands
/// a few counters over a channel once a second.
struct LiveWriter {
    tx: std::sync::mpsc::Sender<SecondReport>,
    thread: std::thread::JoinHandle<()>,
}

impl LiveWriter {
    fn start(mut out: JsonLines, planned: u64) -> LiveWriter {
        let (tx, rx) = std::sync::mpsc::channel::<SecondReport>();
        let thread = std::thread::spawn(move || {
            for r in rx {
                // The running figures are a view: failing to write them does not stop the traffic.
                let _ = out.write(&json!({
                    "elapsed_ns": r.elapsed_ns,
                    "planned": planned,
                    "attempted": r.attempted,
                    "sent": r.sent,
                    "late_bursts": r.late_bursts,
                    "interval_pacing_error_max_ns": r.interval_max_lag_ns,
                    "pacing_error_ns": r.lag_ns,
                }));
            }
        });
        LiveWriter { tx, thread }
    }

    fn send(&self, r: SecondReport) {
        let _ = self.tx.send(r);
    }

    /// Write what is queued and stop the thread.
    fn finish(self) {
        drop(self.tx);
        let _ = self.thread.join();
    }
}

/// Check the arguments against the interface and get the socket ready to send.
fn prepare(args: &Args) -> Result<(Plan, SocketSink), Fatal> {
    let flows = templates(args)?;
    let schedule = flow_schedule(args)?;
    let frames_planned = match (args.count, args.duration) {
        (Some(n), _) => n,
        (None, Some(d)) => Plan::frames_in(args.rate, d.as_nanos() as u64),
        (None, None) => unreachable!("clap requires one"),
    };
    let plan = Plan::new(args.rate, args.burst, frames_planned).map_err(|e| Fatal::usage(e.to_string()))?;
    let sock = PacketSocket::open(&args.iface)?;
    let l2_header = 14 + if args.vlan.is_some() { 4 } else { 0 };
    let needed_mtu = flows[0].len() - l2_header;
    if needed_mtu > sock.mtu as usize {
        return Err(Fatal::usage(format!(
            "a {} B frame needs an MTU of {} on {}, which has {} (lower --frame-size or raise the MTU)",
            args.frame_size, needed_mtu, args.iface, sock.mtu
        )));
    }
    let method = match args.tx {
        TxArg::Copy => TxMethod::Copy,
        TxArg::Ring => TxMethod::Ring,
    };
    let sink = SocketSink::new(
        sock,
        Frames::new(flows, schedule, args.first_id, args.match_share),
        method,
        args.burst,
        args.qdisc_bypass,
    )?;
    Ok((plan, sink))
}

/// The one-line summary (and what went wrong) on stderr; returns the exit code.
fn report(
    args: &Args,
    plan: &Plan,
    pacing: &Pacing,
    v: &Verdict,
    lateness: Option<&Summary>,
    sink: &SocketSink,
) -> Exit {
    let pacing_error = match lateness {
        Some(s) => {
            format!("p50 {}, p99 {}, p99.9 {}, max {}", fmt_ns(s.p50), fmt_ns(s.p99), fmt_ns(s.p99_9), fmt_ns(s.max))
        }
        None => "no samples".into(),
    };
    let send_errors = sink.send_errors();
    say!(
        "lowtail-gen: sent {} of {} frames at {} (target {}{}); pacing error {}; {} send errors",
        pacing.sent,
        plan.frames,
        fmt_rate(v.achieved_rate_pps),
        fmt_rate(args.rate as f64),
        if v.kept_up { ", kept up" } else { "" },
        pacing_error,
        send_errors
    );
    if pacing.interrupted {
        say!("lowtail-gen: stopped by {} after {} frames", signal::received().unwrap_or("a signal"), pacing.attempted);
        return Exit::Interrupted;
    }
    if !v.kept_up {
        say!(
            "lowtail-gen: could not keep up with {}: achieved {}, {} behind at the end (the run is not at the planned rate)",
            fmt_rate(args.rate as f64),
            fmt_rate(v.achieved_rate_pps),
            fmt_ns(pacing.final_lag_ns)
        );
        return Exit::Degraded;
    }
    if send_errors > 0 {
        say!("lowtail-gen: the kernel refused {send_errors} frames ({})", sink.first_error().unwrap_or_default());
        return Exit::Degraded;
    }
    Exit::Ok
}

/// Why a MAC address argument does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum MacError {
    /// Not six parts.
    #[error("`{0}` is not a MAC address (like 02:00:00:00:00:01)")]
    Parts(String),
    /// A part that is not a hex byte.
    #[error("`{0}` is not a MAC address")]
    Byte(String),
}

/// Round robin, or the weights' schedule (one weight per flow).
fn flow_schedule(args: &Args) -> Result<FlowSchedule, Fatal> {
    if args.flow_weights.is_empty() {
        return Ok(FlowSchedule::round_robin(args.flows));
    }
    if args.flow_weights.len() != usize::from(args.flows) {
        return Err(Fatal::usage(format!(
            "--flow-weights gives {} weights for {} flows: one per flow",
            args.flow_weights.len(),
            args.flows
        )));
    }
    FlowSchedule::weighted(&args.flow_weights).map_err(|e| Fatal::usage(e.to_string()))
}

/// "02:00:00:00:00:01".
fn parse_match_share(s: &str) -> Result<MatchShare, String> {
    let share: f64 = s.parse().map_err(|_| format!("not a number from 0 to 1: {s:?}"))?;
    MatchShare::new(share).map_err(|e| e.to_string())
}

fn parse_mac(s: &str) -> Result<[u8; 6], MacError> {
    let parts: Vec<&str> = s.split([':', '-']).collect();
    let mut mac = [0u8; 6];
    if parts.len() != 6 {
        return Err(MacError::Parts(s.to_string()));
    }
    for (byte, part) in mac.iter_mut().zip(parts) {
        *byte = u8::from_str_radix(part, 16).map_err(|_| MacError::Byte(s.to_string()))?;
    }
    Ok(mac)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_addresses() {
        assert_eq!(parse_mac("02:00:00:00:00:0a").unwrap(), [2, 0, 0, 0, 0, 10]);
        assert_eq!(parse_mac("02:00:00:00:00"), Err(MacError::Parts("02:00:00:00:00".into())));
        assert_eq!(parse_mac("zz:00:00:00:00:00"), Err(MacError::Byte("zz:00:00:00:00:00".into())));
    }
}
