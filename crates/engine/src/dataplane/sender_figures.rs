//! What a datagram sender counts as it goes: the gaps between its send calls and its
//! per-interval counts. The kernel's UDP sender (udp) and the AF_XDP one (xdp) both keep them,
//! so they stand below both.

use super::StreamShared;
use netchar_model::{StreamInterval, TestSpec, UdpSent};
use netchar_stats::distribution::Distribution;
use std::time::Instant;

/// Gaps between consecutive send calls, spread over the datagrams each call sent.
#[derive(Default)]
pub(super) struct GapMeter {
    first: Option<Instant>,
    last: Option<Instant>,
    gaps: Distribution,
}

impl GapMeter {
    pub(super) fn record(&mut self, now: Instant, datagrams: usize) {
        if let Some(last) = self.last {
            self.gaps.record((now - last).as_nanos() as u64 / datagrams.max(1) as u64);
        }
        self.first.get_or_insert(now);
        self.last = Some(now);
    }

    pub(super) fn mean_us(&self, packets: u64) -> Option<f64> {
        let (f, l) = (self.first?, self.last?);
        (packets > 1).then(|| (l - f).as_secs_f64() * 1e6 / (packets - 1) as f64)
    }

    pub(super) fn p99_us(&self) -> Option<f64> {
        (self.gaps.count() > 0).then(|| self.gaps.quantile(0.99) as f64 / 1e3)
    }
}

/// A sender's interval bookkeeping: counts at the start of the open interval.
pub(super) struct SenderIntervals {
    interval: f64,
    omit: f64,
    current: u64,
    at_start: (u64, u64, u64),
    closed: Vec<StreamInterval>,
}

impl SenderIntervals {
    pub(super) fn new(spec: &TestSpec) -> Self {
        Self {
            interval: spec.interval_seconds,
            omit: spec.omit_seconds,
            current: 0,
            at_start: (0, 0, 0),
            closed: Vec::new(),
        }
    }

    fn sample(&self, start: f64, end: f64, now: (u64, u64, u64)) -> StreamInterval {
        let bytes = now.0 - self.at_start.0;
        StreamInterval {
            udp_sent: Some(UdpSent {
                packets: now.1 - self.at_start.1,
                send_errors: now.2 - self.at_start.2,
                ..UdpSent::default()
            }),
            ..StreamInterval::bare(start, end, bytes, self.omit)
        }
    }

    /// Closes every interval that ended by `elapsed` seconds; `now` = (bytes, packets, errors).
    pub(super) fn close_due(&mut self, elapsed: f64, now: (u64, u64, u64), shared: Option<&StreamShared>) {
        if self.interval <= 0.0 {
            return;
        }
        while (self.current + 1) as f64 * self.interval <= elapsed {
            let start = self.current as f64 * self.interval;
            let iv = self.sample(start, start + self.interval, now);
            if let Some(sh) = shared {
                sh.push_interval(iv.clone());
            }
            self.closed.push(iv);
            self.at_start = now;
            self.current += 1;
        }
    }

    pub(super) fn finish(mut self, end: f64, now: (u64, u64, u64), shared: &StreamShared) -> Vec<StreamInterval> {
        if self.interval > 0.0 {
            // Whole intervals with nothing sent (a long pattern gap) before the last one.
            self.close_due(end, now, Some(shared));
            let start = self.current as f64 * self.interval;
            let last = self.sample(start, end.max(start), now);
            super::close_last_interval(&mut self.closed, last, self.interval, shared);
        }
        self.closed
    }
}
