//! Tests made of tests: the RFC 2544-style search for the highest loss-free UDP rate
//! (`netchar udp --find-max-rate`) and the built-in suites, each its own command: the
//! `bwtest.sh` rate sweep (`bwsweep`) and stackthru's block-size sweep (`sizes`) here; netio's
//! table and the eCos sequence have their flags and output in netio.rs, ecos.rs and nc_test.rs;
//! main.rs dispatches each. The jobs themselves are the engine's (netchar_engine::jobs); this
//! file turns the flags into their parameters, runs each test of a job through the client
//! ([`runner`]) and shows what the job yields through the reporters ([`ReportingSink`]). Each
//! trial is an ordinary test; its result is kept whole.

use crate::args::{BwsweepSuiteArgs, SizesSuiteArgs, SuiteTarget};
use crate::figure_files::FigureFiles;
use crate::plan::TcpPlan;
use crate::progress::Progress;
use crate::reporters::Reporters;
use anyhow::Result;
use netchar_engine::client::{self, ClientError};
use netchar_engine::jobs::max_rate::{self as search, Ceiling, SearchTest, TrialVerdict};
use netchar_engine::jobs::rate_sweep::{self, RateSweep};
use netchar_engine::jobs::sink::{JobEvent, JobSink};
use netchar_engine::jobs::sizes;
use netchar_engine::StopFlag;
use netchar_model::{EndCondition, TestResult, TestSpec, UdpRate};
use netchar_report::block_sizes::SizesTableReporter;
use netchar_report::json::JobJsonReporter;
use netchar_report::max_rate::{self, MaxRateTableReporter, Verdict};
use netchar_report::sweep::SweepTableReporter;

/// Where a job's events go on the command line: what runs now on the progress line, headings,
/// starts and results through the job's reporters (each counted result kept for the job's
/// end), skipped steps as a line on stderr.
pub(crate) struct ReportingSink<'a> {
    /// The test the job varies: its client, for the header of each test's spec.
    plan: &'a TcpPlan,
    reporters: Reporters,
    progress: &'a Progress,
    results: Vec<TestResult>,
}

impl<'a> ReportingSink<'a> {
    pub(crate) fn new(plan: &'a TcpPlan, reporters: Reporters, progress: &'a Progress) -> Self {
        Self { plan, reporters, progress, results: Vec::new() }
    }

    /// The job's end: its counted results to the reporters, also after a failed test (the
    /// error follows them); then `outcome`.
    pub(crate) fn end<T>(self, outcome: Result<T>) -> Result<T> {
        let progress = self.progress;
        let (mut reporters, results) = self.into_parts();
        reporters.emit(progress, |r| r.on_job_end(&results))?;
        outcome
    }

    /// The reporters and the counted results, for a job that reports its end itself.
    pub(crate) fn into_parts(self) -> (Reporters, Vec<TestResult>) {
        (self.reporters, self.results)
    }
}

impl JobSink<anyhow::Error> for ReportingSink<'_> {
    fn event(&mut self, event: JobEvent<'_>) -> Result<()> {
        match event {
            JobEvent::Progress(what) => self.progress.set_current(what),
            JobEvent::Section(title) => self.reporters.emit(self.progress, |r| r.on_section(title))?,
            JobEvent::TestStart(spec) => {
                let mut client = self.plan.client.clone();
                client.spec = spec.clone();
                let info = crate::single_run::client_test_info(&client);
                self.reporters.emit(self.progress, |r| r.on_start(&info))?;
            }
            JobEvent::Result(result) => {
                self.reporters.emit(self.progress, |r| r.on_finish(result))?;
                self.results.push(result.clone());
            }
            // Shown as it ran (a search's probe), not counted: the job's end settles that.
            JobEvent::Uncounted(result) => self.reporters.emit(self.progress, |r| r.on_finish(result))?,
            JobEvent::Skipped(why) => self.progress.suspend(|| eprintln!("netchar: {why}")),
        }
        Ok(())
    }
}

