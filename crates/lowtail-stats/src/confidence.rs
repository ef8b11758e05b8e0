//! The arithmetic of percentile bounds: which order statistics bound a percentile of n
//! packets at a confidence, when their exceedances are over-dispersed by a factor D, and
//! how many packets a bound or a verdict needs.
//!
//! Among n independent packets, the number E above the true p-quantile is Binomial(n, 1 − p)
//! whatever the distribution, so order statistics bound the percentile with an exactly
//! known confidence (the classical distribution-free interval). Packets of a real device
//! are not independent: a stall delays the packets queued behind it, so exceedances come
//! in clusters and E varies D times more than the binomial says (D, the dispersion, is
//! measured from the run's time blocks: `intervals`). E/D then behaves as a binomial count
//! of n/D packets — the effective sample — and the ranks are those of n/D independent
//! packets, scaled back by D (rounded outward, so a bound is never tighter than the
//! effective sample allows). With D = 1 these are the classical ranks.
//!
//! Exact given D: binomial tails summed term by term, or for counts with a standard
//! deviation above a few thousand, where a rank more or less does not matter, the normal
//! approximation with its skewness term (Cornish–Fisher). `x` below is always the share of
//! packets above the quantile, 1 − q, taken from the exact fraction.

use crate::rank::Quantile;

/// The most packets a projection searches up to: beyond, "no number of packets".
const MOST_PACKETS: u64 = 1_000_000_000_000_000;
/// Binomial counts with a standard deviation above this are taken as normal (with their
/// skewness): summing their terms would cost more than a rank is worth.
const EXACT_SD: f64 = 2_000.0;

/// 1 − q as a float, from the exact fraction (0.99999 gives 1e-05 exactly as printed).
pub fn exceed(q: Quantile) -> f64 {
    (q.denominator() - q.numerator()) as f64 / q.denominator() as f64
}

/// A polynomial's value at `x` by Horner's rule; `coefficients` from the highest power down.
fn horner(coefficients: &[f64], x: f64) -> f64 {
    coefficients.iter().fold(0.0, |acc, &c| acc * x + c)
}

// Wichura's AS241 coefficients (Applied Statistics 37(3), 1988), highest power first: the
// central region |p − ½| ≤ 0.425, then the tails for r = √(−ln min(p, 1 − p)) up to 5 and beyond.
#[allow(clippy::excessive_precision)] // AS241's published digits, as printed
const CENTRAL_NUM: [f64; 8] = [
    2.509_080_928_730_122_7e3,
    3.343_057_558_358_812_8e4,
    6.726_577_092_700_870_1e4,
    4.592_195_393_154_987_1e4,
    1.373_169_376_550_946_1e4,
    1.971_590_950_306_551_4e3,
    1.331_416_678_917_843_8e2,
    3.387_132_872_796_366_6,
];
#[allow(clippy::excessive_precision)] // AS241's published digits, as printed
const CENTRAL_DEN: [f64; 8] = [
    5.226_495_278_852_854_6e3,
    2.872_908_573_572_194_3e4,
    3.930_789_580_009_271e4,
    2.121_379_430_158_659_6e4,
    5.394_196_021_424_751e3,
    6.871_870_074_920_579e2,
    4.231_333_070_160_091e1,
    1.0,
];
#[allow(clippy::excessive_precision)] // AS241's published digits, as printed
const NEAR_NUM: [f64; 8] = [
    7.745_450_142_783_414e-4,
    2.272_384_498_926_918_5e-2,
    2.417_807_251_774_506e-1,
    1.270_458_252_452_368_4,
    3.647_848_324_763_204_5,
    5.769_497_221_460_691,
    4.630_337_846_156_545,
    1.423_437_110_749_683_5,
];
#[allow(clippy::excessive_precision)] // AS241's published digits, as printed
const NEAR_DEN: [f64; 8] = [
    1.050_750_071_644_416_8e-9,
    5.475_938_084_995_345e-4,
    1.519_866_656_361_645_7e-2,
    1.481_039_764_274_800_8e-1,
    6.897_673_349_851e-1,
    1.676_384_830_183_803_8,
    2.053_191_626_637_758_8,
    1.0,
];
#[allow(clippy::excessive_precision)] // AS241's published digits, as printed
const FAR_NUM: [f64; 8] = [
    2.010_334_399_292_288_1e-7,
    2.711_555_568_743_487_6e-5,
    1.242_660_947_388_078_4e-3,
    2.653_218_952_657_612_4e-2,
    2.965_605_718_285_048_7e-1,
    1.784_826_539_917_291_3,
    5.463_784_911_164_114,
    6.657_904_643_501_103,
];
#[allow(clippy::excessive_precision)] // AS241's published digits, as printed
const FAR_DEN: [f64; 8] = [
    2.044_263_103_389_939_7e-15,
    1.421_511_758_316_445_9e-7,
    1.846_318_317_510_054_8e-5,
    7.868_691_311_456_133e-4,
    1.487_536_129_085_061_5e-2,
    1.369_298_809_227_358e-1,
    5.998_322_065_558_879e-1,
    1.0,
];

