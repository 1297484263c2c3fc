//! Change points in a series of runs: E-divisive means (Matteson & James, 2014) with a
//! permutation significance test, the method Apache Otava (formerly Hunter) and MongoDB's
//! signal-processing-algorithms apply to performance histories.
//!
//! The series is split where the energy distance between the part before and the part after
//! is largest: for a split of `m` points before and `k` after,
//!
//! ```text
//! Q = m·k/(m+k) · ( 2/(m·k) Σ|xᵢ−yⱼ| − 1/C(m,2) Σ|xᵢ−xₗ| − 1/C(k,2) Σ|yⱼ−yₗ| )
//! ```
//!
//! which is large when the points across the split are further apart than the points on
//! either side. The best split of every segment is found; the best of those is tested against
//! the same statistic over the series with each segment's points shuffled (`permutations`
//! times): when at most `significance` of the shuffles reach it, the split is a change point,
//! its segment is cut there, and the search goes on in the pieces. Shuffling needs random
//! numbers: they come from SplitMix64 seeded by the caller, so that one series and one seed
//! give the same change points on every machine and in every build (a generator from a crate
//! may change its stream in a new version; this one is fixed by its definition).
//!
//! [`describe`] turns the change points into what a reader needs: each one's position, the
//! means of the segments before and after with their confidence intervals, the change in
//! percent, and Student's t test (ministat's, [`crate::compare`]) between the two segments.
//!
//! ```
//! use netchar_stats::changepoint::{e_divisive, Options};
//! let mut series: Vec<f64> = (0..30).map(|i| 100.0 + f64::from(i % 3)).collect();
//! series.extend((0..30).map(|i| 110.0 + f64::from(i % 3)));
//! let found = e_divisive(&series, &Options::default());
//! assert_eq!(found.iter().map(|c| c.index).collect::<Vec<_>>(), [30]);
//! ```

use crate::compare::{compare, mean_interval, SetStats, Verdict};

/// How the search runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// The largest share of shuffles that may reach a split's statistic for it to count
    /// (its p-value bound): 0.01 by default, so that a series of noise alone shows a change
    /// in about one of a hundred.
    pub significance: f64,
    /// Shuffles per test: 199 by default, so that p-values are steps of 1/200.
    pub permutations: usize,
    /// The fewest points a segment keeps on either side of a split: 4 by default.
    pub min_size: usize,
    /// The random numbers' seed: the same series and seed give the same change points.
    pub seed: u64,
}

impl Default for Options {
    fn default() -> Self {
        Self { significance: 0.01, permutations: 199, min_size: 4, seed: 1 }
    }
}

/// A change point: where a new segment starts.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangePoint {
    /// The index of the first point after the change.
    pub index: usize,
    /// The split's statistic, `Q` above.
    pub q: f64,
    /// The share of shuffles (plus one, over permutations plus one) whose best split reached
    /// `q`.
    pub p_value: f64,
}

/// SplitMix64 (Steele, Lea & Flood, 2014): a fixed, seedable stream of 64-bit numbers.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in 0..n (n > 0), by rejection: no bias towards small numbers.
    fn below(&mut self, n: usize) -> usize {
        let n = n as u64;
        let zone = u64::MAX - u64::MAX % n;
        loop {
            let v = self.next();
            if v < zone {
                return (v % n) as usize;
            }
        }
    }

    /// Fisher–Yates.
    fn shuffle(&mut self, values: &mut [f64]) {
        for i in (1..values.len()).rev() {
            let j = self.below(i + 1);
            values.swap(i, j);
        }
    }
}

