//! The SQLite store: runs read back as stored, labels select them, a run stored twice is kept
//! once, an older schema migrates with its runs, and a writer killed inside its transaction
//! loses nothing already stored.

use netchar_model::TestResult;
use netchar_store::{Store, StoreUrl};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

/// The TCP result the report crate's tests use, started at second `n` with `bps` received.
fn run(n: u32, bps: f64) -> TestResult {
    let mut r: TestResult = serde_json::from_str(include_str!("../../report/tests/fixtures/tcp.json")).unwrap();
    r.started_at = format!("2026-11-23T08:{:02}:{:02}Z", n / 60, n % 60);
    r.summary.up.as_mut().unwrap().receiver.bits_per_second = bps;
    r
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn temp_store(name: &str) -> (std::path::PathBuf, StoreUrl) {
    let dir = std::env::temp_dir().join(format!("netchar-store-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let url = StoreUrl::Sqlite(dir.join("history.sqlite"));
    (dir, url)
}

#[test]
fn runs_read_back_with_their_labels_and_are_kept_once() {
    let (dir, url) = temp_store("readback");
    let mut store = Store::open(&url).unwrap();
    assert_eq!(store.schema_version().unwrap(), netchar_store::SCHEMA_VERSION);
    let a = store.record(&labels(&[("build", "1"), ("board", "rev-b")]), &run(1, 1e9)).unwrap();
    let b = store.record(&labels(&[("build", "2"), ("board", "rev-b")]), &run(2, 2e9)).unwrap();
    assert!(a.new && b.new && a.id != b.id);
    // The same result with the same labels again: the same row.
    let again = store.record(&labels(&[("build", "1"), ("board", "rev-b")]), &run(1, 1e9)).unwrap();
    assert_eq!(again, netchar_store::Recorded { id: a.id, new: false });
    assert_eq!(store.count().unwrap(), 2);
    drop(store);

    let mut store = Store::open(&url).unwrap();
    let all = store.runs(&BTreeMap::new()).unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!(all[0].labels["build"], "1");
    assert_eq!(all[1].result, run(2, 2e9), "the result reads back as it was stored");
    assert_eq!(all[0].method_hash, all[1].method_hash, "one method");
    assert_eq!(all[0].host_identity, "vm (".to_string() + &all[0].result.host.cpu_model + ", 2 CPUs)");
    let build2 = store.runs(&labels(&[("build", "2")])).unwrap();
    assert_eq!(build2.len(), 1);
    assert_eq!(build2[0].id, b.id);
    // The dashboard view: one row per run and metric.
    let bps = store.metric_rows("bps").unwrap();
    assert_eq!(bps, vec![(a.id, Some("1".into()), 1e9), (b.id, Some("2".into()), 2e9)]);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_version_1_store_migrates_with_its_runs() {
    let (dir, url) = temp_store("migrate");
    let mut old = Store::open_at_version(&url, 1).unwrap();
    assert_eq!(old.schema_version().unwrap(), 1);
    for n in 0..3 {
        old.record(&labels(&[("build", &n.to_string())]), &run(n, 1e9 + f64::from(n))).unwrap();
    }
    drop(old);
    let mut store = Store::open(&url).unwrap();
    assert_eq!(store.schema_version().unwrap(), 2);
    assert_eq!(store.count().unwrap(), 3);
    // Version 2's figures, filled in for the runs stored before it.
    let values: Vec<f64> = store.metric_rows("bps").unwrap().into_iter().map(|(_, _, v)| v).collect();
    assert_eq!(values, vec![1e9, 1e9 + 1.0, 1e9 + 2.0]);
    let builds: Vec<Option<String>> = store.metric_rows("bps").unwrap().into_iter().map(|(_, b, _)| b).collect();
    assert_eq!(builds, vec![Some("0".into()), Some("1".into()), Some("2".into())]);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_newer_schema_is_refused_in_one_line() {
    let (dir, url) = temp_store("newer");
    drop(Store::open(&url).unwrap());
    let StoreUrl::Sqlite(path) = &url else { unreachable!() };
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute("UPDATE netchar_schema SET version = 99", []).unwrap();
    drop(conn);
    let e = Store::open(&url).err().expect("a store from a newer netchar is refused").to_string();
    assert!(e.contains("version 99") && e.contains("newer netchar"), "{e}");
    let _ = std::fs::remove_dir_all(dir);
}

/// The writer of the crash test, run as a child process of this test binary: stores runs 0-4,
/// writes run 5 inside its transaction, says so on stdout and waits to be killed.
#[test]
fn crash_writer_child() {
    let Ok(path) = std::env::var("NETCHAR_STORE_CRASH_WRITER") else { return };
    let mut store = Store::open(&StoreUrl::Sqlite(path.into())).unwrap();
    for n in 0..5 {
        store.record(&labels(&[("build", &n.to_string())]), &run(n, 1e9)).unwrap();
    }
    let pending = store.begin_record(&labels(&[("build", "5")]), &run(5, 1e9)).unwrap();
    println!("in transaction");
    std::thread::sleep(std::time::Duration::from_secs(3600));
    drop(pending);
}

#[test]
fn a_writer_killed_mid_transaction_loses_nothing_stored() {
    let (dir, url) = temp_store("crash");
    let StoreUrl::Sqlite(path) = &url else { unreachable!() };
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "crash_writer_child", "--nocapture", "--test-threads=1"])
        .env("NETCHAR_STORE_CRASH_WRITER", path)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let said = lines.by_ref().map_while(Result::ok).find(|l| l.contains("in transaction"));
    assert!(said.is_some(), "the writer never reached its transaction");
    // SIGKILL: no destructor, no rollback; the database is left as a crash leaves it.
    child.kill().unwrap();
    child.wait().unwrap();
    let mut store = Store::open(&url).unwrap();
    let runs = store.runs(&BTreeMap::new()).unwrap();
    let builds: Vec<&str> = runs.iter().map(|r| r.labels["build"].as_str()).collect();
    assert_eq!(builds, ["0", "1", "2", "3", "4"], "every committed run, and nothing of the killed one");
    // The store takes writes again.
    assert!(store.record(&labels(&[("build", "5")]), &run(5, 1e9)).unwrap().new);
    assert_eq!(store.count().unwrap(), 6);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn urls_name_their_store() {
    assert_eq!(StoreUrl::parse("sqlite:/x/h.sqlite").unwrap(), StoreUrl::Sqlite("/x/h.sqlite".into()));
    assert_eq!(StoreUrl::parse("h.sqlite").unwrap(), StoreUrl::Sqlite("h.sqlite".into()));
    let pg = StoreUrl::parse("postgres://lab:secret@db/netchar").unwrap();
    assert_eq!(pg.to_string(), "postgres://lab@db/netchar", "the password is not shown");
    let e = StoreUrl::parse("mysql://db/x").unwrap_err().to_string();
    assert!(e.contains("mysql://"), "{e}");
    assert!(netchar_store::parse_label("build").is_err());
    assert!(netchar_store::parse_label("bu ild=1").is_err());
    assert_eq!(netchar_store::parse_label("build=1.4.2-37-gabc").unwrap(), ("build".into(), "1.4.2-37-gabc".into()));
}
