//! The generator's schedule and its pacing loop, independent of sockets and of the real
//! clock so that tests can drive it with a simulated one.
//!
//! Burst `b` is due at `start + floor(b · burst · 10⁹ / rate)` nanoseconds: every due time
//! is computed from the start, never by adding a rounded interval to the previous one,
//! so rounding cannot accumulate into drift. The loop prepares a burst, busy-waits until
//! it is due, hands it to the kernel, and records how late it left. A generator that
//! falls behind (a preemption) sends the overdue bursts back to back until it is on
//! schedule again; one that cannot sustain the rate falls further and further behind,
//! which is what `Verdict::kept_up` detects.

use lowtail_stats::ExactHistogram;

use lowtail_net::clock::Clock;
use lowtail_program::Fatal;

const NS_PER_S: u128 = 1_000_000_000;

/// Why a plan cannot be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// A rate of 0 pps.
    #[error("the rate must be at least 1 pps")]
    ZeroRate,
    /// A burst of 0 frames.
    #[error("the burst must be at least 1 frame")]
    ZeroBurst,
    /// A burst larger than the generator holds buffers for.
    #[error("the burst must be at most {MAX_BURST} frames, not {0}")]
    BurstTooLarge(u32),
}

/// The largest burst: the generator prepares a whole burst before it is due (a buffer of
/// a frame each, up to 9 kB), so a burst is memory; 4096 frames is more than any NIC
/// queue takes at once.
pub const MAX_BURST: u32 = 4096;

/// What to send: `frames` frames at `rate_pps`, in bursts of `burst` back-to-back frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Frames per second.
    pub rate_pps: u64,
    /// Frames sent back to back per burst.
    pub burst: u32,
    /// Frames in the run.
    pub frames: u64,
}

impl Plan {
    /// A plan, unless the rate or the burst is zero.
    pub fn new(rate_pps: u64, burst: u32, frames: u64) -> Result<Plan, PlanError> {
        if rate_pps == 0 {
            return Err(PlanError::ZeroRate);
        }
        if burst == 0 {
            return Err(PlanError::ZeroBurst);
        }
        if burst > MAX_BURST {
            return Err(PlanError::BurstTooLarge(burst));
        }
        Ok(Plan { rate_pps, burst, frames })
    }

    /// The number of frames a run of `duration_ns` at `rate_pps` sends.
    pub fn frames_in(rate_pps: u64, duration_ns: u64) -> u64 {
        (rate_pps as u128 * duration_ns as u128 / NS_PER_S) as u64
    }

    /// Bursts in the run.
    pub fn bursts(&self) -> u64 {
        self.frames.div_ceil(self.burst as u64)
    }

    /// Frames in burst `b` (the last one may be short).
    pub fn burst_len(&self, b: u64) -> u32 {
        (self.frames - b * self.burst as u64).min(self.burst as u64) as u32
    }

    /// When frame number `k` is due, relative to the start.
    fn frame_due_ns(&self, k: u64) -> i64 {
        (k as u128 * NS_PER_S / self.rate_pps as u128) as i64
    }

    /// When burst `b` is due, relative to the start.
    pub fn due_ns(&self, b: u64) -> i64 {
        self.frame_due_ns(b * self.burst as u64)
    }

    /// The planned length of the run: when the frame after the last would be due.
    pub fn duration_ns(&self) -> i64 {
        self.frame_due_ns(self.frames)
    }

    /// The mean time between bursts.
    pub fn burst_interval_ns(&self) -> f64 {
        self.burst as f64 * 1e9 / self.rate_pps as f64
    }
}

/// Where the frames go: the real one writes to a packet socket, tests simulate costs.
pub trait BurstSink {
    /// Get frames `first .. first + len` ready to leave (done before waiting, so that only
    /// the hand-over happens at the due time).
    fn prepare(&mut self, first: u64, len: u32);
    /// Hand the prepared frames to the kernel; returns how many it accepted (the rest
    /// are send errors). An error stops the run (the interface went away, say).
    fn send(&mut self) -> Result<u32, Fatal>;
}

