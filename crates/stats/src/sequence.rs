//! Sequence accounting of one datagram stream.
//!
//! iperf3 keeps one high-water mark and decrements "lost" when a late packet comes, so
//! duplicates and late packets corrupt the loss count, and its 32-bit counter wraps
//! (reference/iperf.md §5). Here every number is 64-bit and each arrival is one of:
//!
//! - **in order**: above every number seen so far;
//! - **late**: below the highest seen and not seen before (reordered: not lost);
//! - **duplicate**: seen before.
//!
//! **Lost** is known exactly once the sender's total is known: `lost = sent − unique received`.
//!
//! Memory and time are bounded whatever the loss: a ring of [`WINDOW`] bits below the
//! high-water mark tells late from duplicate (an arrival older than the window is counted as
//! late: at most one window's worth of reordering can be told apart from duplication), and
//! per-range loss is computed by the caller from [`Arrival`]s, not from a list of holes.
//!
//! A receiver cannot trust every number: anyone who can send to its port from the sender's
//! address can forge datagrams. A number more than [`WINDOW`] above the high-water mark is
//! **held** aside instead of moving the mark (one forged jump would otherwise make every later
//! genuine arrival "late"); held numbers join the count when the mark reaches them, when a
//! dense run of them shows the sender really jumped (a burst of loss longer than the window),
//! or at the end when the sender's exact total says they were sent. A number at or above the
//! sender's total is **foreign**: never received ([`SequenceTracker::settle`]). So
//! `sent = received + lost` holds whatever arrives, and received never exceeds sent.
//!
//! Reordering extent (RFC 4737 §4.2.2): for a reordered packet with arrival index i, the
//! extent is i − j, where j is the arrival index of the earliest-arriving packet with a larger
//! sequence number. Those packets are always in-order arrivals, whose numbers and arrival
//! indices both increase, so j is found by binary search over the last [`WINDOW`] of them.

use std::collections::{BTreeMap, VecDeque};

/// Sequence numbers below the high-water mark whose arrival is remembered.
pub const WINDOW: u64 = 1 << 20;
const WORDS: usize = (WINDOW / 64) as usize;
/// Far-ahead numbers held at once; more are counted as [`SequenceTracker::overflow`] (and
/// settled as foreign), so memory stays bounded whatever arrives.
pub const HELD_CAP: usize = 4096;
/// Held numbers within one window of each other that show a genuine jump of the sender.
const JUMP_RUN: usize = 64;

/// What one arrival was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// Above every number seen so far.
    InOrder,
    /// Below the high-water mark, first arrival: reordered, not lost. `extent` per RFC 4737.
    Late {
        /// Arrival-index distance to the earliest packet with a larger number.
        extent: u64,
    },
    /// Seen before.
    Duplicate,
    /// Far above the high-water mark: held aside, counted once it proves genuine.
    Held,
    /// Never a sender's number (2^64 − 1: no sender sends that many).
    Foreign,
}

/// Sequence accounting of one stream.
#[derive(Debug, Clone)]
pub struct SequenceTracker {
    /// Highest number seen plus one (0 before any arrival).
    next: u64,
    /// Bit `s % WINDOW` set: `s` arrived, for `next − WINDOW ≤ s < next`.
    seen: Vec<u64>,
    /// (sequence, arrival index) of recent in-order arrivals, for RFC 4737 extents.
    in_order: VecDeque<(u64, u64)>,
    arrivals: u64,
    unique: u64,
    late: u64,
    duplicates: u64,
    reorder_extent_max: u64,
    /// Far-ahead numbers held aside, with their datagram's length.
    held: BTreeMap<u64, u32>,
    /// Far-ahead arrivals beyond [`HELD_CAP`].
    overflow: u64,
    /// Held numbers that joined the count since [`Self::take_released`] was last called,
    /// with their lengths: the caller credits them to its per-range ledger.
    released: Vec<(u64, u32)>,
    foreign: u64,
}

impl Default for SequenceTracker {
    fn default() -> Self {
        Self::new()
    }
}

