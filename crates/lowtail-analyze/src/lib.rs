//! Captures → matched latencies → figures, in one streaming pass.
//!
//! `analyze_pair` merges the two captures in timestamp order, matches packets by id,
//! and accumulates every figure on the way: exact percentiles, the HDR distribution,
//! histograms, the worst events, per-second rates, and the same per flow. The matched series can be exported
//! to Parquet for the tail models.
#![warn(missing_docs)]

mod error;
mod export;
mod figures;
mod memory;
mod options;
mod pipeline;
mod reader;

pub use error::{AnalyzeError, ExportError, OptionsError};
pub use export::{SeriesWriter, SERIES_COLUMNS};
pub use figures::{Analysis, FlowFigures, FlowsPart, LatencySummary, SideSummary};
pub use memory::{LimitSource, MemoryLimit};
pub use options::{AnalyzeOptions, MAX_HISTOGRAM_BINS, MAX_WORST};
pub use pipeline::{analyze_pair, Control};
pub use reader::MAX_FLOWS;
