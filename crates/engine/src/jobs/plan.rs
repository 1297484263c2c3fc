//! Test plans (`netchar run`): tests in order, each a job of its own (its `--repeat` runs),
//! headed by its place in the plan and its name, a pause after it if the plan asks; the plan
//! ends at the first test that is interrupted or cannot run, and otherwise with the worst
//! status of its tests. What a test is, and how its runs report, is the caller's: the job
//! takes a typed test per step and a runner for it.

use super::sink::{JobError, JobEvent, JobSink};
use crate::StopFlag;
use std::time::{Duration, Instant};

/// One test of a plan.
#[derive(Debug, Clone)]
pub struct PlanStep<T> {
    /// Its name in headings: the plan's `name`, with the values of its loops.
    pub name: String,
    /// The wait after it, before the next test.
    pub pause: Duration,
    /// The test, as the caller runs it.
    pub test: T,
}

/// How a test of the plan ended; ordered from the best to the worst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    /// It ran and every gate held.
    Passed,
    /// It ran, and a gate (`expect`, a baseline) did not hold.
    GateMissed,
    /// It failed part way or could not run.
    Failed,
    /// The stop flag ended it.
    Interrupted,
}

/// Runs the plan: a [`JobEvent::Section`] "N of M: NAME" before each step, then `run_step`,
/// then the step's pause (cut short by `stop`). Returns the worst status; an error of a step
/// ends the plan with it (the caller reports what the earlier steps measured first).
pub fn run<T, E: From<JobError>>(
    steps: &[PlanStep<T>],
    stop: &StopFlag,
    mut run_step: impl FnMut(&PlanStep<T>) -> Result<Status, E>,
    sink: &mut impl JobSink<E>,
) -> Result<Status, E> {
    let mut worst = Status::Passed;
    for (i, step) in steps.iter().enumerate() {
        if stop.is_raised() {
            return Ok(Status::Interrupted);
        }
        let title = format!("{} of {}: {}", i + 1, steps.len(), step.name);
        sink.event(JobEvent::Progress(&title))?;
        sink.event(JobEvent::Section(&title))?;
        let status = run_step(step)?;
        if status == Status::Interrupted {
            return Ok(status);
        }
        worst = worst.max(status);
        if i + 1 < steps.len() {
            pause(step.pause, stop);
        }
    }
    Ok(worst)
}

/// Waits `length`, or until `stop` is raised: a plan's pause must not hold up a Ctrl-C.
fn pause(length: Duration, stop: &StopFlag) {
    let end = Instant::now() + length;
    while !stop.is_raised() {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::testing::{ignore, Recorded};

    fn steps(statuses: &[Status]) -> Vec<PlanStep<Status>> {
        let step = |(i, &s): (usize, &Status)| PlanStep { name: format!("t{i}"), pause: Duration::ZERO, test: s };
        statuses.iter().enumerate().map(step).collect()
    }

    #[test]
    fn the_plan_runs_every_step_in_order_and_ends_with_the_worst_status() {
        let mut seen = Recorded::default();
        let mut ran = Vec::new();
        let plan = steps(&[Status::Passed, Status::GateMissed, Status::Passed]);
        let worst = run(
            &plan,
            &StopFlag::new(),
            |s: &PlanStep<Status>| {
                ran.push(s.name.clone());
                Ok::<_, JobError>(s.test)
            },
            &mut seen.sink(),
        )
        .unwrap();
        assert_eq!((worst, ran.len()), (Status::GateMissed, 3));
        assert_eq!(seen.sections, ["1 of 3: t0", "2 of 3: t1", "3 of 3: t2"]);
        // A failed test does not stop the plan; an interrupted one does.
        let plan = steps(&[Status::Failed, Status::Interrupted, Status::Passed]);
        let mut ran = 0;
        let end = run(
            &plan,
            &StopFlag::new(),
            |s: &PlanStep<Status>| {
                ran += 1;
                Ok::<_, JobError>(s.test)
            },
            &mut ignore,
        )
        .unwrap();
        assert_eq!((end, ran), (Status::Interrupted, 2));
    }

    #[test]
    fn an_error_or_a_stop_ends_the_plan_and_a_pause_yields_to_the_stop_flag() {
        let plan = steps(&[Status::Passed, Status::Passed]);
        let mut ran = 0;
        let e = run(
            &plan,
            &StopFlag::new(),
            |_: &PlanStep<Status>| {
                ran += 1;
                Err(JobError::NoFigures("the server went away".into()))
            },
            &mut ignore,
        );
        assert_eq!((e.unwrap_err().to_string(), ran), ("the server went away".to_string(), 1));
        // A day's pause after the first test: the flag raised during the test ends the plan
        // without waiting for it.
        let mut plan = steps(&[Status::Passed, Status::Passed]);
        plan[0].pause = Duration::from_secs(86_400);
        let stop = StopFlag::new();
        let end = run(
            &plan,
            &stop,
            |_: &PlanStep<Status>| {
                stop.raise();
                Ok::<_, JobError>(Status::Passed)
            },
            &mut ignore,
        )
        .unwrap();
        assert_eq!(end, Status::Interrupted);
    }
}