impl SequenceTracker {
    /// An empty tracker (128 KiB of window bits).
    pub fn new() -> Self {
        Self {
            next: 0,
            seen: vec![0; WORDS],
            in_order: VecDeque::new(),
            arrivals: 0,
            unique: 0,
            late: 0,
            duplicates: 0,
            reorder_extent_max: 0,
            held: BTreeMap::new(),
            overflow: 0,
            released: Vec::new(),
            foreign: 0,
        }
    }

    fn bit(&self, seq: u64) -> bool {
        let i = (seq % WINDOW) as usize;
        self.seen[i / 64] >> (i % 64) & 1 == 1
    }

    fn set(&mut self, seq: u64) {
        let i = (seq % WINDOW) as usize;
        self.seen[i / 64] |= 1 << (i % 64);
    }

    fn clear_range(&mut self, from: u64, to: u64) {
        if to - from >= WINDOW {
            self.seen.iter_mut().for_each(|w| *w = 0);
            return;
        }
        let mut s = from;
        while s < to {
            let i = (s % WINDOW) as usize;
            if i % 64 == 0 && to - s >= 64 {
                self.seen[i / 64] = 0;
                s += 64;
            } else {
                self.seen[i / 64] &= !(1 << (i % 64));
                s += 1;
            }
        }
    }

    /// Records the arrival of `seq` (its datagram `len` bytes long).
    pub fn record(&mut self, seq: u64) -> Arrival {
        self.record_len(seq, 0)
    }

    /// [`Self::record`], keeping the datagram's length for a held number (its bytes count
    /// only once it proves genuine).
    pub fn record_len(&mut self, seq: u64, len: u32) -> Arrival {
        if seq == u64::MAX {
            self.foreign += 1;
            return Arrival::Foreign;
        }
        if seq >= self.next && seq - self.next >= WINDOW {
            return self.hold(seq, len);
        }
        let before = self.next;
        let arrival = self.count(seq);
        if self.next > before && !self.held.is_empty() {
            self.release_below(self.next.saturating_add(WINDOW));
        }
        arrival
    }

    fn hold(&mut self, seq: u64, len: u32) -> Arrival {
        if self.held.contains_key(&seq) {
            self.duplicates += 1;
            return Arrival::Duplicate;
        }
        if self.held.len() >= HELD_CAP {
            self.overflow += 1;
            return Arrival::Held;
        }
        self.held.insert(seq, len);
        // A dense run of held numbers is the sender itself after a burst of loss longer than
        // the window: move the mark to the run's start and count from there.
        let run_start = seq.saturating_sub(WINDOW);
        if self.held.range(run_start..=seq).count() >= JUMP_RUN {
            if let Some((&first, _)) = self.held.range(run_start..=seq).next() {
                self.release_below(first.saturating_add(WINDOW));
            }
        }
        Arrival::Held
    }

    /// Counts every held number below `limit` as an arrival now (repeating while the mark
    /// moves on).
    fn release_below(&mut self, mut limit: u64) {
        while let Some((&seq, &len)) = self.held.first_key_value() {
            if seq >= limit {
                break;
            }
            self.held.remove(&seq);
            if self.count(seq) != Arrival::Duplicate {
                self.released.push((seq, len));
            }
            limit = limit.max(self.next.saturating_add(WINDOW));
        }
    }

    /// Held numbers that were counted since the last call, with their lengths.
    pub fn take_released(&mut self) -> Vec<(u64, u32)> {
        std::mem::take(&mut self.released)
    }

    /// Settles with the sender's exact total `sent` (numbers 0..sent): held numbers below it
    /// are counted, everything at or above it is foreign and leaves the received count.
    /// Returns the numbers counted here (with their lengths) and the numbers removed from the
    /// count (as many as can still be named: those inside the window), for the caller's
    /// per-range ledger. Call once, at the end.
    pub fn settle(&mut self, sent: u64) -> Settled {
        let mut settled = Settled::default();
        let held = std::mem::take(&mut self.held);
        for (seq, len) in held {
            if seq < sent {
                self.unique += 1;
                settled.counted.push((seq, len));
            } else {
                self.foreign += 1;
            }
        }
        self.foreign += std::mem::take(&mut self.overflow);
        if self.next > sent {
            // Numbers at or above `sent` that were counted: in the window they can be named;
            // below it (an attacker's dense run more than a window beyond the total) only
            // counted, as the difference the window cannot account for.
            let lowest_known = self.next.saturating_sub(WINDOW);
            for seq in sent.max(lowest_known)..self.next {
                if self.bit(seq) {
                    settled.removed.push(seq);
                }
            }
            let named = settled.removed.len() as u64;
            self.unique -= named.min(self.unique);
            self.foreign += named;
            // Never more received than sent.
            if self.unique > sent {
                self.foreign += self.unique - sent;
                self.unique = sent;
            }
        }
        settled
    }

