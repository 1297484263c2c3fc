//! Markdown: the summary table as a GitHub-flavoured table, for issues, wikis and READMEs.

use crate::rows::human_table;
use crate::Saved;
use netchar_model::units::RateFormat;
use netchar_model::TestResult;
use std::fmt::Write;

/// The markdown reporter: silent while a test runs, a table at the end.
#[derive(Debug, Default)]
pub struct MarkdownReporter {
    /// How rates are printed.
    pub format: RateFormat,
}

impl MarkdownReporter {
    /// A reporter printing rates in `format`.
    pub fn new(format: RateFormat) -> Self {
        Self { format }
    }
}

/// A cell's text with the characters that would break a table row escaped.
fn cell(s: &str) -> String {
    s.replace('\\', "\\\\").replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// The summary table of `results` in markdown, errors listed under it.
pub fn table(results: &[Saved], format: RateFormat) -> String {
    let t = human_table(results, format);
    let mut out = String::new();
    let _ = writeln!(out, "| {} |", t.headers.join(" | "));
    let rule: Vec<&str> = t.numeric.iter().map(|&n| if n { "---:" } else { "---" }).collect();
    let _ = writeln!(out, "|{}|", rule.join("|"));
    for row in &t.cells {
        let row: Vec<String> = row.iter().map(|c| cell(c)).collect();
        let _ = writeln!(out, "| {} |", row.join(" | "));
    }
    if !t.errors.is_empty() {
        out.push('\n');
        for (source, e) in &t.errors {
            let _ = writeln!(out, "- `{}`: error: {}", source.replace('`', "'"), cell(e));
        }
    }
    out
}

impl crate::Reporter for MarkdownReporter {
    fn on_finish(&mut self, result: &TestResult) -> String {
        table(&[Saved { label: "-".into(), result: result.clone() }], self.format)
    }
    fn on_results(&mut self, results: &[Saved]) -> String {
        table(results, self.format)
    }
}
