//! Why an analysis produced no figures, one kind per reason: the Python module maps
//! each kind to its own exception class, and the command line each class to an exit code.

use std::path::PathBuf;

use lowtail_capture::CaptureError;

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
