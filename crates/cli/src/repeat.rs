//! `--warmup` and `--repeat`: a test run several times (the engine's repeat job), each run
//! printed and saved as it finishes (so nothing measured is lost if a later run fails), then
//! the mean and its confidence interval over the counted runs, then the gates (`--expect`,
//! `--baseline`).

use crate::figure_files::FigureFiles;
use crate::progress::{Progress, LONG_TEST};
use crate::reporters::{JsonShape, Reporters};
use anyhow::Result;
use netchar_engine::jobs::repeat::{self, Ended, Repeat, Run, RunOutcome};
use netchar_engine::jobs::sink::JobEvent;
use netchar_engine::StopFlag;
use std::time::Duration;

/// Runs a client test: `--warmup` uncounted runs, `--repeat` counted ones (each printed and
/// saved as it finishes, so nothing measured is lost if a later run fails), then the
/// statistics and the gates.
pub(crate) fn run(plan: &crate::plan::TcpPlan, figures: &FigureFiles, stop: &StopFlag) -> Result<u8> {
    let out = &plan.output;
    let expected = expected_length(plan);
    let long = out.warmup + out.repeat > 1 || expected.is_some_and(|s| s >= LONG_TEST);
    let progress = Progress::start(out.json, long, expected);
    progress.set_current(format!("{} to {}", plan.client.spec.kind.name(), plan.client.host));
    run_collecting(plan, figures, stop, None, &progress)
}

/// How long the runs of `plan` take if timed (`-t`), for the progress line; None if they
/// end on a count (`-n`).
pub(crate) fn expected_length(plan: &crate::plan::TcpPlan) -> Option<Duration> {
    let runs = plan.output.warmup + plan.output.repeat;
    match plan.client.spec.end {
        netchar_model::EndCondition::Seconds(s) => Some(Duration::from_secs_f64(s) * runs),
        netchar_model::EndCondition::Bytes(_) => None,
    }
}

/// [`run`], handing the counted results to `collect` instead of printing JSON (plans print
/// every test's results as one array at the end). The runs are the engine's repeat job
/// (netchar_engine::jobs::repeat); each is one test as `netchar tcp` runs it (single_run),
/// after the `--reset-cmd`; each counted result is saved (`--save`) as its run ends.
pub(crate) fn run_collecting(
    plan: &crate::plan::TcpPlan,
    figures: &FigureFiles,
    stop: &StopFlag,
    collect: Option<&mut Vec<netchar_model::TestResult>>,
    progress: &Progress,
) -> Result<u8> {
    let out = &plan.output;
    let repeat = Repeat { warmup: out.warmup, counted: out.repeat };
    let mut plan_owned;
    let plan = if repeat.total() > 1 && plan.client.busy_wait.is_zero() {
        // Back to back runs: the server may still be closing the previous one.
        plan_owned = plan.clone();
        plan_owned.client.busy_wait = std::time::Duration::from_secs(5);
        &plan_owned
    } else {
        plan
    };
    let shape = match (&collect, repeat.total()) {
        (Some(_), _) => JsonShape::Gathered,
        (None, 1) => JsonShape::PerTest,
        (None, _) => JsonShape::PerJob,
    };
    // The figure files keep the counted runs: the job's end settles them.
    let mut reporters = Reporters::from_output(out, shape).with_figures(figures);
    add_statistics(&mut reporters, out);
    // The runs print through the reporters, and so do the job's headings: one at a time.
    let reporters = std::cell::RefCell::new(reporters);
    let run_one = |run: &Run| -> Result<RunOutcome> {
        let reset =
            out.reset.as_ref().map(|c| reset_before(c, run.number, &plan.client.host, plan.client.port, progress));
        let (result, code) = crate::single_run::run(plan, stop, &mut reporters.borrow_mut(), progress, reset)?;
        let ended = match code {
            crate::exit::OK => Ended::Completed,
            crate::exit::INTERRUPTED => Ended::Interrupted,
            _ => Ended::Failed,
        };
        Ok(RunOutcome { result, ended })
    };
    let (kept, code) = run_job(out, &repeat, stop, &reporters, progress, run_one)?;
    // The tail prints under the progress line of this job (or of the plan around it).
    progress.suspend(|| {
        if let Some(collect) = collect {
            collect.extend(kept.iter().cloned());
        }
        crate::gate::judged(out, &kept, code)
    })
}

