//! A figure of stored runs across builds or time, one series at a time, with its change
//! points (`netchar history`, docs/history.md): as text, as CSV (one row per run, which Apache
//! Otava's CSV importer reads as it is), and as a self-contained HTML page whose trend plot
//! marks each change point and draws each segment's mean with its confidence interval.
//!
//! What a series is, which runs it holds and where it changes is decided before (the store
//! splits the runs, netchar_stats::changepoint finds the changes); this file only shows a
//! [`TrendSeries`]. Its plot is a [`Chart`] drawn by [`crate::chart`] like every other plot,
//! and the page has the HTML report's head, policy and tables ([`crate::html`]).

use crate::chart::{self, Axis, Chart, Marker, Series, Shape};
use crate::markup::escape;
use netchar_stats::changepoint::{Change, Options};
use netchar_stats::compare::{format_g, mean_interval, SetStats, Verdict};
use std::fmt::Write;

/// One run of a series.
#[derive(Debug, Clone, PartialEq)]
pub struct TrendRun {
    /// Where it stands: its `--by` label (the build), or its start time when it has none.
    pub position: String,
    /// When it started, RFC 3339 UTC.
    pub started_at: String,
    /// The figure.
    pub value: f64,
}

/// One series: its identity, its runs oldest first, and the change points found in them.
#[derive(Debug, Clone, PartialEq)]
pub struct TrendSeries {
    /// The method in a few words, with its hash: `netchar udp up, 1 stream, 1472 B blocks (e7a6…)`.
    pub method: String,
    /// What sets its method apart from another series' of the selection, if anything.
    pub differs: Option<String>,
    /// The client's machine.
    pub host: String,
    /// The far end's machine.
    pub target: String,
    /// The figure's path in the result: `up.receiver.bits_per_second`.
    pub figure: String,
    /// The label that names each run's position (`build`).
    pub by: String,
    /// The runs, oldest first.
    pub runs: Vec<TrendRun>,
    /// The change points, in order (`changepoint::describe`).
    pub changes: Vec<Change>,
    /// How they were searched for.
    pub options: Options,
    /// The confidence of the intervals and t tests, percent.
    pub confidence: f64,
}

/// A stretch of runs between change points: its first run, its end (exclusive), its mean and
/// the half-width of the mean's confidence interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Segment {
    /// Index of its first run.
    pub start: usize,
    /// Index after its last run.
    pub end: usize,
    /// Mean of its runs.
    pub mean: f64,
    /// Half-width of the mean's confidence interval.
    pub interval: f64,
}

impl TrendSeries {
    /// The segments the change points cut the series into, first to last: one for a series
    /// with no change point.
    pub fn segments(&self) -> Vec<Segment> {
        let values: Vec<f64> = self.runs.iter().map(|r| r.value).collect();
        let mut bounds = vec![0];
        bounds.extend(self.changes.iter().map(|c| c.point.index));
        bounds.push(values.len());
        bounds
            .windows(2)
            .filter_map(|w| {
                let stats = SetStats::of(&values[w[0]..w[1]])?;
                let interval = mean_interval(&stats, self.confidence);
                Some(Segment { start: w[0], end: w[1], mean: stats.mean, interval })
            })
            .collect()
    }

    /// The search in words: `E-divisive means, 199 permutations, seed 1, p <= 0.01`.
    fn search(&self) -> String {
        let o = &self.options;
        format!("E-divisive means, {} permutations, seed {}, p <= {}", o.permutations, o.seed, o.significance)
    }

    /// The axis unit of the figure: (divisor, unit) for a rate in bits, else none.
    fn unit(&self) -> (f64, String) {
        if self.figure.ends_with("bits_per_second") {
            let max = self.runs.iter().map(|r| r.value).fold(0.0, f64::max);
            let (div, unit) = crate::plots::rate_unit(max);
            (div, unit.to_string())
        } else {
            (1.0, String::new())
        }
    }
}

/// The t test between the segments around a change, in words.
fn t_test(c: &Change, confidence: f64) -> String {
    match &c.verdict {
        Verdict::Difference { diff, interval, percent, percent_interval, .. } => format!(
            "a difference of {} ± {} ({:+.2}% ± {:.2}%) at {confidence}%",
            format_g(*diff, 4),
            format_g(*interval, 3),
            percent,
            percent_interval
        ),
        Verdict::NoDifference => format!("no difference proven at {confidence}%"),
        Verdict::TooFew => "too few runs".into(),
    }
}

