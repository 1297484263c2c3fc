//! The live progress line: drawn on a terminal (a pseudo-terminal from util-linux's `script`)
//! and erased before the program ends; never drawn into a pipe, never coloured with NO_COLOR.

#[path = "support/loopback.rs"]
mod common;
#[path = "support/require.rs"]
mod require;

use common::*;
use std::process::{Command, Stdio};

/// Erases the line and returns to its start: how the progress line is drawn and cleared.
const ERASE_LINE: &str = "\r\x1b[2K";
/// The progress line's colour (SGR 36, cyan).
const CYAN: &str = "\x1b[36m";

/// Two counted runs of a short TCP test: a job of several tests, so a terminal shows progress.
fn repeated_test(port: u16) -> Vec<String> {
    ["tcp", "127.0.0.1", "-p", &port.to_string(), "-t", "0.5", "--repeat", "2"].map(String::from).to_vec()
}

#[test]
fn no_progress_line_is_drawn_into_a_pipe() {
    let s = Server::start(&[]);
    let args = repeated_test(s.port);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = netchar(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("=== run 2 of 2"), "{}", run.stdout);
    for (name, text) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
        assert!(!text.contains('\x1b'), "escape codes in {name}: {text:?}");
        assert!(!text.contains("elapsed"), "a progress line in {name}: {text:?}");
    }
}

/// Runs netchar with `args` on a pseudo-terminal (stdout and stderr both), returning what the
/// terminal received, or None when `script` is missing, once [`require::unavailable`] has said
/// so.
fn on_a_terminal(args: &[String], no_color: bool) -> Option<String> {
    let command = std::iter::once(BIN.to_string()).chain(args.iter().cloned()).collect::<Vec<_>>().join(" ");
    let mut script = Command::new("script");
    // -q: no "Script started" lines; -e: netchar's exit status; the transcript file unwanted.
    script.args(["-qec", &command, "/dev/null"]).stdin(Stdio::null()).env_remove("NO_COLOR");
    if no_color {
        script.env("NO_COLOR", "1");
    }
    let out = match script.output() {
        Ok(out) => out,
        Err(e) => {
            let reason = format!("cannot run util-linux's script ({e}); Debian has it in bsdutils");
            require::unavailable("the terminal progress test", &reason);
            return None;
        }
    };
    let shown = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{}\n{shown}", String::from_utf8_lossy(&out.stderr));
    Some(shown)
}

#[test]
fn a_terminal_shows_the_progress_line_in_colour_and_erases_it_before_the_end() {
    let s = Server::start(&[]);
    let Some(shown) = on_a_terminal(&repeated_test(s.port), false) else { return };
    assert!(shown.contains(&format!("{ERASE_LINE}{CYAN}elapsed")), "no progress line: {shown:?}");
    assert!(shown.contains("remaining"), "a timed job shows what is left: {shown:?}");
    assert!(shown.contains("| run 2 of 2"), "the line names the run: {shown:?}");
    // What the test prints starts where the line was erased, never after the progress text.
    for printed in ["=== run 1 of 2", "=== run 2 of 2", "=== 2 runs: mean"] {
        assert!(shown.contains(&format!("{ERASE_LINE}{printed}")), "{printed:?} not on a clean line: {shown:?}");
    }
    // The last thing on the terminal is the line erased: nothing of it is left behind.
    assert!(shown.ends_with(ERASE_LINE), "the progress line is left: {shown:?}");
}

#[test]
fn no_color_keeps_the_progress_line_but_not_its_colour() {
    let s = Server::start(&[]);
    let Some(shown) = on_a_terminal(&repeated_test(s.port), true) else { return };
    assert!(shown.contains(&format!("{ERASE_LINE}elapsed")), "{shown:?}");
    assert!(!shown.contains(CYAN), "{shown:?}");
}

#[test]
fn json_on_a_terminal_has_no_progress_line() {
    let s = Server::start(&[]);
    let mut args = repeated_test(s.port);
    args.push("--json".into());
    let Some(shown) = on_a_terminal(&args, false) else { return };
    assert!(!shown.contains('\x1b'), "{shown:?}");
    assert!(shown.trim_start().starts_with('['), "{shown:?}");
}

/// `suite netio --proto netio` against netchar's netio server on a terminal: the progress line
/// names the size running and the time left, netio's lines print on clean lines above it.
#[test]
fn the_netio_client_suite_shows_the_size_running() {
    let s = Server::start(&["--netio", "--netio-port", "0"]);
    // "netio: TCP test on PORT, UDP test on PORT+1 (...)", before or after the banner.
    let announce = "netio: TCP test on ";
    let line = s
        .startup
        .iter()
        .find(|l| l.starts_with(announce))
        .cloned()
        .unwrap_or_else(|| s.stderr.recv_timeout(std::time::Duration::from_secs(10)).expect("the netio line"));
    let port: u16 = line
        .strip_prefix(announce)
        .and_then(|r| r.split(',').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no netio port in {line:?}"));
    let args = ["suite", "netio", "127.0.0.1", "--proto", "netio", "-p", &port.to_string(), "-b", "1k"]
        .into_iter()
        .chain(["--netio-interval", "1"])
        .map(String::from)
        .collect::<Vec<_>>();
    let Some(shown) = on_a_terminal(&args, false) else { return };
    assert!(shown.contains("remaining"), "{shown:?}");
    assert!(shown.contains("| 1 of 1: 1024 bytes"), "the line names the size: {shown:?}");
    for printed in ["Packet size  1k bytes: ", "Done."] {
        assert!(shown.contains(&format!("{ERASE_LINE}{printed}")), "{printed:?} not on a clean line: {shown:?}");
    }
    assert!(shown.ends_with(ERASE_LINE), "the progress line is left: {shown:?}");
}

#[test]
fn quick_mode_and_find_max_rate_show_the_test_now_running() {
    let Some(shown) = on_a_terminal(&["-t".into(), "0.3".into()], false) else { return };
    assert!(shown.contains(&format!("{ERASE_LINE}{CYAN}elapsed")), "no progress line: {shown:?}");
    assert!(shown.contains("remaining") && shown.contains("| udp rr"), "{shown:?}");
    // The tables print on a clean line once the last test ends, the line erased for good.
    assert!(shown.contains(&format!("{ERASE_LINE}test       flow")), "{shown:?}");
    assert!(shown.ends_with("real tests)\r\n"), "{shown:?}");

    let s = Server::start(&[]);
    let args = ["udp", "127.0.0.1", "-p", &s.port.to_string(), "--find-max-rate", "-b", "50M", "-t", "0.3"];
    let Some(shown) = on_a_terminal(&args.map(String::from), false) else { return };
    assert!(shown.contains("| trial 1: 50.0 Mbit/s"), "{shown:?}");
    assert!(shown.contains(&format!("{ERASE_LINE}searching 0 .. 50.0 Mbit/s")), "{shown:?}");
    assert!(
        shown.ends_with(" trials)\r\n") || shown.ends_with(" trial)\r\n"),
        "the line is gone before the rate found: {shown:?}"
    );
}
