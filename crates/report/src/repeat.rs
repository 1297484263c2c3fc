//! The text after `--repeat` runs: each headline figure's mean and its 95% confidence interval
//! over the counted runs, in the single-run summary's units (bit/s with an SI prefix, or the
//! test's `-f`; µs for latency). The JSON keeps every run's exact figures.

use netchar_model::units::{format_si, RateFormat};
use netchar_model::TestResult;
use netchar_stats::compare::{format_g, mean_interval, SetStats};
use std::fmt::Write;

/// Mean ± 95% confidence interval (Student's t) of the headline figures over `runs`, one line
/// per figure; empty for no runs.
pub fn repeat_statistics(runs: &[TestResult], format: RateFormat) -> String {
    let Some(first) = runs.first() else { return String::new() };
    let mut paths = vec![first.headline_path()];
    if paths[0].starts_with("rr.") {
        paths.push("rr.latency_us.p50");
        paths.push("rr.latency_us.p99");
    }
    if first.reset.is_some() {
        // --reset-cmd: how long the target took to answer again.
        paths.push("reset.time_to_ready_seconds");
    }
    let mut out = format!("=== {} runs: mean ± 95% confidence interval (Student's t)\n", runs.len());
    for path in paths {
        let values = netchar_model::figures::figures(runs, path);
        if let Some(s) = SetStats::of(&values) {
            let ci = mean_interval(&s, 95.0);
            let pct = if s.mean != 0.0 { 100.0 * ci / s.mean.abs() } else { 0.0 };
            let f = |x: f64| figure(path, x, format);
            let _ = writeln!(
                out,
                "{path}: {} ± {} ({pct:.2}%), min {}, max {}, stddev {}",
                f(s.mean),
                f(ci),
                f(s.min),
                f(s.max),
                f(s.stddev)
            );
        }
    }
    out
}

/// One figure of `path` in the unit the single-run summary gives it.
fn figure(path: &str, x: f64, format: RateFormat) -> String {
    if path.ends_with("bits_per_second") {
        format.format(x)
    } else if path.ends_with("_per_second") {
        format!("{}/s", format_si(x, "").trim())
    } else if path.contains("latency_us") {
        format!("{x:.2} µs")
    } else if path.ends_with("seconds") {
        format!("{x:.3} s")
    } else if path.ends_with("percent") {
        format!("{x:.4}%")
    } else {
        format_g(x, 6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The TCP fixture with its receiver's rate set to each of `bps`.
    fn tcp_runs(bps: &[f64]) -> Vec<TestResult> {
        let r: TestResult = serde_json::from_str(include_str!("../tests/fixtures/tcp.json")).unwrap();
        bps.iter()
            .map(|&b| {
                let mut r = r.clone();
                r.summary.up.as_mut().unwrap().receiver.bits_per_second = b;
                r
            })
            .collect()
    }

    #[test]
    fn rates_are_in_bits_per_second_with_si_prefixes_not_exponents() {
        let out = repeat_statistics(&tcp_runs(&[32.0e9, 31.0e9, 35.8e9]), RateFormat::AutoBits);
        assert!(out.starts_with("=== 3 runs: mean ± 95% confidence interval (Student's t)\n"), "{out}");
        assert!(!out.contains("e+"), "{out}");
        assert!(out.contains("up.receiver.bits_per_second: 32.9 Gbit/s ± "), "{out}");
        assert!(out.contains("min 31.0 Gbit/s, max 35.8 Gbit/s, stddev 2.53 Gbit/s"), "{out}");
        // -f m: the test's own unit.
        let out = repeat_statistics(&tcp_runs(&[32.0e9, 31.0e9, 35.8e9]), RateFormat::Mbits);
        assert!(out.contains("bits_per_second: 32933.33 Mbit/s ± "), "{out}");
    }

    #[test]
    fn latency_is_in_microseconds_and_rates_of_things_per_second() {
        assert_eq!(figure("rr.latency_us.p99", 41.256, RateFormat::AutoBits), "41.26 µs");
        assert_eq!(figure("rr.transactions_per_second", 38749.0, RateFormat::AutoBits), "38.7 k/s");
        assert_eq!(figure("reset.time_to_ready_seconds", 2.5, RateFormat::AutoBits), "2.500 s");
        assert_eq!(repeat_statistics(&[], RateFormat::AutoBits), "");
    }
}
