//! ministat-equivalent comparison of sets of measurements: N, Min, Max, Median, Avg, Stddev
//! per set, and for each set against the first, Student's t test of the difference of means
//! at a chosen confidence, with the difference and its interval in units and in percent
//! (FreeBSD ministat's output, and its numbers to the printed precision, except where
//! ministat's one-pass variance loses the last digit that the two passes here keep).
//!
//! ministat looks its t values up in a table rounded to three decimals, and prints them; the
//! quantiles here are computed (statrs) and rounded the same way, so the two agree.

use statrs::distribution::{ContinuousCDF, StudentsT};

/// The confidence levels ministat offers (`-c`).
pub const CONFIDENCES: [f64; 6] = [80.0, 90.0, 95.0, 98.0, 99.0, 99.5];

/// Summary statistics of one set.
#[derive(Debug, Clone, PartialEq)]
pub struct SetStats {
    /// Values.
    pub n: usize,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
    /// Median as ministat takes it: the value at index n/2 of the sorted values.
    pub median: f64,
    /// Mean.
    pub mean: f64,
    /// Sample standard deviation (n − 1).
    pub stddev: f64,
}

impl SetStats {
    /// Statistics of `values` (at least one).
    pub fn of(values: &[f64]) -> Option<Self> {
        if values.is_empty() {
            return None;
        }
        let mut v = values.to_vec();
        v.sort_by(|a, b| a.total_cmp(b));
        let n = v.len();
        let mean = v.iter().sum::<f64>() / n as f64;
        let var = if n > 1 { v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64 } else { 0.0 };
        // ministat's median: the value at index n/2 (the upper middle one for an even count).
        let median = v[n / 2];
        Some(Self { n, min: v[0], max: v[n - 1], median, mean, stddev: var.sqrt() })
    }
}

/// The t quantile for a two-sided interval at `confidence` percent with `df` degrees of
/// freedom, rounded to three decimals as ministat's table is (df over 100 use the normal
/// limit, as the table's last row does).
pub fn t_value(confidence: f64, df: f64) -> f64 {
    // ministat's table labels its last column 99.5 but holds (within ±0.002) the quantiles of
    // a two-sided 99.8% interval, t(0.999): 5.208 at 6 degrees of freedom, 4.499 at 8 (where
    // t(0.999) is 4.501). -c 99.5 follows ministat's meaning.
    let two_sided = if confidence == 99.5 { 99.8 } else { confidence };
    let p = 1.0 - (1.0 - two_sided / 100.0) / 2.0;
    let t = if df > 100.0 {
        statrs::distribution::Normal::new(0.0, 1.0).map(|d| d.inverse_cdf(p)).unwrap_or(f64::NAN)
    } else {
        StudentsT::new(0.0, 1.0, df.max(1.0)).map(|d| d.inverse_cdf(p)).unwrap_or(f64::NAN)
    };
    (t * 1000.0).round() / 1000.0
}

/// The outcome of comparing a set with the baseline.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The interval of the difference contains 0.
    NoDifference,
    /// The means differ at the confidence asked.
    Difference {
        /// mean(set) − mean(baseline).
        diff: f64,
        /// Half-width of its interval.
        interval: f64,
        /// diff as a percentage of the baseline mean.
        percent: f64,
        /// interval as a percentage of the baseline mean.
        percent_interval: f64,
        /// The pooled standard deviation (Student's t) or None for Welch's t.
        pooled_s: Option<f64>,
    },
    /// Fewer than two values in a set: no test possible.
    TooFew,
}

