//! Facts the Python side must share with the Rust side rather than restate: the
//! headline percentiles, the nearest rank, the matched series' columns.

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use lowtail_analyze::SERIES_COLUMNS;
use lowtail_stats::HEADLINE_PERCENTILES;

/// Nearest-rank position (1-based) of quantile `q` among `n` samples, as PostgreSQL's
/// `percentile_disc`: ceil(q·n) in double precision, at least 1 and at most n.
#[pyfunction]
fn nearest_rank(q: f64, n: u64) -> u64 {
    lowtail_stats::nearest_rank(q, n)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(nearest_rank, m)?)?;
    // ((key, quantile), ...): p50 … p99_9999, the percentiles every summary reports.
    m.add("HEADLINE_PERCENTILES", PyTuple::new(m.py(), HEADLINE_PERCENTILES)?)?;
    // ((name, Arrow type alias), ...) of the matched series, in file order; no column is nullable.
    let columns = SERIES_COLUMNS.iter().map(|(name, ty)| (*name, ty.to_string().to_lowercase()));
    m.add("SERIES_COLUMNS", PyTuple::new(m.py(), columns)?)
}
