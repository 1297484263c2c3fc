//! `netchar history`: a figure of the stored runs across builds or time, one series at a time,
//! with its change points; and `--expect-no-regression`, the gate of a new run against its
//! series (docs/history.md).
//!
//! A series is the runs of one method on one pair of machines (netchar_store::identity): a
//! selection that holds several is split, and each is shown with what sets it apart. Change
//! points come from netchar_stats::changepoint (E-divisive means, a seeded permutation test).
//! What the user sees, as text, an HTML page with a trend plot per series, or CSV, is
//! netchar_report::trend's.

use anyhow::{anyhow, Result};
use netchar_report::trend::{TrendRun, TrendSeries};
use netchar_stats::changepoint::{self, Options};
use netchar_stats::compare::{format_g, SetStats, Verdict};
use netchar_store::{StoreUrl, StoredRun};
use std::collections::BTreeMap;
use std::io::Write;

/// The label a run's position is named by when none is chosen: `--label build=...`.
pub(crate) const DEFAULT_BY: &str = "build";

/// `netchar history`.
#[derive(Debug, clap::Args)]
pub(crate) struct HistoryArgs {
    /// The store: an SQLite file, sqlite:FILE or postgres://... (default: history.sqlite in
    /// $XDG_DATA_HOME/netchar or ~/.local/share/netchar).
    #[arg(long, value_name = "URL")]
    pub(crate) store: Option<String>,
    /// The figure: bps, pps, tx-bps, tx-pps, loss, jitter, retransmits, tps, rtt-min,
    /// rtt-mean, rtt-p50, rtt-p90, rtt-p99, rtt-p999, rtt-max, or a path such as
    /// down.receiver.packets_per_second (default: each series' headline figure).
    #[arg(long)]
    pub(crate) metric: Option<String>,
    /// Only runs with this label, KEY=VALUE (repeatable: all must hold).
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub(crate) labels: Vec<String>,
    /// The label that names each run's position in the series (default: build).
    #[arg(long, value_name = "KEY", default_value = DEFAULT_BY)]
    pub(crate) by: String,
    /// Only the last N runs of each series.
    #[arg(long, value_name = "N")]
    pub(crate) window: Option<usize>,
    /// The permutation test's seed: the same series and seed give the same change points.
    #[arg(long, default_value = "1")]
    pub(crate) seed: u64,
    /// Confidence level in percent of the intervals and the t tests: 80, 90, 95, 98, 99 or 99.5.
    #[arg(short = 'c', long = "confidence", default_value = "95")]
    pub(crate) confidence: f64,
    /// text (tables), html (a page with each series' trend plot) or csv (a row per run, as
    /// Apache Otava's CSV importer reads it).
    #[arg(long, default_value = "text")]
    pub(crate) format: String,
    /// Write to FILE instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub(crate) output: Option<std::path::PathBuf>,
}

/// The store named by `--store`, or the default one.
pub(crate) fn store_url(arg: Option<&str>) -> Result<StoreUrl> {
    match arg.filter(|a| !a.is_empty()) {
        Some(a) => StoreUrl::parse(a),
        None => StoreUrl::default_sqlite(),
    }
    .map_err(|e| anyhow!(e))
}

/// `--label KEY=VALUE`s as a map; a key given twice is refused.
pub(crate) fn parse_labels(labels: &[String]) -> Result<BTreeMap<String, String>> {
    let mut map = BTreeMap::new();
    for l in labels {
        let (k, v) = netchar_store::parse_label(l).map_err(|e| anyhow!(e))?;
        if map.insert(k.clone(), v).is_some() {
            anyhow::bail!("--label {l}: {k} is given twice; give each key once");
        }
    }
    Ok(map)
}

/// One method on one pair of machines.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct SeriesKey {
    pub(crate) method_hash: String,
    pub(crate) host: String,
    pub(crate) target: String,
}

impl SeriesKey {
    pub(crate) fn of(run: &StoredRun) -> Self {
        Self {
            method_hash: run.method_hash.clone(),
            host: run.host_identity.clone(),
            target: run.target_identity.clone(),
        }
    }
}