/// Runs one test of a job: `plan` with the job's spec, waiting up to 5 s for a server still
/// closing the job's previous test, the target's console read around it and, when `step`,
/// the `--step-cmd` around it (its record in the result). A test that ends in an error is one.
fn run_test(plan: &TcpPlan, spec: &TestSpec, step: bool, stop: &StopFlag) -> Result<TestResult> {
    let mut p = plan.clone();
    p.client.spec = spec.clone();
    p.client.busy_wait = p.client.busy_wait.max(std::time::Duration::from_secs(5));
    let step = step.then(|| p.step.begin(&p.client));
    let mut run = crate::console::around(&p, stop, || client::run(&p.client, stop, &mut |_| {}))?;
    if let Some(step) = step {
        step.end(run.result.as_mut());
    }
    match (run.result, run.error) {
        (Some(result), None) => Ok(result),
        (_, Some(ClientError::Interrupted)) => anyhow::bail!("interrupted"),
        (_, Some(e)) => Err(e.into()),
        (None, None) => anyhow::bail!("the test produced no result"),
    }
}

/// The runner of a job's tests over `plan`: each a step of the job.
pub(crate) fn runner<'a>(plan: &'a TcpPlan, stop: &'a StopFlag) -> impl FnMut(&TestSpec) -> Result<TestResult> + 'a {
    move |spec| run_test(plan, spec, true, stop)
}

/// `netchar suite bwsweep HOST --from R --to R --step R`: the flags to the sweep, then the
/// engine's job over the suite's UDP test; per rate the achieved rate, loss and jitter, and
/// the knee marked in the step's record as in the table.
pub(crate) fn bwsweep_suite(a: &BwsweepSuiteArgs, figures: &FigureFiles, stop: &StopFlag) -> Result<u8> {
    use netchar_model::units::parse_bit_rate;
    let rate = |flag: &str, v: &str| parse_bit_rate(v).map_err(|e| anyhow::anyhow!("{flag} {v}: {e}"));
    let (from, to, step) = (rate("--from", &a.from)?, rate("--to", &a.to)?, rate("--step", &a.step)?);
    let secs = crate::flags::seconds("-t", &a.duration)?;
    let sweep = RateSweep { from, to, step, knee_loss_percent: knee_loss_percent(&a.knee_loss)? };
    let tests = sweep.tests()?;
    let udp = crate::args::UdpArgs::for_suite(&a.target, secs);
    let mut plan = crate::plan::TcpPlan::from_udp_args(&udp)?;
    plan.console = crate::plan::console_source(&a.target.console_args)?;
    plan.step = crate::hooks::StepCommand::new(crate::hooks::UserCommand::of_step(&a.target.step)?);
    let progress = Progress::start(a.target.json, true, trial_length(&plan).map(|t| t * tests as u32));
    let table = SweepTableReporter::new(to).with_knee_loss(sweep.knee_loss_percent);
    let mut sink = ReportingSink::new(&plan, suite_reporters(a.target.json, Box::new(table), figures), &progress);
    let loss = netchar_report::sweep::step_loss_percent;
    let swept = rate_sweep::run(&plan.client.spec, &sweep, stop, loss, runner(&plan, stop), &mut sink);
    sink.end(swept).map(|()| crate::exit::OK)
}

/// The TCP and UDP plans a block-size suite varies: this server, `seconds` per test, no
/// intervals, the suite's console.
pub(crate) fn block_size_plans(target: &SuiteTarget, seconds: f64) -> Result<(TcpPlan, TcpPlan)> {
    let mut udp = TcpPlan::from_udp_args(&crate::args::UdpArgs::for_suite(target, seconds))?;
    udp.console = crate::plan::console_source(&target.console_args)?;
    // One step count for both protocols' steps.
    udp.step = crate::hooks::StepCommand::new(crate::hooks::UserCommand::of_step(&target.step)?);
    let mut tcp = udp.clone();
    tcp.client.spec = netchar_model::TestSpec {
        end: udp.client.spec.end,
        interval_seconds: 0.0,
        ..netchar_model::TestSpec::tcp_default()
    };
    Ok((tcp, udp))
}

/// A list of block sizes, comma-separated, in bytes or NUMk (NUM × 1024, as netio's and
/// stackthru's sizes are written), each from 1 to `max`.
pub(crate) fn size_list(flag: &str, text: &str, max: u64) -> Result<Vec<u64>> {
    text.split(',')
        .map(|item| {
            let t = item.trim();
            let (num, scale) = t.strip_suffix(['k', 'K']).map_or((t, 1), |n| (n, 1024));
            let n: u64 =
                num.parse().map_err(|_| anyhow::anyhow!("{flag} {text}: {t:?} is not a size in bytes or NUMk"))?;
            let size = n.saturating_mul(scale);
            anyhow::ensure!((1..=max).contains(&size), "{flag} {text}: {t} is not between 1 and {max} bytes");
            Ok(size)
        })
        .collect()
}