/// What the pacing loop measured.
#[derive(Debug, Clone)]
pub struct Pacing {
    /// Departure minus due time of each burst (departure = when the send call began).
    pub lateness: ExactHistogram,
    /// Time between the departures of consecutive bursts.
    pub inter_departure: ExactHistogram,
    /// How long handing each burst to the kernel took.
    pub send_call: ExactHistogram,
    /// Bursts sent.
    pub bursts: u64,
    /// Frames handed to the kernel, accepted or not.
    pub attempted: u64,
    /// Frames the kernel accepted.
    pub sent: u64,
    /// When the last burst left.
    pub last_departure_ns: i64,
    /// Lateness of the last burst sent.
    pub final_lag_ns: i64,
    /// Due time (relative to the start) of the last burst that left on time, that is
    /// at most one burst interval late; None if none did.
    pub last_on_time_ns: Option<i64>,
    /// The largest lateness of any burst.
    pub max_lag_ns: i64,
    /// Bursts that left more than one burst interval late (sent back to back while
    /// catching up, so the device saw a burst the plan did not have).
    pub late_bursts: u64,
    /// `stop()` ended the run before the plan did.
    pub interrupted: bool,
}

/// Where the run stands, handed to `pace`'s caller once a second (for a live view: it
/// must cost the loop next to nothing, so it is a few counters, no percentile).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SecondReport {
    /// Since the start of the run.
    pub elapsed_ns: i64,
    /// Frames handed to the kernel so far, accepted or not.
    pub attempted: u64,
    /// Frames the kernel accepted so far.
    pub sent: u64,
    /// Bursts that left more than one burst interval late, so far.
    pub late_bursts: u64,
    /// The largest pacing error (departure − due) of a burst since the last report.
    pub interval_max_lag_ns: i64,
    /// The pacing error of the last burst sent.
    pub lag_ns: i64,
}

const REPORT_EVERY_NS: i64 = 1_000_000_000;

/// Run `plan` from `start_ns` (on `clock`'s time line) until done or `stop()`, calling
/// `each_second` about once a second of the run (after the burst that crossed it).
pub fn pace<C: Clock, S: BurstSink>(
    plan: &Plan,
    start_ns: i64,
    clock: &mut C,
    sink: &mut S,
    stop: impl Fn() -> bool,
    mut each_second: impl FnMut(SecondReport),
) -> Result<Pacing, Fatal> {
    let late_after = plan.burst_interval_ns().ceil() as i64;
    let mut next_report = start_ns + REPORT_EVERY_NS;
    let mut interval_max_lag = i64::MIN;
    let mut p = Pacing {
        lateness: ExactHistogram::new(),
        inter_departure: ExactHistogram::new(),
        send_call: ExactHistogram::new(),
        bursts: 0,
        attempted: 0,
        sent: 0,
        last_departure_ns: start_ns,
        final_lag_ns: 0,
        last_on_time_ns: None,
        max_lag_ns: 0,
        late_bursts: 0,
        interrupted: false,
    };
    'run: for b in 0..plan.bursts() {
        let len = plan.burst_len(b);
        sink.prepare(b * plan.burst as u64, len);
        let due = start_ns + plan.due_ns(b);
        let mut now = clock.now_ns();
        while now < due {
            if stop() {
                p.interrupted = true;
                break 'run;
            }
            std::hint::spin_loop();
            now = clock.now_ns();
        }
        if stop() {
            p.interrupted = true;
            break;
        }
        let accepted = sink.send()?;
        let after = clock.now_ns();
        let lag = now - due;
        p.lateness.record(lag);
        p.send_call.record(after - now);
        if b > 0 {
            p.inter_departure.record(now - p.last_departure_ns);
        }
        if lag > late_after {
            p.late_bursts += 1;
        } else {
            p.last_on_time_ns = Some(due - start_ns);
        }
        p.max_lag_ns = p.max_lag_ns.max(lag);
        p.final_lag_ns = lag;
        p.last_departure_ns = now;
        p.bursts += 1;
        p.attempted += len as u64;
        p.sent += accepted as u64;
        interval_max_lag = interval_max_lag.max(lag);
        if after >= next_report {
            each_second(SecondReport {
                elapsed_ns: after - start_ns,
                attempted: p.attempted,
                sent: p.sent,
                late_bursts: p.late_bursts,
                interval_max_lag_ns: interval_max_lag,
                lag_ns: lag,
            });
            interval_max_lag = i64::MIN;
            next_report += REPORT_EVERY_NS * ((after - next_report) / REPORT_EVERY_NS + 1);
        }
    }
    Ok(p)
}

