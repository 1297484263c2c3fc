//! `--payload` and `--verify` over loopback, where nothing corrupts a byte: every byte and
//! datagram each receiver read is compared and found as sent, in both directions, over TCP,
//! UDP, rr and an echo service; and the options are refused, in one line, where they cannot
//! hold. (crates/cli/tests/netns_verify.rs counts corruption that a tc rule makes.)

#[path = "support/loopback.rs"]
mod common;

use common::*;
use serde_json::Value;

/// The flow's `--verify` summary, checked to have compared every byte the receiver read and
/// found none changed; returns it.
fn intact_flow<'a>(r: &'a Value, flow: &str) -> &'a Value {
    let v = &r["summary"][flow]["verify"];
    assert!(v.is_object(), "summary.{flow}.verify missing: {}", r["summary"]);
    assert!(u(&v["checked_bytes"]) > 0, "{v}");
    assert_eq!(u(&v["corrupted_bytes"]), 0, "{v}");
    assert!(v["first_bad_offset"].is_null(), "{v}");
    v
}

#[test]
fn tcp_streams_of_a_random_payload_arrive_intact_both_ways() {
    let s = Server::start(&[]);
    let r = tcp_json(
        &s,
        "127.0.0.1",
        &["-n", "24M", "-P", "2", "--bidir", "-l", "100000", "--payload", "random:7", "--verify"],
    );
    assert_eq!(r["test"]["payload"], serde_json::json!({"kind": "random", "seed": 7}));
    assert_eq!(r["test"]["verify"], true);
    for flow in ["up", "down"] {
        let (_, received) = check_flow(&r, flow, 2);
        let v = intact_flow(&r, flow);
        assert_eq!(u(&v["checked_bytes"]), received, "every byte read was compared ({flow})");
        assert!(v["corrupted_datagrams"].is_null(), "TCP counts no datagrams: {v}");
    }
    // Each receiver's own record, measured at its end (the server's up, the client's down).
    for rec in r["streams"].as_array().unwrap() {
        let v = &rec["verify"];
        match rec["role"].as_str() {
            Some("receiver") => assert_eq!(u(&v["checked_bytes"]), u(&rec["bytes"]), "{rec}"),
            _ => assert!(v.is_null(), "senders compare nothing: {rec}"),
        }
    }
}

#[test]
fn every_payload_kind_arrives_as_sent_and_without_verify_nothing_is_compared() {
    let s = Server::start(&[]);
    for kind in ["zeros", "pattern", "stackthru:3"] {
        let r = tcp_json(&s, "127.0.0.1", &["-n", "3M", "-R", "-l", "1448", "--payload", kind, "--verify"]);
        let (_, received) = check_flow(&r, "down", 1);
        assert_eq!(u(&intact_flow(&r, "down")["checked_bytes"]), received, "{kind}");
    }
    let r = tcp_json(&s, "127.0.0.1", &["-t", "0.5", "--payload", "random"]);
    assert!(r["summary"]["up"]["verify"].is_null() && r["test"]["verify"].is_null(), "{}", r["summary"]);
    assert!(r["test"]["payload"]["seed"].is_u64(), "a drawn seed is recorded: {}", r["test"]);
}

#[test]
fn udp_datagrams_of_a_stackthru_payload_arrive_intact_both_ways() {
    let s = Server::start(&[]);
    let r = client_json(
        "udp",
        &s,
        "127.0.0.1",
        &["--bidir", "-P", "2", "--pps", "4000", "-t", "1", "-l", "1000", "--payload", "stackthru", "--verify"],
    );
    for flow in ["up", "down"] {
        let v = intact_flow(&r, flow);
        let received = u(&r["summary"][flow]["receiver"]["packets"]);
        assert!(received > 1000, "{}", r["summary"][flow]);
        assert_eq!(u(&v["checked_datagrams"]), received, "every datagram was compared ({flow}): {v}");
        assert_eq!(u(&v["corrupted_datagrams"]), 0, "{v}");
        assert_eq!(u(&v["checked_bytes"]), received * (1000 - 24), "the payload behind each header: {v}");
    }
}

