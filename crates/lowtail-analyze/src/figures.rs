use serde::Serialize;

use lowtail_stats::hgrm::PercentileRow;
use lowtail_stats::{Bin, WorstEvent};

/// Latency figures in integer nanoseconds (mean and stddev as floats).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LatencySummary {
    pub min: i64,
    pub mean: f64,
    pub stddev: f64,
    pub p50: i64,
    pub p90: i64,
    pub p99: i64,
    pub p99_9: i64,
    pub p99_99: i64,
    pub p99_999: i64,
    pub p99_9999: i64,
    pub max: i64,
    /// Samples the figures are computed from (received minus negative).
    pub samples: u64,
}

/// What one capture file held.
#[derive(Debug, Clone, Serialize, Default)]
pub struct SideSummary {
    pub path: String,
    pub format: String,
    pub compression: String,
    pub bytes: u64,
    /// Frames (or records) read.
    pub frames: u64,
    /// Frames carrying an id.
    pub with_id: u64,
    pub not_udp: u64,
    pub too_short: u64,
    /// The snap length cut off the id.
    pub snapped: u64,
    pub snaplen: u32,
    pub first_ts_ns: Option<i64>,
    pub last_ts_ns: Option<i64>,
    /// Timestamps lower than their predecessor's.
    pub backwards: u64,
    /// Packets per second since the first PRE packet.
    pub per_second: Vec<u64>,
}

impl SideSummary {
    pub fn foreign(&self) -> u64 {
        self.not_udp + self.too_short + self.snapped
    }
}

/// Everything one analysis found.
#[derive(Debug, Clone, Serialize)]
pub struct Analysis {
    pub sent: u64,
    pub received: u64,
    pub lost: u64,
    pub duplicates: u64,
    pub reordered: u64,
    pub foreign: u64,
    pub negative: u64,
    pub unmatched: u64,
    pub pre_duplicates: u64,
    pub trimmed_pre: u64,
    pub trimmed_post: u64,
    pub trim_ns: i64,
    pub horizon_ns: i64,
    /// First PRE timestamp: time zero of rates and worst events.
    pub start_ts_ns: Option<i64>,
    /// PRE span after the trim.
    pub duration_ns: i64,
    pub latency_ns: Option<LatencySummary>,
    pub percentiles: Vec<PercentileRow>,
    /// HdrHistogram percentile distribution text, values in microseconds.
    pub hgrm: String,
    pub latency_histogram: Vec<Bin>,
    pub jitter_pre_histogram: Vec<Bin>,
    pub jitter_post_histogram: Vec<Bin>,
    pub worst: Vec<WorstEvent>,
    pub pre: SideSummary,
    pub post: SideSummary,
    pub warnings: Vec<String>,
    /// The analysis stopped early (corrupt data): figures cover only part of the input.
    pub partial: bool,
    pub export_path: Option<String>,
    pub export_rows: u64,
    pub elapsed_s: f64,
}

impl Analysis {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("analysis serialises")
    }
}
