//! How much memory the matcher may hold.
//!
//! The matcher keeps every PRE packet for `--max-latency` after it was sent (its POST copy
//! may come that late), so its memory is the capture's rate times that horizon: 32 bytes a
//! packet, 5.6 GB at 10 GbE's 14.88 Mpps and the default 10 s; and without bound for a
//! capture whose timestamps do not advance. Past the memory the host can give, the kernel's
//! OOM killer would end the analysis — or another process of the host. So the analysis
//! stops first, saying what it would need and how to need less.

use std::path::Path;

/// The share of the room found that the matcher may take: the rest is for the interpreter
/// around the analysis, its readers, the store, and whatever else runs.
const SHARE_NUM: u64 = 3;
const SHARE_DEN: u64 = 4;

/// Where a memory limit comes from (what the message names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitSource {
    /// `AnalyzeOptions::max_memory_bytes`.
    Option,
    /// Three quarters of the host's available memory (`MemAvailable`).
    Host,
    /// Three quarters of the limit of the memory cgroup the analysis runs in.
    Cgroup,
}

/// The matcher's memory limit and where it comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryLimit {
    /// Bytes the matcher may hold.
    pub bytes: u64,
    /// What set it.
    pub source: LimitSource,
}

impl MemoryLimit {
    /// The limit an analysis gets: the option's, else three quarters of the room this
    /// process has (the host's available memory, or its memory cgroup's limit if lower);
    /// None when neither can be read (no limit).
    pub fn for_analysis(option: Option<u64>) -> Option<MemoryLimit> {
        if let Some(bytes) = option {
            return Some(MemoryLimit { bytes, source: LimitSource::Option });
        }
        let host = read(Path::new("/proc/meminfo")).and_then(|t| mem_available(&t));
        let cgroup = read(Path::new("/proc/self/cgroup")).and_then(|t| cgroup_limit(&t, Path::new("/sys/fs/cgroup")));
        let (bytes, source) = match (host, cgroup) {
            (Some(h), Some(c)) if c < h => (c, LimitSource::Cgroup),
            (Some(h), _) => (h, LimitSource::Host),
            (None, Some(c)) => (c, LimitSource::Cgroup),
            (None, None) => return None,
        };
        Some(MemoryLimit { bytes: bytes / SHARE_DEN * SHARE_NUM, source })
    }

    /// Where the limit comes from, in the words of a message.
    pub fn describe(&self) -> &'static str {
        match self.source {
            LimitSource::Option => "the limit set for this analysis",
            LimitSource::Host => "three quarters of the memory this host had available",
            LimitSource::Cgroup => "three quarters of its memory cgroup's limit",
        }
    }
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// A file that holds one whole number (a cgroup's limit); None for "max" or anything else.
fn read_number(path: &Path) -> Option<u64> {
    read(path)?.trim().parse().ok()
}

/// `MemAvailable` of /proc/meminfo, in bytes.
fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let mut words = line.split_whitespace().skip(1);
    let value: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => value.checked_mul(1024),
        _ => None,
    }
}

/// The memory limit of the cgroup /proc/self/cgroup names, in bytes, its ancestors' too
/// (cgroup v2: the lowest `memory.max` from it up to `root`; v1: `memory.stat`'s
/// `hierarchical_memory_limit`, else `memory.limit_in_bytes`); None when unlimited or
/// unreadable. v1 writes "no limit" as a number near 2^63.
fn cgroup_limit(self_cgroup: &str, root: &Path) -> Option<u64> {
    let limited = |bytes: u64| (bytes < 1 << 62).then_some(bytes);
    for line in self_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let relative = Path::new(path.trim_start_matches('/'));
        if controllers.is_empty() {
            // "max" (no limit there) reads as no number.
            let lowest = relative.ancestors().filter_map(|dir| read_number(&root.join(dir).join("memory.max"))).min();
            if let Some(bytes) = lowest.and_then(limited) {
                return Some(bytes);
            }
        } else if controllers.split(',').any(|c| c == "memory") {
            let dir = root.join("memory").join(relative);
            let hierarchical = read(&dir.join("memory.stat")).and_then(|stat| {
                let line = stat.lines().find(|l| l.starts_with("hierarchical_memory_limit "))?;
                line.split_whitespace().nth(1)?.parse::<u64>().ok()
            });
            let own = || read_number(&dir.join("memory.limit_in_bytes"));
            if let Some(bytes) = hierarchical.or_else(own).and_then(limited) {
                return Some(bytes);
            }
        }
    }
    None
}

