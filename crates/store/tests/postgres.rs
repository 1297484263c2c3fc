//! The PostgreSQL store on a server this test starts: Debian's `postgresql` binaries
//! (/usr/lib/postgresql/*/bin), a cluster in a temporary directory owned by the `postgres`
//! user, reached over a Unix socket only. Eight writers at once, a hundred runs each, while
//! they all open (and so migrate) the store at the same moment: no row lost, none duplicated;
//! the dashboard view gives one row per run and metric.

use netchar_model::TestResult;
use netchar_store::{Store, StoreUrl};
use netchar_testkit::require;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A PostgreSQL cluster of the test's own, stopped on drop.
struct Cluster {
    dir: PathBuf,
    bin: PathBuf,
    port: u16,
}

impl Cluster {
    /// Starts one, or says why it cannot (through `require`) and gives None.
    fn start(what: &str, n: u16) -> Option<Self> {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .ok()
            .and_then(|d| d.filter_map(|e| e.ok().map(|e| e.path().join("bin"))).find(|b| b.join("initdb").exists()));
        let Some(bin) = bin else {
            require::unavailable(what, "no /usr/lib/postgresql/*/bin/initdb; apt-get install postgresql");
            return None;
        };
        if !is_root() {
            require::unavailable(what, "starting a PostgreSQL cluster as the postgres user needs root");
            return None;
        }
        let dir = std::env::temp_dir().join(format!("netchar-pg-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let status = Command::new("chown").args(["postgres:postgres"]).arg(&dir).status().unwrap();
        assert!(status.success(), "chown postgres {}", dir.display());
        // A port of this process's and this test's own: two test runs at once do not meet.
        let port = 20000 + (std::process::id() % 10000) as u16 * 2 + n;
        let as_postgres = |program: &Path, args: &[&str]| {
            let out = Command::new("runuser").args(["-u", "postgres", "--"]).arg(program).args(args).output().unwrap();
            assert!(out.status.success(), "{} {args:?}: {}", program.display(), String::from_utf8_lossy(&out.stderr));
        };
        let data = dir.join("data");
        as_postgres(
            &bin.join("initdb"),
            &["-D", data.to_str().unwrap(), "-U", "postgres", "--auth=trust", "-E", "UTF8"],
        );
        let options = format!("-k {} -c listen_addresses='' -p {port}", dir.display());
        let cluster = Self { dir: dir.clone(), bin: bin.clone(), port };
        as_postgres(
            &bin.join("pg_ctl"),
            &["-D", data.to_str().unwrap(), "-o", &options, "-l", dir.join("log").to_str().unwrap(), "-w", "start"],
        );
        Some(cluster)
    }

    fn url(&self) -> StoreUrl {
        let socket_dir = self.dir.display().to_string().replace('/', "%2F");
        StoreUrl::Postgres(format!("postgres://postgres@{socket_dir}:{}/postgres", self.port))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(self.bin.join("pg_ctl"))
            .args(["-D", self.dir.join("data").to_str().unwrap(), "-m", "immediate", "stop"])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn run(n: u32, bps: f64) -> TestResult {
    let mut r: TestResult = serde_json::from_str(include_str!("../../report/tests/fixtures/tcp.json")).unwrap();
    r.started_at = format!("2026-11-23T{:02}:{:02}:{:02}Z", n / 3600, n / 60 % 60, n % 60);
    r.summary.up.as_mut().unwrap().receiver.bits_per_second = bps;
    r
}

#[test]
fn eight_writers_lose_and_duplicate_no_run() {
    let Some(cluster) = Cluster::start("the PostgreSQL store test", 0) else { return };
    let url = cluster.url();
    const WRITERS: u32 = 8;
    const RUNS: u32 = 100;
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(WRITERS as usize));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (url, barrier) = (url.clone(), barrier.clone());
            std::thread::spawn(move || {
                // All open at once: the first migrates, the others wait for it.
                barrier.wait();
                let mut store = Store::open(&url).unwrap();
                let mut ids = Vec::new();
                for i in 0..RUNS {
                    let labels =
                        BTreeMap::from([("writer".to_string(), w.to_string()), ("seq".to_string(), i.to_string())]);
                    let r = store.record(&labels, &run(w * RUNS + i, f64::from(w * RUNS + i))).unwrap();
                    assert!(r.new);
                    ids.push(r.id);
                }
                ids
            })
        })
        .collect();
    let ids: Vec<i64> = writers.into_iter().flat_map(|w| w.join().unwrap()).collect();
    assert_eq!(ids.iter().collect::<BTreeSet<_>>().len(), (WRITERS * RUNS) as usize, "every run its own row");

    let mut store = Store::open(&url).unwrap();
    assert_eq!(store.schema_version().unwrap(), netchar_store::SCHEMA_VERSION);
    assert_eq!(store.count().unwrap(), u64::from(WRITERS * RUNS));
    let runs = store.runs(&BTreeMap::new()).unwrap();
    let seen: BTreeSet<(String, String)> =
        runs.iter().map(|r| (r.labels["writer"].clone(), r.labels["seq"].clone())).collect();
    assert_eq!(seen.len(), (WRITERS * RUNS) as usize, "each writer's every run, once");
    // Each run's figure as written, in the dashboard view.
    let rows = store.metric_rows("bps").unwrap();
    assert_eq!(rows.len(), (WRITERS * RUNS) as usize);
    let values: BTreeSet<u64> = rows.iter().map(|(_, _, v)| *v as u64).collect();
    assert_eq!(values, (0..u64::from(WRITERS * RUNS)).collect());
    // The same run again: kept once.
    let again = BTreeMap::from([("writer".to_string(), "0".to_string()), ("seq".to_string(), "0".to_string())]);
    assert!(!store.record(&again, &run(0, 0.0)).unwrap().new);
    assert_eq!(store.count().unwrap(), u64::from(WRITERS * RUNS));
}

#[test]
fn a_version_1_store_migrates_on_postgres_too() {
    let Some(cluster) = Cluster::start("the PostgreSQL migration test", 1) else { return };
    let url = cluster.url();
    let mut old = Store::open_at_version(&url, 1).unwrap();
    for n in 0..3 {
        old.record(&BTreeMap::from([("build".to_string(), n.to_string())]), &run(n, 1e9 + f64::from(n))).unwrap();
    }
    drop(old);
    let mut store = Store::open(&url).unwrap();
    assert_eq!(store.schema_version().unwrap(), 2);
    let rows = store.metric_rows("bps").unwrap();
    assert_eq!(
        rows.iter().map(|(_, b, v)| (b.clone().unwrap(), *v)).collect::<Vec<_>>(),
        vec![("0".into(), 1e9), ("1".into(), 1e9 + 1.0), ("2".into(), 1e9 + 2.0)]
    );
}
