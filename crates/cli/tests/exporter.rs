//! `netchar exporter`: probes of a loopback `netchar server` through the exporter's HTTP
//! endpoint, the exposition text checked against the format's rules (by a strict parser here,
//! and by Python's prometheus_client where installed), the bytes against the server's own log,
//! and every refusal (400, 403, 503) with no traffic to the target.

#[path = "support/loopback.rs"]
mod common;
#[path = "support/require.rs"]
mod require;

use common::*;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// An exporter on an ephemeral port, killed on drop.
struct Exporter {
    child: Child,
    port: u16,
}

impl Exporter {
    fn start(extra: &[&str]) -> Self {
        let mut child = Command::new(BIN)
            .args(["exporter", "--listen", "127.0.0.1:0"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn exporter");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let first = lines.next().expect("exporter start line").unwrap();
        let port =
            first.rsplit(':').next().and_then(|p| p.parse().ok()).unwrap_or_else(|| panic!("no port in {first:?}"));
        std::thread::spawn(move || for _ in lines.map_while(Result::ok) {});
        Exporter { child, port }
    }

    fn get(&self, path: &str, headers: &[&str]) -> (u16, String) {
        http_get(self.port, path, headers)
    }
}

/// GET `path` from 127.0.0.1:`port` with optional extra header lines; returns (status, body).
fn http_get(port: u16, path: &str, headers: &[&str]) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    let status = resp.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    // tiny_http answers with Content-Length: no chunking to undo.
    let body = resp.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One sample: name, labels, value.
type Sample = (String, HashMap<String, String>, f64);

/// Parses the text exposition format strictly: every sample's family has HELP and TYPE lines
/// before its samples, each family once, names are `netchar_` snake case, label values quoted.
fn parse_exposition(text: &str) -> Vec<Sample> {
    let mut types: HashMap<String, String> = HashMap::new();
    let mut helped: HashSet<String> = HashSet::new();
    let mut seen_samples_of: HashSet<String> = HashSet::new();
    let mut samples = Vec::new();
    let valid_name = |n: &str| {
        n.starts_with("netchar_") && n.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_')
    };
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').expect("HELP name text");
            assert!(valid_name(name) && !help.is_empty(), "{line}");
            assert!(helped.insert(name.to_string()), "HELP twice for {name}");
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE name kind");
            assert!(["gauge", "counter", "summary", "histogram", "untyped"].contains(&kind), "{line}");
            assert!(helped.contains(name), "TYPE before HELP for {name}");
            assert!(!seen_samples_of.contains(name), "TYPE after samples of {name}");
            assert!(types.insert(name.to_string(), kind.to_string()).is_none(), "TYPE twice for {name}");
            if kind == "counter" {
                assert!(name.ends_with("_total"), "counter {name} without _total");
            } else {
                assert!(!name.ends_with("_total"), "{kind} {name} named _total");
            }
            continue;
        }
        assert!(!line.starts_with('#') && !line.is_empty(), "stray line {line:?}");
        let (name_labels, value) = line.rsplit_once(' ').expect("sample value");
        let (name, labels) = match name_labels.split_once('{') {
            Some((n, l)) => (n, l.strip_suffix('}').expect("closing brace")),
            None => (name_labels, ""),
        };
        let family = ["_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s).filter(|f| types.get(*f).map(String::as_str) == Some("summary")))
            .unwrap_or(name);
        assert!(types.contains_key(family), "sample {name} without TYPE");
        seen_samples_of.insert(family.to_string());
        let mut map = HashMap::new();
        for pair in labels.split("\",").filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once("=\"").unwrap_or_else(|| panic!("label {pair} in {line}"));
            map.insert(k.to_string(), v.trim_end_matches('"').to_string());
        }
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("value in {line}"));
        samples.push((name.to_string(), map, value));
    }
    samples
}

/// The one sample of `name` (panics if none or several).
fn value(samples: &[Sample], name: &str) -> f64 {
    let found: Vec<&Sample> = samples.iter().filter(|s| s.0 == name).collect();
    assert_eq!(found.len(), 1, "{name}: {found:?}");
    found[0].2
}

