//! The core's time taken by interrupts, as a stream of disjoint busy intervals.
//!
//! Several interrupt processes are merged; an interrupt raised while another one runs
//! is handled right after it, so overlapping requests make one longer busy interval.

use std::collections::VecDeque;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

use crate::spec::InterruptSpec;

struct Source {
    spec: InterruptSpec,
    count: u64,
    next_start: i64,
    rng: Xoshiro256PlusPlus,
}

impl Source {
    fn new(spec: InterruptSpec, seed: u64) -> Self {
        let mut s = Source { next_start: spec.phase_ns, spec, count: 0, rng: Xoshiro256PlusPlus::seed_from_u64(seed) };
        if s.spec.poisson {
            s.next_start = s.spec.phase_ns + s.exp_gap();
        }
        s
    }

    fn exp_gap(&mut self) -> i64 {
        let u: f64 = self.rng.random::<f64>();
        (-(1.0 - u).ln() * 1e9 / self.spec.rate_hz).round() as i64
    }

    /// The next request (start, duration) and advance.
    fn pop(&mut self) -> (i64, i64) {
        let durations = &self.spec.durations_ns;
        let out = (self.next_start, durations[(self.count % durations.len() as u64) as usize]);
        self.count += 1;
        self.next_start = if self.spec.poisson {
            self.next_start + self.exp_gap()
        } else {
            // From the phase each time: no rounding error accumulates over a long run.
            self.spec.phase_ns + (self.count as f64 * 1e9 / self.spec.rate_hz).round() as i64
        };
        out
    }
}

/// Busy intervals [start, end) in time order, generated lazily as the simulation asks.
pub struct InterruptTimeline {
    sources: Vec<Source>,
    /// Intervals not yet entirely in the past.
    window: VecDeque<(i64, i64)>,
    busy_until: i64,
}

impl InterruptTimeline {
    /// The interrupts of `specs`, drawn from `seed`.
    pub fn new(specs: &[InterruptSpec], seed: u64) -> Self {
        let sources = specs
            .iter()
            .enumerate()
            .map(|(i, s)| Source::new(s.clone(), seed.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(i as u64 + 1)))
            .collect();
        InterruptTimeline { sources, window: VecDeque::new(), busy_until: i64::MIN }
    }

    /// Append the next merged busy interval; false when there are no interrupts.
    fn extend(&mut self) -> bool {
        let Some(src) = self.sources.iter_mut().min_by_key(|s| s.next_start) else {
            return false;
        };
        let (start, dur) = src.pop();
        let begin = start.max(self.busy_until);
        let end = begin + dur;
        self.busy_until = end;
        match self.window.back_mut() {
            Some(last) if last.1 >= begin => last.1 = end,
            _ => self.window.push_back((begin, end)),
        }
        true
    }

    /// Make sure the window covers every interval that starts before `t`, plus the
    /// first one starting at or after it.
    fn cover(&mut self, t: i64) -> bool {
        if self.sources.is_empty() {
            return false;
        }
        while self.window.back().is_none_or(|&(a, _)| a <= t) {
            self.extend();
        }
        true
    }

    /// Forget intervals that ended at or before `t` (time never goes back).
    fn forget(&mut self, t: i64) {
        while self.window.front().is_some_and(|&(_, b)| b <= t) {
            self.window.pop_front();
        }
    }

    /// The first moment at or after `t` when the core is not in an interrupt.
    pub fn available(&mut self, t: i64) -> i64 {
        if !self.cover(t) {
            return t;
        }
        self.forget(t);
        match self.window.front() {
            Some(&(a, b)) if a <= t => b,
            _ => t,
        }
    }

    /// When `work` nanoseconds of packet work started at `t` are done, interrupts included.
    pub fn finish(&mut self, mut t: i64, mut work: i64) -> i64 {
        loop {
            if !self.cover(t + work) {
                return t + work;
            }
            self.forget(t);
            let Some(&(a, b)) = self.window.front() else {
                return t + work;
            };
            if a <= t {
                t = b;
                continue;
            }
            if t + work <= a {
                return t + work;
            }
            work -= a - t;
            t = b;
        }
    }
}
