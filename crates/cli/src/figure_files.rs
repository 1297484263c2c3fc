//! `--plot DIR` and `--report FILE`: the plots and the HTML report of a command's results;
//! and a suite's or a plan's `--json-out FILE`, its results as one JSON array.
//!
//! The results reach them the way they reach every other output: through the reporters. The
//! command's job reporters each hold a [`FigureFiles::reporter`], which keeps each result as
//! the job reports it finished (`on_finish`); a job that counts only some of what it showed (a
//! `--warmup` run, a `--find-max-rate` search's probe) settles them at its end (`on_job_end`,
//! with the job's counted results). `main` writes the files once the command has ended, also
//! after a failed or interrupted command: the figures so far.

use crate::args::{Cli, Command, FinishArgs};
use crate::report::write_atomically;
use crate::store::Labels;
use anyhow::{anyhow, Context, Result};
use netchar_model::units::RateFormat;
use netchar_model::TestResult;
use netchar_report::{Reporter, Saved};
use std::cell::RefCell;
use std::rc::Rc;

/// The files a command draws its results into, if it was given `--plot` or `--report`.
#[derive(Default)]
pub(crate) struct FigureFiles {
    kept: Option<Rc<RefCell<Kept>>>,
    /// `--store` (crate::store), which takes the same counted results.
    store: Option<crate::store::StoreArgs>,
}

/// What the command's reporters have kept.
#[derive(Default)]
struct Kept {
    /// The command's name: the results' set (`bwsweep#1`, `bwsweep#2`, ...).
    label: String,
    outputs: FinishArgs,
    /// The results are a `--find-max-rate` search's trials: plotted as a search even at one
    /// rate (the first trial passed and ended it).
    search: bool,
    /// A suite's or a plan's `--json-out FILE`: the results as one array (a single test writes
    /// its own, as each run ends: crate::save).
    json_out: Option<std::path::PathBuf>,
    results: Vec<TestResult>,
    /// Labels of the results from an index on (a plan's test's, for `--store`): (index, labels).
    label_spans: Vec<(usize, Labels)>,
}

impl FigureFiles {
    /// The files of a test, suite, plan or the quick characterization, named after the command
    /// (a plan after its file); none for other commands, or without `--plot` and `--report`.
    pub(crate) fn for_command(cli: &Cli) -> Self {
        let (label, outputs, search) = match &cli.command {
            None => ("quick".to_string(), &cli.finish, false),
            Some(Command::Tcp(a)) => ("tcp".into(), &a.common.finish, false),
            Some(Command::Udp(a)) if a.find_max_rate => ("find-max-rate".into(), &a.common.finish, true),
            Some(Command::Udp(a)) => ("udp".into(), &a.common.finish, false),
            Some(Command::Rr(a)) => ("rr".into(), &a.common.finish, false),
            Some(Command::Crr(a)) => ("crr".into(), &a.common.finish, false),
            Some(Command::Echo(a)) => ("echo".into(), &a.common.finish, false),
            Some(Command::Suite(s)) => (s.name().into(), &s.target().finish, false),
            Some(Command::Run(a)) => {
                (a.plan.file_stem().map_or("plan".into(), |s| s.to_string_lossy().into_owned()), &a.finish, false)
            }
            _ => return Self::default(),
        };
        let json_out = match &cli.command {
            Some(Command::Suite(s)) => s.target().json_out.clone(),
            Some(Command::Run(a)) => a.json_out.clone(),
            _ => None,
        };
        if outputs.plot.is_none() && outputs.report.is_none() && json_out.is_none() && outputs.store.store.is_none() {
            return Self::default();
        }
        let store = outputs.store.store.is_some().then(|| outputs.store.clone());
        let kept =
            Kept { label, outputs: outputs.clone(), search, json_out, results: Vec::new(), label_spans: Vec::new() };
        Self { kept: Some(Rc::new(RefCell::new(kept))), store }
    }

    /// A reporter that keeps one job's results for these files; None without files. A job
    /// inside another (a plan's test) has its own, and the outer job's reporters none: each
    /// result is kept by the job that reports it finished.
    pub(crate) fn reporter(&self) -> Option<Box<dyn Reporter>> {
        self.kept.as_ref().map(|kept| Box::new(JobKeeper { kept: Rc::clone(kept), first: None }) as Box<dyn Reporter>)
    }

    /// The command's `--store` flags, when it has them.
    pub(crate) fn store_args(&self) -> Option<&crate::store::StoreArgs> {
        self.store.as_ref()
    }

    /// The labels of the results kept from now on (a plan's test's: crate::plans), which
    /// `--store` adds to the command line's.
    pub(crate) fn label_next_results(&self, labels: Labels) {
        if let Some(kept) = &self.kept {
            let mut k = kept.borrow_mut();
            let from = k.results.len();
            k.label_spans.push((from, labels));
        }
    }

    /// The results kept so far, each with the labels it was kept under (none outside a plan).
    pub(crate) fn labelled_results(&self) -> Vec<(TestResult, Labels)> {
        let Some(kept) = &self.kept else { return Vec::new() };
        let k = kept.borrow();
        let labels_at = |i: usize| k.label_spans.iter().rev().find(|(from, _)| *from <= i).map(|(_, l)| l.clone());
        k.results.iter().enumerate().map(|(i, r)| (r.clone(), labels_at(i).unwrap_or_default())).collect()
    }

    /// Writes the plots and the report of the kept results (nothing if no test finished: the
    /// command has said why, and there is nothing to draw).
    pub(crate) fn write(self) -> Result<()> {
        let Some(kept) = self.kept else { return Ok(()) };
        let k = kept.take();
        if k.results.is_empty() {
            return Ok(());
        }
        if let Some(file) = &k.json_out {
            crate::save::save_json_array(file, &k.results)?;
        }
        let saved: Vec<Saved> = k
            .results
            .into_iter()
            .enumerate()
            .map(|(i, result)| Saved { label: format!("{}#{}", k.label, i + 1), result })
            .collect();
        let charts =
            if k.search { netchar_report::plots::search_charts(&saved) } else { netchar_report::plots::charts(&saved) };
        if let Some(dir) = &k.outputs.plot {
            std::fs::create_dir_all(dir).with_context(|| format!("--plot: cannot create {}", dir.display()))?;
            for png in [false, true] {
                for chart in &charts {
                    let (name, bytes) = netchar_report::svg::render(chart, png).map_err(|e| anyhow!("--plot: {e}"))?;
                    write_atomically(&dir.join(name), &bytes)?;
                }
            }
        }
        if let Some(file) = &k.outputs.report {
            write_atomically(file, netchar_report::html::document_with_charts(&saved, RateFormat::AutoBits, &charts))?;
        }
        Ok(())
    }
}

/// One job's reporter for the figure files: it prints nothing.
struct JobKeeper {
    kept: Rc<RefCell<Kept>>,
    /// Where this job's first kept result stands among all the command's.
    first: Option<usize>,
}

impl Reporter for JobKeeper {
    fn on_finish(&mut self, result: &TestResult) -> String {
        let mut kept = self.kept.borrow_mut();
        self.first.get_or_insert(kept.results.len());
        kept.results.push(result.clone());
        String::new()
    }

    /// The job's counted results replace what it kept as it ran.
    fn on_job_end(&mut self, results: &[TestResult]) -> String {
        let mut kept = self.kept.borrow_mut();
        let first = *self.first.get_or_insert(kept.results.len());
        kept.results.truncate(first);
        kept.results.extend_from_slice(results);
        String::new()
    }

    fn on_results(&mut self, _results: &[Saved]) -> String {
        String::new()
    }
}