/// The standard normal's quantile (Wichura's AS241, as Python's `statistics` computes it).
pub fn normal_quantile(p: f64) -> f64 {
    let q = p - 0.5;
    if q.abs() <= 0.425 {
        let r = 0.180625 - q * q;
        return q * horner(&CENTRAL_NUM, r) / horner(&CENTRAL_DEN, r);
    }
    let r = (-(if q <= 0.0 { p } else { 1.0 - p }).ln()).sqrt();
    let x = if r <= 5.0 {
        horner(&NEAR_NUM, r - 1.6) / horner(&NEAR_DEN, r - 1.6)
    } else {
        horner(&FAR_NUM, r - 5.0) / horner(&FAR_DEN, r - 5.0)
    };
    if q < 0.0 {
        -x
    } else {
        x
    }
}

/// The standard normal's distribution function.
pub fn normal_cdf(x: f64) -> f64 {
    0.5 * (1.0 + libm::erf(x / std::f64::consts::SQRT_2))
}

fn normal_pdf(x: f64) -> f64 {
    (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt()
}

/// Student's t quantile: exact for 1 and 2 degrees of freedom, else the Cornish–Fisher
/// expansion in the normal quantile (within 0.1 % from 3 degrees of freedom at the tails
/// used here; the Python tests check it against scipy).
pub fn student_t(p: f64, df: u64) -> f64 {
    match df {
        0 => f64::INFINITY,
        1 => (std::f64::consts::PI * (p - 0.5)).tan(),
        2 => {
            let a = 2.0 * p - 1.0;
            a * (2.0 / (1.0 - a * a)).sqrt()
        }
        _ => {
            let z = normal_quantile(p);
            let z2 = z * z;
            let terms = [
                (z2 + 1.0) * z / 4.0,
                ((5.0 * z2 + 16.0) * z2 + 3.0) * z / 96.0,
                (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) * z / 384.0,
                ((((79.0 * z2 + 776.0) * z2 + 1482.0) * z2 - 1920.0) * z2 - 945.0) * z / 92160.0,
            ];
            z + terms.iter().enumerate().map(|(i, t)| t / (df as f64).powi(i as i32 + 1)).sum::<f64>()
        }
    }
}

fn pmf(n: u64, x: f64, k: i64) -> f64 {
    if k < 0 || k as u64 > n {
        return 0.0;
    }
    let (n, k) = (n as f64, k as f64);
    let log =
        libm::lgamma(n + 1.0) - libm::lgamma(k + 1.0) - libm::lgamma(n - k + 1.0) + k * x.ln() + (n - k) * (-x).ln_1p();
    log.exp()
}

/// P(E ≤ k) by the normal approximation with continuity and skewness corrections.
fn approx_cdf(n: u64, x: f64, k: i64) -> f64 {
    let (mean, sd) = (n as f64 * x, (n as f64 * x * (1.0 - x)).sqrt());
    let w = (k as f64 + 0.5 - mean) / sd;
    let skew = (1.0 - 2.0 * x) / sd;
    (normal_cdf(w) - normal_pdf(w) * skew * (w * w - 1.0) / 6.0).clamp(0.0, 1.0)
}

/// P(E ≤ k) for E ~ Binomial(n, x): the terms summed from k away from the mean (the side
/// with the smaller sum), until they no longer count.
pub fn binomial_cdf(n: u64, x: f64, k: i64) -> f64 {
    if k < 0 {
        return 0.0;
    }
    if k as u64 >= n || x <= 0.0 {
        return 1.0;
    }
    if x >= 1.0 {
        return 0.0;
    }
    let (mean, sd) = (n as f64 * x, (n as f64 * x * (1.0 - x)).sqrt());
    if sd > EXACT_SD {
        return approx_cdf(n, x, k);
    }
    let nf = n as f64;
    if k as f64 <= mean {
        // The lower tail: pmf(i − 1) = pmf(i) · i/(n − i + 1) · (1 − x)/x.
        let mut term = pmf(n, x, k);
        let mut total = term;
        let (mut i, ratio) = (k as f64, (1.0 - x) / x);
        while i > 0.0 && term > total * 1e-17 {
            term *= i / (nf - i + 1.0) * ratio;
            total += term;
            i -= 1.0;
        }
        return total.min(1.0);
    }
    // 1 − the upper tail: pmf(i + 1) = pmf(i) · (n − i)/(i + 1) · x/(1 − x).
    let mut term = pmf(n, x, k + 1);
    let mut total = term;
    let (mut i, ratio) = ((k + 1) as f64, x / (1.0 - x));
    while i < nf && term > total * 1e-17 {
        term *= (nf - i) / (i + 1.0) * ratio;
        total += term;
        i += 1.0;
    }
    (1.0 - total).max(0.0)
}

/// The smallest k with P(E ≤ k) ≥ p, E ~ Binomial(n, x): from the Cornish–Fisher guess,
/// stepped a term at a time to the exact answer (where the terms are summed).
pub fn binomial_ppf(n: u64, x: f64, p: f64) -> u64 {
    if p <= 0.0 {
        return 0;
    }
    let (mean, sd) = (n as f64 * x, (n as f64 * x * (1.0 - x)).sqrt());
    let z = normal_quantile(p.clamp(1e-300, 1.0 - 1e-16));
    let skew = if sd > 0.0 { (1.0 - 2.0 * x) / sd } else { 0.0 };
    let guess = (mean + sd * (z + skew * (z * z - 1.0) / 6.0) - 0.5).ceil();
    let mut k = (guess.max(0.0) as u64).min(n) as i64;
    if sd > EXACT_SD {
        return k as u64;
    }
    // Sums within rounding of p count as reaching it (7 fair coins: P(E ≤ 3) is 1/2 exactly).
    let p = p * (1.0 - 1e-12);
    let mut c = binomial_cdf(n, x, k);
    if c >= p {
        while k > 0 && c - pmf(n, x, k) >= p {
            c -= pmf(n, x, k);
            k -= 1;
        }
        return k as u64;
    }
    while c < p && (k as u64) < n {
        k += 1;
        c += pmf(n, x, k);
    }
    k as u64
}

/// The effective sample of n packets over-dispersed by `dispersion` (at least 1).
fn effective(n: u64, dispersion: f64) -> u64 {
    (n as f64 / dispersion.max(1.0)).floor() as u64
}

/// The most packets above a value that still let it bound the quantile from above with
/// error `tail`: the largest e with P(E ≤ e) ≤ tail, E the over-dispersed count above the
/// true quantile (x = 1 − q). None when not even zero does (too few packets).
pub fn allowed_above(n: u64, x: f64, dispersion: f64, tail: f64) -> Option<u64> {
    let (ne, d) = (effective(n, dispersion), dispersion.max(1.0));
    if ne < 1 || tail <= 0.0 {
        return None;
    }
    let k = binomial_ppf(ne, x, tail) as i64;
    let e = if binomial_cdf(ne, x, k) <= tail { k } else { k - 1 };
    (e >= 0).then(|| (e as f64 * d).floor() as u64)
}

/// The fewest packets above a value that show it lies below the quantile (a lower bound)
/// with error `tail`: the smallest f with P(E ≥ f) ≤ tail, scaled by the dispersion. None
/// when more than n would be needed.
pub fn needed_above(n: u64, x: f64, dispersion: f64, tail: f64) -> Option<u64> {
    let (ne, d) = (effective(n, dispersion), dispersion.max(1.0));
    if ne < 1 || tail <= 0.0 {
        return None;
    }
    let f = binomial_ppf(ne, x, 1.0 - tail) + 1;
    let needed = (f as f64 * d).ceil() as u64;
    (needed <= n).then_some(needed)
}

/// The ranks (1-based) of the two-sided interval at `level` (each side leaves out at most
/// (1 − level)/2) among n packets with this dispersion: `lower` is 0 when nothing bounds
/// the quantile from below, `upper` is n + 1 when nothing bounds it from above.
pub fn rank_interval(n: u64, x: f64, level: f64, dispersion: f64) -> (u64, u64) {
    let tail = (1.0 - level) / 2.0;
    if n == 0 {
        return (0, 1);
    }
    let upper = allowed_above(n, x, dispersion, tail).map_or(n + 1, |a| n - a);
    let lower = needed_above(n, x, dispersion, tail).map_or(0, |f| n + 1 - f);
    (lower, upper.clamp(1, n + 1))
}

/// The fewest packets whose largest bounds the quantile from above with error `tail`
/// ((1 − x)^(n/D) ≤ tail): the packets a percentile needs before any interval can be stated.
pub fn packets_to_bound(x: f64, tail: f64, dispersion: f64) -> u64 {
    let mut base = ((tail.ln() / (-x).ln_1p()).ceil() as u64).max(1);
    while base > 1 && allowed_above(base - 1, x, 1.0, tail).is_some() {
        base -= 1;
    }
    while allowed_above(base, x, 1.0, tail).is_none() {
        base += 1;
    }
    (base as f64 * dispersion.max(1.0)).ceil() as u64
}

/// The first n ≥ start with ok(n), for an `ok` that stays true once true (searched by
/// doubling, then halving); None when none is below MOST_PACKETS.
fn first(ok: impl Fn(u64) -> bool, start: u64) -> Option<u64> {
    let (mut lo, mut hi) = (start, start.max(1));
    while !ok(hi) {
        lo = hi;
        hi *= 2;
        if hi > MOST_PACKETS {
            return None;
        }
    }
    while lo < hi {
        let mid = (lo + hi) / 2;
        if ok(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Some(hi)
}

/// Packets in all a run needs for its upper bound of the quantile to fall below a budget
/// that a `share_above` of its packets reach, if that share stays as measured; None when it
/// never would (the share is at or above 1 − q).
pub fn packets_to_pass(x: f64, share_above: f64, dispersion: f64, tail: f64) -> Option<u64> {
    if share_above >= x {
        return None;
    }
    let passes = |n: u64| {
        allowed_above(n, x, dispersion, tail).is_some_and(|allowed| (share_above * n as f64).ceil() <= allowed as f64)
    };
    first(passes, packets_to_bound(x, tail, dispersion))
}

/// Packets in all a run needs for its lower bound of the quantile to reach a budget that a
/// `share_above` of its packets reach, if that share stays as measured; None when it never
/// would (the share is at or below 1 − q).
pub fn packets_to_fail(x: f64, share_above: f64, dispersion: f64, tail: f64) -> Option<u64> {
    if share_above <= x {
        return None;
    }
    let fails = |n: u64| {
        needed_above(n, x, dispersion, tail).is_some_and(|needed| (share_above * n as f64).floor() >= needed as f64)
    };
    first(fails, 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classical_counts() {
        let x = exceed(Quantile::decimal(99_999, 5));
        assert_eq!(packets_to_bound(x, 0.05, 1.0), 299_572); // ln 0.05 / ln 0.99999
        assert_eq!(packets_to_bound(x, 0.05, 2.0), 599_144);
        // The median of 101 packets at 95 %: ranks 41 and 61 (the classical table's).
        assert_eq!(rank_interval(101, 0.5, 0.95, 1.0), (41, 61));
    }

    #[test]
    fn quantiles_of_the_normal_and_t() {
        assert!((normal_quantile(0.975) - 1.959_963_984_540_054).abs() < 1e-12);
        assert!((student_t(0.975, 2) - 4.302_652_729_911_275).abs() < 1e-9);
        assert!((student_t(0.975, 30) - 2.042_272_456_301_238).abs() < 2e-3);
    }

    #[test]
    fn binomial_tails_sum_to_one_across_k() {
        let (n, x) = (1_000, 0.01);
        for k in 0..40 {
            let below = binomial_cdf(n, x, k);
            let mut direct = 0.0;
            for i in 0..=k {
                direct += pmf(n, x, i);
            }
            assert!((below - direct).abs() < 1e-12, "{k}");
        }
        assert_eq!(binomial_ppf(n, x, 0.5), 10);
        assert_eq!(binomial_ppf(7, 0.5, 0.5), 3); // P(E ≤ 3) is 1/2 exactly
    }
}
