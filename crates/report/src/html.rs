//! One self-contained HTML report: the summary table, every plot inline as SVG, both ends'
//! host metadata, and the raw JSON embedded, shown and downloadable. It loads nothing: no
//! style sheet, font, script or image from anywhere, and its Content-Security-Policy forbids
//! fetching (`default-src 'none'`), so it reads the same offline, attached to a mail or
//! archived beside the results.

use crate::markup::escape;
use crate::rows::human_table;
use crate::{chart, plots, Saved};
use netchar_model::units::RateFormat;
use netchar_model::{ConsoleLog, Flow, HostIdentity, HostInfo, TargetFigures, TargetReport, TestResult};
use std::fmt::Write;

/// The HTML reporter: silent while a test runs, the whole document at the end.
#[derive(Debug, Default)]
pub struct HtmlReporter {
    /// How rates are printed in the tables.
    pub format: RateFormat,
}

impl HtmlReporter {
    /// A reporter printing rates in `format`.
    pub fn new(format: RateFormat) -> Self {
        Self { format }
    }
}

const STYLE: &str = "body{font-family:sans-serif;margin:1.5em auto;max-width:1100px;padding:0 1em;color:#222}\
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ccc}\
table{border-collapse:collapse;margin:.5em 0;font-size:.85em}\
th,td{border:1px solid #bbb;padding:.2em .5em;text-align:left;white-space:nowrap}td.n{text-align:right}\
.wide{overflow-x:auto}\
th{background:#eee}figure{margin:1em 0}figcaption{font-size:.85em;color:#555}\
svg{max-width:100%;height:auto}pre{background:#f6f6f6;padding:.5em;max-height:24em;overflow:auto;font-size:.8em}\
.error{color:#a00}caption{caption-side:top;text-align:left;white-space:nowrap;font-size:.9em;padding:.2em 0;color:#555}\
tr.trouble td{color:#a00;font-weight:bold}";

/// Sets the download link to a blob of the embedded JSON, then records on `<body>` what the
/// browser laid out: `data-plots`, the plots drawn at a visible size with their lines, and
/// `data-tables`, the tables with rows (the browser test reads these, and `data-ready`).
const SCRIPT: &str = "(function(){var raw=document.getElementById('raw-json').textContent;\
var a=document.getElementById('download');\
a.href=URL.createObjectURL(new Blob([raw],{type:'application/json'}));\
var plots=0;document.querySelectorAll('figure.plot svg').forEach(function(s){var r=s.getBoundingClientRect();\
if(r.width>100&&r.height>50&&s.querySelector('polyline,path,rect,circle'))plots++;});\
var tables=0;document.querySelectorAll('table').forEach(function(t){var r=t.getBoundingClientRect();\
if(r.height>0&&t.querySelectorAll('tbody tr').length>0)tables++;});\
var b=document.body;b.setAttribute('data-plots',plots);b.setAttribute('data-tables',tables);\
b.setAttribute('data-ready','1');})();";

