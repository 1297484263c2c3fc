//! The rows every summary table shows (text, markdown, CSV): one per test and flow, or one per
//! request/response test. Taken from the result model only, in SI base units; each format
//! decides how to print them.

use crate::Saved;
use netchar_model::{Flow, Role, TestKind, TestResult};

/// One row of a summary table.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SummaryRow {
    /// Where the result came from (file, `file#N` for the N-th of an array).
    pub source: String,
    /// `test.protocol`: netchar or the peer's protocol.
    pub protocol: String,
    /// tcp, udp or rr.
    pub kind: &'static str,
    /// up, down, or `-` for request/response.
    pub flow: &'static str,
    /// Streams of this flow (connections for request/response).
    pub streams: u32,
    /// Sender's bytes after the warm-up, seconds and bit/s.
    pub sender: Option<Side>,
    /// Receiver's.
    pub receiver: Option<Side>,
    /// TCP retransmits (sender with TCP_INFO only).
    pub retransmits: Option<u64>,
    /// UDP datagrams lost, and as a percentage.
    pub lost: Option<(u64, f64)>,
    /// Request/response: transactions per second, round-trip p50 and p99 in seconds.
    pub rr: Option<(f64, f64, f64)>,
    /// CPU of the client and the server, % of one CPU.
    pub cpu_client: Option<f64>,
    /// Server CPU.
    pub cpu_server: Option<f64>,
    /// The result's error, if it failed.
    pub error: Option<String>,
}

/// One end's totals.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Side {
    pub bytes: u64,
    pub seconds: f64,
    pub bits_per_second: f64,
}

impl From<&netchar_model::SideTotals> for Side {
    fn from(t: &netchar_model::SideTotals) -> Self {
        Self { bytes: t.bytes, seconds: t.seconds, bits_per_second: t.bits_per_second }
    }
}

fn streams_of(r: &TestResult, flow: Flow) -> u32 {
    let mut ids: Vec<u32> =
        r.streams.iter().filter(|s| s.flow == flow && s.role == Role::Sender).map(|s| s.id).collect();
    if ids.is_empty() {
        ids = r.streams.iter().filter(|s| s.flow == flow).map(|s| s.id).collect();
    }
    ids.sort_unstable();
    ids.dedup();
    if ids.is_empty() {
        r.test.spec.streams
    } else {
        ids.len() as u32
    }
}

/// The rows of every saved result, in order.
pub(crate) fn summary_rows(saved: &[Saved]) -> Vec<SummaryRow> {
    let mut rows = Vec::new();
    for s in saved {
        let r = &s.result;
        let base = SummaryRow {
            source: s.label.clone(),
            protocol: r.test.protocol.clone(),
            kind: r.test.spec.kind.name(),
            flow: "-",
            streams: r.test.spec.streams,
            sender: None,
            receiver: None,
            retransmits: None,
            lost: None,
            rr: None,
            cpu_client: r.cpu.local.as_ref().map(|c| c.total_pct),
            cpu_server: r.cpu.remote.as_ref().map(|c| c.total_pct),
            error: r.error.clone(),
        };
        let mut any = false;
        for flow in [Flow::Up, Flow::Down] {
            let Some(f) = r.summary.flow(flow) else { continue };
            any = true;
            // A side that measured nothing (a service or peer that reports nothing back) is
            // unknown, not zero.
            let known = |t: &netchar_model::SideTotals| t.total_bytes > 0 || t.seconds > 0.0;
            rows.push(SummaryRow {
                flow: flow.name(),
                streams: streams_of(r, flow),
                sender: Some(Side::from(&f.sender)).filter(|_| known(&f.sender)),
                receiver: Some(Side::from(&f.receiver)).filter(|_| known(&f.receiver)),
                retransmits: f.sender.retransmits,
                lost: f.receiver.udp_received.as_ref().map(|u| (u.lost, u.loss_percent)),
                ..base.clone()
            });
        }
        if let Some(rr) = r.summary.rr.as_ref().or(r.summary.rr_loaded.as_ref()) {
            rows.push(SummaryRow {
                lost: rr_lost(rr).filter(|_| r.test.spec.kind == TestKind::Rr),
                ..rr_row(rr, &base)
            });
            any = true;
        }
        if !any {
            // A test that failed before any figure: still a row, with its error.
            rows.push(base.clone());
        }
        if let Some(u) = &r.summary.under_load {
            under_load_rows(u, &base, &mut rows);
        }
    }
    rows
}

/// A request/response row: transactions/s and the round trip's p50 and p99.
fn rr_row(rr: &netchar_model::RrFigures, base: &SummaryRow) -> SummaryRow {
    SummaryRow {
        flow: "-",
        rr: Some((rr.transactions_per_second, rr.latency_us.p50 / 1e6, rr.latency_us.p99 / 1e6)),
        ..base.clone()
    }
}

