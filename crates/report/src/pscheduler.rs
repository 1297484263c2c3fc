//! The documents netchar's perfSONAR pScheduler tool plugin (`netchar pscheduler`) hands
//! pScheduler for a `throughput` test, in the shape pscheduler-test-throughput's result schema
//! gives and pScheduler's own iperf3 tool fills: a client's result ([`throughput`]), the
//! one-off server's ([`server`]), a failure ([`failure`]), a loopback run's two ends in one
//! ([`loopback`]) and the test's result from its participants' ([`merged`]).
//!
//! The plugin runs netchar as child processes and reads what they print: the client's
//! `--json` result as a [`TestResult`] (or the stand-in for none,
//! [`crate::mesh::TestOutput`]), the server's JSON log line as a [`ServerLine`].

use netchar_model::{Flow, IntervalRecord, IntervalStream, Role, SideTotals, StreamRecord, TestResult};
use serde::Deserialize;
use serde_json::{json, Map, Value};

/// A netchar result as pScheduler's throughput result: the `flow` direction's sender streams
/// (iperf3's tool reports the sender too), the receiver's rate as `receiver-throughput-bits`,
/// UDP datagrams sent, lost and jitter (ms, as iperf3's `jitter_ms`), and in `diags` the
/// client's `command` line and netchar's JSON.
pub fn throughput(result: &TestResult, flow: Flow, udp: bool, command: &str) -> Value {
    let empty = SideTotals::default();
    let summary = result.summary.flow(flow);
    let sender = summary.map_or(&empty, |s| &s.sender);
    let receiver = summary.map_or(&empty, |s| &s.receiver);
    let intervals: Vec<Value> = result.intervals.iter().map(|i| interval(i, flow, udp)).collect();
    let streams: Vec<Value> = result
        .streams
        .iter()
        .filter(|s| s.flow == flow && s.role == Role::Sender)
        .map(|s| stream_total(s, udp))
        .collect();
    let mut total = json!({
        "start": 0.0,
        "end": sender.seconds,
        "throughput-bits": sender.bits_per_second,
        "throughput-bytes": sender.bytes,
        "receiver-throughput-bits": receiver.bits_per_second,
    });
    if udp {
        // The side's datagram count, as its JSON's `packets` has it.
        let packets = sender.udp_sent.as_ref().map(|u| u.packets).or(sender.udp_received.as_ref().map(|u| u.packets));
        total["sent"] = json!(packets);
        total["lost"] = json!(receiver.udp_received.as_ref().map(|u| u.lost));
        total["jitter"] = json!(receiver.udp_received.as_ref().map(|u| u.jitter_ms));
    } else {
        total["retransmits"] = json!(sender.retransmits);
    }
    json!({
        "schema": 1,
        "succeeded": true,
        "diags": format!("{command}\n\n{}", raw_json(result)),
        "intervals": intervals,
        "summary": {"streams": streams, "summary": total},
    })
}

/// `value` as compact JSON, its keys in order as serde_json's `Value` writes them.
pub(crate) fn raw_json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value).map(|v| v.to_string()).unwrap_or_default()
}

/// One interval: the flow's sender streams and their sum.
fn interval(i: &IntervalRecord, flow: Flow, udp: bool) -> Value {
    let streams: Vec<Value> =
        i.streams.iter().filter(|s| s.flow == flow && s.role == Role::Sender).map(|s| stream_sample(s, udp)).collect();
    let mut total = Map::new();
    total.insert("start".into(), json!(i.start));
    total.insert("end".into(), json!(i.end));
    if let Some(sum) = i.sum.iter().find(|s| s.flow == flow && s.role == Role::Sender) {
        total.insert("throughput-bits".into(), json!(sum.bits_per_second));
        total.insert("throughput-bytes".into(), json!(sum.bytes));
        if let (false, Some(r)) = (udp, sum.retransmits) {
            total.insert("retransmits".into(), json!(r));
        }
    }
    total.insert("omitted".into(), json!(i.omitted));
    json!({"streams": streams, "summary": Value::Object(total)})
}

/// One stream's sample of an interval.
fn stream_sample(s: &IntervalStream, udp: bool) -> Value {
    let x = &s.sample;
    let mut d = json!({
        "stream-id": s.id,
        "start": x.start,
        "end": x.end,
        "throughput-bits": x.bits_per_second,
        "throughput-bytes": x.bytes,
        "omitted": x.omitted,
    });
    if udp {
        if let Some(u) = &x.udp_sent {
            d["sent"] = json!(u.packets);
        }
    } else {
        if let Some(r) = x.retransmits {
            d["retransmits"] = json!(r);
        }
        if let Some(w) = x.cwnd_bytes {
            d["tcp-window-size"] = json!(w);
        }
        if let Some(rtt) = x.rtt_us {
            d["rtt"] = json!(rtt);
        }
    }
    d
}

