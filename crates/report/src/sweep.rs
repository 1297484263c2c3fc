//! The rate sweep table of `netchar suite bwsweep`, as `bwtest.sh` printed it: per direction a
//! header, a row per offered rate (what the sender achieved and the datagrams it fell behind
//! its schedule by, the received rate, loss, jitter, and where the step's lost datagrams went)
//! with the knee (the first rate whose loss is above `--knee-loss`) marked, and "no knee up
//! to" where none was; under a row, the step's `--step-cmd` runs; then, where the steps carry
//! loss breakdowns, where the lost datagrams of all the direction's steps went.

use netchar_model::units::format_si;
use netchar_model::{Direction, FlowSummary, LossBreakdown, TestInfo, TestResult, UdpRate};
use std::fmt::Write;

/// The knee threshold when the user sets none (`--knee-loss`), in percent: above the odd
/// datagram a busy host loses, low enough that the rate is still one to rely on.
pub const DEFAULT_KNEE_LOSS_PERCENT: f64 = 0.1;

/// The loss of a sweep step in percent, as the table and the knee use it: the receiver's, or
/// 100 when no receiver figures came back (nothing arrived).
pub fn step_loss_percent(r: &TestResult) -> f64 {
    let flow: Option<&FlowSummary> = r.summary.up.as_ref().or(r.summary.down.as_ref());
    flow.and_then(|f| f.receiver.udp_received.as_ref()).map_or(100.0, |u| u.loss_percent)
}

/// The knee threshold `results` were swept with (their step records'), or the default.
pub fn knee_loss_of<'a>(results: impl IntoIterator<Item = &'a TestResult>) -> f64 {
    results
        .into_iter()
        .find_map(|r| r.step.as_ref().and_then(|s| s.knee_loss_percent))
        .unwrap_or(DEFAULT_KNEE_LOSS_PERCENT)
}

/// The sweep table: a row as each trial ends.
#[derive(Debug)]
pub struct SweepTableReporter {
    /// The sweep's highest rate (`--to`), named when no rate passed the knee threshold.
    to_bps: u64,
    /// The knee threshold, in percent.
    knee_loss_percent: f64,
    /// The direction of the rows so far: a new one starts a new table.
    direction: Option<Direction>,
    knee_found: bool,
    /// The loss breakdowns of the direction's steps so far.
    breakdowns: Vec<LossBreakdown>,
}

impl SweepTableReporter {
    /// A table for a sweep up to `to_bps` bit/s, its knee at the default threshold.
    pub fn new(to_bps: u64) -> Self {
        Self {
            to_bps,
            knee_loss_percent: DEFAULT_KNEE_LOSS_PERCENT,
            direction: None,
            knee_found: false,
            breakdowns: Vec::new(),
        }
    }

    /// The knee is the first step that loses more than `percent` of its datagrams.
    pub fn with_knee_loss(mut self, percent: f64) -> Self {
        self.knee_loss_percent = percent;
        self
    }

    /// The end of the previous direction's table: "no knee up to" where no step passed the
    /// threshold, and the sum of the steps' loss breakdowns where any step lost datagrams.
    fn close(&mut self) -> String {
        let mut out = match self.direction {
            Some(_) if !self.knee_found => {
                format!("no loss above {}% up to {}\n", self.knee_loss_percent, format_si(self.to_bps as f64, "bit/s"))
            }
            _ => String::new(),
        };
        let steps = self.breakdowns.len();
        if let Some(sum) = LossBreakdown::sum(&self.breakdowns).filter(|b| b.lost > 0) {
            let mut lines = crate::loss::loss_breakdown_lines(&sum).into_iter();
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
        let _ = writeln!(out, "UDP rate sweep, {name}; knee: loss above {}%", self.knee_loss_percent);
        let _ = writeln!(
            out,
            "{:>16} {:>16} {:>8} {:>16} {:>10} {:>11}  lost to",
            "offered", "sent", "behind", "received", "loss %", "jitter ms"
        );
        out
    }

    fn row(&mut self, r: &TestResult) -> String {
        let flow: Option<&FlowSummary> = r.summary.up.as_ref().or(r.summary.down.as_ref());
        self.breakdowns.extend(flow.and_then(|f| f.loss_breakdown.clone()));
        let received = flow.map_or(0.0, |f| f.receiver.bits_per_second);
        let sent = flow.map_or(0.0, |f| f.sender.bits_per_second);
        let behind = flow.and_then(|f| f.sender.udp_sent.as_ref()).and_then(|u| u.behind_schedule);
        let loss = step_loss_percent(r);
        let jitter = flow.and_then(|f| f.receiver.udp_received.as_ref()).map_or(0.0, |u| u.jitter_ms);
        let offered = match r.test.spec.udp.as_ref().map(|u| u.rate) {
            Some(UdpRate::BitsPerSecond(b)) => b as f64,
            _ => 0.0,
        };
        let knee = !self.knee_found && loss > self.knee_loss_percent;
        self.knee_found |= knee;
        let mut out = format!(
            "{:>16} {:>16} {:>8} {:>16} {:>10.4} {:>11.4}  {}{}\n",
            format_si(offered, "bit/s"),
            format_si(sent, "bit/s"),
            behind.map_or("-".to_string(), |b| b.to_string()),
            format_si(received, "bit/s"),
            loss,
            jitter,
            flow.and_then(|f| f.loss_breakdown.as_ref()).map_or("-".to_string(), causes_cell),
            if knee { format!("  <- knee: loss above {}%", self.knee_loss_percent) } else { String::new() }
        );
        for line in crate::hooks::hook_lines(r) {
            let _ = writeln!(out, "{:>16} {line}", "");
        }
        out
    }
}

/// A step's loss causes in a cell: the two largest that lost any and what no counter
/// explains, e.g. `sender_qdisc 120, unexplained 3`; `-` where nothing was lost.
pub fn causes_cell(b: &LossBreakdown) -> String {
    let mut causes: Vec<(&str, u64)> =
        b.causes().iter().filter_map(|&(n, v)| Some((n, v?))).filter(|c| c.1 > 0).collect();
    causes.sort_by_key(|c| std::cmp::Reverse(c.1));
    causes.truncate(2);
    if b.unexplained > 0 {
        causes.push(("unexplained", b.unexplained));
    }
    if causes.is_empty() {
        return "-".into();
    }
    causes.iter().map(|(n, v)| format!("{n} {v}")).collect::<Vec<_>>().join(", ")
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
        // Saved steps keep the threshold they were swept with.
        if let Some(k) = results.iter().find_map(|s| s.result.step.as_ref().and_then(|st| st.knee_loss_percent)) {
            self.knee_loss_percent = k;
        }
        let mut out = String::new();
        for s in results {
            out.push_str(&self.open(s.result.test.spec.direction));
            out.push_str(&self.row(&s.result));
        }
        out.push_str(&self.close());
        out
    }
}
