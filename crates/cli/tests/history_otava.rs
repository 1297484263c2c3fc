//! netchar's change points against Apache Otava's (formerly Hunter) on the same series: runs
//! stored in a results store, exported with `netchar history --format csv`, and that file read
//! by Otava's CSV importer as it is (`otava analyze`, its default analysis: E-divisive means
//! split over windows of 50 with a Student's t test, p <= 0.001, then merged).
//!
//! The series are those of tests/history_accuracy.rs: draws of 60 runs from the UDP receive
//! rates measured on this machine (tests/history/noise-udp-paced.txt), with a 2% drop from run
//! 40 on, and the same draws without it. The truth is the drop the test put in: netchar must
//! find it and leave the plain draws alone, Otava must read every run of netchar's export (its
//! change's build is the run's), and wherever Otava finds the drop netchar does too. How often
//! Otava finds it, and the changes it reports in noise alone, are printed (docs/history.md,
//! "Apache Otava"). `NETCHAR_OTAVA_DRAWS=100` runs the 100 draws the docs' figures come from;
//! `NETCHAR_OTAVA=PATH` names the otava program (default: `otava` on the PATH).

#[path = "support/noise_draws.rs"]
mod noise_draws;
#[path = "support/require.rs"]
mod require;

use assert_cmd::Command;
use netchar_model::TestResult;
use netchar_store::{Store, StoreUrl};
use noise_draws::{measured_noise, series};
use std::collections::BTreeMap;
use std::path::Path;

/// The change points (run indices from 0) the CSV export marks, and its row count.
fn netchar_changes(csv: &str) -> (Vec<usize>, usize) {
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    let changes = rows.iter().enumerate().filter(|(_, r)| r.ends_with(",1")).map(|(i, _)| i).collect();
    (changes, rows.len())
}

/// Otava's changes per test from `--output json` (one object a line): (index, build).
fn otava_changes(json: &str) -> BTreeMap<String, Vec<(usize, String)>> {
    let mut out = BTreeMap::new();
    for line in json.lines().filter(|l| l.trim_start().starts_with('{')) {
        let doc: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        for (test, points) in doc.as_object().unwrap() {
            let mut found = Vec::new();
            for point in points.as_array().unwrap() {
                let build = point["attributes"]["build"].as_str().unwrap_or("").to_string();
                for change in point["changes"].as_array().unwrap() {
                    found.push((change["index"].as_u64().unwrap() as usize, build.clone()));
                }
            }
            out.insert(test.clone(), found);
        }
    }
    out
}

fn near_40(points: &[usize]) -> bool {
    points.iter().any(|i| i.abs_diff(40) <= 1)
}

#[test]
fn otava_reads_the_csv_export_and_finds_no_change_that_netchar_misses() {
    let otava = std::env::var("NETCHAR_OTAVA").unwrap_or_else(|_| "otava".into());
    if !require::tool("the comparison with Apache Otava", &otava, &["--help"], "pip install apache-otava") {
        return;
    }
    let draws: u64 = std::env::var("NETCHAR_OTAVA_DRAWS").ok().and_then(|d| d.parse().ok()).unwrap_or(10);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let sample = measured_noise();
    // A real UDP result carries each run: the figure is the only thing the test changes.
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../report/tests/fixtures/udp.json");
    let real: TestResult = serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    let db = dir.join("history.sqlite");
    let mut store = Store::open(&StoreUrl::Sqlite(db.clone())).unwrap();
    let mut config = String::from("tests:\n");
    let mut names = Vec::new();
    for draw in 0..draws {
        for (step, stepped) in [(0.02, "drop"), (0.0, "plain")] {
            let values = series(&sample, draw, step);
            for (i, v) in values.iter().enumerate() {
                let mut r = real.clone();
                r.started_at = format!("2020-01-{:02}T{:02}:{:02}:00Z", draw % 28 + 1, i / 60, i % 60);
                r.summary.up.as_mut().unwrap().receiver.bits_per_second = *v;
                let labels = BTreeMap::from([
                    ("build".to_string(), format!("1.0.{i}")),
                    ("draw".to_string(), draw.to_string()),
                    ("series".to_string(), stepped.to_string()),
                ]);
                store.record(&labels, &r).unwrap();
            }
            let name = format!("{stepped}-{draw}");
            config.push_str(&format!(
                "  {name}:\n    type: csv\n    file: {}\n    time_column: time\n    attributes: [build]\n    metrics: [value]\n",
                dir.join(format!("{name}.csv")).display()
            ));
            names.push(name);
        }
    }
    drop(store);
    // netchar's analysis and its export: one `netchar history --format csv` per series.
    let mut ours = BTreeMap::new();
    for name in &names {
        let (stepped, draw) = name.split_once('-').unwrap();
        let file = dir.join(format!("{name}.csv"));
        Command::cargo_bin("netchar")
            .unwrap()
            .args(["history", "--store", db.to_str().unwrap(), "--metric", "bps", "--format", "csv", "-o"])
            .arg(&file)
            .args(["--label", &format!("draw={draw}"), "--label", &format!("series={stepped}")])
            .assert()
            .success();
        let (changes, rows) = netchar_changes(&std::fs::read_to_string(&file).unwrap());
        assert_eq!(rows, 60, "{name}: one row per run");
        ours.insert(name.clone(), changes);
    }
    let config_file = dir.join("otava.yaml");
    std::fs::write(&config_file, config).unwrap();
    let out = std::process::Command::new(&otava)
        .args(["analyze", "--config-file"])
        .arg(&config_file)
        // Otava reads the last year by default; the runs are of 2020.
        .args(["--since", "2000-01-01", "--output", "json"])
        .args(&names)
        .output()
        .unwrap();
    assert!(out.status.success(), "otava failed: {}", String::from_utf8_lossy(&out.stderr));
    let theirs = otava_changes(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(theirs.len(), names.len(), "Otava analysed every series: {theirs:?}");

    let (mut ours_found, mut theirs_found, mut both_found, mut ours_quiet, mut theirs_quiet) = (0, 0, 0, 0, 0);
    for name in &names {
        let mine = &ours[name];
        let other: Vec<usize> = theirs[name].iter().map(|(i, _)| *i).collect();
        // Otava read the export as it is: a change's build is the run's at its index.
        for (index, build) in &theirs[name] {
            assert_eq!(build, &format!("1.0.{index}"), "{name}");
        }
        if name.starts_with("drop") {
            ours_found += usize::from(near_40(mine));
            theirs_found += usize::from(near_40(&other));
            both_found += usize::from(near_40(mine) && near_40(&other));
            assert!(
                !near_40(&other) || near_40(mine),
                "{name}: Otava finds the drop at {other:?}, netchar at {mine:?}"
            );
        } else {
            ours_quiet += usize::from(mine.is_empty());
            theirs_quiet += usize::from(other.is_empty());
        }
        eprintln!("{name}: netchar {mine:?}, otava {other:?}");
    }
    let n = draws as usize;
    eprintln!(
        "2% drop at 40±1: netchar {ours_found}/{n}, otava {theirs_found}/{n}, both {both_found}/{n}; \
         no drop, no change: netchar {ours_quiet}/{n}, otava {theirs_quiet}/{n}"
    );
    // The truth the test put in: netchar's own bar (tests/history_accuracy.rs) on these draws.
    assert!(ours_found * 100 >= 95 * n, "netchar found the drop in {ours_found} of {n}");
    assert!(ours_quiet * 100 >= 90 * n, "netchar left {ours_quiet} of {n} plain draws alone");
}
