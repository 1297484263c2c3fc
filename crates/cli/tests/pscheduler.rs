//! The pScheduler tool plugin (`netchar pscheduler METHOD`, pscheduler-tool-netchar/): each
//! method fed the recorded inputs in pscheduler-tool-netchar/netchar/input/ (written from
//! pScheduler's schemas and its runner's input), and a runner emulator that does what
//! pScheduler's runner does for a throughput test: participant-data for both sides, the slot
//! from `duration`, `run` for participant 1 and participant 0 as separate processes at the
//! same start time, then merged-results. Results are checked against JSON Schemas transcribed
//! from pscheduler-test-throughput (tests/pscheduler/*.schema.json) with Python's jsonschema.
//!
//! The one-off servers of these runs listen on fixed ports below the kernel's ephemeral range
//! (5391-5399, one per test): participant-data must name the port before the server starts, as
//! in pScheduler, and no test binding port 0 can be handed these.

#[path = "support/loopback.rs"]
mod common;
#[path = "support/require.rs"]
mod require;

use common::*;
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn input(name: &str) -> String {
    let path = repo_root().join("pscheduler-tool-netchar/netchar/input").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A config file naming the server port, in a directory of its own.
fn config_with_port(port: u16) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("netchar.conf"), format!("[netchar]\nserver_port = {port}\n")).unwrap();
    dir
}

