use std::path::PathBuf;
use std::sync::atomic::Ordering;

use pyo3::prelude::*;
use serde::Deserialize;

use lowtail_analyze::{analyze_pair, AnalyzeOptions, Control};
use lowtail_frame::{Endian, IdSpec};

use crate::LowtailError;

/// Options as the Python side sends them (JSON); every field optional.
#[derive(Debug, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
struct OptionsIn {
    id_offset: Option<usize>,
    id_width: Option<usize>,
    id_endian: Option<String>,
    id_format: Option<String>,
    udp_port: Option<u16>,
    moonsniff_records: bool,
    trim_ns: Option<i64>,
    horizon_ns: Option<i64>,
    worst: Option<usize>,
    histogram_bins: Option<usize>,
    export: Option<PathBuf>,
}

fn options_from(json: &str) -> Result<AnalyzeOptions, String> {
    let o: OptionsIn = serde_json::from_str(json).map_err(|e| format!("bad analysis options: {e}"))?;
    let mut id = match o.id_format.as_deref() {
        None | Some("lowtail") => IdSpec::default(),
        Some("moonsniff") => IdSpec::moonsniff(),
        Some(other) => return Err(format!("unknown id format {other:?} (lowtail, moonsniff)")),
    };
    if let Some(off) = o.id_offset {
        id.offset = off;
    }
    if let Some(w) = o.id_width {
        if w != 4 && w != 8 {
            return Err(format!("--id-width must be 4 or 8, not {w}"));
        }
        id.width = w;
    }
    match o.id_endian.as_deref() {
        None => {}
        Some("big") => id.endian = Endian::Big,
        Some("little") => id.endian = Endian::Little,
        Some(other) => return Err(format!("--id-endian must be big or little, not {other:?}")),
    }
    id.udp_dst_port = o.udp_port;
    let defaults = AnalyzeOptions::default();
    Ok(AnalyzeOptions {
        id,
        force_moonsniff: o.moonsniff_records,
        trim_ns: o.trim_ns.unwrap_or(defaults.trim_ns),
        horizon_ns: o.horizon_ns.unwrap_or(defaults.horizon_ns),
        worst_n: o.worst.unwrap_or(defaults.worst_n),
        histogram_bins: o.histogram_bins.unwrap_or(defaults.histogram_bins),
        export: o.export,
    })
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
}

#[pymethods]
impl Analyzer {
    #[new]
    fn new(pre: PathBuf, post: PathBuf, options_json: &str) -> PyResult<Self> {
        let options = options_from(options_json).map_err(LowtailError::new_err)?;
        let size = |p: &PathBuf| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        let total_bytes = size(&pre) + size(&post);
        Ok(Analyzer { pre, post, options, control: Control::default(), total_bytes })
    }

    /// Run the analysis; returns the figures as JSON.
    fn run(&self, py: Python<'_>) -> PyResult<String> {
        let result = py.detach(|| analyze_pair(&self.pre, &self.post, &self.options, &self.control));
        match result {
            Ok(a) => Ok(a.to_json()),
            Err(e) => Err(LowtailError::new_err(e.to_string())),
        }
    }

    /// (bytes read, bytes in total) over both files.
    fn progress(&self) -> (u64, u64) {
        (self.control.pre_bytes.bytes() + self.control.post_bytes.bytes(), self.total_bytes)
    }

    fn cancel(&self) {
        self.control.cancel.store(true, Ordering::Relaxed);
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Analyzer>()
}
