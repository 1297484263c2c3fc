//! A datagram sender's pacing: the schedule that says what size datagram `seq` is and when
//! it is due (a rate, bursts and gaps, a size list, catch-up after a stall), and the wait
//! between sends. The kernel's UDP sender (udp) and the AF_XDP one (xdp) both keep it, so it
//! stands below both.

use super::POLL;
use netchar_model::TestSpec;
use std::time::{Duration, Instant};

/// A paced sender sleeps only for waits longer than this, and spins on the clock for shorter
/// ones: with the sender's timer slack at 1 ns a sleep overshoots ~6 µs (p99 ~15 µs) on this
/// class of VM; with the default 50 µs slack it overshot 50–130 µs (reference/perf.md,
/// technique 11), which made every paced sender below ~5k datagrams/s spin a whole core.
const SPIN_BELOW: Duration = Duration::from_micros(40);
/// How early a sleeping sender wakes, spinning out the rest of the wait: covers the overshoot
/// above up to its p99 (a machine whose wakeups are later sends those datagrams late).
const WAKE_EARLY: Duration = Duration::from_micros(20);
/// A paced sender that falls behind its schedule (a stall: the sender was not scheduled)
/// catches up at no more than this multiple of the target rate, never as one back-to-back
/// burst (iperf3's cumulative-average pacing does that, esnet/iperf#386). Every 1 s interval
/// still ends on target unless the stall was long.
const CATCH_UP_RATE: f64 = 2.0;
/// Behind by more than this, the schedule starts afresh: the missed time is not made up.
const MAX_BACKLOG: Duration = Duration::from_millis(500);

/// What a sender sends: the payload size of datagram `seq` and when it is due.
pub(super) struct Schedule {
    pub(super) pps: Option<f64>,
    pub(super) burst: Option<(u64, f64)>,
    pub(super) sizes: Vec<(u64, u64)>,
    pub(super) default_size: usize,
    anchor_seq: u64,
    anchor: Instant,
    /// The last send: (first sequence number after it, when).
    pub(super) last: Option<(u64, Instant)>,
}

impl Schedule {
    pub(super) fn new(spec: &TestSpec, started: Instant) -> Self {
        let u = spec.udp.clone().unwrap_or_default();
        let pattern = u.pattern.unwrap_or_default();
        Self {
            pps: spec.udp_pps_per_stream(),
            burst: pattern.burst.map(|n| (n, pattern.gap_seconds)),
            sizes: pattern.sizes,
            default_size: spec.block_bytes as usize,
            anchor_seq: 0,
            anchor: started,
            last: None,
        }
    }

    /// Payload bytes of datagram `seq`; None once a fixed list is exhausted.
    pub(super) fn size_of(&self, seq: u64) -> Option<usize> {
        if self.sizes.is_empty() {
            return Some(self.default_size);
        }
        let mut left = seq;
        for &(count, size) in &self.sizes {
            if left < count {
                return Some(size as usize);
            }
            left -= count;
        }
        None
    }

    /// Datagram `seq`'s slot on the schedule: the rate's slot plus one gap per completed burst.
    pub(super) fn slot(&self, seq: u64) -> Instant {
        let n = (seq - self.anchor_seq) as f64;
        let mut secs = self.pps.map_or(0.0, |p| n / p);
        if let Some((burst, gap)) = self.burst {
            secs += (seq / burst - self.anchor_seq / burst) as f64 * gap;
        }
        self.anchor + Duration::from_secs_f64(secs)
    }

