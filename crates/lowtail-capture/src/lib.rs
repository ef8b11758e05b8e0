//! Capture files in, timestamped frames out.
//!
//! Every reader streams: memory stays constant however large the capture is, so a
//! 100-million-packet pair can be analysed on a laptop. Compression (zstd, gzip) is
//! detected from the file's magic bytes, never from its name.
//!
//! `source` opens a file and picks the reader for its format (`pcap`, `pcapng`,
//! `moonsniff`); `reader` is the one type callers hold; `write` produces the same formats.
#![warn(missing_docs)]

mod error;
mod format;
mod item;
mod link;
mod moonsniff;
mod pcap;
mod pcapng;
mod reader;
mod source;
mod stream;
mod window;
pub mod write;

pub use error::CaptureError;
pub use format::{Compression, Format};
pub use item::{Frame, Item};
pub use link::LinkType;
pub use reader::CaptureReader;
pub use source::{open, open_reader, OpenOptions, FIFO_WRITER_WAIT};
pub use stream::Progress;
