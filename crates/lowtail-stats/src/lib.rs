//! Statistics over integer-nanosecond samples.
//!
//! Headline percentiles must be exact (the same numbers as SQL `percentile_disc`),
//! yet a 170-million-sample run must not need 170 million stored values. Latencies
//! are integers, so a count per distinct nanosecond value is exact; `exact` keeps
//! those counts in lazily allocated pages, which costs memory proportional to the
//! spread of the values, not their number.
#![warn(missing_docs)]

pub mod bins;
pub mod confidence;
pub mod dispersion;
pub mod evidence;
pub mod exact;
pub mod hgrm;
pub mod intervals;
pub mod rank;
pub mod rates;
pub mod summary;
pub mod worst;

pub use bins::{auto_bins, Bin};
pub use evidence::Evidence;
pub use exact::ExactHistogram;
pub use hgrm::HdrRecorder;
pub use rank::{nearest_rank, Quantile, QuantileError};
pub use rates::PerSecond;
pub use summary::{SeriesSummary, SummaryError, TimeBlocks};
pub use worst::{WorstEvent, WorstN};

/// The percentiles every summary reports, with their JSON keys, held exactly.
pub const HEADLINE_PERCENTILES: [(&str, Quantile); 7] = [
    ("p50", Quantile::decimal(5, 1)),
    ("p90", Quantile::decimal(9, 1)),
    ("p99", Quantile::decimal(99, 2)),
    ("p99_9", Quantile::decimal(999, 3)),
    ("p99_99", Quantile::decimal(9999, 4)),
    ("p99_999", Quantile::decimal(99_999, 5)),
    ("p99_9999", Quantile::decimal(999_999, 6)),
];
