//! Statistics over integer-nanosecond samples.
//!
//! Headline percentiles must be exact (the same numbers as SQL `percentile_disc`),
//! yet a 170-million-sample run must not need 170 million stored values. Latencies
//! are integers, so a count per distinct nanosecond value is exact; `exact` keeps
//! those counts in lazily allocated pages, which costs memory proportional to the
//! spread of the values, not their number.
#![warn(missing_docs)]

pub mod bins;
pub mod exact;
pub mod hgrm;
pub mod rates;
pub mod worst;

pub use bins::{auto_bins, Bin};
pub use exact::{nearest_rank, ExactHistogram};
pub use hgrm::HdrRecorder;
pub use rates::PerSecond;
pub use worst::{WorstEvent, WorstN};

/// The percentiles every summary reports, with their JSON key suffixes.
pub const HEADLINE_PERCENTILES: [(&str, f64); 7] = [
    ("p50", 0.50),
    ("p90", 0.90),
    ("p99", 0.99),
    ("p99_9", 0.999),
    ("p99_99", 0.9999),
    ("p99_999", 0.99999),
    ("p99_9999", 0.999999),
];
