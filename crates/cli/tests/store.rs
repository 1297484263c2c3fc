//! `--store`, `netchar store import`, `netchar history` and `--expect-no-regression` end to
//! end: real loopback runs stored as they were measured (their `--save` files are the ground
//! truth), warm-up runs left out, imports kept once, a series of the test's own making whose
//! change point the history finds where it was put, and the gate against it.

#[path = "support/loopback.rs"]
mod common;

use common::*;
use netchar_model::TestResult;
use netchar_store::{Store, StoreUrl};
use std::collections::BTreeMap;

fn saved_runs(dir: &std::path::Path) -> Vec<TestResult> {
    let mut files: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    files.iter().map(|f| serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap()).collect()
}

fn build(n: u32) -> BTreeMap<String, String> {
    BTreeMap::from([("build".to_string(), format!("1.0.{n}"))])
}

#[test]
fn counted_runs_are_stored_as_measured_and_imported_once() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("h.sqlite");
    let save = tmp.path().join("runs");
    let server = Server::start(&[]);
    let port = server.port.to_string();
    let store_flag = format!("--store={}", db.display());
    let run = netchar(&[
        "udp",
        "127.0.0.1",
        "-p",
        &port,
        "-t",
        "0.3",
        "-b",
        "10M",
        "--repeat",
        "2",
        "--warmup",
        "1",
        "--save",
        save.to_str().unwrap(),
        &store_flag,
        "--label",
        "build=1.4.2-37-gabc",
        "--label",
        "board=rev-b",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains("stored 2 runs in"), "{}", run.stderr);
    let saved = saved_runs(&save);
    assert_eq!(saved.len(), 2);
    let mut store = Store::open(&StoreUrl::Sqlite(db.clone())).unwrap();
    let stored = store.runs(&BTreeMap::new()).unwrap();
    // The counted runs, as --save wrote them; the warm-up run is not among them.
    assert_eq!(stored.iter().map(|r| r.result.clone()).collect::<Vec<_>>(), saved);
    for r in &stored {
        assert_eq!(r.labels["build"], "1.4.2-37-gabc");
        assert_eq!(r.labels["board"], "rev-b");
        assert_eq!(r.netchar_version, env!("CARGO_PKG_VERSION"));
        assert!(r.method_json.contains("\"udp_checksum\":true"), "{}", r.method_json);
    }
    assert_eq!(stored[0].method_hash, stored[1].method_hash, "two runs of one command: one method");
    let bps = store.metric_rows("bps").unwrap();
    let expected: Vec<f64> = saved.iter().map(|r| r.summary.up.as_ref().unwrap().receiver.bits_per_second).collect();
    assert_eq!(bps.iter().map(|(_, _, v)| *v).collect::<Vec<_>>(), expected);
    drop(store);

    // The same runs imported with the same labels: kept once; into a new store: all new.
    let again = netchar(&[
        "store",
        "import",
        save.to_str().unwrap(),
        "--store",
        db.to_str().unwrap(),
        "--label",
        "build=1.4.2-37-gabc",
        "--label",
        "board=rev-b",
    ]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(
        again.stdout.contains("imported 2 runs") && again.stdout.contains("0 new, 2 stored before"),
        "{}",
        again.stdout
    );
    let other = tmp.path().join("other.sqlite");
    let first_file = std::fs::read_dir(&save).unwrap().next().unwrap().unwrap().path();
    let fresh = netchar(&[
        "store",
        "import",
        save.to_str().unwrap(),
        first_file.to_str().unwrap(),
        "--store",
        other.to_str().unwrap(),
    ]);
    assert!(
        fresh.stdout.contains("imported 3 runs") && fresh.stdout.contains("2 new, 1 stored before"),
        "{}",
        fresh.stdout
    );
}

#[test]
fn bad_store_flags_fail_in_one_line_before_any_test() {
    let tmp = tempfile::tempdir().unwrap();
    let store_flag = format!("--store={}", tmp.path().join("x.sqlite").display());
    let never = tmp.path().join("never.sqlite");
    let never_str = never.to_str().unwrap();
    for (args, says) in [
        (vec!["tcp", "127.0.0.1", "-p", "9", store_flag.as_str(), "--label", "build"], "give KEY=VALUE"),
        (vec!["tcp", "127.0.0.1", "-p", "9", "--store=mysql://db/x"], "mysql://"),
        (vec!["history", "--store", "/nonexistent/dir/h.sqlite"], "no store there yet"),
        (vec!["store", "import", "/nonexistent/file.json", "--store", never_str], "/nonexistent/file.json"),
    ] {
        let run = netchar(&args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        let lines: Vec<&str> = run.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: {}", run.stderr);
        assert!(lines[0].contains(says), "{args:?}: {}", run.stderr);
    }
    assert!(!never.exists(), "a failed import creates no store");
}

/// A real loopback result, and a history of `n` copies of it started before it, the receive
/// rate of copy i set by `value(i)`: a series whose truth the test sets.
fn history_of(db: &std::path::Path, real: &TestResult, n: u32, value: impl Fn(u32) -> f64) {
    let mut store = Store::open(&StoreUrl::Sqlite(db.to_path_buf())).unwrap();
    for i in 0..n {
        let mut r = real.clone();
        r.started_at = format!("2020-01-01T00:{:02}:{:02}Z", i / 60, i % 60);
        r.summary.up.as_mut().unwrap().receiver.bits_per_second = value(i);
        store.record(&build(i), &r).unwrap();
    }
}

#[test]
fn history_finds_the_change_and_the_gate_judges_a_new_run() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&[]);
    let port = server.port.to_string();
    let real: TestResult =
        serde_json::from_value(client_json("udp", &server, "127.0.0.1", &["-t", "0.3", "-b", "10M"])).unwrap();
    let measured = real.summary.up.as_ref().unwrap().receiver.bits_per_second;
    assert!(measured > 0.0);

    // 30 builds, a 10% drop from build 20 on, noise ±1% around each level.
    let db = tmp.path().join("series.sqlite");
    let wobble = |i: u32| 1.0 + 0.01 * [0.0, 0.7, -0.4, 1.0, -0.9, 0.3, -0.6][i as usize % 7];
    history_of(&db, &real, 30, |i| if i < 20 { 100e6 } else { 90e6 } * wobble(i));
    let h = netchar(&["history", "--store", db.to_str().unwrap(), "--metric", "bps"]);
    assert_eq!(h.code, 0, "{}", h.stderr);
    assert!(h.stdout.contains("at run 21 (build 1.0.20, 2020-01-01T00:00:20Z): -10."), "{}", h.stdout);
    assert_eq!(h.stdout.matches("  at run ").count(), 1, "one change: {}", h.stdout);
    assert!(h.stdout.contains("t test: a difference of"), "{}", h.stdout);
    let seeded = netchar(&["history", "--store", db.to_str().unwrap(), "--metric", "bps"]);
    assert_eq!(seeded.stdout, h.stdout, "one seed, one answer");

    // A series at ten times what this run measures: the new run falls far below it.
    let high = tmp.path().join("high.sqlite");
    history_of(&high, &real, 12, |i| 10.0 * measured * wobble(i));
    let gated = netchar(&[
        "udp",
        "127.0.0.1",
        "-p",
        &port,
        "-t",
        "0.3",
        "-b",
        "10M",
        &format!("--store={}", high.display()),
        "--label",
        "build=new",
        "--expect-no-regression",
    ]);
    assert_eq!(gated.code, 1, "{}", gated.stderr);
    assert!(
        gated.stderr.contains("--expect-no-regression failed") && gated.stderr.contains("compared with build 1.0.11"),
        "{}",
        gated.stderr
    );

    // A series spread from half to one and a half times it: the new run is within.
    let wide = tmp.path().join("wide.sqlite");
    history_of(&wide, &real, 12, |i| measured * [0.5, 1.5, 1.0, 0.7, 1.3][i as usize % 5]);
    let held = netchar(&[
        "udp",
        "127.0.0.1",
        "-p",
        &port,
        "-t",
        "0.3",
        "-b",
        "10M",
        &format!("--store={}", wide.display()),
        "--label",
        "build=new",
        "--expect-no-regression",
    ]);
    assert_eq!(held.code, 0, "{}", held.stderr);
    assert!(held.stderr.contains("holds against 12 stored runs"), "{}", held.stderr);
}
