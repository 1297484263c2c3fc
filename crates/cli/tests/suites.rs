//! The built-in suites end to end over loopback: every row they promise, each from a real test.

#[path = "support/loopback.rs"]
mod common;

use common::*;
use serde_json::Value;

fn suite_json(s: &Server, name: &str) -> Vec<Value> {
    let port = s.port.to_string();
    // 0.5 s: on a machine loaded to 10+ runnable threads a worker started 0.2 s late was seen
    // to find its time already up and send nothing.
    let run = netchar(&["suite", name, "127.0.0.1", "-p", &port, "--duration", "0.5", "--json"]);
    assert_eq!(run.code, 0, "{name}: {}", run.stderr);
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    v.as_array().unwrap().clone()
}

#[test]
fn netio_runs_tcp_and_udp_both_ways_for_each_block_size() {
    let s = Server::start(&[]);
    let runs = suite_json(&s, "netio");
    assert_eq!(runs.len(), 6 * 4);
    let sizes: Vec<u64> = runs.iter().step_by(4).map(|r| r["test"]["block_bytes"].as_u64().unwrap()).collect();
    assert_eq!(sizes, [1024, 2048, 4096, 8192, 16384, 32767]);
    for (i, r) in runs.iter().enumerate() {
        assert!(r["error"].is_null(), "{}", r["error"]);
        let (kind, dir) = [("tcp", "up"), ("tcp", "down"), ("udp", "up"), ("udp", "down")][i % 4];
        assert_eq!(r["test"]["kind"], kind);
        assert!(f(&r["summary"][dir]["receiver"]["bits_per_second"]) > 0.0, "{kind} {dir}");
    }
    let port = s.port.to_string();
    let text = netchar(&["suite", "netio", "127.0.0.1", "-p", &port, "--duration", "0.1"]);
    assert!(
        text.stdout.contains("| Packet size |   TCP-tx    |   TCP-rx    |   UDP-tx    |   UDP-rx    |"),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains("| 32767 bytes |"), "{}", text.stdout);
}

#[test]
fn sizes_sweeps_block_sizes_over_tcp_and_udp() {
    let s = Server::start(&[]);
    let runs = suite_json(&s, "sizes");
    assert_eq!(runs.len(), 18);
    assert!(runs[..9].iter().all(|r| r["test"]["kind"] == "tcp"));
    assert!(runs[9..].iter().all(|r| r["test"]["kind"] == "udp" && r["summary"]["up"]["packets_accounted"] == true));
    let port = s.port.to_string();
    let text = netchar(&["suite", "sizes", "127.0.0.1", "-p", &port, "--duration", "0.1"]);
    assert!(text.stdout.contains("MB/s (2^20) Mbit/s (10^6)"), "{}", text.stdout);
}
