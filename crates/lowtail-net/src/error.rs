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
/// The generator was stopped by SIGINT/SIGTERM before sending everything it planned.
pub const EXIT_INTERRUPTED: i32 = 130;

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
    /// which capability is missing; everything else is a failure.
    pub fn os(what: impl fmt::Display, err: io::Error) -> Fatal {
        match err.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => Fatal::usage(format!(
                "{what}: permission denied: packet sockets need CAP_NET_RAW (and CAP_NET_ADMIN, \
                 CAP_SYS_ADMIN for namespaces and hardware timestamps): run as root"
            )),
            _ => Fatal::failure(format!("{what}: {err}")),
        }
    }
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
            eprintln!("{program}: {}", fatal.message);
            fatal.code
        }
    };
    std::process::exit(code)
}