/// Did the generator hold its rate?
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Verdict {
    /// Frames accepted by the kernel per second of the run as it happened.
    pub achieved_rate_pps: f64,
    /// Not interrupted, and some burst in the last tenth of the run left at most one
    /// burst interval late: a generator short of the rate never gets back on time.
    pub kept_up: bool,
    /// The run's length as it happened: the planned slots of the frames sent, plus
    /// the last burst's lateness.
    pub elapsed_ns: i64,
}

/// The share of the run at whose end the generator must still have been on time.
const ON_TIME_WITHIN_LAST: f64 = 0.10;

/// A generator that cannot sustain its rate falls behind from the start and never
/// catches up; one that only suffered passing stalls (preemption) sends the overdue
/// bursts back to back and is on time again. So it kept up when it sent everything
/// and some burst in the last 10 % of the run left on time (at most one burst interval
/// late). How much the stalls disturbed the traffic is for the pacing error to tell.
pub fn verdict(plan: &Plan, p: &Pacing) -> Verdict {
    let elapsed_ns = p.final_lag_ns + plan.frame_due_ns(p.attempted);
    let achieved_rate_pps = if p.bursts == 0 { 0.0 } else { p.sent as f64 * 1e9 / elapsed_ns.max(1) as f64 };
    let last_burst_due = plan.due_ns(plan.bursts().saturating_sub(1));
    let window_start = last_burst_due - (plan.duration_ns() as f64 * ON_TIME_WITHIN_LAST) as i64;
    let on_time_at_the_end = plan.frames == 0 || p.last_on_time_ns.is_some_and(|t| t >= window_start);
    Verdict { achieved_rate_pps, kept_up: !p.interrupted && on_time_at_the_end, elapsed_ns }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::{Cell, RefCell};
    use std::rc::Rc;

    /// A clock that advances `tick` ns per reading, plus whatever the sink spends.
    struct SimClock {
        now: Rc<Cell<i64>>,
        tick: i64,
    }

    impl Clock for SimClock {
        fn now_ns(&mut self) -> i64 {
            let t = self.now.get();
            self.now.set(t + self.tick);
            t
        }
    }

    /// A sink whose send of burst `b` takes `cost(b)` ns of simulated time.
    struct SimSink<F: Fn(u64) -> i64> {
        now: Rc<Cell<i64>>,
        cost: F,
        prepared: Option<(u64, u32)>,
        log: Rc<RefCell<Vec<(u64, u32, i64)>>>,
        burst_index: u64,
    }

    impl<F: Fn(u64) -> i64> BurstSink for SimSink<F> {
        fn prepare(&mut self, first: u64, len: u32) {
            self.prepared = Some((first, len));
        }
        fn send(&mut self) -> Result<u32, Fatal> {
            let (first, len) = self.prepared.take().expect("send after prepare");
            self.log.borrow_mut().push((first, len, self.now.get()));
            self.now.set(self.now.get() + (self.cost)(self.burst_index));
            self.burst_index += 1;
            Ok(len)
        }
    }

    type Log = Rc<RefCell<Vec<(u64, u32, i64)>>>;

    fn simulate(plan: Plan, tick: i64, cost: impl Fn(u64) -> i64, stop_after: Option<usize>) -> (Pacing, Log) {
        let now = Rc::new(Cell::new(1_000_000));
        let log = Rc::new(RefCell::new(Vec::new()));
        let mut clock = SimClock { now: now.clone(), tick };
        let mut sink = SimSink { now: now.clone(), cost, prepared: None, log: log.clone(), burst_index: 0 };
        let start = 2_000_000;
        let stop = || stop_after.is_some_and(|n| log.borrow().len() >= n);
        let p = pace(&plan, start, &mut clock, &mut sink, stop, |_| {}).unwrap();
        (p, log)
    }

    #[test]
    fn due_times_come_from_the_start_and_never_drift() {
        // 3 pps: intervals of 333 333 333 and 333 333 334 ns, exactly 1 s every 3 frames,
        // even three billion frames (31 years) in, where adding a rounded interval would
        // have drifted by a second.
        let plan = Plan::new(3, 1, 3_000_000_000).unwrap();
        for k in [1u64, 7, 1_000_000, 1_000_000_000] {
            assert_eq!(plan.due_ns(3 * k), k as i64 * 1_000_000_000);
        }
        for b in 0..1000 {
            let gap = plan.due_ns(b + 1) - plan.due_ns(b);
            assert!(gap == 333_333_333 || gap == 333_333_334, "gap {gap}");
        }
        // A rate that does not divide a second: frame `rate` is due at exactly 1 s.
        let plan = Plan::new(1_000_003, 1, 10_000_000).unwrap();
        assert_eq!(plan.due_ns(1_000_003), 1_000_000_000);
        assert_eq!(plan.due_ns(7_000_021), 7_000_000_000);
    }

    #[test]
    fn bursts_cover_the_frames_and_the_last_may_be_short() {
        let plan = Plan::new(1000, 4, 10).unwrap();
        assert_eq!(plan.bursts(), 3);
        assert_eq!((0..3).map(|b| plan.burst_len(b)).collect::<Vec<_>>(), vec![4, 4, 2]);
        assert_eq!((0..3).map(|b| plan.due_ns(b)).collect::<Vec<_>>(), vec![0, 4_000_000, 8_000_000]);
        assert_eq!(plan.duration_ns(), 10_000_000);
        assert_eq!(Plan::frames_in(100_000, 2_500_000_000), 250_000);
        assert_eq!(Plan::new(0, 1, 1), Err(PlanError::ZeroRate));
        assert_eq!(Plan::new(1, 0, 1), Err(PlanError::ZeroBurst));
        assert_eq!(Plan::new(1, MAX_BURST + 1, 1), Err(PlanError::BurstTooLarge(MAX_BURST + 1)));
        assert!(Plan::new(1, MAX_BURST, 1).is_ok());
    }

    #[test]
    fn a_fast_sender_departs_on_time_and_keeps_up() {
        let plan = Plan::new(1_000_000, 1, 20_000).unwrap();
        let (mut p, log) = simulate(plan, 10, |_| 300, None);
        assert_eq!((p.sent, p.bursts, p.late_bursts), (20_000, 20_000, 0));
        assert!(p.lateness.max().unwrap() < 10, "late by {:?}", p.lateness.max());
        assert_eq!(p.inter_departure.quantile(lowtail_stats::Quantile::decimal(5, 1)), Some(1000));
        // The k-th frame left at its due time: the loop's last reading is within one
        // tick past it, and the sink sees the clock one reading later.
        for &(first, _, at) in log.borrow().iter().step_by(997) {
            let due = 2_000_000 + plan.due_ns(first);
            assert!((10..20).contains(&(at - due)), "frame {first} at {at}, due {due}");
        }
        let v = verdict(&plan, &p);
        assert!(v.kept_up);
        assert!((v.achieved_rate_pps - 1e6).abs() < 1e6 * 1e-4, "{}", v.achieved_rate_pps);
    }

    #[test]
    fn a_sender_too_slow_for_the_rate_falls_behind_and_says_so() {
        // Each send takes 2 µs, so 1 Mpps cannot be held: about 500 kpps is.
        let plan = Plan::new(1_000_000, 1, 20_000).unwrap();
        let (p, _) = simulate(plan, 10, |_| 2000, None);
        let v = verdict(&plan, &p);
        assert!(!v.kept_up);
        assert!((v.achieved_rate_pps - 5e5).abs() < 5e5 * 0.01, "{}", v.achieved_rate_pps);
        assert!(p.final_lag_ns > 19_000_000 && p.final_lag_ns < 21_000_000, "{}", p.final_lag_ns);
        assert_eq!(p.sent, 20_000, "a slow generator still sends every frame");
    }

    #[test]
    fn a_passing_stall_is_caught_up_and_counted() {
        // 1 Mpps, sends of 200 ns, one 500 µs stall at burst 1000: the generator sends
        // the overdue frames back to back (gaining 1 µs minus the send and two 10 ns clock
        // readings, 780 ns, per frame) and is on time again.
        let plan = Plan::new(1_000_000, 1, 100_000).unwrap();
        let (mut p, _) = simulate(plan, 10, |b| if b == 1000 { 500_000 } else { 200 }, None);
        let v = verdict(&plan, &p);
        assert!(v.kept_up);
        assert!(p.max_lag_ns >= 499_000 && p.max_lag_ns <= 500_200, "{}", p.max_lag_ns);
        assert!(p.final_lag_ns < 10);
        // 500 µs / 780 ns gained per frame: ~640 frames left more than an interval late.
        assert!((630..=650).contains(&p.late_bursts), "{}", p.late_bursts);
        assert_eq!(p.inter_departure.min(), Some(220), "catch-up frames leave back to back");
    }

    #[test]
    fn a_stall_just_before_the_end_is_not_taken_for_a_slow_generator() {
        // 1 ms stall 50 frames before the end: the generator is still behind when it
        // finishes, but it was on time until then.
        let plan = Plan::new(1_000_000, 1, 100_000).unwrap();
        let (p, _) = simulate(plan, 10, |b| if b == 99_950 { 1_000_000 } else { 200 }, None);
        assert!(p.final_lag_ns > 900_000, "{}", p.final_lag_ns);
        assert!(verdict(&plan, &p).kept_up);
    }

    #[test]
    fn a_generator_slightly_too_slow_is_caught_too() {
        // Sends of 1.01 µs at 1 Mpps: 1 % short, behind by only ~1 ms at the end of a
        // 100 ms run, but never on time after the start.
        let plan = Plan::new(1_000_000, 1, 100_000).unwrap();
        let (p, _) = simulate(plan, 5, |_| 1_000, None);
        assert!(p.final_lag_ns < 2_000_000, "{}", p.final_lag_ns);
        assert!(!verdict(&plan, &p).kept_up);
    }

    #[test]
    fn bursts_are_handed_over_whole_at_their_due_time() {
        let plan = Plan::new(100_000, 8, 8 * 50 + 3).unwrap();
        let (mut p, log) = simulate(plan, 10, |_| 500, None);
        let log = log.borrow();
        assert_eq!(log.len(), 51);
        assert!(log[..50].iter().all(|&(_, len, _)| len == 8));
        assert_eq!(log[50].1, 3);
        assert_eq!(
            log.iter().map(|&(first, _, _)| first).collect::<Vec<_>>(),
            (0..51).map(|b| b * 8).collect::<Vec<_>>()
        );
        assert_eq!(p.inter_departure.quantile(lowtail_stats::Quantile::decimal(5, 1)), Some(80_000));
        assert_eq!(p.sent, 403);
        assert!(verdict(&plan, &p).kept_up);
    }

    #[test]
    fn each_second_reports_the_counts_so_far_and_the_worst_lag_since_the_last() {
        // 1000 pps for 3.5 s, sends of 100 ns, one 2 ms stall at burst 1500.
        let plan = Plan::new(1000, 1, 3500).unwrap();
        let now = Rc::new(Cell::new(1_000_000));
        let log = Rc::new(RefCell::new(Vec::new()));
        let cost = |b: u64| if b == 1500 { 2_000_000 } else { 100 };
        let mut sink = SimSink { now: now.clone(), cost, prepared: None, log, burst_index: 0 };
        let mut reports = Vec::new();
        // A coarse clock (1 µs a reading) keeps the simulated waiting short.
        pace(&plan, 2_000_000, &mut SimClock { now, tick: 1_000 }, &mut sink, || false, |r| reports.push(r)).unwrap();
        assert_eq!(reports.len(), 3, "{reports:?}");
        assert_eq!(reports.iter().map(|r| r.sent).collect::<Vec<_>>(), vec![1001, 2001, 3001]);
        assert!(reports[0].interval_max_lag_ns <= 1_000);
        // The burst after the stall leaves 1 ms late (2 ms of stall, 1 ms of it its own interval).
        assert!(reports[1].interval_max_lag_ns >= 990_000, "the stall shows in its second: {reports:?}");
        assert!(reports[2].interval_max_lag_ns <= 1_000, "and only there");
        assert!(reports.windows(2).all(|w| (w[1].elapsed_ns - w[0].elapsed_ns - 1_000_000_000).abs() <= 2_000));
    }

    #[test]
    fn stopping_ends_the_run_between_bursts() {
        let plan = Plan::new(10_000, 2, 1000).unwrap();
        let (p, log) = simulate(plan, 10, |_| 100, Some(10));
        assert!(p.interrupted);
        assert_eq!(log.borrow().len(), 10);
        assert_eq!(p.sent, 20);
        assert!(!verdict(&plan, &p).kept_up);
    }
}
