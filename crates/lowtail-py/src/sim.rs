//! `simulate_device`: the discrete-event device model, from Python.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use lowtail_sim::{simulate, SimSpec};

use crate::errors::{sim_error, spec_json_error};

/// Marks a dropped packet in the departure array.
const DROPPED: i64 = i64::MIN;

/// Run the device model of `spec_json` (`SimSpec` fields). Returns (summary JSON,
/// arrival times, departure times) with the times as little-endian i64 bytes in arrival
/// order, departures `i64::MIN` for dropped packets (numpy reads them without a copy).
#[pyfunction]
fn simulate_device<'py>(
    py: Python<'py>,
    spec_json: &str,
) -> PyResult<(String, Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    let spec: SimSpec = serde_json::from_str(spec_json).map_err(|e| spec_json_error("simulation", e))?;
    let r = py.detach(|| simulate(&spec)).map_err(|e| sim_error(&e))?;
    let summary = serde_json::json!({
        "offered": r.arrival_ns.len(),
        "dropped": r.dropped,
        "batches": r.batches,
        "work_ns": r.work_ns,
        "span_ns": r.span_ns,
        "spec": spec,
    });
    let arrivals: Vec<u8> = r.arrival_ns.iter().flat_map(|t| t.to_le_bytes()).collect();
    let departures: Vec<u8> = r.departure_ns.iter().flat_map(|d| d.unwrap_or(DROPPED).to_le_bytes()).collect();
    Ok((summary.to_string(), PyBytes::new(py, &arrivals), PyBytes::new(py, &departures)))
}

/// The default simulation spec, as JSON.
#[pyfunction]
fn simulate_defaults() -> String {
    serde_json::to_string(&SimSpec::default()).expect("spec serialises")
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(simulate_device, m)?)?;
    m.add_function(wrap_pyfunction!(simulate_defaults, m)?)
}
