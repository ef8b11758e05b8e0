//! An OS-noise probe in the manner of osnoise, sysjitter and hiccups: a thread pinned to
//! one core reads the monotonic clock in a tight loop; whenever two consecutive reads are
//! further apart than a threshold, something took the core away (an interrupt, another
//! task, the hypervisor, a system-management interrupt) and the gap is recorded.
//!
//! The loop must not disturb what it measures. It never allocates: gaps go into a
//! buffer allocated and touched before the loop starts (a page fault inside the loop
//! would itself be a gap, and a `munmap` in a multi-threaded process sends TLB-shootdown
//! interrupts to every core the process runs on — one of the effects being measured).
#![warn(missing_docs)]

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use lowtail_stats::{auto_bins, Bin, ExactHistogram, Quantile, WorstN, HEADLINE_PERCENTILES};
use serde::Serialize;

/// One interruption of the loop: when it began (monotonic clock) and how long it lasted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Gap {
    /// When the gap began (CLOCK_MONOTONIC).
    pub start_ns: i64,
    /// How long the loop did not run.
    pub len_ns: i64,
}

/// What one spin produced, before any statistics.
#[derive(Debug)]
pub struct GapLog {
    /// The gaps kept, in time order.
    pub gaps: Vec<Gap>,
    /// Gaps that did not fit in the buffer: counted, and their maximum kept.
    pub dropped: u64,
    /// The longest gap that did not fit.
    pub dropped_max_ns: i64,
    /// Their total length.
    pub dropped_total_ns: i64,
    /// Clock reads.
    pub loops: u64,
    /// The shortest time between two reads: the loop's own cost.
    pub min_loop_ns: i64,
    /// First read (CLOCK_MONOTONIC).
    pub start_ns: i64,
    /// Last read.
    pub end_ns: i64,
}

