//! The eCos nc_test master's lines (`netchar echo`, `netchar suite ecos`): one line per test as
//! it ends, `UDP echo - 640 bufs of 1024 bytes in ...` or `TCP send - ...`, and for the suite
//! the master's idle share and the slave's background load under it.

use crate::text::{echo_line, transfer_line};
use netchar_model::{Direction, TestResult};
use std::fmt::Write;

/// The master's lines.
#[derive(Debug, Default)]
pub struct EcosLinesReporter {
    /// Also the CPU lines under each test (the suite's load and idle sections).
    cpu_lines: bool,
}

impl EcosLinesReporter {
    /// The lines of `netchar echo` (`cpu_lines` false) or of the eCos suite (true).
    pub fn new(cpu_lines: bool) -> Self {
        Self { cpu_lines }
    }

    fn lines(&self, r: &TestResult) -> String {
        let mut out = match (&r.summary.rr, &r.test.spec.rr) {
            (Some(_), _) => echo_line(r),
            // An echo test without its figures has no line, as echo_line says.
            (None, Some(_)) => String::new(),
            (None, None) => {
                let way = if r.test.spec.direction == Direction::Down { "recv" } else { "send" };
                transfer_line(r, &format!("{} {way}", r.test.spec.kind.name().to_uppercase()))
            }
        };
        if self.cpu_lines {
            if let Some(i) = r.cpu.local.as_ref().and_then(|c| c.idle_pct) {
                let _ = writeln!(out, "    master {i:.0}% idle");
            }
            if let Some(l) = r.cpu.remote.as_ref().and_then(|c| c.background_load_pct) {
                let _ = writeln!(out, "    slave background load achieved {l:.0}%");
            }
        }
        out
    }
}

impl crate::Reporter for EcosLinesReporter {
    /// The master's own lines (the suite's section headings), as they come.
    fn on_master_output(&mut self, output: crate::nc_test_lines::MasterOutput<'_>) -> String {
        match output {
            crate::nc_test_lines::MasterOutput::Line(l) => format!("{l}\n"),
            crate::nc_test_lines::MasterOutput::Figures(_) => String::new(),
        }
    }
    fn on_finish(&mut self, result: &TestResult) -> String {
        self.lines(result)
    }
    fn on_results(&mut self, results: &[crate::Saved]) -> String {
        results.iter().map(|s| self.lines(&s.result)).collect()
    }
}
