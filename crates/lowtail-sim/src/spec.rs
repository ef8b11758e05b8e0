//! What a simulated device and its traffic look like. Every field has a default, so a
//! spec names only what differs; unknown keys are an error (a typo must not be ignored).

use serde::{Deserialize, Serialize};

use crate::error::SimError;

/// The most packets one simulation takes: it keeps two timestamps per packet (16 bytes),
/// so 100 million are 1.6 GB — more than any case of a sweep needs.
pub const MAX_PACKETS: u64 = 100_000_000;

/// How packets arrive at the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ArrivalKind {
    /// Constant rate: bursts start exactly `burst / rate_pps` seconds apart.
    Cbr,
    /// Poisson: exponential gaps between bursts with the same mean.
    Poisson,
}

/// Distribution of the CPU time one packet needs (nanoseconds).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Service {
    /// Every packet costs the same.
    Constant {
        /// The cost.
        ns: f64,
    },
    /// Exponentially distributed.
    Exponential {
        /// The mean.
        mean_ns: f64,
    },
    /// Uniform between two bounds.
    Uniform {
        /// Lower bound.
        min_ns: f64,
        /// Upper bound.
        max_ns: f64,
    },
    /// Normal, cut at zero (a negative CPU time is meaningless).
    Normal {
        /// The mean before the cut.
        mean_ns: f64,
        /// The standard deviation before the cut.
        sd_ns: f64,
    },
    /// exp(N(mu, sigma)) with mu, sigma given as the median and the log-space sigma.
    Lognormal {
        /// The median.
        median_ns: f64,
        /// The standard deviation of the logarithm.
        sigma: f64,
    },
}

impl Service {
    /// The mean cost, as configured.
    pub fn mean_ns(&self) -> f64 {
        match *self {
            Service::Constant { ns } => ns,
            Service::Exponential { mean_ns } => mean_ns,
            Service::Uniform { min_ns, max_ns } => (min_ns + max_ns) / 2.0,
            // The mean of the cut normal differs from mean_ns only when sd is large
            // against the mean; the model reports it as configured.
            Service::Normal { mean_ns, .. } => mean_ns,
            Service::Lognormal { median_ns, sigma } => median_ns * (sigma * sigma / 2.0).exp(),
        }
    }

    fn validate(&self) -> Result<(), SimError> {
        let ok = match *self {
            Service::Constant { ns } => ns >= 0.0 && ns.is_finite(),
            Service::Exponential { mean_ns } => mean_ns > 0.0 && mean_ns.is_finite(),
            Service::Uniform { min_ns, max_ns } => min_ns >= 0.0 && max_ns >= min_ns && max_ns.is_finite(),
            Service::Normal { mean_ns, sd_ns } => mean_ns.is_finite() && sd_ns >= 0.0 && sd_ns.is_finite(),
            Service::Lognormal { median_ns, sigma } => {
                median_ns > 0.0 && median_ns.is_finite() && sigma >= 0.0 && sigma.is_finite()
            }
        };
        if ok {
            Ok(())
        } else {
            Err(SimError::Spec(format!("service {self:?}: parameters must be finite, non-negative and ordered")))
        }
    }
}

/// Interrupts hitting the processing core. While one runs, the core does nothing else
/// (packet work is preempted and resumes after it).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct InterruptSpec {
    /// Interrupts per second.
    pub rate_hz: f64,
    /// Durations of successive interrupts, cycled: [5500, 8200] makes every second one longer.
    pub durations_ns: Vec<i64>,
    /// Time of the first interrupt after the simulation start.
    pub phase_ns: i64,
    /// Periodic (a timer tick) or Poisson (exponential gaps with the same mean rate).
    pub poisson: bool,
}

impl Default for InterruptSpec {
    fn default() -> Self {
        InterruptSpec { rate_hz: 250.0, durations_ns: vec![5_000], phase_ns: 0, poisson: false }
    }
}

