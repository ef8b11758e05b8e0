//! `lowtail._native`: the Rust core seen from Python. Each submodule wraps one crate;
//! arguments arrive as plain values, typed options or JSON specs, results leave as JSON
//! documents, errors as one exception class per kind (`errors`), every class under
//! `LowtailError` with a one-line message. `python/lowtail/_native.pyi` describes the
//! module; a test checks it against the module with mypy's stubtest.

use pyo3::prelude::*;

mod analysis;
mod bounds;
mod errors;
mod frame;
mod sim;
mod stats;
mod synth;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add("__version__", lowtail_version::VERSION)?;
    // What build this is, as the native programs' --version says it.
    m.add("BUILD_COMMIT", lowtail_version::COMMIT)?;
    m.add("BUILD_PROFILE", lowtail_version::PROFILE)?;
    m.add("LONG_VERSION", lowtail_version::LONG_VERSION)?;
    analysis::register(m)?;
    synth::register(m)?;
    sim::register(m)?;
    frame::register(m)?;
    stats::register(m)?;
    bounds::register(m)
}
