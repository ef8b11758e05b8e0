//! The wire format's facts Python must not restate: what a frame size counts, what
//! tells flows apart.

use pyo3::prelude::*;

use lowtail_analyze::MAX_FLOWS;
use lowtail_frame::{FCS_BYTES, FLOW_KEYS, MAX_FRAME_SIZE, MIN_FRAME_SIZE};

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // Bytes of the FCS: counted in a frame size (on the wire), absent from a capture.
    m.add("FCS_BYTES", FCS_BYTES)?;
    // (smallest, largest) frame size on the wire, FCS included: RFC 2544's 64 and 1518.
    m.add("FRAME_SIZES", (MIN_FRAME_SIZE, MAX_FRAME_SIZE))?;
    // The names of the keys that tell flows apart, the default first.
    m.add("FLOW_KEYS", FLOW_KEYS.map(|k| k.name()))?;
    // The most flows an analysis tells apart (the rest are counted as one more).
    m.add("MAX_FLOWS", MAX_FLOWS)
}
