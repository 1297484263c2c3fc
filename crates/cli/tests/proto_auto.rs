//! `--proto auto` (the default) against servers of the peer protocols netchar speaks: the
//! protocol is found from the server's first answer, the test runs in it and stderr says so.
//! The iperf3 case is in iperf3_interop.rs (it needs iperf3 installed).

#[path = "support/loopback.rs"]
mod common;

use common::*;
use serde_json::Value;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[test]
fn echo_and_chargen_servers_are_found_and_used() {
    let (echo, discard, chargen) = (free_port(), free_port(), free_port());
    let _s = Server::start(&[
        "--services",
        "--echo-port",
        &echo.to_string(),
        "--discard-port",
        &discard.to_string(),
        "--chargen-port",
        &chargen.to_string(),
    ]);
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
