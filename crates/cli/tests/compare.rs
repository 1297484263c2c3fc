//! `netchar compare` against FreeBSD's ministat (Debian package `ministat`) on the same data:
//! every number it prints must agree to the printed precision. And `--repeat`, `--save`,
//! `--expect` and `--baseline` end to end.

#[path = "support/loopback.rs"]
mod common;
#[path = "support/require.rs"]
mod require;

use common::*;
use std::process::Command;

/// The lines of a ministat-style report that carry numbers (the plot and legend excluded).
fn numeric_lines(report: &str) -> Vec<String> {
    report
        .lines()
        .filter(|l| !l.starts_with('|') && !l.starts_with('+') && !l.starts_with("x ") || l.starts_with("x  "))
        .filter(|l| !l.contains(".txt") && !l.trim().is_empty())
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// ministat's report of measured `sets` with its variances as netchar computes them. ministat
/// takes a variance in one pass, (Σx² − (Σx)²/n)/(n − 1), summing in the file's order; when the
/// spread is small against the values (2000 ± 0.4 datagrams/s) that loses the last digits, and
/// its 8-digit stddev can end one unit off the exact one (0.41726985 against 0.41726984),
/// which netchar's two passes print. Each figure that rests on a variance (the stddevs, the
/// pooled s, the interval and its percentage), and the mean (summed in another order), is
/// recomputed here both ways: ministat must have printed the one-pass figure, which is then
/// replaced by the two-pass one; every other digit is compared as ministat printed it.
fn as_two_pass(theirs: &str, sets: &[&[f64]], confidence: f64) -> String {
    use netchar_stats::compare::{compare, format_g, SetStats, Verdict};
    let one_pass = |v: &[f64]| {
        let n = v.len() as f64;
        let (sy, syy) = v.iter().fold((0.0, 0.0), |(a, b), x| (a + x, b + x * x));
        SetStats { mean: sy / n, stddev: ((syy - sy * sy / n) / (n - 1.0)).sqrt(), ..SetStats::of(v).unwrap() }
    };
    let mut text = theirs.to_string();
    let mut swap = |printed: String, exact: String| {
        if printed != exact {
            assert!(text.contains(&printed), "ministat's one-pass figure {printed} is not in its report:\n{theirs}");
            text = text.replacen(&printed, &exact, 1);
        }
    };
    let (m, x): (Vec<SetStats>, Vec<SetStats>) = sets.iter().map(|v| (one_pass(v), SetStats::of(v).unwrap())).unzip();
    // The end of each set's line: its mean (ministat sums in the file's order, netchar in
    // sorted order) and its stddev, 13 columns each.
    let tail = |s: &SetStats| format!(" {:>13} {:>13}\n", format_g(s.mean, 8), format_g(s.stddev, 8));
    for (m, x) in m.iter().zip(&x) {
        swap(tail(m), tail(x));
    }
    if let (
        Verdict::Difference { interval: mi, percent_interval: mp, pooled_s: Some(ms), .. },
        Verdict::Difference { interval: xi, percent_interval: xp, pooled_s: Some(xs), .. },
    ) = (compare(&m[0], &m[1], confidence, false), compare(&x[0], &x[1], confidence, false))
    {
        swap(format!("+/- {}\n", format_g(mi, 6)), format!("+/- {}\n", format_g(xi, 6)));
        swap(format!("+/- {}%", format_g(mp, 6)), format!("+/- {}%", format_g(xp, 6)));
        swap(format!("pooled s = {})", format_g(ms, 6)), format!("pooled s = {})", format_g(xs, 6)));
    }
    text
}

fn write(dir: &std::path::Path, name: &str, values: &[f64]) -> String {
    let p = dir.join(name);
    std::fs::write(&p, values.iter().map(|v| format!("{v}\n")).collect::<String>()).unwrap();
    p.to_str().unwrap().to_string()
}

#[test]
fn numbers_agree_with_ministat() {
    if !require::tool("numbers_agree_with_ministat", "ministat", &["-h"], "apt-get install ministat") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("netchar-compare-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cases: Vec<(Vec<f64>, Vec<f64>, &str)> = vec![
        // equal sets
        (vec![5.0, 5.1, 4.9, 5.0, 5.2], vec![5.0, 5.1, 4.9, 5.0, 5.2], "95"),
        // clearly different, different spreads
        (vec![100.0, 102.0, 98.0, 101.0, 99.5, 100.5], vec![110.0, 111.5, 108.0, 112.0, 109.0], "95"),
        // tiny N (ministat's minimum is 3)
        (vec![1.0, 2.0, 4.0], vec![3.0, 5.0, 9.0], "80"),
        // large values, 99% confidence, many points
        (
            (0..40).map(|i| 2.0e10 + (i * 7919 % 97) as f64 * 1e7).collect(),
            (0..35).map(|i| 2.03e10 + (i * 104729 % 89) as f64 * 1e7).collect(),
            "99",
        ),
        // a small spread on large values: ministat's one-pass variance ends its stddev one unit
        // off in the 8th digit (0.12756846 against 0.12756845, see as_two_pass)
        (vec![2000.2551, 2000.4954, 2000.4495], vec![2000.9, 2001.3, 2001.1], "95"),
        // small fractions, 99.5%
        (vec![0.0012, 0.0013, 0.0011, 0.0012], vec![0.0019, 0.0021, 0.002, 0.0022], "99.5"),
    ];
    for (i, (a, b, conf)) in cases.iter().enumerate() {
        let fa = write(&dir, &format!("a{i}.txt"), a);
        let fb = write(&dir, &format!("b{i}.txt"), b);
        let ours = netchar(&["compare", "-c", conf, &fa, &fb]);
        assert_eq!(ours.code, 0, "{}", ours.stderr);
        let theirs = Command::new("ministat").args(["-c", conf, &fa, &fb]).output().unwrap();
        let theirs = as_two_pass(&String::from_utf8_lossy(&theirs.stdout), &[a, b], conf.parse().unwrap());
        let (o, t) = (numeric_lines(&ours.stdout), numeric_lines(&theirs));
        if *conf == "99.5" {
            // ministat's 99.5 column is a hand-rounded table (4.499 where t(0.999, 8) is 4.501):
            // the statistics agree exactly, the interval within 0.1%.
            assert_eq!(o.len(), t.len(), "case {i}\nours:\n{}\nministat:\n{theirs}", ours.stdout);
            for (a, b) in o.iter().zip(&t) {
                let nums = |s: &str| s.split([' ', '%']).filter_map(|w| w.parse::<f64>().ok()).collect::<Vec<_>>();
                for (x, y) in nums(a).iter().zip(nums(b)) {
                    assert!((x - y).abs() <= 1e-3 * y.abs(), "case {i}: {a} vs {b}");
                }
            }
        } else {
            assert_eq!(o, t, "case {i}\nours:\n{}\nministat:\n{theirs}", ours.stdout);
        }
    }
    // Too few values: both refuse.
    let fa = write(&dir, "two.txt", &[1.0, 2.0]);
    let ours = netchar(&["compare", &fa, &fa]);
    assert_eq!(ours.code, 2, "{}", ours.stdout);
    assert!(ours.stderr.contains("at least 3"), "{}", ours.stderr);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn repeat_save_compare_and_gates_work_end_to_end() {
    let s = Server::start(&[]);
    let port = s.port.to_string();
    let dir = std::env::temp_dir().join(format!("netchar-save-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let run = netchar(&[
        "tcp",
        "127.0.0.1",
        "-p",
        &port,
        "-n",
        "20M",
        "-i",
        "0",
        "--repeat",
        "3",
        "--warmup",
        "1",
        "--save",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("=== 3 runs: mean ± 95% confidence interval"), "{}", run.stdout);
    let files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 3, "{files:?}");
    // A second series as one JSON array; compare takes the saved directory and the array as
    // two sets of runs (the headline figure by default).
    let series = netchar(&["tcp", "127.0.0.1", "-p", &port, "-n", "20M", "-i", "0", "--repeat", "3", "--json"]);
    assert_eq!(series.code, 0, "{}", series.stderr);
    let runs: serde_json::Value = serde_json::from_str(&series.stdout).unwrap();
    assert_eq!(runs.as_array().unwrap().len(), 3);
    let array_file = std::env::temp_dir().join(format!("netchar-series-{}.json", std::process::id()));
    std::fs::write(&array_file, &series.stdout).unwrap();
    let cmp = netchar(&["compare", dir.to_str().unwrap(), array_file.to_str().unwrap()]);
    assert_eq!(cmp.code, 0, "{}", cmp.stderr);
    assert!(cmp.stdout.contains("    N           Min"), "{}", cmp.stdout);
    assert!(cmp.stdout.contains("x   3 ") && cmp.stdout.contains("+   3 "), "{}", cmp.stdout);
    let _ = std::fs::remove_file(array_file);
    // Gates: one met, one missed (exit 1 and one line per miss with the measured value).
    let ok = netchar(&[
        "tcp",
        "127.0.0.1",
        "-p",
        &port,
        "-n",
        "10M",
        "-i",
        "0",
        "--expect",
        "up.receiver.bits_per_second >= 1M",
    ]);
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    let miss = netchar(&[
        "tcp",
        "127.0.0.1",
        "-p",
        &port,
        "-n",
        "10M",
        "-i",
        "0",
        "--expect",
        "up.receiver.bits_per_second >= 1T",
        "--expect",
        "up.sender.retransmits <= 1000000",
    ]);
    assert_eq!(miss.code, 1, "{}", miss.stderr);
    assert_eq!(miss.stderr.lines().filter(|l| l.contains("expectation not met")).count(), 1, "{}", miss.stderr);
    assert!(miss.stderr.contains("(measured "), "{}", miss.stderr);
    // A baseline 1000x faster than anything loopback does: a regression beyond 5%.
    let base = dir.join("fast.json");
    let mut fast = runs[0].clone();
    fast["summary"]["up"]["receiver"]["bits_per_second"] = serde_json::json!(1e15);
    std::fs::write(&base, fast.to_string()).unwrap();
    let reg = netchar(&[
        "tcp",
        "127.0.0.1",
        "-p",
        &port,
        "-n",
        "10M",
        "-i",
        "0",
        "--baseline",
        base.to_str().unwrap(),
        "--max-regression",
        "5%",
    ]);
    assert_eq!(reg.code, 1, "{}", reg.stderr);
    assert!(reg.stderr.contains("regression beyond 5%"), "{}", reg.stderr);
    let bad = netchar(&["tcp", "127.0.0.1", "-p", &port, "--expect", "fast"]);
    assert_eq!(bad.code, 2);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn pps_figures_agree_with_ministat() {
    if !require::tool("pps_figures_agree_with_ministat", "ministat", &["-h"], "apt-get install ministat") {
        return;
    }
    let s = Server::start(&[]);
    let port = s.port.to_string();
    let dir = std::env::temp_dir().join(format!("netchar-pps-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Two series of three UDP runs at different datagram rates, each kept as one JSON array.
    let mut sets = Vec::new();
    for (name, pps) in [("slow", "2000"), ("fast", "3000")] {
        let args = ["udp", "127.0.0.1", "-p", &port, "-t", "0.5", "-i", "0", "--pps", pps, "-l", "100"];
        let series = netchar(&[&args[..], &["--repeat", "3", "--json"]].concat());
        assert_eq!(series.code, 0, "{}", series.stderr);
        let runs: serde_json::Value = serde_json::from_str(&series.stdout).unwrap();
        // The figure compared: the receiver's datagrams per second, as the summary has it.
        let values: Vec<f64> = runs
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let up = &r["summary"]["up"];
                let pps = up["receiver"]["packets_per_second"].as_f64().expect("packets_per_second");
                let expected =
                    up["receiver"]["packets"].as_f64().unwrap() / up["receiver"]["seconds"].as_f64().unwrap();
                assert!((pps - expected).abs() <= 1e-9 * expected, "{pps} vs {expected}");
                assert!(up["sender"]["packets_per_second"].as_f64().is_some(), "{up}");
                pps
            })
            .collect();
        let json = dir.join(format!("{name}.json"));
        std::fs::write(&json, &series.stdout).unwrap();
        sets.push((json, write(&dir, &format!("{name}.txt"), &values), values));
    }
    let (a, b) = (sets[0].0.to_str().unwrap(), sets[1].0.to_str().unwrap());
    let ours = netchar(&["compare", "--metric", "pps", a, b]);
    assert_eq!(ours.code, 0, "{}", ours.stderr);
    let theirs = Command::new("ministat").args([&sets[0].1, &sets[1].1]).output().unwrap();
    let theirs = as_two_pass(&String::from_utf8_lossy(&theirs.stdout), &[&sets[0].2, &sets[1].2], 95.0);
    let numeric = |report: &str| numeric_lines(report).into_iter().filter(|l| !l.contains(".json")).collect::<Vec<_>>();
    assert_eq!(numeric(&ours.stdout), numeric(&theirs), "ours:\n{}\nministat:\n{theirs}", ours.stdout);
    assert!(ours.stdout.contains("Difference at 95.0% confidence"), "{}", ours.stdout);
    // The path says the same; an unknown name lists the names.
    let by_path = netchar(&["compare", "--metric", "up.receiver.packets_per_second", a, b]);
    assert_eq!(by_path.stdout, ours.stdout);
    let bad = netchar(&["compare", "--metric", "ppps", a, b]);
    assert_eq!(bad.code, 2, "{}", bad.stdout);
    assert!(bad.stderr.contains("pps, tx-bps, tx-pps"), "{}", bad.stderr);
    let _ = std::fs::remove_dir_all(dir);
}

/// The saved runs of `dir`, as JSON.
fn saved_runs(dir: &std::path::Path) -> Vec<serde_json::Value> {
    let mut paths: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    paths.sort();
    paths.iter().map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()).collect()
}

/// The seeds' checksum experiment with a receiver: UDP checksums off also turn GSO off, so
/// comparing it with a default run compares two send methods. `compare` and `--baseline`
/// refuse it naming the fields, and take the like-for-like pair (`--no-gso` both sides) with
/// the checksum named as the difference set out to compare.
#[test]
fn a_comparison_of_two_send_methods_is_refused_until_both_sides_send_alike() {
    let s = Server::start(&[]);
    let port = s.port.to_string();
    let root = std::env::temp_dir().join(format!("netchar-method-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let dir = |n: &str| root.join(n).to_str().unwrap().to_string();
    let udp = |save: &str, extra: &[&str]| {
        let args = ["udp", "127.0.0.1", "-p", &port, "-b", "0", "-l", "64", "-t", "0.4", "-i", "0", "--repeat", "3"];
        let run = netchar(&[&args[..], extra, &["--save", &dir(save)]].concat());
        assert_eq!(run.code, 0, "{}", run.stderr);
        run
    };
    let b_run = udp("B", &["--no-udp-checksum"]);
    assert!(
        b_run
            .stdout
            .contains("UDP checksums off, so no GSO (the kernel refuses it without them; compare with a --no-gso run)"),
        "{}",
        b_run.stdout
    );
    udp("A", &[]);
    udp("C", &["--no-gso"]);
    // What each run recorded is what its senders counted: GSO as the sender ended, and the
    // datagrams per send call from the raw packet and send-call counts of its stream records.
    for (set, gso, checksum) in [("A", true, true), ("B", false, false), ("C", false, true)] {
        for run in saved_runs(&root.join(set)) {
            let m = &run["method"];
            let senders: Vec<&serde_json::Value> =
                run["streams"].as_array().unwrap().iter().filter(|s| s["role"] == "sender").collect();
            let packets: u64 = senders.iter().map(|s| u(&s["udp_sent"]["packets"])).sum();
            let sends: u64 = senders.iter().map(|s| u(&s["udp_sent"]["sends"])).sum();
            assert!(packets > 0 && sends > 0, "{set}: {run}");
            assert_eq!(f(&m["datagrams_per_send"]), packets as f64 / sends as f64, "{set}");
            assert_eq!((m["gso"].as_bool(), m["udp_checksum"].as_bool()), (Some(gso), Some(checksum)), "{set}: {m}");
            assert!(senders.iter().all(|s| s["udp_sent"]["gso"] == gso), "{set}");
            if gso {
                // One call carried many datagrams: GSO's super-datagrams.
                assert!(packets > 2 * sends, "{set}: {packets} datagrams in {sends} calls");
            }
        }
    }
    let refused = netchar(&["compare", "--metric", "pps", &dir("A"), &dir("B")]);
    assert_eq!(refused.code, 2, "{}", refused.stdout);
    assert_eq!(refused.stderr.lines().count(), 1, "{}", refused.stderr);
    assert!(refused.stdout.is_empty(), "{}", refused.stdout);
    for part in [
        &format!("{} sent differently from {}: udp_checksum: on vs off; gso: on vs off", dir("B"), dir("A")),
        "its like-for-like reference is a run with --no-gso",
        "--accept-difference udp_checksum,gso",
    ] {
        assert!(refused.stderr.contains(part), "{part} not in {}", refused.stderr);
    }
    // Like for like: without GSO on both sides, the checksum is the one difference, named.
    let same = netchar(&["compare", "--metric", "pps", &dir("C"), &dir("B"), "--accept-difference", "udp_checksum"]);
    assert_eq!(same.code, 0, "{}", same.stderr);
    assert!(same.stderr.contains("note: the sets differ in udp_checksum: on vs off, as accepted"), "{}", same.stderr);
    assert!(same.stdout.contains("x   3 ") && same.stdout.contains("+   3 "), "{}", same.stdout);
    let unnamed = netchar(&["compare", "--metric", "pps", &dir("C"), &dir("B")]);
    assert_eq!(unnamed.code, 2, "{}", unnamed.stderr);
    assert!(unnamed.stderr.contains("udp_checksum: on vs off. Make both sides the same"), "{}", unnamed.stderr);
    // --baseline holds the method too: the run is reported and saved, then refused with exit 2.
    let base = saved_runs(&root.join("A")).remove(0);
    let base_file = root.join("baseline.json");
    std::fs::write(&base_file, base.to_string()).unwrap();
    let gate = |extra: &[&str]| {
        let args =
            ["udp", "127.0.0.1", "-p", &port, "-b", "0", "-l", "64", "-t", "0.4", "-i", "0", "--no-udp-checksum"];
        let more = ["--baseline", base_file.to_str().unwrap(), "--max-regression", "99.9%", "--json"];
        netchar(&[&args[..], &more[..], extra].concat())
    };
    let refused = gate(&[]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    let reported: serde_json::Value = serde_json::from_str(&refused.stdout).unwrap();
    assert!(u(&reported["summary"]["up"]["receiver"]["packets"]) > 0, "{reported}");
    assert!(
        refused.stderr.contains(&format!(
            "this run sent differently from --baseline {}: udp_checksum: on vs off; gso: on vs off",
            base_file.display()
        )),
        "{}",
        refused.stderr
    );
    let accepted = gate(&["--accept-difference", "udp_checksum,gso,datagrams_per_send"]);
    assert_eq!(accepted.code, 0, "{}", accepted.stderr);
    let bad = gate(&["--accept-difference", "checksum"]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(bad.stderr.contains("--accept-difference checksum: not a field of a run's method"), "{}", bad.stderr);
    let _ = std::fs::remove_dir_all(root);
}
