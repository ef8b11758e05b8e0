//! 32-bit ids that wrap, unwrapped into a monotonic 64-bit sequence.

/// Turns 32-bit ids that wrap around into a monotonic 64-bit sequence, using serial
/// number arithmetic (RFC 1982): each id is placed within ±2^31 of the previous one,
/// so wraps and moderate reordering both come out right.
#[derive(Debug, Clone, Default)]
pub struct Unwrapper {
    last: Option<u64>,
}

impl Unwrapper {
    /// Anchor the first id near `near` (the other capture side's latest id), so that a
    /// POST capture whose first packets were lost still lands in the same epoch.
    #[inline]
    pub fn unwrap(&mut self, raw: u32, near: Option<u64>) -> u64 {
        let reference = match (self.last, near) {
            (Some(last), _) => last,
            (None, Some(n)) => n,
            (None, None) => {
                let v = raw as u64 + (1u64 << 32);
                self.last = Some(v);
                return v;
            }
        };
        let delta = raw.wrapping_sub(reference as u32) as i32 as i64;
        let v = (reference as i64 + delta) as u64;
        self.last = Some(v);
        v
    }

    /// The latest unwrapped id.
    pub fn last(&self) -> Option<u64> {
        self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_forward() {
        let mut u = Unwrapper::default();
        let a = u.unwrap(u32::MAX - 1, None);
        let b = u.unwrap(u32::MAX, None);
        let c = u.unwrap(0, None);
        let d = u.unwrap(1, None);
        assert_eq!([b - a, c - b, d - c], [1, 1, 1]);
    }

    #[test]
    fn reordered_across_wrap() {
        let mut u = Unwrapper::default();
        let a = u.unwrap(u32::MAX, None);
        let b = u.unwrap(1, None);
        let c = u.unwrap(0, None);
        assert_eq!(b - a, 2);
        assert_eq!(c - a, 1);
    }

    #[test]
    fn second_side_anchors_to_first() {
        let mut pre = Unwrapper::default();
        for raw in [u32::MAX - 2, u32::MAX - 1, u32::MAX, 0, 1, 2] {
            pre.unwrap(raw, None);
        }
        let mut post = Unwrapper::default();
        // POST lost everything before the wrap: its first id must still map after it.
        let first = post.unwrap(1, pre.last());
        assert_eq!(first, pre.last().unwrap() - 1);
    }
}
