//! Which flow each frame of a run belongs to. Without weights, round robin: frame `k` is
//! flow `k mod flows`. With weights, a cycle of Σ weights frames in which flow `i` has
//! exactly `weights[i]` frames: one frame of every flow first, in flow order (so flows
//! appear in the order `lowtail analyze` numbers them, and every flow is seen within the
//! first `flows` frames), then the remaining `weights[i] − 1` frames of each flow spread
//! evenly by smooth weighted round robin (each step the flow furthest behind its share
//! goes next), so a heavy flow never sends its share as one long run.

use std::fmt;

/// The most a flow may weigh.
pub const MAX_FLOW_WEIGHT: u32 = 10_000;
/// The longest cycle (Σ weights): the schedule is kept as one entry per frame of it.
pub const MAX_WEIGHT_SUM: u64 = 1_000_000;

/// Weights that make no schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowWeightsError(String);

impl fmt::Display for FlowWeightsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FlowWeightsError {}

/// The flow of every frame of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowSchedule {
    flows: u32,
    /// One entry per frame of the weighted cycle; empty for round robin.
    cycle: Vec<u16>,
}

impl FlowSchedule {
    /// Frame `k` is flow `k mod flows` (at least one flow).
    pub fn round_robin(flows: u16) -> FlowSchedule {
        FlowSchedule { flows: u32::from(flows.max(1)), cycle: Vec::new() }
    }

    /// Flow `i` has `weights[i]` frames of every Σ weights; all weights equal is round robin.
    pub fn weighted(weights: &[u32]) -> Result<FlowSchedule, FlowWeightsError> {
        let n = weights.len();
        if n == 0 || n > usize::from(u16::MAX) {
            return Err(FlowWeightsError(format!("flow weights: one per flow, 1 to {} of them, not {n}", u16::MAX)));
        }
        if let Some(w) = weights.iter().find(|&&w| w == 0 || w > MAX_FLOW_WEIGHT) {
            return Err(FlowWeightsError(format!("flow weight {w}: each must be 1 to {MAX_FLOW_WEIGHT}")));
        }
        let total: u64 = weights.iter().map(|&w| u64::from(w)).sum();
        if total > MAX_WEIGHT_SUM {
            return Err(FlowWeightsError(format!(
                "flow weights sum to {total}: at most {MAX_WEIGHT_SUM} (one cycle of frames is kept in memory)"
            )));
        }
        if weights.iter().all(|&w| w == weights[0]) {
            return Ok(FlowSchedule::round_robin(n as u16));
        }
        let mut cycle: Vec<u16> = (0..n as u16).collect();
        cycle.reserve(total as usize - n);
        // Smooth weighted round robin over what is left of each flow's weight.
        let rest: Vec<i64> = weights.iter().map(|&w| i64::from(w) - 1).collect();
        let rest_total: i64 = rest.iter().sum();
        let mut credit = vec![0i64; n];
        for _ in 0..rest_total {
            let mut next = 0;
            for i in 0..n {
                credit[i] += rest[i];
                if credit[i] > credit[next] {
                    next = i;
                }
            }
            credit[next] -= rest_total;
            cycle.push(next as u16);
        }
        Ok(FlowSchedule { flows: n as u32, cycle })
    }

    /// How many flows.
    pub fn flows(&self) -> u32 {
        self.flows
    }

    /// The flow of frame number `k` of the run.
    #[inline(always)]
    pub fn flow_of(&self, k: u64) -> u32 {
        if self.cycle.is_empty() {
            (k % u64::from(self.flows)) as u32
        } else {
            u32::from(self.cycle[(k % self.cycle.len() as u64) as usize])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn equal_weights_are_round_robin() {
        let s = FlowSchedule::weighted(&[3, 3, 3]).unwrap();
        assert_eq!(s, FlowSchedule::round_robin(3));
        assert_eq!((0..7).map(|k| s.flow_of(k)).collect::<Vec<_>>(), [0, 1, 2, 0, 1, 2, 0]);
    }

    #[test]
    fn a_heavy_flow_is_spread_through_the_cycle() {
        let s = FlowSchedule::weighted(&[1, 8, 1]).unwrap();
        let cycle: Vec<u32> = (0..10).map(|k| s.flow_of(k)).collect();
        assert_eq!(cycle, [0, 1, 2, 1, 1, 1, 1, 1, 1, 1]);
        let s = FlowSchedule::weighted(&[3, 2]).unwrap();
        assert_eq!((0..5).map(|k| s.flow_of(k)).collect::<Vec<_>>(), [0, 1, 0, 1, 0]);
    }

    #[test]
    fn bad_weights_are_refused() {
        assert!(FlowSchedule::weighted(&[]).is_err());
        assert!(FlowSchedule::weighted(&[1, 0]).unwrap_err().to_string().contains("flow weight 0"));
        assert!(FlowSchedule::weighted(&[MAX_FLOW_WEIGHT + 1]).is_err());
        assert!(FlowSchedule::weighted(&vec![MAX_FLOW_WEIGHT; 101]).unwrap_err().to_string().contains("sum to"));
    }

    proptest! {
        /// Every cycle gives each flow exactly its weight, every flow first appears in flow
        /// order within the first `flows` frames, and no flow waits more than its fair gap.
        #[test]
        fn each_cycle_gives_every_flow_its_weight(weights in prop::collection::vec(1u32..40, 1..30), cycles in 1u64..3) {
            let s = FlowSchedule::weighted(&weights).unwrap();
            let total: u64 = weights.iter().map(|&w| u64::from(w)).sum();
            let mut counts = vec![0u64; weights.len()];
            for k in 0..total * cycles {
                counts[s.flow_of(k) as usize] += 1;
            }
            for (i, &w) in weights.iter().enumerate() {
                prop_assert_eq!(counts[i], u64::from(w) * cycles);
            }
            let first: Vec<u32> = (0..weights.len() as u64).map(|k| s.flow_of(k)).collect();
            prop_assert_eq!(first, (0..weights.len() as u32).collect::<Vec<_>>());
        }
    }
}
