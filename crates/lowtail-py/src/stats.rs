//! Facts the Python side must share with the Rust side rather than restate: the
//! headline percentiles, the nearest rank, the matched series' columns, the exit codes
//! of the native programs.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyFloat, PyTuple};

use lowtail_analyze::SERIES_COLUMNS;
use lowtail_stats::{Quantile, HEADLINE_PERCENTILES};

/// A quantile as Python holds it exactly: a `fractions.Fraction`.
fn to_fraction(py: Python<'_>, q: Quantile) -> PyResult<Bound<'_, PyAny>> {
    py.import("fractions")?.getattr("Fraction")?.call1((q.numerator(), q.denominator()))
}

/// The quantile of a Python rational (a `fractions.Fraction` or an int) between 0 and 1.
/// A float is refused: it cannot hold most percentiles exactly (99.9 / 100 is not 0.999).
fn from_fraction(q: &Bound<'_, PyAny>) -> PyResult<Quantile> {
    if q.is_instance_of::<PyFloat>() || !q.hasattr("numerator")? || !q.hasattr("denominator")? {
        return Err(PyTypeError::new_err(
            "a quantile must be exact: a fractions.Fraction (Fraction(\"99.9\") / 100) or an int, not a float",
        ));
    }
    let part = |name: &str| -> PyResult<u64> {
        let v: i128 = q.getattr(name)?.extract()?;
        u64::try_from(v).map_err(|_| PyValueError::new_err(format!("a quantile lies between 0 and 1, not {q}")))
    };
    Quantile::new(part("numerator")?, part("denominator")?).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Nearest-rank position (1-based) of quantile `q` among `n` samples: ⌈q·n⌉, at least 1
/// and at most n, in exact arithmetic. `q` is a `fractions.Fraction` (or an int).
#[pyfunction]
fn nearest_rank(q: &Bound<'_, PyAny>, n: u64) -> PyResult<u64> {
    Ok(lowtail_stats::nearest_rank(from_fraction(q)?, n))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(nearest_rank, m)?)?;
    // ((key, Fraction), ...): p50 … p99_9999, the percentiles every summary reports, exact.
    let headline = HEADLINE_PERCENTILES
        .iter()
        .map(|(key, q)| Ok((*key, to_fraction(m.py(), *q)?)))
        .collect::<PyResult<Vec<_>>>()?;
    m.add("HEADLINE_PERCENTILES", PyTuple::new(m.py(), headline)?)?;
    // ((name, Arrow type alias), ...) of the matched series, in file order; no column is nullable.
    let columns = SERIES_COLUMNS.iter().map(|(name, ty)| (*name, ty.to_string().to_lowercase()));
    m.add("SERIES_COLUMNS", PyTuple::new(m.py(), columns)?)?;
    // {name: code} of lowtail-gen, lowtail-cap, lowtail-fwd and lowtail-noise ("disk_full": 4, ...).
    let codes = PyDict::new(m.py());
    for (name, code) in lowtail_net::error::EXIT_CODES {
        codes.set_item(name, code)?;
    }
    m.add("PROGRAM_EXIT_CODES", codes)
}