/// The series as text: each one's identity, its runs as a table, then its change points.
pub fn text(series: &[TrendSeries]) -> String {
    let mut out = String::new();
    if series.len() > 1 {
        let _ = writeln!(
            out,
            "The selection holds {} series (runs of another method or on other machines are not one series): each on its own.",
            series.len()
        );
    }
    for (i, s) in series.iter().enumerate() {
        out.push('\n');
        if series.len() > 1 {
            let _ = writeln!(out, "Series {} of {}", i + 1, series.len());
        }
        let _ = writeln!(out, "method   {}", s.method);
        let _ = writeln!(out, "host     {}", s.host);
        let _ = writeln!(out, "target   {}", s.target);
        if let Some(d) = &s.differs {
            let _ = writeln!(out, "         (its method differs from another series' in {d})");
        }
        let _ = writeln!(out, "figure   {}\n", s.figure);
        let width = s.runs.iter().map(|r| r.position.len()).max().unwrap_or(0).max(s.by.len());
        let _ = writeln!(out, "{:>5}  {:<20}  {:<width$}  {:>12}", "run", "started", s.by, "value");
        for (n, run) in s.runs.iter().enumerate() {
            let _ = writeln!(
                out,
                "{:>5}  {:<20}  {:<width$}  {:>12}",
                n + 1,
                run.started_at,
                run.position,
                format_g(run.value, 6)
            );
        }
        out.push('\n');
        if s.changes.is_empty() {
            let segment = s.segments().first().copied();
            if let Some(all) = segment {
                let _ = writeln!(
                    out,
                    "No change point ({}): {} ± {} over {} runs",
                    s.search(),
                    format_g(all.mean, 6),
                    format_g(all.interval, 3),
                    all.end
                );
            }
        } else {
            let _ = writeln!(out, "Change points ({}; means ± {}% confidence):", s.search(), s.confidence);
            for c in &s.changes {
                let run = &s.runs[c.point.index];
                let _ = writeln!(
                    out,
                    "  at run {} ({} {}, {}): {:+.2}%, {} ± {} ({} runs) -> {} ± {} ({} runs), p = {:.3}; t test: {}",
                    c.point.index + 1,
                    s.by,
                    run.position,
                    run.started_at,
                    c.percent,
                    format_g(c.before.mean, 6),
                    format_g(c.before_interval, 3),
                    c.before.n,
                    format_g(c.after.mean, 6),
                    format_g(c.after_interval, 3),
                    c.after.n,
                    c.point.p_value,
                    t_test(c, s.confidence)
                );
            }
        }
    }
    out
}

/// A CSV field: quoted when it holds a comma, a quote or a line break.
fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// The series as CSV, one row per run: `series,run,time,<by>,figure,value,change_point`
/// (`change_point` is 1 on the first run after a change). The figure in full precision, so
/// that another tool analyses the same numbers.
pub fn csv(series: &[TrendSeries]) -> String {
    let by = series.first().map_or("build", |s| s.by.as_str());
    let mut out = format!("series,run,time,{},figure,value,change_point\n", csv_field(by));
    for (i, s) in series.iter().enumerate() {
        for (n, run) in s.runs.iter().enumerate() {
            let change = s.changes.iter().any(|c| c.point.index == n);
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{}",
                i + 1,
                n + 1,
                csv_field(&run.started_at),
                csv_field(&run.position),
                csv_field(&s.figure),
                run.value,
                u8::from(change)
            );
        }
    }
    out
}

/// The most category names an x axis shows: more would overlap at the chart's width.
const MAX_NAMED_RUNS: usize = 12;

/// The trend plot of series `index` (from 0): every run's figure over its position (the
/// build, named on the axis), each segment's mean as a step line and its confidence interval
/// as a dashed band, a vertical marker at each change point.
pub fn chart(s: &TrendSeries, index: usize) -> Chart {
    let (div, unit) = s.unit();
    let n = s.runs.len();
    // Every k-th run named, and every run a change starts at: the axis stays readable.
    let every = n.div_ceil(MAX_NAMED_RUNS).max(1);
    let names: Vec<String> = s
        .runs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let at_change = s.changes.iter().any(|c| c.point.index == i);
            if i % every == 0 || at_change {
                r.position.clone()
            } else {
                String::new()
            }
        })
        .collect();
    let points: Vec<(f64, f64)> = s.runs.iter().enumerate().map(|(i, r)| (i as f64, r.value / div)).collect();
    // The segments as steps from half a run before their first to half a run after their last.
    let (mut mean, mut upper, mut lower) = (Vec::new(), Vec::new(), Vec::new());
    for g in s.segments() {
        let (x0, x1) = (g.start as f64 - 0.5, g.end as f64 - 0.5);
        mean.extend([(x0, g.mean / div), (x1, g.mean / div)]);
        upper.extend([(x0, (g.mean + g.interval) / div), (x1, (g.mean + g.interval) / div)]);
        lower.extend([(x0, (g.mean - g.interval) / div), (x1, (g.mean - g.interval) / div)]);
    }
    // The band as one outline: along the upper bounds, back along the lower ones, closed.
    let mut band = upper;
    band.extend(lower.into_iter().rev());
    if let Some(&first) = band.first() {
        band.push(first);
    }
    let series = vec![
        Series {
            shape: Shape::LineAndPoints,
            colour: Some(0),
            ..Series::line(format!("{} per run", s.figure), points)
        },
        Series { emphasis: true, ..Series::line("segment mean", mean) },
        Series { shape: Shape::Reference, ..Series::line(format!("{}% confidence of the mean", s.confidence), band) },
    ];
    let markers = s
        .changes
        .iter()
        .map(|c| Marker {
            x: c.point.index as f64 - 0.5,
            label: format!("{:+.1}% at {}", c.percent, s.runs[c.point.index].position),
        })
        .collect();
    let y = if unit.is_empty() { s.figure.clone() } else { format!("{} ({unit})", s.figure) };
    Chart {
        stem: format!("trend-{}", index + 1),
        title: format!("{} across {} runs: {} change point(s)", s.figure, n, s.changes.len()),
        x: Axis::categories(&s.by, &names),
        y: Axis::linear(y).fitted(),
        y2: None,
        series,
        markers,
        boxes: vec![],
    }
}

