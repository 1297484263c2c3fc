//! A distribution of nanosecond values with percentiles at bounded error (an HDR histogram).

use hdrhistogram::Histogram;

/// Values in ns from 1 ns to 60 s, three significant digits (≤ 0.1% value error).
#[derive(Debug, Clone)]
pub struct Distribution {
    hist: Histogram<u64>,
}

impl Default for Distribution {
    fn default() -> Self {
        Self::new()
    }
}

impl Distribution {
    /// An empty distribution.
    pub fn new() -> Self {
        Self { hist: Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds and precision") }
    }

    /// Records one value; values beyond 60 s count as 60 s.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.hist.saturating_record(ns);
    }

    /// The q-quantile (0..=1), 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.hist.is_empty() {
            0
        } else {
            self.hist.value_at_quantile(q)
        }
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// Forgets every value.
    pub fn reset(&mut self) {
        self.hist.reset();
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &Self) {
        // Same bounds on both sides: adding cannot fail.
        let _ = self.hist.add(&other.hist);
    }

    /// Smallest value, 0 when empty.
    pub fn min(&self) -> u64 {
        if self.hist.is_empty() {
            0
        } else {
            self.hist.min()
        }
    }

    /// Largest value, 0 when empty.
    pub fn max(&self) -> u64 {
        if self.hist.is_empty() {
            0
        } else {
            self.hist.max()
        }
    }

    /// Mean, 0 when empty.
    pub fn mean(&self) -> f64 {
        if self.hist.is_empty() {
            0.0
        } else {
            self.hist.mean()
        }
    }

    /// The distribution as a bounded list of `(quantile, value)` points for drawing its CDF:
    /// 50 evenly spaced quantiles below 0.98, then 100 whose distance from 1 shrinks
    /// geometrically from 0.02 to 2·10⁻⁶ (the tail is where latency under load differs), then
    /// the whole. The first point is the minimum and the last the maximum; values never
    /// decrease. Empty when nothing was recorded.
    pub fn cdf_points(&self) -> Vec<(f64, u64)> {
        if self.hist.is_empty() {
            return Vec::new();
        }
        let body = (0..50).map(|i| f64::from(i) / 50.0);
        let tail = (1..=100).map(|k| 1.0 - 0.02 * 10f64.powf(-f64::from(k) / 25.0));
        let mut floor = self.min();
        let mut points: Vec<(f64, u64)> = body
            .chain(tail)
            .map(|q| {
                floor = floor.max(self.hist.value_at_quantile(q)).min(self.max());
                (q, floor)
            })
            .collect();
        points[0].1 = self.min();
        points.push((1.0, self.max()));
        points
    }

    /// Standard deviation, 0 when empty.
    pub fn stddev(&self) -> f64 {
        if self.hist.is_empty() {
            0.0
        } else {
            self.hist.stdev()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdf_points_are_bounded_monotonic_and_end_at_the_maximum() {
        let mut d = Distribution::new();
        assert!(d.cdf_points().is_empty());
        // A long tail: 10 000 values of 10 µs, 100 of 1 ms, one of 50 ms.
        (0..10_000).for_each(|_| d.record(10_000));
        (0..100).for_each(|_| d.record(1_000_000));
        d.record(50_000_000);
        let p = d.cdf_points();
        assert_eq!(p.len(), 151);
        assert!(p.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1), "{p:?}");
        assert_eq!((p[0], *p.last().unwrap()), ((0.0, d.min()), (1.0, d.max())));
        // Denser in the tail: more than half the points lie above the 98th percentile.
        assert!(p.iter().filter(|(q, _)| *q > 0.98).count() > 75);
        assert!(p.iter().any(|&(_, v)| v == d.quantile(0.995)));
    }

    /// Against a sorted-array reference: the histogram's percentile is within 0.1%.
    #[test]
    fn percentiles_match_a_sorted_reference() {
        let mut d = Distribution::new();
        let mut values: Vec<u64> = (0..10_000u64).map(|i| 1_000 + (i * 7919) % 100_000).collect();
        for &v in &values {
            d.record(v);
        }
        values.sort_unstable();
        for q in [0.5, 0.9, 0.99, 0.999] {
            let reference = values[((q * values.len() as f64).ceil() as usize).saturating_sub(1)] as f64;
            let got = d.quantile(q) as f64;
            assert!((got - reference).abs() <= reference * 0.001 + 1.0, "q{q}: {got} vs {reference}");
        }
        assert_eq!(d.count(), 10_000);
    }
}
