//! `--console` and `--console-cmd` end to end over loopback: a pseudo-terminal pair stands in
//! for a board's serial port, the test writes the board's lines into its master side while a
//! test runs, and the result must hold them, in order, on the test's clock, flagged.
//!
//! Ground truth is causal: a line written after netchar printed its first interval (ending
//! at 1 s, or a little later on a busy machine) was read after that second of the test, so
//! its `t` is at least that interval's end; every line was read before netchar exited, so its
//! `t` is at most the run's whole wall time.

#[path = "support/loopback.rs"]
mod common;
#[path = "support/require.rs"]
mod require;

use common::*;
use rustix::pty::{grantpt, openpt, ptsname, unlockpt, OpenptFlags};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A pseudo-terminal pair: the master (the "board" side, written by the test) and the path
/// of its slave (the "serial port" netchar opens). The master is close-on-exec: netchar must
/// not hold it, or closing it here would not end the console.
fn pty() -> Option<(std::fs::File, String)> {
    let opened = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)
        .and_then(|master| grantpt(&master).and_then(|()| unlockpt(&master)).map(|()| master));
    let master: OwnedFd = match opened {
        Ok(m) => m,
        Err(e) => {
            require::unavailable("console pty test", &format!("no pseudo-terminal (/dev/ptmx: {e})"));
            return None;
        }
    };
    let name = ptsname(&master, Vec::new()).expect("ptsname").into_string().expect("a UTF-8 pts path");
    Some((std::fs::File::from(master), name))
}