/// The best split of `segment` (at least `min_size` on either side): (index within it, Q).
fn best_split(segment: &[f64], min_size: usize) -> Option<(usize, f64)> {
    let n = segment.len();
    let min_size = min_size.max(2);
    if n < 2 * min_size {
        return None;
    }
    let d = |i: usize, j: usize| (segment[i] - segment[j]).abs();
    // Split at 0: everything on the right.
    let mut within_left = 0.0;
    let mut within_right: f64 = (0..n).flat_map(|j| (j + 1..n).map(move |k| (j, k))).map(|(j, k)| d(j, k)).sum();
    let mut between = 0.0;
    let mut best: Option<(usize, f64)> = None;
    for tau in 1..n - min_size + 1 {
        // Point tau-1 moves from the right to the left.
        let p = tau - 1;
        let to_left: f64 = (0..p).map(|i| d(i, p)).sum();
        let to_right: f64 = (p + 1..n).map(|k| d(p, k)).sum();
        within_left += to_left;
        within_right -= to_right;
        between += to_right - to_left;
        if tau < min_size {
            continue;
        }
        let (m, k) = (tau as f64, (n - tau) as f64);
        let q = m * k / (m + k)
            * (2.0 * between / (m * k) - within_left / (m * (m - 1.0) / 2.0) - within_right / (k * (k - 1.0) / 2.0));
        if best.is_none_or(|(_, b)| q > b) {
            best = Some((tau, q));
        }
    }
    best
}

