//! `synth_pair`: synthetic capture pairs with known answers, from Python.

use std::path::PathBuf;

use pyo3::prelude::*;

use lowtail_synth::{generate, SynthSpec};

use crate::errors::{spec_json_error, synth_error};

/// Write a synthetic PRE/POST pair; `spec_json` holds `SynthSpec` fields. Returns the
/// summary as JSON.
#[pyfunction]
#[pyo3(signature = (pre, post, spec_json, truth=None))]
fn synth_pair(
    py: Python<'_>,
    pre: PathBuf,
    post: PathBuf,
    spec_json: &str,
    truth: Option<PathBuf>,
) -> PyResult<String> {
    let spec: SynthSpec = serde_json::from_str(spec_json).map_err(|e| spec_json_error("synth", e))?;
    let summary = py.detach(|| generate(&spec, &pre, &post, truth.as_deref())).map_err(|e| synth_error(&e))?;
    Ok(serde_json::to_string(&summary).expect("summary serialises"))
}

/// The default synthetic spec, as JSON (for `lowtail synth --help` and tests).
#[pyfunction]
fn synth_defaults() -> String {
    serde_json::to_string(&SynthSpec::default()).expect("spec serialises")
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(synth_pair, m)?)?;
    m.add_function(wrap_pyfunction!(synth_defaults, m)?)
}
