//! Sequence accounting of one datagram stream.
//!
//! iperf3 keeps one high-water mark and decrements "lost" when a late packet comes, so
//! duplicates and late packets corrupt the loss count, and its 32-bit counter wraps
//! (reference/iperf.md §5). Here every number is 64-bit, a missing number is remembered as a
//! gap until it arrives, and lost, late and duplicate are separate counts:
//!
//! - **in order**: the number is above every number seen so far;
//! - **late**: below the highest seen and never seen before (reordered: not lost);
//! - **duplicate**: seen before;
//! - **lost**: sent but never seen; known exactly only once the sender's total is known,
//!   `lost = sent − unique received`.
//!
//! Reordering extent (RFC 4737 §4.2.2): for a reordered packet with arrival index i, the
//! extent is i − j, where j is the arrival index of the earliest-arriving packet with a larger
//! sequence number. Those packets are always "in order" arrivals, whose numbers and arrival
//! indices both increase, so j is found by binary search over them.
//!
//! Memory: gaps are kept as ranges, and duplicate detection below the highest number uses the
//! gap set (a number inside a gap is late, one outside is a duplicate), so memory grows with
//! the number of holes, not the number of packets.

use std::collections::BTreeMap;

/// What one arrival was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// Above every number seen so far.
    InOrder,
    /// Filled a gap: reordered, not lost. `extent` as RFC 4737 defines it.
    Late {
        /// Arrival-index distance to the earliest packet with a larger number.
        extent: u64,
    },
    /// Seen before.
    Duplicate,
}

/// Sequence accounting of one stream.
#[derive(Debug, Clone, Default)]
pub struct SequenceTracker {
    /// Highest number seen plus one (0 before any arrival).
    next: u64,
    /// Missing numbers below `next`: start → end (exclusive).
    gaps: BTreeMap<u64, u64>,
    /// (sequence, arrival index) of every in-order arrival after a gap opened, for RFC 4737.
    in_order: Vec<(u64, u64)>,
    arrivals: u64,
    unique: u64,
    late: u64,
    duplicates: u64,
    reorder_extent_max: u64,
}

impl SequenceTracker {
    /// An empty tracker.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records the arrival of `seq`.
    pub fn record(&mut self, seq: u64) -> Arrival {
        let index = self.arrivals;
        self.arrivals += 1;
        if seq >= self.next {
            if seq > self.next {
                self.gaps.insert(self.next, seq);
            }
            self.next = seq + 1;
            self.unique += 1;
            if !self.gaps.is_empty() {
                self.in_order.push((seq, index));
            } else {
                // No hole below: no later arrival can be reordered relative to these.
                self.in_order.clear();
            }
            return Arrival::InOrder;
        }
        // Below the high-water mark: late if inside a gap, else a duplicate.
        let Some((&start, &end)) = self.gaps.range(..=seq).next_back() else {
            self.duplicates += 1;
            return Arrival::Duplicate;
        };
        if seq >= end {
            self.duplicates += 1;
            return Arrival::Duplicate;
        }
        self.gaps.remove(&start);
        if start < seq {
            self.gaps.insert(start, seq);
        }
        if seq + 1 < end {
            self.gaps.insert(seq + 1, end);
        }
        self.unique += 1;
        self.late += 1;
        let first_above = self.in_order.partition_point(|&(s, _)| s <= seq);
        let extent = self.in_order.get(first_above).map_or(0, |&(_, j)| index - j);
        self.reorder_extent_max = self.reorder_extent_max.max(extent);
        if self.gaps.is_empty() {
            self.in_order.clear();
        }
        Arrival::Late { extent }
    }

    /// Distinct numbers received.
    pub fn unique(&self) -> u64 {
        self.unique
    }
    /// Arrivals that filled a gap.
    pub fn late(&self) -> u64 {
        self.late
    }
    /// Arrivals of a number already seen.
    pub fn duplicates(&self) -> u64 {
        self.duplicates
    }
    /// Largest RFC 4737 extent seen.
    pub fn reorder_extent_max(&self) -> u64 {
        self.reorder_extent_max
    }
    /// Highest number seen plus one.
    pub fn high_water(&self) -> u64 {
        self.next
    }

