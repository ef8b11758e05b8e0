//! The percentile bounds seen from Python: `Evidence` (one run's or several runs' packets,
//! indexed once) answers every interval, bound and count a run's figures, verdicts and
//! advice need in one call each; the binomial arithmetic behind them is exposed for the
//! projections (`lowtail.confidence`).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use lowtail_stats::confidence as arithmetic;
use lowtail_stats::dispersion::Unmeasurable;
use lowtail_stats::intervals::{self, Unbounded};
use lowtail_stats::{Evidence, ExactHistogram, Quantile, TimeBlocks};

use crate::stats::{from_fraction, PyExactHistogram, PySeriesSummary};

fn check_level(level: f64) -> PyResult<()> {
    if level > 0.0 && level < 1.0 {
        Ok(())
    } else {
        Err(PyValueError::new_err(format!("a confidence level is between 0 and 1 (got {level})")))
    }
}

/// A percentile's interval (see `lowtail.compare.intervals`): its nearest-rank value, its
/// bounds and their ranks, the dispersion they allow for, the packets that would bound it,
/// and why a side is not bounded (`unbounded`: "no packets", "wanders", "few clusters",
/// "above", "below").
#[pyclass(module = "lowtail._native", name = "Interval", frozen, get_all)]
pub struct PyInterval {
    value_ns: Option<i64>,
    lower_ns: Option<i64>,
    upper_ns: Option<i64>,
    lower_rank: u64,
    upper_rank: u64,
    dispersion: f64,
    blocks: usize,
    packets_to_bound: Option<u64>,
    unbounded: Option<&'static str>,
    at_maximum: bool,
    lag1: Option<f64>,
    lag1_blocks: Option<usize>,
    clusters: Option<usize>,
    per_cluster: Option<f64>,
}

impl From<intervals::Interval> for PyInterval {
    fn from(iv: intervals::Interval) -> Self {
        let (unbounded, at_maximum, lag1, lag1_blocks) = match iv.why {
            None => (None, false, None, None),
            Some(Unbounded::NoPackets) => (Some("no packets"), false, None, None),
            Some(Unbounded::Unmeasurable(Unmeasurable::Wanders { lag1, blocks })) => {
                (Some("wanders"), false, Some(lag1), Some(blocks))
            }
            Some(Unbounded::Unmeasurable(Unmeasurable::FewClusters { .. })) => {
                (Some("few clusters"), false, None, None)
            }
            Some(Unbounded::Above { at_maximum }) => (Some("above"), at_maximum, None, None),
            Some(Unbounded::Below) => (Some("below"), false, None, None),
        };
        let (clusters, per_cluster) = match iv.why {
            Some(Unbounded::Unmeasurable(Unmeasurable::FewClusters { clusters, per_cluster })) => {
                (Some(clusters), Some(per_cluster))
            }
            _ => (None, None),
        };
        PyInterval {
            clusters,
            per_cluster,
            value_ns: iv.value,
            lower_ns: iv.lower,
            upper_ns: iv.upper,
            lower_rank: iv.lower_rank,
            upper_rank: iv.upper_rank,
            dispersion: iv.dispersion,
            blocks: iv.blocks,
            packets_to_bound: iv.packets_to_bound,
            unbounded,
            at_maximum,
            lag1,
            lag1_blocks,
        }
    }
}

/// The packets an interval speaks for: one run's summary, or several runs' pooled (their
/// exact distributions merged — `histogram` when the caller has it already — their time
/// blocks kept apart, run by run), indexed once so that every rank and count is a binary
/// search.
#[pyclass(module = "lowtail._native", name = "Evidence", frozen)]
pub struct PyEvidence(Evidence);

#[pymethods]
impl PyEvidence {
    #[new]
    #[pyo3(signature = (summaries, histogram=None))]
    fn new(
        py: Python<'_>,
        summaries: Vec<PyRef<'_, PySeriesSummary>>,
        histogram: Option<PyRefMut<'_, PyExactHistogram>>,
    ) -> PyResult<Self> {
        let runs: Vec<&TimeBlocks> = summaries.iter().map(|s| s.blocks()).collect();
        if let Some(mut h) = histogram {
            let h = h.inner();
            return Ok(PyEvidence(py.detach(|| Evidence::new(h, &runs))));
        }
        if let [only] = summaries.as_slice() {
            let mut h = only.histogram_ref().borrow_mut(py);
            let h = h.inner();
            return Ok(PyEvidence(py.detach(|| Evidence::new(h, &runs))));
        }
        let mut pooled = ExactHistogram::new();
        for s in &summaries {
            pooled.merge(s.histogram_ref().borrow_mut(py).inner());
        }
        Ok(PyEvidence(py.detach(|| Evidence::new(&mut pooled, &runs))))
    }

    /// Packets.
    #[getter]
    fn count(&self) -> u64 {
        self.0.count()
    }

    /// Blocks holding a packet, over all runs.
    #[getter]
    fn blocks(&self) -> usize {
        self.0.blocks()
    }

    /// The rank-th smallest latency (1-based); ValueError outside 1..count.
    fn value_at_rank(&self, rank: u64) -> PyResult<i64> {
        self.0
            .ranked
            .value_at_rank(rank)
            .ok_or_else(|| PyValueError::new_err(format!("rank {rank} is outside 1..{}", self.0.count())))
    }

