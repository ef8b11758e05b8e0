//! What the readers yield.

use crate::link::LinkType;

pub(crate) const NS_PER_SEC: i64 = 1_000_000_000;

/// One frame as captured, with its timestamp converted to integer nanoseconds.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    /// Capture time in nanoseconds since the Unix epoch (or the capture's own clock).
    pub ts_ns: i64,
    /// How to decode `data`.
    pub link: LinkType,
    /// The captured bytes (may be shorter than the frame on the wire: see `orig_len`).
    pub data: &'a [u8],
    /// The frame's length on the wire.
    pub orig_len: u32,
}

/// What a capture yields: a frame to decode, or (MoonSniff) a record that already
/// carries the packet id.
#[derive(Debug, Clone, Copy)]
pub enum Item<'a> {
    /// A captured frame.
    Frame(Frame<'a>),
    /// A MoonSniff record: capture time and the 32-bit packet id.
    Record {
        /// Capture time in nanoseconds.
        ts_ns: i64,
        /// The packet id as MoonSniff extracted it.
        id: u32,
    },
}

impl Item<'_> {
    /// Capture time in nanoseconds, whatever the item is.
    pub fn ts_ns(&self) -> i64 {
        match self {
            Item::Frame(f) => f.ts_ns,
            Item::Record { ts_ns, .. } => *ts_ns,
        }
    }
}
