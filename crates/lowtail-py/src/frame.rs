//! The wire format's facts Python must not restate: what a frame size counts, what
//! tells flows apart, and which packet ids carry the match marker an IPS rule matches.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use lowtail_analyze::MAX_FLOWS;
use lowtail_frame::{
    FlowSchedule, MatchShare, FCS_BYTES, FLOW_KEYS, MARKER, MARKER_OFFSET, MAX_FLOW_WEIGHT, MAX_FRAME_SIZE,
    MIN_FRAME_SIZE,
};

fn share(share: f64) -> PyResult<MatchShare> {
    MatchShare::new(share).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// One byte per id of a buffer of unsigned 64-bit ids (a NumPy uint64 array): 1 where the
/// generator put the match marker into that packet at this share, else 0.
#[pyfunction]
fn match_marked<'py>(py: Python<'py>, ids: PyBuffer<u64>, match_share: f64) -> PyResult<Bound<'py, PyBytes>> {
    let selection = share(match_share)?;
    let ids = ids.to_vec(py)?;
    let mask: Vec<u8> = py.detach(|| ids.iter().map(|id| u8::from(selection.selects(*id))).collect());
    Ok(PyBytes::new(py, &mask))
}

/// How many of the `count` ids from `first` on carry the match marker at this share.
#[pyfunction]
fn match_count(py: Python<'_>, first: u64, count: u64, match_share: f64) -> PyResult<u64> {
    let selection = share(match_share)?;
    Ok(py.detach(|| selection.count(first, count)))
}

/// Whether these flow weights (one per flow) make a schedule the generator sends: ValueError
/// saying why not.
#[pyfunction]
fn check_flow_weights(weights: Vec<u32>) -> PyResult<()> {
    FlowSchedule::weighted(&weights).map(|_| ()).map_err(|e| PyValueError::new_err(e.to_string()))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // Bytes of the FCS: counted in a frame size (on the wire), absent from a capture.
    m.add("FCS_BYTES", FCS_BYTES)?;
    // The bytes a matching packet carries right after its id (an IPS rule's content).
    m.add("MATCH_MARKER", PyBytes::new(m.py(), MARKER))?;
    // Where it sits in the UDP payload of the generator's frames (a rule's `offset`).
    m.add("MATCH_MARKER_OFFSET", MARKER_OFFSET)?;
    m.add_function(wrap_pyfunction!(match_marked, m)?)?;
    m.add_function(wrap_pyfunction!(match_count, m)?)?;
    // (smallest, largest) frame size on the wire, FCS included: RFC 2544's 64 and 1518.
    m.add("FRAME_SIZES", (MIN_FRAME_SIZE, MAX_FRAME_SIZE))?;
    // The names of the keys that tell flows apart, the default first.
    m.add("FLOW_KEYS", FLOW_KEYS.map(|k| k.name()))?;
    // The most flows an analysis tells apart (the rest are counted as one more).
    m.add("MAX_FLOWS", MAX_FLOWS)?;
    // The most one flow may weigh in `[traffic] flow_weights`.
    m.add("MAX_FLOW_WEIGHT", MAX_FLOW_WEIGHT)?;
    m.add_function(wrap_pyfunction!(check_flow_weights, m)?)
}