/// Records on `<body>` what the browser laid out, as the HTML report's script does: the plots
/// drawn at a visible size with their lines (`data-plots`), the tables with rows
/// (`data-tables`), and `data-ready` once done.
const SCRIPT: &str = "(function(){var plots=0;document.querySelectorAll('figure.plot svg').forEach(function(s){\
var r=s.getBoundingClientRect();if(r.width>100&&r.height>50&&s.querySelector('polyline,path,rect,circle'))plots++;});\
var tables=0;document.querySelectorAll('table').forEach(function(t){var r=t.getBoundingClientRect();\
if(r.height>0&&t.querySelectorAll('tbody tr').length>0)tables++;});\
var b=document.body;b.setAttribute('data-plots',plots);b.setAttribute('data-tables',tables);\
b.setAttribute('data-ready','1');})();";

/// The series as one self-contained HTML page: per series its identity, the trend plot, the
/// change points as a table and the runs as a table. `selection` says which runs were asked
/// for (the labels).
pub fn document(series: &[TrendSeries], selection: &str) -> String {
    let mut out = String::new();
    let title = match series {
        [one] => format!("netchar history: {}", one.figure),
        _ => format!("netchar history: {} series", series.len()),
    };
    crate::html::head(&mut out, &title);
    let _ = writeln!(
        out,
        "<p>Written by netchar {} from the stored runs {}: {} series{}.</p>",
        env!("CARGO_PKG_VERSION"),
        escape(selection),
        series.len(),
        if series.len() > 1 {
            " (runs of another method or on other machines are not one series: each on its own)"
        } else {
            ""
        }
    );
    for (i, s) in series.iter().enumerate() {
        let _ = writeln!(out, "<h2 id=\"series-{}\">Series {}: {}</h2>", i + 1, i + 1, escape(&s.method));
        let mut facts = vec![("method", s.method.clone()), ("host", s.host.clone()), ("target", s.target.clone())];
        if let Some(d) = &s.differs {
            facts.push(("differs from another series' method in", d.clone()));
        }
        facts.push(("figure", s.figure.clone()));
        facts.push(("change points", s.search()));
        let rows: Vec<Vec<String>> = facts.into_iter().map(|(k, v)| vec![k.to_string(), v]).collect();
        crate::html::table(&mut out, &format!("series-{}-facts", i + 1), &["series", ""], &[false, false], &rows);
        let c = chart(s, i);
        let _ = write!(out, "<figure class=\"plot\" id=\"plot-{}\">", escape(&c.stem));
        match chart::to_svg(&c) {
            Ok(svg) => out.push_str(&svg),
            Err(e) => {
                let _ = write!(out, "<p class=\"error\">plot failed: {}</p>", escape(&e));
            }
        }
        let _ = writeln!(
            out,
            "<figcaption>{}: each run's figure; the segments' means (black) with their {}% confidence intervals \
             (dashed), a red line where a segment starts.</figcaption></figure>",
            escape(&c.title),
            s.confidence
        );
        change_table(&mut out, s, i);
        let headers = ["run".to_string(), "started".into(), s.by.clone(), s.figure.clone(), "segment".into()];
        let segments = s.segments();
        let rows: Vec<Vec<String>> = s
            .runs
            .iter()
            .enumerate()
            .map(|(n, r)| {
                let segment = segments.iter().position(|g| (g.start..g.end).contains(&n)).map_or(0, |g| g + 1);
                vec![
                    (n + 1).to_string(),
                    r.started_at.clone(),
                    r.position.clone(),
                    format_g(r.value, 6),
                    segment.to_string(),
                ]
            })
            .collect();
        crate::html::table(
            &mut out,
            &format!("series-{}-runs", i + 1),
            &headers,
            &[true, false, false, true, true],
            &rows,
        );
    }
    let _ = write!(out, "<script>{SCRIPT}</script>\n</body></html>\n");
    out
}

