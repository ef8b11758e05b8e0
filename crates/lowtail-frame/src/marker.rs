//! The share of test traffic an IPS rule matches: which packet ids carry the match marker.
//!
//! The generator writes `MARKER` right after the id of the frames `MatchShare::selects`
//! picks, and an IPS rule set gains a rule on those bytes; the analysis picks the same ids
//! again from the ids alone, so no extra data says which packets matched. The choice is a
//! hash of the id (splitmix64's finaliser) under a threshold, not every k-th id: frames are
//! spread over flows round robin, and every tenth id of ten flows would all be one flow's.

/// The bytes a matching frame carries right after its id (6 bytes: they fit a 64 B frame
/// with an 802.1Q tag). No generated rule's content holds them.
pub const MARKER: &[u8; 6] = b"LTMARK";

/// Where the marker sits in the UDP payload of the generator's frames: right after their
/// 8-byte id at offset 0 (`IdSpec::default()`), where a rule's `offset` points.
pub const MARKER_OFFSET: usize = 8;

/// Which ids match: a share of all ids, from 0 (none) to 1 (every one).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MatchShare {
    share: f64,
    /// Ids whose hash lies below this match; `None`: every id (a share of 1).
    threshold: Option<u64>,
}

/// A share outside 0…1 (or not a number).
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[error("the match share must be a number from 0 to 1, not {0}")]
pub struct MatchShareError(pub f64);

impl MatchShare {
    /// The ids of `share` (0…1) of all ids.
    pub fn new(share: f64) -> Result<MatchShare, MatchShareError> {
        if !(0.0..=1.0).contains(&share) {
            return Err(MatchShareError(share));
        }
        // 2^64 · share, exactly where it is representable: an f64 of at most 1 times a power of two.
        let threshold = (share < 1.0).then_some((share * 18_446_744_073_709_551_616.0) as u64);
        Ok(MatchShare { share, threshold })
    }

    /// The share as given.
    pub fn share(&self) -> f64 {
        self.share
    }

    /// Whether the frame with this id carries the marker.
    #[inline(always)]
    pub fn selects(&self, id: u64) -> bool {
        match self.threshold {
            None => true,
            Some(t) => mix(id) < t,
        }
    }

    /// How many of the ids `first`, `first + 1`, … (`count` of them, wrapping) match.
    pub fn count(&self, first: u64, count: u64) -> u64 {
        (0..count).filter(|k| self.selects(first.wrapping_add(*k))).count() as u64
    }
}

/// splitmix64's finaliser: a bijection of the ids whose outputs look uniform.
#[inline(always)]
fn mix(id: u64) -> u64 {
    let mut z = id.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_marker_offset_is_after_the_generators_id() {
        let id = crate::IdSpec::default();
        assert_eq!(MARKER_OFFSET, id.offset + id.width);
    }

    #[test]
    fn none_and_all() {
        let none = MatchShare::new(0.0).unwrap();
        let all = MatchShare::new(1.0).unwrap();
        assert_eq!(none.count(0, 10_000), 0);
        assert_eq!(all.count(u64::MAX - 5, 10_000), 10_000);
    }

    #[test]
    fn outside_0_to_1_is_refused() {
        for bad in [-0.1, 1.000001, f64::NAN, f64::INFINITY] {
            assert!(MatchShare::new(bad).is_err());
        }
        assert_eq!(
            MatchShare::new(2.0).unwrap_err().to_string(),
            "the match share must be a number from 0 to 1, not 2"
        );
    }

    #[test]
    fn a_tenth_is_a_tenth_and_spread_over_round_robin_flows() {
        let s = MatchShare::new(0.1).unwrap();
        let n = 1_000_000;
        let matched = s.count(0, n);
        // binomial(10^6, 0.1): sd 300; 5 sd either side
        assert!((98_500..=101_500).contains(&matched), "{matched}");
        // ten flows used round robin each get about a tenth of the matches
        for flow in 0..10u64 {
            let in_flow = (0..n / 10).filter(|k| s.selects(k * 10 + flow)).count() as u64;
            assert!((9_000..=11_000).contains(&in_flow), "flow {flow}: {in_flow}");
        }
    }

    proptest! {
        #[test]
        fn a_larger_share_keeps_every_id_of_a_smaller_one(a in 0.0f64..=1.0, b in 0.0f64..=1.0, id: u64) {
            let (small, large) = (MatchShare::new(a.min(b)).unwrap(), MatchShare::new(a.max(b)).unwrap());
            prop_assert!(!small.selects(id) || large.selects(id));
        }
    }
}
