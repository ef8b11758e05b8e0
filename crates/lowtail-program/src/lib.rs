//! What every native program of lowtail shares (`lowtail-gen`, `lowtail-cap`,
//! `lowtail-fwd`, `lowtail-leash`, `lowtail-noise`), declared once:
//!
//! * `exit` — the one exit-code table (`Exit`; Python reads it as
//!   `_native.PROGRAM_EXIT_CODES`) and `say!`, a line on stderr that never panics;
//! * `error` — `Fatal`, the kinds of reason a program stops, each with its exit code;
//! * `flags` — the flags the programs share (`--cpu`, `--rt-priority`, `--nice`,
//!   `--stats-json`, `--live-json`) as clap argument groups, and `run`, which gives every
//!   program `--version` (the line of `lowtail-version`) and one-line argument errors;
//! * `sched` — what the scheduling flags do (pinning, SCHED_FIFO, nice);
//! * `args` — argument types people write (durations, CPU lists);
//! * `output` — the statistics document and the running-figures lines.
#![warn(missing_docs)]

pub mod args;
pub mod error;
pub mod exit;
pub mod flags;
pub mod output;
pub mod sched;

pub use error::Fatal;
pub use exit::Exit;
pub use flags::run;
