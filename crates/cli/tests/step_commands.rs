//! `--step-cmd` end to end over loopback (issue 23): the command runs before and after every
//! step of a sweep or suite with the step in its environment, and each step's result keeps
//! what it printed, its exit status and the step's counters (`evidence`, `loss_breakdown`).
//! The ground truth is the step's own spec in its result: the command must have been told
//! exactly that. A failing command is recorded and the sweep goes on.

#[path = "support/loopback.rs"]
mod common;

use common::*;
use serde_json::Value;

/// Prints the step's variables as `KEY=VALUE` lines, and fails (exit 3) after the odd steps.
const ECHO_ENV: &str =
    "env | grep '^NETCHAR_' | sort; [ $NETCHAR_PHASE = after ] && [ $((NETCHAR_STEP % 2)) = 1 ] && exit 3; exit 0";

/// The `KEY=VALUE` lines a command printed.
fn printed(c: &Value) -> std::collections::BTreeMap<String, String> {
    c["stdout"]
        .as_str()
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
        .collect()
}

/// The step's commands must have been told the step of `r` (its number, rate, size and
/// direction), in the phases before and after, and kept what they printed and their status.
fn check_step(r: &Value, index: u64) {
    let step = &r["step"];
    assert_eq!(u(&step["index"]), index, "{step}");
    let commands = step["commands"].as_array().unwrap();
    assert_eq!(commands.len(), 2, "{step}");
    let spec = &r["test"];
    let rate = spec["udp"]["rate"]["bits_per_second"].as_u64().map_or("0".to_string(), |b| b.to_string());
    for (c, phase) in commands.iter().zip(["before", "after"]) {
        assert_eq!(c["phase"], phase);
        let got = printed(c);
        assert_eq!(got["NETCHAR_STEP"], index.to_string(), "{c}");
        assert_eq!(got["NETCHAR_PHASE"], phase, "{c}");
        assert_eq!(got["NETCHAR_RATE_BPS"], rate, "{c}");
        assert_eq!(got["NETCHAR_BLOCK_BYTES"], u(&spec["block_bytes"]).to_string(), "{c}");
        assert_eq!(got["NETCHAR_DIRECTION"], spec["direction"].as_str().unwrap().to_lowercase(), "{c}");
        // What it was given is recorded beside what it printed (which also shows the NETCHAR_*
        // variables of netchar's own environment, inherited).
        let recorded = c["env"].as_object().unwrap();
        assert_eq!(recorded.len(), 6, "{c}");
        for (k, v) in recorded {
            assert_eq!(got.get(k).map(String::as_str), v.as_str(), "{c}");
        }
        let failed = phase == "after" && index % 2 == 1;
        assert_eq!(c["exit_code"], if failed { 3 } else { 0 }, "{c}");
        assert_eq!(c["timed_out"], false);
    }
}

/// Runs `args` with `--json --step-cmd ECHO_ENV`, which must succeed (commands that fail do not
/// stop a sweep), and checks every result as the step of its place.
fn steps_of(args: &[&str]) -> Vec<Value> {
    let mut all = args.to_vec();
    all.extend(["--json", "--step-cmd", ECHO_ENV]);
    let run = netchar(&all);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let steps: Vec<Value> = serde_json::from_str(&run.stdout).unwrap();
    for (i, r) in steps.iter().enumerate() {
        check_step(r, i as u64 + 1);
    }
    steps
}

#[test]
fn a_sweep_runs_the_step_command_around_every_step_and_keeps_its_output_and_counters() {
    let s = Server::start(&[]);
    let port = s.port.to_string();
    let args = ["suite", "bwsweep", "127.0.0.1", "-p", &port, "--from", "10M", "--to", "20M", "--step", "10M"];
    let steps = steps_of(&[&args[..], &["--duration", "0.5"]].concat());
    assert_eq!(steps.len(), 4, "two rates, both directions");
    for (i, r) in steps.iter().enumerate() {
        // Each step carries its own counters and loss breakdown.
        assert!(r["evidence"]["local"].is_object(), "step {}: {}", i + 1, r["evidence"]);
        let flow = if r["summary"]["up"].is_object() { &r["summary"]["up"] } else { &r["summary"]["down"] };
        let b = &flow["loss_breakdown"];
        assert!(b.is_object(), "step {}: no loss_breakdown", i + 1);
        let lost = u(&flow["receiver"]["lost"]);
        assert_eq!(u(&b["lost"]), lost, "step {}: the breakdown splits the step's own loss", i + 1);
    }
}

