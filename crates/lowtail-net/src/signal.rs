//! SIGINT/SIGTERM as a flag the busy loops poll: the programs stop at a clean point,
//! drain what they hold, and write their statistics. The same stop comes when the process
//! that started a program exits (`PR_SET_PDEATHSIG`): a controller killed with SIGKILL
//! leaves no generator, timestamper or real-time forwarder spinning behind it.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);
static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNAL.store(sig, Ordering::Relaxed);
    STOP.store(true, Ordering::Release);
}

/// Catch SIGINT and SIGTERM (without SA_RESTART, so a blocking poll returns EINTR), and
/// ask for SIGTERM when the parent process exits.
pub fn install() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to atomics, which is async-signal-safe.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
    stop_with_parent();
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

/// Has SIGINT or SIGTERM come?
#[inline(always)]
pub fn stop_requested() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// "SIGINT"/"SIGTERM" if a signal stopped us.
pub fn received() -> Option<&'static str> {
    match SIGNAL.load(Ordering::Relaxed) {
        libc::SIGINT => Some("SIGINT"),
        libc::SIGTERM => Some("SIGTERM"),
        _ => None,
    }
}
