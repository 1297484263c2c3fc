//! Where a job's results and progress go. A job never prints: it hands each event to its
//! [`JobSink`] (the command line's reporters and progress line, or a test's list), and runs
//! each test through a runner its caller gives it (a closure over the client, or a fake).
//!
//! A job is generic over its caller's error type `E`: the runner's and the sink's errors pass
//! through it unchanged, and its own ([`JobError`]) become `E` by `From`.

use netchar_model::{TestResult, TestSpec};

/// One thing a job tells its sink, in the order it happens.
#[derive(Debug, Clone, Copy)]
pub enum JobEvent<'a> {
    /// What runs now, for a progress line: "trial 3: 250 Mbit/s".
    Progress(&'a str),
    /// A heading before the test it names: "run 2 of 5".
    Section(&'a str),
    /// A test is about to run with this spec.
    TestStart(&'a TestSpec),
    /// A counted test's whole result, as it finished: a run, a trial, a step.
    Result(&'a TestResult),
    /// A result the job does not count: a warm-up run, a search's probe.
    Uncounted(&'a TestResult),
    /// A step the job left out, and why: one line for the user.
    Skipped(&'a str),
}

/// The receiver of a job's events. Any `FnMut(JobEvent) -> Result<(), E>` is one.
pub trait JobSink<E> {
    /// Takes one event; an error (the output closed) ends the job with it.
    fn event(&mut self, event: JobEvent<'_>) -> Result<(), E>;
}

impl<E, F: FnMut(JobEvent<'_>) -> Result<(), E>> JobSink<E> for F {
    fn event(&mut self, event: JobEvent<'_>) -> Result<(), E> {
        self(event)
    }
}

/// What a job itself refuses or meets, apart from its runner's and its sink's errors.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum JobError {
    /// The stop flag was raised between two tests.
    #[error("interrupted")]
    Interrupted,
    /// The job's parameters cannot make a test: the line names them and what they need.
    #[error("{0}")]
    Invalid(String),
    /// A test ended without the figures the job decides on.
    #[error("{0}")]
    NoFigures(String),
}
