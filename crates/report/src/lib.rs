//! Formats netchar results. Reporters only format: they read the one result model
//! ([`netchar_model::TestResult`] and its live [`netchar_model::IntervalRecord`]s) and return
//! text; they never measure and never touch a socket.
//!
//! Every format is one file behind the one [`Reporter`] trait: [`text`], [`json`],
//! [`markdown`], [`csv`], [`svg`] (SVG and PNG plots), [`html`] (and a mesh's [`heatmap`]), and
//! the suites' classic tables and lines ([`sweep`], [`max_rate`], [`block_sizes`], [`ecos_lines`],
//! [`nc_test_lines`]), the quick characterization's [`quick`], the server's log lines
//! ([`server_log`]), and the exporter's Prometheus exposition ([`prometheus`]).
//! The integrations' documents: the pScheduler plugin's results ([`pscheduler`]) and a mesh's
//! lines and matrix ([`mesh`]). A stored series across builds with its change points
//! (`netchar history`): [`trend`].
//! [`plots`] decides which charts results make, [`chart`] draws one. A running test calls
//! `on_start`, `on_interval`, `on_finish` (or `on_no_result`), a job of several tests then
//! `on_job_end`, and a job that prints lines of its own as it runs (a peer master's) hands
//! each to `on_line`; `netchar report` hands saved results to `on_results`.
//!
//! The modules stand in layers, none on one above it. At the bottom this file: the
//! [`Reporter`] trait and the saved results every format reads. Above it the pieces several
//! formats share (the summary rows, the caveats that apply, the loss breakdown in words, the
//! user's commands as lines, markup escaping, cost figures; private modules), then the formats,
//! one built from another's pieces above that one (the eCos lines use the text report's
//! nc_test lines, the HTML report the plots). On top, [`format`](mod@format) picks the
//! reporter of a `--format`: the one module that knows every format.
//!
//! ```
//! use netchar_model::units::RateFormat;
//! assert_eq!(RateFormat::Mbits.format(191.3e6), "191.30 Mbit/s");
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod block_sizes;
mod caveats;
pub mod chart;
pub mod console;
mod cost;
pub mod csv;
pub mod ecos_lines;
#[cfg(test)]
mod fixtures;
pub mod format;
pub mod heatmap;
mod hooks;
pub mod html;
pub mod json;
mod loss;
pub mod markdown;
mod markup;
pub mod max_rate;
pub mod mesh;
pub mod nc_test_lines;
pub mod plots;
pub mod prometheus;
pub mod pscheduler;
pub mod quick;
pub mod repeat;
mod rows;
pub mod server_log;
pub mod svg;
pub mod sweep;
pub mod text;
pub mod trend;

pub use format::Format;

/// A saved result and where it came from, as `netchar report` read it.
#[derive(Debug, Clone, PartialEq)]
pub struct Saved {
    /// The file, or `file#N` for the N-th result (from 1) of an array.
    pub label: String,
    /// The result.
    pub result: netchar_model::TestResult,
}

/// The results in one saved JSON document: a test's `--json` output (one object) or an array
/// of them (`--repeat`, suites, plans). Labels are `label`, or `label#N` from 1 in an array.
/// The error is one line naming `label`.
pub fn parse_saved(text: &str, label: &str) -> Result<Vec<Saved>, String> {
    let doc: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("{label}: not JSON ({e}); give netchar --json output"))?;
    let one = |v: serde_json::Value, label: String| -> Result<Saved, String> {
        serde_json::from_value::<netchar_model::TestResult>(v)
            .map(|result| Saved { label: label.clone(), result })
            .map_err(|e| format!("{label}: not a netchar result ({e}); give netchar --json output"))
    };
    match doc {
        serde_json::Value::Array(items) if items.is_empty() => Err(format!("{label}: an empty array, no results")),
        serde_json::Value::Array(items) => {
            items.into_iter().enumerate().map(|(i, v)| one(v, format!("{label}#{}", i + 1))).collect()
        }
        v => Ok(vec![one(v, label.to_string())?]),
    }
}

/// Files a reporter writes into a directory: (file name, contents).
pub type NamedFiles = Vec<(String, Vec<u8>)>;

/// Something that shows a test as it runs and when it ends, or saved results afterwards.
pub trait Reporter {
    /// Once, before data flows. Nothing, unless the format prints a header as a test starts.
    fn on_start(&mut self, _info: &netchar_model::TestInfo) -> String {
        String::new()
    }
    /// For each interval this end completes. Nothing, unless the format shows intervals live
    /// (the text one does).
    fn on_interval(&mut self, _interval: &netchar_model::IntervalRecord) -> String {
        String::new()
    }
    /// A line the job prints as it runs, apart from any test's result, without its newline: a
    /// peer program's own output as netchar drives it (the lines of an eCos nc_test master,
    /// `--proto nc-test`, and the figures netchar adds under each test), a suite's section
    /// lines (`suite ecos`). Nothing, unless the format shows the job's lines as they come
    /// (`nc_test_lines`).
    fn on_line(&mut self, _line: &str) -> String {
        String::new()
    }
    /// Once, with the whole result (also a partial one after an error).
    fn on_finish(&mut self, result: &netchar_model::TestResult) -> String;
    /// A test that ended without any result (it never started), with its error: what stands
    /// in for the result. Nothing, unless the format must stay a valid document (JSON).
    fn on_no_result(&mut self, _error: Option<&str>) -> String {
        String::new()
    }
    /// A heading between the tests of a job (a plan's test, a `--repeat` run), before the
    /// test starts. Nothing, unless the format shows headings (the text one does).
    fn on_section(&mut self, _title: &str) -> String {
        String::new()
    }
    /// Once after the last test of a job of several (`--repeat`, suites, plans), with the
    /// job's counted results: what closes the job. Nothing, unless the format shows the
    /// job as one document (a JSON array).
    fn on_job_end(&mut self, _results: &[netchar_model::TestResult]) -> String {
        String::new()
    }
    /// Saved results, all at once (`netchar report`): the whole document.
    fn on_results(&mut self, results: &[Saved]) -> String;
    /// Saved results as separate named files (`-o DIR`), for formats that write one file per
    /// result (plots); None for formats that write one document.
    fn on_results_files(&mut self, _results: &[Saved]) -> Option<Vec<(String, String)>> {
        None
    }
    /// As [`Reporter::on_results_files`], as bytes (PNG images are not text); the error is one
    /// line.
    fn on_results_binary_files(&mut self, results: &[Saved]) -> Option<Result<NamedFiles, String>> {
        self.on_results_files(results).map(|f| Ok(f.into_iter().map(|(n, t)| (n, t.into_bytes())).collect()))
    }
}
