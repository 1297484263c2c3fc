//! Bad input gets one line that says what is wrong and what to do, and exit status 2, before
//! anything is sent or read without limit.

#[path = "support/require.rs"]
mod require;

use assert_cmd::Command;
use std::time::Duration;

/// Runs netchar, killed after a few seconds: a regression that reads `/dev/zero` or blocks on
/// a FIFO must fail the test, not hang it or wait for the OOM killer.
fn netchar(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_netchar"))
        .args(args)
        .timeout(Duration::from_secs(20))
        .output()
        .unwrap_or_else(|e| panic!("netchar {args:?}: {e}"));
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

/// The run fails with exit status 2, nothing on stdout, and exactly one line on stderr that
/// contains `needle`.
fn one_line_error(args: &[&str], needle: &str) {
    let (code, stdout, stderr) = netchar(args);
    assert_eq!(code, Some(2), "{args:?}: {stderr}");
    assert_eq!(stdout, "", "{args:?} printed on stdout before failing");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{args:?} printed more than one line:\n{stderr}");
    assert!(lines[0].starts_with("netchar: error: "), "{args:?}: {}", lines[0]);
    assert!(lines[0].contains(needle), "{args:?}: {} (wanted {needle:?})", lines[0]);
}

#[test]
fn flag_errors_are_one_line_naming_the_flag_the_value_and_the_help_to_read() {
    one_line_error(&["tcp", "127.0.0.1", "-b", "-1"], "-b -1");
    one_line_error(&["server", "-p", "70000"], "--port 70000: not a port number (0-65535); see netchar server --help");
    one_line_error(
        &["tcp", "127.0.0.1", "-p", "http"],
        "--port http: not a port number (0-65535); see netchar tcp --help",
    );
    one_line_error(&["server", "--max-concurrent", "x"], "--max-concurrent x: not a whole number; see netchar server");
    one_line_error(&["udp", "127.0.0.1", "--loss", "lots"], "--loss lots: not a number; see netchar udp --help");
    one_line_error(&["tcp"], "<HOST>; see netchar tcp --help");
    one_line_error(&["tcp", "127.0.0.1", "--paralel", "2"], "'--paralel'");
    one_line_error(&["tcp", "127.0.0.1", "--paralel", "2"], "did you mean '--parallel'?");
    one_line_error(&["tcp", "127.0.0.1", "-R", "--bidir"], "cannot be used with");
    one_line_error(
        &["tcp", "127.0.0.1", "--target-ns-per-instruction", "0"],
        "--target-ns-per-instruction 0: must be a number of nanoseconds above 0",
    );
    one_line_error(&["frob"], "unrecognized subcommand 'frob'; see netchar --help");
}

/// What a command cannot honour is refused in one line that names the command that can.
/// `--xdp-live` says what it cannot do before any socket or program: the checksum it does not
/// write, a schedule it cannot keep, frames that are not one template, and --xdp it needs.
#[test]
fn xdp_live_refuses_what_its_program_cannot_do_in_one_line() {
    let base = ["udp", "127.0.0.1", "--xdp", "lo", "--xdp-live"];
    one_line_error(
        &[&base[..], &["-b", "0"]].concat(),
        "--xdp-live: the XDP program does not recompute the UDP checksum; add --no-udp-checksum",
    );
    one_line_error(
        &[&base[..], &["--no-udp-checksum", "-b", "10M"]].concat(),
        "--xdp-live: sends flat out in large calls into the kernel; give -b 0",
    );
    one_line_error(
        &[&base[..], &["--no-udp-checksum", "-b", "0", "--pattern", "10x64"]].concat(),
        "not with --pattern, --payload or --verify",
    );
    let (code, _, stderr) = netchar(&["udp", "127.0.0.1", "--xdp-live", "-b", "0"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--xdp <IFACE[:QUEUE]>"), "names the flag it needs: {stderr}");
}

#[test]
fn echo_refuses_a_time_and_names_the_command_that_takes_one() {
    one_line_error(
        &["echo", "127.0.0.1", "-t", "2"],
        "echo -t 2: echo runs its --pattern (640x1024), not for a time; for timed request/response use netchar rr HOST -t 2",
    );
    // -p for run needs the HOST it is the port of.
    one_line_error(&["run", "plan.toml", "-p", "5300"], "<HOST>");
}

#[test]
fn help_and_version_still_print_in_full_and_succeed() {
    for ok in [&["--help"][..], &["tcp", "--help"], &["server", "-h"], &["--version"]] {
        let (code, stdout, stderr) = netchar(ok);
        assert_eq!(code, Some(0), "{ok:?}: {stderr}");
        assert!(stdout.contains("netchar"), "{ok:?} printed {stdout:?}");
    }
    let (_, help, _) = netchar(&["tcp", "--help"]);
    assert!(help.lines().count() > 10 && help.contains("Usage:"), "{help}");
}

#[test]
fn an_unbracketed_ipv6_address_with_a_port_gets_a_hint() {
    one_line_error(&["tcp", "::1:5608"], "write [::1]:5608 or ::1 -p 5608 for port 5608");
    one_line_error(&["udp", "::1:5608", "-p", "5300"], "[::1:5608] for the address");
    one_line_error(&["tcp", "::1:99999"], "99999 is not a port number");
    // Used to print the test header, then "cannot resolve".
    one_line_error(&["tcp", "foo:bar:80"], "write [IPV6]:PORT for a port, or -p PORT");
    // A bare address is still taken as one, and so are the bracketed spellings: the test
    // starts (and fails to connect, as nobody listens on port 1).
    for host in [&["::1", "-p", "1"][..], &["[::1]:1"], &["[::1]", "-p", "1"]] {
        let args: Vec<&str> = ["tcp"].iter().chain(host).chain(&["-t", "1"]).copied().collect();
        let (code, stdout, stderr) = netchar(&args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stdout.contains("TCP up"), "{args:?} did not start: {stderr}");
    }
}

#[test]
fn plan_files_must_be_regular_files() {
    // `netchar run /dev/zero` used to read until the OOM killer ended it.
    one_line_error(&["run", "/dev/zero", "127.0.0.1"], "the plan /dev/zero: a device, not a regular file");
    one_line_error(&["run", "/", "127.0.0.1"], "the plan /: a directory, not a regular file");
    // Opening a FIFO with no writer blocks for ever.
    let fifo = std::env::temp_dir().join(format!("netchar-fifo-plan-{}", std::process::id()));
    match std::process::Command::new("mkfifo").arg(&fifo).status() {
        Ok(s) if s.success() => {
            one_line_error(&["run", fifo.to_str().unwrap(), "127.0.0.1"], "a FIFO, not a regular file");
            let _ = std::fs::remove_file(&fifo);
        }
        made => require::unavailable("the FIFO plan check", &format!("mkfifo made no FIFO: {made:?}")),
    }
    one_line_error(&["compare", "/dev/zero", "/dev/zero"], "a device");
    one_line_error(&["server", "--psk-file", "/dev/zero"], "a device");
}

#[test]
fn plan_files_are_read_only_up_to_a_cap() {
    let big = std::env::temp_dir().join(format!("netchar-big-plan-{}.toml", std::process::id()));
    std::fs::write(&big, vec![b'#'; 2 * 1024 * 1024]).unwrap();
    one_line_error(&["run", big.to_str().unwrap(), "127.0.0.1"], "larger than the 1048576-byte limit");
    let _ = std::fs::remove_file(big);
    // A file whose size says 0 but that reads on past the cap (as one growing while it is
    // read would): the reader itself must stop.
    let kallsyms = "/proc/kallsyms";
    let long = std::fs::File::open(kallsyms).is_ok_and(|f| {
        use std::io::Read;
        let mut head = Vec::new();
        f.take(2 * 1024 * 1024).read_to_end(&mut head).is_ok_and(|n| n > 1024 * 1024)
    });
    if long && std::fs::metadata(kallsyms).is_ok_and(|m| m.len() == 0) {
        one_line_error(&["run", kallsyms, "127.0.0.1"], "larger than the 1048576-byte limit");
    } else {
        let reason =
            format!("{kallsyms} does not read past 1 MiB with a size of 0 here (a kernel with CONFIG_KALLSYMS does)");
        require::unavailable("the growing plan file check", &reason);
    }
}
