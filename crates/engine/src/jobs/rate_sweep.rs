//! `netchar suite bwsweep`: the bwtest.sh UDP rate sweep. Every rate from `from` to `to` by
//! `step`, up (the client sends) then down (the server sends); per rate an ordinary paced
//! test, whose result keeps the sweep's knee threshold, and the first rate of a direction that
//! loses more than the threshold marked as its knee.

use super::sink::{JobError, JobEvent, JobSink};
use crate::StopFlag;
use netchar_model::units::format_si;
use netchar_model::{Direction, TestResult, TestSpec, UdpRate};

/// A rate sweep's rates and its knee threshold.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateSweep {
    /// The first rate, bit/s.
    pub from: u64,
    /// The last rate, bit/s (included when the steps land on it).
    pub to: u64,
    /// Between two rates, bit/s.
    pub step: u64,
    /// `--knee-loss`, in percent.
    pub knee_loss_percent: f64,
}

impl RateSweep {
    /// The rates of one direction, in order; refused unless 0 < from <= to and step > 0.
    pub fn rates(&self) -> Result<Vec<u64>, JobError> {
        let &Self { from, to, step, .. } = self;
        if step == 0 || from == 0 || from > to {
            return Err(JobError::Invalid("--from, --to, --step: need 0 < from <= to and step > 0".into()));
        }
        Ok(std::iter::successors(Some(from), |r| r.checked_add(step)).take_while(|&r| r <= to).collect())
    }

    /// How many tests the sweep runs: each rate both ways.
    pub fn tests(&self) -> Result<usize, JobError> {
        Ok(2 * self.rates()?.len())
    }
}

/// Runs the sweep over `base` (a UDP test): each step as [`JobEvent::TestStart`] and
/// [`JobEvent::Result`], its step record carrying the threshold and, on the knee, the mark.
/// `loss_percent` reads a step's loss as the sweep's table prints it.
pub fn run<E: From<JobError>>(
    base: &TestSpec,
    sweep: &RateSweep,
    stop: &StopFlag,
    loss_percent: impl Fn(&TestResult) -> f64,
    mut run_test: impl FnMut(&TestSpec) -> Result<TestResult, E>,
    sink: &mut impl JobSink<E>,
) -> Result<(), E> {
    let rates = sweep.rates()?;
    if base.udp.is_none() {
        return Err(JobError::Invalid("a rate sweep runs UDP tests".into()).into());
    }
    for (direction, name) in [(Direction::Up, "up (client sends)"), (Direction::Down, "down (server sends)")] {
        let mut knee_found = false;
        for &rate in &rates {
            if stop.is_raised() {
                return Err(JobError::Interrupted.into());
            }
            sink.event(JobEvent::Progress(&format!("{name}: {}", format_si(rate as f64, "bit/s"))))?;
            let mut spec = super::max_rate::trial_spec(base, UdpRate::BitsPerSecond(rate));
            spec.direction = direction;
            sink.event(JobEvent::TestStart(&spec))?;
            let mut result = run_test(&spec)?;
            let knee = !knee_found && loss_percent(&result) > sweep.knee_loss_percent;
            knee_found |= knee;
            let record = result.step.get_or_insert_with(Default::default);
            record.knee_loss_percent = Some(sweep.knee_loss_percent);
            record.knee = knee;
            sink.event(JobEvent::Result(&result))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::testing::{ignore, rate_of, udp_result, Recorded};

    /// A path that loses a share of what is offered above `knee` bit/s, the same both ways.
    fn path(knee: u64) -> impl FnMut(&TestSpec) -> Result<TestResult, JobError> {
        move |spec| {
            let offered = rate_of_spec(spec);
            let received = offered.min(knee);
            let loss = 100.0 * (offered - received) as f64 / offered as f64;
            let mut r = udp_result(offered, received as f64, loss, spec.direction);
            r.test.spec = spec.clone();
            Ok(r)
        }
    }

    fn rate_of_spec(spec: &TestSpec) -> u64 {
        match spec.udp.as_ref().map(|u| u.rate) {
            Some(UdpRate::BitsPerSecond(b)) => b,
            _ => 0,
        }
    }

    fn loss(r: &TestResult) -> f64 {
        let flow = r.summary.up.as_ref().or(r.summary.down.as_ref());
        flow.and_then(|f| f.receiver.udp_received.as_ref()).map_or(100.0, |u| u.loss_percent)
    }

    #[test]
    fn every_rate_runs_both_ways_and_the_first_lossy_one_is_the_knee() {
        let sweep = RateSweep { from: 50_000_000, to: 300_000_000, step: 50_000_000, knee_loss_percent: 0.1 };
        assert_eq!(sweep.tests().unwrap(), 12);
        let mut seen = Recorded::default();
        run(&TestSpec::udp_default(), &sweep, &StopFlag::new(), loss, path(170_000_000), &mut seen.sink()).unwrap();
        let steps: Vec<(Direction, u64, bool)> =
            seen.results.iter().map(|r| (r.test.spec.direction, rate_of(r), r.step.as_ref().unwrap().knee)).collect();
        let knees: Vec<_> = steps.iter().filter(|s| s.2).collect();
        // 200M is the first rate above the path's 170M: one knee per direction.
        assert_eq!(knees, [&(Direction::Up, 200_000_000, true), &(Direction::Down, 200_000_000, true)]);
        assert_eq!(steps.len(), 12);
        assert_eq!(steps[..2], [(Direction::Up, 50_000_000, false), (Direction::Up, 100_000_000, false)]);
        assert!(seen.results.iter().all(|r| r.step.as_ref().unwrap().knee_loss_percent == Some(0.1)));
        assert_eq!(seen.starts.len(), 12);
    }

    #[test]
    fn a_sweep_without_rates_is_refused() {
        for (from, to, step) in [(0, 10, 1), (10, 5, 1), (1, 10, 0)] {
            let sweep = RateSweep { from, to, step, knee_loss_percent: 0.0 };
            let e = run(&TestSpec::udp_default(), &sweep, &StopFlag::new(), loss, path(1), &mut ignore);
            assert!(e.unwrap_err().to_string().contains("0 < from <= to"));
        }
        // The last rate is the last step at or under `to`, and a huge step does not overflow.
        let sweep = RateSweep { from: 10, to: 35, step: 10, knee_loss_percent: 0.0 };
        assert_eq!(sweep.rates().unwrap(), [10, 20, 30]);
        assert_eq!(RateSweep { from: 10, to: u64::MAX, step: u64::MAX, knee_loss_percent: 0.0 }.rates().unwrap(), [10]);
    }
}
