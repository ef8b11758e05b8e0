//! The exit codes of the native programs: what kind of stop each one was, one table for
//! all five programs and for their callers.

/// How a program ended, as its exit code tells its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Finished and the result can be trusted (0).
    Ok,
    /// Something failed while running (I/O error, socket failure): nothing usable (1).
    Failure,
    /// Bad arguments or set-up the user must fix: no such interface, missing privilege,
    /// bad core (2).
    Usage,
    /// Finished, statistics written, but the result is not trustworthy: the generator fell
    /// behind its rate or could not send every frame; the capture dropped frames (3).
    Degraded,
    /// An output (the capture, the statistics, the probe's results) could not be written
    /// because the disk (or the quota) is full: told apart so that the caller can say
    /// "disk full" without reading a log (4).
    DiskFull,
    /// Stopped by SIGINT/SIGTERM before doing everything it planned (130).
    Interrupted,
}

impl Exit {
    /// Every exit code, in the order of the table callers see.
    pub const ALL: [Exit; 6] =
        [Exit::Ok, Exit::Failure, Exit::Usage, Exit::Degraded, Exit::DiskFull, Exit::Interrupted];

    /// The process's exit code.
    pub const fn code(self) -> i32 {
        match self {
            Exit::Ok => 0,
            Exit::Failure => 1,
            Exit::Usage => 2,
            Exit::Degraded => 3,
            Exit::DiskFull => 4,
            Exit::Interrupted => 130,
        }
    }

    /// Its name as callers know it (`lowtail._native.PROGRAM_EXIT_CODES["disk_full"]`).
    pub const fn name(self) -> &'static str {
        match self {
            Exit::Ok => "ok",
            Exit::Failure => "failure",
            Exit::Usage => "usage",
            Exit::Degraded => "degraded",
            Exit::DiskFull => "disk_full",
            Exit::Interrupted => "interrupted",
        }
    }
}

impl From<Exit> for i32 {
    fn from(exit: Exit) -> i32 {
        exit.code()
    }
}

/// One line on stderr that never panics: a program whose stderr is closed or full (a
/// full disk under its log) goes on, and its exit code and statistics still tell.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_names_each_code_once() {
        let codes: Vec<i32> = Exit::ALL.iter().map(|e| e.code()).collect();
        assert_eq!(codes, [0, 1, 2, 3, 4, 130]);
        let mut names: Vec<&str> = Exit::ALL.iter().map(|e| e.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Exit::ALL.len());
        assert_eq!(i32::from(Exit::DiskFull), 4);
    }
}
