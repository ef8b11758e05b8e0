//! Facts the Python side must share with the Rust side rather than restate: the
//! headline percentiles, the nearest rank, the matched series' columns, the exit codes
//! of the native programs; and the exact histogram itself, so that pooling several runs'
//! series gives the figures one analysis of all their packets would give.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyFloat, PyTuple};

use lowtail_analyze::SERIES_COLUMNS;
use lowtail_stats::summary::{FIRST_WIDTH_NS, FORMAT, MAX_BLOCKS};
use lowtail_stats::{ExactHistogram, Quantile, SeriesSummary, TimeBlocks, HEADLINE_PERCENTILES};

use crate::errors::summary_error;

/// A quantile as Python holds it exactly: a `fractions.Fraction`.
fn to_fraction(py: Python<'_>, q: Quantile) -> PyResult<Bound<'_, PyAny>> {
    py.import("fractions")?.getattr("Fraction")?.call1((q.numerator(), q.denominator()))
}

/// The quantile of a Python rational (a `fractions.Fraction` or an int) between 0 and 1.
/// A float is refused: it cannot hold most percentiles exactly (99.9 / 100 is not 0.999).
pub(crate) fn from_fraction(q: &Bound<'_, PyAny>) -> PyResult<Quantile> {
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

/// Exact nearest-rank distribution of integer nanoseconds in bounded memory (the one
/// every analysis computes its figures with): record latencies in batches, merge the
/// histograms of several runs, ask for quantiles or order statistics.
#[pyclass(module = "lowtail._native", name = "ExactHistogram")]
#[derive(Default)]
pub struct PyExactHistogram(ExactHistogram);

impl PyExactHistogram {
    /// The histogram itself.
    pub(crate) fn inner(&mut self) -> &mut ExactHistogram {
        &mut self.0
    }
}

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
    /// Each quantile is exact: a `fractions.Fraction` or an int (a float is refused).
    fn quantiles(&mut self, qs: Vec<Bound<'_, PyAny>>) -> PyResult<Option<Vec<i64>>> {
        let qs = qs.iter().map(from_fraction).collect::<PyResult<Vec<Quantile>>>()?;
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

    /// Samples at or below `value`: its rank from below (0 when every sample is above it).
    fn count_at_most(&mut self, value: i64) -> u64 {
        self.0.iter().take_while(|&(v, _)| v <= value).map(|(_, c)| c).sum()
    }
}

/// A run's latencies as the statistics need them, without the series: the exact
/// distribution (`histogram`, an `ExactHistogram`) and the packets of each time block of
/// PRE time by coarse latency bucket (see lowtail_stats::summary). Stored as `to_bytes()`;
/// `from_bytes` checks everything and raises `SummaryError` for bytes that are not one.
#[pyclass(module = "lowtail._native", name = "SeriesSummary")]
pub struct PySeriesSummary {
    histogram: Py<PyExactHistogram>,
    blocks: TimeBlocks,
}

impl PySeriesSummary {
    pub fn wrap(py: Python<'_>, summary: SeriesSummary) -> PyResult<Self> {
        Ok(PySeriesSummary { histogram: Py::new(py, PyExactHistogram(summary.exact))?, blocks: summary.blocks })
    }

    /// The time blocks.
    pub(crate) fn blocks(&self) -> &TimeBlocks {
        &self.blocks
    }

    /// The exact distribution (shared with Python).
    pub(crate) fn histogram_ref(&self) -> &Py<PyExactHistogram> {
        &self.histogram
    }
}

#[pymethods]
impl PySeriesSummary {
    #[new]
    fn new(py: Python<'_>) -> PyResult<Self> {
        Self::wrap(py, SeriesSummary::new())
    }

    /// Count packets in PRE order: their PRE timestamps and latencies, two buffers of
    /// 64-bit integers of one length (NumPy int64 arrays).
    fn record(&mut self, py: Python<'_>, pre_ts_ns: PyBuffer<i64>, latency_ns: PyBuffer<i64>) -> PyResult<()> {
        let (ts, lat) = (pre_ts_ns.to_vec(py)?, latency_ns.to_vec(py)?);
        if ts.len() != lat.len() {
            return Err(PyValueError::new_err(format!(
                "{} timestamps and {} latencies: one of each per packet",
                ts.len(),
                lat.len()
            )));
        }
        let mut hist = self.histogram.borrow_mut(py);
        let (h, blocks) = (&mut hist.0, &mut self.blocks);
        py.detach(|| {
            for (&t, &v) in ts.iter().zip(&lat) {
                h.record(v);
                blocks.record(t, v);
            }
        });
        Ok(())
    }

    /// The exact distribution of every packet counted.
    #[getter]
    fn histogram(&self, py: Python<'_>) -> Py<PyExactHistogram> {
        self.histogram.clone_ref(py)
    }

    /// Packets counted.
    #[getter]
    fn count(&self, py: Python<'_>) -> u64 {
        self.histogram.borrow(py).0.count()
    }

    /// The first packet's PRE timestamp (None when empty).
    #[getter]
    fn origin_ns(&self) -> Option<i64> {
        self.blocks.origin_ns()
    }

    /// The width of every time block.
    #[getter]
    fn block_width_ns(&self) -> i64 {
        self.blocks.width_ns()
    }

    /// Packets in each time block, in time order.
    fn block_packets(&self) -> Vec<u64> {
        self.blocks.blocks().iter().map(|b| b.packets).collect()
    }

    /// Packets in each time block whose latency lies in a bucket above `value`'s (buckets
    /// are exact below 256 ns and at most 1/128 of their value wide above).
    fn blocks_above(&self, value: i64) -> Vec<u64> {
        self.blocks.blocks().iter().map(|b| b.above(value)).collect()
    }

    /// The summary as stored (compressed; a few hundred kB for millions of packets).
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let mut hist = self.histogram.borrow_mut(py);
        let mut summary = SeriesSummary { exact: std::mem::take(&mut hist.0), blocks: self.blocks.clone() };
        let bytes = py.detach(|| summary.to_bytes());
        hist.0 = summary.exact;
        PyBytes::new(py, &bytes)
    }

    /// A summary from `to_bytes()`'s output; SummaryError for bytes that are not one.
    #[staticmethod]
    fn from_bytes(py: Python<'_>, data: &[u8]) -> PyResult<Self> {
        let summary = py.detach(|| SeriesSummary::from_bytes(data)).map_err(|e| summary_error(&e))?;
        Self::wrap(py, summary)
    }

    /// Pickled as its bytes (a campaign's workers send summaries to the coordinator).
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyBytes>,))> {
        let py = slf.py();
        let from_bytes = py.get_type::<PySeriesSummary>().getattr("from_bytes")?;
        Ok((from_bytes, (slf.borrow().to_bytes(py),)))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyExactHistogram>()?;
    m.add_class::<PySeriesSummary>()?;
    // How the time blocks of a summary are made: the first width and the most blocks.
    m.add("SUMMARY_FIRST_BLOCK_NS", FIRST_WIDTH_NS)?;
    m.add("SUMMARY_MAX_BLOCKS", MAX_BLOCKS)?;
    // The format version `SeriesSummary.to_bytes` writes.
    m.add("SUMMARY_FORMAT", FORMAT)?;
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
    // {name: code} of the native programs' one table (lowtail-program's Exit: "disk_full": 4, ...).
    let codes = PyDict::new(m.py());
    for exit in lowtail_program::Exit::ALL {
        codes.set_item(exit.name(), exit.code())?;
    }
    m.add("PROGRAM_EXIT_CODES", codes)
}
