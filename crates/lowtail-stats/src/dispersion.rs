//! How much more the packets above a value vary than independent packets would: the
//! dispersion D that a percentile's interval allows for, measured from the runs' time
//! blocks (batch means, as a ratio estimator over blocks of unequal size; Law & Kelton,
//! *Simulation Modeling and Analysis*, ch. 9; Heidelberger & Lewis, "Quantile estimation
//! in dependent sequences", 1984). Safeguards:
//!
//! - D is an estimate, from K blocks: it is raised by (t_df / z)², the price of estimating
//!   a variance from df degrees of freedom (blocks, or blocks with exceedances, less one;
//!   fewer when a few blocks carry most of it);
//! - where fewer than `ANCHOR_CLUSTERS` blocks hold a packet above the percentile, the
//!   dispersion cannot be measured there; it is taken from the highest percentile where it
//!   can (the anchor), assuming the tail clusters no more than that, and never below what
//!   the few exceedances themselves show;
//! - blocks must be longer than the latency's memory: when neighbouring blocks are
//!   correlated (lag-1, one-sided 5 %), they are merged in pairs, down to `FEWEST_BLOCKS`
//!   per run; a series still correlated then wanders more slowly than the run can show,
//!   and its percentile is not bounded by one run.

use crate::confidence::{normal_quantile, student_t};
use crate::evidence::Evidence;

/// Blocks with a packet above a percentile needed to measure its dispersion there.
pub const ANCHOR_CLUSTERS: usize = 10;
/// The fewest blocks per run that merging for correlation may leave.
pub const FEWEST_BLOCKS: usize = 8;
/// One-sided 5 % point of the normal: the lag-1 correlation test of neighbouring blocks.
const LAG1_Z: f64 = 1.644_853_626_951_472_2;

/// Packets above a value count as clustered when they vary at least this many times more
/// than independent packets would (between blocks, or within the blocks that hold them).
pub const CLUSTERED: f64 = 2.0;
/// The fewest clusters (time blocks holding packets above a percentile, and blocks carrying
/// their variance) from which the dispersion of a clustered percentile is measured; with
/// fewer, the percentile is not bounded by one run. Checked by bench/stated_confidence.py's
/// rare-stall models.
pub const MIN_CLUSTERS: usize = 15;
/// The fewest blocks that carry a clustered percentile's variance (the participation ratio
/// of their squared residuals: 2 when two stalls make it); with fewer, not bounded by one run.
pub const MIN_EPISODES: f64 = 5.0;
/// The fewest packets above a higher value whose clustering `clusters_above` looks at: fewer
/// say too little of the percentile below.
const MIN_PACKETS_ABOVE: u64 = 10;

/// Why a dispersion could not be measured: the percentile is not bounded by one run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Unmeasurable {
    /// The packets above the percentile come in clusters (stall episodes), too few of them
    /// to measure how much their number varies: a run with one stall more or less would
    /// move the percentile past any interval these few could give.
    FewClusters {
        /// Blocks holding packets above the percentile.
        clusters: usize,
        /// Packets above it per such block, on average.
        per_cluster: f64,
    },
    /// Neighbouring blocks stay correlated with `FEWEST_BLOCKS` per run: the latency wanders
    /// more slowly than the run's blocks show.
    Wanders {
        /// The correlation of neighbouring blocks' shares above the value.
        lag1: f64,
        /// The blocks it was measured over.
        blocks: usize,
    },
}

/// What the blocks say about the packets above one value.
#[derive(Debug, Clone, Copy)]
struct Measured {
    raw: f64,        // variance over what independent packets would give (may be below 1)
    df: u64,         // degrees of freedom of that estimate
    clusters: usize, // blocks with a packet above the value
    within: f64,     // Σ a² / Σ a of the packets above it per block: their clusters' size
    above: f64,      // packets above the value
    blocks: usize,   // blocks it was measured over
    episodes: f64,   // blocks that carry the variance: (Σ r²)² / Σ r⁴ of the residuals r
}

impl Measured {
    /// Whether the packets above the value vary between blocks more than independent
    /// packets plausibly would: the ratio at least `CLUSTERED`, and beyond the 99.9 % point
    /// of what chance gives from these blocks (raw·(K − 1) is χ² with K − 1 degrees of
    /// freedom for independent packets; Wilson–Hilferty's cube-root normal form).
    fn clustered(&self) -> bool {
        let df = self.blocks.saturating_sub(1).max(1) as f64;
        let chance = chi_square_over_df(df, 0.999);
        self.raw >= CLUSTERED.max(chance)
    }

    fn too_few(&self) -> Unmeasurable {
        let clusters = self.clusters.min(self.episodes.round() as usize);
        Unmeasurable::FewClusters { clusters, per_cluster: self.above / clusters.max(1) as f64 }
    }
}

fn merged(x: &[f64], times: u32) -> Vec<f64> {
    let mut x = x.to_vec();
    for _ in 0..times {
        x = x.chunks(2).map(|c| c.iter().sum()).collect();
    }
    x
}

