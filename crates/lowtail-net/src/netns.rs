//! Interfaces named with their network namespace (`veth0@ns1`), and running a piece
//! of set-up inside that namespace.
//!
//! A socket keeps the namespace it was created in, so a program can open sockets in
//! several namespaces (the timestamper captures both sides of a testbed) by entering
//! each namespace on its own thread just long enough to create the socket.

use std::fmt;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::str::FromStr;

use lowtail_program::Fatal;

/// Why an interface argument does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IfaceRefError {
    /// `NAME@` with nothing after the @.
    #[error("`{0}`: the namespace after @ is empty")]
    EmptyNamespace(String),
    /// Empty, too long, or with a slash or a space.
    #[error("`{0}` is not an interface name")]
    BadName(String),
}

/// An interface and, optionally, the network namespace it lives in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IfaceRef {
    /// The interface name.
    pub name: String,
    /// A name under /run/netns (as `ip netns` makes them) or an absolute path to a
    /// namespace file such as /proc/PID/ns/net; `None` is the caller's namespace.
    pub netns: Option<String>,
}

impl FromStr for IfaceRef {
    type Err = IfaceRefError;

    fn from_str(s: &str) -> Result<IfaceRef, IfaceRefError> {
        let (name, netns) = match s.split_once('@') {
            Some((name, ns)) if !ns.is_empty() => (name, Some(ns.to_string())),
            Some(_) => return Err(IfaceRefError::EmptyNamespace(s.to_string())),
            None => (s, None),
        };
        if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains('/') || name.contains(char::is_whitespace) {
            return Err(IfaceRefError::BadName(name.to_string()));
        }
        Ok(IfaceRef { name: name.to_string(), netns })
    }
}

impl fmt::Display for IfaceRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.netns {
            Some(ns) => write!(f, "{}@{}", self.name, ns),
            None => f.write_str(&self.name),
        }
    }
}

impl IfaceRef {
    /// Run `f` with the calling thread inside this interface's namespace, then return to
    /// the namespace the thread was in.
    pub fn within<T>(&self, f: impl FnOnce() -> Result<T, Fatal>) -> Result<T, Fatal> {
        let Some(ns) = &self.netns else { return f() };
        let path = if ns.starts_with('/') { ns.clone() } else { format!("/run/netns/{ns}") };
        let target = File::open(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                Fatal::usage(format!("no such network namespace: {ns} ({path} does not exist)"))
            }
            _ => Fatal::os(format!("opening network namespace {path}"), e),
        })?;
        let home = File::open("/proc/thread-self/ns/net")
            .map_err(|e| Fatal::os("opening this thread's network namespace", e))?;
        enter(&target).map_err(|e| Fatal::os(format!("entering network namespace {ns}"), e))?;
        let result = f();
        // Failing to come back would leave later set-up in the wrong namespace: that is a
        // bug worth stopping for, not an error to report.
        enter(&home).expect("returning to the original network namespace");
        result
    }

    /// " in network namespace NS" for messages, or nothing.
    pub fn where_(&self) -> String {
        match &self.netns {
            Some(ns) => format!(" in network namespace {ns}"),
            None => String::new(),
        }
    }
}

fn enter(ns: &File) -> std::io::Result<()> {
    // SAFETY: setns on an open namespace file descriptor affects only this thread.
    if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_with_and_without_namespace() {
        assert_eq!("veth0".parse::<IfaceRef>().unwrap(), IfaceRef { name: "veth0".into(), netns: None });
        assert_eq!(
            "veth0@lt-gen-1".parse::<IfaceRef>().unwrap(),
            IfaceRef { name: "veth0".into(), netns: Some("lt-gen-1".into()) }
        );
        assert_eq!("v@/proc/1/ns/net".parse::<IfaceRef>().unwrap().netns.as_deref(), Some("/proc/1/ns/net"));
        assert_eq!("veth0@".parse::<IfaceRef>(), Err(IfaceRefError::EmptyNamespace("veth0@".into())));
        assert_eq!("@ns".parse::<IfaceRef>(), Err(IfaceRefError::BadName("".into())));
        assert!("a-name-that-is-far-too-long".parse::<IfaceRef>().is_err());
    }
}