    /// Lost datagrams once the sender says it sent `sent` (numbered 0..sent).
    pub fn lost(&self, sent: u64) -> u64 {
        sent.saturating_sub(self.unique)
    }

    /// Numbers in `[from, to)` never received (with `to` up to the sender's total, so the
    /// tail after the last arrival counts as lost).
    pub fn missing_in(&self, from: u64, to: u64) -> u64 {
        let mut missing = to.saturating_sub(self.next.max(from));
        for (&s, &e) in self.gaps.range(..to) {
            let (a, b) = (s.max(from), e.min(to));
            if a < b {
                missing += b - a;
            }
        }
        missing
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn feed(seqs: &[u64]) -> SequenceTracker {
        let mut t = SequenceTracker::new();
        for &s in seqs {
            t.record(s);
        }
        t
    }

    #[test]
    fn in_order_stream_loses_nothing() {
        let t = feed(&[0, 1, 2, 3, 4]);
        assert_eq!((t.unique(), t.late(), t.duplicates(), t.lost(5)), (5, 0, 0, 0));
    }

    #[test]
    fn loss_includes_the_tail_after_the_last_arrival() {
        let t = feed(&[0, 1, 3, 4]);
        assert_eq!(t.lost(7), 3); // 2, 5, 6
        assert_eq!(t.missing_in(0, 5), 1);
        assert_eq!(t.missing_in(5, 7), 2);
    }

    #[test]
    fn late_packets_are_reordered_not_lost_and_duplicates_do_not_hide_loss() {
        // iperf3's "lost--" on any old packet would report 0 lost here; truly 1 (number 5).
        let t = feed(&[0, 2, 1, 1, 3, 4, 6, 6, 6]);
        assert_eq!(t.late(), 1);
        assert_eq!(t.duplicates(), 3);
        assert_eq!(t.unique(), 6);
        assert_eq!(t.lost(7), 1);
    }

    /// RFC 4737 §4.2.2 example: arrival order 1 2 4 5 3 (indices 0..4): packet 3 arrives at
    /// index 4, the earliest packet with a larger number (4) arrived at index 2: extent 2.
    #[test]
    fn reorder_extent_matches_rfc4737() {
        let mut t = SequenceTracker::new();
        for s in [1, 2, 4, 5] {
            assert_eq!(t.record(s), Arrival::InOrder);
        }
        // Number 0 was never sent in this example; fill it so only 3 is a hole.
        assert_eq!(t.record(3), Arrival::Late { extent: 2 });
        assert_eq!(t.reorder_extent_max(), 2);
        // Late after a long gap: 10..=19 arrive, then 8 (index 15 vs first above at index 6).
        let mut t = feed(&[0, 1, 2, 3, 4, 5, 6, 7]);
        for s in 10..20 {
            t.record(s);
        }
        assert_eq!(t.record(8), Arrival::Late { extent: 10 });
        assert_eq!(t.record(9), Arrival::Late { extent: 11 });
        assert_eq!(t.lost(20), 0);
    }

    #[test]
    fn numbers_beyond_32_bits_do_not_wrap() {
        let base = u64::from(u32::MAX) - 2;
        let t = feed(&[base, base + 1, base + 3, base + 4, base + 2]);
        assert_eq!(t.late(), 1);
        assert_eq!(t.high_water(), base + 5);
        assert_eq!(t.missing_in(base, base + 5), 0);
    }

    proptest! {
        /// Whatever the order, duplication and loss, the counts agree with a plain set.
        #[test]
        fn agrees_with_a_set(arrivals in proptest::collection::vec(0u64..200, 0..400)) {
            let t = feed(&arrivals);
            let mut seen = std::collections::BTreeSet::new();
            let mut dups = 0;
            for a in &arrivals { if !seen.insert(*a) { dups += 1; } }
            prop_assert_eq!(t.unique(), seen.len() as u64);
            prop_assert_eq!(t.duplicates(), dups);
            prop_assert_eq!(t.lost(200), 200 - seen.len() as u64);
            prop_assert_eq!(t.missing_in(0, 200), 200 - seen.len() as u64);
            prop_assert_eq!(t.missing_in(50, 120), (50..120).filter(|x| !seen.contains(x)).count() as u64);
        }
    }
}
