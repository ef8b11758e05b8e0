//! SIGINT/SIGTERM as a flag the busy loops poll: the programs stop at a clean point,
//! drain what they hold, and write their statistics. The same stop comes when the process
//! that started a program exits (`PR_SET_PDEATHSIG`): a controller killed with SIGKILL
//! leaves no generator, timestamper or real-time forwarder spinning behind it. A controller
//! that hangs, alive, is covered by a time limit: `LOWTAIL_TIME_LIMIT` in the environment (a
//! duration: 90s, 2m) is the longest the program runs before it stops as SIGTERM would stop it.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Duration;

use lowtail_program::args::parse_duration;
use lowtail_program::Fatal;

/// The environment variable that bounds how long a program runs (lowtail sets it for the
/// programs of a run: a few times the run's planned length).
pub const TIME_LIMIT_ENV: &str = "LOWTAIL_TIME_LIMIT";

static STOP: AtomicBool = AtomicBool::new(false);
static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNAL.store(sig, Ordering::Relaxed);
    STOP.store(true, Ordering::Release);
}

/// Catch SIGINT and SIGTERM (without SA_RESTART, so a blocking poll returns EINTR), ask for
/// SIGTERM when the parent process exits, and stop at the time limit of the environment (a
/// value that is not a duration is a usage error).
pub fn install() -> Result<(), Fatal> {
    let limit = time_limit(std::env::var_os(TIME_LIMIT_ENV).as_deref())?;
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGALRM] {
        // SAFETY: the handler only stores to atomics, which is async-signal-safe.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
    stop_with_parent();
    if let Some(limit) = limit {
        stop_after(limit);
    }
    Ok(())
}

/// The time limit a `LOWTAIL_TIME_LIMIT` value asks for (None: unset or empty).
fn time_limit(value: Option<&std::ffi::OsStr>) -> Result<Option<Duration>, Fatal> {
    let Some(value) = value.filter(|v| !v.is_empty()) else { return Ok(None) };
    let text = value.to_str().ok_or_else(|| Fatal::usage(format!("{TIME_LIMIT_ENV} is not a duration")))?;
    match parse_duration(text) {
        Ok(limit) if !limit.is_zero() => Ok(Some(limit)),
        Ok(_) => Err(Fatal::usage(format!("{TIME_LIMIT_ENV} must be longer than 0, not {text:?}"))),
        Err(e) => Err(Fatal::usage(format!("{TIME_LIMIT_ENV}: {e}"))),
    }
}

/// SIGALRM after `limit` (a one-shot interval timer of this process, kept across exec and
/// not inherited by children): a stop like SIGTERM's.
fn stop_after(limit: Duration) {
    let timer = libc::itimerval {
        it_interval: libc::timeval { tv_sec: 0, tv_usec: 0 },
        it_value: libc::timeval {
            tv_sec: limit.as_secs().min(i32::MAX as u64) as libc::time_t,
            tv_usec: limit.subsec_micros() as libc::suseconds_t,
        },
    };
    // SAFETY: setitimer only reads the struct given; the handler for SIGALRM is installed.
    unsafe { libc::setitimer(libc::ITIMER_REAL, &timer, std::ptr::null_mut()) };
}

/// SIGTERM when the parent exits; a parent gone already (between our start and the
/// request) is a stop at once.
fn stop_with_parent() {
    // SAFETY: getppid has no preconditions; prctl(PR_SET_PDEATHSIG, signal) only sets a
    // per-process attribute.
    let parent = unsafe { libc::getppid() };
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong) };
    if unsafe { libc::getppid() } != parent {
        on_signal(libc::SIGTERM);
    }
}

/// Has SIGINT or SIGTERM come, or the time limit?
#[inline(always)]
pub fn stop_requested() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// "SIGINT"/"SIGTERM" if a signal stopped us, "time limit" if the time limit did.
pub fn received() -> Option<&'static str> {
    match SIGNAL.load(Ordering::Relaxed) {
        libc::SIGINT => Some("SIGINT"),
        libc::SIGTERM => Some("SIGTERM"),
        libc::SIGALRM => Some("time limit"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn a_time_limit_is_a_positive_duration_or_nothing() {
        assert_eq!(time_limit(None).unwrap(), None);
        assert_eq!(time_limit(Some(OsStr::new(""))).unwrap(), None);
        assert_eq!(time_limit(Some(OsStr::new("90s"))).unwrap(), Some(Duration::from_secs(90)));
        assert_eq!(time_limit(Some(OsStr::new("2.5"))).unwrap(), Some(Duration::from_millis(2500)));
        for bad in ["0", "abc", "-3s", "5 parsecs", "inf"] {
            let e = time_limit(Some(OsStr::new(bad))).unwrap_err().to_string();
            assert!(e.starts_with(TIME_LIMIT_ENV), "{bad}: {e}");
        }
    }

    proptest::proptest! {
        /// Whatever the environment holds, the limit is a positive duration, nothing, or a
        /// usage error naming the variable: never a panic, never a zero limit.
        #[test]
        fn any_value_is_a_limit_or_an_error_naming_the_variable(text in "\\PC{0,24}|[0-9.]{1,30}(ms|us|s|m|min|h)?") {
            match time_limit(Some(OsStr::new(&text))) {
                Ok(Some(limit)) => proptest::prop_assert!(!limit.is_zero()),
                Ok(None) => proptest::prop_assert!(text.is_empty()),
                Err(e) => proptest::prop_assert!(e.to_string().starts_with(TIME_LIMIT_ENV)),
            }
        }
    }
}
