//! flent, the most common netperf client, against `netchar server --netperf` with its default
//! limits (one test at a time), on loopback: Debian's flent runs tcp_download, tcp_upload,
//! rrul, rrul_be and tcp_nup, each of its flows a netperf process of its own, and every TCP
//! flow and every UDP_RR ping has data, because one client's netperf tests are one job
//! (crates/engine/src/admission.rs, "Jobs"). A second client is still turned away as busy,
//! and the server's log says who and why.
//!
//! flent's ICMP ping goes to the host, not to netchar's server: it is not looked at. Its UDP
//! pings are netperf UDP_RR tests when irtt is not installed (CI installs none).
//!
//! Needs `flent` and `netperf` (Debian: flent, and netperf from the non-free component; .ci/run
//! installs both).

#[path = "support/loopback.rs"]
mod common;
#[path = "support/require.rs"]
mod require;

use common::*;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// flent's test length (`-l`): its TCP flows run this long, its pings 10 s more (flent's
/// default `--delay` of 5 s before and after the flows).
const LENGTH: &str = "4";

/// flent's `--delay` for the tests that only check each flow's data: its pings start this
/// long before the TCP flows and end as long after them (flent's default is 5 s). Every flow
/// still runs, and the pings overlap the flows, as they do at 5 s.
const SHORT_DELAY: &str = "1";

fn tools_here(what: &str) -> bool {
    require::tool(what, "flent", &["--version"], "install Debian's flent (apt-get install flent)")
        && require::tool(
            what,
            "netperf",
            &["-V"],
            "install Debian's netperf, in its non-free component (add non-free to the apt sources; .ci/run does)",
        )
}

/// A netchar server answering netperf with the default limits, logging JSON lines.
fn server() -> (Server, u16) {
    let s = Server::start(&["--netperf", "--netperf-port", "0", "--json"]);
    let lines = [s.startup.clone(), s.log_lines(Duration::from_secs(5))].concat();
    let port = announced_port(&lines, "answering netperf clients on ").unwrap_or_else(|| panic!("{lines:?}"));
    assert!(s.banner.contains("1 test(s) at once"), "the default limits: {}", s.banner);
    (s, port)
}

/// `flent TEST -H 127.0.0.1 -l LENGTH` against the server's netperf port, its data file in
/// `dir`. Returns flent's output and the data file's JSON.
fn flent_command(test: &[&str], port: u16, dir: &Path) -> Command {
    let mut cmd = Command::new("flent");
    cmd.args(test)
        .args(["-H", "127.0.0.1", "-l", LENGTH, "--netperf-control-port", &port.to_string(), "-D"])
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// The data file flent wrote in `dir` (a `.flent.gz`: gzipped JSON).
fn data_file(dir: &Path, out: &Output) -> Value {
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let file = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".flent.gz"))
        .unwrap_or_else(|| panic!("flent wrote no data file: {said}"));
    let json = Command::new("gzip").arg("-dc").arg(&file).output().expect("gzip");
    assert!(json.status.success(), "gzip -dc {file:?}: {}", String::from_utf8_lossy(&json.stderr));
    serde_json::from_slice(&json.stdout).unwrap_or_else(|e| panic!("{file:?}: {e}; flent said: {said}"))
}

/// The series flent measured with netperf (its TCP flows and UDP_RR pings: the ones that
/// touched netchar's server), by name, with the netperf test each ran.
fn netperf_series(data: &Value) -> Vec<(String, String)> {
    let meta = data["metadata"]["SERIES_META"].as_object().expect("SERIES_META");
    let mut series: Vec<(String, String)> = meta
        .iter()
        .filter(|(_, m)| m["RUNNER"] == "NetperfDemoRunner")
        .map(|(name, m)| {
            let command = m["COMMAND"].as_str().unwrap_or_default();
            let test = command.split_whitespace().skip_while(|a| *a != "-t").nth(1).unwrap_or("?").to_string();
            (name.clone(), test)
        })
        .collect();
    series.sort();
    series
}

/// Every netperf series has data: raw values, each positive (throughput in Mbit/s, latency in
/// ms), and values in flent's own results. Returns the series' netperf tests.
fn assert_every_flow_has_data(data: &Value, said: &str) -> Vec<String> {
    let series = netperf_series(data);
    for (name, test) in &series {
        let raw = data["raw_values"][name].as_array().map(Vec::as_slice).unwrap_or_default();
        let values: Vec<f64> = raw.iter().filter_map(|r| r["val"].as_f64()).collect();
        assert!(!values.is_empty(), "{name} ({test}) has no data (\"No data\" in flent's summary): {said}");
        assert!(values.iter().all(|v| *v > 0.0), "{name} ({test}): values not all positive: {values:?}");
        let results = data["results"][name].as_array().expect("results");
        assert!(results.iter().any(|v| v.as_f64().is_some_and(|v| v > 0.0)), "{name} ({test}): {results:?}");
    }
    series.into_iter().map(|(_, test)| test).collect()
}

/// The server's JSON log events ("test", "rejected", ...) until `tests` tests are in.
fn logged(s: &Server, tests: usize) -> Vec<Value> {
    let mut events: Vec<Value> = Vec::new();
    for _ in 0..50 {
        events.extend(s.log_lines(Duration::from_millis(200)).iter().filter_map(|l| serde_json::from_str(l).ok()));
        if events.iter().filter(|e| e["event"] == "test").count() >= tests {
            break;
        }
    }
    events
}

fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["event"] == kind).collect()
}

