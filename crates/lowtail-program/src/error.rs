//! Why a program stops: one enum of kinds, each with its exit code, printed as one line.

use std::fmt;
use std::io;
use std::path::Path;

use crate::exit::Exit;

/// What the programs need that an unprivileged user lacks, said once for all of them.
const PRIVILEGES: &str = "packet sockets need CAP_NET_RAW (and CAP_NET_ADMIN, CAP_SYS_ADMIN for namespaces and \
                          hardware timestamps; CAP_SYS_NICE for real-time scheduling): run as root";

/// A reason to stop, and what kind of reason it is: the kind chooses the exit code, the
/// message is one line.
#[derive(Debug, thiserror::Error)]
pub enum Fatal {
    /// Bad arguments or set-up the user must fix: no such interface, bad core, an option
    /// out of range (exit 2).
    #[error("{0}")]
    Usage(String),
    /// The kernel refused for want of a privilege (exit 2: the user must fix it).
    #[error("{what}: permission denied: {PRIVILEGES}")]
    PermissionDenied {
        /// What the program was doing.
        what: String,
    },
    /// An output could not be written because the disk or the quota is full (exit 4).
    #[error("{what}: disk full ({cause})")]
    DiskFull {
        /// What the program was writing.
        what: String,
        /// What the system said.
        cause: String,
    },
    /// A system call failed while running (exit 1).
    #[error("{what}: {source}")]
    Os {
        /// What the program was doing.
        what: String,
        /// What the system said.
        source: io::Error,
    },
    /// Any other failure while running (exit 1).
    #[error("{0}")]
    Failed(String),
}

impl Fatal {
    /// Bad arguments or set-up the user must fix.
    pub fn usage(message: impl Into<String>) -> Fatal {
        Fatal::Usage(message.into())
    }

    /// A failure while running.
    pub fn failed(message: impl Into<String>) -> Fatal {
        Fatal::Failed(message.into())
    }

    /// An OS error while doing `what`: a missing permission says which capabilities the
    /// programs need, a full disk is `DiskFull`; anything else is `Os`.
    pub fn os(what: impl fmt::Display, err: io::Error) -> Fatal {
        match err.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => Fatal::PermissionDenied { what: what.to_string() },
            _ if is_disk_full(&err) => Fatal::DiskFull { what: what.to_string(), cause: err.to_string() },
            _ => Fatal::Os { what: what.to_string(), source: err },
        }
    }

    /// Writing an output failed: a full disk (ENOSPC, EDQUOT, anywhere in the error's
    /// causes) is `DiskFull`; anything else a failure.
    pub fn write(what: impl fmt::Display, err: &(dyn std::error::Error + 'static)) -> Fatal {
        if is_disk_full(err) {
            return Fatal::DiskFull { what: what.to_string(), cause: err.to_string() };
        }
        Fatal::Failed(format!("{what}: {err}"))
    }

    /// A file the user named cannot be created: a full disk is `DiskFull`, anything else
    /// (no such directory, no permission) a usage error.
    pub fn create(path: &Path, err: io::Error) -> Fatal {
        let what = format!("cannot create {}", path.display());
        if is_disk_full(&err) {
            return Fatal::DiskFull { what, cause: err.to_string() };
        }
        Fatal::Usage(format!("{what}: {err}"))
    }

    /// The exit code this kind of stop has.
    pub fn exit(&self) -> Exit {
        match self {
            Fatal::Usage(_) | Fatal::PermissionDenied { .. } => Exit::Usage,
            Fatal::DiskFull { .. } => Exit::DiskFull,
            Fatal::Os { .. } | Fatal::Failed(_) => Exit::Failure,
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_has_its_own_exit_code() {
        let full = Fatal::write("writing x.json", &io::Error::from_raw_os_error(libc::ENOSPC));
        assert_eq!(full.exit(), Exit::DiskFull);
        assert!(full.to_string().starts_with("writing x.json: disk full"), "{full}");
        let wrapped = io::Error::other(io::Error::from_raw_os_error(libc::EDQUOT));
        assert_eq!(Fatal::write("w", &wrapped).exit(), Exit::DiskFull);
        assert_eq!(Fatal::write("w", &io::Error::from_raw_os_error(libc::EIO)).exit(), Exit::Failure);
        assert_eq!(Fatal::os("creating x", io::Error::from_raw_os_error(libc::ENOSPC)).exit(), Exit::DiskFull);
        let created = Fatal::create(Path::new("/x/y.pcap"), io::Error::from_raw_os_error(libc::ENOSPC));
        assert!(matches!(created, Fatal::DiskFull { .. }), "{created:?}");
    }

    #[test]
    fn a_missing_privilege_is_the_users_to_fix_and_says_which() {
        let denied = Fatal::os("opening a packet socket", io::Error::from_raw_os_error(libc::EPERM));
        assert_eq!(denied.exit(), Exit::Usage);
        assert!(denied.to_string().contains("CAP_NET_RAW"), "{denied}");
        let missing = Fatal::create(Path::new("/nonexistent/x"), io::Error::from_raw_os_error(libc::ENOENT));
        assert_eq!(
            (missing.exit(), missing.to_string().starts_with("cannot create /nonexistent/x: ")),
            (Exit::Usage, true)
        );
    }

    #[test]
    fn any_other_os_error_is_a_failure_that_keeps_its_cause() {
        let failed = Fatal::os("binding", io::Error::from_raw_os_error(libc::EIO));
        assert_eq!(failed.exit(), Exit::Failure);
        assert!(std::error::Error::source(&failed).is_some());
        assert!(failed.to_string().starts_with("binding: "), "{failed}");
    }
}
