//! The rate sweep table of `netchar suite bwsweep`, as `bwtest.sh` printed it: per direction a
//! header, a row per offered rate (achieved rate, loss, jitter) with the knee (the first rate
//! that loses datagrams) marked, and "no loss up to" where no rate lost any; then, where the
//! steps carry loss breakdowns, where the lost datagrams of all the direction's steps went.

use netchar_model::units::format_si;
use netchar_model::{Direction, FlowSummary, LossBreakdown, TestInfo, TestResult, UdpRate};
use std::fmt::Write;

/// The sweep table: a row as each trial ends.
#[derive(Debug)]
pub struct SweepTableReporter {
    /// The sweep's highest rate (`--to`), named when no rate lost datagrams.
    to_bps: u64,
    /// The direction of the rows so far: a new one starts a new table.
    direction: Option<Direction>,
    knee_found: bool,
    /// The loss breakdowns of the direction's steps so far.
    breakdowns: Vec<LossBreakdown>,
}

impl SweepTableReporter {
    /// A table for a sweep up to `to_bps` bit/s.
    pub fn new(to_bps: u64) -> Self {
        Self { to_bps, direction: None, knee_found: false, breakdowns: Vec::new() }
    }

    /// The end of the previous direction's table: "no loss up to" where no step lost any,
    /// and the sum of the steps' loss breakdowns where any step lost datagrams.
    fn close(&mut self) -> String {
        let mut out = match self.direction {
            Some(_) if !self.knee_found => format!("no loss up to {}\n", format_si(self.to_bps as f64, "bit/s")),
            _ => String::new(),
        };
        let steps = self.breakdowns.len();
        if let Some(sum) = LossBreakdown::sum(&self.breakdowns).filter(|b| b.lost > 0 || b.counted_beyond_lost > 0) {
            let mut lines = crate::text::loss_breakdown_lines(&sum).into_iter();
            if let Some(first) = lines.next() {
                let _ = writeln!(out, "over the {steps} steps, {first}");
            }
            for line in lines {
                let _ = writeln!(out, "  {line}");
            }
        }
        self.breakdowns.clear();
        out
    }

    /// The header when `direction` starts, after the previous table's end.
    fn open(&mut self, direction: Direction) -> String {
        if self.direction == Some(direction) {
            return String::new();
        }
        let mut out = self.close();
        self.direction = Some(direction);
        self.knee_found = false;
        let name = if direction == Direction::Down { "down (server sends)" } else { "up (client sends)" };
        let _ = writeln!(out, "UDP rate sweep, {name}");
        let _ = writeln!(out, "{:>16} {:>16} {:>10} {:>11}", "offered", "received", "loss %", "jitter ms");
        out
    }

    fn row(&mut self, r: &TestResult) -> String {
        let flow: Option<&FlowSummary> = r.summary.up.as_ref().or(r.summary.down.as_ref());
        self.breakdowns.extend(flow.and_then(|f| f.loss_breakdown.clone()));
        let received = flow.map_or(0.0, |f| f.receiver.bits_per_second);
        let udp = flow.and_then(|f| f.receiver.udp_received.as_ref());
        // No receiver figures: nothing arrived, all was lost.
        let loss = udp.map_or(100.0, |u| u.loss_percent);
        let jitter = udp.map_or(0.0, |u| u.jitter_ms);
        let offered = match r.test.spec.udp.as_ref().map(|u| u.rate) {
            Some(UdpRate::BitsPerSecond(b)) => b as f64,
            _ => 0.0,
        };
        let knee = !self.knee_found && loss > 0.0;
        self.knee_found |= knee;
        format!(
            "{:>16} {:>16} {:>10.4} {:>11.4}{}\n",
            format_si(offered, "bit/s"),
            format_si(received, "bit/s"),
            loss,
            jitter,
            if knee { "  <- knee: loss starts" } else { "" }
        )
    }
}

impl crate::Reporter for SweepTableReporter {
    fn on_start(&mut self, info: &TestInfo) -> String {
        self.open(info.spec.direction)
    }
    fn on_finish(&mut self, result: &TestResult) -> String {
        self.row(result)
    }
    fn on_job_end(&mut self, _: &[TestResult]) -> String {
        self.close()
    }
    fn on_results(&mut self, results: &[crate::Saved]) -> String {
        let mut out = String::new();
        for s in results {
            out.push_str(&self.open(s.result.test.spec.direction));
            out.push_str(&self.row(&s.result));
        }
        out.push_str(&self.close());
        out
    }
}
