//! Synthetic capture pairs with known answers.
//!
//! A model DuT (base latency, exponential jitter, periodic interrupts, rare spikes,
//! loss, loss bursts, duplicates, reordering, a skewed clock) turns a paced packet
//! stream into a PRE and a POST capture in any format lowtail reads, plus — optionally
//! — the ground truth per packet, so tests can check every figure independently.
#![warn(missing_docs)]

mod error;
mod model;
mod out;

pub use error::SynthError;
pub use model::{generate, SynthSpec, SynthSummary};
