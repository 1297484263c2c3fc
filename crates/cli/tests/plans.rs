//! `netchar run PLAN.toml`: loops expand to their cross product, repeats and gates apply, and
//! a bad plan fails before any traffic with the line and the field to blame.

#[path = "support/loopback.rs"]
mod common;

use common::*;
use serde_json::Value;

fn plan_file(name: &str, text: &str) -> String {
    let p = std::env::temp_dir().join(format!("netchar-plan-{}-{name}.toml", std::process::id()));
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

#[test]
fn a_plan_with_loops_and_repeats_runs_every_combination() {
    let s = Server::start(&[]);
    let host = format!("127.0.0.1:{}", s.port);
    let plan = plan_file(
        "loops",
        r#"
[defaults]
interval = 0

[[test]]
name = "tcp"
kind = "tcp"
bytes = "5M"
direction = ["up", "down"]
streams = [1, 2]

[[test]]
kind = "udp"
rate = "20M"
duration = 0.3
repeat = 2
pause = 0.1

[[test]]
kind = "rr"
transactions = 200
udp = [false, true]
expect = ["rr.transactions_per_second > 1"]
"#,
    );
    let run = netchar(&["run", &plan, &host, "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    let runs = v.as_array().unwrap();
    assert_eq!(runs.len(), 4 + 2 + 2, "2×2 tcp, 2 udp repeats, 2 rr");
    let tcp_dirs: Vec<(&str, u64)> = runs[..4]
        .iter()
        .map(|r| (r["test"]["direction"].as_str().unwrap(), r["test"]["streams"].as_u64().unwrap()))
        .collect();
    for combo in [("up", 1), ("up", 2), ("down", 1), ("down", 2)] {
        assert!(tcp_dirs.contains(&combo), "{combo:?} missing from {tcp_dirs:?}");
    }
    for r in &runs[..4] {
        let dir = r["test"]["direction"].as_str().unwrap();
        assert_eq!(u(&r["summary"][dir]["receiver"]["total_bytes"]), 5_000_000);
    }
    assert!(runs[4..6].iter().all(|r| r["test"]["kind"] == "udp"));
    assert_eq!(runs[7]["test"]["rr"]["udp"], true);
    // Text mode names each test as it starts.
    let text = netchar(&["run", &plan, &host]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(text.stdout.contains("=== 1 of 7: tcp [up, streams=1]"), "{}", text.stdout);
}

#[test]
fn a_failing_gate_in_a_plan_exits_1() {
    let s = Server::start(&[]);
    let host = format!("127.0.0.1:{}", s.port);
    let plan = plan_file(
        "gate",
        "[[test]]\nkind = \"tcp\"\nbytes = \"1M\"\ninterval = 0\nexpect = [\"up.receiver.bits_per_second >= 1T\"]\n",
    );
    let run = netchar(&["run", &plan, &host]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("expectation not met"), "{}", run.stderr);
}

#[test]
fn invalid_plans_fail_before_any_traffic_naming_line_and_field() {
    // No server at all: a plan that got as far as connecting would say "no netchar server".
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let host = format!("127.0.0.1:{port}");
    for (text, needle) in [
        ("[[test]]\nkind = \"tcp\"\nstreams = 0\n", ":1: test 1 (tcp): -P 0"),
        ("[[test]]\nkind = \"tcp\"\nduration = 1\n\n[[test]]\nkind = \"udp\"\nlength = 10\n", ":5: test 2"),
        ("[[test]]\nkind = \"tcp\"\nstreems = 2\n", ":3: test 1: unknown field \"streems\""),
        ("[[test]]\nkind = \"smtp\"\n", ":2: test 1: kind \"smtp\""),
        ("[[test]\nkind = \"tcp\"\n", "TOML parse error"),
        (
            "[[test]]\nkind = \"tcp\"\nexpect = [\"up.reciever.bits_per_second >= 1M\"]\n",
            "up.reciever.bits_per_second is not a figure of this test; its figures include up.receiver.bits_per_second",
        ),
    ] {
        let plan = plan_file("bad", text);
        let run = netchar(&["run", &plan, &host]);
        assert_eq!(run.code, 2, "{text}: {}", run.stderr);
        assert!(run.stderr.contains(needle), "{text}: expected {needle:?} in {:?}", run.stderr);
        assert!(!run.stderr.contains("no netchar server"), "validated before traffic: {}", run.stderr);
    }
}

/// README's own plan, as written but for its durations: every test runs, and its gate on the up
/// flow's figure holds on the tests that run up (the down tests do not have that figure).
#[test]
fn the_readme_example_plan_runs_and_its_gate_applies_to_the_tests_it_names() {
    let s = Server::start(&[]);
    let host = format!("127.0.0.1:{}", s.port);
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../plans/example.toml")).unwrap();
    let short = text
        .replace("duration = 5", "duration = 0.6")
        .replace("omit = 1", "omit = 0.2")
        .replace("pause = 1", "pause = 0");
    assert_ne!(short, text, "plans/example.toml no longer sets duration = 5");
    let plan = plan_file("example", &short);
    let run = netchar(&["run", &plan, &host, "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let runs: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    // 4 TCP (up and down, 1 and 4 streams), 1 UDP, 2 x 3 rr.
    assert_eq!(runs.as_array().map(Vec::len), Some(11), "{}", run.stdout);
    assert!(!run.stderr.contains("expectation not met"), "{}", run.stderr);
}

/// `run PLAN HOST -p PORT --connect-timeout SECS`: the port and the connect timeout every
/// command takes, for the tests that do not name a server (a bad timeout is refused as a
/// test's would be, before any traffic).
#[test]
fn run_takes_the_port_and_the_connect_timeout_of_every_command() {
    let s = Server::start(&[]);
    let port = s.port.to_string();
    let plan = plan_file("port", "[[test]]\nkind = \"rr\"\ntransactions = 100\ninterval = 0\n");
    let run = netchar(&["run", &plan, "127.0.0.1", "-p", &port, "--connect-timeout", "3", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    let r = &v.as_array().unwrap()[0];
    assert_eq!(r["test"]["remote"], format!("127.0.0.1:{port}"), "{}", r["test"]);
    assert_eq!(u(&r["summary"]["rr"]["transactions"]), 100);
    let run = netchar(&["run", &plan, "127.0.0.1", "-p", &port, "--connect-timeout", "0"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("--connect-timeout 0: must be more than 0"), "{}", run.stderr);
}

/// `netchar run PLAN --json-out FILE`: every test's results as one array in FILE, as `--json`
/// prints them, while the text goes to stdout.
#[test]
fn a_plans_json_out_holds_every_tests_results() {
    let s = Server::start(&[]);
    let host = format!("127.0.0.1:{}", s.port);
    let plan = plan_file(
        "json-out",
        r#"
[[test]]
name = "transfer"
kind = "tcp"
bytes = "2M"
interval = 0
direction = ["up", "down"]
"#,
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plan.json");
    let run = netchar(&["run", &plan, &host, "--json-out", file.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("1 of 2: transfer [up]") && run.stdout.contains("2 of 2: transfer [down]"),
        "{}",
        run.stdout
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let runs = doc.as_array().unwrap();
    let flows: Vec<(&str, u64)> = runs
        .iter()
        .map(|r| {
            let dir = r["test"]["direction"].as_str().unwrap();
            (dir, r["summary"][dir]["receiver"]["total_bytes"].as_u64().unwrap())
        })
        .collect();
    assert_eq!(flows, [("up", 2_000_000), ("down", 2_000_000)]);
}
