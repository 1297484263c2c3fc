//! `netchar rr` end to end over loopback: transaction counts, rates and latency percentiles
//! that are consistent with each other, over TCP and UDP, pipelined and parallel.

#[path = "support/loopback.rs"]
mod common;

use common::*;
use serde_json::Value;

/// Checks summary.rr and returns it.
fn check_rr(r: &Value) -> &Value {
    assert!(r["error"].is_null(), "error: {}", r["error"]);
    let rr = &r["summary"]["rr"];
    assert!(rr.is_object(), "summary.rr missing: {r}");
    let l = &rr["latency_us"];
    let order = ["min", "p50", "p90", "p99", "p999", "max"];
    for w in order.windows(2) {
        assert!(f(&l[w[0]]) <= f(&l[w[1]]), "latency {} > {}: {l}", w[0], w[1]);
    }
    assert!(f(&l["min"]) > 0.0, "{l}");
    assert!(f(&l["min"]) <= f(&l["mean"]) && f(&l["mean"]) <= f(&l["max"]), "{l}");
    // transactions/s is the count over the requesters' time.
    let secs = r["streams"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["measured_by"] == "client")
        .map(|s| f(&s["seconds"]))
        .fold(0.0, f64::max);
    let tps = u(&rr["transactions"]) as f64 / secs;
    assert!((f(&rr["transactions_per_second"]) - tps).abs() <= 1e-6 * tps, "{rr}");
    // Per-connection counts add up to the whole.
    let per: u64 = r["streams"].as_array().unwrap().iter().filter_map(|s| s["rr"]["transactions"].as_u64()).sum();
    assert_eq!(per, u(&rr["transactions"]));
    // Each requester's bytes are its answers: every transaction's response, and any late one.
    let response = u(&r["test"]["rr"]["response_bytes"]);
    for s in r["streams"].as_array().unwrap().iter().filter(|s| s["measured_by"] == "client") {
        let answers = u(&s["rr"]["transactions"]) + s["rr"]["late"].as_u64().unwrap_or(0);
        assert_eq!(u(&s["bytes"]), answers * response, "stream {}: {}", s["id"], s["rr"]);
    }
    assert!(r["summary"]["placement"].as_str().unwrap().contains("client"));
    rr
}

#[test]
fn tcp_rr_counts_every_transaction() {
    let s = Server::start(&[]);
    let r = client_json("rr", &s, "127.0.0.1", &["-t", "1"]);
    let rr = check_rr(&r);
    assert!(u(&rr["transactions"]) > 1000, "{rr}");
    assert_eq!(u(&rr["lost"]), 0);
    // -n is an exact transaction count, split across connections.
    let r = client_json("rr", &s, "127.0.0.1", &["-n", "1001", "-P", "2", "-i", "0"]);
    assert_eq!(u(&check_rr(&r)["transactions"]), 1001);
}

#[test]
fn udp_rr_matches_replies_and_loses_nothing_on_loopback() {
    let s = Server::start(&[]);
    let r = client_json("rr", &s, "127.0.0.1", &["--udp", "-n", "2000", "-i", "0"]);
    let rr = check_rr(&r);
    assert_eq!(u(&rr["transactions"]), 2000);
    assert_eq!((u(&rr["lost"]), u(&rr["late"])), (0, 0));
}

/// The kernel-stamp split of each UDP round trip is asked for (it costs the kernel a stamp per
/// packet and each answer a control message): with the flag every answer's wait to be woken is
/// there and never longer than its round trip; without it, no figure.
/// `-t` bounds a UDP rr test: the requester waits --timeout only for requests still
/// unanswered, and the server, whose responder has nothing left to answer once the requester
/// finished, does not wait it again (it did: every `rr --udp` ran a --timeout over `-t`). The
/// server's own measuring window (`cpu.remote.wall_seconds`) shows it, with a --timeout far
/// longer than the test.
#[test]
fn udp_rr_ends_at_its_time_not_a_timeout_later() {
    let s = Server::start(&[]);
    let r = client_json("rr", &s, "127.0.0.1", &["--udp", "-t", "1", "--timeout", "5s", "-i", "0"]);
    let rr = check_rr(&r);
    assert_eq!(u(&rr["lost"]), 0, "{rr}");
    let server = f(&r["cpu"]["remote"]["wall_seconds"]);
    assert!(server < 1.0 + 2.5, "the server measured {server} s of a 1 s test (--timeout 5s)");
}

