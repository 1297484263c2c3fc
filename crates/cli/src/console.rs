//! `--console`, `--console-cmd`: the target's console read around each client test, from
//! before it connects to [`LINGER`] after it ends, and put in its result on the test's clock.

use anyhow::{Context, Result};
use netchar_engine::client::ClientRun;
use netchar_engine::StopFlag;
use netchar_model::console::{ConsoleEnd, ConsoleLine, ConsoleLog};
use netchar_sys::console::{Capture, ConsoleLimits, ConsoleReader, ConsoleSource};
use std::time::{Duration, Instant};

/// How long the console is read after the test ends: a target logs what went wrong as it
/// tears the test down, just after its last figures were sent.
pub(crate) const LINGER: Duration = Duration::from_secs(1);

/// How long a console command is given to print its first byte (or fail) before the test
/// starts: long enough for `ssh` to connect, so the lines from before the test are read.
const START_WAIT: Duration = Duration::from_secs(1);

/// A console being read for one run.
pub(crate) struct ConsoleCapture {
    reader: ConsoleReader,
    source: String,
    /// When reading began: the clock's zero for a run whose test never started.
    opened: Instant,
}

/// Opens the console, if one is asked for; an error (no such device, a command that fails
/// at once) stops the command before any test.
pub(crate) fn start(source: Option<&ConsoleSource>) -> Result<Option<ConsoleCapture>> {
    let Some(source) = source else { return Ok(None) };
    let flag = match source {
        ConsoleSource::Serial { .. } => "--console",
        ConsoleSource::Command(_) => "--console-cmd",
    };
    let opened = Instant::now();
    let mut reader = ConsoleReader::start(source, ConsoleLimits::default()).with_context(|| flag.to_string())?;
    reader.wait_started(START_WAIT).with_context(|| flag.to_string())?;
    Ok(Some(ConsoleCapture { reader, source: source.describe(), opened }))
}

/// Runs one test (`run`) with `plan`'s console, if it has one, read around it and put in its
/// result.
pub(crate) fn around(
    plan: &crate::plan::TcpPlan,
    stop: &StopFlag,
    run: impl FnOnce() -> ClientRun,
) -> Result<ClientRun> {
    let console = start(plan.console.as_ref())?;
    let mut done = run();
    if let Some(c) = console {
        c.finish_into(&mut done, stop);
    }
    Ok(done)
}

impl ConsoleCapture {
    /// Reads on for [`LINGER`] (not after Ctrl-C), stops, and puts the lines in the run's
    /// result.
    pub(crate) fn finish_into(self, run: &mut ClientRun, stop: &StopFlag) {
        let zero = run.clock_zero;
        self.finish_into_result(run.result.as_mut(), zero, stop);
    }

    /// [`Self::finish_into`] for a result a job made (nc_test's master): the lines on the
    /// clock of `zero`, the test's start if known, else the moment the console was opened.
    pub(crate) fn finish_into_result(
        self,
        result: Option<&mut netchar_model::TestResult>,
        zero: Option<Instant>,
        stop: &StopFlag,
    ) {
        if result.is_some() && !stop.is_raised() {
            std::thread::sleep(LINGER);
        }
        let capture = self.reader.finish();
        if let Some(result) = result {
            result.console = Some(on_test_clock(self.source, capture, zero.unwrap_or(self.opened)));
        }
    }
}

/// The capture's instants as seconds since `zero`, negative before it.
fn on_test_clock(source: String, capture: Capture, zero: Instant) -> ConsoleLog {
    let t = |at: Instant| match at.checked_duration_since(zero) {
        Some(after) => after.as_secs_f64(),
        None => -zero.duration_since(at).as_secs_f64(),
    };
    ConsoleLog {
        source,
        lines: capture.lines.into_iter().map(|(at, text)| ConsoleLine::new(t(at), text)).collect(),
        dropped: capture.dropped,
        ended: capture.ended.map(|(at, reason)| ConsoleEnd { t: t(at), reason }),
    }
}
