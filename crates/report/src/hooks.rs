//! The user's commands around a test (`--reset-cmd`, `--step-cmd`) as lines, under a test in
//! the text report and in the suites' tables and lines.

use netchar_model::TestResult;

/// The user's commands around the test, a line each: `--reset-cmd` (its outcome, the time
/// until the server answered) and `--step-cmd` (phase, outcome, its output's first line).
pub fn hook_lines(r: &TestResult) -> Vec<String> {
    let first_line = |c: &netchar_model::CommandRun| {
        let line = c.stdout.lines().chain(c.stderr.lines()).find(|l| !l.trim().is_empty()).unwrap_or("");
        if line.is_empty() {
            String::new()
        } else {
            format!(": {}", line.chars().take(100).collect::<String>())
        }
    };
    let mut out = Vec::new();
    if let Some(reset) = &r.reset {
        let ready = match reset.time_to_ready_seconds {
            Some(s) => format!("server ready {s:.3} s after its start ({} connection attempts)", reset.probes),
            None => format!("server NOT ready within --reset-timeout ({} connection attempts)", reset.probes),
        };
        out.push(format!(
            "--reset-cmd: {} in {:.3} s; {ready}{}",
            reset.command.outcome(),
            reset.command.seconds,
            first_line(&reset.command)
        ));
    }
    for step in r.step.iter() {
        for c in &step.commands {
            out.push(format!(
                "--step-cmd step {} {}: {} in {:.3} s{}",
                step.index,
                c.phase,
                c.outcome(),
                c.seconds,
                first_line(c)
            ));
        }
    }
    out
}

/// [`hook_lines`] as text, each line ended.
pub fn hook_text(r: &TestResult) -> String {
    hook_lines(r).into_iter().map(|l| l + "\n").collect()
}
