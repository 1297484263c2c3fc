//! The trial table of `netchar udp --find-max-rate` (the RFC 2544-style search for the
//! highest UDP rate whose loss stays at or under a threshold): the probe's line when the
//! search measured its own ceiling, a row per trial with its verdict as it ends, and the
//! rate found, with where the trials' lost datagrams went when they carry loss breakdowns.
//! [`verdict`] is the one rule both the search and the table apply.

use netchar_model::units::format_si;
use netchar_model::{EndCondition, FlowSummary, LossBreakdown, TestInfo, TestResult, TestSpec, UdpRate};
use std::fmt::Write;

/// A trial's receive rate must reach this share of the offered rate to pass: a deep queue
/// can swallow a short overload without loss (the datagrams drain after the trial).
pub const KEEP_PACE: f64 = 0.995;

/// How a trial of the search went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Loss at or under the threshold, and the receiver kept pace.
    Pass,
    /// More loss than the threshold allows.
    Loss,
    /// The receiver fell behind the offered rate (queueing), whatever the loss.
    FellBehind,
    /// The sender itself did not reach the offered rate (its own CPU or socket was the
    /// limit): the rate was never offered, so the far end is not to blame.
    SenderShort,
    /// The trial failed after its sender stalled for longer than the pace the search allows
    /// (it did not get the CPU): what it owed went out as a catch-up burst at up to twice the
    /// rate, which is not the paced rate under test. The search runs the rate again.
    SenderStalled,
}

impl Verdict {
    /// Whether the rate passed.
    pub fn passed(self) -> bool {
        self == Self::Pass
    }

    /// The verdict column of the table.
    pub fn text(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Loss => "fail: loss",
            Self::FellBehind => "fail: the receiver fell behind (queueing)",
            Self::SenderShort => "fail: the sender fell short of the rate",
            Self::SenderStalled => "again: the sender stalled (it did not get the CPU)",
        }
    }
}

/// The one flow of a one-way UDP trial.
fn flow(r: &TestResult) -> Option<&FlowSummary> {
    r.summary.up.as_ref().or(r.summary.down.as_ref())
}

/// The rate a trial's sender measured.
pub fn sent_bps(r: &TestResult) -> f64 {
    flow(r).map_or(0.0, |f| f.sender.bits_per_second)
}

/// The rate a trial's receiver measured (0 when nothing arrived).
pub fn received_bps(r: &TestResult) -> f64 {
    flow(r).map_or(0.0, |f| f.receiver.bits_per_second)
}

/// A trial's loss; 100% when the receiver has no figures (nothing arrived).
pub fn loss_percent(r: &TestResult) -> f64 {
    flow(r).and_then(|f| f.receiver.udp_received.as_ref()).map_or(100.0, |u| u.loss_percent)
}

/// The paced rate a spec offers; None for an unpaced one (the probe).
pub fn offered_bps(spec: &TestSpec) -> Option<u64> {
    match spec.udp.as_ref()?.rate {
        UdpRate::BitsPerSecond(b) => Some(b),
        _ => None,
    }
}

/// How long a trial's sender stalled, ms, when that was longer than the search's tolerance:
/// the receiver may trail the offered bytes by 1 - [`KEEP_PACE`] of the trial, so may the
/// sender's schedule.
pub fn sender_stall_ms(r: &TestResult) -> Option<f64> {
    let f = flow(r)?;
    let late = f.sender.udp_sent.as_ref()?.late_max_ms?;
    (late * 1e-3 > (1.0 - KEEP_PACE) * f.sender.seconds).then_some(late)
}

/// The verdict on a paced trial for a loss threshold of `loss_percent`.
pub fn verdict(r: &TestResult, loss_percent: f64) -> Verdict {
    match path_verdict(r, loss_percent) {
        // A path that carried even the catch-up burst passed; a failure after a stall says
        // nothing about the paced rate.
        v if !v.passed() && sender_stall_ms(r).is_some() => Verdict::SenderStalled,
        v => v,
    }
}

/// The verdict on what reached the receiver, whatever the sender's schedule.
fn path_verdict(r: &TestResult, loss_percent: f64) -> Verdict {
    let offered = offered_bps(&r.test.spec).unwrap_or(0) as f64;
    let kept_pace = received_bps(r) >= KEEP_PACE * offered;
    let sender_short = sent_bps(r) < KEEP_PACE * offered;
    match (self::loss_percent(r) <= loss_percent, kept_pace) {
        (true, true) => Verdict::Pass,
        // A sender that never reached the rate did not test it; what it did send was not lost.
        (true, false) if sender_short => Verdict::SenderShort,
        // What the sender managed was lost: the loss, not the sender, is the verdict.
        (false, false) if sender_short => Verdict::Loss,
        // A receiver that fell behind is named, whatever the loss: more time would have lost more.
        (_, false) => Verdict::FellBehind,
        (false, true) => Verdict::Loss,
    }
}

