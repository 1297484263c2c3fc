//! CSV: a header row, then one row per test and flow (the summaries) or, with intervals, one
//! row per stream, end and interval. SI base units throughout (bytes, seconds, bit/s); an
//! unknown figure is an empty field. Fields are quoted as RFC 4180 says when they need it.

use crate::rows::summary_rows;
use crate::Saved;
use netchar_model::{Role, TestResult};
use std::fmt::Write;

/// The CSV reporter.
#[derive(Debug, Default)]
pub struct CsvReporter {
    /// Rows per stream per interval instead of the summaries.
    pub intervals: bool,
}

impl CsvReporter {
    /// Summaries, or intervals when `intervals`.
    pub fn new(intervals: bool) -> Self {
        Self { intervals }
    }
}

/// The header of the summary CSV.
pub const SUMMARY_HEADER: &str = "source,protocol,kind,flow,streams,\
sender_bytes,sender_seconds,sender_bits_per_second,\
receiver_bytes,receiver_seconds,receiver_bits_per_second,\
retransmits,lost_datagrams,loss_percent,\
transactions_per_second,latency_p50_seconds,latency_p99_seconds,\
cpu_client_percent,cpu_server_percent,error";

/// The header of the interval CSV.
pub const INTERVAL_HEADER: &str = "source,protocol,kind,flow,role,stream,start_seconds,end_seconds,omitted,\
bytes,bits_per_second,retransmits,cwnd_bytes,rtt_seconds,\
datagrams,lost_datagrams,jitter_seconds";

/// A field, quoted when it holds a comma, a quote or a line break.
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(String::new, |v| v.to_string())
}

/// The summary rows of `results`.
pub fn summaries(results: &[Saved]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{SUMMARY_HEADER}");
    for r in summary_rows(results) {
        let cells = [
            field(&r.source),
            field(&r.protocol),
            r.kind.to_string(),
            if r.flow == "-" { String::new() } else { r.flow.to_string() },
            r.streams.to_string(),
            opt(r.sender.map(|s| s.bytes)),
            opt(r.sender.map(|s| s.seconds)),
            opt(r.sender.map(|s| s.bits_per_second)),
            opt(r.receiver.map(|s| s.bytes)),
            opt(r.receiver.map(|s| s.seconds)),
            opt(r.receiver.map(|s| s.bits_per_second)),
            opt(r.retransmits),
            opt(r.lost.map(|l| l.0)),
            opt(r.lost.map(|l| l.1)),
            opt(r.rr.map(|x| x.0)),
            opt(r.rr.map(|x| x.1)),
            opt(r.rr.map(|x| x.2)),
            opt(r.cpu_client),
            opt(r.cpu_server),
            field(r.error.as_deref().unwrap_or("")),
        ];
        let _ = writeln!(out, "{}", cells.join(","));
    }
    out
}

/// One row per stream, end and interval of every result, in time order.
pub fn intervals(results: &[Saved]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{INTERVAL_HEADER}");
    for s in results {
        let r = &s.result;
        for iv in &r.intervals {
            for st in &iv.streams {
                let x = &st.sample;
                let (datagrams, lost, jitter) = match (&x.udp_sent, &x.udp_received) {
                    (_, Some(u)) => (Some(u.packets), Some(u.lost), Some(u.jitter_ms / 1e3)),
                    (Some(u), None) => (Some(u.packets), None, None),
                    _ => (None, None, None),
                };
                let cells = [
                    field(&s.label),
                    field(&r.test.protocol),
                    r.test.spec.kind.name().to_string(),
                    st.flow.name().to_string(),
                    match st.role {
                        Role::Sender => "sender",
                        Role::Receiver => "receiver",
                    }
                    .to_string(),
                    st.id.to_string(),
                    x.start.to_string(),
                    x.end.to_string(),
                    x.omitted.to_string(),
                    x.bytes.to_string(),
                    x.bits_per_second.to_string(),
                    opt(x.retransmits),
                    opt(x.cwnd_bytes),
                    opt(x.rtt_us.map(|us| f64::from(us) / 1e6)),
                    opt(datagrams),
                    opt(lost),
                    opt(jitter),
                ];
                let _ = writeln!(out, "{}", cells.join(","));
            }
        }
    }
    out
}

impl crate::Reporter for CsvReporter {
    fn on_finish(&mut self, result: &TestResult) -> String {
        self.on_results(&[Saved { label: "-".into(), result: result.clone() }])
    }
    fn on_results(&mut self, results: &[Saved]) -> String {
        if self.intervals {
            intervals(results)
        } else {
            summaries(results)
        }
    }
}
