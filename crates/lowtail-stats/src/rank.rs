//! Exact quantiles and their nearest rank.
//!
//! Percentiles are written in decimal (99.9, 99.999), and a binary float holds almost
//! none of them: `float("99.9") / 100` is 0.9990000000000001, whose rank ⌈q·n⌉ is one
//! too high whenever 0.999·n is a whole number. A `Quantile` is a fraction of integers,
//! and `nearest_rank` computes ⌈q·n⌉ in integer arithmetic.

use std::fmt;

/// A quantile held exactly: `num / den`, between 0 and 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Quantile {
    num: u64,
    den: u64,
}

/// Why a quantile cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantileError {
    /// The denominator is zero.
    #[error("a quantile's denominator must not be 0")]
    ZeroDenominator,
    /// Above 1 (or a percent above 100).
    #[error("a quantile lies between 0 and 1 (a percentile between 0 and 100), not {0}")]
    OutOfRange(String),
    /// Not a decimal number ("99.9").
    #[error("not a percentile: {0:?} (expected a decimal number such as 99.9)")]
    NotDecimal(String),
}

impl Quantile {
    /// `num / den` (reduced); `den` must be positive and `num ≤ den`.
    pub fn new(num: u64, den: u64) -> Result<Quantile, QuantileError> {
        if den == 0 {
            return Err(QuantileError::ZeroDenominator);
        }
        if num > den {
            return Err(QuantileError::OutOfRange(format!("{num}/{den}")));
        }
        let g = gcd(num, den);
        Ok(Quantile { num: num / g, den: den / g })
    }

    /// `parts` out of 10^`digits` (999 of 10^3 = 0.999), for constants; panics when it is
    /// more than 1 or 10^`digits` does not fit in 64 bits.
    pub const fn decimal(parts: u64, digits: u32) -> Quantile {
        let den = 10u64.pow(digits);
        assert!(parts <= den, "a quantile is at most 1");
        let g = gcd(parts, den);
        Quantile { num: parts / g, den: den / g }
    }

    /// A percentile written in decimal ("99.9", "50", "99.9999") as the quantile it names.
    pub fn from_percent(text: &str) -> Result<Quantile, QuantileError> {
        let bad = || QuantileError::NotDecimal(text.to_string());
        let (whole, frac) = text.trim().split_once('.').unwrap_or((text.trim(), ""));
        if whole.is_empty() && frac.is_empty()
            || !whole.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
            || frac.len() > 16
        {
            return Err(bad());
        }
        let digits = format!("{whole}{frac}");
        let num: u64 = digits.parse().map_err(|_| bad())?;
        let den = 10u64.checked_pow(frac.len() as u32 + 2).ok_or_else(bad)?;
        Quantile::new(num, den).map_err(|_| QuantileError::OutOfRange(format!("{text} %")))
    }

    /// Numerator of the reduced fraction.
    pub fn numerator(self) -> u64 {
        self.num
    }

    /// Denominator of the reduced fraction (positive).
    pub fn denominator(self) -> u64 {
        self.den
    }

    /// The nearest double, for plotting and for printing; never for ranking.
    pub fn to_f64(self) -> f64 {
        self.num as f64 / self.den as f64
    }
}

impl fmt::Display for Quantile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.num, self.den)
    }
}

const fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        let r = a % b;
        a = b;
        b = r;
    }
    if a == 0 {
        1
    } else {
        a
    }
}

/// Nearest-rank position (1-based) of quantile `q` among `n` samples: ⌈q·n⌉, at least 1
/// and at most n, computed exactly. This is SQL's `percentile_disc` by its definition
/// (PostgreSQL computes it in double precision, which agrees for the headline
/// percentiles — see the tests).
pub fn nearest_rank(q: Quantile, n: u64) -> u64 {
    let product = q.num as u128 * n as u128;
    let rank = product.div_ceil(q.den as u128) as u64; // ≤ n, since q ≤ 1
    rank.clamp(1, n.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_float_trap_is_avoided() {
        let q = Quantile::from_percent("99.9").unwrap();
        assert_eq!(q, Quantile::decimal(999, 3));
        assert_eq!(nearest_rank(q, 1000), 999);
        assert_eq!(((99.9f64 / 100.0) * 1000.0).ceil(), 1000.0); // what a float did
        assert_eq!(nearest_rank(Quantile::decimal(5, 1), 1), 1);
        assert_eq!(nearest_rank(Quantile::decimal(0, 0), 10), 1);
        assert_eq!(nearest_rank(Quantile::decimal(1, 0), 10), 10);
        assert_eq!(nearest_rank(Quantile::decimal(999_999, 6), u64::MAX), u64::MAX - u64::MAX / 1_000_000);
    }

    #[test]
    fn percents_parse_exactly_or_not_at_all() {
        assert_eq!(Quantile::from_percent("50").unwrap(), Quantile::new(1, 2).unwrap());
        assert_eq!(Quantile::from_percent("99.9999").unwrap(), Quantile::decimal(999_999, 6));
        assert_eq!(Quantile::from_percent("100").unwrap(), Quantile::new(1, 1).unwrap());
        for bad in ["", ".", "-1", "1e3", "nan", "99,9", "100.5", "12.3.4"] {
            assert!(Quantile::from_percent(bad).is_err(), "{bad}");
        }
        assert!(Quantile::new(3, 2).is_err() && Quantile::new(1, 0).is_err());
    }

    proptest! {
        #[test]
        fn rank_is_the_ceiling_of_the_exact_product(num in 0u64..1_000_000, extra in 0u64..1_000_000, n in 1u64..u64::MAX) {
            let den = num + extra + 1;
            let q = Quantile::new(num, den).unwrap();
            let r = nearest_rank(q, n) as u128;
            let p = num as u128 * n as u128;
            // r − 1 < q·n ≤ r, unless clamped up to 1
            prop_assert!(r * den as u128 >= p);
            prop_assert!(r == 1 || (r - 1) * (den as u128) < p);
        }
    }
}
