//! A mesh's lines and its N×N matrix (`netchar mesh`): `mesh run` prints one [`MeshLine`] per
//! test it ran, and `mesh matrix` reads them back ([`MeshLine::parse`]) into one figure per
//! ordered pair of nodes ([`cells`]), written as a text table ([`text`]), CSV ([`csv`]) or the
//! HTML report's heat maps ([`heat_maps`], [`crate::html::mesh_document`]); [`matrix`] picks
//! by [`Format`]. Rows are the sources, columns the destinations.

use crate::heatmap::Matrix;
use netchar_model::{Flow, TestResult};
use serde::{Deserialize, Deserializer, Serialize};
use std::fmt::Write as _;

/// What `netchar TEST --json` prints for one test: its result, or, for a test that never
/// started, the stand-in that only says why ([`crate::json::no_result_json`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TestOutput {
    /// The test's result (with its error, if it failed on the way).
    Result(Box<TestResult>),
    /// No result.
    NoResult(NoResult),
}

/// The stand-in for a result of a test that never started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoResult {
    /// [`netchar_model::SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Why there is no result.
    pub error: Option<String>,
}

impl TestOutput {
    /// The result, if the test started.
    pub fn result(&self) -> Option<&TestResult> {
        match self {
            Self::Result(r) => Some(r),
            Self::NoResult(_) => None,
        }
    }

    /// As one line of compact JSON, keys in alphabetical order (as serde_json's `Value`
    /// writes them).
    pub fn to_json(&self) -> String {
        crate::pscheduler::raw_json(self)
    }

    /// Why the test failed or never started; None if it succeeded.
    pub fn error(&self) -> Option<&str> {
        match self {
            Self::Result(r) => r.error.as_deref(),
            Self::NoResult(n) => n.error.as_deref(),
        }
    }
}

/// One line of `mesh run`: a test of the slot plan, its result or why there is none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeshLine {
    /// The round of the slot plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round: Option<usize>,
    /// The node that ran the client.
    pub source: String,
    /// The node whose server it measured.
    pub destination: String,
    /// When the client started, Unix seconds (absent for a slot missed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_unix: Option<f64>,
    /// When it ended, Unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_unix: Option<f64>,
    /// What the client printed; a line read back without a readable result has none.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "readable")]
    pub result: Option<TestOutput>,
    /// Why the client printed no result (it failed to start, was stopped at the end of its
    /// slot, or the slot was missed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A line's result if it is one (a pair whose result cannot be read has no figure).
fn readable<'de, D: Deserializer<'de>>(d: D) -> Result<Option<TestOutput>, D::Error> {
    let v = Option::<serde_json::Value>::deserialize(d)?;
    Ok(v.and_then(|v| serde_json::from_value(v).ok()))
}

impl MeshLine {
    /// The line as `mesh run` prints it: one JSON object, keys in alphabetical order.
    pub fn to_json(&self) -> String {
        crate::pscheduler::raw_json(self)
    }

    /// A `mesh run` line from a log line (anything before the first `{`, such as `kubectl
    /// logs --prefix`'s prefix, is skipped) and its JSON; None for any other line.
    pub fn parse(line: &str) -> Option<(MeshLine, &str)> {
        let json = &line[line.find('{')?..];
        serde_json::from_str(json).ok().map(|l| (l, json))
    }
}

/// The figure of a matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// The receiver's rate, Mbit/s (the up flow's, else the down flow's).
    Throughput,
    /// The mean of the TCP sender's smoothed RTT samples over the intervals, µs.
    Rtt,
    /// The request/response median, µs.
    Latency,
}

impl Metric {
    /// Parses a `--metric` value.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "throughput" => Self::Throughput,
            "rtt" => Self::Rtt,
            "latency" => Self::Latency,
            _ => return None,
        })
    }

    /// Its `--metric` name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Throughput => "throughput",
            Self::Rtt => "rtt",
            Self::Latency => "latency",
        }
    }

    /// Its unit.
    pub fn unit(self) -> &'static str {
        match self {
            Self::Throughput => "Mbit/s",
            Self::Rtt | Self::Latency => "µs",
        }
    }

    /// The figure of one result.
    pub fn of(self, r: &TestResult) -> Option<f64> {
        match self {
            Self::Throughput => [Flow::Up, Flow::Down]
                .into_iter()
                .find_map(|f| r.summary.flow(f))
                .map(|s| s.receiver.bits_per_second / 1e6),
            Self::Latency => r.summary.rr.as_ref().map(|rr| rr.latency_us.p50),
            Self::Rtt => {
                let rtts: Vec<f64> = r
                    .intervals
                    .iter()
                    .flat_map(|i| &i.streams)
                    .filter_map(|s| s.sample.rtt_us)
                    .map(f64::from)
                    .collect();
                (!rtts.is_empty()).then(|| rtts.iter().sum::<f64>() / rtts.len() as f64)
            }
        }
    }
}