    /// Arrivals that were not the sender's (settled), plus 2^64 − 1s.
    pub fn foreign(&self) -> u64 {
        self.foreign
    }

    /// Far-ahead numbers held aside now.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Counts an arrival within reach of the window.
    fn count(&mut self, seq: u64) -> Arrival {
        let index = self.arrivals;
        self.arrivals += 1;
        if seq >= self.next {
            // Numbers skipped by this jump are not seen (yet): clear their window bits.
            self.clear_range(self.next, seq);
            self.set(seq);
            self.next = seq + 1;
            self.unique += 1;
            if self.in_order.len() as u64 >= WINDOW {
                self.in_order.pop_front();
            }
            self.in_order.push_back((seq, index));
            return Arrival::InOrder;
        }
        let in_window = self.next - seq <= WINDOW;
        if in_window && self.bit(seq) {
            self.duplicates += 1;
            return Arrival::Duplicate;
        }
        if in_window {
            self.set(seq);
        }
        self.unique += 1;
        self.late += 1;
        let first_above = self.in_order.partition_point(|&(s, _)| s <= seq);
        let extent = self.in_order.get(first_above).map_or(0, |&(_, j)| index - j);
        self.reorder_extent_max = self.reorder_extent_max.max(extent);
        Arrival::Late { extent }
    }

    /// Distinct numbers received.
    pub fn unique(&self) -> u64 {
        self.unique
    }
    /// Arrivals below the high-water mark that were not duplicates.
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
}

/// What [`SequenceTracker::settle`] changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settled {
    /// Held numbers counted at the end, with their datagrams' lengths.
    pub counted: Vec<(u64, u32)>,
    /// Numbers at or above the sender's total removed from the count.
    pub removed: Vec<u64>,
}

/// Counts distinct arrivals per range of sequence numbers, so the loss of each range (an
/// interval's share of the numbers) is exact: `lost = range length − distinct arrivals in it`.
/// Ranges are appended in order; late arrivals are credited to the range they belong to.
#[derive(Debug, Clone, Default)]
pub struct RangeLedger {
    /// Start of each range (the previous range ends where the next starts).
    starts: Vec<u64>,
    received: Vec<u64>,
}

impl RangeLedger {
    /// Opens a new range starting at `from` (the high-water mark when an interval begins).
    pub fn open(&mut self, from: u64) {
        self.starts.push(from);
        self.received.push(0);
    }

    /// Takes back a credit of `seq` (a number settled as foreign).
    pub fn uncredit(&mut self, seq: u64) {
        let k = self.starts.partition_point(|&s| s <= seq);
        if k > 0 {
            self.received[k - 1] = self.received[k - 1].saturating_sub(1);
        }
    }

    /// Credits a distinct arrival of `seq` to its range (ignored before the first range).
    pub fn credit(&mut self, seq: u64) {
        // Fast path: nearly every arrival belongs to the newest range.
        if let (Some(&last), Some(count)) = (self.starts.last(), self.received.last_mut()) {
            if seq >= last {
                *count += 1;
                return;
            }
        }
        let k = self.starts.partition_point(|&s| s <= seq);
        if k > 0 {
            self.received[k - 1] += 1;
        }
    }

    /// Lost numbers in range `k`, which ends at `end` (the next range's start, or for the last
    /// range the sender's total).
    pub fn lost(&self, k: usize, end: u64) -> u64 {
        let from = self.starts[k];
        end.saturating_sub(from).saturating_sub(self.received[k])
    }