/// The change points of series `i` as a table, or the one segment's mean when there is none.
fn change_table(out: &mut String, s: &TrendSeries, i: usize) {
    if s.changes.is_empty() {
        if let Some(all) = s.segments().first() {
            let _ = writeln!(
                out,
                "<p id=\"series-{}-no-change\">No change point: {} ± {} ({}% confidence) over {} runs.</p>",
                i + 1,
                escape(&format_g(all.mean, 6)),
                escape(&format_g(all.interval, 3)),
                s.confidence,
                all.end
            );
        }
        return;
    }
    let headers: Vec<String> = [
        "at run",
        &s.by,
        "started",
        "change",
        "mean before",
        "runs before",
        "mean after",
        "runs after",
        "p (permutations)",
        "t test",
    ]
    .iter()
    .map(|h| h.to_string())
    .collect();
    let rows: Vec<Vec<String>> = s
        .changes
        .iter()
        .map(|c| {
            let run = &s.runs[c.point.index];
            vec![
                (c.point.index + 1).to_string(),
                run.position.clone(),
                run.started_at.clone(),
                format!("{:+.2}%", c.percent),
                format!("{} ± {}", format_g(c.before.mean, 6), format_g(c.before_interval, 3)),
                c.before.n.to_string(),
                format!("{} ± {}", format_g(c.after.mean, 6), format_g(c.after_interval, 3)),
                c.after.n.to_string(),
                format!("{:.3}", c.point.p_value),
                t_test(c, s.confidence),
            ]
        })
        .collect();
    let numeric = [true, false, false, true, true, true, true, true, true, false];
    crate::html::table(out, &format!("series-{}-changes", i + 1), &headers, &numeric, &rows);
}

#[cfg(test)]
mod tests {
    use super::*;
    use netchar_stats::changepoint::{describe, e_divisive};

    fn stepped() -> TrendSeries {
        let values: Vec<f64> =
            (0..24).map(|i| if i < 14 { 100e6 } else { 90e6 } * (1.0 + 0.005 * f64::from(i % 3))).collect();
        let options = Options::default();
        let changes = describe(&values, &e_divisive(&values, &options), 95.0);
        TrendSeries {
            method: "netchar udp up".into(),
            differs: None,
            host: "h".into(),
            target: "t".into(),
            figure: "up.receiver.bits_per_second".into(),
            by: "build".into(),
            runs: values
                .iter()
                .enumerate()
                .map(|(i, v)| TrendRun { position: format!("1.0.{i}"), started_at: format!("t{i}"), value: *v })
                .collect(),
            changes,
            options,
            confidence: 95.0,
        }
    }

    #[test]
    fn segments_are_cut_at_the_change_points() {
        let s = stepped();
        assert_eq!(s.changes.iter().map(|c| c.point.index).collect::<Vec<_>>(), [14]);
        let g = s.segments();
        assert_eq!((g[0].start, g[0].end, g[1].start, g[1].end), (0, 14, 14, 24));
        assert!((g[0].mean / 1e6 - 100.5).abs() < 0.1 && (g[1].mean / 1e6 - 90.5).abs() < 0.1, "{g:?}");
    }

    #[test]
    fn the_chart_marks_the_change_and_draws_the_segments_in_mbits() {
        let s = stepped();
        let c = chart(&s, 0);
        assert_eq!(c.markers.len(), 1);
        assert_eq!(c.markers[0].x, 13.5);
        assert!(c.markers[0].label.ends_with("at 1.0.14"), "{}", c.markers[0].label);
        assert_eq!(c.x.categories[14], "1.0.14", "the change's build is named");
        assert!(c.y.label.ends_with("(Mbit/s)"));
        let mean = &c.series[1].points;
        assert_eq!(mean.len(), 4);
        assert!((mean[0].1 - 100.5).abs() < 0.1 && (mean[3].1 - 90.5).abs() < 0.1, "{mean:?}");
        let svg = chart::to_svg(&c).unwrap();
        assert!(svg.contains("at 1.0.14"));
    }

    #[test]
    fn csv_has_a_row_per_run_with_the_change_flagged() {
        let s = stepped();
        let text = csv(&[s]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "series,run,time,build,figure,value,change_point");
        assert_eq!(lines.len(), 25);
        assert!(lines[15].starts_with("1,15,t14,1.0.14,up.receiver.bits_per_second,909"), "{}", lines[15]);
        assert!(lines[15].ends_with(",1"), "{}", lines[15]);
        assert_eq!(lines.iter().filter(|l| l.ends_with(",1")).count(), 1);
    }
}
