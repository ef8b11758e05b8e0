//! lowtail's testbed programs and the logic they share.
//!
//! * `lowtail-gen` — constant-rate traffic with busy-wait pacing on an absolute
//!   schedule (`pacing`), sent through an AF_PACKET socket (`tx`).
//! * `lowtail-cap` — the timestamper: TPACKET_V3 receive rings (`ring`) on one or more
//!   interfaces, hardware stamps where the NIC has them (`tstamp`), nanosecond pcap
//!   written off the capture thread (`pcapout`), kernel drop counters (`counters`),
//!   and running figures while it captures (`live`: frames matched by id, p99 and max).
//! * `lowtail-fwd` — a busy-polling userspace forwarder with synthetic per-packet work
//!   and batch release, a controllable stand-in for an IPS.
//! * `lowtail-leash` — holds one of these on another host for its controller: stops it
//!   (and undoes set-up) when the controller says so, goes away, or falls silent.
//!
//! All three take interfaces as `NAME` or `NAME@NETNS` (`netns`), pin themselves with
//! `--cpu` (`cpu`), stop cleanly on SIGINT/SIGTERM (`signal`), write their statistics
//! as JSON (`summary`) and exit with codes that mean something (`error`).
#![warn(missing_docs)]

pub mod cli;
pub mod clock;
pub mod counters;
pub mod cpu;
pub mod error;
pub mod live;
pub mod netns;
pub mod pacing;
pub mod pcapout;
pub mod ring;
pub mod signal;
pub mod socket;
pub mod summary;
pub mod tstamp;
pub mod tx;
