//! `AnalyzeOptions` and `Analyzer`: the analysis pipeline seen from Python.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use lowtail_analyze::{analyze_pair, AnalyzeOptions, Control, OptionsError};
use lowtail_frame::{Endian, FlowKey, IdFormat};

use crate::errors::{analyze_error, options_error};
use crate::stats::PySeriesSummary;
use lowtail_stats::SeriesSummary;

/// How to find packet ids and what to compute: `lowtail analyze`'s options under the
/// names of lowtail_analyze::AnalyzeOptions, its defaults and its check. Keyword
/// arguments only; one left out (or None) takes the default, and the id fields default
/// to `id_format`'s preset. Read-only once built.
#[pyclass(module = "lowtail._native", name = "AnalyzeOptions", frozen, eq)]
#[derive(Clone, PartialEq)]
pub struct PyAnalyzeOptions(AnalyzeOptions);

#[pymethods]
impl PyAnalyzeOptions {
    #[new]
    #[pyo3(signature = (
        *, id_format=None, id_offset=None, id_width=None, id_endian=None, udp_port=None,
        moonsniff_records=false, trim_ns=None, max_latency_ns=None, worst=None, histogram_bins=None, export=None,
        flow_key=None, max_memory_bytes=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        id_format: Option<&str>,
        id_offset: Option<i64>,
        id_width: Option<i64>,
        id_endian: Option<&str>,
        udp_port: Option<i64>,
        moonsniff_records: bool,
        trim_ns: Option<i64>,
        max_latency_ns: Option<i64>,
        worst: Option<i64>,
        histogram_bins: Option<i64>,
        export: Option<PathBuf>,
        flow_key: Option<&str>,
        max_memory_bytes: Option<i64>,
    ) -> PyResult<Self> {
        let build = || -> Result<AnalyzeOptions, OptionsError> {
            let format = match id_format {
                None => IdFormat::default(),
                Some(name) => IdFormat::from_name(name).ok_or_else(|| OptionsError::IdFormat(name.to_string()))?,
            };
            let mut o = AnalyzeOptions::for_id_format(format);
            if let Some(v) = id_offset {
                o.id_offset = count("id_offset", v)?;
            }
            if let Some(v) = id_width {
                o.id_width = usize::try_from(v).map_err(|_| OptionsError::IdWidth(v))?;
            }
            if let Some(name) = id_endian {
                o.id_endian = Endian::from_name(name).ok_or_else(|| OptionsError::IdEndian(name.to_string()))?;
            }
            if let Some(v) = udp_port {
                o.udp_port = Some(port(v)?);
            }
            o.moonsniff_records = moonsniff_records;
            o.trim_ns = trim_ns.unwrap_or(o.trim_ns);
            o.max_latency_ns = max_latency_ns.unwrap_or(o.max_latency_ns);
            if let Some(v) = max_memory_bytes {
                o.max_memory_bytes = Some(count("max_memory_bytes", v)? as u64);
            }
            if let Some(v) = worst {
                o.worst = count("worst", v)?;
            }
            if let Some(v) = histogram_bins {
                o.histogram_bins = count("histogram_bins", v)?;
            }
            o.export = export;
            if let Some(name) = flow_key {
                o.flow_key = FlowKey::from_name(name).ok_or_else(|| OptionsError::FlowKey(name.to_string()))?;
            }
            o.check()?;
            Ok(o)
        };
        build().map(PyAnalyzeOptions).map_err(|e| options_error(&e))
    }

    /// The preset the id fields start from: "lowtail" or "moonsniff".
    #[getter]
    fn id_format(&self) -> &'static str {
        self.0.id_format.name()
    }

    /// Bytes from the start of the UDP payload to the id.
    #[getter]
    fn id_offset(&self) -> usize {
        self.0.id_offset
    }

    /// Id width in bytes, 4 or 8; 4-byte ids are unwrapped.
    #[getter]
    fn id_width(&self) -> usize {
        self.0.id_width
    }

    /// The id's byte order: "big" or "little".
    #[getter]
    fn id_endian(&self) -> &'static str {
        self.0.id_endian.name()
    }

    /// Only UDP datagrams to this port carry ids (None: any port).
    #[getter]
    fn udp_port(&self) -> Option<u16> {
        self.0.udp_port
    }

    /// Read files without pcap magic as MoonSniff records.
    #[getter]
    fn moonsniff_records(&self) -> bool {
        self.0.moonsniff_records
    }

    /// Warm-up to cut, in nanoseconds from the first PRE packet.
    #[getter]
    fn trim_ns(&self) -> i64 {
        self.0.trim_ns
    }

    /// Latencies above this count as losses (bounds memory to rate × this).
    #[getter]
    fn max_latency_ns(&self) -> i64 {
        self.0.max_latency_ns
    }

    /// The most memory the matcher may hold, in bytes (None: three quarters of what the
    /// host, or its memory cgroup, has when the analysis starts).
    #[getter]
    fn max_memory_bytes(&self) -> Option<u64> {
        self.0.max_memory_bytes
    }

    /// How many worst events to keep.
    #[getter]
    fn worst(&self) -> usize {
        self.0.worst
    }

    /// Bins of the latency and jitter histograms.
    #[getter]
    fn histogram_bins(&self) -> usize {
        self.0.histogram_bins
    }

    /// Where the matched series goes (Parquet), or None.
    #[getter]
    fn export(&self) -> Option<String> {
        self.0.export.as_ref().map(|p| p.display().to_string())
    }

    /// What tells PRE's flows apart: "5tuple", "src-port" or "none".
    #[getter]
    fn flow_key(&self) -> &'static str {
        self.0.flow_key.name()
    }

    /// Every option by name, as the database stores them.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let text = serde_json::to_string(&self.0).expect("options serialise");
        py.import("json")?.call_method1("loads", (text,))?.cast_into::<PyDict>().map_err(PyErr::from)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let fields: PyResult<Vec<String>> =
            self.to_dict(py)?.iter().map(|(k, v)| Ok(format!("{k}={}", v.repr()?))).collect();
        Ok(format!("AnalyzeOptions({})", fields?.join(", ")))
    }
}

