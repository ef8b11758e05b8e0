//! What lowtail's testbed programs share, beyond what every native program shares
//! (`lowtail-program`: exit codes, errors, the common flags):
//!
//! * interfaces named `NAME` or `NAME@NETNS`, each socket opened inside its namespace
//!   (`netns`), AF_PACKET sockets (`socket`) and their mmap rings (`ring`);
//! * the clock the programs stamp and pace with (`clock`), SIGINT/SIGTERM and the death
//!   of the controller as a stop flag the busy loops poll (`signal`);
//! * the interface and host drop counters (`counters`) and the exact figures and units
//!   of the statistics (`summary`).
//!
//! The programs, each in `src/bin/NAME/` with the modules only it uses:
//!
//! * `lowtail-gen` — constant-rate traffic with busy-wait pacing on an absolute
//!   schedule (`pacing`), sent through an AF_PACKET socket (`tx`);
//! * `lowtail-cap` — the timestamper: TPACKET_V3 receive rings on one or more
//!   interfaces, hardware stamps where the NIC has them (`tstamp`), nanosecond pcap
//!   written off the capture thread (`pcapout`), and running figures while it captures
//!   (`matcher`: frames matched by id, p99 and max);
//! * `lowtail-fwd` — a busy-polling userspace forwarder with synthetic per-packet work
//!   and batch release, a controllable stand-in for an IPS;
//! * `lowtail-leash` — holds one of these on another host for its controller: stops it
//!   (and undoes set-up) when the controller says so, goes away, or falls silent.
#![warn(missing_docs)]

pub mod clock;
pub mod counters;
pub mod netns;
pub mod ring;
pub mod signal;
pub mod socket;
pub mod summary;