/// With `--repeat` above 1 and text output: the statistics over the counted runs at the job's
/// end.
pub(crate) fn add_statistics(reporters: &mut Reporters, out: &crate::plan::Output) {
    if out.repeat > 1 && !out.json {
        reporters.push(Box::new(RepeatStatistics(out.format)));
    }
}

/// The engine's repeat job over `run_one`, as every single test runs (nc_test's too): each
/// run's heading through the reporters, each counted result saved (`--save`) as its run ends,
/// the job's end through the reporters. Returns the counted results and the exit status the
/// runs earned; the gates over them are the caller's.
pub(crate) fn run_job(
    out: &crate::plan::Output,
    repeat: &Repeat,
    stop: &StopFlag,
    reporters: &std::cell::RefCell<Reporters>,
    progress: &Progress,
    run_one: impl FnMut(&Run) -> Result<RunOutcome>,
) -> Result<(Vec<netchar_model::TestResult>, u8)> {
    let mut saved = 0;
    let mut on_event = |event: JobEvent<'_>| -> Result<()> {
        match event {
            JobEvent::Progress(what) => progress.set_current(what),
            JobEvent::Section(title) => reporters.borrow_mut().emit(progress, |r| r.on_section(title))?,
            JobEvent::Result(r) => {
                saved += 1;
                if let Some(dir) = &out.save {
                    crate::save::save_run(dir, r, saved)?;
                }
            }
            // Each run printed its own start and result.
            JobEvent::TestStart(_) | JobEvent::Uncounted(_) | JobEvent::Skipped(_) => {}
        }
        Ok(())
    };
    let outcome = repeat::run(repeat, stop, run_one, &mut on_event)?;
    if repeat.total() > 1 {
        reporters.borrow_mut().emit(progress, |r| r.on_job_end(&outcome.counted))?;
    }
    let code = match outcome.ended {
        Ended::Completed => crate::exit::OK,
        Ended::Failed => crate::exit::ERROR,
        Ended::Interrupted => crate::exit::INTERRUPTED,
    };
    Ok((outcome.counted, code))
}

/// `--reset-cmd` before run `number` (1-based, warm-up runs counted) of a test of the server
/// at `host`, `port`, for the run's result.
pub(crate) fn reset_before(
    command: &crate::hooks::ResetCommand,
    number: u32,
    host: &str,
    port: u16,
    progress: &Progress,
) -> netchar_model::ResetRecord {
    progress.set_current(format!("--reset-cmd before run {number}"));
    let r = command.run(number, host, port);
    if r.time_to_ready_seconds.is_none() {
        // Said here too: a run that cannot connect has no result to carry the record.
        progress.suspend(|| {
            eprintln!(
                "netchar: --reset-cmd ({}): the server did not answer within --reset-timeout {} s; running anyway",
                r.command.outcome(),
                command.ready_timeout.as_secs_f64()
            )
        });
    }
    r
}

/// The text after `--repeat` runs: the mean and its 95% confidence interval of the headline
/// figures over the counted runs, rates in the test's `-f`.
struct RepeatStatistics(netchar_model::units::RateFormat);

impl netchar_report::Reporter for RepeatStatistics {
    fn on_finish(&mut self, _result: &netchar_model::TestResult) -> String {
        String::new()
    }

    fn on_job_end(&mut self, results: &[netchar_model::TestResult]) -> String {
        netchar_report::repeat::repeat_statistics(results, self.0)
    }

    fn on_results(&mut self, _results: &[netchar_report::Saved]) -> String {
        String::new()
    }
}
