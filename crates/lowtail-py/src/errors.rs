//! Native errors as Python exceptions: one class per kind, in a hierarchy under
//! `LowtailError`, so Python sorts them by class, never by message. An error whose cause
//! is an operating-system error carries its number in `errno` (else `None`).

use std::error::Error;

use pyo3::prelude::*;
use pyo3::{create_exception, PyErr};

use lowtail_analyze::AnalyzeError;
use lowtail_capture::CaptureError as NativeCaptureError;
use lowtail_sim::SimError;
use lowtail_synth::SynthError;

/// Defines each exception class (name, base, docstring) and `add_classes`, which puts
/// them all in the module: one list for both.
macro_rules! exception_classes {
    ($($name:ident($base:ty): $doc:literal;)*) => {
        $(create_exception!(lowtail._native, $name, $base, $doc);)*

        fn add_classes(m: &Bound<'_, PyModule>) -> PyResult<()> {
            $(m.add(stringify!($name), m.py().get_type::<$name>())?;)*
            Ok(())
        }
    };
}

exception_classes! {
    LowtailError(pyo3::exceptions::PyException): "Any error of lowtail's native code.";
    OptionsError(LowtailError): "An analysis option out of its range.";
    SpecError(LowtailError): "A synthetic-pair or simulation spec that is not JSON, has unknown keys or values out of range.";
    CaptureError(LowtailError): "A capture file lowtail cannot read.";
    CaptureIOError(CaptureError): "The operating system refused to open or read a capture.";
    EmptyCaptureError(CaptureError): "A capture without a byte.";
    NotACaptureError(CaptureError): "A file in no format lowtail reads.";
    TruncatedHeaderError(CaptureError): "A capture that ends inside its header.";
    UnsupportedLinkTypeError(CaptureError): "A capture of a link layer lowtail cannot decode.";
    UnsupportedVersionError(CaptureError): "A pcap or pcapng version libpcap does not read either.";
    CorruptCaptureError(CaptureError): "A capture whose bytes contradict its format.";
    UnknownInterfaceError(CaptureError): "A pcapng packet on an interface the file never described.";
    DecompressError(CaptureError): "A damaged zstd or gzip stream (bad data, a checksum that fails).";
    NothingToAnalyzeError(LowtailError): "The captures were read but hold nothing to measure.";
    NoPacketIdsError(NothingToAnalyzeError): "No PRE frame carries a packet id where the options look for it.";
    TrimRemovesAllError(NothingToAnalyzeError): "The warm-up trim is longer than the PRE capture.";
    SwappedCapturesError(NothingToAnalyzeError): "Most latencies are negative: PRE and POST look swapped (or their clocks are far apart).";
    OutputError(LowtailError): "An output file could not be written.";
    ExportError(OutputError): "The matched series could not be written.";
    OutOfMemoryError(LowtailError): "The matcher would hold more memory than the analysis may take (the capture's rate times max_latency_ns).";
    CancelledError(LowtailError): "The analysis was cancelled.";
    SummaryError(LowtailError): "Stored bytes that are not a latency summary (damaged, or of a later format).";
    InternalError(LowtailError): "A bug in the native code (a thread panicked).";
}

/// Add every exception class to the module; `errno` defaults to `None` on all of them.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.py().get_type::<LowtailError>().setattr("errno", m.py().None())?;
    add_classes(m)
}

/// The errno of the first operating-system error among `err` and its causes.
fn os_errno(err: &(dyn Error + 'static)) -> Option<i32> {
    let mut cause = Some(err);
    while let Some(e) = cause {
        if let Some(code) = e.downcast_ref::<std::io::Error>().and_then(std::io::Error::raw_os_error) {
            return Some(code);
        }
        cause = e.source();
    }
    None
}

/// `new_err(message)` of the class, with `errno` set from the error's causes.
fn raise<T: pyo3::PyTypeInfo>(err: &(dyn Error + 'static)) -> PyErr {
    let py_err = PyErr::new::<T, _>(err.to_string());
    if let Some(code) = os_errno(err) {
        Python::attach(|py| py_err.value(py).setattr("errno", code)).expect("exceptions take attributes");
    }
    py_err
}

/// The Python exception of a capture error.
pub fn capture_error(e: &NativeCaptureError) -> PyErr {
    match e {
        NativeCaptureError::Io { .. } => raise::<CaptureIOError>(e),
        NativeCaptureError::Empty { .. } => raise::<EmptyCaptureError>(e),
        NativeCaptureError::NotACapture { .. } => raise::<NotACaptureError>(e),
        NativeCaptureError::TruncatedHeader { .. } => raise::<TruncatedHeaderError>(e),
        NativeCaptureError::UnsupportedLinkType { .. } => raise::<UnsupportedLinkTypeError>(e),
        NativeCaptureError::UnsupportedVersion { .. } => raise::<UnsupportedVersionError>(e),
        NativeCaptureError::Corrupt { .. } => raise::<CorruptCaptureError>(e),
        NativeCaptureError::UnknownInterface { .. } => raise::<UnknownInterfaceError>(e),
        NativeCaptureError::Decompress { .. } => raise::<DecompressError>(e),
    }
}

/// The Python exception of an analysis error.
pub fn analyze_error(e: &AnalyzeError) -> PyErr {
    match e {
        AnalyzeError::Options(_) => raise::<OptionsError>(e),
        AnalyzeError::Capture(c) => capture_error(c),
        AnalyzeError::NoPacketIds { .. } => raise::<NoPacketIdsError>(e),
        AnalyzeError::TrimRemovesAll { .. } => raise::<TrimRemovesAllError>(e),
        AnalyzeError::LooksSwapped { .. } => raise::<SwappedCapturesError>(e),
        AnalyzeError::OutOfMemory { .. } => raise::<OutOfMemoryError>(e),
        AnalyzeError::Cancelled => raise::<CancelledError>(e),
        AnalyzeError::Export(_) => raise::<ExportError>(e),
        AnalyzeError::ReaderPanicked => raise::<InternalError>(e),
    }
}

/// The Python exception of an options error.
pub fn options_error(e: &lowtail_analyze::OptionsError) -> PyErr {
    raise::<OptionsError>(e)
}

/// The Python exception of a failed synthetic pair.
pub fn synth_error(e: &SynthError) -> PyErr {
    match e {
        SynthError::InvalidSpec(_)
        | SynthError::UnknownFormat(_)
        | SynthError::UnknownCompression(_)
        | SynthError::Frame(_) => raise::<SpecError>(e),
        SynthError::File { .. } | SynthError::Io(_) | SynthError::Parquet(_) | SynthError::Batch(_) => {
            raise::<OutputError>(e)
        }
    }
}

/// The Python exception of a failed simulation.
pub fn sim_error(e: &SimError) -> PyErr {
    match e {
        SimError::Spec(_) => raise::<SpecError>(e),
    }
}

/// A spec that is not valid JSON for its type.
pub fn spec_json_error(what: &str, e: serde_json::Error) -> PyErr {
    SpecError::new_err(format!("bad {what} spec: {e}"))
}

/// The Python exception of bytes that are not a latency summary.
pub fn summary_error(e: &lowtail_stats::SummaryError) -> PyErr {
    raise::<SummaryError>(e)
}
