//! Receive wake-up batching for TCP readers.
//!
//! A blocked reader is woken for every segment that lands in its socket. On a virtual machine a
//! wake-up across CPUs costs 35–100 µs of the *sender's* CPU (the IPI is sent from where the
//! segment was processed, which on loopback and veth is the sending thread), so at tens of
//! Gbit/s the wake-ups, not the copies, bound a single stream. With `SO_RCVLOWAT` set, the
//! kernel wakes the reader only once that many bytes are queued (or at the end of the stream,
//! or when the receive window runs out, so it never stalls a sender).
//!
//! The mark follows the rate read: about [`LAG`] worth of data, so the byte counter the
//! collector samples is never more than that behind the socket, at any rate. It never exceeds
//! one read's length (one wake-up, one full read), and stays off below [`MIN_MARK`], where
//! wake-ups are rare enough not to matter. The data plane batches only while its end runs
//! fewer streams than it has CPUs: otherwise no CPU is idle to be woken. Measured on loopback
//! (2 vCPUs, 128 KiB reads, alternated runs): one stream's plain reads from 18.9 to 26.3
//! Gbit/s, `--skip-rx-copy` from 21.6 to 37.7 Gbit/s with 1 MiB discards.

use std::time::{Duration, Instant};

/// How far behind the arriving data the reader may fall by waiting for a batch.
const LAG: Duration = Duration::from_micros(500);
/// How often the rate behind the mark is re-estimated.
const WINDOW: Duration = Duration::from_millis(10);
/// Below this a mark is not worth a wake-up saved: the reader is woken per segment.
const MIN_MARK: usize = 16 * 1024;

/// The low-water mark a TCP reader asks for, re-estimated from the bytes it reads.
#[derive(Debug)]
pub(super) struct WakeBatching {
    /// The largest mark: one read's length.
    cap: usize,
    window_start: Instant,
    window_bytes: u64,
    /// The mark the socket has now (1: the kernel's default, a wake-up per arrival).
    mark: usize,
    /// The largest mark set over the stream, for its record.
    largest: usize,
}

impl WakeBatching {
    pub(super) fn new(cap: usize, now: Instant) -> Self {
        Self { cap, window_start: now, window_bytes: 0, mark: 1, largest: 0 }
    }

    /// Counts `bytes` read at `now` (0 for a read that timed out); returns the new mark when
    /// the socket's should change.
    pub(super) fn on_read(&mut self, bytes: usize, now: Instant) -> Option<usize> {
        self.window_bytes += bytes as u64;
        let elapsed = now.saturating_duration_since(self.window_start);
        if elapsed < WINDOW {
            return None;
        }
        let per_second = self.window_bytes as f64 / elapsed.as_secs_f64();
        self.window_start = now;
        self.window_bytes = 0;
        let want = (per_second * LAG.as_secs_f64()) as usize;
        // Page multiples, and a change only when the wanted mark is off by half or more, so a
        // steady stream makes no setsockopt after the first.
        let want = if want < MIN_MARK { 1 } else { (want.min(self.cap) / 4096 * 4096).max(MIN_MARK) };
        let off_by_half = want * 2 <= self.mark || want * 2 >= self.mark * 3;
        if !off_by_half {
            return None;
        }
        self.mark = want;
        if want > 1 {
            self.largest = self.largest.max(want);
        }
        Some(want)
    }

    /// The largest mark set, None when the reader was woken per arrival throughout.
    pub(super) fn largest(&self) -> Option<u64> {
        (self.largest > 0).then_some(self.largest as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `rate` bytes per second in reads of `read` bytes for `span`; returns the marks set.
    fn drive(b: &mut WakeBatching, start: Instant, span: Duration, rate: f64, read: usize) -> (Vec<usize>, Instant) {
        let step = Duration::from_secs_f64(read as f64 / rate);
        let (mut now, mut marks) = (start, Vec::new());
        while now < start + span {
            now += step;
            marks.extend(b.on_read(read, now));
        }
        (marks, now)
    }

    #[test]
    fn a_fast_stream_batches_up_to_one_read_and_settles() {
        let t0 = Instant::now();
        let mut b = WakeBatching::new(128 * 1024, t0);
        // 20 Gbit/s: 500 µs is 1.25 MB, capped at the read length; set once, then left alone.
        let (marks, _) = drive(&mut b, t0, Duration::from_millis(200), 2.5e9, 128 * 1024);
        assert_eq!(marks, vec![128 * 1024]);
        assert_eq!(b.largest(), Some(128 * 1024));
    }

    #[test]
    fn the_mark_follows_the_rate_and_stays_within_the_lag() {
        let t0 = Instant::now();
        let mut b = WakeBatching::new(1 << 20, t0);
        // 1 Gbit/s: 62.5 kB in 500 µs, rounded down to pages.
        let (marks, now) = drive(&mut b, t0, Duration::from_millis(100), 125e6, 16 * 1024);
        assert_eq!(marks, vec![61_440]);
        // The rate falls to 100 Mbit/s: 6.25 kB in 500 µs is below the floor, so per arrival.
        let (marks, _) = drive(&mut b, now, Duration::from_millis(100), 12.5e6, 16 * 1024);
        assert_eq!(marks, vec![1]);
        assert_eq!(b.largest(), Some(61_440));
    }

    #[test]
    fn a_read_that_timed_out_turns_batching_off() {
        let t0 = Instant::now();
        let mut b = WakeBatching::new(1 << 20, t0);
        let (_, now) = drive(&mut b, t0, Duration::from_millis(50), 2.5e9, 128 * 1024);
        // The first estimate still holds the last fast reads; a second quiet read settles it.
        let marks: Vec<usize> =
            [100, 200].iter().filter_map(|&ms| b.on_read(0, now + Duration::from_millis(ms))).collect();
        assert_eq!(marks.last(), Some(&1), "{marks:?}");
    }

    #[test]
    fn a_slow_stream_never_sets_a_mark() {
        let t0 = Instant::now();
        let mut b = WakeBatching::new(1 << 20, t0);
        let (marks, _) = drive(&mut b, t0, Duration::from_secs(1), 1e6, 1448);
        assert!(marks.is_empty(), "{marks:?}");
        assert_eq!(b.largest(), None);
    }
}
