//! The worst N latencies with when they happened, in bounded memory.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// One of the worst latencies, with when it happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct WorstEvent {
    /// The latency.
    pub latency_ns: i64,
    /// When PRE saw the packet.
    pub pre_ts_ns: i64,
    /// The packet id.
    pub id: u64,
}

/// The N largest latencies (ties: the earlier packet is kept).
#[derive(Debug, Clone)]
pub struct WorstN {
    n: usize,
    heap: BinaryHeap<Reverse<(i64, Reverse<i64>, u64)>>,
    /// Once `n` are kept, a latency must exceed this, the smallest kept, to be kept too;
    /// most stop at this one comparison, on every packet's path.
    bar: i64,
}

impl WorstN {
    /// Keep the `n` largest. Memory grows with the events offered, up to `n`: nothing is
    /// reserved for an `n` that is never reached (a caller's bound on `n` is its own).
    pub fn new(n: usize) -> Self {
        WorstN {
            n,
            heap: BinaryHeap::with_capacity(n.min(4096).saturating_add(1)),
            bar: if n == 0 { i64::MAX } else { i64::MIN },
        }
    }

    /// One latency; kept if it is among the `n` largest so far.
    #[inline(always)]
    pub fn offer(&mut self, latency_ns: i64, pre_ts_ns: i64, id: u64) {
        if latency_ns > self.bar || self.heap.len() < self.n {
            self.keep(latency_ns, pre_ts_ns, id);
        }
    }

    #[cold]
    fn keep(&mut self, latency_ns: i64, pre_ts_ns: i64, id: u64) {
        if self.heap.len() == self.n {
            self.heap.pop();
        }
        self.heap.push(Reverse((latency_ns, Reverse(pre_ts_ns), id)));
        if self.heap.len() == self.n {
            let Reverse((smallest, _, _)) = *self.heap.peek().expect("n > 0 kept");
            self.bar = smallest;
        }
    }

    /// The events in time order (what a worst-events scatter plots).
    pub fn into_time_order(self) -> Vec<WorstEvent> {
        let mut v: Vec<WorstEvent> = self
            .heap
            .into_iter()
            .map(|Reverse((latency_ns, Reverse(pre_ts_ns), id))| WorstEvent { latency_ns, pre_ts_ns, id })
            .collect();
        v.sort_by_key(|e| (e.pre_ts_ns, e.id));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_n_reserves_nothing_up_front() {
        let mut w = WorstN::new(usize::MAX);
        w.offer(5, 0, 0);
        assert_eq!(w.into_time_order().len(), 1);
    }

    #[test]
    fn keeps_the_largest() {
        let mut w = WorstN::new(3);
        for (i, lat) in [5, 1, 9, 7, 3, 8].iter().enumerate() {
            w.offer(*lat, i as i64, i as u64);
        }
        let got: Vec<i64> = w.into_time_order().iter().map(|e| e.latency_ns).collect();
        assert_eq!(got, vec![9, 7, 8]);
    }

    proptest::proptest! {
        /// What `offer`'s shortcut must not change: the `n` largest, ties to the earlier
        /// packet, exactly as sorting all of them would keep.
        #[test]
        fn keeps_what_sorting_everything_keeps(
            latencies in proptest::collection::vec(0i64..50, 0..400),
            n in 0usize..40,
        ) {
            let mut w = WorstN::new(n);
            for (i, &lat) in latencies.iter().enumerate() {
                w.offer(lat, i as i64, i as u64);
            }
            let mut all: Vec<(i64, i64)> = latencies.iter().enumerate().map(|(i, &l)| (l, i as i64)).collect();
            all.sort_by_key(|&(l, t)| (Reverse(l), t));
            all.truncate(n);
            all.sort_by_key(|&(_, t)| t);
            let kept: Vec<(i64, i64)> = w.into_time_order().iter().map(|e| (e.latency_ns, e.pre_ts_ns)).collect();
            proptest::prop_assert_eq!(kept, all);
        }
    }
}
