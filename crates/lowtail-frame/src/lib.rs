//! The wire format of test traffic, both directions: `build` crafts the frames the
//! generators send, `decode` finds the packet id in any captured frame, `flow` the flow it
//! belongs to, `schedule` which flow each sent frame is of, `marker` which ids carry the bytes an IPS rule matches.
#![warn(missing_docs)]

pub mod build;
pub mod decode;
pub mod flow;
pub mod marker;
pub mod schedule;

pub use build::{FrameError, FrameTemplate, TemplateSpec, Vlan, FCS_BYTES, MAX_FRAME_SIZE, MIN_FRAME_SIZE};
pub use decode::{extract_id, Endian, Extracted, IdFormat, IdSpec};
pub use flow::{quick_flow_bytes, Flow, FlowKey, FLOW_KEYS};
pub use marker::{MatchShare, MatchShareError, MARKER, MARKER_OFFSET};
pub use schedule::{FlowSchedule, FlowWeightsError, MAX_FLOW_WEIGHT, MAX_WEIGHT_SUM};