/// The runs of one series that have the figure, oldest first, with its values.
pub(crate) struct Series<'a> {
    pub(crate) key: SeriesKey,
    pub(crate) path: String,
    pub(crate) runs: Vec<&'a StoredRun>,
    pub(crate) values: Vec<f64>,
}

/// Splits `runs` (oldest first) into series and reads `metric` (or each series' headline)
/// from each run; the last `window` runs of each series when given.
pub(crate) fn series<'a>(
    runs: &'a [StoredRun],
    metric: Option<&str>,
    window: Option<usize>,
) -> Result<Vec<Series<'a>>> {
    let mut by_key: BTreeMap<SeriesKey, Vec<&StoredRun>> = BTreeMap::new();
    for run in runs {
        by_key.entry(SeriesKey::of(run)).or_default().push(run);
    }
    let mut out = Vec::new();
    for (key, members) in by_key {
        let first = &members[0].result;
        let path = match metric {
            Some(m) => first.metric_path(m).map_err(|e| anyhow!(e))?,
            None => first.headline_path().to_string(),
        };
        let mut kept: Vec<(&StoredRun, f64)> = members
            .into_iter()
            .filter_map(|r| r.result.figure(&path).filter(|v| v.is_finite()).map(|v| (r, v)))
            .collect();
        if let Some(w) = window {
            let skip = kept.len().saturating_sub(w);
            kept.drain(..skip);
        }
        if kept.is_empty() {
            continue;
        }
        let (runs, values) = kept.into_iter().unzip();
        out.push(Series { key, path, runs, values });
    }
    Ok(out)
}

/// What one series' method is, in a few words: `udp up, 1 stream, 1472 B, unpaced`.
fn method_summary(run: &StoredRun) -> String {
    let m = run.result.method();
    let streams = if m.streams == 1 { "1 stream".to_string() } else { format!("{} streams", m.streams) };
    format!("{} {} {}, {streams}, {} B blocks", m.protocol, m.test, m.direction, m.block_bytes)
}

/// Where a run stands: its `--by` label, or its start time.
fn position(run: &StoredRun, by: &str) -> String {
    run.labels.get(by).cloned().unwrap_or_else(|| run.started_at.clone())
}

/// `netchar history`.
pub(crate) fn run(a: &HistoryArgs) -> Result<u8> {
    if !netchar_stats::compare::CONFIDENCES.contains(&a.confidence) {
        anyhow::bail!("-c {}: use one of 80, 90, 95, 98, 99, 99.5", a.confidence);
    }
    if a.window == Some(0) {
        anyhow::bail!("--window 0: give at least 1 run");
    }
    let format = match a.format.as_str() {
        f @ ("text" | "html" | "csv") => f,
        other => anyhow::bail!("--format {other}: one of text, html, csv"),
    };
    let labels = parse_labels(&a.labels)?;
    let url = store_url(a.store.as_deref())?;
    if let StoreUrl::Sqlite(path) = &url {
        if !path.exists() {
            anyhow::bail!(
                "{}: no store there yet; store runs with --store (or netchar store import), or name one with --store",
                path.display()
            );
        }
    }
    let mut store = netchar_store::Store::open(&url).map_err(|e| anyhow!("{url}: {e}"))?;
    let runs = store.runs(&labels).map_err(|e| anyhow!("{url}: {e}"))?;
    if runs.is_empty() {
        anyhow::bail!("{url}: no stored run has the labels asked for; netchar history without --label lists all");
    }
    let all = series(&runs, a.metric.as_deref(), a.window)?;
    if all.is_empty() {
        anyhow::bail!("{url}: no stored run of the selection has that figure; choose another with --metric");
    }
    let options = Options { seed: a.seed, ..Options::default() };
    let trends: Vec<TrendSeries> = all.iter().map(|s| trend(s, &all, &a.by, &options, a.confidence)).collect();
    let text = match format {
        "html" => {
            let selection = if labels.is_empty() {
                format!("of {url}")
            } else {
                let named: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
                format!("of {url} labelled {}", named.join(", "))
            };
            netchar_report::trend::document(&trends, &selection)
        }
        "csv" => netchar_report::trend::csv(&trends),
        _ => netchar_report::trend::text(&trends),
    };
    match &a.output {
        Some(file) => crate::files::write_atomically(file, text)?,
        None => std::io::stdout().lock().write_all(text.as_bytes())?,
    }
    Ok(crate::exit::OK)
}

