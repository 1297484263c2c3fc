//! netchar speaking netperf's control protocol in both roles, on loopback: `netchar tcp|udp|
//! rr|crr --proto netperf` against `netchar server --netperf`, for the six tests (TCP_STREAM,
//! TCP_MAERTS, UDP_STREAM, TCP_RR, UDP_RR, TCP_CRR). CI has no netperf (Debian has none in
//! main), so this checks the two roles against each other, with exact accounting: what the
//! client sent or read equals what the server's results said and what its log line says; the
//! wire format against the real netperf 2.7.1 is checked by the golden transcripts
//! (crates/wire/tests/netperf_golden.rs), and the programs themselves by hand (docs/netperf.md).

#[path = "support/loopback.rs"]
mod common;

use common::*;
use serde_json::Value;
use std::time::Duration;

/// A netchar server answering netperf on a port of its own, logging JSON lines; `extra` adds
/// flags.
fn server(extra: &[&str]) -> (Server, u16) {
    let mut args = vec!["--netperf", "--netperf-port", "0", "--json"];
    args.extend_from_slice(extra);
    let s = Server::start(&args);
    let lines = [s.startup.clone(), s.log_lines(Duration::from_secs(5))].concat();
    let port = announced_port(&lines, "answering netperf clients on ").unwrap_or_else(|| panic!("{lines:?}"));
    (s, port)
}

/// `netchar KIND 127.0.0.1 -p PORT --proto netperf --json EXTRA`, which must succeed.
fn client(kind: &str, port: u16, extra: &[&str]) -> Value {
    let port = port.to_string();
    let mut args = vec![kind, "127.0.0.1", "-p", &port, "--proto", "netperf", "--json"];
    args.extend_from_slice(extra);
    let run = netchar(&args);
    assert_eq!(run.code, 0, "netchar {args:?} failed: {}", run.stderr);
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("invalid JSON ({e}): {}", run.stdout))
}

/// The server's log lines of the `n` tests just run.
fn logged_tests(s: &Server, n: usize) -> Vec<Value> {
    let mut tests = Vec::new();
    for _ in 0..50 {
        for line in s.log_lines(Duration::from_millis(200)) {
            let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
            if v["event"] == "test" {
                tests.push(v);
            }
        }
        if tests.len() >= n {
            return tests;
        }
    }
    panic!("{} of {n} tests logged", tests.len());
}

/// Bytes a logged test counted for one flow.
fn logged_bytes(log: &Value, flow: &str) -> u64 {
    log["flows"].as_array().unwrap().iter().find(|f| f["flow"] == flow).map(|f| u(&f["bytes"])).unwrap()
}

/// The records of a result measured by one end ("client", "server").
fn records<'a>(r: &'a Value, by: &str) -> Vec<&'a Value> {
    r["streams"].as_array().unwrap().iter().filter(|s| s["measured_by"] == by).collect()
}

fn sum(records: &[&Value], field: impl Fn(&Value) -> &Value) -> u64 {
    records.iter().map(|s| u(field(s))).sum()
}

#[test]
fn tcp_stream_and_maerts_count_every_byte_at_both_ends() {
    let (s, port) = server(&[]);

    // TCP_STREAM: netserver's bytes_received is every byte this end wrote, and the log's.
    let r = client("tcp", port, &["-t", "1"]);
    assert_eq!(r["test"]["protocol"], "netperf");
    let (mine, theirs) = (records(&r, "client"), records(&r, "server"));
    assert_eq!((mine.len(), theirs.len()), (1, 1));
    assert!(u(&mine[0]["bytes"]) > 0);
    assert_eq!(u(&mine[0]["bytes"]), u(&theirs[0]["bytes"]), "{r}");
    let log = &logged_tests(&s, 1)[0];
    assert_eq!((log["protocol"].as_str(), log["peer_software"].as_str()), (Some("netperf"), Some("netperf")));
    assert_eq!(logged_bytes(log, "up"), u(&mine[0]["bytes"]));

    // TCP_MAERTS (-R): the server's bytes_sent is what this end read to EOF.
    let r = client("tcp", port, &["-t", "1", "-R"]);
    let (mine, theirs) = (records(&r, "client"), records(&r, "server"));
    assert_eq!((mine[0]["role"].as_str(), theirs[0]["role"].as_str()), (Some("receiver"), Some("sender")));
    assert_eq!(u(&mine[0]["bytes"]), u(&theirs[0]["bytes"]), "{r}");
    assert_eq!(logged_bytes(&logged_tests(&s, 1)[0], "down"), u(&mine[0]["bytes"]));

    // By count (netperf's -l -N): exactly that many bytes, both ways.
    for extra in [&["-n", "10M"][..], &["-n", "10M", "-R", "-l", "64Ki"]] {
        let r = client("tcp", port, extra);
        assert_eq!(u(&records(&r, "client")[0]["bytes"]), 10_000_000, "{extra:?}: {r}");
        assert_eq!(u(&records(&r, "server")[0]["bytes"]), 10_000_000, "{extra:?}: {r}");
        logged_tests(&s, 1);
    }
}

