//! `--warmup` and `--repeat`: a test run several times, each run printed and saved as it
//! finishes (so nothing measured is lost if a later run fails), then the mean and its
//! confidence interval over the counted runs, then the gates (`--expect`, `--baseline`).

use crate::figure_files::FigureFiles;
use crate::progress::{Progress, LONG_TEST};
use crate::reporters::{JsonShape, Reporters};
use anyhow::Result;
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

/// [`run`], handing the counted results to `sink` instead of printing JSON (plans print
/// every test's results as one array at the end).
pub(crate) fn run_collecting(
    plan: &crate::plan::TcpPlan,
    figures: &FigureFiles,
    stop: &StopFlag,
    mut sink: Option<&mut Vec<netchar_model::TestResult>>,
    progress: &Progress,
) -> Result<u8> {
    let out = &plan.output;
    let total = out.warmup + out.repeat;
    let mut plan_owned;
    let plan = if total > 1 && plan.client.busy_wait.is_zero() {
        // Back to back runs: the server may still be closing the previous one.
        plan_owned = plan.clone();
        plan_owned.client.busy_wait = std::time::Duration::from_secs(5);
        &plan_owned
    } else {
        plan
    };
    let shape = match (&sink, total) {
        (Some(_), _) => JsonShape::Gathered,
        (None, 1) => JsonShape::PerTest,
        (None, _) => JsonShape::PerJob,
    };
    // The figure files keep the counted runs: the job's end settles them.
    let mut reporters = Reporters::from_output(out, shape).with_figures(figures);
    if out.repeat > 1 && !out.json {
        reporters.push(Box::new(RepeatStatistics(out.format)));
    }
    let mut kept = Vec::new();
    let mut code = crate::exit::OK;
    for i in 0..total {
        if stop.is_raised() {
            code = crate::exit::INTERRUPTED;
            break;
        }
        if total > 1 {
            let what = if i < out.warmup {
                format!("warm-up run {} of {}", i + 1, out.warmup)
            } else {
                format!("run {} of {}", i + 1 - out.warmup, out.repeat)
            };
            progress.set_current(what.clone());
            reporters.emit(progress, |r| r.on_section(&what))?;
        }
        let reset = out.reset.as_ref().map(|c| {
            progress.set_current(format!("--reset-cmd before run {}", i + 1));
            let r = c.run(i + 1, &plan.client.host, plan.client.port);
            if r.time_to_ready_seconds.is_none() {
                // Said here too: a run that cannot connect has no result to carry the record.
                progress.suspend(|| {
                    eprintln!(
                        "netchar: --reset-cmd ({}): the server did not answer within --reset-timeout {} s; running anyway",
                        r.command.outcome(),
                        c.ready_timeout.as_secs_f64()
                    )
                });
            }
            r
        });
        let (result, run_code) = crate::single_run::run(plan, stop, &mut reporters, progress, reset)?;
        if let Some(r) = result {
            if i >= out.warmup {
                if let Some(dir) = &out.save {
                    crate::save::save_run(dir, &r, i + 1 - out.warmup)?;
                }
                kept.push(r);
            }
        }
        if run_code != crate::exit::OK {
            code = run_code;
            break;
        }
    }
    if total > 1 {
        reporters.emit(progress, |r| r.on_job_end(&kept))?;
    }
    // The tail prints under the progress line of this job (or of the plan around it).
    progress.suspend(|| {
        if let Some(sink) = sink.as_mut() {
            sink.extend(kept.iter().cloned());
        }
        if code == crate::exit::OK && !kept.is_empty() && !crate::gate::gates_hold(out, &kept)? {
            code = crate::exit::GATE;
        }
        Ok(code)
    })
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
