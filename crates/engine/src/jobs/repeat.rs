//! `--warmup` and `--repeat`: one test run several times, the uncounted warm-up runs first.
//! Each run goes through the caller's runner (which reports its own intervals and result, as a
//! single test does); each counted result reaches the sink as the run ends, so nothing measured
//! is lost if a later run fails. The statistics and the gates over the counted runs are the
//! caller's, after the job.

use super::sink::{JobError, JobEvent, JobSink};
use crate::StopFlag;
use netchar_model::TestResult;

/// How many runs: uncounted ones, then counted ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repeat {
    /// `--warmup`: runs before the counted ones, left out of the statistics.
    pub warmup: u32,
    /// `--repeat`: the counted runs, at least one.
    pub counted: u32,
}

/// One run of the job, as its runner is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// 1-based over every run of the job, warm-up runs included (what `--reset-cmd` counts).
    pub number: u32,
    /// A warm-up run: its result is not counted.
    pub warmup: bool,
}

/// How a test ended, as the runner saw it; ordered from the best to the worst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Ended {
    /// It ran to its end.
    Completed,
    /// It failed part way or could not start; what it measured, if anything, is its result.
    Failed,
    /// The stop flag ended it.
    Interrupted,
}

/// What one run gave: its result, if it has one, and how it ended.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// The result, also of a run that failed part way.
    pub result: Option<TestResult>,
    /// How it ended.
    pub ended: Ended,
}

/// The job's end: the counted results, in order, and how the last run ended.
#[derive(Debug, Clone)]
pub struct RepeatOutcome {
    /// The counted runs' results.
    pub counted: Vec<TestResult>,
    /// [`Ended::Completed`] when every run did; else how the run that stopped the job ended.
    pub ended: Ended,
}

impl Repeat {
    /// Every run, warm-up ones included.
    pub fn total(&self) -> u32 {
        self.warmup + self.counted
    }

    /// The heading of run `number` (1-based over all runs): "warm-up run 1 of 2", "run 3 of 5".
    pub fn title(&self, number: u32) -> String {
        if number <= self.warmup {
            format!("warm-up run {number} of {}", self.warmup)
        } else {
            format!("run {} of {}", number - self.warmup, self.counted)
        }
    }
}

/// Runs the job: each run through `run_one`, headed (when there are several) by a
/// [`JobEvent::Section`]; each counted result to `sink` as a [`JobEvent::Result`], warm-up
/// results as [`JobEvent::Uncounted`]. Stops at the first run that does not complete, or
/// before a run once `stop` is raised.
pub fn run<E: From<JobError>>(
    repeat: &Repeat,
    stop: &StopFlag,
    mut run_one: impl FnMut(&Run) -> Result<RunOutcome, E>,
    sink: &mut impl JobSink<E>,
) -> Result<RepeatOutcome, E> {
    if repeat.counted == 0 {
        return Err(JobError::Invalid("--repeat 0: run at least once".into()).into());
    }
    let mut counted = Vec::new();
    for number in 1..=repeat.total() {
        if stop.is_raised() {
            return Ok(RepeatOutcome { counted, ended: Ended::Interrupted });
        }
        if repeat.total() > 1 {
            let title = repeat.title(number);
            sink.event(JobEvent::Progress(&title))?;
            sink.event(JobEvent::Section(&title))?;
        }
        let run = Run { number, warmup: number <= repeat.warmup };
        let outcome = run_one(&run)?;
        if let Some(r) = outcome.result {
            sink.event(if run.warmup { JobEvent::Uncounted(&r) } else { JobEvent::Result(&r) })?;
            if !run.warmup {
                counted.push(r);
            }
        }
        if outcome.ended != Ended::Completed {
            return Ok(RepeatOutcome { counted, ended: outcome.ended });
        }
    }
    Ok(RepeatOutcome { counted, ended: Ended::Completed })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::testing::{result_at, Recorded};

    #[test]
    fn warm_up_runs_are_run_and_left_out() {
        let mut seen = Recorded::default();
        let mut runs = Vec::new();
        let outcome = run(
            &Repeat { warmup: 2, counted: 3 },
            &StopFlag::new(),
            |r: &Run| {
                runs.push(*r);
                // Each run's rate tells which it was.
                Ok::<_, JobError>(RunOutcome {
                    result: Some(result_at(r.number as u64 * 1000)),
                    ended: Ended::Completed,
                })
            },
            &mut seen.sink(),
        )
        .unwrap();
        assert_eq!(
            runs.iter().map(|r| (r.number, r.warmup)).collect::<Vec<_>>(),
            [(1, true), (2, true), (3, false), (4, false), (5, false)]
        );
        assert_eq!(outcome.ended, Ended::Completed);
        let rates: Vec<u64> = outcome.counted.iter().map(crate::jobs::testing::rate_of).collect();
        assert_eq!(rates, [3000, 4000, 5000]);
        assert_eq!(
            seen.sections,
            ["warm-up run 1 of 2", "warm-up run 2 of 2", "run 1 of 3", "run 2 of 3", "run 3 of 3"]
        );
        assert_eq!((seen.results.len(), seen.uncounted.len()), (3, 2));
    }

    #[test]
    fn a_failed_run_ends_the_job_with_what_it_measured() {
        let mut seen = Recorded::default();
        let outcome = run(
            &Repeat { warmup: 0, counted: 4 },
            &StopFlag::new(),
            |r: &Run| {
                let ended = if r.number == 2 { Ended::Failed } else { Ended::Completed };
                Ok::<_, JobError>(RunOutcome { result: Some(result_at(u64::from(r.number))), ended })
            },
            &mut seen.sink(),
        )
        .unwrap();
        assert_eq!((outcome.ended, outcome.counted.len()), (Ended::Failed, 2));
        assert_eq!(seen.sections.len(), 2);
    }

    #[test]
    fn a_raised_stop_flag_ends_the_job_before_the_next_run() {
        let stop = StopFlag::new();
        let mut seen = Recorded::default();
        let outcome = run(
            &Repeat { warmup: 1, counted: 3 },
            &stop,
            |r: &Run| {
                if r.number == 2 {
                    stop.raise();
                }
                Ok::<_, JobError>(RunOutcome { result: Some(result_at(1)), ended: Ended::Completed })
            },
            &mut seen.sink(),
        )
        .unwrap();
        assert_eq!((outcome.ended, outcome.counted.len()), (Ended::Interrupted, 1));
        // One run alone has no heading.
        let mut quiet = Recorded::default();
        let one = |_: &Run| Ok::<_, JobError>(RunOutcome { result: Some(result_at(1)), ended: Ended::Completed });
        run(&Repeat { warmup: 0, counted: 1 }, &StopFlag::new(), one, &mut quiet.sink()).unwrap();
        assert!(quiet.sections.is_empty() && quiet.results.len() == 1);
    }
}