    /// Packets at or below `value`.
    fn count_at_most(&self, value: i64) -> u64 {
        self.0.ranked.count_at_most(value)
    }

    /// Packets at or above `value` (those that reach a budget of `value`).
    fn count_at_least(&self, value: i64) -> u64 {
        self.0.ranked.count_at_least(value)
    }

    /// The two-sided interval of quantile `q` (exact: a Fraction or an int) at `level`.
    fn interval(&self, py: Python<'_>, q: &Bound<'_, PyAny>, level: f64) -> PyResult<PyInterval> {
        check_level(level)?;
        let q = from_fraction(q)?;
        Ok(py.detach(|| intervals::interval(&self.0, q, level)).into())
    }

    /// Everything a bounds document holds, in one pass: the intervals of the quantiles `qs`
    /// at `level`, their one-sided bounds at `confidence` (sides of level 2·confidence − 1),
    /// and the exceedance ladder ((value, packets above it), ascending).
    #[allow(clippy::type_complexity)]
    fn bounds(
        &self,
        py: Python<'_>,
        qs: Vec<Bound<'_, PyAny>>,
        level: f64,
        confidence: f64,
    ) -> PyResult<(Vec<PyInterval>, Vec<PyInterval>, Vec<(i64, u64)>)> {
        check_level(level)?;
        check_level(confidence)?;
        check_level(2.0 * confidence - 1.0)?;
        let qs = qs.iter().map(from_fraction).collect::<PyResult<Vec<Quantile>>>()?;
        let b = py.detach(|| intervals::bounds(&self.0, &qs, level, confidence));
        Ok((
            b.intervals.into_iter().map(PyInterval::from).collect(),
            b.bounds.into_iter().map(PyInterval::from).collect(),
            b.above,
        ))
    }
}

fn share(q: &Bound<'_, PyAny>) -> PyResult<f64> {
    Ok(arithmetic::exceed(from_fraction(q)?))
}

/// P(E ≤ k) for E ~ Binomial(n, x).
#[pyfunction]
fn binomial_cdf(n: u64, x: f64, k: i64) -> f64 {
    arithmetic::binomial_cdf(n, x, k)
}

/// The smallest k with P(E ≤ k) ≥ p, E ~ Binomial(n, x).
#[pyfunction]
fn binomial_ppf(n: u64, x: f64, p: f64) -> u64 {
    arithmetic::binomial_ppf(n, x, p)
}

/// Student's t quantile at p with df degrees of freedom.
#[pyfunction]
fn student_t(p: f64, df: u64) -> f64 {
    arithmetic::student_t(p, df)
}

/// (lower, upper) ranks of the two-sided interval of quantile q at `level` among n packets
/// with this dispersion (0 / n + 1: not bounded on that side).
#[pyfunction]
#[pyo3(signature = (n, q, level, dispersion=1.0))]
fn rank_interval(n: u64, q: &Bound<'_, PyAny>, level: f64, dispersion: f64) -> PyResult<(u64, u64)> {
    check_level(level)?;
    Ok(arithmetic::rank_interval(n, share(q)?, level, dispersion))
}

/// The fewest packets whose largest bounds quantile q from above with error `tail`.
#[pyfunction]
#[pyo3(signature = (q, tail, dispersion=1.0))]
fn packets_to_bound(q: &Bound<'_, PyAny>, tail: f64, dispersion: f64) -> PyResult<u64> {
    Ok(arithmetic::packets_to_bound(share(q)?, tail, dispersion))
}

/// Packets in all a run needs for its upper bound of q to fall below a budget a
/// `share_above` of its packets reach; None when it never would.
#[pyfunction]
fn packets_to_pass(q: &Bound<'_, PyAny>, share_above: f64, dispersion: f64, tail: f64) -> PyResult<Option<u64>> {
    Ok(arithmetic::packets_to_pass(share(q)?, share_above, dispersion, tail))
}

/// Packets in all a run needs for its lower bound of q to reach a budget a `share_above`
/// of its packets reach; None when it never would.
#[pyfunction]
fn packets_to_fail(q: &Bound<'_, PyAny>, share_above: f64, dispersion: f64, tail: f64) -> PyResult<Option<u64>> {
    Ok(arithmetic::packets_to_fail(share(q)?, share_above, dispersion, tail))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // The fewest clusters (stall episodes) a clustered percentile is bounded from.
    m.add("MIN_CLUSTERS", lowtail_stats::dispersion::MIN_CLUSTERS)?;
    m.add_class::<PyEvidence>()?;
    m.add_class::<PyInterval>()?;
    m.add_function(wrap_pyfunction!(binomial_cdf, m)?)?;
    m.add_function(wrap_pyfunction!(binomial_ppf, m)?)?;
    m.add_function(wrap_pyfunction!(student_t, m)?)?;
    m.add_function(wrap_pyfunction!(rank_interval, m)?)?;
    m.add_function(wrap_pyfunction!(packets_to_bound, m)?)?;
    m.add_function(wrap_pyfunction!(packets_to_pass, m)?)?;
    m.add_function(wrap_pyfunction!(packets_to_fail, m)?)
}
