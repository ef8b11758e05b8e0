//! Clocks. Pacing runs on CLOCK_MONOTONIC (never steps); captured frames carry
//! CLOCK_REALTIME stamps (what the kernel puts on packets), so the programs record both
//! at their start to relate the two.

/// A source of nanosecond time; the pacing logic is generic over it so that tests can
/// drive it with a simulated clock.
pub trait Clock {
    /// The current time in nanoseconds.
    fn now_ns(&mut self) -> i64;
}

/// The real CLOCK_MONOTONIC (a vDSO call, some 20 ns).
#[derive(Debug, Default, Clone, Copy)]
pub struct Monotonic;

impl Clock for Monotonic {
    #[inline(always)]
    fn now_ns(&mut self) -> i64 {
        monotonic_ns()
    }
}

/// CLOCK_MONOTONIC in nanoseconds.
#[inline(always)]
pub fn monotonic_ns() -> i64 {
    read(libc::CLOCK_MONOTONIC)
}

/// CLOCK_REALTIME in nanoseconds since the epoch.
#[inline(always)]
pub fn realtime_ns() -> i64 {
    read(libc::CLOCK_REALTIME)
}

#[inline(always)]
fn read(clock: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec; both clocks always exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// Busy-wait until the monotonic clock reaches `deadline_ns` (synthetic per-packet work
/// of the forwarder: it occupies the core the way real processing would).
#[inline]
pub fn spin_until(deadline_ns: i64) {
    while monotonic_ns() < deadline_ns {
        std::hint::spin_loop();
    }
}
