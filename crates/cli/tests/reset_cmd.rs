//! `--reset-cmd` with `--repeat` end to end over loopback (issue 23): before each run a
//! command kills the `netchar server` on a fixed port and starts a new one in the background
//! after half a second, as a target reboots; the client waits until the server answers
//! again, runs the test, and records the command and the time to ready in the run's result.
//!
//! Ground truth: the command's own log (a line per restart, with the new server's pid) and
//! its fixed half-second sleep before the new server starts: no run can find the server
//! ready sooner, and each run's server is a new one.

#[path = "support/loopback.rs"]
mod common;

use common::*;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};

/// Half a second: how long the reset command sleeps before it starts the new server.
const RESTART_DELAY_S: f64 = 0.5;

use netchar_testkit::ports::free_tcp_port as free_port;

/// The reset script: kill the server whose pid is in `dir`/pid, wait until it is gone (or a
/// zombie: its sockets are closed), start a new one after [`RESTART_DELAY_S`] in the
/// background, note its pid, and log the restart.
fn reset_script(dir: &Path, port: u16) -> String {
    let (pid, log) = (dir.join("pid"), dir.join("restarts"));
    let (pid, log) = (pid.display(), log.display());
    format!(
        "old=$(cat {pid}); kill $old; \
         while [ -e /proc/$old ] && ! grep -q '^State:.*Z' /proc/$old/status 2>/dev/null; do sleep 0.02; done; \
         (sleep {RESTART_DELAY_S}; exec {BIN} server -B 127.0.0.1 -p {port}) >/dev/null 2>&1 & \
         echo $! > {pid}; echo \"restarted $!\" | tee -a {log}"
    )
}

/// The first server, its pid where the script finds it; the last one the script started is
/// killed when the returned guard drops.
struct Servers {
    first: std::process::Child,
    dir: tempfile::TempDir,
}

impl Servers {
    fn start(port: u16) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let first = Command::new(BIN)
            .args(["server", "-B", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::fs::write(dir.path().join("pid"), first.id().to_string()).unwrap();
        // Ready when it accepts a connection (the first run's reset kills it anyway).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(std::time::Instant::now() < deadline, "the first server never listened");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Self { first, dir }
    }

    fn restarts(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("restarts"))
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect()
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        let _ = self.first.kill();
        let _ = self.first.wait();
        if let Ok(pid) = std::fs::read_to_string(self.dir.path().join("pid")) {
            let _ = Command::new("kill").arg(pid.trim()).status();
        }
    }
}

#[test]
fn each_repeat_resets_the_server_and_records_the_time_until_it_answers() {
    let port = free_port();
    let servers = Servers::start(port);
    let script = reset_script(servers.dir.path(), port);
    let p = port.to_string();
    let run = netchar(&["tcp", "127.0.0.1", "-p", &p, "-t", "0.5", "--repeat", "3", "--json", "--reset-cmd", &script]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let runs: Vec<Value> = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(runs.len(), 3);
    let restarts = servers.restarts();
    assert_eq!(restarts.len(), 3, "one restart per run: {restarts:?}");
    for (i, r) in runs.iter().enumerate() {
        assert!(r["error"].is_null(), "run {}: {}", i + 1, r["error"]);
        check_flow(r, "up", 1);
        let reset = &r["reset"];
        let c = &reset["command"];
        assert_eq!((c["phase"].as_str(), c["exit_code"].as_i64()), (Some("reset"), Some(0)), "{reset}");
        assert_eq!(c["env"]["NETCHAR_ITERATION"], (i + 1).to_string());
        // The restart this run waited for, by the new server's pid.
        assert_eq!(c["stdout"].as_str().unwrap().trim(), restarts[i], "{reset}");
        let ready = f(&reset["time_to_ready_seconds"]);
        assert!(ready >= RESTART_DELAY_S, "run {}: ready after {ready} s, before the server was started", i + 1);
        assert!(u(&reset["probes"]) >= 1);
    }
}

#[test]
fn the_text_shows_each_reset_and_the_repeat_summary_its_time_to_ready() {
    let port = free_port();
    let servers = Servers::start(port);
    let script = reset_script(servers.dir.path(), port);
    let p = port.to_string();
    let run = netchar(&["tcp", "127.0.0.1", "-p", &p, "-t", "0.5", "--repeat", "2", "--reset-cmd", &script]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let restarts = servers.restarts();
    assert_eq!(restarts.len(), 2);
    for r in &restarts {
        let line = format!(": {r}");
        let shown = run.stdout.lines().filter(|l| l.starts_with("--reset-cmd: exit 0 in ") && l.ends_with(&line));
        assert_eq!(shown.count(), 1, "{r}:\n{}", run.stdout);
    }
    assert!(run.stdout.contains("\nreset.time_to_ready_seconds: "), "{}", run.stdout);
}

#[test]
fn a_server_that_never_comes_back_is_recorded_as_not_ready() {
    let port = free_port();
    // Nothing listens on the port, and the command starts nothing.
    let p = port.to_string();
    let run = netchar(&[
        "tcp",
        "127.0.0.1",
        "-p",
        &p,
        "-t",
        "0.5",
        "--json",
        "--reset-cmd",
        "exit 4",
        "--reset-timeout",
        "0.3",
        "--connect-timeout",
        "0.5",
    ]);
    assert_eq!(run.code, 2, "the test cannot connect: {}", run.stderr);
    let want = "netchar: --reset-cmd (exit 4): the server did not answer within --reset-timeout 0.3 s; running anyway";
    assert!(run.stderr.lines().any(|l| l == want), "{}", run.stderr);
}