/// The search's table: the probe line, a header before the first trial, a row per trial, the
/// rate found at the end.
#[derive(Debug)]
pub struct MaxRateTableReporter {
    loss_percent: f64,
    header_done: bool,
    trials: usize,
}

impl MaxRateTableReporter {
    /// The table of a search for loss at or under `loss_percent`.
    pub fn new(loss_percent: f64) -> Self {
        Self { loss_percent, header_done: false, trials: 0 }
    }

    /// The header, before the first trial: the first trial runs at the search's ceiling.
    fn header(&mut self, spec: &TestSpec) -> String {
        let Some(ceiling) = offered_bps(spec).filter(|_| !self.header_done) else { return String::new() };
        self.header_done = true;
        let secs = match spec.end {
            EndCondition::Seconds(s) => format!("{s} s trials"),
            EndCondition::Bytes(n) => format!("{n}-byte trials"),
        };
        let mut out = format!(
            "searching 0 .. {} for the highest rate with loss <= {}% ({secs})\n",
            format_si(ceiling as f64, "bit/s"),
            self.loss_percent
        );
        let _ = writeln!(out, "{:>6} {:>16} {:>16} {:>10}  verdict", "trial", "offered", "received", "loss %");
        out
    }

    /// The probe's line, or a trial's row.
    fn row(&mut self, r: &TestResult) -> String {
        let Some(offered) = offered_bps(&r.test.spec) else {
            return format!("probe: as fast as possible, received {}\n", format_si(received_bps(r), "bit/s"));
        };
        let mut out = self.header(&r.test.spec);
        self.trials += 1;
        let _ = writeln!(
            out,
            "{:>6} {:>16} {:>16} {:>10.4}  {}",
            self.trials,
            format_si(offered as f64, "bit/s"),
            format_si(received_bps(r), "bit/s"),
            loss_percent(r),
            verdict(r, self.loss_percent).text()
        );
        for line in crate::hooks::hook_lines(r) {
            let _ = writeln!(out, "{:>6} {line}", "");
        }
        out
    }

    /// The rate found: the highest offered rate that passed.
    fn end<'a>(&self, trials: impl Iterator<Item = &'a TestResult>) -> String {
        let trials: Vec<&TestResult> = trials.filter(|r| offered_bps(&r.test.spec).is_some()).collect();
        let best = trials
            .iter()
            .filter(|r| verdict(r, self.loss_percent).passed())
            .max_by_key(|r| offered_bps(&r.test.spec).unwrap_or(0));
        let n = match trials.len() {
            1 => "1 trial".to_string(),
            n => format!("{n} trials"),
        };
        let breakdowns: Vec<&LossBreakdown> = trials.iter().filter_map(|r| flow(r)?.loss_breakdown.as_ref()).collect();
        let mut lost = String::new();
        if let Some(sum) = LossBreakdown::sum(breakdowns).filter(|b| b.lost > 0) {
            let mut lines = crate::loss::loss_breakdown_lines(&sum).into_iter();
            if let Some(first) = lines.next() {
                let _ = writeln!(lost, "over the {n}, {first}");
            }
            for line in lines {
                let _ = writeln!(lost, "  {line}");
            }
        }
        let found = match best {
            Some(b) => format!(
                "highest rate with loss <= {}%: {} offered, {} received ({n})\n",
                self.loss_percent,
                format_si(offered_bps(&b.test.spec).unwrap_or(0) as f64, "bit/s"),
                format_si(received_bps(b), "bit/s"),
            ),
            None => format!("no rate tried met loss <= {}% ({n})\n", self.loss_percent),
        };
        // Rates only a stalled sender tried, above the rate found: the search could not tell
        // whether the path carries them.
        let best_rate = best.and_then(|b| offered_bps(&b.test.spec)).unwrap_or(0);
        let untested = trials
            .iter()
            .filter_map(|r| offered_bps(&r.test.spec).filter(|&o| o > best_rate))
            .filter(|&o| {
                let at = trials.iter().filter(|r| offered_bps(&r.test.spec) == Some(o));
                at.clone().count() > 0 && at.clone().all(|r| verdict(r, self.loss_percent) == Verdict::SenderStalled)
            })
            .min();
        let stalled = match untested {
            Some(o) => format!(
                "the sender stalled (it did not get the CPU) in every trial at {}: this machine, not the path, may set the rate found\n",
                format_si(o as f64, "bit/s")
            ),
            None => String::new(),
        };
        found + &stalled + &lost
    }
}

impl crate::Reporter for MaxRateTableReporter {
    fn on_start(&mut self, info: &TestInfo) -> String {
        self.header(&info.spec)
    }
    fn on_finish(&mut self, result: &TestResult) -> String {
        self.row(result)
    }
    fn on_job_end(&mut self, results: &[TestResult]) -> String {
        self.end(results.iter())
    }
    fn on_results(&mut self, results: &[crate::Saved]) -> String {
        let mut out: String = results.iter().map(|s| self.row(&s.result)).collect();
        out.push_str(&self.end(results.iter().map(|s| &s.result)));
        out
    }
}
