//! What the jobs' unit tests share: results as a UDP trial at a rate would give them, and a
//! sink that records every event.

use super::sink::{JobError, JobEvent};
use netchar_model::{
    Direction, FlowSummary, ResultHeader, SideTotals, TestInfo, TestResult, TestSpec, UdpRate, UdpReceived,
};

/// A UDP trial's result: `bps` offered and received up, no loss.
pub(crate) fn result_at(bps: u64) -> TestResult {
    udp_result(bps, bps as f64, 0.0, Direction::Up)
}

/// A UDP test's result as the client assembles it: the spec paced at `offered` bit/s, the
/// receiver's rate and loss on the flow of `direction`.
pub(crate) fn udp_result(offered: u64, received_bps: f64, loss_percent: f64, direction: Direction) -> TestResult {
    let mut spec = TestSpec::udp_default();
    spec.direction = direction;
    spec.udp.as_mut().expect("UDP options").rate = UdpRate::BitsPerSecond(offered);
    let header = ResultHeader::new(TestInfo::new(spec, "127.0.0.1:5300"));
    let mut r = TestResult::assemble(header, Vec::new(), Default::default(), None);
    let flow = FlowSummary {
        sender: SideTotals { bits_per_second: offered as f64, seconds: 2.0, ..Default::default() },
        receiver: SideTotals {
            bits_per_second: received_bps,
            seconds: 2.0,
            udp_received: Some(UdpReceived { loss_percent, ..Default::default() }),
            ..Default::default()
        },
        bytes_match: false,
        packets_accounted: Some(true),
        loss_breakdown: None,
        verify: None,
    };
    match direction {
        Direction::Down => r.summary.down = Some(flow),
        _ => r.summary.up = Some(flow),
    }
    r
}

/// The rate a result's test was paced at.
pub(crate) fn rate_of(r: &TestResult) -> u64 {
    match r.test.spec.udp.as_ref().map(|u| u.rate) {
        Some(UdpRate::BitsPerSecond(b)) => b,
        _ => 0,
    }
}

/// Every event a job gave, by kind.
#[derive(Debug, Default)]
pub(crate) struct Recorded {
    pub(crate) progress: Vec<String>,
    pub(crate) sections: Vec<String>,
    pub(crate) starts: Vec<TestSpec>,
    pub(crate) results: Vec<TestResult>,
    pub(crate) uncounted: Vec<TestResult>,
    pub(crate) skipped: Vec<String>,
}

impl Recorded {
    /// A sink that records into `self`.
    pub(crate) fn sink(&mut self) -> impl FnMut(JobEvent<'_>) -> Result<(), JobError> + '_ {
        |e| {
            match e {
                JobEvent::Progress(p) => self.progress.push(p.into()),
                JobEvent::Section(s) => self.sections.push(s.into()),
                JobEvent::TestStart(s) => self.starts.push(s.clone()),
                JobEvent::Result(r) => self.results.push(r.clone()),
                JobEvent::Uncounted(r) => self.uncounted.push(r.clone()),
                JobEvent::Skipped(s) => self.skipped.push(s.into()),
            }
            Ok(())
        }
    }
}

/// A sink that takes every event and keeps none.
pub(crate) fn ignore(_: JobEvent<'_>) -> Result<(), JobError> {
    Ok(())
}
