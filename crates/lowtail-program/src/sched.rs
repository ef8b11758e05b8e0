//! What the scheduling flags do: pin the calling thread to a core, run it under
//! SCHED_FIFO or at a nice value, and say how it runs for the statistics.

use std::fmt;
use std::mem::{size_of, zeroed};

use crate::error::Fatal;

/// How a program's thread is scheduled, as its statistics record it ("SCHED_FIFO 40").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Ordinary scheduling at the nice value it inherited.
    Ordinary,
    /// Ordinary scheduling at this nice value.
    Nice(i32),
    /// SCHED_FIFO at this priority.
    RealTime(i32),
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Policy::Ordinary => f.write_str("SCHED_OTHER"),
            Policy::Nice(n) => write!(f, "SCHED_OTHER nice {n}"),
            Policy::RealTime(p) => write!(f, "SCHED_FIFO {p}"),
        }
    }
}

/// The cores this process may run on.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: sched_getaffinity fills a zeroed cpu_set_t.
    let mut set: libc::cpu_set_t = unsafe { zeroed() };
    if unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect()
}

/// Pin the calling thread to `cpu`, or say which cores exist. The kernel judges: a
/// thread may move to any core of its process's cpuset, also one outside its own
/// current mask (the probe's threads are started by a main thread pinned elsewhere).
pub fn pin_to(cpu: usize) -> Result<(), Fatal> {
    let refused = || Fatal::usage(format!("cannot pin to core {cpu}: allowed cores are {}", ranges(&allowed_cpus())));
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(refused());
    }
    // SAFETY: a zeroed cpu_set_t with one bit set (below CPU_SETSIZE, checked above), for
    // this thread (pid 0).
    let mut set: libc::cpu_set_t = unsafe { zeroed() };
    unsafe { libc::CPU_SET(cpu, &mut set) };
    if unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) } != 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EINVAL) {
            return Err(refused()); // offline, or outside the cpuset
        }
        return Err(Fatal::os(format!("pinning to core {cpu}"), err));
    }
    Ok(())
}

/// Run the calling thread under SCHED_FIFO at `priority` (1 to 99): ordinary tasks
/// then never preempt it on its core. The kernel still lends starving ordinary tasks a
/// share of the core (RT throttling / the fair server: up to 50 ms per second by
/// default), so a core that other work shares still causes stalls, only rarer ones.
pub fn run_realtime(priority: i32) -> Result<(), Fatal> {
    if !(1..=99).contains(&priority) {
        return Err(Fatal::usage(format!("real-time priority {priority} is outside 1..99")));
    }
    let param = libc::sched_param { sched_priority: priority };
    // SAFETY: sched_setscheduler on this thread with a valid parameter block.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        return Err(Fatal::os("switching to SCHED_FIFO (needs CAP_SYS_NICE)", std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Give the calling thread this nice value (-20 to 19; below 0 needs CAP_SYS_NICE).
pub fn set_nice(nice: i32) -> Result<(), Fatal> {
    if !(-20..=19).contains(&nice) {
        return Err(Fatal::usage(format!("nice value {nice} is outside -20..19")));
    }
    // SAFETY: setpriority on this thread (Linux: who 0 with PRIO_PROCESS is the caller).
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) } != 0 {
        return Err(Fatal::os(
            format!("setting nice {nice} (needs CAP_SYS_NICE below 0)"),
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// "0-3,6" for a sorted list of cores.
pub fn ranges(cpus: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(if i == j { cpus[i].to_string() } else { format!("{}-{}", cpus[i], cpus[j]) });
        i = j + 1;
    }
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exit::Exit;

    #[test]
    fn core_lists_read_as_ranges() {
        assert_eq!(ranges(&[0, 1, 2, 3, 6]), "0-3,6");
        assert_eq!(ranges(&[1]), "1");
        assert_eq!(ranges(&[]), "none");
    }

    #[test]
    fn a_core_that_does_not_exist_is_a_usage_error() {
        let err = pin_to(libc::CPU_SETSIZE as usize + 5).unwrap_err();
        assert_eq!(err.exit(), Exit::Usage);
        assert!(err.to_string().contains("allowed cores are"), "{err}");
    }

    #[test]
    fn a_thread_pinned_to_one_core_may_still_move_to_another() {
        let cpus = allowed_cpus();
        if cpus.len() < 2 {
            return; // one core: nothing to move to
        }
        let (first, last) = (cpus[0], cpus[cpus.len() - 1]);
        std::thread::spawn(move || {
            pin_to(first).unwrap();
            pin_to(last).unwrap();
            assert_eq!(allowed_cpus(), [last]);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn out_of_range_priorities_and_nice_values_are_usage_errors() {
        assert!(run_realtime(100).unwrap_err().to_string().contains("outside 1..99"));
        assert!(set_nice(-21).unwrap_err().to_string().contains("outside -20..19"));
    }

    #[test]
    fn policies_read_as_the_statistics_write_them() {
        assert_eq!(Policy::RealTime(40).to_string(), "SCHED_FIFO 40");
        assert_eq!(Policy::Nice(-20).to_string(), "SCHED_OTHER nice -20");
        assert_eq!(Policy::Ordinary.to_string(), "SCHED_OTHER");
    }
}
