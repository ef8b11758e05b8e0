//! `lowtail._native`: the Rust core seen from Python. Each submodule wraps one crate;
//! arguments arrive as plain values, typed options or JSON specs, results leave as JSON
//! documents, errors as one exception class per kind (`errors`), every class under
//! `LowtailError` with a one-line message. `python/lowtail/_native.pyi` describes the
//! module; a test checks it against the module with mypy's stubtest.

use pyo3::prelude::*;

mod analysis;
mod errors;
mod frame;
mod sim;
mod stats;
mod synth;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    analysis::register(m)?;
    synth::register(m)?;
    sim::register(m)?;
    frame::register(m)?;
    stats::register(m)
}
