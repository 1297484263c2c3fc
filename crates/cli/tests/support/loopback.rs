//! A `netchar server` on an ephemeral port and helpers to run the client, shared by the
//! loopback test files.
#![allow(dead_code, unreachable_pub)]

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub const BIN: &str = env!("CARGO_BIN_EXE_netchar");

/// A child's stderr lines on a channel, read by a thread of their own.
pub fn lines_of(child: &mut Child) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    let err = child.stderr.take().expect("stderr piped");
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// A `netchar server` on an ephemeral port, killed on drop.
pub struct Server {
    pub child: Child,
    pub port: u16,
    pub stderr: std::sync::mpsc::Receiver<String>,
    /// The start-up line after "listening": who may run tests, and the limits.
    pub banner: String,
    /// Start-up lines before the banner (peer listeners announcing their ports).
    pub startup: Vec<String>,
}

impl Server {
    pub fn start(extra: &[&str]) -> Self {
        Self::start_on("127.0.0.1", extra)
    }

    pub fn start_on(bind: &str, extra: &[&str]) -> Self {
        let mut child = Command::new(BIN)
            .args(["server", "-B", bind, "-p", "0"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn server");
        let rx = lines_of(&mut child);
        let first = rx.recv_timeout(Duration::from_secs(10)).expect("server start line");
        let port =
            first.rsplit(':').next().and_then(|p| p.parse().ok()).unwrap_or_else(|| panic!("no port in {first:?}"));
        // Peer listeners announce themselves before or after the banner, depending on when
        // they bind: the lines up to the banner are kept, the ones after it come from stderr.
        let mut startup = Vec::new();
        let banner = loop {
            let line = rx.recv_timeout(Duration::from_secs(10)).expect("server banner line");
            if line.contains("limits:") {
                break line;
            }
            startup.push(line);
        };
        Self { child, port, stderr: rx, banner, startup }
    }

    /// Server log lines seen so far (waits up to `wait` for at least one more).
    pub fn log_lines(&self, wait: Duration) -> Vec<String> {
        let mut lines = Vec::new();
        if let Ok(l) = self.stderr.recv_timeout(wait) {
            lines.push(l);
        }
        while let Ok(l) = self.stderr.try_recv() {
            lines.push(l);
        }
        lines
    }

    /// The server's JSON log lines of its next `n` tests (exactly `n` within 15 s).
    pub fn logged_tests(&self, n: usize) -> Vec<Value> {
        let mut tests = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        while tests.len() < n && std::time::Instant::now() < deadline {
            for line in self.log_lines(Duration::from_millis(200)) {
                let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
                if v["event"] == "test" {
                    tests.push(v);
                }
            }
        }
        assert_eq!(tests.len(), n, "tests logged: {tests:?}");
        tests
    }

    pub fn signal(&self, sig: &str) {
        Command::new("kill").args([sig, &self.child.id().to_string()]).status().unwrap();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The port in the line of `lines` that starts with `announce` followed by `ADDR:PORT` (how
/// the server names where a peer listener bound, port 0 included).
pub fn announced_port(lines: &[String], announce: &str) -> Option<u16> {
    let rest = lines.iter().find_map(|l| l.strip_prefix(announce))?;
    let addr = rest.split_whitespace().next()?;
    addr.rsplit(':').next()?.parse().ok()
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

pub fn netchar(args: &[&str]) -> Run {
    let out = Command::new(BIN).args(args).output().expect("run netchar");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

pub fn tcp_json(server: &Server, host: &str, extra: &[&str]) -> Value {
    client_json("tcp", server, host, extra)
}

/// Runs `netchar KIND HOST -p PORT --json EXTRA...`, which must succeed, and parses its JSON.
pub fn client_json(kind: &str, server: &Server, host: &str, extra: &[&str]) -> Value {
    let port = server.port.to_string();
    let mut args = vec![kind, host, "-p", &port, "--json"];
    args.extend_from_slice(extra);
    let run = netchar(&args);
    assert_eq!(run.code, 0, "netchar {args:?} failed: {}", run.stderr);
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("invalid JSON ({e}): {}", run.stdout))
}

pub fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not an integer: {v}"))
}
pub fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The checks every successful TCP result must pass, for each flow it ran.
pub fn check_flow(r: &Value, flow: &str, streams: u64) -> (u64, u64) {
    let s = &r["summary"][flow];
    assert!(s.is_object(), "summary.{flow} missing in {r}");
    let (tx, rx) = (&s["sender"], &s["receiver"]);
    assert_eq!(s["bytes_match"], true, "{flow}: {s}");
    assert_eq!(u(&tx["total_bytes"]), u(&rx["total_bytes"]), "{flow}: receiver bytes must equal sender bytes");
    assert!(u(&tx["total_bytes"]) > 0);
    for side in [tx, rx] {
        let expect = 8.0 * u(&side["bytes"]) as f64 / f(&side["seconds"]);
        let got = f(&side["bits_per_second"]);
        assert!((got - expect).abs() <= 0.001 * expect, "bits_per_second {got} vs 8*bytes/seconds {expect}");
    }
    assert!(tx["retransmits"].is_u64(), "a Linux TCP sender reports retransmits: {tx}");
    // Raw per-stream records from both ends add up to the summary totals.
    let records: Vec<&Value> = r["streams"].as_array().unwrap().iter().filter(|x| x["flow"] == flow).collect();
    assert_eq!(records.len() as u64, 2 * streams, "one record per stream and end");
    let sum = |role: &str| -> u64 { records.iter().filter(|x| x["role"] == role).map(|x| u(&x["bytes"])).sum() };
    assert_eq!(sum("sender"), u(&tx["total_bytes"]));
    assert_eq!(sum("receiver"), u(&rx["total_bytes"]));
    // Interval bytes of each stream add up to its total exactly.
    for rec in records.iter().filter(|r| !r["intervals"].as_array().unwrap().is_empty()) {
        let iv: u64 = rec["intervals"].as_array().unwrap().iter().map(|i| u(&i["bytes"])).sum();
        assert_eq!(iv, u(&rec["bytes"]), "intervals of stream {} ({})", rec["id"], rec["role"]);
    }
    (u(&tx["total_bytes"]), u(&rx["total_bytes"]))
}

pub fn check_common_keys(r: &Value) {
    for key in
        ["schema_version", "netchar_version", "test", "started_at", "host", "intervals", "summary", "cpu", "error"]
    {
        assert!(r.get(key).is_some(), "missing key {key}");
    }
    assert_eq!(r["schema_version"], 1);
    assert!(r["error"].is_null(), "error: {}", r["error"]);
    for end in ["local", "remote"] {
        let c = &r["cpu"][end];
        for k in ["user_pct", "system_pct", "total_pct", "host_busy_pct"] {
            assert!(c[k].is_f64(), "cpu.{end}.{k} missing: {c}");
        }
        assert!(f(&c["total_pct"]) > 0.0, "a test that moved data used CPU: {c}");
    }
    assert!(r["host"]["cores"].as_u64().unwrap() >= 1);
    assert!(r["started_at"].as_str().unwrap().ends_with('Z'));
}
