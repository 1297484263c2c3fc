//! RFC 3550 §6.4.1 interarrival jitter, plus percentiles of the same per-packet variation.
//!
//! For consecutive arrivals i−1, i with send stamps S and receive stamps R (any two clocks:
//! their offset cancels), D = (R_i − R_{i−1}) − (S_i − S_{i−1}), and the running estimate is
//! J += (|D| − J) / 16. RFC 3550's J is a smoothed value, not a statistic of the test
//! (esnet/iperf#547), so netchar also keeps |D| in a histogram for p50/p99 per interval.

use crate::distribution::Distribution;

/// Jitter of one stream.
#[derive(Debug, Clone)]
pub struct JitterMeter {
    last: Option<(i128, i128)>,
    jitter_ns: f64,
    variation: Distribution,
}

impl Default for JitterMeter {
    fn default() -> Self {
        Self::new()
    }
}

impl JitterMeter {
    /// A meter with no arrivals.
    pub fn new() -> Self {
        Self { last: None, jitter_ns: 0.0, variation: Distribution::new() }
    }

    /// Records an arrival: `sent_ns` on the sender's clock, `received_ns` on the receiver's.
    pub fn record(&mut self, sent_ns: u64, received_ns: u64) {
        let (s, r) = (i128::from(sent_ns), i128::from(received_ns));
        if let Some((ls, lr)) = self.last {
            let d = ((r - lr) - (s - ls)).unsigned_abs();
            let d = u64::try_from(d).unwrap_or(u64::MAX);
            self.jitter_ns += (d as f64 - self.jitter_ns) / 16.0;
            self.variation.record(d);
        }
        self.last = Some((s, r));
    }

    /// The RFC 3550 estimate now, in nanoseconds.
    pub fn jitter_ns(&self) -> f64 {
        self.jitter_ns
    }

    /// The q-quantile (0..=1) of |D| recorded since the last [`Self::reset_variation`], in ns.
    pub fn variation_quantile_ns(&self, q: f64) -> u64 {
        self.variation.quantile(q)
    }

    /// The |D| values recorded since the last reset.
    pub fn variation(&self) -> &Distribution {
        &self.variation
    }

    /// Clears the percentile histogram (for the next interval); the RFC 3550 estimate goes on.
    pub fn reset_variation(&mut self) {
        self.variation.reset();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_transit_has_no_jitter() {
        let mut j = JitterMeter::new();
        for i in 0..100u64 {
            j.record(i * 1000, 5_000_000 + i * 1000);
        }
        assert_eq!(j.jitter_ns(), 0.0);
        assert_eq!(j.variation_quantile_ns(0.99), 0);
    }

    /// Hand-computed: transit alternates 10 µs and 12 µs, so |D| = 2000 ns every packet after
    /// the first, and J_n = 2000 (1 − (15/16)^(n)) for n differences.
    #[test]
    fn alternating_transit_matches_rfc3550_by_hand() {
        let mut j = JitterMeter::new();
        for i in 0..5u64 {
            let transit = if i % 2 == 0 { 10_000 } else { 12_000 };
            j.record(i * 100_000, i * 100_000 + transit);
        }
        let expected = 2000.0 * (1.0 - (15.0f64 / 16.0).powi(4));
        assert!((j.jitter_ns() - expected).abs() < 1e-9, "{} vs {expected}", j.jitter_ns());
        assert_eq!(j.variation_quantile_ns(0.5), 2000);
    }

    #[test]
    fn percentiles_reset_per_interval() {
        let mut j = JitterMeter::new();
        j.record(0, 0);
        j.record(1000, 51_000); // |D| = 50 µs
        assert!(j.variation_quantile_ns(0.99) >= 49_950);
        j.reset_variation();
        assert_eq!(j.variation_quantile_ns(0.99), 0);
        assert!(j.jitter_ns() > 0.0);
    }
}