/// Student's t test (pooled variance) of `b` against the baseline `a`, as ministat does it;
/// with `welch`, Welch's t for unequal variances instead (Welch–Satterthwaite df).
pub fn compare(a: &SetStats, b: &SetStats, confidence: f64, welch: bool) -> Verdict {
    if a.n < 2 || b.n < 2 {
        return Verdict::TooFew;
    }
    let (na, nb) = (a.n as f64, b.n as f64);
    let diff = b.mean - a.mean;
    let (interval, pooled_s) = if welch {
        let (va, vb) = (a.stddev.powi(2) / na, b.stddev.powi(2) / nb);
        let df = (va + vb).powi(2) / (va.powi(2) / (na - 1.0) + vb.powi(2) / (nb - 1.0));
        (t_value(confidence, df.floor().max(1.0)) * (va + vb).sqrt(), None)
    } else {
        let df = na + nb - 2.0;
        let s = (((na - 1.0) * a.stddev.powi(2) + (nb - 1.0) * b.stddev.powi(2)) / df).sqrt();
        (t_value(confidence, df) * s * (1.0 / na + 1.0 / nb).sqrt(), Some(s))
    };
    if diff.abs() <= interval {
        return Verdict::NoDifference;
    }
    Verdict::Difference {
        diff,
        interval,
        percent: diff * 100.0 / a.mean,
        percent_interval: interval * 100.0 / a.mean,
        pooled_s,
    }
}

/// The confidence interval half-width of a set's mean at `confidence` percent.
pub fn mean_interval(s: &SetStats, confidence: f64) -> f64 {
    if s.n < 2 {
        return 0.0;
    }
    t_value(confidence, (s.n - 1) as f64) * s.stddev / (s.n as f64).sqrt()
}

