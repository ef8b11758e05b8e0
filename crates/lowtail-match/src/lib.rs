//! From frames to matched packets.
//!
//! `unwrap` turns wrapping 32-bit ids into a monotonic sequence, `matcher` joins the
//! two capture sides into departures, losses and duplicates with bounded memory, and
//! `suggest` explains a poor match. Finding the id in a frame is `lowtail_frame`'s job.
#![warn(missing_docs)]

pub mod matcher;
mod ring;
pub mod suggest;
pub mod unwrap;

pub use lowtail_frame::{extract_id, Endian, Extracted, IdSpec};
pub use matcher::{Counters, MatchSink, Matched, Matcher, Outcome};
pub use unwrap::Unwrapper;