#[test]
fn udp_stream_datagrams_are_received_or_lost_by_the_servers_count() {
    let (s, port) = server(&[]);
    let r = client("udp", port, &["-t", "1", "-b", "20M", "-l", "1200"]);
    let sent = &records(&r, "client")[0];
    let got = &records(&r, "server")[0];
    let (sent_packets, received) = (u(&sent["udp_sent"]["packets"]), &got["udp_received"]);
    assert!(sent_packets > 1000, "{r}");
    assert_eq!(u(&received["packets"]) + u(&received["lost"]), sent_packets, "{r}");
    assert_eq!(u(&got["bytes"]), 1200 * u(&received["packets"]));
    // The empty datagrams that end the test are no data: 1200 bytes each, every one counted.
    assert_eq!(u(&sent["bytes"]), 1200 * sent_packets);
    assert_eq!(logged_bytes(&logged_tests(&s, 1)[0], "up"), u(&got["bytes"]));
}

#[test]
fn rr_udp_rr_and_crr_count_the_same_transactions_at_both_ends() {
    let (s, port) = server(&[]);
    for (kind, extra) in [
        ("rr", &["-t", "1", "-l", "32", "--response", "700"][..]),
        ("rr", &["-t", "1", "--udp", "-l", "100", "--response", "1000"]),
        ("rr", &["-n", "2000"]),
        ("crr", &["-t", "1"]),
    ] {
        let r = client(kind, port, extra);
        let (mine, theirs) = (records(&r, "client"), records(&r, "server"));
        let transactions = u(&r["summary"]["rr"]["transactions"]);
        assert!(transactions > 0, "{kind} {extra:?}: {r}");
        assert_eq!(u(&mine[0]["rr"]["transactions"]), transactions);
        assert_eq!(u(&theirs[0]["rr"]["transactions"]), transactions, "{kind} {extra:?}: the server's count");
        if extra.contains(&"-n") {
            assert_eq!(transactions, 2000);
        }
        // The server read every request whole: request bytes times transactions.
        let request = extra.iter().position(|a| *a == "-l").map_or(1, |i| extra[i + 1].parse::<u64>().unwrap());
        assert_eq!(u(&theirs[0]["bytes"]), request * transactions, "{kind} {extra:?}");
        assert_eq!(logged_bytes(&logged_tests(&s, 1)[0], "up"), request * transactions);
    }
}

#[test]
fn parallel_streams_run_as_that_many_netperf_tests_and_sum_as_one_result() {
    // netperf runs one stream per test: -P 2 is two tests at once, which the server admits.
    let (s, port) = server(&["--max-concurrent", "2"]);
    for (kind, extra) in [("tcp", &["-t", "1", "-P", "2"][..]), ("rr", &["-t", "1", "-P", "2"])] {
        let r = client(kind, port, extra);
        let (mine, theirs) = (records(&r, "client"), records(&r, "server"));
        assert_eq!((mine.len(), theirs.len()), (2, 2), "{kind}: {r}");
        let ids: Vec<u64> = theirs.iter().map(|s| u(&s["id"])).collect();
        assert_eq!(ids, [1, 2]);
        assert_eq!(sum(&mine, |s| &s["bytes"]), sum(&theirs, |s| &s["bytes"]), "{kind}: {r}");
        let logs = logged_tests(&s, 2);
        let logged: u64 = logs.iter().map(|l| logged_bytes(l, "up")).sum();
        assert_eq!(logged, sum(&theirs, |s| &s["bytes"]));
    }
}

#[test]
fn what_netperf_cannot_carry_is_refused_before_any_traffic() {
    let (s, port) = server(&[]);
    let port = port.to_string();
    for (args, says) in [
        (&["tcp", "--bidir"][..], "--bidir"),
        (&["udp", "-R"], "UDP_STREAM only sends"),
        (&["udp", "-n", "1M"], "by time only"),
        (&["crr", "-n", "100"], "TCP_CRR by time only"),
        (&["tcp", "-t", "1.5"], "whole seconds"),
        (&["rr", "--inflight", "4"], "one transaction in flight"),
        (&["tcp", "-O", "1"], "-O"),
    ] {
        let mut all = args.to_vec();
        all.extend_from_slice(&["127.0.0.1", "-p", &port, "--proto", "netperf"]);
        let run = netchar(&all);
        assert_eq!(run.code, 2, "{all:?}: {}", run.stderr);
        let lines: Vec<&str> = run.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{all:?}: one line: {}", run.stderr);
        assert!(lines[0].contains(says) && lines[0].contains("netperf"), "{all:?}: {}", run.stderr);
    }
    // Nothing reached the server.
    assert!(s.log_lines(Duration::from_millis(300)).iter().all(|l| !l.contains("\"event\":\"test\"")));
}

#[test]
fn a_busy_server_turns_a_netperf_test_away_with_netservers_answer() {
    let (_s, port) = server(&[]);
    let p = port.to_string();
    let long = std::thread::spawn(move || client("tcp", port, &["-t", "3", "-b", "10M"]));
    std::thread::sleep(Duration::from_millis(700));
    // A second client: from the first's address, a test that fits in the first's time joins
    // its job (crates/engine/src/admission.rs, "Jobs").
    let run = netchar(&["tcp", "127.0.0.1", "-p", &p, "--proto", "netperf", "-t", "1", "-B", "127.0.0.2"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("errno 16"), "netserver's EBUSY: {}", run.stderr);
    let r = long.join().unwrap();
    assert!(u(&records(&r, "server")[0]["bytes"]) > 0);
}