/// `netchar udp --find-max-rate`: the engine's search between 0 and the rate an unlimited
/// probe reaches (or -b), for the highest rate with loss ≤ `loss_percent`. The trials go
/// through the reporters: the trial table, or with `--json` one array of the trials' results.
/// Exit status 1 when no rate passed.
pub(crate) fn find_max_rate(plan: &TcpPlan, loss_percent: f64, figures: &FigureFiles, stop: &StopFlag) -> Result<u8> {
    // Untimed: how many trials the search takes is what it finds out.
    let mut progress = Progress::start(plan.output.json, true, None);
    let table = Box::new(MaxRateTableReporter::new(loss_percent));
    // The figure files keep the trials, not the probe: the job's end settles them.
    let reporters = suite_reporters(plan.output.json, table, figures);
    let ceiling = match plan.client.spec.udp.as_ref().map(|u| u.rate) {
        Some(UdpRate::BitsPerSecond(b)) if plan.explicit_rate => Ceiling::Given(b),
        _ => Ceiling::Probe,
    };
    let judge = |r: &TestResult| match max_rate::verdict(r, loss_percent) {
        Verdict::Pass => TrialVerdict::Pass,
        Verdict::SenderStalled => TrialVerdict::SenderStalled,
        _ => TrialVerdict::Fail,
    };
    // The probe is no step of the search: `--step-cmd` runs around the trials only.
    let run = |spec: &TestSpec, test| run_test(plan, spec, test == SearchTest::Trial, stop);
    let mut sink = ReportingSink::new(plan, reporters, &progress);
    let searched = search::run(&plan.client.spec, ceiling, stop, judge, run, &mut sink);
    let (mut reporters, results) = sink.into_parts();
    // The found rate's line prints after the progress line is gone.
    progress.finish();
    reporters.emit(&progress, |r| r.on_job_end(&results))?;
    let found = searched?;
    Ok(if found.is_some() { crate::exit::OK } else { crate::exit::GATE })
}

/// A rate sweep's knee threshold, `--knee-loss PCT`: a percentage from 0 to 100, with or
/// without its `%`.
fn knee_loss_percent(text: &str) -> Result<f64> {
    let pct = text.trim().trim_end_matches('%').trim().parse::<f64>().ok().filter(|p| (0.0..100.0).contains(p));
    pct.ok_or_else(|| anyhow::anyhow!("--knee-loss {text}: expected a loss share from 0 to under 100%, like 0.1%"))
}

/// One trial's length, if timed: the progress line's estimate of what is left.
pub(crate) fn trial_length(plan: &TcpPlan) -> Option<std::time::Duration> {
    match plan.client.spec.end {
        EndCondition::Seconds(s) => Some(std::time::Duration::from_secs_f64(s)),
        EndCondition::Bytes(_) => None,
    }
}

/// Runs one variant of `base` (a TCP or UDP plan) as a step of its job, its start and result
/// through `reporters`; returns its result.
pub(crate) fn run_variant(
    base: &TcpPlan,
    adjust: impl FnOnce(&mut netchar_model::TestSpec),
    stop: &StopFlag,
    reporters: &mut Reporters,
    progress: &Progress,
) -> Result<TestResult> {
    let mut spec = base.client.spec.clone();
    spec.interval_seconds = 0.0;
    adjust(&mut spec);
    spec.validate()?;
    let mut client = base.client.clone();
    client.spec = spec.clone();
    reporters.emit(progress, |r| r.on_start(&crate::single_run::client_test_info(&client)))?;
    let r = run_test(base, &spec, true, stop)?;
    reporters.emit(progress, |rep| rep.on_finish(&r))?;
    Ok(r)
}

