//! `lowtail._native`: the Rust core seen from Python. Each submodule wraps one crate;
//! arguments arrive as plain values or JSON, results leave as JSON, errors as
//! `LowtailError` with a one-line message.

use pyo3::prelude::*;

mod analysis;
mod sim;
mod synth;

pyo3::create_exception!(_native, LowtailError, pyo3::exceptions::PyException);

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("LowtailError", m.py().get_type::<LowtailError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    analysis::register(m)?;
    synth::register(m)?;
    sim::register(m)?;
    Ok(())
}
