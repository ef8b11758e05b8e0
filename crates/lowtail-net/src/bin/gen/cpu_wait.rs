//! The generator's time off its core: how long it waited, runnable, while other tasks
//! or the kernel's real-time throttling had its core.

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

#[cfg(test)]
mod tests {
    use super::*;
    use lowtail_program::sched::{allowed_cpus, pin_to};

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
}
