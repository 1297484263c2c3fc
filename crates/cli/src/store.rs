//! `--store`: each counted run of a test, suite or plan kept in the results store when the
//! command ends, with the `--label`s given (and a plan's test's own: crate::plans), and
//! `--expect-no-regression` judged against the stored series; `netchar store import`: `--save` directories and `--json` files into the
//! store (docs/history.md).
//!
//! The runs are the ones the command's reporters counted (crate::figure_files keeps them:
//! warm-up runs and a search's probes are not among them), so every command that draws its
//! figures stores them the same way.

use crate::history;
use anyhow::{anyhow, Context, Result};
use netchar_model::TestResult;

/// Labels of stored runs, key to value.
pub(crate) type Labels = std::collections::BTreeMap<String, String>;

/// The store flags of every test, suite and plan.
#[derive(Debug, clap::Args, Clone, Default)]
pub(crate) struct StoreArgs {
    /// Keep each counted run in the results store: with no value, history.sqlite in
    /// $XDG_DATA_HOME/netchar (or ~/.local/share/netchar); --store=FILE, --store=sqlite:FILE or
    /// --store=postgres://USER@HOST/DB for another.
    #[arg(long = "store", value_name = "URL", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    pub(crate) store: Option<String>,
    /// A label of the stored runs, KEY=VALUE (repeatable): --label build=1.4.2-37-gabc --label board=rev-b.
    #[arg(long = "label", value_name = "KEY=VALUE", requires = "store")]
    pub(crate) labels: Vec<String>,
    /// Exit 1 when the new runs start a change for the worse in their stored series, or fall
    /// outside the interval of its current segment (needs --store).
    #[arg(long, requires = "store")]
    pub(crate) expect_no_regression: bool,
    /// --expect-no-regression: the last N runs of the series it judges, the new ones included
    /// (default 30).
    #[arg(long = "regression-window", value_name = "N", requires = "expect_no_regression")]
    pub(crate) regression_window: Option<usize>,
}

/// The runs of a gate's series when `--regression-window` is not given.
const DEFAULT_WINDOW: usize = 30;

/// After a test, suite or plan: its counted runs stored, each with the command line's
/// `--label`s over its own (a plan's test's: its name, the plan's file, its loop values and
/// `labels`), and the gate judged. `code` is the command's own outcome; a gate that does not
/// hold turns an OK into exit status 1.
pub(crate) fn after_command(args: Option<&StoreArgs>, runs: &[(TestResult, Labels)], code: Result<u8>) -> Result<u8> {
    let Some(args) = args.filter(|a| a.store.is_some()) else { return code };
    let given = history::parse_labels(&args.labels)?;
    if args.regression_window == Some(0) {
        anyhow::bail!("--regression-window 0: give at least 1 run");
    }
    let counted: Vec<(&TestResult, Labels)> = runs
        .iter()
        .filter(|(r, _)| r.error.is_none())
        .map(|(r, own)| {
            // The command line's labels win: a CI job's build= over a plan's.
            let mut labels = own.clone();
            labels.extend(given.clone());
            (r, labels)
        })
        .collect();
    if counted.is_empty() {
        return code;
    }
    let url = history::store_url(args.store.as_deref())?;
    let mut store = netchar_store::Store::open(&url).map_err(|e| anyhow!("--store {url}: {e}"))?;
    let mut ids = Vec::new();
    for (r, labels) in &counted {
        ids.push(store.record(labels, r).map_err(|e| anyhow!("--store {url}: {e}"))?.id);
    }
    eprintln!("netchar: stored {} run{} in {url}", ids.len(), if ids.len() == 1 { "" } else { "s" });
    let code = code?;
    if !args.expect_no_regression {
        return Ok(code);
    }
    // The series of the new runs: the same labels but the build's, the same method and
    // machines; a plan's tests have labels of their own, so each is looked up apart.
    let mut selections: Vec<Labels> = Vec::new();
    for (_, labels) in &counted {
        let mut series_labels = labels.clone();
        series_labels.remove(history::DEFAULT_BY);
        if !selections.contains(&series_labels) {
            selections.push(series_labels);
        }
    }
    let window = args.regression_window.unwrap_or(DEFAULT_WINDOW);
    let mut held = true;
    for series_labels in &selections {
        let runs = store.runs(series_labels).map_err(|e| anyhow!("--store {url}: {e}"))?;
        held &= judge(&runs, &ids, window)?;
    }
    Ok(if held || code != crate::exit::OK { code } else { crate::exit::GATE })
}

