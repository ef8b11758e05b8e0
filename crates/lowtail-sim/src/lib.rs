//! A discrete-event model of a packet-processing device under test.
//!
//! Packets arrive (constant rate or Poisson, single or in bursts), wait in a receive
//! queue of bounded capacity, and are taken by one core in batches of at most `batch`;
//! each packet costs a CPU time drawn from a service distribution, interrupts preempt the
//! core, and a batch leaves only when its last packet is done. The result is every
//! packet's fate: its latency, or a drop. It predicts what `lowtail-fwd` with the same
//! `work_ns` and `batch` should measure, and it reproduces the URLLC studies' batch staircases
//! (NOMS 2020, section V-D) and interrupt aliasing (Commun. Mag. 2020, section V-B).
#![warn(missing_docs)]

mod error;
pub mod irq;
pub mod sim;
pub mod spec;

pub use error::SimError;
pub use sim::{simulate, SimResult};
pub use spec::{ArrivalKind, InterruptSpec, Service, SimSpec};

#[cfg(test)]
mod tests;
