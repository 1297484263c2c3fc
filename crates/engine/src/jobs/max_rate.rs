//! `netchar udp --find-max-rate`: the RFC 2544-style search for the highest UDP rate whose
//! loss stays within a threshold. A binary search between 0 and a ceiling (the rate given, or
//! what a probe sent flat out received), each trial an ordinary paced test; it stops when the
//! bracket is within 1% or after [`MAX_TRIALS`] trials. Whether a trial passed is the caller's
//! judgement (the report crate's verdict, which also tells a sender that stalled), so the
//! figures' meaning has one home.

use super::sink::{JobError, JobEvent, JobSink};
use crate::StopFlag;
use netchar_model::units::format_si;
use netchar_model::{TestResult, TestSpec, UdpRate};

/// Trials of a search at most; the search also stops once the bracket is within 1%.
pub const MAX_TRIALS: usize = 14;
/// Trials run again because their sender stalled, at most, over a whole search.
pub const MAX_STALL_RETRIES: usize = 6;

/// The judgement on one trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrialVerdict {
    /// Within the loss threshold, the receiver keeping pace.
    Pass,
    /// Not: the rate is above the highest one.
    Fail,
    /// The sender did not offer the rate as paced: the trial says nothing, and runs again.
    SenderStalled,
}

/// Where the search starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ceiling {
    /// This rate, bit/s (`-b`).
    Given(u64),
    /// What a probe sending flat out delivers to the receiver.
    Probe,
}

/// Which test of the search a runner is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchTest {
    /// The unpaced probe that finds the ceiling: no step of the search.
    Probe,
    /// A paced trial: a step of the search.
    Trial,
}

/// `base` as a trial at `rate` runs it: paced, no interval reports.
pub fn trial_spec(base: &TestSpec, rate: UdpRate) -> TestSpec {
    let mut spec = base.clone();
    spec.interval_seconds = 0.0;
    if let Some(u) = spec.udp.as_mut() {
        u.rate = rate;
    }
    spec
}

