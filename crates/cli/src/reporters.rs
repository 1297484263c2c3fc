//! The reporters of a job (one test, its `--warmup`/`--repeat` runs, a suite), chosen once
//! from the flags, and their output written to stdout under the progress line. Each format is
//! one reporter in crates/report; this file only picks them and writes what they return.

use crate::figure_files::FigureFiles;
use crate::plan::Output;
use crate::progress::Progress;
use netchar_report::json::{JobJsonReporter, JsonReporter};
use netchar_report::text::TextReporter;
use netchar_report::Reporter;
use std::io::Write;

/// Where a job's JSON goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JsonShape {
    /// One test: its object when it ends.
    PerTest,
    /// Several runs (`--repeat`): one array of the counted runs when the job ends.
    PerJob,
    /// The caller gathers the results into a document of its own (a plan's array).
    Gathered,
}

/// The reporters of one job.
pub(crate) struct Reporters {
    list: Vec<Box<dyn Reporter>>,
}

impl Reporters {
    /// The reporters the flags ask for: text, or JSON in `shape`.
    pub(crate) fn from_output(out: &Output, shape: JsonShape) -> Self {
        let mut list: Vec<Box<dyn Reporter>> = Vec::new();
        match (out.json, shape) {
            (false, _) => list.push(Box::new(TextReporter::new(out.format))),
            (true, JsonShape::PerTest) => list.push(Box::new(JsonReporter)),
            (true, JsonShape::PerJob) => list.push(Box::new(JobJsonReporter)),
            (true, JsonShape::Gathered) => {}
        }
        Self { list }
    }

    /// One more reporter, after those already chosen.
    pub(crate) fn push(&mut self, reporter: Box<dyn Reporter>) {
        self.list.push(reporter);
    }

    /// Just these reporters (a suite's table, or its JSON).
    pub(crate) fn of(reporter: Box<dyn Reporter>) -> Self {
        Self { list: vec![reporter] }
    }

    /// With the reporter that keeps this job's results for `--plot` and `--report`, if the
    /// command has either (crate::figure_files): every job that reports results finished.
    pub(crate) fn with_figures(mut self, figures: &FigureFiles) -> Self {
        self.list.extend(figures.reporter());
        self
    }

    /// Asks every reporter (`event` calls one of the [`Reporter`] methods) and writes what
    /// they return to stdout, above the progress line.
    pub(crate) fn emit(
        &mut self,
        progress: &Progress,
        mut event: impl FnMut(&mut dyn Reporter) -> String,
    ) -> std::io::Result<()> {
        let text: String = self.list.iter_mut().map(|r| event(r.as_mut())).collect();
        if text.is_empty() {
            return Ok(());
        }
        progress.suspend(|| {
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(text.as_bytes())?;
            stdout.flush()
        })
    }
}