/// `--expect-no-regression` over the series of `runs` that hold new runs (`ids`): false when
/// one does not hold.
fn judge(runs: &[netchar_store::StoredRun], ids: &[i64], window: usize) -> Result<bool> {
    let mut held = true;
    for s in history::series(runs, None, Some(window))? {
        let new = s.runs.iter().filter(|r| ids.contains(&r.id)).count();
        if new == 0 {
            continue;
        }
        if s.runs.len() <= new {
            eprintln!(
                "netchar: --expect-no-regression: no stored run of this series before these; nothing to compare with"
            );
            continue;
        }
        // New runs are stored last, but a series is in order of start time: the gate judges
        // the new ones as the series' end only when they are.
        let at_end = s.runs[s.runs.len() - new..].iter().all(|r| ids.contains(&r.id));
        if !at_end {
            eprintln!("netchar: --expect-no-regression: the series holds runs that started after these; not judged");
            continue;
        }
        match history::regression(&s, new, history::DEFAULT_BY, 1) {
            Some(why) => {
                eprintln!("netchar: --expect-no-regression failed: {why}");
                held = false;
            }
            None => eprintln!(
                "netchar: --expect-no-regression: {} holds against {} stored runs",
                s.path,
                s.runs.len() - new
            ),
        }
    }
    Ok(held)
}

/// `netchar store`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum StoreCommand {
    /// Load saved results into the store: `--save` directories and `--json` files (one run or
    /// an array of repeated runs). A run already stored with the same labels is kept once.
    Import(ImportArgs),
}

/// `netchar store import`.
#[derive(Debug, clap::Args)]
pub(crate) struct ImportArgs {
    /// `--save` directories and `--json` files.
    #[arg(required = true, num_args = 1.., value_name = "DIR|FILE")]
    pub(crate) paths: Vec<std::path::PathBuf>,
    /// The store (default: history.sqlite in $XDG_DATA_HOME/netchar or ~/.local/share/netchar).
    #[arg(long, value_name = "URL")]
    pub(crate) store: Option<String>,
    /// A label of the imported runs, KEY=VALUE (repeatable).
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub(crate) labels: Vec<String>,
}

/// `netchar store ...`.
pub(crate) fn run(command: &StoreCommand) -> Result<u8> {
    let StoreCommand::Import(a) = command;
    let labels = history::parse_labels(&a.labels)?;
    // Everything read before anything is stored: a bad file stores nothing.
    let mut results = Vec::new();
    for path in &a.paths {
        results.extend(read_results(path)?);
    }
    let url = history::store_url(a.store.as_deref())?;
    let mut store = netchar_store::Store::open(&url).map_err(|e| anyhow!("{url}: {e}"))?;
    let mut new = 0;
    for r in &results {
        new += usize::from(store.record(&labels, r).map_err(|e| anyhow!("{url}: {e}"))?.new);
    }
    println!("imported {} runs into {url}: {new} new, {} stored before", results.len(), results.len() - new);
    Ok(crate::exit::OK)
}

/// The results of a `--save` directory (its `*.json` files) or of one JSON result file.
fn read_results(path: &std::path::Path) -> Result<Vec<TestResult>> {
    let files: Vec<std::path::PathBuf> = if path.is_dir() {
        let mut files: Vec<_> = std::fs::read_dir(path)
            .with_context(|| format!("cannot read {}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        if files.is_empty() {
            anyhow::bail!("{} holds no JSON results; give a --save directory or --json files", path.display());
        }
        files
    } else {
        vec![path.to_path_buf()]
    };
    let mut out = Vec::new();
    for file in files {
        let text = crate::files::read_text(&file, crate::files::RESULT_FILE_CAP)
            .map_err(|e| anyhow!("{}: {e}", file.display()))?;
        let saved = netchar_report::parse_saved(&text, &file.display().to_string()).map_err(anyhow::Error::msg)?;
        out.extend(saved.into_iter().map(|s| s.result));
    }
    Ok(out)
}

/// Labels are checked before any test runs: a typo costs no measurement.
pub(crate) fn check_args(args: Option<&StoreArgs>) -> Result<()> {
    if let Some(a) = args.filter(|a| a.store.is_some()) {
        history::parse_labels(&a.labels)?;
        history::store_url(a.store.as_deref())?;
    }
    Ok(())
}