pub(crate) fn table(out: &mut String, id: &str, headers: &[impl AsRef<str>], numeric: &[bool], rows: &[Vec<String>]) {
    let _ = write!(out, "<div class=\"wide\"><table id=\"{id}\"><thead><tr>");
    for h in headers {
        let _ = write!(out, "<th>{}</th>", escape(h.as_ref()));
    }
    out.push_str("</tr></thead><tbody>\n");
    for row in rows {
        out.push_str("<tr>");
        for (i, c) in row.iter().enumerate() {
            let class = if numeric.get(i).copied().unwrap_or(false) { " class=\"n\"" } else { "" };
            let _ = write!(out, "<td{class}>{}</td>", escape(c));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table></div>\n");
}

fn host_rows(h: &HostInfo) -> Vec<(String, String)> {
    let mut rows = vec![
        ("host name".to_string(), h.hostname.clone()),
        ("kernel".to_string(), h.kernel.clone()),
        ("CPU".to_string(), h.cpu_model.clone()),
        ("CPUs".to_string(), h.cores.to_string()),
    ];
    for n in &h.interfaces {
        let mut v = n.driver.clone().unwrap_or_else(|| "driver unknown".into());
        if let Some(s) = n.speed_mbps {
            let _ = write!(v, ", {s} Mbit/s");
        }
        if let Some(m) = n.mtu {
            let _ = write!(v, ", MTU {m}");
        }
        rows.push((format!("interface {}", n.name), v));
    }
    for (k, v) in &h.sysctls {
        rows.push((k.clone(), v.clone()));
    }
    if let Some(id) = &h.identity {
        identity_rows(id, &mut rows);
    }
    rows
}

/// Offload features shown in the hosts table (every one is in the JSON): receive and
/// segmentation offloads and checksumming, which change what a test measures.
fn shown_offload(name: &str) -> bool {
    ["gro", "lro", "segmentation", "checksum"].iter().any(|k| name.contains(k))
}

/// The rows of a host's identity: what `netchar compare` warns about when two runs differ.
fn identity_rows(id: &HostIdentity, rows: &mut Vec<(String, String)>) {
    let unread = |what: &str, unavailable: &std::collections::BTreeMap<String, String>| {
        unavailable.get(what).map_or_else(|| "none".to_string(), |why| format!("not read: {why}"))
    };
    rows.push((
        "kernel command line".into(),
        id.kernel_cmdline.clone().unwrap_or_else(|| unread("kernel_cmdline", &id.unavailable)),
    ));
    let governors: Vec<String> = id.cpu_governors.iter().map(|(g, n)| format!("{g} on {n} CPUs")).collect();
    let governors = if governors.is_empty() { unread("cpu_governors", &id.unavailable) } else { governors.join(", ") };
    rows.push(("CPU frequency governors".into(), governors));
    for nic in &id.interfaces {
        let mut driver = nic.driver.clone().unwrap_or_else(|| unread("driver", &nic.unavailable));
        for (what, v) in [("version", &nic.driver_version), ("firmware", &nic.firmware_version), ("bus", &nic.bus_info)]
        {
            if let Some(v) = v {
                let _ = write!(driver, ", {what} {v}");
            }
        }
        rows.push((format!("{} driver (ethtool)", nic.name), driver));
        let (on, off): (Vec<_>, Vec<_>) =
            nic.offloads.iter().filter(|(name, _)| shown_offload(name)).partition(|(_, on)| **on);
        let names = |v: Vec<(&String, &bool)>| v.into_iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(" ");
        let offloads = if nic.offloads.is_empty() {
            unread("offloads", &nic.unavailable)
        } else {
            format!("on: {}; off: {}", names(on), names(off))
        };
        rows.push((format!("{} offloads", nic.name), offloads));
        let coalesce: Vec<String> =
            nic.coalesce.iter().filter(|(_, v)| **v > 0).map(|(k, v)| format!("{k} {v}")).collect();
        let coalesce = match (nic.coalesce.is_empty(), coalesce.is_empty()) {
            (true, _) => unread("coalesce", &nic.unavailable),
            (false, true) => "all 0".into(),
            (false, false) => coalesce.join(", "),
        };
        rows.push((format!("{} interrupt coalescing", nic.name), coalesce));
    }
}

/// The hosts section: one table per distinct pair of ends, naming the results that ran there.
fn hosts(out: &mut String, results: &[Saved]) {
    let mut pairs: Vec<(&HostInfo, Option<&HostInfo>, Vec<&str>)> = Vec::new();
    for s in results {
        let (l, r) = (&s.result.host, s.result.remote_host.as_ref());
        match pairs.iter_mut().find(|p| p.0 == l && p.1 == r) {
            Some(p) => p.2.push(&s.label),
            None => pairs.push((l, r, vec![&s.label])),
        }
    }
    for (i, (local, remote, labels)) in pairs.iter().enumerate() {
        // Named by set ("runs.json: 12 results"), not one by one: a suite has dozens.
        let mut by_set: Vec<(String, usize)> = Vec::new();
        for l in labels {
            let set = plots::set_of(l);
            match by_set.iter_mut().find(|(s, _)| *s == set) {
                Some((_, n)) => *n += 1,
                None => by_set.push((set, 1)),
            }
        }
        let named: Vec<String> =
            by_set.iter().map(|(s, n)| if *n == 1 { s.clone() } else { format!("{s} ({n} results)") }).collect();
        let _ = writeln!(out, "<p>Results: {}</p>", escape(&named.join(", ")));
        let l = host_rows(local);
        let r = remote.map(host_rows).unwrap_or_default();
        let mut keys: Vec<String> = l.iter().map(|x| x.0.clone()).collect();
        for (k, _) in &r {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
        let find = |v: &[(String, String)], k: &str| v.iter().find(|x| x.0 == k).map(|x| x.1.clone());
        let rows: Vec<Vec<String>> = keys
            .iter()
            .map(|k| {
                vec![
                    k.clone(),
                    find(&l, k).unwrap_or_default(),
                    if remote.is_some() { find(&r, k).unwrap_or_default() } else { "not reported".into() },
                ]
            })
            .collect();
        let headers = ["".to_string(), "client (this end)".to_string(), "server (far end)".to_string()];
        table(out, &format!("hosts-{}", i + 1), &headers, &[false, false, false], &rows);
    }
}

/// Latency percentiles of the request/response results, µs.
fn latency_table(out: &mut String, results: &[Saved]) {
    let mut rows = Vec::new();
    for s in results {
        for (name, f) in plots::latency_sets(&s.result) {
            let l = &f.latency_us;
            let mut row = vec![s.label.clone(), name];
            row.extend([l.min, l.p50, l.p90, l.p99, l.p999, l.max].iter().map(|v| format!("{v:.1}")));
            row.push(format!("{:.0}", f.transactions_per_second));
            rows.push(row);
        }
    }
    if rows.is_empty() {
        return;
    }
    out.push_str("<h2>Latency</h2>\n");
    let headers: Vec<String> =
        ["source", "load", "min µs", "p50 µs", "p90 µs", "p99 µs", "p99.9 µs", "max µs", "transactions/s"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    let numeric = [false, false, true, true, true, true, true, true, true];
    table(out, "latency", &headers, &numeric, &rows);
}

/// The JSON of `results` for a `<script>`-free `<pre>`: escaped as HTML text.
fn raw_json(results: &[Saved]) -> String {
    let all: Vec<&TestResult> = results.iter().map(|s| &s.result).collect();
    serde_json::to_string_pretty(&all).unwrap_or_else(|e| format!("\"cannot write the results: {e}\""))
}

/// The whole HTML document of `results`.
pub fn document(results: &[Saved], format: RateFormat) -> String {
    document_with_charts(results, format, &plots::charts(results))
}

/// [`document`] drawing `charts` (a search's, [`plots::search_charts`]) instead of the ones
/// [`plots::charts`] makes.
pub fn document_with_charts(results: &[Saved], format: RateFormat, charts: &[crate::chart::Chart]) -> String {
    let mut out = String::new();
    let title = match results {
        [one] => format!("netchar report: {}", one.label),
        _ => format!("netchar report: {} results", results.len()),
    };
    head(&mut out, &title);
    let _ = writeln!(
        out,
        "<p>Written by netchar {} from {} saved result{}.</p>",
        env!("CARGO_PKG_VERSION"),
        results.len(),
        if results.len() == 1 { "" } else { "s" }
    );
    out.push_str("<h2>Summary</h2>\n");
    let t = human_table(results, format);
    table(&mut out, "summary", &t.headers, &t.numeric, &t.cells);
    for (source, e) in &t.errors {
        let _ = writeln!(out, "<p class=\"error\">{}: error: {}</p>", escape(source), escape(e));
    }
    latency_table(&mut out, results);
    protocol_notes(&mut out, results);
    loss_table(&mut out, results);
    command_table(&mut out, results);
    target_tables(&mut out, results);
    if !charts.is_empty() {
        out.push_str("<h2>Plots</h2>\n");
    }
    for c in charts {
        let _ = write!(out, "<figure class=\"plot\" id=\"plot-{}\">", escape(&c.stem));
        match chart::to_svg(c) {
            Ok(svg) => out.push_str(&svg),
            Err(e) => {
                let _ = write!(out, "<p class=\"error\">plot failed: {}</p>", escape(&e));
            }
        }
        let _ = writeln!(out, "<figcaption>{}</figcaption></figure>", escape(&c.title));
    }
    console_tables(&mut out, results);
    out.push_str("<h2>Hosts</h2>\n");
    hosts(&mut out, results);
    out.push_str("<h2>Raw results</h2>\n");
    out.push_str(
        "<p><a id=\"download\" download=\"netchar-results.json\" href=\"#raw\">Download the results as JSON</a> \
         (the array below; <code>netchar report</code> reads it back).</p>\n",
    );
    let _ = writeln!(
        out,
        "<details id=\"raw\"><summary>JSON</summary><pre id=\"raw-json\">{}</pre></details>",
        escape(&raw_json(results))
    );
    let _ = write!(out, "<script>{SCRIPT}</script>\n</body></html>\n");
    out
}

/// What each result's protocol says of its figures (its caveats, from the protocol
/// registry): a list per result that has any.
fn protocol_notes(out: &mut String, results: &[Saved]) {
    let notes: Vec<(&Saved, Vec<String>)> = results
        .iter()
        .map(|s| (s, crate::caveats::applicable_caveats(&s.result)))
        .filter(|(_, n)| !n.is_empty())
        .collect();
    if notes.is_empty() {
        return;
    }
    out.push_str("<h2>Protocol notes</h2>\n<dl id=\"protocol-notes\">\n");
    for (s, lines) in notes {
        let _ = writeln!(out, "<dt>{} ({})</dt>", escape(&s.label), escape(&s.result.test.protocol));
        for l in lines {
            let _ = writeln!(out, "<dd>{}</dd>", escape(&l));
        }
    }
    out.push_str("</dl>\n");
}

/// Where each UDP flow's lost datagrams went (`summary.<flow>.loss_breakdown`): a row per
/// result and flow that has a breakdown, a cause whose counter is not known so marked.
fn loss_table(out: &mut String, results: &[Saved]) {
    let mut rows = Vec::new();
    for s in results {
        for flow in [Flow::Up, Flow::Down] {
            let Some(b) = s.result.summary.flow(flow).and_then(|f| f.loss_breakdown.as_ref()) else { continue };
            let mut row = vec![s.label.clone(), flow.name().to_string(), b.lost.to_string()];
            row.extend(b.causes().iter().map(|(_, v)| v.map_or_else(|| "not known".into(), |n| n.to_string())));
            row.push(b.unexplained.to_string());
            let mut note =
                if b.approximate { format!("approximate: {}", b.notes.join("; ")) } else { b.notes.join("; ") };
            if note.is_empty() {
                note = "-".into();
            }
            row.push(note);
            rows.push(row);
        }
    }
    if rows.is_empty() {
        return;
    }
    out.push_str("<h2>Loss breakdown</h2>\n");
    out.push_str(
        "<p>Each UDP flow's lost datagrams by the counters of both ends over the test (docs/json.md, \
         <code>loss_breakdown</code>): a cause counts no more than the loss it can explain; the rest is unexplained, \
         lost between the ends.</p>\n",
    );
    let mut headers: Vec<String> = ["source", "flow", "lost"].iter().map(|s| s.to_string()).collect();
    headers.extend(
        netchar_model::LossBreakdown::default().causes().iter().map(|(n, _)| crate::loss::cause_label(n).to_string()),
    );
    headers.extend(["unexplained".to_string(), "note".to_string()]);
    let mut numeric = vec![false, false, true];
    numeric.extend([true; 7]);
    numeric.push(false);
    table(out, "loss-breakdown", &headers, &numeric, &rows);
}

/// The user's commands around the results (`--step-cmd`'s runs before and after each step,
/// `--reset-cmd`'s before each run, with the time until the server answered): a row per run.
fn command_table(out: &mut String, results: &[Saved]) {
    let mut rows = Vec::new();
    for s in results {
        let reset = s.result.reset.iter().map(|r| {
            let ready = r.time_to_ready_seconds.map_or("not ready".into(), |t| format!("{t:.3}"));
            ("-".to_string(), &r.command, ready)
        });
        let steps =
            s.result.step.iter().flat_map(|st| st.commands.iter().map(|c| (st.index.to_string(), c, "-".into())));
        for (step, c, ready) in reset.chain(steps) {
            let first = c.stdout.lines().chain(c.stderr.lines()).find(|l| !l.trim().is_empty()).unwrap_or("");
            rows.push(vec![
                s.label.clone(),
                step,
                c.phase.clone(),
                c.outcome(),
                format!("{:.3}", c.seconds),
                ready,
                first.chars().take(200).collect(),
            ]);
        }
    }
    if rows.is_empty() {
        return;
    }
    out.push_str("<h2>Commands</h2>\n");
    out.push_str(
        "<p>The <code>--step-cmd</code> and <code>--reset-cmd</code> runs (docs/sweeps.md); their whole output is in \
         the raw results (<code>step.commands</code>, <code>reset.command</code>).</p>\n",
    );
    let headers: Vec<String> = ["source", "step", "phase", "outcome", "seconds", "ready after s", "first line"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let numeric = [false, true, false, false, true, true, false];
    table(out, "commands", &headers, &numeric, &rows);
}

/// The far end's own figures, one table per result that has them (a target's: the C
/// responder on a board): its idle share, its cost per unit of work, then every counter that
/// moved, those counting trouble (drops, errors, retransmissions) in a `trouble` row; the
/// build the figures are of as the caption.
fn target_tables(out: &mut String, results: &[Saved]) {
    let targets: Vec<(&Saved, &TargetReport)> =
        results.iter().filter_map(|s| s.result.target.as_ref().map(|t| (s, t))).collect();
    if targets.is_empty() {
        return;
    }
    out.push_str("<h2>Target</h2>\n");
    for (i, (s, t)) in targets.into_iter().enumerate() {
        let build = t.build.as_deref().unwrap_or("not reported");
        let _ = writeln!(
            out,
            "<div class=\"wide\"><table id=\"target-{}\" class=\"target\"><caption>{}: build {}</caption>\
             <thead><tr><th>figure</th><th>value</th></tr></thead><tbody>",
            i + 1,
            escape(&s.label),
            escape(build)
        );
        for (name, value, trouble) in target_rows(t) {
            let class = if trouble { " class=\"trouble\"" } else { "" };
            let _ = writeln!(out, "<tr{class}><td>{}</td><td class=\"n\">{}</td></tr>", escape(&name), escape(&value));
        }
        out.push_str("</tbody></table></div>\n");
    }
}

/// The target's console, one table per result that has one, under the plots: each line at
/// its second of the test (the throughput chart's time axis, where the flagged ones are
/// marked), flagged lines in the `trouble` style.
fn console_tables(out: &mut String, results: &[Saved]) {
    let consoles: Vec<(&Saved, &ConsoleLog)> =
        results.iter().filter_map(|s| s.result.console.as_ref().map(|c| (s, c))).collect();
    if consoles.is_empty() {
        return;
    }
    out.push_str("<h2>Console</h2>\n");
    for (i, (s, c)) in consoles.into_iter().enumerate() {
        let mut caption =
            format!("{}: {}; {} lines, {} flagged", s.label, c.source, c.lines.len(), c.flagged().count());
        if c.dropped > 0 {
            caption.push_str(&format!(", {} more dropped (over the bound)", c.dropped));
        }
        if let Some(end) = &c.ended {
            caption.push_str(&format!("; ended at {:.3} s: {}", end.t, end.reason));
        }
        let _ = writeln!(
            out,
            "<div class=\"wide\"><table id=\"console-{}\" class=\"console\"><caption>{}</caption>\
             <thead><tr><th>t (s)</th><th>flag</th><th>line</th></tr></thead><tbody>",
            i + 1,
            escape(&caption)
        );
        for l in &c.lines {
            let (class, flag) = match l.flag {
                Some(f) => (" class=\"trouble\"", f.name()),
                None => ("", ""),
            };
            let _ = writeln!(
                out,
                "<tr{class}><td class=\"n\">{:.3}</td><td>{flag}</td><td><code>{}</code></td></tr>",
                l.t,
                escape(&l.text)
            );
        }
        out.push_str("</tbody></table></div>\n");
    }
}

/// The rows of a target's table: (figure, value, counts trouble); never none, so that every
/// table has a body.
fn target_rows(t: &TargetReport) -> Vec<(String, String, bool)> {
    let mut rows = Vec::new();
    if let Some(idle) = t.idle_pct {
        rows.push(("idle (idle loop)".to_string(), format!("{idle:.1}%"), false));
    }
    if let Some(busy) = t.busy_seconds {
        rows.push(("busy time".to_string(), format!("{busy:.6} s"), false));
    }
    if let (Some(unit), Some(n)) = (t.unit, t.units) {
        rows.push((format!("{}s", unit.name()), n.to_string(), false));
        if let Some(ns) = t.busy_ns_per_unit() {
            rows.push((format!("busy per {}", unit.name()), format!("{} ns", crate::cost::cost_figure(ns)), false));
        }
        if let (Some(i), Some(at)) = (t.instructions_per_unit(), t.ns_per_instruction) {
            let value = format!("{} (at {at} ns each)", crate::cost::cost_figure(i));
            rows.push((format!("instructions per {}", unit.name()), value, false));
        }
    }
    let f = &t.figures;
    if let (Some(count), Some(per_second)) = (f.idle_count, f.idle_per_second) {
        rows.push(("idle count (per second unloaded)".to_string(), format!("{count} ({per_second})"), false));
    }
    rows.push(("counters that moved".to_string(), f.counters.len().to_string(), false));
    for (name, v) in &f.counters {
        rows.push((name.clone(), v.to_string(), *v > 0 && TargetFigures::is_trouble(name)));
    }
    rows
}

/// The head of a self-contained document titled `title`: the same policy and style as the report.
pub(crate) fn head(out: &mut String, title: &str) {
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; \
         script-src 'unsafe-inline'; img-src data:\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{STYLE}</style></head>\n<body>\n<h1>{}</h1>\n",
        escape(title),
        escape(title)
    );
}

/// The HTML report of a mesh (`netchar mesh matrix --format html`): per matrix its heat map
/// and the same figures as a table, then the `mesh run` lines it was made of (`lines`, one JSON
/// object a line). Self-contained as [`document`]; it needs no script.
pub fn mesh_document(matrices: &[crate::heatmap::Matrix], lines: &str) -> String {
    let mut out = String::new();
    let nodes = matrices.first().map(|m| m.names.len()).unwrap_or(0);
    head(&mut out, &format!("netchar mesh: {nodes} nodes"));
    let _ = writeln!(
        out,
        "<p>Written by netchar {} from {} <code>mesh run</code> line{}. Rows are the sources, columns the destinations.</p>",
        env!("CARGO_PKG_VERSION"),
        lines.lines().count(),
        if lines.lines().count() == 1 { "" } else { "s" }
    );
    for m in matrices {
        let _ = writeln!(out, "<h2>{} ({})</h2>", escape(&m.metric), escape(&m.unit));
        let _ = write!(out, "<figure class=\"plot heatmap\" id=\"heatmap-{}\">", escape(&m.metric));
        out.push_str(&crate::heatmap::svg(m));
        let _ = writeln!(
            out,
            "<figcaption>{} from each source (row) to each destination (column), {}.</figcaption></figure>",
            escape(&m.metric),
            escape(&m.unit)
        );
        let mut headers = vec!["source \\ destination".to_string()];
        headers.extend(m.names.iter().cloned());
        let rows: Vec<Vec<String>> = m
            .names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let mut row = vec![n.clone()];
                row.extend(m.names.iter().enumerate().map(|(j, _)| match m.cells[i][j] {
                    _ if i == j => "–".to_string(),
                    Some(v) => format!("{v:.1}"),
                    None => "missing".to_string(),
                }));
                row
            })
            .collect();
        let mut numeric = vec![false];
        numeric.extend(m.names.iter().map(|_| true));
        table(&mut out, &format!("matrix-{}", m.metric), &headers, &numeric, &rows);
    }
    out.push_str("<h2>Raw lines</h2>\n");
    let _ = writeln!(
        out,
        "<details id=\"raw\"><summary>mesh run lines</summary><pre id=\"raw-lines\">{}</pre></details>",
        escape(lines)
    );
    out.push_str("</body></html>\n");
    out
}

impl crate::Reporter for HtmlReporter {
    fn on_finish(&mut self, result: &TestResult) -> String {
        document(&[Saved { label: "-".into(), result: result.clone() }], self.format)
    }
    fn on_results(&mut self, results: &[Saved]) -> String {
        document(results, self.format)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{peer_result, short_caveat};
    use netchar_model::{Caveat, FarEnd};

    #[test]
    fn the_html_report_lists_the_caveats_that_apply() {
        let note = Caveat::always(Some(Flow::Up), "the peer reports nothing back over TCP");
        let mut r = peer_result(FarEnd::Reports, vec![note, short_caveat()]);
        assert_eq!(crate::caveats::applicable_caveats(&r), ["up: the peer reports nothing back over TCP"]);
        let f = r.summary.up.as_mut().unwrap();
        f.receiver.total_bytes = f.sender.total_bytes - 10;
        assert_eq!(crate::caveats::applicable_caveats(&r).len(), 2);
        let html = document(&[Saved { label: "t".into(), result: r }], RateFormat::AutoBits);
        assert!(html.contains("<dd>up: the peer reports nothing back over TCP</dd>"), "{html}");
    }
}