/// C's `%g` with `precision` significant digits, as ministat prints (`%.*g`).
pub fn format_g(value: f64, precision: usize) -> String {
    if value == 0.0 || !value.is_finite() {
        return if value.is_finite() { "0".into() } else { format!("{value}") };
    }
    let exp = value.abs().log10().floor() as i32;
    if exp < -4 || exp >= precision as i32 {
        let s = format!("{:.*e}", precision.saturating_sub(1), value);
        // Rust prints 1.5e3; C prints 1.5e+03, with trailing zeros of the mantissa removed.
        let (m, e) = s.split_once('e').expect("exponent form");
        let m = trim_zeros(m);
        let e: i32 = e.parse().expect("integer exponent");
        format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
    } else {
        let decimals = (precision as i32 - 1 - exp).max(0) as usize;
        trim_zeros(&format!("{value:.decimals$}")).to_string()
    }
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// The ministat report for `sets` (name, values); the first is the baseline.
pub fn report(sets: &[(String, Vec<f64>)], confidence: f64, welch: bool) -> String {
    const MARKS: [char; 7] = ['x', '+', '*', '%', '#', '@', 'O'];
    let mut out = String::new();
    for (i, (name, _)) in sets.iter().enumerate() {
        out.push_str(&format!("{} {name}\n", MARKS[i % MARKS.len()]));
    }
    let stats: Vec<Option<SetStats>> = sets.iter().map(|(_, v)| SetStats::of(v)).collect();
    out.push_str(&plot(sets, &stats));
    out.push_str("    N           Min           Max        Median           Avg        Stddev\n");
    let base = stats.first().cloned().flatten();
    for (i, s) in stats.iter().enumerate() {
        let Some(s) = s else {
            out.push_str(&format!("{} (no values)\n", MARKS[i % MARKS.len()]));
            continue;
        };
        out.push_str(&format!(
            "{} {:>3} {:>13} {:>13} {:>13} {:>13} {:>13}\n",
            MARKS[i % MARKS.len()],
            s.n,
            format_g(s.min, 8),
            format_g(s.max, 8),
            format_g(s.median, 8),
            format_g(s.mean, 8),
            format_g(s.stddev, 8)
        ));
        if i == 0 {
            continue;
        }
        let Some(b) = &base else { continue };
        match compare(b, s, confidence, welch) {
            Verdict::NoDifference => out.push_str(&format!("No difference proven at {confidence:.1}% confidence\n")),
            Verdict::TooFew => out.push_str("Too few values for a test (two are needed in each set)\n"),
            Verdict::Difference { diff, interval, percent, percent_interval, pooled_s } => {
                out.push_str(&format!("Difference at {confidence:.1}% confidence\n"));
                out.push_str(&format!("\t{} +/- {}\n", format_g(diff, 6), format_g(interval, 6)));
                out.push_str(&format!("\t{}% +/- {}%\n", format_g(percent, 6), format_g(percent_interval, 6)));
                match pooled_s {
                    Some(s) => out.push_str(&format!("\t(Student's t, pooled s = {})\n", format_g(s, 6))),
                    None => out.push_str("\t(Welch's t)\n"),
                }
            }
        }
    }
    out
}

/// The ASCII distribution plot: one row of marks per set (ministat merges rows where marks do
/// not collide; netchar keeps one row per set, which is easier to read), then each set's
/// spread: `|` at mean ± stddev, `A` at the mean, `M` at the median.
fn plot(sets: &[(String, Vec<f64>)], stats: &[Option<SetStats>]) -> String {
    const WIDTH: usize = 74;
    const MARKS: [char; 7] = ['x', '+', '*', '%', '#', '@', 'O'];
    let all: Vec<f64> = sets.iter().flat_map(|(_, v)| v.iter().copied()).collect();
    let border = format!("+{}+\n", "-".repeat(WIDTH));
    if all.is_empty() {
        return border.repeat(2);
    }
    let lo = all.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = all.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let col = |v: f64| -> usize {
        if hi > lo {
            (((v - lo) / (hi - lo)) * (WIDTH - 1) as f64).round().clamp(0.0, (WIDTH - 1) as f64) as usize
        } else {
            WIDTH / 2
        }
    };
    let mut out = border.clone();
    for (i, (_, values)) in sets.iter().enumerate() {
        let mut row = vec![' '; WIDTH];
        for &v in values {
            let c = &mut row[col(v)];
            *c = if *c == ' ' { MARKS[i % MARKS.len()] } else { '*' };
        }
        out.push_str(&format!("|{}|\n", row.iter().collect::<String>()));
    }
    for s in stats.iter().flatten() {
        let mut row = vec![' '; WIDTH];
        let (a, b) = (col(s.mean - s.stddev), col(s.mean + s.stddev));
        for c in row.iter_mut().take(b + 1).skip(a) {
            *c = '_';
        }
        row[a] = '|';
        row[b] = '|';
        row[col(s.median)] = 'M';
        row[col(s.mean)] = 'A';
        out.push_str(&format!("|{}|\n", row.iter().collect::<String>()));
    }
    out.push_str(&border);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_values_match_the_printed_table() {
        assert_eq!(t_value(95.0, 8.0), 2.306);
        assert_eq!(t_value(99.0, 8.0), 3.355);
        assert_eq!(t_value(95.0, 1.0), 12.706);
        assert_eq!(t_value(80.0, 30.0), 1.310);
        assert_eq!(t_value(95.0, 1000.0), 1.96);
        assert_eq!(t_value(99.5, 6.0), 5.208);
    }

    #[test]
    fn the_ministat_example_numbers() {
        let a = SetStats::of(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        let c = SetStats::of(&[10.0, 11.0, 12.0, 13.0, 14.0]).unwrap();
        assert_eq!(format_g(a.stddev, 8), "1.5811388");
        match compare(&a, &c, 95.0, false) {
            Verdict::Difference { diff, interval, percent, percent_interval, pooled_s } => {
                assert_eq!(format_g(diff, 6), "9");
                assert_eq!(format_g(interval, 6), "2.306");
                assert_eq!(format_g(percent, 6), "300");
                assert_eq!(format_g(percent_interval, 6), "76.8667");
                assert_eq!(format_g(pooled_s.unwrap(), 6), "1.58114");
            }
            v => panic!("{v:?}"),
        }
        let b = SetStats::of(&[2.0, 3.0, 4.0, 5.0, 6.5]).unwrap();
        assert_eq!(compare(&a, &b, 95.0, false), Verdict::NoDifference);
    }

    #[test]
    fn g_format_follows_c() {
        assert_eq!(format_g(0.0001234, 6), "0.0001234");
        assert_eq!(format_g(0.00001234, 6), "1.234e-05");
        assert_eq!(format_g(123456789.0, 8), "1.2345679e+08");
        assert_eq!(format_g(12345678.0, 8), "12345678");
        assert_eq!(format_g(-2.5, 6), "-2.5");
    }
}