/// Correlation of neighbouring blocks' shares within each run.
fn lag1(shares: &[Vec<f64>], mean: f64) -> f64 {
    let num: f64 = shares
        .iter()
        .filter(|s| s.len() > 1)
        .map(|s| s.windows(2).map(|w| (w[1] - mean) * (w[0] - mean)).sum::<f64>())
        .sum();
    let den: f64 = shares.iter().map(|s| s.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>()).sum();
    if den > 0.0 {
        num / den
    } else {
        0.0
    }
}

fn measure(ev: &Evidence, value: i64) -> Result<Measured, Unmeasurable> {
    let above: Vec<Vec<f64>> = ev.runs.iter().map(|r| r.above(value).into_iter().map(|c| c as f64).collect()).collect();
    let packets: Vec<Vec<f64>> = ev.runs.iter().map(|r| r.packets().into_iter().map(|c| c as f64).collect()).collect();
    let mut merges = 0;
    loop {
        // Per run, the blocks (merged `merges` times) that hold packets.
        let parts: Vec<(Vec<f64>, Vec<f64>)> = above
            .iter()
            .zip(&packets)
            .map(|(a, p)| {
                let (a, p) = (merged(a, merges), merged(p, merges));
                a.into_iter().zip(p).filter(|&(_, p)| p > 0.0).unzip()
            })
            .collect();
        let counts: Vec<f64> = parts.iter().flat_map(|(a, _)| a.iter().copied()).collect();
        let sizes: Vec<f64> = parts.iter().flat_map(|(_, p)| p.iter().copied()).collect();
        let (k, total) = (sizes.len(), sizes.iter().sum::<f64>());
        let share = if total > 0.0 { counts.iter().sum::<f64>() / total } else { 0.0 };
        let shares: Vec<Vec<f64>> = parts.iter().map(|(a, p)| a.iter().zip(p).map(|(a, p)| a / p).collect()).collect();
        let correlation = lag1(&shares, share);
        let fewest = parts.iter().map(|(_, p)| p.len()).min().unwrap_or(0);
        if k < 2 || correlation <= LAG1_Z / (k as f64).sqrt() {
            let clusters = counts.iter().filter(|&&c| c != 0.0).count();
            let above: f64 = counts.iter().sum();
            let within = if above > 0.0 { counts.iter().map(|c| c * c).sum::<f64>() / above } else { 1.0 };
            if share <= 0.0 || share >= 1.0 || k < 2 {
                let episodes = clusters as f64;
                return Ok(Measured {
                    raw: 1.0,
                    df: (k.max(2) - 1) as u64,
                    clusters,
                    within,
                    above,
                    blocks: k,
                    episodes,
                });
            }
            let squares: Vec<f64> = counts.iter().zip(&sizes).map(|(c, s)| (c - share * s).powi(2)).collect();
            let variance = k as f64 / (k as f64 - 1.0) * squares.iter().sum::<f64>();
            let raw = variance / (total * share * (1.0 - share));
            let fourth: f64 = squares.iter().map(|q| q * q).sum();
            let episodes = if fourth > 0.0 { squares.iter().sum::<f64>().powi(2) / fourth } else { k as f64 };
            let df = degrees_of_freedom(&squares, clusters);
            return Ok(Measured { raw, df, clusters, within, above, blocks: k, episodes });
        }
        if fewest / 2 < FEWEST_BLOCKS {
            return Err(Unmeasurable::Wanders { lag1: correlation, blocks: k });
        }
        merges += 1;
    }
}

/// The degrees of freedom of a variance estimated from blocks with these squared
/// residuals: K − 1 for normal residuals, fewer when a few blocks carry most of it (the
/// kurtosis: Var(s²)/σ⁴ ≈ (κ − 1)/K), and never more than the blocks with exceedances.
fn degrees_of_freedom(squares: &[f64], clusters: usize) -> u64 {
    let k = squares.len() as f64;
    let m2 = squares.iter().sum::<f64>() / k;
    let kurtosis = if m2 > 0.0 { squares.iter().map(|s| s * s).sum::<f64>() / k / (m2 * m2) } else { 3.0 };
    let effective = 2.0 * (k - 1.0) / (kurtosis - 1.0).max(2.0);
    let most = (k as i64 - 1).min(clusters as i64 - 1).min(effective as i64);
    most.max(1) as u64
}

/// The dispersion, at least 1, raised for being estimated from `df` degrees of freedom: by
/// (t_df / z)² at the interval's tail.
fn inflated(m: Measured, tail: f64) -> f64 {
    m.raw.max(1.0) * (student_t(1.0 - tail, m.df) / normal_quantile(1.0 - tail)).powi(2)
}