/// The time on `clock`, in nanoseconds.
#[inline(always)]
pub fn clock_ns(clock: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; the clock ids used are always supported.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// CLOCK_MONOTONIC in nanoseconds.
#[inline(always)]
pub fn monotonic_ns() -> i64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CLOCK_REALTIME − CLOCK_MONOTONIC, from the tightest of a few bracketed reads, so gap
/// times can be put on the wall clock that interrupt samples and packet captures use.
pub fn realtime_offset_ns() -> i64 {
    let mut best = (i64::MAX, 0);
    for _ in 0..16 {
        let a = monotonic_ns();
        let rt = clock_ns(libc::CLOCK_REALTIME);
        let b = monotonic_ns();
        if b - a < best.0 {
            best = (b - a, rt - (a + (b - a) / 2));
        }
    }
    best.1
}

/// A gap buffer whose pages are already faulted in.
pub fn prefaulted_buffer(capacity: usize) -> Vec<Gap> {
    let mut v = vec![Gap::default(); capacity];
    // vec! of zeroes may come from calloc'd, not-yet-touched pages: write every one.
    for g in v.iter_mut() {
        // SAFETY: a volatile write to an element we own, so it is not optimised away.
        unsafe { std::ptr::write_volatile(&mut g.len_ns, 0) };
    }
    v.clear();
    v
}

/// How many gaps to make room for: generous for a busy core (100 k gaps/s), bounded so a
/// long probe does not take gigabytes; gaps beyond it are counted but not kept.
pub fn buffer_capacity(duration_ns: i64) -> usize {
    let per_s = 100_000.0;
    ((duration_ns.max(0) as f64 / 1e9 * per_s) as usize).clamp(65_536, 1 << 22)
}

/// Spin for `duration_ns` after `go` turns true, recording every gap above `threshold_ns`.
/// `buf` must come from [`prefaulted_buffer`]; it is never grown.
pub fn spin(duration_ns: i64, threshold_ns: i64, mut buf: Vec<Gap>, go: &AtomicBool) -> GapLog {
    while !go.load(Ordering::Acquire) {
        std::hint::spin_loop();
    }
    let cap = buf.capacity();
    let start = monotonic_ns();
    let end = start + duration_ns;
    let (mut prev, mut loops, mut min_loop) = (start, 0u64, i64::MAX);
    let (mut dropped, mut dropped_max, mut dropped_total) = (0u64, 0i64, 0i64);
    loop {
        let now = monotonic_ns();
        let d = now - prev;
        loops += 1;
        if d < min_loop {
            min_loop = d;
        }
        if d > threshold_ns {
            if buf.len() < cap {
                buf.push(Gap { start_ns: prev, len_ns: d });
            } else {
                dropped += 1;
                dropped_total += d;
                dropped_max = dropped_max.max(d);
            }
        }
        prev = now;
        if now >= end {
            break;
        }
    }
    GapLog {
        gaps: buf,
        dropped,
        dropped_max_ns: dropped_max,
        dropped_total_ns: dropped_total,
        loops,
        min_loop_ns: if min_loop == i64::MAX { 0 } else { min_loop },
        start_ns: start,
        end_ns: prev,
    }
}

/// A gap on the wall clock.
#[derive(Debug, Clone, Serialize)]
pub struct TimedGap {
    /// Start of the gap on CLOCK_REALTIME, in ns since the epoch.
    pub t_ns: i64,
    /// Its length.
    pub gap_ns: i64,
}

/// The figures of one core's probe (the per-core object of `lowtail-noise`'s JSON).
#[derive(Debug, Clone, Serialize)]
pub struct CoreSummary {
    /// The core.
    pub cpu: usize,
    /// Start of the probe on CLOCK_REALTIME.
    pub start_ns: i64,
    /// How long it spun.
    pub duration_ns: i64,
    /// Shortest gap recorded.
    pub threshold_ns: i64,
    /// Clock reads.
    pub loops: u64,
    /// The loop's own cost (shortest time between two reads).
    pub min_loop_ns: i64,
    /// Gaps recorded, dropped ones included.
    pub gaps: u64,
    /// Gaps that did not fit in the buffer.
    pub dropped: u64,
    /// Gaps per second.
    pub rate_hz: f64,
    /// Time the loop did not run, per second of probe: the core's lost CPU time.
    pub noise_ns_per_s: f64,
    /// Total time in gaps.
    pub gap_total_ns: i64,
    /// The longest gap.
    pub max_ns: i64,
    /// Median gap (kept gaps).
    pub p50_ns: Option<i64>,
    /// 90th percentile gap.
    pub p90_ns: Option<i64>,
    /// 99th percentile gap.
    pub p99_ns: Option<i64>,
    /// 99.9th percentile gap.
    pub p99_9_ns: Option<i64>,
    /// Histogram of the kept gaps.
    pub histogram: Vec<Bin>,
    /// The largest gaps, in time order.
    pub largest: Vec<TimedGap>,
}

/// Statistics of one spin. Percentiles are exact nearest-rank values over the kept gaps.
pub fn summarize(cpu: usize, log: &GapLog, threshold_ns: i64, realtime_offset: i64, top: usize) -> CoreSummary {
    let mut h = ExactHistogram::new();
    let mut worst = WorstN::new(top);
    let mut total = log.dropped_total_ns;
    for g in &log.gaps {
        h.record(g.len_ns);
        worst.offer(g.len_ns, g.start_ns + realtime_offset, 0);
        total += g.len_ns;
    }
    // p50, p90, p99, p99.9
    let qs: Vec<Quantile> = HEADLINE_PERCENTILES[..4].iter().map(|(_, q)| *q).collect();
    let q = h.quantiles(&qs);
    let pick = |i: usize| q.as_ref().map(|v| v[i]);
    let duration = (log.end_ns - log.start_ns).max(1);
    let gaps = log.gaps.len() as u64 + log.dropped;
    CoreSummary {
        cpu,
        start_ns: log.start_ns + realtime_offset,
        duration_ns: duration,
        threshold_ns,
        loops: log.loops,
        min_loop_ns: log.min_loop_ns,
        gaps,
        dropped: log.dropped,
        rate_hz: gaps as f64 / (duration as f64 / 1e9),
        noise_ns_per_s: total as f64 / (duration as f64 / 1e9),
        gap_total_ns: total,
        max_ns: h.max().unwrap_or(0).max(log.dropped_max_ns),
        p50_ns: pick(0),
        p90_ns: pick(1),
        p99_ns: pick(2),
        p99_9_ns: pick(3),
        histogram: auto_bins(&mut h, 40),
        largest: worst
            .into_time_order()
            .into_iter()
            .map(|w| TimedGap { t_ns: w.pre_ts_ns, gap_ns: w.latency_ns })
            .collect(),
    }
}

/// Every kept gap as little-endian (t_ns: i64 on CLOCK_REALTIME, gap_ns: i64) records.
pub fn write_gaps(out: &mut impl Write, log: &GapLog, realtime_offset: i64) -> io::Result<()> {
    let mut w = io::BufWriter::new(out);
    for g in &log.gaps {
        w.write_all(&(g.start_ns + realtime_offset).to_le_bytes())?;
        w.write_all(&g.len_ns.to_le_bytes())?;
    }
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use lowtail_program::sched::pin_to;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    fn run_probe(cpu: usize, duration_ns: i64, threshold_ns: i64, capacity: usize) -> GapLog {
        pin_to(cpu).expect("pin");
        let go = AtomicBool::new(true);
        spin(duration_ns, threshold_ns, prefaulted_buffer(capacity), &go)
    }

    fn current_cpu() -> usize {
        // SAFETY: sched_getcpu has no preconditions.
        unsafe { libc::sched_getcpu() as usize }
    }

    #[test]
    fn threshold_zero_records_every_iteration() {
        let log = run_probe(current_cpu(), 20_000_000, -1, 1 << 22);
        // Every iteration is a "gap" (even d == 0 exceeds -1).
        assert_eq!(log.gaps.len() as u64 + log.dropped, log.loops);
        assert!(log.loops > 1000, "only {} loops in 20 ms", log.loops);
        let sum: i64 = log.gaps.iter().map(|g| g.len_ns).sum::<i64>() + log.dropped_total_ns;
        assert_eq!(sum, log.end_ns - log.start_ns);
    }

    #[test]
    fn a_full_buffer_counts_gaps_without_keeping_them() {
        // 50 ms: even on a busy core the thread gets time slices enough for 100 loops.
        let log = run_probe(current_cpu(), 50_000_000, -1, 100);
        assert_eq!(log.gaps.len(), 100);
        assert_eq!(log.gaps.capacity(), 100, "the buffer must never grow inside the loop");
        assert_eq!(log.gaps.len() as u64 + log.dropped, log.loops);
        let s = summarize(0, &log, -1, 0, 5);
        assert_eq!(s.gaps, log.loops);
        assert!(s.max_ns >= log.dropped_max_ns);
    }

    /// A busy thread on the same core must take the core from the probe: the probe sees
    /// gaps adding up to roughly the CPU time the other thread got.
    #[test]
    fn a_competing_thread_on_the_same_core_shows_up_as_gaps() {
        let cpu = current_cpu();
        let go = Arc::new(AtomicBool::new(false));
        let busy_ms = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let (g2, b2) = (go.clone(), busy_ms.clone());
        let rival = std::thread::spawn(move || {
            pin_to(cpu).unwrap();
            while !g2.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
            let t0 = Instant::now();
            let mut x = 0u64;
            while t0.elapsed() < Duration::from_millis(300) {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            }
            b2.store(t0.elapsed().as_millis() as u64, Ordering::Release);
            std::hint::black_box(x);
        });
        pin_to(cpu).unwrap();
        go.store(true, Ordering::Release);
        let log = spin(400_000_000, 1_000, prefaulted_buffer(1 << 16), &go);
        rival.join().unwrap();
        let s = summarize(cpu, &log, 1_000, 0, 10);
        // The scheduler shares the core: at least tens of ms of the 400 ms went elsewhere,
        // in slices far longer than the 1 µs threshold.
        assert!(s.gap_total_ns > 50_000_000, "gap total {} ns", s.gap_total_ns);
        assert!(s.max_ns > 500_000, "max gap {} ns", s.max_ns);
        assert!(s.largest.len() <= 10 && !s.largest.is_empty());
        assert!(s.largest.windows(2).all(|w| w[0].t_ns <= w[1].t_ns));
    }

    #[test]
    fn gaps_are_written_as_little_endian_pairs() {
        let log = GapLog {
            gaps: vec![Gap { start_ns: 10, len_ns: 2_000 }, Gap { start_ns: 50, len_ns: 7_000 }],
            dropped: 0,
            dropped_max_ns: 0,
            dropped_total_ns: 0,
            loops: 9,
            min_loop_ns: 20,
            start_ns: 0,
            end_ns: 100,
        };
        let mut out = Vec::new();
        write_gaps(&mut out, &log, 1_000).unwrap();
        assert_eq!(out.len(), 32);
        assert_eq!(i64::from_le_bytes(out[0..8].try_into().unwrap()), 1_010);
        assert_eq!(i64::from_le_bytes(out[24..32].try_into().unwrap()), 7_000);
        let s = summarize(3, &log, 1_000, 1_000, 1);
        assert_eq!((s.gaps, s.max_ns, s.p50_ns, s.gap_total_ns), (2, 7_000, Some(2_000), 9_000));
        assert_eq!(s.largest.len(), 1);
        assert_eq!((s.largest[0].t_ns, s.largest[0].gap_ns), (1_050, 7_000));
        assert!((s.rate_hz - 2.0e7).abs() < 1.0);
    }
}
