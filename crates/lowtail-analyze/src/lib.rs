//! Captures → matched latencies → figures, in one streaming pass.
//!
//! `analyze_pair` merges the two captures in timestamp order, matches packets by id,
//! and accumulates every figure on the way: exact percentiles, the HDR distribution,
//! histograms, the worst events, per-second rates. The matched series can be exported
//! to Parquet for the tail models.

mod export;
mod figures;
mod pipeline;
mod reader;

pub use export::SeriesWriter;
pub use figures::{Analysis, LatencySummary, SideSummary};
pub use pipeline::{analyze_pair, AnalyzeError, AnalyzeOptions, Control};
