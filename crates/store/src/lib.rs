//! netchar's results store: every run kept, so that a series of runs across builds can be
//! read back, its change points found and a new run gated against it (`netchar history`,
//! docs/history.md).
//!
//! A run is stored with the labels the user gave it (`--label build=1.4.2-37-gabc`), the
//! identities of the two machines ([`identity`]), netchar's version, the method (its hash, and
//! in full), its start time, its named figures and the whole result as JSON. Each run is one
//! transaction: a writer killed part way leaves the store as it was before that run. The same
//! run (the same result with the same labels) stored twice is kept once, so importing a
//! directory again adds nothing.
//!
//! Two databases take the same schema ([`schema`]): an SQLite file (bundled: nothing to
//! install), the default, in the user's data directory, and a PostgreSQL server
//! (`postgres://...`), which many rigs write to at once.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod error;
pub mod identity;
mod schema;
mod sql;

pub use error::StoreError;
pub use schema::SCHEMA_VERSION;
pub use sql::Dialect;

use netchar_model::TestResult;
use sha2::{Digest, Sha256};
use sql::{Connection, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where a store is: an SQLite file or a PostgreSQL server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreUrl {
    /// An SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL connection URL (`postgres://user@host/db`, a socket directory
    /// percent-encoded as the host).
    Postgres(String),
}

impl StoreUrl {
    /// `postgres://...` or `postgresql://...`, `sqlite:PATH`, or a file path.
    pub fn parse(text: &str) -> Result<Self, StoreError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(StoreError::Usage("--store: empty; give a file, sqlite:FILE or postgres://...".into()));
        }
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            return Ok(Self::Postgres(text.to_string()));
        }
        if let Some(path) = text.strip_prefix("sqlite://").or_else(|| text.strip_prefix("sqlite:")) {
            return Ok(Self::Sqlite(PathBuf::from(path)));
        }
        if let Some((scheme, _)) = text.split_once("://") {
            return Err(StoreError::Usage(format!(
                "--store {text}: no store speaks {scheme}://; give a file, sqlite:FILE or postgres://..."
            )));
        }
        Ok(Self::Sqlite(PathBuf::from(text)))
    }

    /// The default store: `history.sqlite` in netchar's data directory (`$XDG_DATA_HOME/netchar`,
    /// else `~/.local/share/netchar`).
    pub fn default_sqlite() -> Result<Self, StoreError> {
        let base = std::env::var_os("XDG_DATA_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").filter(|v| !v.is_empty()).map(|h| Path::new(&h).join(".local/share")))
            .ok_or_else(|| {
                StoreError::Usage("--store: neither XDG_DATA_HOME nor HOME is set; give the store's file".into())
            })?;
        Ok(Self::Sqlite(base.join("netchar").join("history.sqlite")))
    }
}

impl std::fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Sqlite(p) => write!(f, "{}", p.display()),
            // The URL without a password.
            Self::Postgres(u) => match (u.find("://"), u.rfind('@')) {
                (Some(s), Some(at)) if at > s => {
                    let userinfo = &u[s + 3..at];
                    let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
                    write!(f, "{}{user}{}", &u[..s + 3], &u[at..])
                }
                _ => f.write_str(u),
            },
        }
    }
}

/// One `--label KEY=VALUE`, checked: a key of letters, digits, `_`, `-` and `.`.
pub fn parse_label(text: &str) -> Result<(String, String), StoreError> {
    let Some((key, value)) = text.split_once('=') else {
        return Err(StoreError::Usage(format!("--label {text}: give KEY=VALUE, e.g. --label build=1.4.2")));
    };
    let key = key.trim();
    if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c)) {
        return Err(StoreError::Usage(format!(
            "--label {text}: the key must be letters, digits, '_', '-' or '.', e.g. build=1.4.2"
        )));
    }
    Ok((key.to_string(), value.trim().to_string()))
}

/// A run as the store holds it.
#[derive(Debug, Clone)]
pub struct StoredRun {
    /// The store's number for it, in the order runs were stored.
    pub id: i64,
    /// The user's labels.
    pub labels: BTreeMap<String, String>,
    /// When the run started, RFC 3339 UTC.
    pub started_at: String,
    /// When it was stored.
    pub stored_at: String,
    /// The netchar that measured it.
    pub netchar_version: String,
    /// [`identity::host_identity`].
    pub host_identity: String,
    /// [`identity::target_identity`].
    pub target_identity: String,
    /// [`identity::host_software`].
    pub host_software: String,
    /// [`identity::target_software`].
    pub target_software: String,
    /// [`identity::MethodKey::hash`].
    pub method_hash: String,
    /// [`identity::MethodKey::json`].
    pub method_json: String,
    /// The whole result.
    pub result: TestResult,
}

