//! Bad input gets one line that says what is wrong and what to do, and exit status 2, before
//! anything is sent or read without limit.

#[path = "support/loopback.rs"]
mod common;

use common::*;

fn one_line_error(args: &[&str], needle: &str) {
    let run = netchar(args);
    assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
    let lines: Vec<&str> = run.stderr.trim().lines().collect();
    assert_eq!(lines.len(), 1, "{args:?} printed more than one line:\n{}", run.stderr);
    assert!(lines[0].starts_with("netchar: error: "), "{args:?}: {}", lines[0]);
    assert!(lines[0].contains(needle), "{args:?}: {} (wanted {needle:?})", lines[0]);
}

#[test]
fn clap_errors_are_one_line_and_name_the_help_to_read() {
    one_line_error(&["tcp", "127.0.0.1", "-b", "-1"], "-b -1");
    one_line_error(&["server", "-p", "70000"], "70000");
    one_line_error(&["server", "-p", "70000"], "see netchar server --help");
    one_line_error(&["tcp"], "<HOST>");
    one_line_error(&["tcp", "127.0.0.1", "--bogus"], "--bogus");
    one_line_error(&["frob"], "see netchar --help");
    for ok in [&["--help"][..], &["tcp", "--help"], &["--version"]] {
        let run = netchar(ok);
        assert_eq!(run.code, 0, "{ok:?}: {}", run.stderr);
        assert!(run.stdout.len() > 10, "{ok:?} printed nothing");
    }
}

#[test]
fn an_unbracketed_ipv6_address_with_a_port_gets_a_hint() {
    one_line_error(&["tcp", "::1:5608"], "write [::1]:5608");
    // A bare address still works as one (here: nobody listens on port 1, so "refused").
    let run = netchar(&["tcp", "::1", "-p", "1", "-t", "1"]);
    assert!(run.stderr.contains("connection refused"), "{}", run.stderr);
}

#[test]
fn plan_files_must_be_regular_files_of_bounded_size() {
    // `netchar run /dev/zero` used to read until the OOM killer ended it.
    one_line_error(&["run", "/dev/zero", "127.0.0.1"], "a device, not a regular file");
    one_line_error(&["run", "/", "127.0.0.1"], "a directory");
    let big = std::env::temp_dir().join(format!("netchar-big-plan-{}.toml", std::process::id()));
    std::fs::write(&big, vec![b'#'; 2 * 1024 * 1024]).unwrap();
    one_line_error(&["run", big.to_str().unwrap(), "127.0.0.1"], "limit");
    let _ = std::fs::remove_file(big);
    one_line_error(&["compare", "/dev/zero", "/dev/zero"], "a device");
    one_line_error(&["server", "--psk-file", "/dev/zero"], "a device");
}