/// Cross-checks the text with Python's prometheus_client parser where it is installed.
fn python_parse(text: &str) {
    let python = ["python3", "/usr/bin/python3"].into_iter().find(|py| {
        Command::new(py).args(["-c", "import prometheus_client"]).output().map(|o| o.status.success()).unwrap_or(false)
    });
    let Some(python) = python else {
        let reason = "no python3 here imports prometheus_client (apt-get install python3-prometheus-client)";
        require::unavailable("the prometheus_client parse", reason);
        return;
    };
    let script = "import sys\nfrom prometheus_client.parser import text_string_to_metric_families as p\n\
                  fams=list(p(sys.stdin.read()))\nassert fams and all(f.documentation for f in fams)\n\
                  print(sum(len(f.samples) for f in fams))";
    let mut child = Command::new(python)
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "prometheus_client rejects the text: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The server's JSON log line of its one test.
fn server_test_line(server: &Server) -> Value {
    for _ in 0..50 {
        for line in server.log_lines(Duration::from_millis(200)) {
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                if v["event"] == "test" {
                    return v;
                }
            }
        }
    }
    panic!("the server logged no test");
}

#[test]
fn a_tcp_probe_reports_the_bytes_the_server_logged() {
    let server = Server::start(&["--json"]);
    let exporter = Exporter::start(&["--allow-target", "127.0.0.0/8", "--max-duration", "5"]);
    let (status, body) = exporter.get(&format!("/probe?target=127.0.0.1:{}&proto=tcp&duration=1", server.port), &[]);
    assert_eq!(status, 200, "{body}");
    let samples = parse_exposition(&body);
    python_parse(&body);
    assert_eq!(value(&samples, "netchar_probe_success"), 1.0, "{body}");
    assert_eq!(value(&samples, "netchar_probe_test_seconds"), 1.0);
    let log = server_test_line(&server);
    let logged: f64 = log["flows"][0]["bytes"].as_f64().unwrap();
    assert_eq!(value(&samples, "netchar_received_bytes"), logged, "received bytes == the server's log");
    assert_eq!(value(&samples, "netchar_sent_bytes"), logged, "every byte sent arrived");
    let seconds = log["flows"][0]["seconds"].as_f64().unwrap();
    let rate = value(&samples, "netchar_receiver_bytes_per_second");
    assert!((rate - logged / seconds).abs() <= rate * 1e-6, "{rate} vs {}", logged / seconds);
    assert!(value(&samples, "netchar_tcp_retransmits") >= 0.0);
    for s in &samples {
        assert_eq!(s.1["target"], "127.0.0.1");
        assert_eq!(s.1["port"], server.port.to_string());
        assert_eq!(s.1["protocol"], "tcp");
        let allowed: HashSet<&str> = ["target", "port", "protocol", "direction", "side", "quantile"].into();
        assert!(s.1.keys().all(|k| allowed.contains(k.as_str())), "unbounded label in {s:?}");
    }
    let cpu: Vec<&Sample> = samples.iter().filter(|s| s.0 == "netchar_cpu_ratio").collect();
    assert_eq!(cpu.len(), 2);
}

#[test]
fn udp_and_rr_probes_report_loss_jitter_and_latency_quantiles() {
    let server = Server::start(&["--json"]);
    let exporter = Exporter::start(&["--allow-target", "127.0.0.1", "--max-duration", "1"]);
    let (status, body) =
        exporter.get(&format!("/probe?target=127.0.0.1:{}&proto=udp&rate=20M&reverse=1", server.port), &[]);
    assert_eq!(status, 200);
    let samples = parse_exposition(&body);
    python_parse(&body);
    assert_eq!(value(&samples, "netchar_probe_success"), 1.0, "{body}");
    let lost = samples.iter().find(|s| s.0 == "netchar_udp_lost_datagrams").unwrap();
    assert_eq!(lost.1["direction"], "down");
    assert!(value(&samples, "netchar_udp_jitter_seconds") >= 0.0);
    assert_eq!(
        value(&samples, "netchar_received_bytes"),
        server_test_line(&server)["flows"][0]["bytes"].as_f64().unwrap()
    );

    let (status, body) = exporter.get(&format!("/probe?target=127.0.0.1:{}&proto=rr", server.port), &[]);
    assert_eq!(status, 200);
    let samples = parse_exposition(&body);
    python_parse(&body);
    let quantiles: Vec<&str> =
        samples.iter().filter(|s| s.0 == "netchar_rr_latency_seconds").map(|s| s.1["quantile"].as_str()).collect();
    assert_eq!(quantiles, ["0.5", "0.9", "0.99", "0.999"]);
    assert!(value(&samples, "netchar_rr_latency_seconds_count") > 0.0);
}