/// The outcome of storing a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recorded {
    /// The run's number in the store.
    pub id: i64,
    /// False when the same run with the same labels was stored before (kept once).
    pub new: bool,
}

/// An open store, its schema current.
pub struct Store {
    conn: Connection,
    url: StoreUrl,
    /// The schema version the store stands at (below [`SCHEMA_VERSION`] only in the tests of
    /// the migrations).
    version: u32,
}

impl Store {
    /// Opens (creating where needed) the store at `url` and brings its schema to
    /// [`SCHEMA_VERSION`].
    pub fn open(url: &StoreUrl) -> Result<Self, StoreError> {
        Self::open_at_version(url, SCHEMA_VERSION)
    }

    /// Opens the store and migrates it only up to `version`: for the tests of the migrations,
    /// which build a store as an older netchar left it.
    #[doc(hidden)]
    pub fn open_at_version(url: &StoreUrl, version: u32) -> Result<Self, StoreError> {
        let mut conn = match url {
            StoreUrl::Sqlite(path) => Connection::Sqlite(open_sqlite(path)?),
            StoreUrl::Postgres(u) => Connection::Postgres(Box::new(
                postgres::Client::connect(u, postgres::NoTls)
                    .map_err(|e| StoreError::Postgres(format!("cannot connect to {url}: {e}")))?,
            )),
        };
        let version = schema::migrate(&mut conn, version.min(SCHEMA_VERSION))?;
        Ok(Self { conn, url: url.clone(), version })
    }

    /// Where the store is.
    pub fn url(&self) -> &StoreUrl {
        &self.url
    }

    /// The schema version of the store as it stands.
    pub fn schema_version(&mut self) -> Result<u32, StoreError> {
        let rows = self.conn.query("SELECT version FROM netchar_schema", &[])?;
        Ok(rows.first().and_then(|r| r[0].int()).and_then(|v| u32::try_from(v).ok()).unwrap_or(0))
    }

    /// Stores `result` with `labels`, in one transaction.
    pub fn record(&mut self, labels: &BTreeMap<String, String>, result: &TestResult) -> Result<Recorded, StoreError> {
        self.begin_record(labels, result)?.commit()
    }