/// The path MTU towards the server, as the kernel holds it for a UDP socket connected there
/// (connecting sends nothing), and whether the path is IPv6; None where it cannot be learned.
fn path_mtu(target: &SuiteTarget) -> Option<(u32, bool)> {
    use std::net::ToSocketAddrs;
    use std::os::fd::AsFd;
    let (host, in_host) = crate::plan::split_host(&target.host).ok()?;
    // The port does not matter to the route; the data's would be any.
    let addr = (host.as_str(), target.port.or(in_host).unwrap_or(9)).to_socket_addrs().ok()?.next()?;
    let sock = std::net::UdpSocket::bind(if addr.is_ipv6() { "[::]:0" } else { "0.0.0.0:0" }).ok()?;
    sock.connect(addr).ok()?;
    let mtu = netchar_sys::ip::path_mtu(sock.as_fd(), addr.is_ipv6()).ok()?;
    Some((mtu, addr.is_ipv6()))
}

/// `netchar suite sizes`: the flags to the TCP and UDP tests and the sizes the path takes,
/// then the engine's block-size job (stackthru's sweep: real and system time, MB/s (2^20),
/// Mbit/s (10^6) and frames/s per size; with -n, a transfer of that many bytes per size).
pub(crate) fn sizes_suite(a: &SizesSuiteArgs, figures: &FigureFiles, stop: &StopFlag) -> Result<u8> {
    let secs = crate::flags::seconds("-t", a.duration.as_deref().unwrap_or("2"))?;
    let bytes = match &a.bytes {
        None => None,
        Some(b) => {
            let n = netchar_model::units::parse_bytes(b).map_err(|e| anyhow::anyhow!("-n {b}: {e}"))?;
            anyhow::ensure!(n > 0, "-n {b}: at least 1 byte");
            Some(n)
        }
    };
    let listed = a.block.as_deref().map(|b| size_list("-b", b, netchar_model::spec::MAX_UDP_PAYLOAD)).transpose()?;
    let (mut tcp, mut udp) = block_size_plans(&a.target, secs)?;
    if let Some(n) = bytes {
        tcp.client.spec.end = EndCondition::Bytes(n);
        udp.client.spec.end = EndCondition::Bytes(n);
    }
    let path = path_mtu(&a.target);
    let lists = sizes::size_lists(listed.as_deref(), path.map(|p| p.0), path.is_some_and(|p| p.1));
    let tests = (lists.tcp.len() + lists.udp.len()) as u32;
    let progress = Progress::start(a.target.json, true, trial_length(&tcp).map(|t| t * tests));
    if let (Some((mtu, _)), false) = (path, lists.udp_above_mtu.is_empty()) {
        let skipped: Vec<String> = lists.udp_above_mtu.iter().map(u64::to_string).collect();
        progress.suspend(|| {
            eprintln!(
                "netchar: suite sizes: UDP {} bytes skipped: larger datagrams than the path's MTU of {mtu} bytes",
                skipped.join(", ")
            )
        });
    }
    let reporters = suite_reporters(a.target.json, Box::<SizesTableReporter>::default(), figures);
    // The two plans differ in their spec alone: one runner, one step count, for both.
    let mut sink = ReportingSink::new(&tcp, reporters, &progress);
    let swept = sizes::run(&tcp.client.spec, &udp.client.spec, &lists, stop, runner(&tcp, stop), &mut sink);
    sink.end(swept).map(|()| crate::exit::OK)
}

/// A suite's reporters: its classic `table`, or with `--json` one array of every result; and
/// the figure files'.
pub(crate) fn suite_reporters(
    json: bool,
    table: Box<dyn netchar_report::Reporter>,
    figures: &FigureFiles,
) -> Reporters {
    if json { Reporters::of(Box::new(JobJsonReporter)) } else { Reporters::of(table) }.with_figures(figures)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_knee_threshold_is_a_percentage() {
        assert_eq!(knee_loss_percent("0.1%").unwrap(), 0.1);
        assert_eq!(knee_loss_percent("2").unwrap(), 2.0);
        assert_eq!(knee_loss_percent("0").unwrap(), 0.0);
        for bad in ["", "x%", "-1%", "100%", "NaN"] {
            let e = knee_loss_percent(bad).unwrap_err().to_string();
            assert!(e.starts_with(&format!("--knee-loss {bad}: ")), "{e}");
        }
    }

    #[test]
    fn size_lists_take_bytes_and_netios_k() {
        assert_eq!(size_list("-b", "256, 1k,1440", 65536).unwrap(), [256, 1024, 1440]);
        for bad in ["", "1k,", "x", "0", "65k"] {
            let e = size_list("-b", bad, 65536).unwrap_err().to_string();
            assert!(e.starts_with(&format!("-b {bad}: ")), "{e}");
        }
    }
}