    /// Datagrams from `seq` on whose slots fall before `until` (and that the size list still
    /// has): what a sender now at `until` owes the schedule.
    pub(super) fn slots_before(&self, seq: u64, until: Instant) -> u64 {
        let left = if self.sizes.is_empty() {
            u64::MAX - seq
        } else {
            self.sizes.iter().map(|&(count, _)| count).sum::<u64>().saturating_sub(seq)
        };
        // Slots are in time order: double to an upper bound, then bisect.
        let before = |n: u64| n > 0 && self.slot(seq + n - 1) < until;
        let mut hi = 1u64;
        while hi < left && before(hi) {
            hi = hi.saturating_mul(2).min(left);
        }
        let (mut lo, mut hi) = (0u64, hi.min(left));
        if before(hi) {
            return hi;
        }
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if before(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// When datagram `seq` is due: its slot, or later while catching up after a stall.
    pub(super) fn due(&self, seq: u64) -> Instant {
        let on_schedule = self.slot(seq);
        // Catching up after a stall: no closer than 1/CATCH_UP_RATE of the nominal gap.
        match (self.pps, self.last) {
            (Some(pps), Some((next, at))) if seq >= next => {
                let floor = at + Duration::from_secs_f64((seq - next) as f64 / (pps * CATCH_UP_RATE));
                on_schedule.max(floor)
            }
            _ => on_schedule,
        }
    }

    /// Starts the schedule afresh at `now` when datagram `seq`, due at `due`, is more than
    /// [`MAX_BACKLOG`] late (a stall), rather than burst to catch up; returns the slots given up.
    pub(super) fn restart_if_behind(&mut self, seq: u64, due: Instant, now: Instant) -> u64 {
        if self.pps.is_none() || now.saturating_duration_since(due) <= MAX_BACKLOG {
            return 0;
        }
        let missed = self.slots_before(seq, now);
        self.anchor = now;
        self.anchor_seq = seq;
        missed
    }

    /// A refusal uses its slots: a lasting one (a firewall) is then tried at the schedule's
    /// rate, not as fast as the kernel can say no.
    pub(super) fn refused(&mut self, datagrams: u64) {
        if let Some(pps) = self.pps {
            if let Ok(slots) = Duration::try_from_secs_f64(datagrams as f64 / pps) {
                self.anchor += slots;
            }
        }
    }

    /// Datagrams due at `now` from `seq` on, at most `max`, all of one size and within one burst.
    pub(super) fn due_count(&self, seq: u64, now: Instant, max: usize) -> usize {
        if self.pps.is_none() && self.burst.is_none() && self.sizes.is_empty() {
            // Unpaced, one size, no bursts: every datagram is due at the start. Asking each
            // slot's time was 4% of an unpaced 64 B sender's CPU.
            return max;
        }
        let Some(size) = self.size_of(seq) else { return 0 };
        let mut n = 0;
        while n < max {
            let s = seq + n as u64;
            if self.size_of(s) != Some(size) || self.due(s) > now {
                break;
            }
            if n > 0 && self.burst.is_some_and(|(b, _)| s.is_multiple_of(b)) {
                break;
            }
            n += 1;
        }
        n
    }
}

/// Waits `wait` the pacer's way: a sleep that wakes [`WAKE_EARLY`] and at most [`POLL`] later,
/// or a spin for waits too short to sleep.
pub(super) fn pause(wait: Duration) {
    if wait > SPIN_BELOW {
        std::thread::sleep((wait - WAKE_EARLY).min(POLL));
    } else {
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paced_spec(pps: u64, pattern: Option<netchar_model::spec::Pattern>) -> TestSpec {
        let mut spec = TestSpec::udp_default();
        spec.block_bytes = 100;
        let udp = spec.udp.as_mut().unwrap();
        udp.rate = netchar_model::UdpRate::PacketsPerSecond(pps);
        udp.pattern = pattern;
        spec
    }

    #[test]
    fn slots_before_counts_what_a_late_sender_owes_the_schedule() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        // 1000/s: slots at 0, 1, 2, ... ms.
        let plain = Schedule::new(&paced_spec(1000, None), t0);
        assert_eq!(plain.slots_before(0, t0), 0);
        assert_eq!(plain.slots_before(0, ms(10)), 10);
        assert_eq!(plain.slots_before(4, ms(10)), 6);
        assert_eq!(plain.slots_before(12, ms(10)), 0);
        assert_eq!(plain.slots_before(0, ms(1500)), 1500);
        // A size list of 7 datagrams owes no more than 7.
        let sizes = netchar_model::spec::Pattern { sizes: vec![(3, 100), (4, 200)], ..Default::default() };
        assert_eq!(Schedule::new(&paced_spec(1000, Some(sizes)), t0).slots_before(2, ms(1500)), 5);
        // Bursts of 10 then 5 ms: slots 0-9 at 0-9 ms, 10-19 at 15-24 ms.
        let bursts = netchar_model::spec::Pattern { burst: Some(10), gap_seconds: 0.005, ..Default::default() };
        let bursty = Schedule::new(&paced_spec(1000, Some(bursts)), t0);
        assert_eq!(bursty.slots_before(0, ms(12)), 10);
        assert_eq!(bursty.slots_before(0, ms(20)), 15);
    }

    /// A batch is every datagram due by the horizon, of one size and within one burst; an
    /// unpaced plain sender's batch is always full.
    #[test]
    fn due_count_cuts_batches_at_the_schedule_sizes_and_bursts() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let mut unpaced = TestSpec::udp_default();
        unpaced.udp.as_mut().unwrap().rate = netchar_model::UdpRate::Unlimited;
        let plain = Schedule::new(&unpaced, t0);
        assert_eq!((plain.due_count(0, t0, 64), plain.due_count(1 << 40, t0, 7)), (64, 7));
        // 1000/s: by 10 ms, slots 0..=10 are due.
        let paced = Schedule::new(&paced_spec(1000, None), t0);
        assert_eq!(paced.due_count(0, ms(10), 64), 11);
        assert_eq!(paced.due_count(0, ms(10), 4), 4);
        // Unpaced with a size list: cut where the size changes, none past the list.
        let sizes = netchar_model::spec::Pattern { sizes: vec![(3, 100), (4, 200)], ..Default::default() };
        unpaced.udp.as_mut().unwrap().pattern = Some(sizes);
        let listed = Schedule::new(&unpaced, t0);
        assert_eq!((listed.due_count(0, t0, 64), listed.due_count(3, t0, 64), listed.due_count(7, t0, 64)), (3, 4, 0));
        // Unpaced bursts of 10 with a 5 ms gap: a batch never crosses a burst's end.
        let bursts = netchar_model::spec::Pattern { burst: Some(10), gap_seconds: 0.005, ..Default::default() };
        unpaced.udp.as_mut().unwrap().pattern = Some(bursts);
        let bursty = Schedule::new(&unpaced, t0);
        assert_eq!(
            (bursty.due_count(0, t0, 64), bursty.due_count(10, t0, 64), bursty.due_count(10, ms(5), 64)),
            (10, 0, 10)
        );
    }
}