/// How `mesh matrix` writes the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// An aligned table.
    Text,
    /// Comma-separated values, the figures in full.
    Csv,
    /// One self-contained HTML page of heat maps, with the lines.
    Html,
}

/// The matrix of `metric` from `lines` in `format`; `raw` is the lines' JSON as read, which
/// the HTML page carries.
pub fn matrix(lines: &[MeshLine], raw: &str, metric: Metric, format: Format) -> String {
    match format {
        Format::Text => {
            let (names, cells) = cells(lines, metric);
            text(&names, &cells, metric)
        }
        Format::Csv => {
            let (names, cells) = cells(lines, metric);
            csv(&names, &cells)
        }
        Format::Html => crate::html::mesh_document(&heat_maps(lines, metric), raw),
    }
}

/// The matrices the HTML report draws: throughput (unless no pair has one, as request/response
/// meshes), then the figure `metric` names.
pub fn heat_maps(lines: &[MeshLine], metric: Metric) -> Vec<Matrix> {
    let mut maps = Vec::new();
    for m in [Metric::Throughput, metric] {
        if maps.iter().any(|x: &Matrix| x.metric == m.name()) {
            continue;
        }
        let (names, cells) = cells(lines, m);
        if m == Metric::Throughput && metric != Metric::Throughput && cells.iter().flatten().all(Option::is_none) {
            continue;
        }
        maps.push(Matrix {
            metric: m.name().to_string(),
            unit: m.unit().to_string(),
            higher_is_better: m == Metric::Throughput,
            names,
            cells,
        });
    }
    maps
}

/// Node names, sorted, and the figure per (source, destination): None where the test failed,
/// never started or is missing. A later line of a pair replaces an earlier one.
pub fn cells(lines: &[MeshLine], metric: Metric) -> (Vec<String>, Vec<Vec<Option<f64>>>) {
    let mut names: Vec<String> = Vec::new();
    for l in lines {
        for n in [&l.source, &l.destination] {
            if !names.contains(n) {
                names.push(n.clone());
            }
        }
    }
    names.sort();
    let mut cells = vec![vec![None; names.len()]; names.len()];
    for l in lines {
        let i = names.iter().position(|n| *n == l.source).unwrap_or(0);
        let j = names.iter().position(|n| *n == l.destination).unwrap_or(0);
        cells[i][j] =
            l.result.as_ref().filter(|o| o.error().is_none()).and_then(TestOutput::result).and_then(|r| metric.of(r));
    }
    (names, cells)
}

/// The matrix as an aligned table, one decimal; `-` on the diagonal, `missing` where a pair
/// has no figure.
pub fn text(names: &[String], cells: &[Vec<Option<f64>>], metric: Metric) -> String {
    let width = names.iter().map(|n| n.len()).max().unwrap_or(4).max(10);
    let mut out = format!("{} ({}), rows: source, columns: destination\n{:width$}", metric.name(), metric.unit(), "");
    for n in names {
        let _ = write!(out, " {n:>width$}");
    }
    out.push('\n');
    for (i, n) in names.iter().enumerate() {
        let _ = write!(out, "{n:width$}");
        for (j, c) in cells[i].iter().enumerate() {
            let cell = match c {
                _ if i == j => "-".to_string(),
                Some(v) => format!("{v:.1}"),
                None => "missing".into(),
            };
            let _ = write!(out, " {cell:>width$}");
        }
        out.push('\n');
    }
    out
}