    /// Ranges opened.
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    /// True before any range is opened.
    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// Start of range `k`.
    pub fn start(&self, k: usize) -> u64 {
        self.starts[k]
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
        assert_eq!(t.record(3), Arrival::Late { extent: 2 });
        assert_eq!(t.reorder_extent_max(), 2);
        // Late after a long gap: 10..=19 arrive, then 8 (index 18 vs first above at index 8).
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
        let mut t = SequenceTracker::new();
        // A dense run far ahead: the mark follows it (a sender that lost that many).
        for s in base - 100..base {
            t.record(s);
        }
        for s in [base, base + 1, base + 3, base + 4, base + 2] {
            t.record(s);
        }
        assert_eq!(t.late(), 1);
        assert_eq!(t.high_water(), base + 5);
        assert_eq!(t.duplicates(), 0);
    }

    #[test]
    fn the_window_forgets_old_numbers_after_a_big_jump() {
        let mut t = feed(&[0, 1, 2]);
        for s in 3 * WINDOW - 100..=3 * WINDOW {
            t.record(s);
        }
        assert_eq!(t.high_water(), 3 * WINDOW + 1);
        // 1 is far below the window now: counted late, not duplicate (documented limit).
        assert!(matches!(t.record(1), Arrival::Late { .. }));
        // Inside the window, duplicates are still duplicates after the jump cleared the ring.
        assert!(matches!(t.record(3 * WINDOW - 200), Arrival::Late { .. }));
        assert_eq!(t.record(3 * WINDOW - 200), Arrival::Duplicate);
    }

    #[test]
    fn the_largest_sequence_number_neither_wraps_nor_counts() {
        // `next = seq + 1` used to wrap to 0 here and break sent = received + lost.
        let mut t = feed(&[0, 1, 2]);
        assert_eq!(t.record(u64::MAX), Arrival::Foreign);
        assert_eq!(t.record(3), Arrival::InOrder);
        t.settle(4);
        assert_eq!((t.unique(), t.lost(4), t.foreign()), (4, 0, 1));
    }

    #[test]
    fn a_forged_far_ahead_number_does_not_make_genuine_arrivals_late() {
        // 50,000 genuine datagrams with forged ones far beyond mixed in: 39,491 genuine
        // arrivals used to count as out of order, and received exceeded sent.
        let mut t = SequenceTracker::new();
        for s in 0..50_000u64 {
            if s % 1000 == 0 {
                assert_eq!(t.record(1 << 40 | s), Arrival::Held);
            }
            assert_eq!(t.record(s), Arrival::InOrder);
        }
        let settled = t.settle(50_000);
        assert!(settled.counted.is_empty() && settled.removed.is_empty());
        assert_eq!((t.unique(), t.late(), t.lost(50_000), t.foreign()), (50_000, 0, 0, 50));
    }

    #[test]
    fn forged_numbers_just_above_the_total_are_settled_as_foreign() {
        let mut t = feed(&[0, 1, 2, 3, 10, 11, 4]);
        let settled = t.settle(5);
        assert_eq!(settled.removed, vec![10, 11]);
        assert_eq!((t.unique(), t.lost(5), t.foreign()), (5, 0, 2));
    }

    #[test]
    fn a_genuine_jump_longer_than_the_window_is_followed() {
        // The sender lost 2 windows' worth in a row, then went on: after a short run of held
        // numbers the mark follows it, and everything is counted once.
        let mut t = feed(&[0, 1, 2]);
        let base = 2 * WINDOW;
        let mut held = 0;
        for s in base..base + 1000 {
            if t.record(s) == Arrival::Held {
                held += 1;
            }
        }
        assert!(held <= JUMP_RUN, "{held} held before the jump was followed");
        let released = t.take_released();
        assert_eq!(released.len(), JUMP_RUN, "the held run joins the count");
        t.settle(base + 1000);
        assert_eq!(t.unique(), 1003);
        assert_eq!(t.lost(base + 1000), base - 3);
        assert_eq!(t.late(), 0);
    }

