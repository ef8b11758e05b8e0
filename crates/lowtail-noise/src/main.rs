//! `lowtail-noise`: spin on each chosen core at once and print one JSON document with
//! every core's gaps. `lowtail noise` runs it; people rarely call it directly.
//!
//!     lowtail-noise --cpus 1-3 --duration-ns 5000000000 [--threshold-ns 1000] [--top 20]
//!                   [--interrupts /proc/interrupts] [--main-cpu 0] [--fifo PRIO] [--gaps-dir DIR]

use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use lowtail_net::error::{exit_with, Fatal, EXIT_OK};
use lowtail_noise::*;
use serde_json::json;

struct Args {
    cpus: Vec<usize>,
    duration_ns: i64,
    threshold_ns: i64,
    top: usize,
    interrupts: Option<PathBuf>,
    main_cpu: Option<usize>,
    fifo: Option<i32>,
    gaps_dir: Option<PathBuf>,
}

const USAGE: &str = "usage: lowtail-noise --cpus LIST --duration-ns N [--threshold-ns N] [--top N] \
[--interrupts PATH] [--main-cpu CPU] [--fifo PRIO] [--gaps-dir DIR] | --version";

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        cpus: Vec::new(),
        duration_ns: 0,
        threshold_ns: 1_000,
        top: 20,
        interrupts: None,
        main_cpu: None,
        fifo: None,
        gaps_dir: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "-h" || flag == "--help" {
            let _ = writeln!(std::io::stdout().lock(), "{USAGE}");
            std::process::exit(0);
        }
        if flag == "-V" || flag == "--version" {
            println!("lowtail-noise {}", lowtail_version::LONG_VERSION);
            std::process::exit(0);
        }
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let int = |v: &str| v.parse::<i64>().map_err(|_| format!("{flag} {v}: not an integer"));
        match flag.as_str() {
            "--cpus" => a.cpus = parse_cpu_list(&value).map_err(|e| e.to_string())?,
            "--duration-ns" => a.duration_ns = int(&value)?,
            "--threshold-ns" => a.threshold_ns = int(&value)?,
            "--top" => a.top = int(&value)?.max(0) as usize,
            "--interrupts" => a.interrupts = Some(PathBuf::from(value)),
            "--main-cpu" => a.main_cpu = Some(int(&value)?.max(0) as usize),
            "--fifo" => a.fifo = Some(int(&value)? as i32),
            "--gaps-dir" => a.gaps_dir = Some(PathBuf::from(value)),
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    if a.cpus.is_empty() || a.duration_ns <= 0 {
        return Err("--cpus and a positive --duration-ns are required".into());
    }
    Ok(a)
}

/// Read a /proc file into a buffer allocated (and touched) beforehand, so the read does
/// not unmap memory — which would send TLB shootdowns to the spinning cores — while they run.
fn read_into(path: &PathBuf, buf: &mut Vec<u8>) -> std::io::Result<i64> {
    buf.clear();
    let mut f = std::fs::File::open(path)?;
    let t = clock_ns(libc::CLOCK_REALTIME);
    f.read_to_end(buf)?;
    Ok(t)
}

fn run(a: Args) -> Result<serde_json::Value, Fatal> {
    if let Some(c) = a.main_cpu {
        pin_current_thread(c).map_err(|e| Fatal::failure(format!("cannot pin the main thread to CPU {c}: {e}")))?;
    }
    let go = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(AtomicUsize::new(0));
    let capacity = buffer_capacity(a.duration_ns);
    let mut handles = Vec::new();
    for &cpu in &a.cpus {
        let (go, ready, fifo) = (go.clone(), ready.clone(), a.fifo);
        let (duration, threshold) = (a.duration_ns, a.threshold_ns);
        handles.push(std::thread::spawn(move || -> Result<GapLog, String> {
            let setup =
                pin_current_thread(cpu).map_err(|e| format!("cannot pin to CPU {cpu}: {e}")).and_then(|_| match fifo {
                    Some(p) => set_fifo(p).map_err(|e| format!("cannot use SCHED_FIFO {p} on CPU {cpu}: {e}")),
                    None => Ok(()),
                });
            let buf = prefaulted_buffer(capacity);
            ready.fetch_add(1, Ordering::AcqRel);
            setup?;
            Ok(spin(duration, threshold, buf, &go))
        }));
    }
    while ready.load(Ordering::Acquire) < a.cpus.len() {
        std::thread::yield_now();
    }
    let mut text: Vec<u8> = Vec::with_capacity(1 << 20);
    text.resize(1 << 20, 1); // touch every page now, not during the probe
    text.clear();
    let before = match &a.interrupts {
        Some(p) => {
            let t = read_into(p, &mut text).map_err(|e| Fatal::failure(format!("cannot read {}: {e}", p.display())))?;
            Some(json!({"t_ns": t, "text": String::from_utf8_lossy(&text)}))
        }
        None => None,
    };
    let offset = realtime_offset_ns();
    go.store(true, Ordering::Release);
    let logs: Vec<Result<GapLog, String>> =
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("probe thread panicked".into()))).collect();
    let after = match &a.interrupts {
        Some(p) => {
            let t = read_into(p, &mut text).map_err(|e| Fatal::failure(format!("cannot read {}: {e}", p.display())))?;
            Some(json!({"t_ns": t, "text": String::from_utf8_lossy(&text)}))
        }
        None => None,
    };
    let mut cores = Vec::new();
    for (&cpu, log) in a.cpus.iter().zip(logs) {
        let log = log.map_err(Fatal::failure)?;
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
        "requested_duration_ns": a.duration_ns,
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

/// Exit codes as the other native programs' (`lowtail_net::error`): 2 bad arguments, 1 a
/// failure, 4 an output that hit a full disk; writing to stderr never panics.
fn main() -> ! {
    die_with_parent();
    exit_with("lowtail-noise", || {
        let args = parse_args().map_err(|e| Fatal::usage(format!("{e}\n{USAGE}")))?;
        let doc = run(args)?;
        let mut out = std::io::stdout().lock();
        writeln!(out, "{doc}").and_then(|()| out.flush()).map_err(|e| Fatal::write("writing the results", &e))?;
        Ok(EXIT_OK)
    })
}