/// One stream's totals over the test.
fn stream_total(s: &StreamRecord, udp: bool) -> Value {
    let mut d = json!({
        "stream-id": s.id,
        "start": 0.0,
        "end": s.seconds,
        "throughput-bytes": s.bytes,
        "throughput-bits": if s.seconds > 0.0 { s.bytes as f64 * 8.0 / s.seconds } else { 0.0 },
    });
    if udp {
        d["sent"] = json!(s.udp_sent.as_ref().map(|u| u.packets));
    } else if let Some(r) = s.retransmits {
        d["retransmits"] = json!(r);
    }
    d
}

/// A line of `netchar server --json`'s log, as far as the plugin reads it: a test that ended
/// (`event` `test`, with the server's figures of each flow) or a connection turned away.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ServerLine {
    /// `test` or `rejected`.
    pub event: String,
    /// Why the test ended early, if it did.
    #[serde(default)]
    pub error: Option<String>,
    /// The server's figures of each flow of the test.
    #[serde(default)]
    pub flows: Vec<ServerFlow>,
}

/// One flow of a [`ServerLine`]: what the server received (up) or sent (down).
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default)]
pub struct ServerFlow {
    /// Bytes.
    pub bytes: u64,
    /// Seconds from the flow's start to its last stream's end.
    pub seconds: f64,
    /// 8 · bytes / seconds.
    pub bits_per_second: f64,
}

impl ServerLine {
    /// The line of a test that ended among a server's log lines (stderr); None if no test
    /// did (none arrived).
    pub fn find_test(log: &str) -> Option<ServerLine> {
        log.lines().filter_map(|l| serde_json::from_str::<ServerLine>(l).ok()).find(|l| l.event == "test")
    }
}

/// The one-off server's result: its figures of the test's first flow (what it received, or
/// sent with `reverse`); the client's result has both ends'.
pub fn server(line: &ServerLine, diags: &str) -> Value {
    let summary = match line.flows.first() {
        Some(f) => json!({"start": 0.0, "end": f.seconds, "throughput-bits": f.bits_per_second,
                          "throughput-bytes": f.bytes}),
        None => json!({"start": 0.0, "end": 0.0, "throughput-bits": 0.0, "throughput-bytes": 0}),
    };
    json!({"succeeded": true, "diags": diags, "intervals": [], "summary": {"streams": [], "summary": summary}})
}

/// A failed run. The throughput result schema requires `intervals` and `summary` even then.
pub fn failure(error: &str, diags: &str) -> Value {
    json!({"succeeded": false, "error": error, "diags": diags, "intervals": [], "summary": {}})
}

/// A loopback run's result: the client's (it has both ends' figures) with both ends' diags.
pub fn loopback(mut client: Value, server: &Value) -> Value {
    let diags = format!(
        "Client:\n\n{}\n\nServer:\n\n{}",
        client.get("diags").and_then(Value::as_str).unwrap_or(""),
        server.get("diags").and_then(Value::as_str).unwrap_or("")
    );
    client["diags"] = json!(diags);
    client
}

