//! `netchar server`'s log: one line per event on stderr, a test that ended or a connection
//! turned away, as text or as one JSON object per line (`--json`). The format is chosen once,
//! when the server starts ([`for_output`]); scripts and tests read these lines, so both
//! formats stay as they are.
//!
//! Text:
//! `test from 192.0.2.1:40000 data 192.0.2.1: tcp x1 up: received 1000 bytes in 1.000 s = 8.00 kbit/s`
//! (a peer protocol's name first, `iperf3 test from ...`), `rejected 192.0.2.1:40000: REASON`.
//! JSON lines: `{"event":"test",...}` and `{"event":"rejected","peer":...,"reason":...}`.

use netchar_model::units::format_si;
use netchar_model::{Flow, Role, StreamRecord, TestSpec};
use std::net::{IpAddr, SocketAddr};

/// One event of the server's log.
#[derive(Debug, Clone, Copy)]
pub enum LogEntry<'a> {
    /// A test ended (well or not).
    Test(&'a TestEntry<'a>),
    /// A connection or request was turned away before any test.
    Rejected {
        /// Who.
        peer: SocketAddr,
        /// Why.
        reason: &'a str,
    },
}

/// One test as the server saw it.
#[derive(Debug, Clone)]
pub struct TestEntry<'a> {
    /// The protocol the client spoke: "netchar", or a peer protocol's name ("iperf3", ...).
    pub protocol: &'a str,
    /// The client's software and version as it told them.
    pub peer_software: Option<&'a str>,
    /// The client's control connection.
    pub peer: SocketAddr,
    /// Where each data stream came from (TCP) or was sent to (UDP), by stream id.
    pub data_paths: &'a [(u32, SocketAddr)],
    /// The authenticated user.
    pub user: Option<&'a str>,
    /// The test it ran.
    pub spec: &'a TestSpec,
    /// The server's records of every stream.
    pub streams: &'a [StreamRecord],
    /// Tests running at once, this one included.
    pub concurrent_tests: u32,
    /// Data connections and setup datagrams refused for this test.
    pub refused_data: u64,
    /// Why it ended early, if it did.
    pub error: Option<&'a str>,
}