/// Runs `netchar pscheduler METHOD` with `stdin`; returns its JSON answer.
fn method(name: &str, stdin: &str, config: Option<&Path>) -> Value {
    let mut cmd = Command::new(BIN);
    cmd.args(["pscheduler", name]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    match config {
        Some(dir) => cmd.env("NETCHAR_PSCHEDULER_CONFIG", dir.join("netchar.conf")),
        None => cmd.env("NETCHAR_PSCHEDULER_CONFIG", "/nonexistent"),
    };
    let mut child = cmd.spawn().unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "pscheduler {name} failed: {stderr}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("pscheduler {name}: not JSON ({e}): {stderr}"))
}

/// Validates `doc` against one of the transcribed schemas with Python's jsonschema; skips (with
/// a message) where it is missing, fails under NETCHAR_REQUIRE_ALL=1 (CI).
fn validate(doc: &Value, schema: &str) {
    let schema_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pscheduler").join(schema);
    let Some(python) = python_with("jsonschema") else {
        let reason = "no python3 here imports jsonschema (apt-get install python3-jsonschema)";
        require::unavailable("the schema validation", reason);
        return;
    };
    let script = "import json,sys,jsonschema\nschema=json.load(open(sys.argv[1]))\njsonschema.validate(json.load(sys.stdin), schema)";
    let mut child = Command::new(python)
        .args(["-c", script, schema_path.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(doc.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "not valid against {schema}: {}\n{doc:#}", String::from_utf8_lossy(&out.stderr));
}

/// The first Python (PATH's, then Debian's) that can import `module`.
fn python_with(module: &str) -> Option<&'static str> {
    ["python3", "/usr/bin/python3"].into_iter().find(|py| {
        Command::new(py).args(["-c", &format!("import {module}")]).output().map(|o| o.status.success()).unwrap_or(false)
    })
}

#[test]
fn enumerate_names_the_tool_and_its_test() {
    let e = method("enumerate", "", None);
    assert_eq!(e["schema"], 1);
    assert_eq!(e["name"], "netchar");
    assert_eq!(e["tests"], json!(["throughput"]));
    assert!(e["preference"].is_i64() && e["version"].is_string() && e["maintainer"]["name"].is_string());
}

#[test]
fn can_run_accepts_the_recorded_spec_and_refuses_unknown_keys() {
    let recorded: Value = serde_json::from_str(&input("can-run")).unwrap();
    validate(&recorded["spec"], "throughput-spec-v7.schema.json");
    assert_eq!(method("can-run", &input("can-run"), None), json!({"can-run": true}));

    let unsupported: Value = serde_json::from_str(&input("can-run-unsupported")).unwrap();
    validate(&unsupported["spec"], "throughput-spec-v7.schema.json");
    let no = method("can-run", &input("can-run-unsupported"), None);
    assert_eq!(no["can-run"], false);
    let reasons: Vec<String> =
        no["reasons"].as_array().unwrap().iter().map(|r| r.as_str().unwrap().to_string()).collect();
    for key in ["ip-tos", "fq-rate", "mss"] {
        assert!(reasons.iter().any(|r| r.contains(key)), "no reason names {key}: {reasons:?}");
    }
    let other_test = method("can-run", r#"{"type": "rtt", "spec": {"dest": "b"}}"#, None);
    assert_eq!(other_test["can-run"], false);
}

#[test]
fn duration_is_setup_omit_duration_and_margins() {
    // 4 s setup (200 ms default link RTT), 2 s omit, 10 s test, 2 s client delay, 2 s shutdown.
    assert_eq!(method("duration", &input("duration"), None), json!({"duration": "PT20S"}));
}

#[test]
fn participant_data_gives_the_server_port_and_a_fresh_private_key() {
    let cfg = config_with_port(5399);
    let p0 = method("participant-data", &input("participant-data-0"), Some(cfg.path()));
    assert!(p0.get("_auth").is_none() && p0.get("server_port").is_none(), "{p0}");
    let a = method("participant-data", &input("participant-data-1"), Some(cfg.path()));
    let b = method("participant-data", &input("participant-data-1"), Some(cfg.path()));
    assert_eq!(a["server_port"], 5399);
    let key = a["_auth"]["psk"].as_str().unwrap();
    assert_eq!(key.len(), 64);
    assert!(key.bytes().all(|c| c.is_ascii_hexdigit()));
    assert_ne!(a["_auth"]["psk"], b["_auth"]["psk"], "each run gets its own key");
}

#[test]
fn merged_results_hands_on_the_clients_result_with_both_diags() {
    let merged = method("merged-results", &input("merged-results"), None);
    validate(&merged, "throughput-result.schema.json");
    assert_eq!(merged["succeeded"], true);
    assert_eq!(merged["summary"]["summary"]["throughput-bytes"], 3434086400u64);
    let diags = merged["diags"].as_str().unwrap();
    assert!(
        diags.contains("Participant 0:\nnetchar tcp") && diags.contains("Participant 1:\nnetchar server"),
        "{diags}"
    );

    let failed = method("merged-results", &input("merged-results-failed"), None);
    assert_eq!(failed["succeeded"], false);
    let error = failed["error"].as_str().unwrap();
    assert!(error.contains("authentication failed") && error.contains("no test arrived"), "{error}");
}

/// What pScheduler's runner does for one throughput run: participant-data from each side,
/// the slot from `duration`, `run` for each participant as its own process with the same
/// start, then merged-results. Returns (merged, participant results).
fn emulate_runner(spec: Value, port: u16, tamper_key: bool) -> (Value, Vec<Value>) {
    let cfg = config_with_port(port);
    let test = json!({"type": "throughput", "spec": spec});
    assert_eq!(method("can-run", &test.to_string(), None), json!({"can-run": true}));
    let slot = method("duration", &test.to_string(), None);
    let single = spec_flag(&test, "single-ended") || spec_flag(&test, "loopback");
    let participants: Vec<u64> = if single { vec![0] } else { vec![0, 1] };
    let mut data: Vec<Value> = participants
        .iter()
        .map(|p| method("participant-data", &json!({"participant": p, "test": test}).to_string(), Some(cfg.path())))
        .collect();
    let start = SystemTime::now() + Duration::from_secs(1);
    let start = start.duration_since(UNIX_EPOCH).unwrap().as_secs();
    let start_text = iso8601(start);
    let run_input = |p: u64, data: &[Value]| {
        json!({"schema": 1, "task-uuid": "00000000-0000-0000-0000-000000000000",
               "schedule": {"start": start_text, "duration": slot["duration"]},
               "test": test, "participant": p, "participant-data": data})
        .to_string()
    };
    let mut handles = Vec::new();
    for &p in participants.iter().rev() {
        let mut these = data.clone();
        if tamper_key && p == 0 {
            these[1]["_auth"]["psk"] = json!("00".repeat(32));
        }
        let stdin = run_input(p, &these);
        let cfg_path = cfg.path().to_path_buf();
        handles.push(std::thread::spawn(move || method("run", &stdin, Some(&cfg_path))));
    }
    let mut results: Vec<Value> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    results.reverse();
    for r in &results {
        validate(r, "throughput-result.schema.json");
    }
    data.clear();
    let merged = method("merged-results", &json!({"test": test, "results": results}).to_string(), None);
    validate(&merged, "throughput-result.schema.json");
    (merged, results)
}

fn spec_flag(test: &Value, key: &str) -> bool {
    test["spec"][key].as_bool().unwrap_or(false)
}

/// Seconds since the epoch as pScheduler writes a start time.
fn iso8601(secs: u64) -> String {
    let out =
        Command::new("date").args(["-u", "-d", &format!("@{secs}"), "+%Y-%m-%dT%H:%M:%S+00:00"]).output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The netchar result the client's diags carry (the JSON after the command line).
fn raw_result(merged: &Value) -> Value {
    let diags = merged["diags"].as_str().unwrap();
    let start = diags.find("\n\n{").unwrap_or_else(|| panic!("no netchar JSON in diags: {diags}")) + 2;
    let mut de = serde_json::Deserializer::from_str(&diags[start..]).into_iter::<Value>();
    de.next().unwrap().unwrap()
}

#[test]
fn two_participants_on_loopback_measure_every_byte() {
    let spec = json!({"schema": 1, "source": "127.0.0.1", "dest": "127.0.0.1", "duration": "PT1S", "parallel": 2});
    let (merged, results) = emulate_runner(spec, 5391, false);
    assert_eq!(merged["succeeded"], true, "{merged:#}");
    let sent = merged["summary"]["summary"]["throughput-bytes"].as_u64().unwrap();
    let received_by_server = results[1]["summary"]["summary"]["throughput-bytes"].as_u64().unwrap();
    assert!(sent > 0);
    assert_eq!(sent, received_by_server, "sender bytes == the server's received bytes");
    let streams = merged["summary"]["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 2);
    assert_eq!(streams.iter().map(|s| s["throughput-bytes"].as_u64().unwrap()).sum::<u64>(), sent);
    assert!(merged["summary"]["summary"]["receiver-throughput-bits"].as_f64().unwrap() > 0.0);
    assert!(!merged["intervals"].as_array().unwrap().is_empty());
    let raw = raw_result(&merged);
    assert_eq!(raw["summary"]["up"]["receiver"]["bytes"].as_u64().unwrap(), sent);
    // The key never leaves participant data: not in either result.
    assert!(!merged.to_string().contains("_auth"));
}

#[test]
fn reverse_runs_the_server_as_sender() {
    let spec = json!({"schema": 1, "dest": "127.0.0.1", "duration": "PT1S", "reverse": true});
    let (merged, results) = emulate_runner(spec, 5392, false);
    assert_eq!(merged["succeeded"], true, "{merged:#}");
    let raw = raw_result(&merged);
    assert_eq!(raw["test"]["direction"], "down");
    let sent = merged["summary"]["summary"]["throughput-bytes"].as_u64().unwrap();
    assert_eq!(sent, raw["summary"]["down"]["receiver"]["bytes"].as_u64().unwrap());
    assert_eq!(sent, results[1]["summary"]["summary"]["throughput-bytes"].as_u64().unwrap());
}

#[test]
fn a_wrong_key_fails_both_participants() {
    let spec = json!({"schema": 1, "dest": "127.0.0.1", "duration": "PT1S"});
    let (merged, results) = emulate_runner(spec, 5393, true);
    assert_eq!(merged["succeeded"], false, "{merged:#}");
    assert_eq!(results[0]["succeeded"], false);
    assert_eq!(results[1]["succeeded"], false);
    assert!(merged["error"].as_str().unwrap().contains("participant 0"), "{merged:#}");
}

#[test]
fn an_unreachable_destination_is_a_failed_result() {
    // Participant 1 never runs: nothing listens on the port.
    let cfg = config_with_port(5394);
    let test = json!({"type": "throughput", "spec": {"schema": 1, "dest": "127.0.0.1", "duration": "PT1S"}});
    let p1 = method("participant-data", &json!({"participant": 1, "test": test}).to_string(), Some(cfg.path()));
    let start = iso8601(SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs());
    let input = json!({"schema": 1, "schedule": {"start": start, "duration": "PT10S"}, "test": test,
                       "participant": 0, "participant-data": [{"schema": 1}, p1]});
    let r = method("run", &input.to_string(), Some(cfg.path()));
    validate(&r, "throughput-result.schema.json");
    assert_eq!(r["succeeded"], false);
    assert!(!r["error"].as_str().unwrap().is_empty());
}

#[test]
fn single_ended_runs_against_a_plain_server() {
    let server = Server::start(&[]);
    let spec = json!({"schema": 2, "dest": "127.0.0.1", "duration": "PT1S", "single-ended": true,
                      "single-ended-port": server.port});
    let (merged, results) = emulate_runner(spec, 5395, false);
    assert_eq!(results.len(), 1);
    assert_eq!(merged["succeeded"], true, "{merged:#}");
    let raw = raw_result(&merged);
    assert_eq!(merged["summary"]["summary"]["throughput-bytes"], raw["summary"]["up"]["receiver"]["bytes"]);
}

#[test]
fn loopback_runs_both_ends_in_one_participant() {
    let spec = json!({"schema": 5, "dest": "127.0.0.1", "duration": "PT1S", "loopback": true});
    let (merged, results) = emulate_runner(spec, 5396, false);
    assert_eq!(results.len(), 1);
    assert_eq!(merged["succeeded"], true, "{merged:#}");
    let diags = merged["diags"].as_str().unwrap();
    assert!(diags.contains("Client:") && diags.contains("Server:"), "{diags}");
}

#[test]
fn udp_reports_datagrams_sent_lost_and_jitter() {
    let spec = json!({"schema": 1, "dest": "127.0.0.1", "duration": "PT1S", "udp": true, "bandwidth": 20000000});
    let (merged, _) = emulate_runner(spec, 5397, false);
    assert_eq!(merged["succeeded"], true, "{merged:#}");
    let s = &merged["summary"]["summary"];
    let raw = raw_result(&merged);
    assert_eq!(s["sent"], raw["summary"]["up"]["sender"]["packets"]);
    assert_eq!(s["lost"], raw["summary"]["up"]["receiver"]["lost"]);
    assert!(s["jitter"].is_number());
}

#[test]
fn make_install_lays_out_six_one_line_methods() {
    let dest = tempfile::tempdir().unwrap();
    let tool = dest.path().join("usr/lib/pscheduler/classes/tool/netchar");
    let conf = dest.path().join("etc/pscheduler/tool");
    let out = Command::new("make")
        .arg("-C")
        .arg(repo_root().join("pscheduler-tool-netchar"))
        .arg("install")
        .arg(format!("DESTDIR={}", tool.display()))
        .arg(format!("CONFDIR={}", conf.display()))
        .output();
    let out = match out {
        Ok(out) => out,
        Err(e) => {
            return require::unavailable("make install", &format!("`make` cannot be run ({e}); apt-get install make"))
        }
    };
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for m in ["enumerate", "can-run", "duration", "participant-data", "run", "merged-results"] {
        let path = tool.join(m);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, format!("#!/bin/sh\nexec netchar pscheduler {m}\n"));
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o555);
    }
    assert!(conf.join("netchar.conf").exists());
    // The installed enumerate runs netchar from PATH, as pScheduler calls it.
    let bin_dir = Path::new(BIN).parent().unwrap();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let out = Command::new(tool.join("enumerate")).env("PATH", path).output().unwrap();
    let e: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(e["name"], "netchar");
}

#[test]
fn a_bandwidth_of_50_mbits_is_held_within_2_percent() {
    // 50 Mbit/s: the most perfSONAR's default limits allow a UDP test from outside.
    let spec = json!({"schema": 1, "dest": "127.0.0.1", "duration": "PT2S", "bandwidth": 50000000});
    let (merged, _) = emulate_runner(spec, 5398, false);
    assert_eq!(merged["succeeded"], true, "{merged:#}");
    let raw = raw_result(&merged);
    let bytes = raw["summary"]["up"]["receiver"]["bytes"].as_f64().unwrap();
    let seconds = raw["summary"]["up"]["sender"]["seconds"].as_f64().unwrap();
    let rate = bytes * 8.0 / seconds;
    assert!((rate / 50e6 - 1.0).abs() <= 0.02, "{rate} bit/s is not within 2% of 50 Mbit/s");
}
