//! `netchar history`'s formats over a store the test fills from saved results: the CSV has a
//! row per run of every series with its series' number, and a bad `--format` or an `-o` that
//! cannot be written fails in one line, writing nothing.

use assert_cmd::Command;
use netchar_model::TestResult;
use netchar_store::{Store, StoreUrl};
use std::path::Path;

fn saved(name: &str) -> TestResult {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../report/tests/fixtures").join(name);
    serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap()
}

/// 5 builds of a UDP result at 20, 21, ... Mbit/s and 3 of a TCP one: two series.
fn store(dir: &Path) -> std::path::PathBuf {
    let db = dir.join("h.sqlite");
    let mut store = Store::open(&StoreUrl::Sqlite(db.clone())).unwrap();
    for (name, runs) in [("udp.json", 5u32), ("tcp.json", 3)] {
        let real = saved(name);
        for i in 0..runs {
            let mut r = real.clone();
            r.started_at = format!("2020-01-01T00:00:{i:02}Z");
            r.summary.up.as_mut().unwrap().receiver.bits_per_second = 20e6 + 1e6 * f64::from(i);
            store.record(&[("build".to_string(), format!("b{i}"))].into(), &r).unwrap();
        }
    }
    db
}

fn history(db: &Path, extra: &[&str]) -> std::process::Output {
    Command::cargo_bin("netchar")
        .unwrap()
        .args(["history", "--store", db.to_str().unwrap(), "--metric", "bps"])
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn csv_has_a_row_per_run_of_each_series() {
    let tmp = tempfile::tempdir().unwrap();
    let db = store(tmp.path());
    let out = history(&db, &["--format", "csv"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "series,run,time,build,figure,value,change_point");
    assert_eq!(lines.len(), 1 + 5 + 3, "{text}");
    // The fifth UDP run as stored: its build, time and figure in full.
    let fifth = ",5,2020-01-01T00:00:04Z,b4,up.receiver.bits_per_second,24000000,0";
    assert_eq!(lines.iter().filter(|l| l.ends_with(fifth)).count(), 1, "{text}");
    let per_series = |n: &str| lines[1..].iter().filter(|l| l.starts_with(&format!("{n},"))).count();
    let mut counts = [per_series("1"), per_series("2")];
    counts.sort();
    assert_eq!(counts, [3, 5]);
}

#[test]
fn a_bad_format_or_output_fails_in_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let db = store(tmp.path());
    let out = history(&db, &["--format", "svg"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end(), "netchar: error: --format svg: one of text, html, csv");
    assert!(out.stdout.is_empty());

    let missing = tmp.path().join("no-such-dir").join("trend.html");
    let out = history(&db, &["--format", "html", "-o", missing.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("-o: cannot write"), "{err}");
    assert!(!missing.exists());
}
