//! Pinning the calling thread to one core.

use std::mem::{size_of, zeroed};

use crate::error::Fatal;

/// The cores this process may run on.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: sched_getaffinity fills a zeroed cpu_set_t.
    let mut set: libc::cpu_set_t = unsafe { zeroed() };
    if unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect()
}

/// Pin the calling thread to `cpu`, or say which cores exist.
pub fn pin_to(cpu: usize) -> Result<(), Fatal> {
    let allowed = allowed_cpus();
    if !allowed.contains(&cpu) {
        return Err(Fatal::usage(format!("cannot pin to core {cpu}: allowed cores are {}", ranges(&allowed))));
    }
    // SAFETY: a zeroed cpu_set_t with one bit set, for this thread (pid 0).
    let mut set: libc::cpu_set_t = unsafe { zeroed() };
    unsafe { libc::CPU_SET(cpu, &mut set) };
    if unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) } != 0 {
        return Err(Fatal::os(format!("pinning to core {cpu}"), std::io::Error::last_os_error()));
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

/// Set the calling thread's scheduling from `--rt-priority` and return how it runs, for
/// the statistics: an explicit priority must succeed; 0 means ordinary scheduling; with
/// no priority given, `default` (if any) is tried and a refusal only warns, since the
/// program still works, just with less precise timing.
pub fn apply_priority(program: &str, explicit: Option<i32>, default: Option<i32>) -> Result<String, Fatal> {
    match (explicit, default) {
        (Some(0), _) | (None, None) => Ok("SCHED_OTHER".into()),
        (Some(p), _) => run_realtime(p).map(|_| format!("SCHED_FIFO {p}")),
        (None, Some(p)) => match run_realtime(p) {
            Ok(()) => Ok(format!("SCHED_FIFO {p}")),
            Err(e) => {
                crate::say!("{program}: warning: ordinary scheduling, other tasks may preempt it ({})", e.message);
                Ok("SCHED_OTHER".into())
            }
        },
    }
}

/// How long the calling thread has waited, runnable, for a core so far (the kernel's
/// run delay from /proc/thread-self/schedstat: other tasks or the kernel's real-time
/// throttling had its core), and how often it was switched out against its will.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuWait {
    /// Time runnable but off its core.
    pub waited_ns: u64,
    /// Times the kernel took the core away.
    pub involuntary_switches: u64,
}

impl CpuWait {
    /// None where the kernel keeps no schedstat (CONFIG_SCHED_INFO off).
    pub fn now() -> Option<CpuWait> {
        let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
        let waited_ns = text.split_whitespace().nth(1)?.parse().ok()?;
        // SAFETY: getrusage fills a zeroed rusage for this thread.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) } != 0 {
            return None;
        }
        Some(CpuWait { waited_ns, involuntary_switches: usage.ru_nivcsw as u64 })
    }

    /// What happened between `earlier` and this reading.
    pub fn since(&self, earlier: &CpuWait) -> CpuWait {
        CpuWait {
            waited_ns: self.waited_ns.saturating_sub(earlier.waited_ns),
            involuntary_switches: self.involuntary_switches.saturating_sub(earlier.involuntary_switches),
        }
    }
}

/// "0-3,6" for a sorted list of cores.
fn ranges(cpus: &[usize]) -> String {
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

    #[test]
    fn core_lists_read_as_ranges() {
        assert_eq!(ranges(&[0, 1, 2, 3, 6]), "0-3,6");
        assert_eq!(ranges(&[1]), "1");
        assert_eq!(ranges(&[]), "none");
    }

    #[test]
    fn a_thread_that_yields_its_core_to_a_busy_one_waits_for_it() {
        // Two threads on one core: each time this one is preempted it waits, and the
        // kernel's run delay says for how long.
        let core = allowed_cpus()[0];
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let busy = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                pin_to(core).unwrap();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        };
        let waited = std::thread::spawn(move || {
            pin_to(core).unwrap();
            let before = CpuWait::now()?;
            let until = std::time::Instant::now() + std::time::Duration::from_millis(300);
            while std::time::Instant::now() < until {
                std::hint::spin_loop();
            }
            Some(CpuWait::now().unwrap().since(&before))
        })
        .join()
        .unwrap();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        busy.join().unwrap();
        if let Some(w) = waited {
            assert!(w.waited_ns > 20_000_000, "sharing a core for 300 ms, it waited only {} ns", w.waited_ns);
            assert!(w.involuntary_switches > 0);
        }
    }

    #[test]
    fn a_core_that_does_not_exist_is_a_usage_error() {
        let err = pin_to(libc::CPU_SETSIZE as usize + 5).unwrap_err();
        assert_eq!(err.code, crate::error::EXIT_USAGE);
        assert!(err.message.contains("allowed cores are"), "{}", err.message);
    }
}
