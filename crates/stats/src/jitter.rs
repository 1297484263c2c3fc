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
    /// (send stamp, receive stamp) of the last arrival, once one came.
    last: Option<(u64, u64)>,
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
    ///
    /// D is computed modulo 2^64 and read as signed, which is exact whenever |D| < 2^63 ns
    /// (292 years): only a forged send stamp is further off, and its D means nothing anyway.
    #[inline]
    pub fn record(&mut self, sent_ns: u64, received_ns: u64) {
        if let Some((ls, lr)) = self.last {
            let d = received_ns.wrapping_sub(lr).wrapping_sub(sent_ns.wrapping_sub(ls)) as i64;
            let d = d.unsigned_abs();
            self.jitter_ns += (d as f64 - self.jitter_ns) / 16.0;
            self.variation.record(d);
        }
        self.last = Some((sent_ns, received_ns));
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

    /// A forged send stamp anywhere in u64 neither panics nor leaves the estimate unbounded,
    /// and the genuine arrivals after it are back to exact differences.
    #[test]
    fn forged_stamps_at_the_ends_of_the_clock_stay_bounded() {
        let mut j = JitterMeter::new();
        j.record(1_000, 2_000);
        j.record(u64::MAX, 3_000);
        j.record(0, 4_000);
        assert!(j.jitter_ns().is_finite());
        j.reset_variation();
        j.record(10_000, 20_000);
        j.record(11_000, 21_500); // |D| = 500 ns
        assert_eq!(j.variation_quantile_ns(0.5), 500);
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
