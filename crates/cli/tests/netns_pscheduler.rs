//! The pScheduler plugin between two hosts: a runner emulator runs `netchar pscheduler run` for
//! participant 1 in namespace b and participant 0 in namespace a (same start time), across a
//! veth pair shaped with tbf at 200 Mbit/s, then merged-results. A `bandwidth: 50000000` task
//! must arrive at 50 Mbit/s ±2%, with every byte the client sent counted by the server.
//!
//! Needs root, `ip` and `tc`; otherwise it prints "skipping netns test: <reason>" and passes,
//! unless NETCHAR_REQUIRE_ALL=1, in which case it fails.

#[path = "support/netns.rs"]
mod netns;

use netns::*;
use serde_json::{json, Value};
use std::io::Write;
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_netchar");
const TBF: &[&str] = &["tbf", "rate", "200mbit", "burst", "256kb", "latency", "50ms"];

fn method(cmd: Command, name: &str, stdin: &str) -> Value {
    let mut cmd = cmd;
    cmd.args(["pscheduler", name]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "pscheduler {name}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_50_mbits_task_between_two_namespaces_is_held_to_2_percent() {
    let Some(link) = Link::shaped(TBF) else { return };
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("netchar.conf");
    std::fs::write(&conf, "server_port = 5300\n").unwrap();
    let host = || {
        let mut c = Command::new(BIN);
        c.env("NETCHAR_PSCHEDULER_CONFIG", &conf);
        c
    };
    let test = json!({"type": "throughput", "spec": {"schema": 1, "source": link.a_ip.to_string(),
                      "dest": link.b_ip.to_string(), "duration": "PT3S", "bandwidth": 50000000}});
    assert_eq!(method(host(), "can-run", &test.to_string()), json!({"can-run": true}));
    let data: Vec<Value> = (0..2)
        .map(|p| method(host(), "participant-data", &json!({"participant": p, "test": test}).to_string()))
        .collect();
    let start = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() + 1;
    let start = Command::new("date").args(["-u", "-d", &format!("@{start}"), "+%Y-%m-%dT%H:%M:%SZ"]).output().unwrap();
    let start = String::from_utf8(start.stdout).unwrap().trim().to_string();
    let input = |p: u64| {
        json!({"schema": 1, "task-uuid": "00000000-0000-0000-0000-000000000000",
               "schedule": {"start": start, "duration": "PT12S"}, "test": test,
               "participant": p, "participant-data": data})
        .to_string()
    };
    let mut runs = Vec::new();
    for (p, ns) in [(1u64, &link.b), (0, &link.a)] {
        let mut cmd = ns.command(BIN);
        cmd.env("NETCHAR_PSCHEDULER_CONFIG", &conf);
        let stdin = input(p);
        runs.push(std::thread::spawn(move || method(cmd, "run", &stdin)));
    }
    let mut results: Vec<Value> = runs.into_iter().map(|h| h.join().unwrap()).collect();
    results.reverse(); // participant 0 first
    let merged = method(host(), "merged-results", &json!({"test": test, "results": results}).to_string());
    assert_eq!(merged["succeeded"], true, "{merged:#}");
    let summary = &merged["summary"]["summary"];
    let sent = summary["throughput-bytes"].as_u64().unwrap();
    assert_eq!(sent, results[1]["summary"]["summary"]["throughput-bytes"].as_u64().unwrap(), "server's bytes");
    let rate = summary["receiver-throughput-bits"].as_f64().unwrap();
    assert!((rate / 50e6 - 1.0).abs() <= 0.02, "{rate} bit/s is not 50 Mbit/s ±2%: {merged:#}");
}
