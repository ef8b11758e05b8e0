//! The device model: one core that polls a receive queue, takes up to `batch` waiting
//! packets, processes them one after the other (interrupts preempt it), and releases
//! the whole batch when the last packet is done — the blocking batch strategy of the
//! URLLC studies' DPDK Snort (NOMS 2020, section V-D).

use std::collections::VecDeque;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

use crate::error::SimError;
use crate::irq::InterruptTimeline;
use crate::spec::{ArrivalKind, Service, SimSpec};

/// Per-packet outcome, in arrival order. `departure_ns` is `None` for a drop.
#[derive(Debug, Clone, Default)]
pub struct SimResult {
    /// Arrival time of every packet.
    pub arrival_ns: Vec<i64>,
    /// Leaving time including `base_latency_ns`, so latency = departure − arrival.
    pub departure_ns: Vec<Option<i64>>,
    /// Packets dropped at a full receive queue.
    pub dropped: u64,
    /// Polls that took a batch.
    pub batches: u64,
    /// Time the core spent on packets (service and batch overhead).
    pub work_ns: i64,
    /// From the first arrival to the last departure.
    pub span_ns: i64,
}

impl SimResult {
    /// Latencies of the delivered packets, in arrival order.
    pub fn latencies(&self) -> Vec<i64> {
        self.arrival_ns.iter().zip(&self.departure_ns).filter_map(|(a, d)| d.map(|d| d - a)).collect()
    }
}

struct Arrivals {
    spec: SimSpec,
    index: u64,
    burst_start: f64,
    rng: Xoshiro256PlusPlus,
}

impl Arrivals {
    fn new(spec: &SimSpec) -> Self {
        Arrivals { spec: spec.clone(), index: 0, burst_start: 0.0, rng: Xoshiro256PlusPlus::seed_from_u64(spec.seed) }
    }

    fn next(&mut self) -> Option<i64> {
        if self.index >= self.spec.packets {
            return None;
        }
        let burst = self.spec.burst as u64;
        let (burst_no, in_burst) = (self.index / burst, self.index % burst);
        let mean_gap = burst as f64 * 1e9 / self.spec.rate_pps;
        if in_burst == 0 && burst_no > 0 {
            self.burst_start = match self.spec.arrivals {
                // Recomputed from the index: no drift over millions of packets.
                ArrivalKind::Cbr => burst_no as f64 * mean_gap,
                ArrivalKind::Poisson => {
                    let u: f64 = self.rng.random::<f64>();
                    self.burst_start - (1.0 - u).ln() * mean_gap
                }
            };
        }
        self.index += 1;
        Some((self.burst_start + in_burst as f64 * self.spec.burst_gap_ns).round() as i64)
    }
}

struct ServiceSampler {
    service: Service,
    rng: Xoshiro256PlusPlus,
}

impl ServiceSampler {
    fn sample(&mut self) -> f64 {
        let u = |rng: &mut Xoshiro256PlusPlus| rng.random::<f64>();
        match self.service {
            Service::Constant { ns } => ns,
            Service::Exponential { mean_ns } => -(1.0 - u(&mut self.rng)).ln() * mean_ns,
            Service::Uniform { min_ns, max_ns } => min_ns + u(&mut self.rng) * (max_ns - min_ns),
            Service::Normal { mean_ns, sd_ns } => (mean_ns + sd_ns * self.standard_normal()).max(0.0),
            Service::Lognormal { median_ns, sigma } => median_ns * (sigma * self.standard_normal()).exp(),
        }
    }

    /// Box–Muller (one of the pair is enough here).
    fn standard_normal(&mut self) -> f64 {
        let u1: f64 = 1.0 - self.rng.random::<f64>();
        let u2: f64 = self.rng.random::<f64>();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

/// Run the model. Memory is two words per offered packet.
pub fn simulate(spec: &SimSpec) -> Result<SimResult, SimError> {
    spec.validate()?;
    let n = spec.packets as usize;
    let mut result =
        SimResult { arrival_ns: Vec::with_capacity(n), departure_ns: Vec::with_capacity(n), ..Default::default() };
    let mut arrivals = Arrivals::new(spec);
    let mut service = ServiceSampler {
        service: spec.service.clone(),
        rng: Xoshiro256PlusPlus::seed_from_u64(spec.seed ^ 0x5eed_5e71),
    };
    let mut irqs = InterruptTimeline::new(&spec.interrupts, spec.seed);
    let capacity = if spec.queue_capacity == 0 { usize::MAX } else { spec.queue_capacity as usize };
    // Indices of packets in the receive queue, oldest first.
    let mut queue: VecDeque<usize> = VecDeque::new();
    let mut pending = arrivals.next();
    let mut now = i64::MIN;
    let mut work_total = 0.0f64;
    // Fractional nanoseconds of service carried over, so rounding does not bias the mean.
    let mut carry = 0.0f64;

    loop {
        // Arrivals up to `now` enter the queue (or are dropped when it is full).
        while let Some(t) = pending.filter(|&t| t <= now) {
            let idx = result.arrival_ns.len();
            result.arrival_ns.push(t);
            result.departure_ns.push(None);
            if queue.len() < capacity {
                queue.push_back(idx);
            } else {
                result.dropped += 1;
            }
            pending = arrivals.next();
        }
        if queue.is_empty() {
            match pending {
                // Busy polling: the core notices a packet as soon as it is free to.
                Some(t) => {
                    now = irqs.available(t);
                    continue;
                }
                None => break,
            }
        }
        let take = queue.len().min(spec.batch as usize);
        let mut work = spec.batch_overhead_ns + carry;
        let batch: Vec<usize> = queue.drain(..take).collect();
        for _ in &batch {
            work += service.sample();
        }
        let whole = work.floor();
        carry = work - whole;
        work_total += whole;
        let done = irqs.finish(now, whole as i64);
        for idx in batch {
            result.departure_ns[idx] = Some(done + spec.base_latency_ns);
        }
        result.batches += 1;
        now = irqs.available(done);
    }
    result.work_ns = work_total as i64;
    let first = result.arrival_ns.first().copied().unwrap_or(0);
    let last = result.departure_ns.iter().flatten().max().copied().unwrap_or(first);
    result.span_ns = last - first;
    Ok(result)
}