/// A server log format: one line per event, without its newline.
pub trait ServerLogFormat: Send + Sync {
    /// The line of one event.
    fn line(&self, entry: LogEntry<'_>) -> String;
}

/// The format the server's flags ask for: JSON lines with `--json`, else text.
pub fn for_output(json: bool) -> Box<dyn ServerLogFormat> {
    if json {
        Box::new(JsonLines)
    } else {
        Box::new(TextLines)
    }
}

/// Text lines, for people.
#[derive(Debug, Default, Clone, Copy)]
pub struct TextLines;

/// One JSON object per line, for programs.
#[derive(Debug, Default, Clone, Copy)]
pub struct JsonLines;

/// One flow's figures as the server measured them.
struct FlowFigures {
    name: &'static str,
    role: Role,
    bytes: u64,
    seconds: f64,
    bits_per_second: f64,
    /// UDP sends the kernel refused (a firewall, a full queue): counted, never sent.
    send_errors: u64,
}

/// The server's figures of each flow of the test: it receives the up flow and sends the down
/// one.
fn flows(t: &TestEntry<'_>) -> Vec<FlowFigures> {
    t.spec
        .direction
        .flows()
        .iter()
        .map(|flow| {
            let mine: Vec<_> = t.streams.iter().filter(|s| s.flow == *flow).collect();
            let bytes: u64 = mine.iter().map(|s| s.bytes).sum();
            // A flow that began late (an iperf2 -r dial-back) is timed from its start.
            let start = mine.iter().map(|s| s.started_seconds.unwrap_or(0.0)).fold(f64::INFINITY, f64::min);
            let end = mine.iter().map(|s| s.seconds).fold(0.0, f64::max);
            let seconds = (end - if start.is_finite() { start } else { 0.0 }).max(0.0);
            FlowFigures {
                name: flow.name(),
                role: if *flow == Flow::Up { Role::Receiver } else { Role::Sender },
                bytes,
                seconds,
                bits_per_second: netchar_model::bits_per_second(bytes, seconds),
                send_errors: mine.iter().filter_map(|s| s.udp_sent.as_ref()).map(|u| u.send_errors).sum(),
            }
        })
        .collect()
}

/// Text a client chose (a stop reason, a decoder's error echoing its bytes) on one line: a
/// newline in it must not forge another log line.
fn one_line(s: &str) -> String {
    s.chars().flat_map(|c| if c.is_control() { c.escape_default().collect::<Vec<_>>() } else { vec![c] }).collect()
}

impl ServerLogFormat for TextLines {
    fn line(&self, entry: LogEntry<'_>) -> String {
        let t = match entry {
            LogEntry::Rejected { peer, reason } => return format!("rejected {peer}: {}", one_line(reason)),
            LogEntry::Test(t) => t,
        };
        let parts: Vec<String> = flows(t)
            .iter()
            .map(|f| {
                let role = if f.role == Role::Sender { "sent" } else { "received" };
                let refused =
                    if f.send_errors > 0 { format!(" ({} sends refused)", f.send_errors) } else { String::new() };
                format!(
                    "{}: {role} {} bytes in {:.3} s = {}{refused}",
                    f.name,
                    f.bytes,
                    f.seconds,
                    format_si(f.bits_per_second, "bit/s")
                )
            })
            .collect();
        // Each address the data came from (or went to) once, with its stream count.
        let mut by_ip: Vec<(IpAddr, usize)> = Vec::new();
        for (_, a) in t.data_paths {
            match by_ip.iter_mut().find(|(ip, _)| *ip == a.ip()) {
                Some((_, n)) => *n += 1,
                None => by_ip.push((a.ip(), 1)),
            }
        }
        let paths: Vec<String> =
            by_ip.iter().map(|(ip, n)| if *n == 1 { ip.to_string() } else { format!("{ip} ({n} streams)") }).collect();
        let err = t.error.map(|e| format!(" (error: {})", one_line(e))).unwrap_or_default();
        let user = t.user.map(|u| format!(" user {}", one_line(u))).unwrap_or_default();
        let data = if paths.is_empty() { String::new() } else { format!(" data {}", paths.join(",")) };
        let refused =
            if t.refused_data > 0 { format!(" ({} data streams refused)", t.refused_data) } else { String::new() };
        let proto =
            if t.protocol == netchar_model::NATIVE_PROTOCOL { String::new() } else { format!("{} ", t.protocol) };
        format!(
            "{proto}test from {}{user}{data}{refused}: {} x{} {}{err}",
            t.peer,
            t.spec.kind.name(),
            t.spec.streams,
            parts.join("; ")
        )
    }
}

impl ServerLogFormat for JsonLines {
    fn line(&self, entry: LogEntry<'_>) -> String {
        let t = match entry {
            LogEntry::Rejected { peer, reason } => {
                return serde_json::json!({"event": "rejected", "peer": peer.to_string(), "reason": reason}).to_string()
            }
            LogEntry::Test(t) => t,
        };
        let flows: Vec<_> = flows(t)
            .iter()
            .map(|f| {
                let mut flow = serde_json::json!({"flow": f.name, "role": f.role, "bytes": f.bytes,
                    "seconds": f.seconds, "bits_per_second": f.bits_per_second});
                if f.send_errors > 0 {
                    flow["send_errors"] = f.send_errors.into();
                }
                flow
            })
            .collect();
        // Every stream's address and port (the text line names each address once).
        let data: Vec<_> =
            t.data_paths.iter().map(|(id, a)| serde_json::json!({"stream": id, "address": a.to_string()})).collect();
        serde_json::json!({"event": "test", "protocol": t.protocol, "peer_software": t.peer_software,
            "peer": t.peer.to_string(), "user": t.user, "data_paths": data, "refused_data": t.refused_data,
            "kind": t.spec.kind, "direction": t.spec.direction, "streams": t.spec.streams,
            "concurrent_tests": t.concurrent_tests, "flows": flows, "error": t.error})
        .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_text_cannot_forge_a_log_line() {
        let forged = LogEntry::Rejected {
            peer: "192.0.2.1:1".parse().unwrap(),
            reason: "stopped by the client: x\ntest from 10.0.0.1:5: tcp x1 up: received 1 bytes",
        };
        let line = TextLines.line(forged);
        assert_eq!(line.lines().count(), 1, "{line}");
        assert!(line.contains("\\n"), "{line}");
    }
}
