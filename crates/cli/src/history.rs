//! `netchar history`: a figure of the stored runs across builds or time, one series at a time,
//! with its change points; and `--expect-no-regression`, the gate of a new run against its
//! series (docs/history.md).
//!
//! A series is the runs of one method on one pair of machines (netchar_store::identity): a
//! selection that holds several is split, and each is shown with what sets it apart. Change
//! points come from netchar_stats::changepoint (E-divisive means, a seeded permutation test).

use anyhow::{anyhow, Result};
use netchar_stats::changepoint::{self, Change, Options};
use netchar_stats::compare::{format_g, mean_interval, SetStats, Verdict};
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
    let mut out = std::io::stdout().lock();
    if all.len() > 1 {
        writeln!(
            out,
            "The selection holds {} series (runs of another method or on other machines are not one series): each on its own.",
            all.len()
        )?;
    }
    for (i, s) in all.iter().enumerate() {
        let first = s.runs[0];
        writeln!(out)?;
        if all.len() > 1 {
            writeln!(out, "Series {} of {}", i + 1, all.len())?;
        }
        writeln!(out, "method   {} ({})", method_summary(first), s.key.method_hash)?;
        writeln!(out, "host     {}", s.key.host)?;
        writeln!(out, "target   {}", s.key.target)?;
        if let Some(other) = all.iter().find(|o| o.key.method_hash != s.key.method_hash) {
            let differences = first.result.method().differences(&other.runs[0].result.method());
            if !differences.is_empty() {
                let named: Vec<String> = differences.iter().map(ToString::to_string).collect();
                writeln!(out, "         (its method differs from another series' in {})", named.join(", "))?;
            }
        }
        writeln!(out, "figure   {}", s.path)?;
        writeln!(out)?;
        let width = s.runs.iter().map(|r| position(r, &a.by).len()).max().unwrap_or(0).max(a.by.len());
        writeln!(out, "{:>5}  {:<20}  {:<width$}  {:>12}", "run", "started", a.by, "value")?;
        for (n, (run, v)) in s.runs.iter().zip(&s.values).enumerate() {
            writeln!(
                out,
                "{:>5}  {:<20}  {:<width$}  {:>12}",
                n + 1,
                run.started_at,
                position(run, &a.by),
                format_g(*v, 6)
            )?;
        }
        let points = changepoint::e_divisive(&s.values, &options);
        let changes = changepoint::describe(&s.values, &points, a.confidence);
        writeln!(out)?;
        if changes.is_empty() {
            let stats = SetStats::of(&s.values).expect("a series has a run");
            writeln!(
                out,
                "No change point (E-divisive means, {} permutations, seed {}, p <= {}): {} ± {} over {} runs",
                options.permutations,
                options.seed,
                options.significance,
                format_g(stats.mean, 6),
                format_g(mean_interval(&stats, a.confidence), 3),
                stats.n
            )?;
        } else {
            writeln!(
                out,
                "Change points (E-divisive means, {} permutations, seed {}, p <= {}; means ± {}% confidence):",
                options.permutations, options.seed, options.significance, a.confidence
            )?;
            for c in &changes {
                writeln!(out, "{}", change_line(s, c, &a.by, a.confidence))?;
            }
        }
    }
    Ok(crate::exit::OK)
}

/// One change point as a line: where, how much, the segments' means and the t test.
fn change_line(s: &Series<'_>, c: &Change, by: &str, confidence: f64) -> String {
    let run = s.runs[c.point.index];
    let t = match &c.verdict {
        Verdict::Difference { diff, interval, percent, percent_interval, .. } => format!(
            "t test: a difference of {} ± {} ({:+.2}% ± {:.2}%) at {confidence}%",
            format_g(*diff, 4),
            format_g(*interval, 3),
            percent,
            percent_interval
        ),
        Verdict::NoDifference => format!("t test: no difference proven at {confidence}%"),
        Verdict::TooFew => "t test: too few runs".into(),
    };
    format!(
        "  at run {} ({by} {}, {}): {:+.2}%, {} ± {} ({} runs) -> {} ± {} ({} runs), p = {:.3}; {t}",
        c.point.index + 1,
        position(run, by),
        run.started_at,
        c.percent,
        format_g(c.before.mean, 6),
        format_g(c.before_interval, 3),
        c.before.n,
        format_g(c.after.mean, 6),
        format_g(c.after_interval, 3),
        c.after.n,
        c.point.p_value
    )
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