fn count(option: &'static str, value: i64) -> Result<usize, OptionsError> {
    usize::try_from(value).map_err(|_| OptionsError::Negative { option, value })
}

fn port(value: i64) -> Result<u16, OptionsError> {
    if value < 0 {
        return Err(OptionsError::Negative { option: "udp_port", value });
    }
    u16::try_from(value).map_err(|_| OptionsError::TooLarge { option: "udp_port", value, max: u16::MAX as u64 })
}

/// One analysis of a capture pair. `run()` does the work without holding the GIL, so
/// another Python thread can watch `progress()` and call `cancel()`.
#[pyclass(module = "lowtail._native")]
struct Analyzer {
    pre: PathBuf,
    post: PathBuf,
    options: AnalyzeOptions,
    control: Control,
    total_bytes: u64,
    /// The last run's latency summary, until `take_summary` takes it.
    summary: Mutex<Option<SeriesSummary>>,
}

#[pymethods]
impl Analyzer {
    #[new]
    #[pyo3(signature = (pre, post, options=None))]
    fn new(pre: PathBuf, post: PathBuf, options: Option<&Bound<'_, PyAnalyzeOptions>>) -> Self {
        let options = options.map(|o| o.get().0.clone()).unwrap_or_default();
        let size = |p: &PathBuf| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        let total_bytes = size(&pre) + size(&post);
        Analyzer { pre, post, options, control: Control::default(), total_bytes, summary: Mutex::new(None) }
    }

    /// Run the analysis; returns the figures as JSON (`take_summary` then gives the
    /// latencies' summary).
    fn run(&self, py: Python<'_>) -> PyResult<String> {
        let result = py.detach(|| analyze_pair(&self.pre, &self.post, &self.options, &self.control));
        let mut analysis = result.map_err(|e| analyze_error(&e))?;
        let json = analysis.to_json();
        *self.summary.lock().expect("summary lock") = Some(std::mem::take(&mut analysis.summary));
        Ok(json)
    }

    /// The exact distribution and time blocks of the last run's latencies (once; None
    /// before a run finished).
    fn take_summary(&self, py: Python<'_>) -> PyResult<Option<PySeriesSummary>> {
        let taken = self.summary.lock().expect("summary lock").take();
        taken.map(|s| PySeriesSummary::wrap(py, s)).transpose()
    }

    /// (bytes read, bytes in total) over both files.
    fn progress(&self) -> (u64, u64) {
        (self.control.pre_bytes.bytes() + self.control.post_bytes.bytes(), self.total_bytes)
    }

    /// Ask `run()` to stop; it then raises CancelledError.
    fn cancel(&self) {
        self.control.cancel.store(true, Ordering::Relaxed);
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyAnalyzeOptions>()?;
    m.add_class::<Analyzer>()
}
