//! `netchar completions SHELL` and `netchar man [COMMAND]`: generated from the clap
//! definition, so every command must be in them; the shells and groff must parse them.

#[path = "support/require.rs"]
mod require;

use assert_cmd::Command;
use std::io::Write;

const COMMANDS: &[&str] =
    &["server", "tcp", "udp", "rr", "crr", "echo", "compare", "suite", "run", "report", "completions", "man"];

fn netchar(args: &[&str]) -> String {
    let out = Command::cargo_bin("netchar").unwrap().args(args).output().unwrap();
    assert!(out.status.success(), "netchar {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Runs `program args` with `script` on stdin; None when the program is not installed (the
/// caller says so through [`require::unavailable`]).
fn parse_with(program: &str, args: &[&str], script: &str) -> Option<std::process::Output> {
    let mut child = std::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .ok()?;
    child.stdin.take().unwrap().write_all(script.as_bytes()).unwrap();
    Some(child.wait_with_output().unwrap())
}

#[test]
fn every_shell_script_names_every_command() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = netchar(&["completions", shell]);
        for c in COMMANDS {
            assert!(script.contains(c), "{shell} completions lack {c}");
        }
    }
    // Subcommand flags too: report's are completed.
    let bash = netchar(&["completions", "bash"]);
    assert!(bash.contains("--intervals") && bash.contains("markdown"), "bash completions lack report's flags");
}

#[test]
fn the_shells_parse_their_scripts() {
    // bash -n, zsh -n and fish --no-execute check syntax without running anything.
    for (shell, args) in [("bash", &["-n"][..]), ("zsh", &["-n"][..]), ("fish", &["--no-execute"][..])] {
        let script = netchar(&["completions", shell]);
        match parse_with(shell, args, &script) {
            None => require::unavailable(
                &format!("the {shell} syntax check"),
                &format!("{shell} is not installed (apt-get install {shell})"),
            ),
            Some(out) => assert!(
                out.status.success() && out.stderr.is_empty(),
                "{shell} rejects its completion script: {}",
                String::from_utf8_lossy(&out.stderr)
            ),
        }
    }
}

#[test]
fn man_page_lists_every_command_and_groff_formats_it_cleanly() {
    let page = netchar(&["man"]);
    assert!(page.contains(".TH netchar 1"), "no title line");
    for c in COMMANDS {
        assert!(page.contains(&format!("netchar\\-{c}(1)")), "netchar(1) lacks {c}");
    }
    let report = netchar(&["man", "report"]);
    assert!(report.contains(".TH netchar-report 1"));
    assert!(report.contains("\\-\\-intervals") && report.contains("\\-\\-format"), "netchar-report(1) lacks its flags");
    // Each suite has its own page with only its flags.
    let netio = netchar(&["man", "suite-netio"]);
    assert!(netio.contains(".TH netchar-suite-netio 1") && netio.contains("\\-\\-preset"), "{netio}");
    // A command of a command as two words, unquoted, is the same page.
    assert_eq!(netchar(&["man", "suite", "netio"]), netio);
    assert_eq!(netchar(&["man", "suite netio"]), netio);
    assert!(!netio.contains("\\-\\-quick"), "netchar-suite-netio(1) shows ecos' flag");
    for page in [page, report, netio] {
        // -ww: all warnings; -z: no output, only the diagnostics.
        match parse_with("groff", &["-man", "-Tutf8", "-ww", "-z"], &page) {
            None => require::unavailable("the groff check", "groff is not installed (apt-get install groff-base)"),
            Some(out) => assert!(
                out.status.success() && out.stderr.is_empty(),
                "groff warns: {}",
                String::from_utf8_lossy(&out.stderr)
            ),
        }
    }
    let out = Command::cargo_bin("netchar").unwrap().args(["man", "nosuch"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("man nosuch: no such command"));
}