/// Runs flent's `test` against a fresh default server and checks that every flow had data,
/// that the flows were `expected` netperf tests (by name, in order), and that the server logged
/// each of them with bytes moved and refused none.
fn flent_runs(test: &[&str], expected: &[&str]) {
    let what = format!("flent {}", test.join(" "));
    if !tools_here(&what) {
        return;
    }
    let (s, port) = server();
    let dir = tempfile::tempdir().unwrap();
    let out = flent_command(test, port, dir.path()).args(["--delay", SHORT_DELAY]).output().expect("flent");
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{what}: {said}");
    let data = data_file(dir.path(), &out);
    let mut tests = assert_every_flow_has_data(&data, &said);
    tests.sort();
    let mut want: Vec<String> = expected.iter().map(|t| t.to_string()).collect();
    want.sort();
    assert_eq!(tests, want, "{what}: the flows flent ran with netperf");
    // Ground truth: the server ran each as a test of its own, with data, and turned none away.
    let events = logged(&s, expected.len());
    let logs = of_kind(&events, "test");
    assert_eq!(logs.len(), expected.len(), "{what}: {events:?}");
    for log in &logs {
        assert_eq!(log["protocol"], "netperf");
        let bytes: u64 = log["flows"].as_array().unwrap().iter().map(|f| u(&f["bytes"])).sum();
        assert!(bytes > 0 && log["error"].is_null(), "{what}: {log}");
    }
    assert!(of_kind(&events, "rejected").is_empty(), "{what}: {events:?}");
}

#[test]
fn flent_tcp_download_has_data() {
    flent_runs(&["tcp_download"], &["TCP_MAERTS"]);
}

#[test]
fn flent_tcp_upload_has_data() {
    flent_runs(&["tcp_upload"], &["TCP_STREAM"]);
}

#[test]
fn flent_tcp_nup_has_data_in_every_flow() {
    flent_runs(&["tcp_nup", "--test-parameter", "upload_streams=4"], &["TCP_STREAM"; 4]);
}

#[test]
fn flent_rrul_be_has_data_in_every_flow_and_ping() {
    let mut want = vec!["TCP_STREAM"; 4];
    want.extend(["TCP_MAERTS"; 4]);
    want.extend(["UDP_RR"; 3]);
    flent_runs(&["rrul_be"], &want);
}

/// How many UDP sockets the server process has open (its fds among /proc/net/udp{,6}'s inodes).
fn udp_sockets_of(s: &Server) -> usize {
    let fds = std::fs::read_dir(format!("/proc/{}/fd", s.child.id())).expect("the server's fds");
    let inodes: std::collections::HashSet<String> = fds
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|target| Some(target.to_str()?.strip_prefix("socket:[")?.strip_suffix(']')?.to_string()))
        .collect();
    ["/proc/net/udp", "/proc/net/udp6"]
        .iter()
        .flat_map(|table| {
            std::fs::read_to_string(table).unwrap_or_default().lines().skip(1).map(str::to_string).collect::<Vec<_>>()
        })
        .filter(|line| line.split_whitespace().nth(9).is_some_and(|inode| inodes.contains(inode)))
        .count()
}

/// `netperf -H 127.0.0.1 -p PORT EXTRA`: its exit code and everything it printed.
fn netperf(port: u16, extra: &[&str]) -> (i32, String) {
    let out = Command::new("netperf")
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .expect("netperf");
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), said)
}

#[test]
fn flent_rrul_has_data_in_every_flow_and_ping_while_a_second_client_is_turned_away() {
    if !tools_here("flent rrul") {
        return;
    }
    let (s, port) = server();
    let dir = tempfile::tempdir().unwrap();
    let before = udp_sockets_of(&s);
    let flent = flent_command(&["rrul"], port, dir.path()).spawn().expect("flent");
    // flent starts its three UDP_RR pings first (they run -l + 10 s), its 8 TCP flows 5 s
    // later. Its job holds the server from the first ping's admission, which comes before the
    // server opens that ping's UDP socket: the second clients go once that socket exists.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while udp_sockets_of(&s) <= before {
        assert!(std::time::Instant::now() < deadline, "flent's first UDP_RR ping never reached the server in 20 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    // A second client (another address) is turned away as busy: netserver's EBUSY.
    let (code, said) = netperf(port, &["-L", "127.0.0.2", "-l", "1"]);
    assert!(code != 0 && said.contains("remote error 16"), "a second client during flent's rrul: {code}: {said}");
    // So is a test from flent's own address that would outlast the job.
    let (code, said) = netperf(port, &["-l", "20"]);
    assert!(code != 0 && said.contains("remote error 16"), "a longer test from flent's address: {code}: {said}");
    let out = flent.wait_with_output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "flent rrul: {said}");
    let data = data_file(dir.path(), &out);
    let mut tests = assert_every_flow_has_data(&data, &said);
    tests.sort();
    let mut want = vec!["TCP_MAERTS"; 4];
    want.extend(["TCP_STREAM"; 4]);
    want.extend(["UDP_RR"; 3]);
    assert_eq!(tests, want, "flent rrul's netperf flows");
    // The server's log says who was turned away, and why in words (netperf only prints its
    // errno): busy, held by flent's job.
    let events = logged(&s, want.len());
    assert_eq!(of_kind(&events, "test").len(), want.len(), "{events:?}");
    let rejected = of_kind(&events, "rejected");
    assert_eq!(rejected.len(), 2, "{events:?}");
    assert!(rejected[0]["peer"].as_str().unwrap().contains("127.0.0.2"), "{}", rejected[0]);
    for r in &rejected {
        let reason = r["reason"].as_str().unwrap();
        assert!(
            reason.contains("turned away as busy")
                && reason.contains("held by a netperf job of")
                && reason.contains("from 127.0.0.1"),
            "{reason}"
        );
    }
}