/// The dispersion the interval at this rank (of `ev.count()` packets, error `tail` a side)
/// allows for, or why there is none.
pub fn dispersion_for(ev: &Evidence, rank: u64, tail: f64) -> Result<f64, Unmeasurable> {
    let n = ev.count();
    let value_at = |r: u64| ev.ranked.value_at_rank(r).expect("a rank within the packets");
    let at = measure(ev, value_at(rank))?;
    let blocks = ev.blocks();
    // The clusters are the unit when the tail the percentile lies in is made of them: the
    // packets above it cluster, or those above a lower value (twice and four times as many
    // packets above) do — a stall's first packets, above a high percentile, are one or two
    // per stall, yet how many lie above it moves with the number of stalls the run saw.
    // Too few clusters then bound nothing: a run that saw a stall more or less than usual
    // states an interval that misses, and the runs that see more are those it bounds.
    let exceed = (n - rank).max(1);
    let mut clustered = at.clustered();
    for times in [2, 4] {
        if clustered || exceed * times >= n / 2 {
            break;
        }
        clustered = measure(ev, value_at(n - exceed * times))?.clustered();
    }
    // Not clustered here, yet clusters above it (a run that saw few stalls, or short ones):
    // their number moves this percentile too, by more than the blocks here can show.
    let floor = if clustered { 1.0 } else { clusters_above(ev, n, exceed, tail)? };
    if clustered && at.above > 0.0 {
        // The clusters are the unit: their number varies as a Poisson count, and the blocks
        // measure it at the percentile itself (a compound Poisson count's variance over the
        // binomial's is E[s²]/E[s], s the packets of a cluster above the value: what the
        // between-block ratio estimates), never anchored on the body below.
        // The episodes are the blocks that carry the variance (the participation ratio of
        // the squared residuals: 2 when two stalls make it, K for blocks alike); the variance
        // is known to about as many degrees of freedom as there are of them.
        if at.clusters < MIN_CLUSTERS || at.episodes < MIN_EPISODES {
            return Err(at.too_few());
        }
        let df = at.df.min((at.episodes.floor() as u64).saturating_sub(1).max(1));
        return Ok(inflated(Measured { df, ..at }, tail));
    }
    let anchor = ANCHOR_CLUSTERS.min((blocks / 2).max(1));
    if at.clusters >= anchor {
        return Ok(inflated(at, tail).max(floor));
    }
    let mut dispersion = at.raw.max(at.within).max(1.0);
    let mut exceed = exceed;
    while exceed < n / 2 {
        exceed *= 2;
        let lower = measure(ev, value_at(n.saturating_sub(exceed).max(1)))?;
        if lower.clusters >= anchor {
            return Ok(dispersion.max(inflated(lower, tail)).max(floor));
        }
        dispersion = dispersion.max(lower.raw);
    }
    Ok(dispersion.max(floor))
}

/// The dispersion the clusters above a percentile that is not clustered itself allow for at
/// least. The nearest higher value (half, a quarter … as many packets above) whose packets
/// cluster shows the clusters: their number varies as a Poisson count, and so does how many
/// of their packets lie above the percentile. That variance, beyond the binomial's, is
/// measured at the higher value from k clusters (k: the blocks carrying it), so it is raised
/// to what the count's upper limit allows (k → λ₊, one-sided at the interval's tail): a run
/// that saw three short stalls may come from a device that makes six longer ones. Added to
/// the binomial variance at the percentile, it is the dispersion's floor there. (Refusing
/// such percentiles instead, below `MIN_EPISODES` clusters, left the median unbounded in
/// 45 % of the runs with five stalls and held no more of the p99 intervals.)
fn clusters_above(ev: &Evidence, n: u64, exceed: u64, tail: f64) -> Result<f64, Unmeasurable> {
    let binomial = (exceed as f64 * (1.0 - exceed as f64 / n as f64)).max(1.0);
    let mut higher = exceed / 2;
    while higher >= MIN_PACKETS_ABOVE {
        let value = ev.ranked.value_at_rank(n - higher).expect("a rank within the packets");
        let m = measure(ev, value)?;
        if m.clustered() && m.above > 0.0 {
            let k = m.clusters.min(m.episodes.round() as usize).max(1) as f64;
            let beyond_binomial = (m.raw - 1.0).max(0.0) * m.above * (1.0 - m.above / n as f64);
            let variance = beyond_binomial * poisson_upper(k, tail) / k;
            return Ok(1.0 + variance / binomial);
        }
        higher /= 2;
    }
    Ok(1.0)
}

/// The upper limit of a Poisson mean from `k` events, one-sided at `tail`: half the χ²
/// quantile with 2k + 2 degrees of freedom (Wilson–Hilferty's cube-root normal form).
fn poisson_upper(k: f64, tail: f64) -> f64 {
    let df = 2.0 * k + 2.0;
    0.5 * df * chi_square_over_df(df, 1.0 - tail)
}

/// The `p` quantile of χ² with `df` degrees of freedom over `df` (Wilson–Hilferty's
/// cube-root normal form).
fn chi_square_over_df(df: f64, p: f64) -> f64 {
    let h = 2.0 / (9.0 * df);
    (1.0 - h + normal_quantile(p) * h.sqrt()).powi(3)
}