/// The test's result from the participants' results (pScheduler's merged-results):
/// participant 0's (the client's result holds both ends, whichever way the data went), with
/// every participant's diags; when it failed, the failure form with every participant's
/// error (a server that failed, no test arrived or a wrong key, explains a client's failure).
/// `one_participant`: a single-ended or loopback test, which has one result. The error is one
/// line.
pub fn merged(results: &[Value], one_participant: bool) -> Result<Value, String> {
    if !(results.len() == 2 || (results.len() == 1 && one_participant)) {
        return Err(format!("Expected 2 results in merged-results, got {}", results.len()));
    }
    let mut merged = match &results[0] {
        Value::Object(_) => results[0].clone(),
        _ => json!({"succeeded": false, "error": "participant 0 returned no result"}),
    };
    let mut diags = String::new();
    for (i, r) in results.iter().enumerate() {
        if let Some(d) = r.get("diags").and_then(Value::as_str) {
            diags.push_str(&format!("Participant {i}:\n{d}\n"));
        }
    }
    let succeeded = merged.get("succeeded") == Some(&json!(true));
    if !succeeded && results.len() == 2 {
        let errors: Vec<String> = results
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r.get("error").and_then(Value::as_str).map(|e| format!("participant {i}: {e}")))
            .collect();
        if !errors.is_empty() {
            merged["error"] = json!(errors.join("; "));
        }
    }
    if !succeeded {
        // The failure form: only what the result schema allows beside it.
        let error = merged.get("error").and_then(Value::as_str).unwrap_or("unknown failure").to_string();
        return Ok(failure(&error, &diags));
    }
    merged["diags"] = json!(diags);
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> TestResult {
        let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
    }

    /// The document with `diags` checked and cut to its first line (the rest is the fixture).
    fn shown(mut doc: Value, result: &TestResult) -> String {
        let diags = doc["diags"].as_str().unwrap().to_string();
        let (command, raw) = diags.split_once("\n\n").unwrap();
        let back: TestResult = serde_json::from_str(raw).unwrap();
        assert_eq!(&back, result, "diags carry the whole result");
        doc["diags"] = json!(format!("{command}\n\n<the result's JSON>"));
        serde_json::to_string_pretty(&doc).unwrap()
    }

    #[test]
    fn tcp_result_has_the_sender_streams_per_interval_and_the_receivers_rate() {
        let r = fixture("tcp-p2-intervals.json");
        let doc = throughput(&r, Flow::Up, false, "netchar tcp 192.0.2.2 -p 5300 -t 4 -P 2 --json");
        assert_eq!(doc["summary"]["summary"]["throughput-bytes"], json!(r.summary.up.as_ref().unwrap().sender.bytes));
        insta::assert_snapshot!("tcp", shown(doc, &r));
    }

    #[test]
    fn udp_result_has_datagrams_sent_lost_and_jitter() {
        let r = fixture("udp-reverse-intervals.json");
        let doc = throughput(&r, Flow::Down, true, "netchar udp 192.0.2.2 -p 5300 -t 4 -b 1M -R --json");
        let down = r.summary.down.as_ref().unwrap();
        let s = &doc["summary"]["summary"];
        assert_eq!(s["lost"], json!(down.receiver.udp_received.as_ref().unwrap().lost));
        assert_eq!(s["sent"], json!(down.sender.udp_sent.as_ref().unwrap().packets));
        insta::assert_snapshot!("udp_reverse", shown(doc, &r));
    }

    #[test]
    fn a_flow_the_test_did_not_run_has_zero_figures() {
        let r = fixture("tcp.json");
        let doc = throughput(&r, Flow::Down, false, "netchar tcp b --json");
        assert_eq!(doc["summary"]["streams"], json!([]));
        assert_eq!(doc["summary"]["summary"]["throughput-bytes"], json!(0));
        assert_eq!(doc["summary"]["summary"]["retransmits"], Value::Null);
    }

    #[test]
    fn server_result_is_its_first_flow() {
        let log = "{\"event\":\"rejected\",\"peer\":\"192.0.2.1:40000\",\"reason\":\"busy\"}\n\
            {\"event\":\"test\",\"protocol\":\"netchar\",\"error\":null,\"flows\":[{\"flow\":\"up\",\"role\":\"receiver\",\
            \"bytes\":125000000,\"seconds\":1.0,\"bits_per_second\":1e9}]}\n";
        let line = ServerLine::find_test(log).unwrap();
        assert_eq!(line.error, None);
        insta::assert_snapshot!(
            "server",
            serde_json::to_string_pretty(&server(&line, "netchar server --one-off")).unwrap()
        );
        let empty = ServerLine { event: "test".into(), error: None, flows: vec![] };
        assert_eq!(server(&empty, "")["summary"]["summary"]["throughput-bytes"], json!(0));
        assert_eq!(ServerLine::find_test("not JSON\n{\"event\":\"rejected\"}\n"), None);
    }

    #[test]
    fn merged_is_participant_zeros_result_with_both_diags_or_both_errors() {
        let client = json!({"schema": 1, "succeeded": true, "diags": "netchar tcp b", "intervals": [],
                            "summary": {"streams": [], "summary": {"throughput-bytes": 10}}});
        let server = json!({"succeeded": true, "diags": "netchar server", "intervals": [], "summary": {}});
        let ok = merged(&[client.clone(), server.clone()], false).unwrap();
        insta::assert_snapshot!("merged", serde_json::to_string_pretty(&ok).unwrap());
        let failed = merged(
            &[failure("netchar: authentication failed", "c"), failure("no test arrived from the client", "s")],
            false,
        )
        .unwrap();
        insta::assert_snapshot!("merged_failed", serde_json::to_string_pretty(&failed).unwrap());
        assert_eq!(merged(&[json!(null)], true).unwrap()["error"], "participant 0 returned no result");
        assert!(merged(&[client], false).is_err());
        let both = loopback(json!({"succeeded": true, "diags": "c"}), &json!({"diags": "s"}));
        assert_eq!(both["diags"], "Client:\n\nc\n\nServer:\n\ns");
    }
}
