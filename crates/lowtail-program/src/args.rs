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
    let secs = value * scale;
    if !secs.is_finite() || secs < 0.0 {
        return Err(DurationError::OutOfRange(s.to_string()));
    }
    Ok(Duration::from_secs_f64(secs))
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
}

/// "1-3,5" → [1, 2, 3, 5] (the kernel's cpulist format, as in /sys/devices/system/cpu/online),
/// sorted and without repeats.
pub fn parse_cpu_list(text: &str) -> Result<Vec<usize>, CpuListError> {
    let mut cpus = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let num = |s: &str| {
            s.trim().parse::<usize>().map_err(|_| CpuListError::NotACpu { part: s.to_string(), text: text.to_string() })
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
    }
}
