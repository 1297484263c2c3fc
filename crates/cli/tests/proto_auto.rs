//! `--proto auto` (the default) against servers of the peer protocols netchar speaks: the
//! protocol is found from the server's first answer, the test runs in it and stderr says so.
//! The iperf3 case is in iperf3_interop.rs (it needs iperf3 installed).

#[path = "support/loopback.rs"]
mod common;

use common::*;
use serde_json::Value;

#[test]
fn echo_and_chargen_servers_are_found_and_used() {
    // Port 0 for each: ports found free beforehand could be taken by a parallel test.
    let s = Server::start(&["--services", "--echo-port", "0", "--discard-port", "0", "--chargen-port", "0"]);
    let lines = s.startup.clone();
    let line = lines.iter().find(|l| l.starts_with("services: ")).unwrap_or_else(|| panic!("{lines:?}"));
    let ports: Vec<u16> = line.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect();
    let (echo, discard, chargen) = (ports[0], ports[1], ports[2]);
    // An echo server sends netchar's hello back: the test runs through it.
    let r = netchar(&["tcp", "127.0.0.1", "-p", &echo.to_string(), "-t", "1", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("answered as an echo server"), "{}", r.stderr);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["test"]["protocol"], "echo");
    // A chargen server talks first.
    let r = netchar(&["tcp", "127.0.0.1", "-p", &chargen.to_string(), "-t", "1", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["test"]["protocol"], "chargen");
    // A discard server says nothing: nothing to go on, so an error naming what happened.
    let r = netchar(&["tcp", "127.0.0.1", "-p", &discard.to_string(), "-t", "1"]);
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("said nothing"), "{}", r.stderr);
    // Naming the protocol skips the probe.
    let r = netchar(&["tcp", "127.0.0.1", "-p", &discard.to_string(), "-t", "1", "--proto", "discard"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
}

/// Nothing takes TCP on an nc_test slave's port; its UDP control port answers a probe of an
/// unknown request (code 0) with a NAK. `--proto auto` says so and names the command.
#[test]
fn an_nc_test_slave_is_named_when_tcp_is_refused() {
    let s = Server::start(&["--nc-test", "--nc-test-port", "0", "--nc-test-data-port", "0"]);
    let lines = [s.startup.clone(), s.log_lines(std::time::Duration::from_secs(2))].concat();
    let control = lines
        .iter()
        .find_map(|l| l.split("nc_test").nth(1).and_then(|r| r.split("UDP ").nth(1)))
        .and_then(|r| r.split_whitespace().next()?.rsplit(':').next()?.parse::<u16>().ok())
        .unwrap_or_else(|| panic!("{lines:?}"));
    let r = netchar(&["tcp", "127.0.0.1", "-p", &control.to_string(), "-t", "1"]);
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("an eCos nc_test slave answered"), "{}", r.stderr);
    assert!(r.stderr.contains("--proto nc-test"), "{}", r.stderr);
}