    #[test]
    fn held_numbers_that_were_sent_count_at_the_end() {
        let mut t = feed(&[0, 1]);
        assert_eq!(t.record_len(WINDOW + 5, 100), Arrival::Held);
        assert_eq!(t.record(WINDOW + 5), Arrival::Duplicate);
        let settled = t.settle(WINDOW + 10);
        assert_eq!(settled.counted, vec![(WINDOW + 5, 100)]);
        assert_eq!(t.unique(), 3);
        assert_eq!(t.lost(WINDOW + 10), WINDOW + 10 - 3);
    }

    #[test]
    fn memory_for_held_numbers_is_capped() {
        let mut t = SequenceTracker::new();
        for i in 0..(HELD_CAP as u64 + 100) {
            // Spread out, so no dense run forms.
            t.record((i + 1) * 2 * WINDOW);
        }
        assert_eq!(t.held(), HELD_CAP);
        t.settle(0);
        assert_eq!(t.foreign(), HELD_CAP as u64 + 100);
        assert_eq!(t.unique(), 0);
    }

    #[test]
    fn ledger_attributes_loss_to_ranges() {
        let mut t = SequenceTracker::new();
        let mut l = RangeLedger::default();
        l.open(0);
        for s in [0, 1, 3, 4] {
            if t.record(s) != Arrival::Duplicate {
                l.credit(s);
            }
        }
        l.open(t.high_water()); // 5
        for s in [5, 2, 7] {
            if t.record(s) != Arrival::Duplicate {
                l.credit(s);
            }
        }
        // Range 0 = [0, 5): 2 arrived late in range 1's time but belongs to range 0.
        assert_eq!(l.lost(0, l.start(1)), 0);
        // Range 1 = [5, 10) with 10 sent: 6, 8, 9 lost.
        assert_eq!(l.lost(1, 10), 3);
        assert_eq!(t.lost(10), 3);
    }

    proptest! {
        /// Genuine arrivals (any order, loss, duplicates) mixed with forged numbers anywhere
        /// above the sender's total: after settling, received = distinct genuine numbers,
        /// sent = received + lost, and received never exceeds sent.
        #[test]
        fn forged_numbers_never_count_as_received(
            genuine in proptest::collection::vec(0u64..500, 0..600),
            forged in proptest::collection::vec(500u64..u64::MAX, 0..50),
            mix in proptest::collection::vec(any::<bool>(), 0..650),
        ) {
            let mut t = SequenceTracker::new();
            let (mut g, mut f) = (genuine.iter(), forged.iter());
            let mut ledger_ok = true;
            for pick_forged in mix.iter().chain(std::iter::repeat(&false).take(genuine.len())) {
                let next = if *pick_forged { f.next().or_else(|| g.next()) } else { g.next().or_else(|| f.next()) };
                let Some(&s) = next else { break };
                let _ = t.record(s);
                ledger_ok &= t.unique() <= t.arrivals;
            }
            for &s in f { let _ = t.record(s); }
            t.settle(500);
            let distinct: std::collections::BTreeSet<u64> = genuine.iter().copied().collect();
            prop_assert!(ledger_ok);
            prop_assert_eq!(t.unique(), distinct.len() as u64);
            prop_assert_eq!(t.unique() + t.lost(500), 500);
        }

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
        }

        /// Range losses add up to the total loss, and match a set per range.
        #[test]
        fn ledger_matches_a_set(arrivals in proptest::collection::vec(0u64..300, 0..500), cut in 1usize..400) {
            let mut t = SequenceTracker::new();
            let mut l = RangeLedger::default();
            l.open(0);
            for (i, &a) in arrivals.iter().enumerate() {
                if i == cut.min(arrivals.len()) {
                    l.open(t.high_water());
                }
                if t.record(a) != Arrival::Duplicate {
                    l.credit(a);
                }
            }
            let sent = 300;
            let mut total = 0;
            for k in 0..l.len() {
                let end = if k + 1 < l.len() { l.start(k + 1) } else { sent };
                let set: std::collections::BTreeSet<u64> = arrivals.iter().copied().filter(|&a| a >= l.start(k) && a < end).collect();
                let expect = end.saturating_sub(l.start(k)) - set.len() as u64;
                prop_assert_eq!(l.lost(k, end), expect);
                total += l.lost(k, end);
            }
            prop_assert_eq!(total, t.lost(sent));
        }
    }
}