/// The search: its probe (when the ceiling is probed) reaches `sink` as
/// [`JobEvent::Uncounted`], each trial as [`JobEvent::TestStart`] then [`JobEvent::Result`]
/// (a stalled trial too, before it runs again). Returns the highest rate that passed, if any.
pub fn run<E: From<JobError>>(
    base: &TestSpec,
    ceiling: Ceiling,
    stop: &StopFlag,
    judge: impl Fn(&TestResult) -> TrialVerdict,
    mut run_test: impl FnMut(&TestSpec, SearchTest) -> Result<TestResult, E>,
    sink: &mut impl JobSink<E>,
) -> Result<Option<u64>, E> {
    if base.udp.is_none() {
        return Err(JobError::Invalid("--find-max-rate: a UDP test's search".into()).into());
    }
    if !matches!(base.end, netchar_model::EndCondition::Seconds(_)) {
        return Err(JobError::Invalid("--find-max-rate: give the trial duration with -t, not -n".into()).into());
    }
    let ceiling = match ceiling {
        Ceiling::Given(b) => b,
        Ceiling::Probe => {
            sink.event(JobEvent::Progress("probing the highest rate"))?;
            let probe = run_test(&trial_spec(base, UdpRate::Unlimited), SearchTest::Probe)?;
            let flow = probe.summary.up.as_ref().or(probe.summary.down.as_ref());
            let Some(received) = flow.map(|f| f.receiver.bits_per_second) else {
                return Err(JobError::NoFigures("no flow in the probe".into()).into());
            };
            sink.event(JobEvent::Uncounted(&probe))?;
            // Under 1 kbit/s nothing is worth searching; the floor keeps the bracket open.
            received.max(1e3) as u64
        }
    };
    let (mut lo, mut hi) = (0u64, ceiling);
    let mut rate = ceiling;
    let (mut stalls, mut trials) = (0, 0);
    let mut found = None;
    while trials < MAX_TRIALS {
        if stop.is_raised() {
            return Err(JobError::Interrupted.into());
        }
        trials += 1;
        sink.event(JobEvent::Progress(&format!("trial {trials}: {}", format_si(rate as f64, "bit/s"))))?;
        let spec = trial_spec(base, UdpRate::BitsPerSecond(rate));
        sink.event(JobEvent::TestStart(&spec))?;
        let trial = run_test(&spec, SearchTest::Trial)?;
        sink.event(JobEvent::Result(&trial))?;
        let verdict = judge(&trial);
        if verdict == TrialVerdict::SenderStalled && stalls < MAX_STALL_RETRIES {
            // Not offered as paced: run again, not counted as a trial of the search; past the
            // retries the machine cannot test the rate, and it fails.
            stalls += 1;
            trials -= 1;
            continue;
        }
        let pass = verdict == TrialVerdict::Pass;
        if pass {
            lo = rate;
            found = found.max(Some(rate));
        } else {
            hi = rate;
        }
        if pass && rate == ceiling || hi.saturating_sub(lo) <= hi / 100 {
            break;
        }
        rate = lo + (hi - lo) / 2;
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::testing::{ignore, rate_of, udp_result, Recorded};
    use netchar_model::Direction;

    /// A path that carries up to `knee` bit/s and loses what is offered above it, as a
    /// token-bucket shaper does.
    fn path(knee: u64) -> impl FnMut(&TestSpec, SearchTest) -> Result<TestResult, JobError> {
        move |spec, test| {
            let offered = match spec.udp.as_ref().map(|u| u.rate) {
                Some(UdpRate::BitsPerSecond(b)) => {
                    assert_eq!(test, SearchTest::Trial);
                    b
                }
                // Flat out, the sender reaches 10 Gbit/s; the path still carries the knee.
                _ => 10_000_000_000,
            };
            let received = offered.min(knee);
            let loss = 100.0 * (offered - received) as f64 / offered as f64;
            let mut r = udp_result(offered, received as f64, loss, Direction::Up);
            r.test.spec = spec.clone();
            Ok(r)
        }
    }

    fn within(loss_percent: f64) -> impl Fn(&TestResult) -> TrialVerdict {
        move |r| {
            let loss = r.summary.up.as_ref().and_then(|f| f.receiver.udp_received.as_ref()).unwrap().loss_percent;
            if loss <= loss_percent {
                TrialVerdict::Pass
            } else {
                TrialVerdict::Fail
            }
        }
    }

    fn base() -> TestSpec {
        let mut spec = TestSpec::udp_default();
        spec.end = netchar_model::EndCondition::Seconds(2.0);
        spec
    }

    #[test]
    fn the_search_converges_on_the_knee_of_the_path() {
        let knee = 345_000_000;
        let mut seen = Recorded::default();
        let stop = StopFlag::new();
        let found = run(&base(), Ceiling::Probe, &stop, within(0.0), path(knee), &mut seen.sink()).unwrap().unwrap();
        // The probe found the knee itself: its first trial passed, and the search ended there.
        assert_eq!((found, seen.uncounted.len(), seen.results.len()), (knee, 1, 1));
        // From a ceiling above it, the bracket closes on the knee within 1%.
        let mut seen = Recorded::default();
        let found =
            run(&base(), Ceiling::Given(1_000_000_000), &stop, within(0.0), path(knee), &mut seen.sink()).unwrap();
        let found = found.unwrap();
        assert!(found <= knee && found as f64 >= knee as f64 * 0.99, "{found}");
        assert!(seen.results.len() <= MAX_TRIALS && seen.uncounted.is_empty());
        // Every trial ran paced at the rate announced, without interval reports.
        for (start, result) in seen.starts.iter().zip(&seen.results) {
            assert_eq!(start.interval_seconds, 0.0);
            assert_eq!(trial_spec(start, start.udp.as_ref().unwrap().rate), result.test.spec);
        }
        let rates: Vec<u64> = seen.results.iter().map(rate_of).collect();
        assert_eq!(rates[..3], [1_000_000_000, 500_000_000, 250_000_000]);
        // A loss allowance moves the answer above the knee by about that share.
        let found =
            run(&base(), Ceiling::Given(1_000_000_000), &stop, within(10.0), path(knee), &mut ignore).unwrap().unwrap();
        assert!(found as f64 > knee as f64 * 1.09 && found as f64 <= knee as f64 / 0.9, "{found}");
    }

    #[test]
    fn a_stalled_sender_runs_again_and_a_path_that_carries_nothing_finds_nothing() {
        let mut stalled = 0;
        let judge = |r: &TestResult| {
            if rate_of(r) == 500_000_000 {
                TrialVerdict::SenderStalled
            } else {
                within(0.0)(r)
            }
        };
        let mut run_test = path(400_000_000);
        let mut counting = |spec: &TestSpec, test| {
            let r = run_test(spec, test)?;
            stalled += usize::from(rate_of(&r) == 500_000_000);
            Ok(r)
        };
        let mut seen = Recorded::default();
        let stop = StopFlag::new();
        let found = run(&base(), Ceiling::Given(1_000_000_000), &stop, judge, &mut counting, &mut seen.sink()).unwrap();
        // The 500M trial stalled every time: retried up to the limit, then failed.
        assert_eq!(stalled, MAX_STALL_RETRIES + 1);
        assert!(found.unwrap() <= 400_000_000);
        let never = |_: &TestResult| TrialVerdict::Fail;
        let found = run(&base(), Ceiling::Given(1_000_000), &stop, never, path(0), &mut ignore).unwrap();
        assert_eq!(found, None);
    }

    #[test]
    fn a_count_ended_test_or_a_raised_flag_is_refused() {
        let mut spec = base();
        spec.end = netchar_model::EndCondition::Bytes(1000);
        let e = run(&spec, Ceiling::Probe, &StopFlag::new(), within(0.0), path(1), &mut ignore).unwrap_err();
        assert!(e.to_string().contains("with -t, not -n"), "{e}");
        let stop = StopFlag::new();
        stop.raise();
        let e = run(&base(), Ceiling::Given(1000), &stop, within(0.0), path(1), &mut ignore).unwrap_err();
        assert_eq!(e, JobError::Interrupted);
    }
}