/// Bytes as a message shows them: "512 MiB", "5.6 GiB".
pub(crate) fn human_bytes(bytes: u64) -> String {
    const GIB: f64 = (1u64 << 30) as f64;
    const MIB: f64 = (1u64 << 20) as f64;
    if bytes as f64 >= GIB {
        format!("{:.1} GiB", bytes as f64 / GIB)
    } else {
        format!("{:.0} MiB", (bytes as f64 / MIB).max(1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_available_is_read_in_bytes() {
        let text = "MemTotal:       24684092 kB\nMemFree:  1 kB\nMemAvailable:   21978068 kB\n";
        assert_eq!(mem_available(text), Some(21_978_068 * 1024));
        assert_eq!(mem_available("MemTotal: 5 kB\n"), None);
        assert_eq!(mem_available("MemAvailable: lots kB\n"), None);
        assert_eq!(mem_available("MemAvailable: 99999999999999999999 kB\n"), None);
    }

    /// A file of a cgroup file system under `root`, its directories made.
    fn cgroup_file(root: &tempfile::TempDir, path: &str, text: &str) {
        let file = root.path().join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }

    #[test]
    fn an_ancestors_cgroup_limit_counts_too() {
        let root = tempfile::tempdir().unwrap();
        cgroup_file(&root, "memory/jobs/a/memory.limit_in_bytes", "9223372036854771712\n");
        cgroup_file(&root, "memory/jobs/a/memory.stat", "cache 0\nhierarchical_memory_limit 536870912\n");
        assert_eq!(cgroup_limit("4:memory:/jobs/a\n", root.path()), Some(512 << 20));

        cgroup_file(&root, "pod/container/memory.max", "max\n");
        cgroup_file(&root, "pod/memory.max", "2147483648\n");
        assert_eq!(cgroup_limit("0::/pod/container\n", root.path()), Some(2 << 30));
    }

    #[test]
    fn a_cgroup_limit_is_found_in_either_version_and_unlimited_is_none() {
        let root = tempfile::tempdir().unwrap();
        cgroup_file(&root, "memory/jobs/a/memory.limit_in_bytes", "268435456\n");
        assert_eq!(cgroup_limit("4:memory:/jobs/a\n0::/\n", root.path()), Some(256 << 20));
        cgroup_file(&root, "memory/jobs/a/memory.limit_in_bytes", "9223372036854771712\n");
        assert_eq!(cgroup_limit("4:memory:/jobs/a\n", root.path()), None);

        cgroup_file(&root, "user.slice/b/memory.max", "1073741824\n");
        assert_eq!(cgroup_limit("0::/user.slice/b\n", root.path()), Some(1 << 30));
        cgroup_file(&root, "user.slice/b/memory.max", "max\n");
        assert_eq!(cgroup_limit("0::/user.slice/b\n", root.path()), None);
        assert_eq!(cgroup_limit("garbage", root.path()), None);
    }

    #[test]
    fn an_option_sets_the_limit_itself() {
        let limit = MemoryLimit::for_analysis(Some(1 << 20)).unwrap();
        assert_eq!(limit, MemoryLimit { bytes: 1 << 20, source: LimitSource::Option });
    }

    #[test]
    fn bytes_read_as_mib_or_gib() {
        assert_eq!(human_bytes(512 << 20), "512 MiB");
        assert_eq!(human_bytes(6 << 30), "6.0 GiB");
        assert_eq!(human_bytes(10), "1 MiB");
    }
}
