//! What an analysis reports: the document `lowtail analyze --json` prints.

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use lowtail_stats::hgrm::PercentileRow;
use lowtail_stats::{Bin, SeriesSummary, WorstEvent, HEADLINE_PERCENTILES};

/// Latency figures in integer nanoseconds (mean and stddev as floats). Serialised as
/// min, mean, stddev, each headline percentile under its key (p50 … p99_9999), max, samples.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencySummary {
    /// The smallest latency.
    pub min: i64,
    /// The mean latency.
    pub mean: f64,
    /// The standard deviation of the latencies.
    pub stddev: f64,
    /// Exact nearest-rank values of `HEADLINE_PERCENTILES`, in its order.
    pub percentiles: [i64; HEADLINE_PERCENTILES.len()],
    /// The largest latency.
    pub max: i64,
    /// Samples the figures are computed from (received minus negative).
    pub samples: u64,
}

impl LatencySummary {
    /// The headline percentile under `key` ("p50", "p99_9", ...).
    pub fn percentile(&self, key: &str) -> Option<i64> {
        HEADLINE_PERCENTILES.iter().position(|(k, _)| *k == key).map(|i| self.percentiles[i])
    }
}

impl Serialize for LatencySummary {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(HEADLINE_PERCENTILES.len() + 5))?;
        map.serialize_entry("min", &self.min)?;
        map.serialize_entry("mean", &self.mean)?;
        map.serialize_entry("stddev", &self.stddev)?;
        for ((key, _), value) in HEADLINE_PERCENTILES.iter().zip(&self.percentiles) {
            map.serialize_entry(key, value)?;
        }
        map.serialize_entry("max", &self.max)?;
        map.serialize_entry("samples", &self.samples)?;
        map.end()
    }
}

/// One flow's figures: its packets (sent = received + lost, summed over all flows the
/// analysis's own counts exactly) and the latencies of those that arrived.
#[derive(Debug, Clone, Serialize)]
pub struct FlowFigures {
    /// The flow's index: the `flow` column of the matched series.
    pub flow: u32,
    /// The flow as a person reads it ("10.0.0.1:49152 > 10.0.0.2:53"; "other flows" for
    /// the flows beyond `MAX_FLOWS`).
    pub key: String,
    /// PRE packets of this flow after the trim.
    pub sent: u64,
    /// Of those, found in POST (negative latencies included).
    pub received: u64,
    /// Of those, never found in POST.
    pub lost: u64,
    /// Received before they were sent (a clock problem; not in the latency figures).
    pub negative: u64,
    /// Latency figures of the flow's received packets; None when none arrived.
    pub latency_ns: Option<LatencySummary>,
}

/// The analysis's flows.
#[derive(Debug, Clone, Serialize, Default)]
pub struct FlowsPart {
    /// What told the flows apart ("5tuple", "src-port", "none").
    pub key: String,
    /// More flows than an analysis tells apart: the last one holds all the rest.
    pub overflowed: bool,
    /// Each flow, in order of its first packet in PRE.
    pub flows: Vec<FlowFigures>,
}

/// What one capture file held.
#[derive(Debug, Clone, Serialize, Default)]
pub struct SideSummary {
    /// The file as given.
    pub path: String,
    /// Its format's name (`Format::name`).
    pub format: String,
    /// Its compression's name (`Compression::name`).
    pub compression: String,
    /// Its size on disk.
    pub bytes: u64,
    /// Frames (or records) read.
    pub frames: u64,
    /// Frames carrying an id.
    pub with_id: u64,
    /// Frames that are not UDP (or not to the id port).
    pub not_udp: u64,
    /// UDP datagrams too short to hold the id.
    pub too_short: u64,
    /// The snap length cut off the id.
    pub snapped: u64,
    /// The snap length the file announces (0: none).
    pub snaplen: u32,
    /// Timestamp of the first frame with an id.
    pub first_ts_ns: Option<i64>,
    /// Timestamp of the last frame with an id.
    pub last_ts_ns: Option<i64>,
    /// Timestamps lower than their predecessor's.
    pub backwards: u64,
    /// Packets per second since the first PRE packet.
    pub per_second: Vec<u64>,
}

impl SideSummary {
    /// Frames without an id: skipped as foreign traffic.
    pub fn foreign(&self) -> u64 {
        self.not_udp + self.too_short + self.snapped
    }
}

/// Everything one analysis found.
#[derive(Debug, Clone, Serialize)]
pub struct Analysis {
    /// PRE packets after the trim.
    pub sent: u64,
    /// Of those, packets found in POST (first copies).
    pub received: u64,
    /// Sent packets never found in POST within the horizon.
    pub lost: u64,
    /// Extra POST copies of received packets.
    pub duplicates: u64,
    /// Received packets out of order (RFC 4737, PRE position as sequence number).
    pub reordered: u64,
    /// Frames without an id, both sides.
    pub foreign: u64,
    /// Received packets whose POST time precedes their PRE time.
    pub negative: u64,
    /// POST packets whose id PRE never sent.
    pub unmatched: u64,
    /// Repeated ids in PRE (only the first copy is matched).
    pub pre_duplicates: u64,
    /// PRE packets inside the warm-up trim.
    pub trimmed_pre: u64,
    /// POST packets of trimmed PRE packets.
    pub trimmed_post: u64,
    /// The warm-up trim (option `trim_ns`).
    pub trim_ns: i64,
    /// The longest latency that counts (option `max_latency_ns`).
    pub horizon_ns: i64,
    /// First PRE timestamp: time zero of rates and worst events.
    pub start_ts_ns: Option<i64>,
    /// PRE span after the trim.
    pub duration_ns: i64,
    /// Latency figures; `None` when no packet was received.
    pub latency_ns: Option<LatencySummary>,
    /// The HDR percentile distribution, row by row.
    pub percentiles: Vec<PercentileRow>,
    /// HdrHistogram percentile distribution text, values in microseconds.
    pub hgrm: String,
    /// Histogram of the latencies.
    pub latency_histogram: Vec<Bin>,
    /// Histogram of PRE inter-arrival times after the trim.
    pub jitter_pre_histogram: Vec<Bin>,
    /// Histogram of POST inter-arrival times after the trim.
    pub jitter_post_histogram: Vec<Bin>,
    /// The largest latencies, in time order.
    pub worst: Vec<WorstEvent>,
    /// What the PRE file held.
    pub pre: SideSummary,
    /// What the POST file held.
    pub post: SideSummary,
    /// What a reader should know about these figures, one line each.
    pub warnings: Vec<String>,
    /// Figures cover only part of the input: a capture ends early (cut short), or reading
    /// stopped part-way (corrupt data, a pcapng section of a version not read).
    pub partial: bool,
    /// Where the matched series went (option `export`).
    pub export_path: Option<String>,
    /// Rows written to it.
    pub export_rows: u64,
    /// Wall time of the analysis.
    pub elapsed_s: f64,
    /// The figures of each flow (PRE's flows under `AnalyzeOptions::flow_key`).
    pub flows: FlowsPart,
    /// The latencies' exact distribution and time blocks: what pooling and confidence
    /// intervals need of the series, in a few hundred kilobytes (not in the JSON document).
    #[serde(skip)]
    pub summary: SeriesSummary,
}

impl Analysis {
    /// The document `lowtail analyze --json` prints.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("analysis serialises")
    }
}
