//! Why an analysis produced no figures, one kind per reason: the Python module maps
//! each kind to its own exception class, and the command line each class to an exit code.

use std::path::PathBuf;

use lowtail_capture::CaptureError;

use crate::memory::{human_bytes, MemoryLimit};

/// Why `analyze_pair` returned no analysis. Each renders as one line.
#[derive(Debug, thiserror::Error)]
pub enum AnalyzeError {
    /// The options contradict themselves or the formats (see `AnalyzeOptions::check`).
    #[error(transparent)]
    Options(#[from] OptionsError),
    /// A capture could not be opened or read.
    #[error(transparent)]
    Capture(#[from] CaptureError),
    /// No PRE frame carries a packet id where the options look for it.
    #[error("{}: none of its {frames} frames carries a packet id with these options: {why}", path.display())]
    NoPacketIds {
        /// The PRE capture.
        path: PathBuf,
        /// Frames it holds.
        frames: u64,
        /// What the frames look like and which options would match them.
        why: String,
    },
    /// The warm-up trim is longer than the PRE capture.
    #[error(
        "the {} warm-up trim removes every packet: PRE spans only {} (use a smaller --trim, or --trim 0)",
        human_ns(*trim_ns),
        human_ns(*span_ns)
    )]
    TrimRemovesAll {
        /// The trim asked for.
        trim_ns: i64,
        /// From the first to the last PRE packet with an id.
        span_ns: i64,
    },
    /// Most received packets arrived before they were sent: the captures were given the
    /// wrong way round, or their clocks are far apart. Figures of the rest would mislead.
    #[error(
        "PRE and POST look swapped (or their clocks differ by more than {}): {negative} of {received} received packets ({:.1} %) arrived before they were sent; give the capture of the packets entering the device first",
        human_ns(*typical_early_ns),
        100.0 * *negative as f64 / (*received).max(1) as f64
    )]
    LooksSwapped {
        /// Received packets with a negative latency.
        negative: u64,
        /// Received packets.
        received: u64,
        /// The median of how early those packets arrived.
        typical_early_ns: i64,
    },
    /// The matcher would hold more memory than it may (`memory::MemoryLimit`): the
    /// capture's rate times `--max-latency` is more than the host can give.
    #[error("{}", memory_message(limit, *held, *span_ns, *horizon_ns))]
    OutOfMemory {
        /// The limit it reached.
        limit: MemoryLimit,
        /// PRE packets held when it stopped.
        held: u64,
        /// From the oldest held packet's departure to the newest one's.
        span_ns: i64,
        /// `--max-latency`.
        horizon_ns: i64,
    },
    /// `Control::cancel` was set.
    #[error("analysis cancelled")]
    Cancelled,
    /// The matched series could not be written.
    #[error("export: {0}")]
    Export(#[from] ExportError),
    /// A reader thread panicked (a bug).
    #[error("a reader thread panicked")]
    ReaderPanicked,
}

/// An analysis option out of its range. The messages name the options as the command
/// line spells them, where people meet them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OptionsError {
    /// Ids are 4 or 8 bytes wide.
    #[error("--id-width must be 4 or 8, not {0}")]
    IdWidth(i64),
    /// Not "big" or "little".
    #[error("--id-endian must be big or little, not {0:?}")]
    IdEndian(String),
    /// Not a known flow key.
    #[error("--flow-key must be 5tuple, src-port or none, not {0:?}")]
    FlowKey(String),
    /// Not a known id format.
    #[error("unknown id format {0:?} (lowtail, moonsniff)")]
    IdFormat(String),
    /// A count, offset or port below zero.
    #[error("--{} must be at least 0, not {value}", option.replace('_', "-"))]
    Negative {
        /// The option's name.
        option: &'static str,
        /// The value given.
        value: i64,
    },
    /// A horizon of zero (or less): every packet would count as lost.
    #[error("--max-latency must be more than 0 (a packet not found within it counts as lost), not {0} ns")]
    MaxLatency(i64),
    /// A value above what the option can hold (a UDP port above 65535).
    #[error("--{} must be at most {max}, not {value}", option.replace('_', "-"))]
    TooLarge {
        /// The option's name.
        option: &'static str,
        /// The value given.
        value: i64,
        /// The largest value allowed.
        max: u64,
    },
}