/// The matrix as CSV: a `source` column, then one per destination; empty where a pair has no
/// figure.
pub fn csv(names: &[String], cells: &[Vec<Option<f64>>]) -> String {
    let mut out = format!("source,{}\n", names.join(","));
    for (i, n) in names.iter().enumerate() {
        let row: Vec<String> = cells[i].iter().map(|c| c.map(|v| format!("{v}")).unwrap_or_default()).collect();
        let _ = writeln!(out, "{n},{}", row.join(","));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> TestResult {
        let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
    }

    fn line(source: &str, destination: &str, result: Option<TestOutput>, error: Option<&str>) -> MeshLine {
        MeshLine {
            round: Some(0),
            source: source.into(),
            destination: destination.into(),
            started_unix: Some(1_800_000_000.0),
            ended_unix: Some(1_800_000_001.5),
            result,
            error: error.map(str::to_string),
        }
    }

    /// A TCP result whose receiver got `bps`.
    fn tcp(bps: f64) -> Option<TestOutput> {
        let mut r = fixture("tcp.json");
        r.summary.up.as_mut().unwrap().receiver.bits_per_second = bps;
        Some(TestOutput::Result(Box::new(r)))
    }

    /// Four nodes: a, b, c measured (c → a failed, a → c stopped), d only in a line that
    /// never started.
    fn lines() -> Vec<MeshLine> {
        let mut busy = fixture("tcp.json");
        busy.error = Some("busy".into());
        vec![
            line("b", "a", tcp(2e9), None),
            line("a", "b", tcp(1e9), None),
            line("b", "c", tcp(941.25e6), None),
            line("c", "b", tcp(1.5e9), None),
            line("a", "c", None, Some("stopped at the end of its slot")),
            line("c", "a", Some(TestOutput::Result(Box::new(busy))), None),
            line(
                "d",
                "a",
                Some(TestOutput::NoResult(NoResult { schema_version: 1, error: Some("connection refused".into()) })),
                None,
            ),
        ]
    }

    #[test]
    fn cells_take_each_pairs_figure_and_leave_failures_empty() {
        let (names, cells) = cells(&lines(), Metric::Throughput);
        assert_eq!(names, ["a", "b", "c", "d"]);
        assert_eq!(cells[0][1], Some(1000.0));
        assert_eq!(cells[1][0], Some(2000.0));
        assert_eq!((cells[0][2], cells[2][0], cells[3][0]), (None, None, None));
        insta::assert_snapshot!("matrix_csv", csv(&names, &cells));
        insta::assert_snapshot!("matrix_text", text(&names, &cells, Metric::Throughput));
        let mut rr = line("a", "b", Some(TestOutput::Result(Box::new(fixture("rr.json")))), None);
        assert_eq!(cells_of(&rr, Metric::Latency), Some(16.447));
        assert_eq!(cells_of(&rr, Metric::Throughput), None);
        rr.result = Some(TestOutput::Result(Box::new(fixture("tcp-p2-intervals.json"))));
        // The TCP senders' samples over four intervals: (154 + 242 + 242 + 234 + 106 + 123 + 203 + 189) / 8.
        assert_eq!(cells_of(&rr, Metric::Rtt), Some(186.625));
    }

    fn cells_of(l: &MeshLine, metric: Metric) -> Option<f64> {
        cells(std::slice::from_ref(l), metric).1[0][1]
    }

    #[test]
    fn heat_maps_draw_throughput_and_the_latency_figure_asked_for() {
        let tcp = line("a", "b", Some(TestOutput::Result(Box::new(fixture("tcp-p2-intervals.json")))), None);
        let metrics = |lines: &[MeshLine], metric| -> Vec<String> {
            heat_maps(lines, metric).into_iter().map(|m| m.metric).collect()
        };
        assert_eq!(metrics(std::slice::from_ref(&tcp), Metric::Throughput), ["throughput"]);
        let maps = heat_maps(std::slice::from_ref(&tcp), Metric::Rtt);
        assert_eq!(maps.iter().map(|m| m.metric.as_str()).collect::<Vec<_>>(), ["throughput", "rtt"]);
        assert_eq!(
            (maps[1].cells[0][1], maps[1].unit.as_str(), maps[1].higher_is_better),
            (Some(186.625), "µs", false)
        );
        // A request/response mesh has no throughput to draw.
        let rr = line("a", "b", Some(TestOutput::Result(Box::new(fixture("rr.json")))), None);
        assert_eq!(metrics(&[rr], Metric::Latency), ["latency"]);
        insta::assert_debug_snapshot!("heat_maps", heat_maps(&lines(), Metric::Throughput));
    }

    #[test]
    fn lines_read_back_as_run_printed_them() {
        for l in lines() {
            let text = format!("[pod/netchar-mesh-a/mesh] {}", l.to_json());
            let (back, json) = MeshLine::parse(&text).unwrap();
            assert_eq!(back, l);
            assert!(json.starts_with('{') && json.ends_with('}'));
        }
        let missed = MeshLine {
            round: Some(3),
            started_unix: None,
            ended_unix: None,
            ..line("a", "b", None, Some("missed the slot (started too late)"))
        };
        insta::assert_snapshot!("missed_slot_line", missed.to_json());
        // The stand-in for no result, as `netchar --json` prints it.
        let none: TestOutput = serde_json::from_str(&crate::json::no_result_json(Some("refused"))).unwrap();
        assert_eq!(none.error(), Some("refused"));
        assert!(none.result().is_none());
        // A line without a readable result is still a pair, without a figure.
        let (odd, _) = MeshLine::parse(r#"{"source": "a", "destination": "b", "result": {"summary": {}}}"#).unwrap();
        assert_eq!(odd.result, None);
        assert!(MeshLine::parse("no JSON here").is_none());
        assert!(MeshLine::parse(r#"{"source": "a"}"#).is_none());
    }
}