#[test]
fn the_sizes_suite_tells_each_step_its_block_size() {
    let s = Server::start(&[]);
    let port = s.port.to_string();
    let steps = steps_of(&["suite", "sizes", "127.0.0.1", "-p", &port, "-b", "512,1024", "--duration", "0.5"]);
    assert_eq!(steps.len(), 4, "two sizes over TCP and UDP");
}

#[test]
fn the_text_table_shows_each_steps_command_briefly() {
    let s = Server::start(&[]);
    let port = s.port.to_string();
    let run = netchar(&[
        "suite",
        "bwsweep",
        "127.0.0.1",
        "-p",
        &port,
        "--from",
        "10M",
        "--to",
        "10M",
        "--step",
        "10M",
        "--duration",
        "0.5",
        "--step-cmd",
        "echo reading $NETCHAR_PHASE; exit 2",
    ]);
    assert_has_lines(
        &run,
        &[
            "--step-cmd step 1 before: exit 2 in ",
            ": reading before",
            "--step-cmd step 2 after: exit 2 in ",
            ": reading after",
        ],
    );
}

/// The run succeeded and its standard output holds every piece of `wanted`.
fn assert_has_lines(run: &Run, wanted: &[&str]) {
    assert_eq!(run.code, 0, "{}", run.stderr);
    for want in wanted {
        assert!(run.stdout.contains(want), "{want:?} missing:\n{}", run.stdout);
    }
}

#[test]
fn the_search_and_sizes_tables_show_each_steps_command_briefly() {
    let s = Server::start(&[]);
    let port = s.port.to_string();
    let cmd = "echo at $NETCHAR_BLOCK_BYTES bytes";
    let search = netchar(&[
        "udp",
        "127.0.0.1",
        "-p",
        &port,
        "-b",
        "20M",
        "-t",
        "0.5",
        "--find-max-rate",
        "--loss",
        "100",
        "--step-cmd",
        cmd,
    ]);
    assert_eq!(search.code, 0, "{}", search.stderr);
    let sizes =
        netchar(&["suite", "sizes", "127.0.0.1", "-p", &port, "-b", "512", "--duration", "0.5", "--step-cmd", cmd]);
    assert_eq!(sizes.code, 0, "{}", sizes.stderr);
    for (out, want) in [
        (&search.stdout, "--step-cmd step 1 before: exit 0 in "),
        (&search.stdout, "--step-cmd step 1 after: exit 0 in "),
        (&sizes.stdout, "--step-cmd step 1 before: exit 0 in "),
        (&sizes.stdout, "--step-cmd step 2 after: exit 0 in "),
        (&sizes.stdout, ": at 512 bytes"),
    ] {
        assert!(out.contains(want), "{want:?} missing:\n{out}");
    }
    assert!(search.stdout.contains(": at 1472 bytes"), "{}", search.stdout);
}

