//! The tables of the quick characterization (`netchar` with no arguments): throughput per
//! test and flow, then request/response latency, printed whole when the last test ends (the
//! tests' names are their titles).

use netchar_model::units::RateFormat;
use netchar_model::TestResult;

/// What the quick characterization is not: said under its tables.
pub const LOOPBACK_NOTE: &str =
    "(one machine, loopback: sender, receiver and the kernel share its CPUs; see `netchar tcp --help` for real tests)\n";

/// The quick characterization's tables: silent while the tests run, both tables at the end.
#[derive(Debug)]
pub struct QuickTableReporter {
    format: RateFormat,
}

impl QuickTableReporter {
    /// Tables with rates in `format`.
    pub fn new(format: RateFormat) -> Self {
        Self { format }
    }

    fn tables<'a>(&self, rows: impl Iterator<Item = (String, &'a TestResult)>) -> String {
        let rows: Vec<(String, TestResult)> = rows.map(|(name, r)| (name, r.clone())).collect();
        crate::text::quick_table(&rows, self.format) + LOOPBACK_NOTE
    }
}

/// A test's name in the table: its title, else its kind.
fn name(r: &TestResult) -> String {
    r.test.title.clone().unwrap_or_else(|| r.test.spec.kind.name().to_string())
}

impl crate::Reporter for QuickTableReporter {
    fn on_finish(&mut self, _: &TestResult) -> String {
        String::new()
    }
    fn on_job_end(&mut self, results: &[TestResult]) -> String {
        self.tables(results.iter().map(|r| (name(r), r)))
    }
    fn on_results(&mut self, results: &[crate::Saved]) -> String {
        self.tables(results.iter().map(|s| (name(&s.result), &s.result)))
    }
}