/// Transactions lost, and as a share of those sent; None when none was.
fn rr_lost(rr: &netchar_model::RrFigures) -> Option<(u64, f64)> {
    let all = rr.transactions + rr.lost;
    (rr.lost > 0).then(|| (rr.lost, if all > 0 { 100.0 * rr.lost as f64 / all as f64 } else { 0.0 }))
}

/// Latency under load (`rr --under-load`): a row per load flow and direction, then each
/// class's probe idle and loaded; the source says which (`FILE load BE tcp up`, `FILE probe EF
/// loaded`). CPU belongs to the whole test, on its own row.
fn under_load_rows(u: &netchar_model::UnderLoad, base: &SummaryRow, rows: &mut Vec<SummaryRow>) {
    let part = |what: String| SummaryRow {
        source: format!("{} {what}", base.source),
        streams: 1,
        cpu_client: None,
        cpu_server: None,
        error: None,
        ..base.clone()
    };
    for f in &u.flows {
        let kind = if f.protocol == "udp" { "udp" } else { "tcp" };
        for (flow, summary) in [(Flow::Up, &f.up), (Flow::Down, &f.down)] {
            let Some(s) = summary else { continue };
            rows.push(SummaryRow {
                kind,
                flow: flow.name(),
                sender: Some(Side::from(&s.sender)),
                receiver: Some(Side::from(&s.receiver)),
                retransmits: s.sender.retransmits,
                lost: s.receiver.udp_received.as_ref().map(|x| (x.lost, x.loss_percent)),
                error: f.error.clone(),
                ..part(format!("load {} {kind} {}", f.class, flow.name()))
            });
        }
        if f.up.is_none() && f.down.is_none() {
            rows.push(SummaryRow { kind, error: f.error.clone(), ..part(format!("load {} {kind}", f.class)) });
        }
    }
    for p in &u.probes {
        for (when, figures) in [("idle", &p.idle), ("loaded", &p.loaded)] {
            let row = SummaryRow { kind: "rr", ..part(format!("probe {} {when}", p.class)) };
            match figures {
                Some(rr) => rows.push(SummaryRow { lost: rr_lost(rr), error: p.error.clone(), ..rr_row(rr, &row) }),
                None => rows.push(SummaryRow { error: p.error.clone(), ..row }),
            }
        }
    }
}

/// A table for people (text and markdown): headers, which columns are numbers (right
/// aligned), the cells, and the errors to print under it.
pub(crate) struct HumanTable {
    pub headers: Vec<&'static str>,
    pub numeric: Vec<bool>,
    pub cells: Vec<Vec<String>>,
    pub errors: Vec<(String, String)>,
}

/// The summary rows as people read them: bytes with binary prefixes, rates in `rate`.
pub(crate) fn human_table(saved: &[Saved], rate: netchar_model::units::RateFormat) -> HumanTable {
    use netchar_model::units::format_bytes;
    let rows = summary_rows(saved);
    let any_rr = rows.iter().any(|r| r.rr.is_some());
    let mut headers = vec![
        "source",
        "protocol",
        "kind",
        "flow",
        "streams",
        "sent",
        "sender rate",
        "received",
        "receiver rate",
        "retr / lost",
        "cpu client",
        "cpu server",
    ];
    let mut numeric = vec![false, false, false, false, true, true, true, true, true, true, true, true];
    if any_rr {
        headers.extend(["trans/s", "p50 us", "p99 us"]);
        numeric.extend([true, true, true]);
    }
    let dash = || "-".to_string();
    let pct = |c: Option<f64>| c.map_or_else(dash, |c| format!("{c:.1}%"));
    let mut cells = Vec::new();
    let mut errors = Vec::new();
    for r in &rows {
        let bytes = |s: &Option<Side>| s.map_or_else(dash, |s| format_bytes(s.bytes));
        let bps = |s: &Option<Side>| s.map_or_else(dash, |s| rate.format(s.bits_per_second));
        let lost = match (r.lost, r.retransmits) {
            (Some((n, p)), _) => format!("{n} ({p:.3}%)"),
            (None, Some(n)) => n.to_string(),
            (None, None) => dash(),
        };
        let mut row = vec![
            r.source.clone(),
            r.protocol.clone(),
            r.kind.to_string(),
            r.flow.to_string(),
            r.streams.to_string(),
            bytes(&r.sender),
            bps(&r.sender),
            bytes(&r.receiver),
            bps(&r.receiver),
            lost,
            pct(r.cpu_client),
            pct(r.cpu_server),
        ];
        if any_rr {
            match r.rr {
                Some((tps, p50, p99)) => {
                    row.extend([format!("{tps:.0}"), format!("{:.1}", p50 * 1e6), format!("{:.1}", p99 * 1e6)])
                }
                None => row.extend([dash(), dash(), dash()]),
            }
        }
        cells.push(row);
        if let Some(e) = &r.error {
            if !errors.iter().any(|(s, _)| s == &r.source) {
                errors.push((r.source.clone(), e.clone()));
            }
        }
    }
    HumanTable { headers, numeric, cells, errors }
}