    /// Writes the run inside a transaction and hands it back uncommitted: [`PendingRun::commit`]
    /// keeps it, dropping it (or a crash) leaves the store as it was.
    pub fn begin_record(
        &mut self,
        labels: &BTreeMap<String, String>,
        result: &TestResult,
    ) -> Result<PendingRun<'_>, StoreError> {
        let result_json = serde_json::to_string(result).map_err(|e| StoreError::Usage(e.to_string()))?;
        let run_key = run_key(labels, &result_json);
        let method = identity::method_key(result);
        let stored_at = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
        self.conn.batch(match self.conn.dialect() {
            Dialect::Sqlite => "BEGIN IMMEDIATE",
            Dialect::Postgres => "BEGIN",
        })?;
        let mut pending = PendingRun { store: self, recorded: None, committed: false };
        let conn = &mut pending.store.conn;
        let inserted = conn.query(
            "INSERT INTO runs (run_key, started_at, stored_at, netchar_version, host_identity, target_identity,
                               host_software, target_software, method_hash, method_json, result_json)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
             ON CONFLICT (run_key) DO NOTHING
             RETURNING id",
            &[
                run_key.clone().into(),
                result.started_at.clone().into(),
                stored_at.into(),
                result.netchar_version.clone().into(),
                identity::host_identity(result).into(),
                identity::target_identity(result).into(),
                identity::host_software(result).into(),
                identity::target_software(result).into(),
                method.hash.into(),
                method.json.into(),
                result_json.into(),
            ],
        )?;
        let recorded = match inserted.first().and_then(|r| r[0].int()) {
            Some(id) => {
                for (key, value) in labels {
                    conn.query(
                        "INSERT INTO run_labels (run_id, key, value) VALUES ($1, $2, $3)",
                        &[id.into(), key.as_str().into(), value.as_str().into()],
                    )?;
                }
                if pending.store.version >= 2 {
                    schema::insert_metrics(&mut pending.store.conn, id, result)?;
                }
                Recorded { id, new: true }
            }
            None => {
                let rows = conn.query("SELECT id FROM runs WHERE run_key = $1", &[run_key.into()])?;
                let id = rows.first().and_then(|r| r[0].int()).ok_or_else(|| {
                    StoreError::Corrupt("a run that conflicts with a stored one cannot be found".into())
                })?;
                Recorded { id, new: false }
            }
        };
        pending.recorded = Some(recorded);
        Ok(pending)
    }

    /// Every stored run whose labels include all of `labels`, oldest first (by start time,
    /// then by the order they were stored).
    pub fn runs(&mut self, labels: &BTreeMap<String, String>) -> Result<Vec<StoredRun>, StoreError> {
        let mut by_run: BTreeMap<i64, BTreeMap<String, String>> = BTreeMap::new();
        for row in self.conn.query("SELECT run_id, key, value FROM run_labels", &[])? {
            by_run.entry(row[0].int().unwrap_or_default()).or_default().insert(row[1].text(), row[2].text());
        }
        let rows = self.conn.query(
            "SELECT id, started_at, stored_at, netchar_version, host_identity, target_identity, host_software,
                    target_software, method_hash, method_json, result_json
             FROM runs ORDER BY started_at, id",
            &[],
        )?;
        let mut out = Vec::new();
        for row in rows {
            let id = row[0].int().unwrap_or_default();
            let run_labels = by_run.remove(&id).unwrap_or_default();
            if !labels.iter().all(|(k, v)| run_labels.get(k) == Some(v)) {
                continue;
            }
            let result = serde_json::from_str(&row[10].text())
                .map_err(|e| StoreError::Corrupt(format!("run {id}: its result JSON does not read: {e}")))?;
            out.push(StoredRun {
                id,
                labels: run_labels,
                started_at: row[1].text(),
                stored_at: row[2].text(),
                netchar_version: row[3].text(),
                host_identity: row[4].text(),
                target_identity: row[5].text(),
                host_software: row[6].text(),
                target_software: row[7].text(),
                method_hash: row[8].text(),
                method_json: row[9].text(),
                result,
            });
        }
        Ok(out)
    }

    /// Runs in the store.
    pub fn count(&mut self) -> Result<u64, StoreError> {
        let rows = self.conn.query("SELECT COUNT(*) FROM runs", &[])?;
        Ok(rows.first().and_then(|r| r[0].int()).and_then(|v| u64::try_from(v).ok()).unwrap_or(0))
    }

    /// Rows of the dashboard view `run_metric_rows` for `metric`, as (run, build label, value),
    /// oldest first: what Grafana and Otava read.
    pub fn metric_rows(&mut self, metric: &str) -> Result<Vec<(i64, Option<String>, f64)>, StoreError> {
        let rows = self.conn.query(
            "SELECT run_id, build, value FROM run_metric_rows WHERE metric = $1 ORDER BY time, run_id",
            &[metric.into()],
        )?;
        Ok(rows
            .into_iter()
            .map(|r| {
                let value = match r[2] {
                    Value::Real(v) => v,
                    Value::Int(v) => v as f64,
                    _ => f64::NAN,
                };
                (r[0].int().unwrap_or_default(), (r[1] != Value::Null).then(|| r[1].text()), value)
            })
            .collect())
    }
}

/// A run written inside an open transaction.
pub struct PendingRun<'a> {
    store: &'a mut Store,
    recorded: Option<Recorded>,
    committed: bool,
}

impl PendingRun<'_> {
    /// Commits the run.
    pub fn commit(mut self) -> Result<Recorded, StoreError> {
        let recorded = self.recorded.expect("a pending run holds its record once written");
        self.store.conn.batch("COMMIT")?;
        self.committed = true;
        Ok(recorded)
    }
}

impl Drop for PendingRun<'_> {
    fn drop(&mut self) {
        if !self.committed {
            // Not committed (or failed part way): nothing of the run stays.
            let _ = self.store.conn.batch("ROLLBACK");
        }
    }
}

/// SHA-256 of the labels and the result: the same run stored twice is one row.
fn run_key(labels: &BTreeMap<String, String>, result_json: &str) -> String {
    let mut hasher = Sha256::new();
    for (k, v) in labels {
        hasher.update(format!("{}:{k}={}:{v}\n", k.len(), v.len()).as_bytes());
    }
    hasher.update(result_json.as_bytes());
    hasher.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

fn open_sqlite(path: &Path) -> Result<rusqlite::Connection, StoreError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| StoreError::Usage(format!("--store: cannot create {}: {e}", dir.display())))?;
    }
    let conn = rusqlite::Connection::open(path)
        .map_err(|e| StoreError::Sqlite(format!("cannot open {}: {e}", path.display())))?;
    // WAL: readers (`netchar history`) do not wait for a writer; FULL: a committed run is on
    // disk before the commit returns; a writer waits for another instead of failing at once.
    conn.busy_timeout(std::time::Duration::from_secs(60)).map_err(StoreError::sqlite)?;
    conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;")
        .map_err(|e| StoreError::Sqlite(format!("{}: {e}", path.display())))?;
    Ok(conn)
}
