//! `lowtail-noise`: spin on each chosen core at once and print one JSON document with
//! every core's gaps. `lowtail noise` runs it; people rarely call it directly.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use lowtail_noise::*;
use lowtail_program::args::parse_duration;
use lowtail_program::flags::Cores;
use lowtail_program::sched::pin_to;
use lowtail_program::{Exit, Fatal};
use serde_json::json;

/// Spin on each core of --cpu at once, one thread pinned per core reading
/// CLOCK_MONOTONIC in a tight loop, and print one JSON document on stdout with every
/// core's gaps: each time two reads are further apart than --threshold-ns, something
/// took the core away (an interrupt, another task, the hypervisor, an SMI).
///
/// With --interrupts it reads that file (/proc/interrupts) right before the loops start
/// and right after they end; with --gaps-dir every gap is written there too, as
/// little-endian (start on CLOCK_REALTIME, length) pairs of i64, one file per core
/// (cpuN.gaps). The probe dies with the process that started it.
///
/// Exit codes: 0 done; 2 bad arguments (a core that does not exist, a priority out of
/// range); 4 the results or a gap file could not be written for a full disk; 1 other
/// failures.
#[derive(Parser, Debug)]
#[command(verbatim_doc_comment)]
struct Args {
    #[command(flatten)]
    cores: Cores,
    /// How long to spin: 5s, 500ms, 2.5.
    #[arg(long, value_name = "SECS", value_parser = parse_duration)]
    duration: Duration,
    /// The shortest gap recorded, in nanoseconds.
    #[arg(long, default_value_t = 1_000, value_name = "NS")]
    threshold_ns: i64,
    /// The largest gaps listed per core.
    #[arg(long, default_value_t = 20, value_name = "N")]
    top: usize,
    /// Read this interrupt-counter file before and after the loops.
    #[arg(long, value_name = "PATH")]
    interrupts: Option<PathBuf>,
    /// Pin the main thread (which reads --interrupts and waits) to this core.
    #[arg(long, value_name = "CORE")]
    main_cpu: Option<usize>,
    /// Write every gap to DIR/cpuN.gaps.
    #[arg(long, value_name = "DIR")]
    gaps_dir: Option<PathBuf>,
}

const PROGRAM: &str = "lowtail-noise";

/// Read a /proc file into a buffer allocated (and touched) beforehand, so the read does
/// not unmap memory — which would send TLB shootdowns to the spinning cores — while they run.
fn read_into(path: &Path, buf: &mut Vec<u8>) -> std::io::Result<i64> {
    buf.clear();
    let mut f = std::fs::File::open(path)?;
    let t = clock_ns(libc::CLOCK_REALTIME);
    f.read_to_end(buf)?;
    Ok(t)
}

/// The probe's document (for stdout).
fn probe(a: &Args) -> Result<serde_json::Value, Fatal> {
    let duration_ns = i64::try_from(a.duration.as_nanos()).unwrap_or(i64::MAX);
    if duration_ns <= 0 {
        return Err(Fatal::usage("--duration must be positive"));
    }
    if let Some(c) = a.main_cpu {
        pin_to(c)?;
    }
    let cpus = a.cores.cpus();
    let go = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(AtomicUsize::new(0));
    let capacity = buffer_capacity(duration_ns);
    let mut handles = Vec::new();
    for &cpu in &cpus {
        let (go, ready, cores) = (go.clone(), ready.clone(), a.cores.clone());
        let threshold = a.threshold_ns;
        handles.push(std::thread::spawn(move || -> Result<GapLog, Fatal> {
            let setup = cores.apply_on(PROGRAM, cpu);
            let buf = prefaulted_buffer(capacity);
            ready.fetch_add(1, Ordering::AcqRel);
            setup?;
            Ok(spin(duration_ns, threshold, buf, &go))
        }));
    }
    while ready.load(Ordering::Acquire) < cpus.len() {
        std::thread::yield_now();
    }
    let mut text: Vec<u8> = Vec::with_capacity(1 << 20);
    text.resize(1 << 20, 1); // touch every page now, not during the probe
    text.clear();
    let before = match &a.interrupts {
        Some(p) => {
            let t = read_into(p, &mut text).map_err(|e| Fatal::os(format_args!("cannot read {}", p.display()), e))?;
            Some(json!({"t_ns": t, "text": String::from_utf8_lossy(&text)}))
        }
        None => None,
    };
    let offset = realtime_offset_ns();
    go.store(true, Ordering::Release);
    let logs: Vec<Result<GapLog, Fatal>> =
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(Fatal::failed("probe thread panicked")))).collect();
    let after = match &a.interrupts {
        Some(p) => {
            let t = read_into(p, &mut text).map_err(|e| Fatal::os(format_args!("cannot read {}", p.display()), e))?;
            Some(json!({"t_ns": t, "text": String::from_utf8_lossy(&text)}))
        }
        None => None,
    };
    let mut cores = Vec::new();
    for (&cpu, log) in cpus.iter().zip(logs) {
        let log = log?;
        if let Some(dir) = &a.gaps_dir {
            // a full disk is EXIT_DISK_FULL, as for the other programs' outputs
            let path = dir.join(format!("cpu{cpu}.gaps"));
            let cannot = |e: std::io::Error| Fatal::write(format_args!("cannot write {}", path.display()), &e);
            let mut f = std::fs::File::create(&path).map_err(cannot)?;
            write_gaps(&mut f, &log, offset).and_then(|()| f.flush()).map_err(cannot)?;
        }
        cores.push(summarize(cpu, &log, a.threshold_ns, offset, a.top));
    }
    Ok(json!({
        "probe": "lowtail-noise",
        "clock": "CLOCK_MONOTONIC",
        "threshold_ns": a.threshold_ns,
        "requested_duration_ns": duration_ns,
        "interrupts_before": before,
        "interrupts_after": after,
        "cores": cores,
    }))
}

/// The probe ends when the process that started it exits: its loops spin on every probed
/// core (possibly real-time) and nobody would read the result.
fn die_with_parent() {
    // SAFETY: getppid has no preconditions; prctl(PR_SET_PDEATHSIG, signal) only sets a
    // per-process attribute; _exit is async-signal-safe.
    unsafe {
        let parent = libc::getppid();
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
        if libc::getppid() != parent {
            libc::_exit(1);
        }
    }
}

/// Exit codes as the other native programs' (`lowtail_program::Exit`): 2 bad arguments,
/// 1 a failure, 4 an output that hit a full disk; writing to stderr never panics.
fn main() {
    die_with_parent();
    lowtail_program::run(PROGRAM, |args: Args| {
        let doc = probe(&args)?;
        let mut out = std::io::stdout().lock();
        writeln!(out, "{doc}").and_then(|()| out.flush()).map_err(|e| Fatal::write("writing the results", &e))?;
        Ok(Exit::Ok)
    })
}