/// The best split over all segments between `cuts` (sorted, with 0 and the length at the
/// ends): (absolute index, Q).
fn best_over(values: &[f64], cuts: &[usize], min_size: usize) -> Option<(usize, f64)> {
    cuts.windows(2)
        .filter_map(|w| best_split(&values[w[0]..w[1]], min_size).map(|(i, q)| (w[0] + i, q)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

/// The change points of `values`, in order of index.
pub fn e_divisive(values: &[f64], options: &Options) -> Vec<ChangePoint> {
    if values.iter().any(|v| !v.is_finite()) {
        return Vec::new();
    }
    let mut rng = SplitMix64(options.seed);
    let mut cuts = vec![0, values.len()];
    let mut found = Vec::new();
    let mut shuffled = values.to_vec();
    while let Some((index, q)) = best_over(values, &cuts, options.min_size) {
        let mut reached = 0usize;
        for _ in 0..options.permutations {
            shuffled.copy_from_slice(values);
            for w in cuts.windows(2) {
                rng.shuffle(&mut shuffled[w[0]..w[1]]);
            }
            if best_over(&shuffled, &cuts, options.min_size).is_some_and(|(_, pq)| pq >= q) {
                reached += 1;
            }
        }
        let p_value = (reached as f64 + 1.0) / (options.permutations as f64 + 1.0);
        if p_value > options.significance {
            break;
        }
        found.push(ChangePoint { index, q, p_value });
        let at = cuts.partition_point(|&c| c < index);
        cuts.insert(at, index);
    }
    found.sort_by_key(|c| c.index);
    found
}

/// One change point as a reader needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// The change point.
    pub point: ChangePoint,
    /// The segment before it (from the previous change point, or the start).
    pub before: SetStats,
    /// The segment after it (to the next change point, or the end).
    pub after: SetStats,
    /// Half-widths of the means' confidence intervals, before and after.
    pub before_interval: f64,
    /// See `before_interval`.
    pub after_interval: f64,
    /// (mean after − mean before) / mean before × 100.
    pub percent: f64,
    /// Student's t test of the segment after against the one before.
    pub verdict: Verdict,
}

/// The change points of `values` with the segments around each, their means' intervals and
/// the t test between them, all at `confidence` percent (one of ministat's levels).
pub fn describe(values: &[f64], points: &[ChangePoint], confidence: f64) -> Vec<Change> {
    let mut bounds: Vec<usize> = vec![0];
    bounds.extend(points.iter().map(|c| c.index));
    bounds.push(values.len());
    points
        .iter()
        .enumerate()
        .filter_map(|(i, point)| {
            let before = SetStats::of(&values[bounds[i]..bounds[i + 1]])?;
            let after = SetStats::of(&values[bounds[i + 1]..bounds[i + 2]])?;
            Some(Change {
                point: point.clone(),
                before_interval: mean_interval(&before, confidence),
                after_interval: mean_interval(&after, confidence),
                percent: (after.mean - before.mean) * 100.0 / before.mean,
                verdict: compare(&before, &after, confidence, false),
                before,
                after,
            })
        })
        .collect()
}

/// The half-width of the interval in which a new point of a segment like `s` falls with
/// `confidence` percent: t·s·√(1 + 1/n). Wider than the mean's interval, as one run scatters
/// more than a mean of many; what a single new run is judged against.
pub fn prediction_interval(s: &SetStats, confidence: f64) -> f64 {
    if s.n < 2 {
        return 0.0;
    }
    crate::compare::t_value(confidence, (s.n - 1) as f64) * s.stddev * (1.0 + 1.0 / s.n as f64).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Normal noise from the same generator (Box–Muller), for series whose truth the test sets.
    fn noise(seed: u64, n: usize, sd: f64) -> Vec<f64> {
        let mut rng = SplitMix64(seed);
        let mut uniform = || (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
        (0..n)
            .map(|_| {
                let (u1, u2) = (uniform().max(f64::MIN_POSITIVE), uniform());
                sd * (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
            })
            .collect()
    }

    #[test]
    fn the_statistic_matches_its_definition() {
        let x: [f64; 7] = [1.0, 2.0, 4.0, 3.0, 9.0, 8.0, 10.0];
        let direct = |tau: usize| {
            let (a, b) = x.split_at(tau);
            let (m, k) = (a.len() as f64, b.len() as f64);
            let between: f64 = a.iter().flat_map(|p| b.iter().map(move |q: &f64| (p - q).abs())).sum();
            let within = |s: &[f64]| -> f64 {
                (0..s.len()).flat_map(|i| (i + 1..s.len()).map(move |j| (i, j))).map(|(i, j)| (s[i] - s[j]).abs()).sum()
            };
            m * k / (m + k)
                * (2.0 * between / (m * k) - within(a) / (m * (m - 1.0) / 2.0) - within(b) / (k * (k - 1.0) / 2.0))
        };
        let (tau, q) = best_split(&x, 2).unwrap();
        let best = (2..=5).map(|t| (t, direct(t))).max_by(|a, b| a.1.total_cmp(&b.1)).unwrap();
        assert_eq!(tau, best.0);
        assert!((q - best.1).abs() < 1e-9, "{q} vs {}", best.1);
    }

    #[test]
    fn a_step_is_found_where_it_is_and_flat_noise_has_none() {
        let mut found_at_step = 0;
        let mut found_in_flat = 0;
        for seed in 0..20 {
            let mut v: Vec<f64> = noise(seed, 60, 1.0).into_iter().map(|e| 100.0 + e).collect();
            let flat = e_divisive(&v, &Options { seed, ..Options::default() });
            found_in_flat += usize::from(!flat.is_empty());
            for x in &mut v[40..] {
                *x += 3.0;
            }
            let step = e_divisive(&v, &Options { seed, ..Options::default() });
            found_at_step += usize::from(step.len() == 1 && step[0].index.abs_diff(40) <= 1);
        }
        assert!(found_at_step >= 18, "a 3-sigma step found at 40±1 in {found_at_step} of 20");
        assert!(found_in_flat <= 3, "flat noise gave change points in {found_in_flat} of 20");
    }

    #[test]
    fn one_seed_gives_one_answer() {
        let mut v: Vec<f64> = noise(7, 50, 1.0).into_iter().map(|e| 10.0 + e).collect();
        for x in &mut v[25..] {
            *x += 1.0;
        }
        let o = Options { seed: 42, ..Options::default() };
        assert_eq!(e_divisive(&v, &o), e_divisive(&v, &o));
    }

    #[test]
    fn a_change_is_described_by_its_segments() {
        let v = [10.0, 11.0, 10.0, 11.0, 10.0, 11.0, 10.0, 11.0, 20.0, 21.0, 20.0, 21.0, 20.0, 21.0, 20.0, 21.0];
        let points = e_divisive(&v, &Options { min_size: 3, ..Options::default() });
        assert_eq!(points.len(), 1);
        assert_eq!(points[0].index, 8);
        let d = describe(&v, &points, 95.0);
        assert_eq!(d[0].before.mean, 10.5);
        assert_eq!(d[0].after.mean, 20.5);
        assert!((d[0].percent - 95.238_095).abs() < 1e-5);
        assert!(matches!(d[0].verdict, Verdict::Difference { .. }));
    }

    #[test]
    fn too_short_or_not_finite_has_no_change() {
        assert!(e_divisive(&[1.0, 5.0, 1.0], &Options::default()).is_empty());
        assert!(e_divisive(&[1.0, f64::NAN, 1.0, 1.0, 1.0, 1.0, 1.0, 9.0, 9.0, 9.0], &Options::default()).is_empty());
    }
}
