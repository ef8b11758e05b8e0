//! Argument types people write, parsed the same way by every program: durations and
//! lists of CPUs.

use std::time::Duration;

/// Why a duration argument does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// No number in front.
    #[error("`{0}` is not a duration (try 5s, 500ms, 2.5)")]
    NotANumber(String),
    /// A unit other than ns, us, ms, s, m.
    #[error("unknown unit `{unit}` in `{text}` (use ns, us, ms, s or m)")]
    UnknownUnit {
        /// The unit given.
        unit: String,
        /// The whole argument.
        text: String,
    },
    /// Negative or too large.
    #[error("`{0}` is not a duration")]
    OutOfRange(String),
}

/// "5", "2.5", "5s", "500ms", "250us"/"250µs", "100ns", "2m": a duration as people write it.
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num.parse().map_err(|_| DurationError::NotANumber(s.to_string()))?;
    let scale = match unit.trim() {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" => 1e-6,
        "ns" => 1e-9,
        "m" | "min" => 60.0,
        other => return Err(DurationError::UnknownUnit { unit: other.to_string(), text: s.to_string() }),
    };
    // Negative, not finite, or past what a Duration holds (from_secs_f64 would panic).
    Duration::try_from_secs_f64(value * scale).map_err(|_| DurationError::OutOfRange(s.to_string()))
}

/// Why a CPU list does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuListError {
    /// A part that is not a number.
    #[error("{part:?} in {text:?} is not a CPU number")]
    NotACpu {
        /// The part.
        part: String,
        /// The whole list.
        text: String,
    },
    /// "5-3".
    #[error("CPU range {0:?} runs backwards")]
    Backwards(String),
    /// Nothing but commas and spaces.
    #[error("no CPUs in {0:?}")]
    Empty(String),
    /// A CPU number no Linux kernel has a core for.
    #[error("CPU {part:?} in {text:?} is past the highest core number, {}", MAX_CPUS - 1)]
    TooLarge {
        /// The part.
        part: String,
        /// The whole list.
        text: String,
    },
}

/// How many cores a CPU list may name: the most a Linux kernel is built for (x86-64's
/// largest `CONFIG_NR_CPUS`). A range is expanded core by core, so this also bounds what a
/// list costs; a core below it that this host lacks is refused where the program pins to
/// it, naming the cores it has.
pub const MAX_CPUS: usize = 8192;

/// "1-3,5" → [1, 2, 3, 5] (the kernel's cpulist format, as in /sys/devices/system/cpu/online),
/// sorted and without repeats.
pub fn parse_cpu_list(text: &str) -> Result<Vec<usize>, CpuListError> {
    let mut cpus = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let num = |s: &str| match s.trim().parse::<usize>() {
            Ok(cpu) if cpu < MAX_CPUS => Ok(cpu),
            Ok(_) => Err(CpuListError::TooLarge { part: s.trim().to_string(), text: text.to_string() }),
            Err(_) => Err(CpuListError::NotACpu { part: s.to_string(), text: text.to_string() }),
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    return Err(CpuListError::Backwards(part.to_string()));
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(num(part)?),
        }
    }
    if cpus.is_empty() {
        return Err(CpuListError::Empty(text.to_string()));
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_as_people_write_them() {
        assert_eq!(parse_duration("5").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_duration("2.5s").unwrap(), Duration::from_millis(2500));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("250µs").unwrap(), Duration::from_micros(250));
        assert_eq!(parse_duration("5000000000ns").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(
            parse_duration("5 parsecs"),
            Err(DurationError::UnknownUnit { unit: "parsecs".into(), text: "5 parsecs".into() })
        );
        assert_eq!(parse_duration("fast"), Err(DurationError::NotANumber("fast".into())));
        // Past what a Duration holds: an error, where it panicked (`--duration` or
        // LOWTAIL_TIME_LIMIT of 26 nines ended a program with a Rust backtrace).
        let huge = "99999999999999999999999999s";
        assert_eq!(parse_duration(huge), Err(DurationError::OutOfRange(huge.into())));
    }

    proptest::proptest! {
        /// Any text is a duration or an error, never a panic; numbers within range parse.
        #[test]
        fn any_text_is_a_duration_or_an_error(text in "\\PC{0,24}|[0-9.]{1,40}(ns|us|µs|ms|s|m|min)?") {
            let _ = parse_duration(&text);
        }

        #[test]
        fn whole_seconds_parse_to_themselves(secs in 0u64..=(1 << 40)) {
            proptest::prop_assert_eq!(parse_duration(&format!("{secs}s")).unwrap(), Duration::from_secs(secs));
        }

        /// Any text is a CPU list or an error, never a panic.
        #[test]
        fn any_text_is_a_cpu_list_or_an_error(text in "\\PC{0,24}|[0-9,-]{1,40}") {
            let _ = parse_cpu_list(&text);
        }
    }

    #[test]
    fn cpu_lists_parse_like_the_kernel_writes_them() {
        assert_eq!(parse_cpu_list("0").unwrap(), vec![0]);
        assert_eq!(parse_cpu_list("1-3,5").unwrap(), vec![1, 2, 3, 5]);
        assert_eq!(parse_cpu_list("3,1-2,2").unwrap(), vec![1, 2, 3]);
        assert_eq!(parse_cpu_list("3-1"), Err(CpuListError::Backwards("3-1".into())));
        assert!(parse_cpu_list("3-1").unwrap_err().to_string().contains("backwards"));
        assert!(parse_cpu_list("a").is_err());
        assert!(parse_cpu_list("").is_err());
        // A range is expanded core by core: "0-99999999999" asked for 10^11 entries.
        let huge = "0-99999999999";
        let e = parse_cpu_list(huge).unwrap_err();
        assert_eq!(e, CpuListError::TooLarge { part: "99999999999".into(), text: huge.into() });
        assert!(e.to_string().contains(&format!("highest core number, {}", MAX_CPUS - 1)), "{e}");
        assert_eq!(parse_cpu_list(&format!("{}", MAX_CPUS - 1)).unwrap(), vec![MAX_CPUS - 1]);
    }
}
