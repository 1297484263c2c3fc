//! A plan run with `--store` keeps each test's runs under the plan's keys as labels: the
//! plan's file (`plan`), the entry's name (`test`), each loop's value by its field, and the
//! entry's `labels`, with the command line's `--label`s over them; `netchar history` then
//! selects one test of the plan by those labels, and `--expect-no-regression` judges each
//! test of the plan against its own series. Real loopback runs; the truth is the plan the test
//! wrote and the results the plan printed (`--json`).

#[path = "support/loopback.rs"]
mod common;

use common::*;
use netchar_store::{Store, StoreUrl};
use std::collections::BTreeMap;

const PLAN: &str = r#"
[defaults]
duration = 0.3
interval = 0
labels = { board = "rev-b" }

[[test]]
name = "tcp streams"
kind = "tcp"
streams = [1, 2]

[[test]]
name = "paced udp"
kind = "udp"
rate = "10M"
labels = { board = "rev-b", lane = "fast" }
"#;

fn pairs(labels: &BTreeMap<String, String>) -> Vec<String> {
    labels.iter().map(|(k, v)| format!("{k}={v}")).collect()
}

#[test]
fn a_plan_stores_its_runs_under_its_keys_and_gates_each_test_on_its_own_series() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = tmp.path().join("nightly.toml");
    std::fs::write(&plan, PLAN).unwrap();
    let db = tmp.path().join("h.sqlite");
    let server = Server::start(&[]);
    let host = format!("127.0.0.1:{}", server.port);
    let store_flag = format!("--store={}", db.display());
    let plan_arg = plan.to_str().unwrap();

    let run = netchar(&["run", plan_arg, &host, "--json", &store_flag, "--label", "build=1.0.1"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let printed: Vec<serde_json::Value> = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(printed.len(), 3, "two tcp tests and a udp one");
    assert!(run.stderr.contains("stored 3 runs"), "{}", run.stderr);

    let mut store = Store::open(&StoreUrl::Sqlite(db.clone())).unwrap();
    let stored = store.runs(&BTreeMap::new()).unwrap();
    assert_eq!(stored.len(), 3);
    let mut labels: Vec<Vec<String>> = stored.iter().map(|r| pairs(&r.labels)).collect();
    labels.sort();
    assert_eq!(
        labels,
        [
            vec!["board=rev-b", "build=1.0.1", "lane=fast", "plan=nightly", "test=paced udp"],
            vec!["board=rev-b", "build=1.0.1", "plan=nightly", "streams=1", "test=tcp streams"],
            vec!["board=rev-b", "build=1.0.1", "plan=nightly", "streams=2", "test=tcp streams"],
        ]
    );
    // Each stored run is the result the plan printed: the two-stream test's has two streams.
    let two = stored.iter().find(|r| r.labels.get("streams").map(String::as_str) == Some("2")).unwrap();
    assert_eq!(two.result.method().streams, 2);
    let two = serde_json::to_value(&two.result).unwrap();
    assert!(printed.contains(&two), "the stored run is one the plan printed");

    // The command line's labels win over the plan's; history selects one test by its keys.
    let again = netchar(&["run", plan_arg, &host, &store_flag, "--label", "build=1.0.2", "--label", "board=rev-c"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    let rev_c = store.runs(&BTreeMap::from([("board".to_string(), "rev-c".to_string())])).unwrap();
    assert_eq!(rev_c.len(), 3);
    let h = netchar(&[
        "history",
        "--store",
        db.to_str().unwrap(),
        "--label",
        "test=tcp streams",
        "--label",
        "streams=2",
        "--format",
        "csv",
    ]);
    assert_eq!(h.code, 0, "{}", h.stderr);
    let rows: Vec<&str> = h.stdout.lines().skip(1).collect();
    assert_eq!(rows.len(), 2, "the two-stream test of both builds: {}", h.stdout);
    assert!(rows[0].contains(",1.0.1,") && rows[1].contains(",1.0.2,"), "{}", h.stdout);

    // The gate looks up each test's series by its own labels: three series, each with runs
    // before the new ones (board rev-c is one build old), each judged.
    let gated = netchar(&[
        "run",
        plan_arg,
        &host,
        &store_flag,
        "--label",
        "build=1.0.3",
        "--label",
        "board=rev-c",
        "--expect-no-regression",
    ]);
    // One run before each (board rev-c has one build): each test's gate holds against it.
    assert_eq!(gated.code, 0, "{}", gated.stderr);
    assert_eq!(gated.stderr.matches("--expect-no-regression: ").count(), 3, "{}", gated.stderr);
    assert_eq!(gated.stderr.matches("holds against 1 stored runs").count(), 3, "{}", gated.stderr);
}

#[test]
fn a_bad_label_in_a_plan_fails_before_any_test() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = tmp.path().join("bad.toml");
    std::fs::write(&plan, "[[test]]\nkind = \"tcp\"\nlabels = { \"a b\" = \"x\" }\n").unwrap();
    // No server: a plan that got as far as a test would fail to connect instead.
    let db = tmp.path().join("x.sqlite");
    let run = netchar(&["run", plan.to_str().unwrap(), "127.0.0.1:9", &format!("--store={}", db.display())]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("bad.toml:3: test 1: labels: --label a b=x: the key must be letters"),
        "{}",
        run.stderr
    );
    assert!(!db.exists(), "nothing stored");
}
