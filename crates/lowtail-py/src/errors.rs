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

create_exception!(lowtail._native, LowtailError, pyo3::exceptions::PyException, "Any error of lowtail's native code.");
create_exception!(lowtail._native, OptionsError, LowtailError, "An analysis option out of its range.");
create_exception!(
    lowtail._native,
    SpecError,
    LowtailError,
    "A synthetic-pair or simulation spec that is not JSON, has unknown keys or values out of range."
);
create_exception!(lowtail._native, CaptureError, LowtailError, "A capture file lowtail cannot read.");
create_exception!(
    lowtail._native,
    CaptureIOError,
    CaptureError,
    "The operating system refused to open or read a capture."
);
create_exception!(lowtail._native, EmptyCaptureError, CaptureError, "A capture without a byte.");
create_exception!(lowtail._native, NotACaptureError, CaptureError, "A file in no format lowtail reads.");
create_exception!(lowtail._native, TruncatedHeaderError, CaptureError, "A capture that ends inside its header.");
create_exception!(
    lowtail._native,
    UnsupportedLinkTypeError,
    CaptureError,
    "A capture of a link layer lowtail cannot decode."
);
create_exception!(lowtail._native, CorruptCaptureError, CaptureError, "A capture whose bytes contradict its format.");
create_exception!(
    lowtail._native,
    UnknownInterfaceError,
    CaptureError,
    "A pcapng packet on an interface the file never described."
);
create_exception!(lowtail._native, DecompressError, CaptureError, "A damaged zstd or gzip stream.");
create_exception!(
    lowtail._native,
    NothingToAnalyzeError,
    LowtailError,
    "The captures were read but hold nothing to measure."
);
create_exception!(
    lowtail._native,
    NoPacketIdsError,
    NothingToAnalyzeError,
    "No PRE frame carries a packet id where the options look for it."
);
create_exception!(
    lowtail._native,
    TrimRemovesAllError,
    NothingToAnalyzeError,
    "The warm-up trim is longer than the PRE capture."
);
create_exception!(lowtail._native, OutputError, LowtailError, "An output file could not be written.");
create_exception!(lowtail._native, ExportError, OutputError, "The matched series could not be written.");
create_exception!(lowtail._native, CancelledError, LowtailError, "The analysis was cancelled.");
create_exception!(lowtail._native, InternalError, LowtailError, "A bug in the native code (a thread panicked).");

/// Add every exception class to the module; `errno` defaults to `None` on all of them.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    py.get_type::<LowtailError>().setattr("errno", py.None())?;
    m.add("LowtailError", py.get_type::<LowtailError>())?;
    m.add("OptionsError", py.get_type::<OptionsError>())?;
    m.add("SpecError", py.get_type::<SpecError>())?;
    m.add("CaptureError", py.get_type::<CaptureError>())?;
    m.add("CaptureIOError", py.get_type::<CaptureIOError>())?;
    m.add("EmptyCaptureError", py.get_type::<EmptyCaptureError>())?;
    m.add("NotACaptureError", py.get_type::<NotACaptureError>())?;
    m.add("TruncatedHeaderError", py.get_type::<TruncatedHeaderError>())?;
    m.add("UnsupportedLinkTypeError", py.get_type::<UnsupportedLinkTypeError>())?;
    m.add("CorruptCaptureError", py.get_type::<CorruptCaptureError>())?;
    m.add("UnknownInterfaceError", py.get_type::<UnknownInterfaceError>())?;
    m.add("DecompressError", py.get_type::<DecompressError>())?;
    m.add("NothingToAnalyzeError", py.get_type::<NothingToAnalyzeError>())?;
    m.add("NoPacketIdsError", py.get_type::<NoPacketIdsError>())?;
    m.add("TrimRemovesAllError", py.get_type::<TrimRemovesAllError>())?;
    m.add("OutputError", py.get_type::<OutputError>())?;
    m.add("ExportError", py.get_type::<ExportError>())?;
    m.add("CancelledError", py.get_type::<CancelledError>())?;
    m.add("InternalError", py.get_type::<InternalError>())?;
    Ok(())
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
        SynthError::InvalidSpec(_) | SynthError::UnknownFormat(_) | SynthError::Frame(_) => raise::<SpecError>(e),
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