#[test]
fn bad_step_and_knee_flags_are_refused_in_one_line() {
    for (args, want) in [
        (&["suite", "bwsweep", "127.0.0.1", "--knee-loss", "lots"][..], "--knee-loss lots: "),
        (&["suite", "bwsweep", "127.0.0.1", "--step-cmd", " "][..], "--step-cmd: the command is empty"),
        (&["suite", "sizes", "127.0.0.1", "--step-cmd", "true", "--step-timeout", "0"][..], "--step-timeout 0: "),
        (&["udp", "127.0.0.1", "--step-cmd", "true"][..], "--step-cmd: only with --find-max-rate"),
        (&["tcp", "127.0.0.1", "--reset-cmd", "true", "--reset-timeout", "x"][..], "--reset-timeout x: "),
        (&["echo", "127.0.0.1", "--pattern", "1x64", "--reset-cmd", "true"][..], "echo: --reset-cmd is for tcp"),
        (
            &["suite", "netio", "127.0.0.1", "--proto", "netio", "--step-cmd", "true"][..],
            "--step-cmd is not supported against a netio server",
        ),
        (
            &["suite", "ecos", "127.0.0.1", "--proto", "nc-test", "--step-cmd", "true"][..],
            "--step-cmd is not supported against an eCos slave",
        ),
    ] {
        let run = netchar(args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        let lines: Vec<&str> = run.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: {}", run.stderr);
        assert!(lines[0].contains(want), "{args:?}: {}", run.stderr);
    }
}

#[test]
fn a_rate_search_runs_the_step_command_around_every_trial() {
    let s = Server::start(&[]);
    let port = s.port.to_string();
    let args = ["udp", "127.0.0.1", "-p", &port, "-b", "20M", "-t", "0.5", "--find-max-rate", "--loss", "100"];
    // How many trials the search takes is its own business (a sender that fell behind its
    // schedule fails a trial on a busy machine): each one is a step.
    assert!(!steps_of(&args).is_empty());
}

#[test]
fn each_test_of_a_plan_and_each_of_its_repeats_is_a_step() {
    let s = Server::start(&[]);
    let host = format!("127.0.0.1:{}", s.port);
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.toml");
    std::fs::write(
        &plan,
        "[[test]]\nkind = \"udp\"\nrate = \"20M\"\nduration = 0.3\nrepeat = 2\n\n\
         [[test]]\nkind = \"tcp\"\nbytes = \"1M\"\ndirection = \"down\"\n",
    )
    .unwrap();
    let results = steps_of(&["run", plan.to_str().unwrap(), &host]);
    assert_eq!(results.len(), 3, "two udp runs, one tcp");
}

#[test]
fn the_netio_suite_runs_the_step_command_around_every_test() {
    let s = Server::start(&[]);
    let port = s.port.to_string();
    let steps = steps_of(&["suite", "netio", "127.0.0.1", "-p", &port, "-b", "1k", "--duration", "0.3"]);
    assert_eq!(steps.len(), 4, "TCP and UDP, tx and rx");
    // The text: netio's table, then each command with the test it ran around.
    let run = netchar(&[
        "suite",
        "netio",
        "127.0.0.1",
        "-p",
        &port,
        "-b",
        "1k",
        "--duration",
        "0.3",
        "--step-cmd",
        "echo at $NETCHAR_STEP",
    ]);
    assert_has_lines(
        &run,
        &[
            "--step-cmd step 1 before: exit 0 in ",
            ": at 1 (1024 bytes, TCP-tx)",
            "--step-cmd step 4 after: exit 0 in ",
            ": at 4 (1024 bytes, UDP-rx)",
        ],
    );
}

#[test]
fn the_ecos_suite_runs_the_step_command_around_every_test() {
    let s = Server::start(&[]);
    let port = s.port.to_string();
    let run =
        netchar(&["suite", "ecos", "127.0.0.1", "-p", &port, "--quick", "--json", "--step-cmd", "echo $NETCHAR_STEP"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let steps: Vec<Value> = serde_json::from_str(&run.stdout).unwrap();
    assert!(!steps.is_empty());
    for (i, r) in steps.iter().enumerate() {
        let step = &r["step"];
        assert_eq!(u(&step["index"]), i as u64 + 1, "{step}");
        let phases: Vec<(&str, &str)> = step["commands"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["phase"].as_str().unwrap(), c["stdout"].as_str().unwrap().trim()))
            .collect();
        let n = (i + 1).to_string();
        assert_eq!(phases, [("before", n.as_str()), ("after", n.as_str())], "{step}");
    }
    // The text: each test's master lines, then its commands.
    let run = netchar(&["suite", "ecos", "127.0.0.1", "-p", &port, "--quick", "--step-cmd", "echo at $NETCHAR_STEP"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let first = run.stdout.find("--step-cmd step 1 before: exit 0 in ").expect(&run.stdout);
    assert!(
        run.stdout[..first].contains("Start UDP echo"),
        "the first command's line before its test:\n{}",
        run.stdout
    );
    let last = format!("--step-cmd step {} after: exit 0 in ", steps.len());
    assert!(
        run.stdout.contains(&last) && run.stdout.contains(&format!(": at {}", steps.len())),
        "{last:?}:\n{}",
        run.stdout
    );
}
