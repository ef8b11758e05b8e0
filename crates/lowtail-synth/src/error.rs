//! Why no pair was written: the one error type of the crate, beside the model and the
//! writers that both return it (neither owns it, so neither imports the other for it).

use lowtail_frame::FrameError;

/// Why no pair was written.
#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    /// A spec value out of its range.
    #[error("{0}")]
    InvalidSpec(String),
    /// `format` names no format lowtail writes.
    #[error("unknown format {0:?} (pcap-ns, pcap-us, pcap-ns-be, pcap-us-be, pcapng, pcapng-be, moonsniff)")]
    UnknownFormat(String),
    /// `compression` names no compression lowtail writes.
    #[error("unknown compression {0:?} (none, zstd, gzip)")]
    UnknownCompression(String),
    /// The frames the spec describes cannot be built.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// Creating or writing a named output file failed.
    #[error("{}: {source}", path.display())]
    File {
        /// The file.
        path: std::path::PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// Writing a capture failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Writing the ground truth failed.
    #[error("{0}")]
    Parquet(#[from] parquet::errors::ParquetError),
    /// A ground-truth batch did not fit its schema (a bug).
    #[error("{0}")]
    Batch(#[from] arrow_schema::ArrowError),
}