/// A device and its traffic: everything one simulation needs. Unknown keys are an error.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimSpec {
    /// Packets offered to the device.
    pub packets: u64,
    /// Offered rate, packets per second.
    pub rate_pps: f64,
    /// Constant-rate or Poisson bursts.
    pub arrivals: ArrivalKind,
    /// Packets per burst, `burst_gap_ns` apart (back to back on the wire).
    pub burst: u32,
    /// Gap between the packets of one burst.
    pub burst_gap_ns: f64,
    /// CPU time per packet.
    pub service: Service,
    /// Fixed cost of one poll that takes a batch (driver call, descriptor refill).
    pub batch_overhead_ns: f64,
    /// At most this many waiting packets are taken per poll; all of them leave together
    /// when the last one is processed.
    pub batch: u32,
    /// Packets the receive queue holds while the core is busy; an arrival finding it
    /// full is dropped. 0 = unbounded.
    pub queue_capacity: u64,
    /// Latency outside the core (wire, NIC, DMA both ways: the URLLC studies' 2·t_transfer).
    pub base_latency_ns: i64,
    /// Interrupt sources hitting the core.
    pub interrupts: Vec<InterruptSpec>,
    /// Seed of every random draw: the same spec gives the same result.
    pub seed: u64,
}

impl Default for SimSpec {
    fn default() -> Self {
        SimSpec {
            packets: 100_000,
            rate_pps: 10_000.0,
            arrivals: ArrivalKind::Cbr,
            burst: 1,
            burst_gap_ns: 0.0,
            service: Service::Constant { ns: 2_000.0 },
            batch_overhead_ns: 0.0,
            batch: 1,
            queue_capacity: 0,
            base_latency_ns: 0,
            interrupts: vec![],
            seed: 1,
        }
    }
}

impl SimSpec {
    /// Every value in its range, or why not.
    pub fn validate(&self) -> Result<(), SimError> {
        let bad = |m: String| Err(SimError::Spec(m));
        if !(self.rate_pps > 0.0 && self.rate_pps.is_finite()) {
            return bad(format!("rate_pps must be a positive number, not {}", self.rate_pps));
        }
        if self.packets == 0 {
            return bad("packets must be at least 1".into());
        }
        if self.packets > MAX_PACKETS {
            return bad(format!(
                "packets must be at most {MAX_PACKETS} (every packet's times are kept), not {}",
                self.packets
            ));
        }
        if self.burst == 0 || self.batch == 0 {
            return bad("burst and batch must be at least 1".into());
        }
        if !(self.burst_gap_ns >= 0.0 && self.burst_gap_ns.is_finite()) {
            return bad("burst_gap_ns must be a non-negative number".into());
        }
        let burst_span = self.burst_gap_ns * (self.burst - 1) as f64;
        if self.arrivals == ArrivalKind::Cbr && burst_span >= self.burst as f64 * 1e9 / self.rate_pps {
            return bad(format!(
                "a burst of {} packets {} ns apart lasts longer than the {} ns between bursts at {} pps",
                self.burst,
                self.burst_gap_ns,
                self.burst as f64 * 1e9 / self.rate_pps,
                self.rate_pps
            ));
        }
        if !(self.batch_overhead_ns >= 0.0 && self.batch_overhead_ns.is_finite()) {
            return bad("batch_overhead_ns must be a non-negative number".into());
        }
        self.service.validate()?;
        for (i, irq) in self.interrupts.iter().enumerate() {
            if !(irq.rate_hz > 0.0 && irq.rate_hz.is_finite()) {
                return bad(format!("interrupts[{i}]: rate_hz must be positive"));
            }
            if irq.durations_ns.is_empty() || irq.durations_ns.iter().any(|&d| d < 0) {
                return bad(format!("interrupts[{i}]: durations_ns must list at least one non-negative duration"));
            }
            let mean = irq.durations_ns.iter().sum::<i64>() as f64 / irq.durations_ns.len() as f64;
            if mean * irq.rate_hz >= 1e9 {
                return bad(format!("interrupts[{i}]: {} Hz × {mean} ns leaves the core no time at all", irq.rate_hz));
            }
        }
        Ok(())
    }
}