#[test]
fn the_scrape_timeout_header_bounds_the_test() {
    let server = Server::start(&["--json"]);
    let exporter = Exporter::start(&["--allow-target", "127.0.0.0/8", "--max-duration", "5"]);
    let probe = format!("/probe?target=127.0.0.1:{}", server.port);
    // 2.5 s less the 0.5 s offset is 2 s for the probe: 1 s of it for setup, 1 s of test.
    let (status, body) = exporter.get(&probe, &["X-Prometheus-Scrape-Timeout-Seconds: 2.5"]);
    assert_eq!(status, 200);
    let samples = parse_exposition(&body);
    assert_eq!(value(&samples, "netchar_probe_timeout_seconds"), 2.0);
    assert_eq!(value(&samples, "netchar_probe_test_seconds"), 1.0);
    assert_eq!(value(&samples, "netchar_probe_success"), 1.0);
    let log = server_test_line(&server);
    assert_eq!(value(&samples, "netchar_received_bytes"), log["flows"][0]["bytes"].as_f64().unwrap());
    // Without the header --max-duration bounds it; a budget with no room for a test is refused.
    let (_, body) = exporter.get(&format!("{probe}&duration=9"), &["X-Prometheus-Scrape-Timeout-Seconds: 30"]);
    assert_eq!(value(&parse_exposition(&body), "netchar_probe_test_seconds"), 5.0);
    let (status, body) = exporter.get(&probe, &["X-Prometheus-Scrape-Timeout-Seconds: 1"]);
    assert_eq!(status, 400, "{body}");
    let (status, _) = exporter.get(&probe, &["X-Prometheus-Scrape-Timeout-Seconds: soon"]);
    assert_eq!(status, 400);
}

#[test]
fn a_closed_port_is_a_failed_probe_not_an_http_error() {
    let exporter = Exporter::start(&["--allow-target", "127.0.0.0/8", "--max-duration", "1"]);
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let (status, body) = exporter.get(&format!("/probe?target=127.0.0.1:{port}"), &[]);
    assert_eq!(status, 200);
    let samples = parse_exposition(&body);
    assert_eq!(value(&samples, "netchar_probe_success"), 0.0);
    assert!(samples.iter().all(|s| s.0.starts_with("netchar_probe_")), "no test figures for a failed probe");
    let (_, metrics) = exporter.get("/metrics", &[]);
    let own = parse_exposition(&metrics);
    python_parse(&metrics);
    let failed = own.iter().find(|s| s.0 == "netchar_exporter_probes_total" && s.1["outcome"] == "failure").unwrap();
    assert_eq!(failed.2, 1.0);
}

#[test]
fn refusals_send_nothing_to_the_target() {
    let exporter = Exporter::start(&["--allow-target", "127.0.0.2/32", "--max-duration", "1"]);
    let target = TcpListener::bind("127.0.0.1:0").unwrap();
    target.set_nonblocking(true).unwrap();
    let port = target.local_addr().unwrap().port();
    let (status, _) = exporter.get(&format!("/probe?target=127.0.0.1:{port}"), &[]);
    assert_eq!(status, 403);
    let (status, _) = exporter.get(&format!("/probe?target=localhost:{port}"), &[]);
    assert_eq!(status, 403);
    let (status, body) = exporter.get("/probe", &[]);
    assert_eq!(status, 400);
    assert!(body.contains("target"), "{body}");
    let (status, _) = exporter.get("/probe?target=127.0.0.2:5300&proto=sctp", &[]);
    assert_eq!(status, 400);
    assert_eq!(exporter.get("/nothing", &[]).0, 404);
    assert_eq!(
        target.accept().map(|_| ()).unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock,
        "a refused probe connected"
    );
}

#[test]
fn a_second_probe_while_one_runs_gets_503() {
    // The first probe's target accepts and never answers: the probe is running from the
    // moment the connection arrives until its budget ends.
    let exporter = Exporter::start(&["--allow-target", "127.0.0.0/8", "--max-duration", "1"]);
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let exporter_port = exporter.port;
    let first = std::thread::spawn(move || {
        http_get(exporter_port, &format!("/probe?target=127.0.0.1:{port}"), &["X-Prometheus-Scrape-Timeout-Seconds: 3"])
    });
    let (_held, _) = silent.accept().unwrap();
    let (status, body) = exporter.get(&format!("/probe?target=127.0.0.1:{port}"), &[]);
    assert_eq!(status, 503, "{body}");
    let (status, body) = first.join().unwrap();
    assert_eq!(status, 200);
    assert_eq!(value(&parse_exposition(&body), "netchar_probe_success"), 0.0);
    let (_, metrics) = exporter.get("/metrics", &[]);
    let busy = parse_exposition(&metrics)
        .into_iter()
        .find(|s| s.0 == "netchar_exporter_refused_probes_total" && s.1["reason"] == "busy")
        .unwrap();
    assert_eq!(busy.2, 1.0);
}

#[test]
fn the_exporter_refuses_to_start_without_an_allow_list() {
    let out = Command::new(BIN).args(["exporter", "--listen", "127.0.0.1:0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--allow-target") && err.lines().count() == 1, "{err}");
}