#[test]
fn udp_rr_splits_out_the_wakeup_only_when_asked() {
    let s = Server::start(&[]);
    let r = client_json("rr", &s, "127.0.0.1", &["--udp", "-n", "2000", "-i", "0", "--wakeup-stamps"]);
    let rr = check_rr(&r);
    assert_eq!(u(&rr["transactions"]), 2000);
    let w = &rr["receive_wakeup_us"];
    assert!(f(&w["p50"]) >= 0.0 && f(&w["p50"]) <= f(&w["p99"]), "{w}");
    assert!(f(&w["p50"]) <= f(&rr["latency_us"]["p50"]), "the wakeup is part of the round trip: {rr}");
    assert_eq!(r["test"]["rr"]["wakeup_stamps"], true, "{}", r["test"]);
    let r = client_json("rr", &s, "127.0.0.1", &["--udp", "-n", "500", "-i", "0"]);
    assert!(check_rr(&r).get("receive_wakeup_us").is_none_or(|w| w.is_null()), "{}", r["summary"]);
    let port = s.port.to_string();
    let run = netchar(&["rr", "127.0.0.1", "-p", &port, "--wakeup-stamps"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("--wakeup-stamps: UDP only"), "{}", run.stderr);
}

#[test]
fn pipelined_and_parallel_transactions() {
    let s = Server::start(&[]);
    let r = client_json(
        "rr",
        &s,
        "127.0.0.1",
        &["--inflight", "8", "-l", "64", "--response", "1Ki", "-t", "1", "-i", "0.5"],
    );
    let rr = check_rr(&r);
    assert!(u(&rr["transactions"]) > 1000);
    // Interval transactions add up to the stream's.
    let rec = r["streams"].as_array().unwrap().iter().find(|s| s["measured_by"] == "client").unwrap();
    let sum: u64 = rec["intervals"].as_array().unwrap().iter().map(|i| u(&i["rr"]["transactions"])).sum();
    assert_eq!(sum, u(&rec["rr"]["transactions"]));
    let r = client_json("rr", &s, "127.0.0.1", &["--udp", "--inflight", "8", "-l", "32", "-P", "2", "-t", "1"]);
    check_rr(&r);
}

#[test]
fn pinned_runs_print_their_placement() {
    let s = Server::start(&[]);
    let port = s.port.to_string();
    let run = netchar(&["rr", "127.0.0.1", "-p", &port, "-n", "500", "-A", "0,0", "-i", "0"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("placement: client pinned to CPU 0, server pinned to CPU 0"), "{}", run.stdout);
    assert!(run.stdout.contains("p99.9"), "{}", run.stdout);
}

#[test]
fn bad_rr_flags_exit_2() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string();
    for (args, needle) in [
        (vec!["--inflight", "0"], "--inflight 0"),
        (vec!["--udp", "--inflight", "4"], "--inflight 4"),
        (vec!["--timeout", "never"], "--timeout never"),
        (vec!["-l", "0"], "-l 0"),
        (vec!["-R"], "-R/--bidir"),
    ] {
        let mut full = vec!["rr", "127.0.0.1", "-p", &port];
        full.extend(args.iter());
        let run = netchar(&full);
        assert_eq!(run.code, 2, "{full:?}: {}", run.stderr);
        assert!(run.stderr.contains(needle), "{full:?}: {:?}", run.stderr);
    }
}

#[test]
fn echo_moves_exactly_the_pattern_buffers_and_prints_the_ecos_line() {
    let s = Server::start(&[]);
    let port = s.port.to_string();
    let run = netchar(&["echo", "127.0.0.1", "-p", &port, "--pattern", "64x1024,8x4096"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", run.stdout);
    assert!(lines[0].starts_with("TCP echo - 128 bufs of 1024 bytes in "), "{}", lines[0]);
    assert!(lines[1].starts_with("TCP echo - 16 bufs of 4096 bytes in "), "{}", lines[1]);
    assert!(lines[0].contains("0 out of sequence, 0 lost"), "{}", lines[0]);
    // UDP with the "10 ms delay after 10 packets" pattern: 30 buffers, two pauses at least.
    let r: Value = {
        let run = netchar(&["echo", "127.0.0.1", "-p", &port, "--udp", "--pattern", "30x512,10@10ms", "--json"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        serde_json::from_str(&run.stdout).unwrap()
    };
    let r = &r[0];
    assert_eq!(u(&check_rr(r)["transactions"]), 30);
    let secs =
        r["streams"].as_array().unwrap().iter().find(|s| s["measured_by"] == "client").unwrap()["seconds"].clone();
    assert!(f(&secs) >= 0.02, "two 10 ms pauses: {secs}");
}

#[test]
fn crr_opens_a_connection_per_transaction() {
    let s = Server::start(&[]);
    let r =
        client_json("crr", &s, "127.0.0.1", &["-n", "300", "-P", "2", "-l", "100", "--response", "2000", "-i", "0"]);
    let rr = check_rr(&r);
    assert_eq!(u(&rr["transactions"]), 300);
    let c = &rr["connect_latency_us"];
    assert!(f(&c["min"]) > 0.0 && f(&c["p50"]) <= f(&c["p99"]) && f(&c["p99"]) <= f(&c["max"]), "{c}");
    // Connecting is part of each transaction.
    assert!(f(&c["p50"]) <= f(&rr["latency_us"]["p50"]), "{rr}");
    let port = s.port.to_string();
    let run = netchar(&["crr", "127.0.0.1", "-p", &port, "--udp"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("crr: --udp"), "{}", run.stderr);
}
