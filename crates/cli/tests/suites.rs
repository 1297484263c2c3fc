//! The built-in suites end to end over loopback: every row they promise, each from a real test.

#[path = "support/loopback.rs"]
mod common;

use common::*;
use serde_json::Value;
use std::sync::Mutex;

/// One suite at a time: the eCos suite measures the CPU load it imposes, and the other suites'
/// traffic on this test binary's threads would take the CPU time that load asks for.
static ONE_SUITE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_SUITE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn suite_json(s: &Server, name: &str) -> Vec<Value> {
    let port = s.port.to_string();
    let run = netchar(&["suite", name, "127.0.0.1", "-p", &port, "--duration", "0.2", "--json"]);
    assert_eq!(run.code, 0, "{name}: {}", run.stderr);
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    v.as_array().unwrap().clone()
}

#[test]
fn netio_runs_tcp_and_udp_both_ways_for_each_block_size() {
    let _serial = one_at_a_time();
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
    let _serial = one_at_a_time();
    let s = Server::start(&[]);
    let runs = suite_json(&s, "sizes");
    assert_eq!(runs.len(), 18);
    assert!(runs[..9].iter().all(|r| r["test"]["kind"] == "tcp"));
    assert!(runs[9..].iter().all(|r| r["test"]["kind"] == "udp" && r["summary"]["up"]["packets_accounted"] == true));
    let port = s.port.to_string();
    let text = netchar(&["suite", "sizes", "127.0.0.1", "-p", &port, "--duration", "0.1"]);
    assert!(text.stdout.contains("MB/s (2^20) Mbit/s (10^6)"), "{}", text.stdout);
}

#[test]
fn ecos_runs_the_nc6_test_master_sequence() {
    let _serial = one_at_a_time();
    let s = Server::start(&[]);
    let port = s.port.to_string();
    let run = netchar(&["suite", "ecos", "127.0.0.1", "-p", &port, "--quick"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = &run.stdout;
    for header in ["No load, master at 100%", "Various slave compute loads", "Various master loads"] {
        assert!(out.contains(header), "{header} missing:\n{out}");
    }
    // No load: 7 tests; slave loads 0..50%: 12 echo tests; master loads: 10 echo tests.
    assert_eq!(out.lines().filter(|l| l.contains(" echo - ")).count(), 3 + 12 + 10, "{out}");
    assert!(out.contains("UDP send - 64 bufs of 1024 bytes"), "{out}");
    assert!(out.contains("TCP recv - 64 bufs of 1024 bytes"), "{out}");
    assert!(out.contains("10ms delay after 10 packets"), "{out}");
    assert_eq!(out.lines().filter(|l| l.contains("master") && l.contains("% idle")).count(), 10, "{out}");
    // The slave loads are measured: 50% asked, within ±5 points.
    let loads: Vec<f64> = out
        .lines()
        .filter_map(|l| l.trim().strip_prefix("slave background load achieved ")?.trim_end_matches('%').parse().ok())
        .collect();
    assert_eq!(loads.len(), 12, "{out}");
    for (achieved, asked) in loads.iter().zip([0.0, 0.0, 10.0, 10.0, 20.0, 20.0, 30.0, 30.0, 40.0, 40.0, 50.0, 50.0]) {
        assert!((achieved - asked).abs() <= 5.0, "asked {asked}%, achieved {achieved}%");
    }
}
