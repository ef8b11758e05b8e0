//! Argument types the three programs share.

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

/// Why a MAC address argument does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MacError {
    /// Not six parts.
    #[error("`{0}` is not a MAC address (like 02:00:00:00:00:01)")]
    Parts(String),
    /// A part that is not a hex byte.
    #[error("`{0}` is not a MAC address")]
    Byte(String),
}

/// "02:00:00:00:00:01".
pub fn parse_mac(s: &str) -> Result<[u8; 6], MacError> {
    let parts: Vec<&str> = s.split([':', '-']).collect();
    let mut mac = [0u8; 6];
    if parts.len() != 6 {
        return Err(MacError::Parts(s.to_string()));
    }
    for (byte, part) in mac.iter_mut().zip(parts) {
        *byte = u8::from_str_radix(part, 16).map_err(|_| MacError::Byte(s.to_string()))?;
    }
    Ok(mac)
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
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(
            parse_duration("5 parsecs"),
            Err(DurationError::UnknownUnit { unit: "parsecs".into(), text: "5 parsecs".into() })
        );
        assert_eq!(parse_duration("fast"), Err(DurationError::NotANumber("fast".into())));
    }

    #[test]
    fn mac_addresses() {
        assert_eq!(parse_mac("02:00:00:00:00:0a").unwrap(), [2, 0, 0, 0, 0, 10]);
        assert_eq!(parse_mac("02:00:00:00:00"), Err(MacError::Parts("02:00:00:00:00".into())));
        assert_eq!(parse_mac("zz:00:00:00:00:00"), Err(MacError::Byte("zz:00:00:00:00:00".into())));
    }
}
