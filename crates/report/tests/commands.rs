//! The user's commands in the reports (issue 23): `--step-cmd` and `--reset-cmd` runs kept in
//! saved results show in the text under the figures and in the HTML report's "Commands" table,
//! each with its outcome and the first line of its output, the reset with its time to ready.

use netchar_model::{CommandRun, ResetRecord, StepRecord};
use netchar_report::{parse_saved, Saved};
use std::path::Path;

fn run(phase: &str, exit: Option<i32>, stdout: &str) -> CommandRun {
    CommandRun {
        phase: phase.into(),
        command: "probe".into(),
        exit_code: exit,
        timed_out: exit.is_none(),
        seconds: 0.25,
        stdout: stdout.into(),
        ..Default::default()
    }
}

/// The bwsweep fixture, its first step with two step commands and a reset.
fn with_commands() -> Vec<Saved> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/suite-bwsweep.json");
    let mut saved = parse_saved(&std::fs::read_to_string(path).unwrap(), "suite-bwsweep.json").unwrap();
    let r = &mut saved[0].result;
    r.step = Some(StepRecord {
        index: 1,
        commands: vec![run("before", Some(0), "\nrx_errors 0\nmore"), run("after", None, "rx_errors 17")],
        ..Default::default()
    });
    r.reset =
        Some(ResetRecord { command: run("reset", Some(3), "rebooting"), time_to_ready_seconds: Some(12.5), probes: 9 });
    saved
}

#[test]
fn the_text_shows_each_command_with_its_outcome_and_first_line() {
    let saved = with_commands();
    assert_eq!(
        netchar_report::text::hook_lines(&saved[0].result),
        [
            "--reset-cmd: exit 3 in 0.250 s; server ready 12.500 s after its start (9 connection attempts): rebooting",
            "--step-cmd step 1 before: exit 0 in 0.250 s: rx_errors 0",
            "--step-cmd step 1 after: timed out, killed in 0.250 s: rx_errors 17",
        ]
    );
    assert!(netchar_report::text::hook_lines(&saved[1].result).is_empty());
}

#[test]
fn the_html_report_has_a_row_per_command() {
    let html = netchar_report::html::document(&with_commands(), Default::default());
    assert!(html.contains("<h2>Commands</h2>"), "no Commands section");
    for cells in [
        "<td class=\"n\">-</td><td>reset</td><td>exit 3</td><td class=\"n\">0.250</td><td class=\"n\">12.500</td><td>rebooting</td>",
        "<td class=\"n\">1</td><td>before</td><td>exit 0</td><td class=\"n\">0.250</td><td class=\"n\">-</td><td>rx_errors 0</td>",
        "<td>after</td><td>timed out, killed</td><td class=\"n\">0.250</td><td class=\"n\">-</td><td>rx_errors 17</td>",
    ] {
        assert!(html.contains(cells), "{cells} missing");
    }
    // Without commands there is no such section.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/suite-bwsweep.json");
    let plain = parse_saved(&std::fs::read_to_string(path).unwrap(), "suite-bwsweep.json").unwrap();
    assert!(!netchar_report::html::document(&plain, Default::default()).contains("<h2>Commands</h2>"));
}