/// A 3 s paced TCP test reading its console from `console`, its result into `json`, printing
/// its intervals on a pipe the test reads as they come.
fn spawn_paced_tcp(server: &Server, console: &str, json: &tempfile::NamedTempFile) -> std::process::Child {
    Command::new(BIN)
        .args(["tcp", "127.0.0.1", "-p", &server.port.to_string(), "-t", "3", "-b", "10M"])
        .args(["--console", console, "--json-out"])
        .arg(json.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn netchar")
}

/// Reads netchar's text output up to its first interval line (`0.00-1.00`, or later on a
/// busy machine); returns the earliest end of that interval its two decimals allow, in
/// seconds, and the text read.
fn first_interval(out: &mut impl BufRead) -> (f64, String) {
    let mut shown = String::new();
    loop {
        let mut line = String::new();
        assert!(out.read_line(&mut line).unwrap() > 0, "netchar ended before its first interval:\n{shown}");
        shown.push_str(&line);
        let end = line.split_once(" 0.00-").and_then(|(_, rest)| rest.split_whitespace().next());
        if let Some(end) = end.and_then(|e| e.parse::<f64>().ok()) {
            return (end - 0.005, shown);
        }
    }
}

/// The board's lines, each with the flag netchar must give it.
const LINES: &[(&str, Option<&str>)] = &[
    ("netchar-responder listening on 10.77.0.2:5300", None),
    ("sendto UDP data: No buffer space available", Some("no_buffers")),
    ("recvfrom timeout (5 s), giving up", Some("giving_up")),
    ("eth0: RX FIFO overrun", Some("overrun")),
    ("test done", None),
];

#[test]
fn lines_of_a_serial_console_written_during_the_test_land_in_the_result_in_order_and_flagged() {
    let server = Server::start(&[]);
    let Some((mut master, slave)) = pty() else { return };
    let json = tempfile::NamedTempFile::new().unwrap();
    let started = Instant::now();
    let mut child = spawn_paced_tcp(&server, &format!("{slave}:115200"), &json);
    // The first interval line is printed after that interval's end.
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let (after, shown) = first_interval(&mut out);
    for (text, _) in LINES {
        master.write_all(format!("{text}\r\n").as_bytes()).unwrap();
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    let status = child.wait().unwrap();
    let wall = started.elapsed().as_secs_f64();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(status.success(), "netchar failed: {status}\n{shown}{rest}\n{err}");

    let r: Value = serde_json::from_slice(&std::fs::read(json.path()).unwrap()).unwrap();
    let console = &r["console"];
    assert_eq!(console["source"], format!("serial {slave} 115200"), "{console}");
    assert_eq!(console["dropped"], 0, "{console}");
    let lines = console["lines"].as_array().unwrap();
    let texts: Vec<&str> = lines.iter().map(|l| l["text"].as_str().unwrap()).collect();
    assert_eq!(texts, LINES.iter().map(|l| l.0).collect::<Vec<_>>(), "{console}");
    let mut last = after;
    for (line, (_, flag)) in lines.iter().zip(LINES) {
        let t = line["t"].as_f64().unwrap();
        assert!(t >= last && t <= wall, "t {t} not in [{last}, {wall}] (written after {after} s, in order): {line}");
        last = t;
        assert_eq!(line["flag"].as_str(), *flag, "{line}");
    }
    // The master still open: the console did not end.
    assert!(console.get("ended").is_none(), "{console}");
    // The text report shows them after the figures, the flagged ones marked.
    let text = format!("{shown}{rest}");
    let at = text.find("console (serial").unwrap_or_else(|| panic!("no console section:\n{text}"));
    assert!(text[..at].contains("Summary:"), "the console comes after the figures:\n{text}");
    assert!(text[at..].contains("[no_buffers] sendto UDP data: No buffer space available"), "{text}");
    drop(master);
}

#[test]
fn a_console_that_ends_mid_test_is_noted_and_the_test_goes_on() {
    let server = Server::start(&[]);
    let cmd = "echo booting; echo 'tcp: connection reset by peer'; sleep 1; echo last words";
    let out = Command::new(BIN)
        .args(["tcp", "127.0.0.1", "-p", &server.port.to_string(), "-t", "3", "-b", "10M", "--json"])
        .args(["--console-cmd", cmd])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(r["error"].is_null(), "{}", r["error"]);
    let console = &r["console"];
    assert_eq!(console["source"], format!("command {cmd}"));
    let lines = console["lines"].as_array().unwrap();
    let got: Vec<(&str, &Value)> = lines.iter().map(|l| (l["text"].as_str().unwrap(), &l["flag"])).collect();
    assert_eq!(
        got,
        vec![
            ("booting", &Value::Null),
            ("tcp: connection reset by peer", &"reset".into()),
            ("last words", &Value::Null)
        ]
    );
    let ended = &console["ended"];
    assert_eq!(ended["reason"], "end of output", "{console}");
    // In order, and it ended after its last line.
    let t: Vec<f64> = lines.iter().map(|l| l["t"].as_f64().unwrap()).collect();
    assert!(t.windows(2).all(|w| w[0] <= w[1]) && ended["t"].as_f64().unwrap() >= t[2], "{console}");
    // The test's own figures are all there.
    assert!(r["summary"]["up"]["receiver"]["bytes"].as_u64().unwrap() > 0, "{}", r["summary"]);
}

/// Runs netchar with `args` against a port nothing listens on: the console's error must come
/// first, on one line, with exit status 2.
fn fails_before_the_test(args: &[&str], expect: &str) {
    let out = Command::new(BIN).args(["tcp", "127.0.0.1", "-p", "9", "-t", "1"]).args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(err.contains(expect), "{expect:?} not in {err}");
    assert!(
        out.stdout.is_empty(),
        "nothing reported before the console opened: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn a_missing_device_a_bad_baud_and_a_failing_command_stop_before_the_test() {
    fails_before_the_test(
        &["--console", "/dev/netchar-no-such-tty:115200"],
        "cannot open the console /dev/netchar-no-such-tty",
    );
    fails_before_the_test(&["--console", "/dev/ttyS0:fast"], "\"fast\" is not a baud rate");
    fails_before_the_test(&["--console", "/dev/ttyS0:0"], "\"0\" is not a baud rate");
    fails_before_the_test(&["--console-cmd", "netchar-no-such-command"], "exit status: 127");
    fails_before_the_test(&["--console", "/dev/ttyS0", "--console-cmd", "true"], "cannot be used with");
    // nc_test's single tests read the console as well: one that cannot be opened stops the
    // command before a request goes out (port 9 has no slave: a request would wait 10 s).
    let out = Command::new(BIN)
        .args(["tcp", "127.0.0.1", "-p", "9", "--proto", "nc-test", "--console", "/dev/netchar-no-such-tty"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!((out.status.code(), err.trim().lines().count()), (Some(2), 1), "{err}");
    assert!(err.contains("cannot open the console /dev/netchar-no-such-tty"), "{err}");
    assert!(!err.contains("slave"), "no request went out: {err}");
}

#[test]
fn a_serial_console_whose_other_side_closes_mid_test_is_noted_and_the_test_goes_on() {
    let server = Server::start(&[]);
    let Some((master, slave)) = pty() else { return };
    let json = tempfile::NamedTempFile::new().unwrap();
    let mut child = spawn_paced_tcp(&server, &slave, &json);
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let (after, mut shown) = first_interval(&mut out);
    // The board's side goes away (a USB serial adapter unplugged) after the test's first second.
    drop(master);
    std::io::Read::read_to_string(&mut out, &mut shown).unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "netchar failed: {status}\n{shown}");
    let r: Value = serde_json::from_slice(&std::fs::read(json.path()).unwrap()).unwrap();
    assert!(r["error"].is_null(), "{}", r["error"]);
    let c = &r["console"];
    assert_eq!(c["source"], format!("serial {slave} 115200"), "{c}");
    assert_eq!(c["lines"], Value::Array(vec![]), "{c}");
    assert_eq!(c["ended"]["reason"], "hung up", "{c}");
    assert!(c["ended"]["t"].as_f64().unwrap() >= after, "closed after the first interval: {c}");
    assert!(shown.contains("console ended at"), "the text says so:\n{shown}");
    assert!(r["summary"]["up"]["receiver"]["bytes"].as_u64().unwrap() > 0, "{}", r["summary"]);
}

#[test]
fn every_trial_of_a_rate_search_has_its_own_console() {
    let server = Server::start(&[]);
    let cmd = "echo trial; echo 'sendto: ENOBUFS'";
    let out = Command::new(BIN)
        .args(["udp", "127.0.0.1", "-p", &server.port.to_string(), "--find-max-rate", "-t", "0.3", "-b", "2M"])
        .args(["--console-cmd", cmd, "--json"])
        .output()
        .unwrap();
    assert!(out.status.code().is_some_and(|c| c <= 1), "{}", String::from_utf8_lossy(&out.stderr));
    let trials: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(!trials.is_empty());
    for r in &trials {
        let lines = r["console"]["lines"].as_array().unwrap_or_else(|| panic!("no console: {}", r["console"]));
        let got: Vec<(&str, &Value)> = lines.iter().map(|l| (l["text"].as_str().unwrap(), &l["flag"])).collect();
        assert_eq!(got, vec![("trial", &Value::Null), ("sendto: ENOBUFS", &"no_buffers".into())]);
    }
}

#[test]
fn every_step_of_a_sweep_suite_has_its_own_console() {
    let server = Server::start(&[]);
    let cmd = "echo step; echo 'eth0: rx overrun'";
    let out = Command::new(BIN)
        .args(["suite", "bwsweep", "127.0.0.1", "-p", &server.port.to_string()])
        .args(["--from", "1M", "--to", "2M", "--step", "1M", "--duration", "0.3", "--json", "--console-cmd", cmd])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let steps: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    // Two rates, up then down.
    assert_eq!(steps.len(), 4);
    for r in &steps {
        let lines = r["console"]["lines"].as_array().unwrap_or_else(|| panic!("no console: {}", r["console"]));
        let got: Vec<(&str, &Value)> = lines.iter().map(|l| (l["text"].as_str().unwrap(), &l["flag"])).collect();
        assert_eq!(got, vec![("step", &Value::Null), ("eth0: rx overrun", &"overrun".into())]);
    }
    // A suite whose peer protocol runs outside the client's tests refuses the flags.
    let out = Command::new(BIN)
        .args(["suite", "netio", "127.0.0.1", "-p", "9", "--proto", "netio", "--console-cmd", "true"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!((out.status.code(), err.trim().lines().count()), (Some(2), 1), "{err}");
    assert!(err.contains("not supported with a netio server"), "{err}");
}