/// One series as the reporters show it: its identity, its runs and its change points.
fn trend(s: &Series<'_>, all: &[Series<'_>], by: &str, options: &Options, confidence: f64) -> TrendSeries {
    let first = s.runs[0];
    // What sets its method apart from another series' of the selection.
    let differs = all.iter().find(|o| o.key.method_hash != s.key.method_hash).and_then(|other| {
        let differences = first.result.method().differences(&other.runs[0].result.method());
        let named: Vec<String> = differences.iter().map(ToString::to_string).collect();
        (!named.is_empty()).then(|| named.join(", "))
    });
    let points = changepoint::e_divisive(&s.values, options);
    TrendSeries {
        method: format!("{} ({})", method_summary(first), s.key.method_hash),
        differs,
        host: s.key.host.clone(),
        target: s.key.target.clone(),
        figure: s.path.clone(),
        by: by.to_string(),
        runs: s
            .runs
            .iter()
            .zip(&s.values)
            .map(|(r, v)| TrendRun { position: position(r, by), started_at: r.started_at.clone(), value: *v })
            .collect(),
        changes: changepoint::describe(&s.values, &points, confidence),
        options: options.clone(),
        confidence,
    }
}

/// The verdict of `--expect-no-regression` on one series whose last `new` runs are the
/// command's: None when they hold, else the one line that says why not.
pub(crate) fn regression(s: &Series<'_>, new: usize, by: &str, seed: u64) -> Option<String> {
    let n = s.values.len();
    if new == 0 || n <= new {
        return None;
    }
    let options = Options { seed, ..Options::default() };
    let (old, fresh) = s.values.split_at(n - new);
    let higher_is_better = netchar_model::figures::higher_is_better(&s.path);
    let worse = |delta: f64| if higher_is_better { delta < 0.0 } else { delta > 0.0 };
    let compared_with = s.runs[n - new - 1];
    let name =
        |run: &StoredRun| run.labels.get(by).map_or(format!("the run of {}", run.started_at), |b| format!("{by} {b}"));
    // A change that the new runs start: one found with them that the runs before did not
    // show (a point within one run of an old one is the same change, its place refined).
    let before_points = changepoint::e_divisive(old, &options);
    let with_points = changepoint::e_divisive(&s.values, &options);
    for c in changepoint::describe(&s.values, &with_points, 95.0) {
        let known = before_points.iter().any(|p| p.index.abs_diff(c.point.index) <= 1);
        if !known && worse(c.after.mean - c.before.mean) && matches!(c.verdict, Verdict::Difference { .. }) {
            let from = s.runs[c.point.index];
            return Some(format!(
                "{}: a change for the worse starts at {} ({:+.2}%: {} -> {}), compared with {}",
                s.path,
                name(from),
                c.percent,
                format_g(c.before.mean, 6),
                format_g(c.after.mean, 6),
                name(compared_with)
            ));
        }
    }
    // The current segment: the runs since the last change point before the new ones.
    let start = before_points.last().map_or(0, |p| p.index);
    let segment = SetStats::of(&old[start..])?;
    if segment.n < 2 {
        return None;
    }
    let fresh_mean = fresh.iter().sum::<f64>() / fresh.len() as f64;
    // The interval in which the mean of `new` further runs of the segment falls with 95%:
    // t·s·√(1/new + 1/n) (for one run, the prediction interval).
    let t = netchar_stats::compare::t_value(95.0, (segment.n - 1) as f64);
    let half = t * segment.stddev * (1.0 / new as f64 + 1.0 / segment.n as f64).sqrt();
    let delta = fresh_mean - segment.mean;
    if delta.abs() > half && worse(delta) {
        return Some(format!(
            "{}: {} is {:+.2}% off the current segment's {} ± {} (95%, {} runs since {}), compared with {}",
            s.path,
            format_g(fresh_mean, 6),
            delta * 100.0 / segment.mean,
            format_g(segment.mean, 6),
            format_g(half, 3),
            segment.n,
            name(s.runs[start]),
            name(compared_with)
        ));
    }
    None
}