#[test]
fn rr_compares_the_requests_and_what_came_back() {
    let s = Server::start(&[]);
    for udp in [false, true] {
        let mut args = vec!["-n", "2000", "-l", "300", "--response", "1200", "--payload", "random", "--verify"];
        if udp {
            args.push("--udp");
        }
        let r = client_json("rr", &s, "127.0.0.1", &args);
        let rr = &r["summary"]["rr_verify"];
        assert_eq!(u(&r["summary"]["rr"]["transactions"]), 2000);
        for (part, size) in [("requests", 300), ("responses", 1200)] {
            let v = &rr[part];
            assert_eq!(u(&v["corrupted_bytes"]), 0, "{part}: {v}");
            // UDP compares what follows each datagram's 8-byte sequence key.
            let each = if udp { size - 8 } else { size };
            assert_eq!(u(&v["checked_bytes"]), 2000 * each, "{part} (udp {udp}): {v}");
        }
    }
}

#[test]
fn an_echo_service_returns_the_payload_and_the_client_compares_it() {
    let s = Server::start(&["--services", "--echo-port", "0", "--discard-port", "0", "--chargen-port", "0"]);
    let line = s.startup.iter().find(|l| l.starts_with("services: ")).expect("the services' ports");
    let echo = line.split_whitespace().nth(3).expect("echo on PORT,").trim_end_matches(',').to_string();
    let run = netchar(&[
        "echo",
        "127.0.0.1",
        "-p",
        &echo,
        "--proto",
        "echo",
        "--udp",
        "--pattern",
        "300x1000",
        "--payload",
        "random",
        "--verify",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("verify responses intact: 297600 bytes in 300 datagrams compared"), "{}", run.stdout);
    let run = netchar(&[
        "tcp",
        "127.0.0.1",
        "-p",
        &echo,
        "--proto",
        "echo",
        "-n",
        "5M",
        "--payload",
        "random",
        "--verify",
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let r: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(u(&intact_flow(&r, "down")["checked_bytes"]), 5_000_000, "every byte echoed was compared");
}

#[test]
fn payload_and_verify_are_refused_in_one_line_where_they_cannot_hold() {
    for (args, says) in [
        (
            &["tcp", "--payload", "noise"][..],
            "--payload noise: expected zeros, pattern, random[:SEED] or stackthru[:SEED]",
        ),
        (&["tcp", "--payload", "pattern:3"][..], "pattern takes no seed"),
        (&["tcp", "--verify", "--skip-rx-copy"][..], "--verify reads every byte: not with --skip-rx-copy"),
        (&["tcp", "--zerocopy", "--payload", "random"][..], "--zerocopy sends one constant buffer"),
        (&["crr", "--verify"][..], "crr: --payload and --verify apply to rr"),
        (&["tcp", "--proto", "iperf3", "--verify"][..], "--proto iperf3: --verify compares with netchar's generator"),
        (&["udp", "--proto", "iperf2", "--payload", "zeros"][..], "--proto iperf2: --payload zeros is netchar's own"),
        (&["tcp", "--proto", "discard", "--verify"][..], "only an echo server (--proto echo)"),
        (&["tcp", "--proto", "nc-test", "--verify"][..], "--proto nc-test: the slave writes and reads its own buffers"),
    ] {
        // Refused before any connection: nothing listens on port 9 here.
        let mut argv = vec![args[0], "127.0.0.1", "-p", "9"];
        argv.extend_from_slice(&args[1..]);
        let run = netchar(&argv);
        assert_eq!(run.code, 2, "{argv:?}: {}", run.stderr);
        assert!(run.stderr.contains(says), "{argv:?}: {}", run.stderr);
        assert_eq!(run.stderr.trim().lines().count(), 1, "{argv:?}: one line: {}", run.stderr);
    }
}
