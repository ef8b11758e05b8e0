//! Facts the Python side must share with the Rust side rather than restate: the
//! headline percentiles, the nearest rank, the matched series' columns; and the exact
//! histogram itself, so that pooling several runs' series gives the figures one analysis
//! of all their packets would give.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use lowtail_analyze::SERIES_COLUMNS;
use lowtail_stats::{ExactHistogram, HEADLINE_PERCENTILES};

/// Nearest-rank position (1-based) of quantile `q` among `n` samples, as PostgreSQL's
/// `percentile_disc`: ceil(q·n) in double precision, at least 1 and at most n.
#[pyfunction]
fn nearest_rank(q: f64, n: u64) -> u64 {
    lowtail_stats::nearest_rank(q, n)
}

/// Exact nearest-rank distribution of integer nanoseconds in bounded memory (the one
/// every analysis computes its figures with): record latencies in batches, merge the
/// histograms of several runs, ask for quantiles or order statistics.
#[pyclass(module = "lowtail._native", name = "ExactHistogram")]
#[derive(Default)]
pub struct PyExactHistogram(ExactHistogram);

#[pymethods]
impl PyExactHistogram {
    #[new]
    fn new() -> Self {
        Self::default()
    }

    /// Count every value of a buffer of 64-bit integers (a NumPy int64 array, an Arrow
    /// column's values).
    fn record(&mut self, py: Python<'_>, values: PyBuffer<i64>) -> PyResult<()> {
        let values = values.to_vec(py)?;
        let h = &mut self.0;
        py.detach(|| values.iter().for_each(|&v| h.record(v)));
        Ok(())
    }

    /// Add every sample of `other`.
    fn merge(&mut self, py: Python<'_>, mut other: PyRefMut<'_, PyExactHistogram>) {
        let (h, o) = (&mut self.0, &mut other.0);
        py.detach(|| h.merge(o));
    }

    /// Samples recorded.
    #[getter]
    fn count(&self) -> u64 {
        self.0.count()
    }

    /// The smallest sample; None when empty.
    fn min(&mut self) -> Option<i64> {
        self.0.min()
    }

    /// The largest sample; None when empty.
    fn max(&mut self) -> Option<i64> {
        self.0.max()
    }

    /// Nearest-rank values at the quantiles `qs` (as percentile_disc); None when empty.
    fn quantiles(&mut self, qs: Vec<f64>) -> PyResult<Option<Vec<i64>>> {
        if let Some(q) = qs.iter().find(|q| !(0.0..=1.0).contains(*q)) {
            return Err(PyValueError::new_err(format!("quantile {q} is outside 0..1")));
        }
        Ok(self.0.quantiles(&qs))
    }

    /// The order statistics at 1-based `ranks` (1: the smallest sample, `count`: the
    /// largest), in the order given. ValueError for a rank outside 1..count.
    fn at_ranks(&mut self, ranks: Vec<u64>) -> PyResult<Vec<i64>> {
        let n = self.0.count();
        self.0.values_at_ranks(&ranks).ok_or_else(|| {
            let bad = ranks.iter().find(|&&r| r == 0 || r > n).copied().unwrap_or(0);
            PyValueError::new_err(format!("rank {bad} is outside 1..{n}"))
        })
    }

    /// Approximate heap use in bytes.
    fn memory_bytes(&self) -> usize {
        self.0.memory_bytes()
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyExactHistogram>()?;
    m.add_function(wrap_pyfunction!(nearest_rank, m)?)?;
    // ((key, quantile), ...): p50 … p99_9999, the percentiles every summary reports.
    m.add("HEADLINE_PERCENTILES", PyTuple::new(m.py(), HEADLINE_PERCENTILES)?)?;
    // ((name, Arrow type alias), ...) of the matched series, in file order; no column is nullable.
    let columns = SERIES_COLUMNS.iter().map(|(name, ty)| (*name, ty.to_string().to_lowercase()));
    m.add("SERIES_COLUMNS", PyTuple::new(m.py(), columns)?)
}
