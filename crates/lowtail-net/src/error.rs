//! Why a program stopped, and the exit code that tells its caller what kind of stop it was.

use std::fmt;
use std::io;

/// Finished and the result can be trusted.
pub const EXIT_OK: i32 = 0;
/// Something failed while running (I/O error, socket failure): nothing usable.
pub const EXIT_FAILURE: i32 = 1;
/// Bad arguments or set-up the user must fix (no such interface, missing privilege, bad core).
pub const EXIT_USAGE: i32 = 2;
/// Finished, statistics written, but the result is not trustworthy (the generator fell
/// behind its rate or could not send every frame; the capture dropped frames).
pub const EXIT_DEGRADED: i32 = 3;
/// An output could not be written because the disk (or the quota) is full: the capture,
/// the statistics. Told apart so the caller can say "disk full" without reading a log.
pub const EXIT_DISK_FULL: i32 = 4;
/// The generator was stopped by SIGINT/SIGTERM before sending everything it planned.
pub const EXIT_INTERRUPTED: i32 = 130;

/// Every exit code by name, as callers (`lowtail._native.PROGRAM_EXIT_CODES`) know them.
pub const EXIT_CODES: [(&str, i32); 6] = [
    ("ok", EXIT_OK),
    ("failure", EXIT_FAILURE),
    ("usage", EXIT_USAGE),
    ("degraded", EXIT_DEGRADED),
    ("disk_full", EXIT_DISK_FULL),
    ("interrupted", EXIT_INTERRUPTED),
];

/// One line on stderr that never panics: a program whose stderr is closed or full (a
/// full disk under its log) goes on, and its exit code and statistics still tell.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

/// A one-line reason to stop and its exit code.
#[derive(Debug)]
pub struct Fatal {
    /// The exit code (`EXIT_USAGE`, `EXIT_FAILURE`, ...).
    pub code: i32,
    /// One line saying what went wrong.
    pub message: String,
}

impl Fatal {
    /// Bad arguments or set-up the user must fix (exit 2).
    pub fn usage(message: impl Into<String>) -> Fatal {
        Fatal { code: EXIT_USAGE, message: message.into() }
    }

    /// A failure while running (exit 1).
    pub fn failure(message: impl Into<String>) -> Fatal {
        Fatal { code: EXIT_FAILURE, message: message.into() }
    }

    /// An OS error while doing `what`: permission problems become usage errors that say
    /// which capability is missing, a full disk is `EXIT_DISK_FULL`; everything else is a
    /// failure.
    pub fn os(what: impl fmt::Display, err: io::Error) -> Fatal {
        match err.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => Fatal::usage(format!(
                "{what}: permission denied: packet sockets need CAP_NET_RAW (and CAP_NET_ADMIN, \
                 CAP_SYS_ADMIN for namespaces and hardware timestamps): run as root"
            )),
            _ => Fatal::write(what, &err),
        }
    }

    /// Writing an output failed: a full disk (ENOSPC, EDQUOT, anywhere in the error's
    /// causes) is `EXIT_DISK_FULL` and says so; anything else is a failure.
    pub fn write(what: impl fmt::Display, err: &(dyn std::error::Error + 'static)) -> Fatal {
        if is_disk_full(err) {
            return Fatal { code: EXIT_DISK_FULL, message: format!("{what}: disk full ({err})") };
        }
        Fatal::failure(format!("{what}: {err}"))
    }
}

/// ENOSPC or EDQUOT among `err` and its causes.
fn is_disk_full(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(err);
    while let Some(e) = cause {
        cause = e.source();
        if let Some(io) = e.downcast_ref::<io::Error>() {
            if matches!(io.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT)) {
                return true;
            }
            // an io::Error wrapping another error skips it in `source()`
            if let Some(inner) = io.get_ref() {
                cause = Some(inner);
            }
        }
    }
    false
}

impl fmt::Display for Fatal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Run a program's body and exit with its code; a `Fatal` is printed as one line on
/// stderr, prefixed with the program's name.
pub fn exit_with(program: &str, body: impl FnOnce() -> Result<i32, Fatal>) -> ! {
    let code = match body() {
        Ok(code) => code,
        Err(fatal) => {
            crate::say!("{program}: {}", fatal.message);
            fatal.code
        }
    };
    std::process::exit(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_has_its_own_exit_code() {
        let full = Fatal::write("writing x.json", &io::Error::from_raw_os_error(libc::ENOSPC));
        assert_eq!(full.code, EXIT_DISK_FULL);
        assert!(full.message.starts_with("writing x.json: disk full"), "{}", full.message);
        let wrapped = io::Error::other(io::Error::from_raw_os_error(libc::EDQUOT));
        assert_eq!(Fatal::write("w", &wrapped).code, EXIT_DISK_FULL);
        assert_eq!(Fatal::write("w", &io::Error::from_raw_os_error(libc::EIO)).code, EXIT_FAILURE);
        assert_eq!(Fatal::os("creating x", io::Error::from_raw_os_error(libc::ENOSPC)).code, EXIT_DISK_FULL);
    }
}