/// Why the matched series could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The target names a directory, not a file.
    #[error("{}: not a file name", path.display())]
    NotAFileName {
        /// The target.
        path: PathBuf,
    },
    /// Creating, writing, closing or renaming the file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file (the temporary one until it is renamed into place).
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// The Parquet writer failed (its cause may be an I/O error).
    #[error("{}: {source}", path.display())]
    Parquet {
        /// The file being written.
        path: PathBuf,
        /// What the writer said.
        source: parquet::errors::ParquetError,
    },
    /// A batch did not fit the schema (a bug).
    #[error("{0}")]
    Batch(#[from] arrow_schema::ArrowError),
}

/// A duration as a message shows it: "850 ns", "12.345 µs", "3.200 ms", "2.000 s" (the one
/// formatter of this crate's messages and warnings).
pub(crate) fn human_ns(ns: i64) -> String {
    let abs = ns.unsigned_abs();
    match abs {
        0..1_000 => format!("{ns} ns"),
        1_000..1_000_000 => format!("{:.3} µs", ns as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.3} ms", ns as f64 / 1e6),
        _ => format!("{:.3} s", ns as f64 / 1e9),
    }
}

/// Why the matcher stopped for memory, and the `--max-latency` that would fit.
fn memory_message(limit: &MemoryLimit, held: u64, span_ns: i64, horizon_ns: i64) -> String {
    let head = format!(
        "matching needs more memory than {}, {}: it keeps each PRE packet for --max-latency ({}) after it was sent",
        human_bytes(limit.bytes),
        limit.describe(),
        human_ns(horizon_ns),
    );
    if span_ns <= 0 {
        return format!(
            "{head}, and {held} packets stamped at one and the same time already fill it: PRE's timestamps do \
             not advance, and a capture whose clock stands still cannot be matched"
        );
    }
    // Memory grows with the PRE time held: what fits is about the span held when the limit
    // was reached; half of it leaves room for the rings and maps to grow by doubling.
    let fits_ns = (span_ns.min(horizon_ns) / 2).max(0);
    let advice = match round_down_to_setting(fits_ns) {
        Some(setting) => format!(", e.g. --max-latency {setting}"),
        None => String::new(),
    };
    format!(
        "{head}, and the {held} packets sent in {} ({:.0} a second) already fill it; give a shorter \
         --max-latency (latencies above it count as lost){advice}",
        human_ns(span_ns),
        held as f64 * 1e9 / span_ns as f64
    )
}

/// A duration rounded down to 1, 2 or 5 of a unit, written as a setting ("500ms", "2s");
/// None below 1 µs.
fn round_down_to_setting(ns: i64) -> Option<String> {
    let mut best = None;
    for (unit_ns, unit) in [(1_000i64, "us"), (1_000_000, "ms"), (1_000_000_000, "s")] {
        for step in [1i64, 2, 5, 10, 20, 50, 100, 200, 500] {
            if unit_ns * step <= ns {
                best = Some(format!("{step}{unit}"));
            }
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fitting_horizon_is_rounded_down_to_a_setting_one_can_type() {
        assert_eq!(round_down_to_setting(8_193_000).as_deref(), Some("5ms"));
        assert_eq!(round_down_to_setting(2_000_000_000).as_deref(), Some("2s"));
        assert_eq!(round_down_to_setting(999_999).as_deref(), Some("500us"));
        assert_eq!(round_down_to_setting(73_000_000_000).as_deref(), Some("50s"));
        assert_eq!(round_down_to_setting(999), None);
    }
}
