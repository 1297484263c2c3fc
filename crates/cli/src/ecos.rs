//! `netchar suite ecos` over netchar's own protocol (a `netchar server` or the C responder):
//! the eCos nc6_test_master sequence, printed as `--proto nc6-test` prints it. Each test of
//! the sequence (wire::nc_test::SuiteShape, the same for both modes) is a netchar test; its
//! result becomes the stock master's lines (`Start UDP send [640,1024] - no delays`, `UDP send
//! - 640 bufs of ...`, `   slave sent 640, recvd 0`) and netchar's figures line, shown by the
//! reporter of the nc_test mode. The words are nc_test's, named from the server's ("slave's")
//! side: in "send" the server sends (`-R`), in "recv" it receives.
//!
//! The tests use what the C responder serves: echo with nc_test's pattern, one-way TCP and UDP
//! of a counted number of bytes (`-n`, unpaced), `--server-load` and `--idle` where its platform
//! has the hooks. A server that refuses the load or the idle measurement has that section
//! skipped with one line, as an nc_test slave's NAK skips it.

use crate::args::EcosSuiteArgs;
use crate::figure_files::FigureFiles;
use crate::progress::Progress;
use crate::reporters::Reporters;
use anyhow::{bail, Result};
use clap::Parser;
use netchar_engine::client::{self, ClientError};
use netchar_engine::StopFlag;
use netchar_model::{Endpoint, Role, TestResult};
use netchar_report::json::JobJsonReporter;
use netchar_report::nc_test_lines::{figures_line, MasterFigures, NcTestLinesReporter, RttUs};
use netchar_wire::nc_test::{self as wire, Kind, Pause, Sequence, SuiteShape, NOTE_PREFIX};
use std::time::Duration;

/// One test of the sequence, as nc_test names it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct EcosTest {
    kind: Kind,
    nbufs: u32,
    buflen: u32,
    pause: Pause,
}

/// The section a test is in: what the server runs besides it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Section {
    /// No load, master at 100%.
    Plain,
    /// The slave's compute load: the server's background load, in percent (`--server-load`).
    SlaveCompute(u32),
    /// The master loads (pauses): both ends' idle shares (`--idle`).
    MasterIdle,
}

impl EcosTest {
    /// The netchar command of the test against `host` (nc_test's kinds named from the server's
    /// side: its send is the client's `-R`).
    fn argv(&self, host: &str, section: Section) -> Vec<String> {
        let (n, len) = (self.nbufs, self.buflen);
        let pattern = match self.pause.ticks {
            0 => format!("{n}x{len}"),
            ticks => format!("{n}x{len},{}@{}ms", self.pause.threshold, ticks * 10),
        };
        let bytes = (u64::from(n) * u64::from(len)).to_string();
        let (len, pattern) = (len.to_string(), pattern.as_str());
        let load = match section {
            Section::SlaveCompute(pct) => pct.to_string(),
            _ => String::new(),
        };
        let mut v: Vec<&str> = match self.kind {
            Kind::UdpEcho => vec!["echo", host, "--udp", "--pattern", pattern],
            Kind::TcpEcho => vec!["echo", host, "--pattern", pattern],
            Kind::UdpSend => vec!["udp", host, "-R", "-n", &bytes, "-l", &len, "-b", "0"],
            Kind::UdpRecv => vec!["udp", host, "-n", &bytes, "-l", &len, "-b", "0"],
            Kind::TcpSend => vec!["tcp", host, "-R", "-n", &bytes, "-l", &len],
            _ => vec!["tcp", host, "-n", &bytes, "-l", &len],
        };
        if !self.kind.slave_receives() || !self.kind.slave_sends() {
            v.extend(["-i", "0"]);
        }
        match section {
            Section::Plain => {}
            Section::SlaveCompute(_) => v.extend(["--server-load", &load]),
            Section::MasterIdle => v.push("--idle"),
        }
        std::iter::once("netchar").chain(v).map(String::from).collect()
    }
}

/// `netchar suite ecos HOST` over netchar's own protocol: the sections of nc6_test_master in
/// the shape of `--proto nc6-test` (`--quick`: its short form).
pub(crate) fn run(a: &EcosSuiteArgs, figures: &FigureFiles, stop: &StopFlag) -> Result<u8> {
    if let Some(p) = a.nc_test_data_port {
        bail!("suite ecos --nc-test-data-port {p}: with --proto nc-test or nc6-test only (netchar's own protocol needs no data port)");
    }
    let host = match a.target.port {
        Some(p) => {
            let h = crate::plan::split_host(&a.target.host).map(|(h, _)| h).unwrap_or_else(|_| a.target.host.clone());
            if h.contains(':') {
                format!("[{h}]:{p}")
            } else {
                format!("{h}:{p}")
            }
        }
        None => a.target.host.clone(),
    };
    let shape = SuiteShape::new(a.quick);
    // Untimed: the tests run counts of buffers.
    let progress = Progress::start(a.target.json, true, None);
    let reporter: Box<dyn netchar_report::Reporter> =
        if a.target.json { Box::new(JobJsonReporter) } else { Box::new(NcTestLinesReporter) };
    let mut suite = NativeSuite {
        host,
        connect_timeout: a.target.connect_timeout.clone(),
        console: crate::plan::console_source(&a.target.console_args)?,
        reporters: Reporters::of(reporter).with_figures(figures),
        progress,
        results: Vec::new(),
        pending: Vec::new(),
        stop,
        steps: crate::hooks::StepCommand::new(crate::hooks::UserCommand::of_step(&a.target.step)?),
    };
    let outcome = suite.sequence(&shape);
    suite.progress.finish();
    // The results so far also after a failed test: the error follows them.
    suite.reporters.emit(&suite.progress, |rep| rep.on_job_end(&suite.results))?;
    outcome?;
    Ok(crate::exit::OK)
}

/// The native suite as it runs: the reporters, the results so far, and the section lines
/// held back until the section's first test shows whether the server runs it.
struct NativeSuite<'a> {
    host: String,
    /// `--connect-timeout`, passed on to every test.
    connect_timeout: Option<String>,
    /// `--console`, `--console-cmd`: read around each test.
    console: Option<netchar_sys::console::ConsoleSource>,
    reporters: Reporters,
    progress: Progress,
    results: Vec<TestResult>,
    pending: Vec<String>,
    stop: &'a StopFlag,
    /// `--step-cmd`: each test is a step.
    steps: crate::hooks::StepCommand,
}

/// A test's outcome: it ran, or the server refused what its section asks (the section is
/// skipped, as after a slave's NAK).
enum Ran {
    Done,
    Refused,
}

impl NativeSuite<'_> {
    fn sequence(&mut self, shape: &SuiteShape) -> Result<()> {
        if shape.quick {
            self.line(&shape.quick_note())?;
        }
        self.line(wire::NO_LOAD_HEADING)?;
        let all = Sequence::Nc6 { tcp: true, udp: true, slave_loads: true, master_loads: true };
        for (kind, nbufs, buflen) in SuiteShape::no_load_tests(all) {
            self.test(EcosTest { kind, nbufs, buflen, pause: Pause::default() }, Section::Plain)?;
        }
        self.pending.push(wire::SLAVE_LOADS_HEADING.into());
        'loads: for &load in shape.loads {
            self.pending.push(wire::slave_load_line(load));
            for kind in [Kind::UdpEcho, Kind::TcpEcho] {
                let t = EcosTest { kind, nbufs: shape.load_bufs, buflen: 1024, pause: Pause::default() };
                if let Ran::Refused = self.test(t, Section::SlaveCompute(load))? {
                    self.skipped("--server-load", "the slave compute load section is skipped")?;
                    break 'loads;
                }
            }
        }
        self.pending.push(wire::MASTER_LOADS_HEADING.into());
        for &pause in shape.pauses {
            for kind in [Kind::UdpEcho, Kind::TcpEcho] {
                let t = EcosTest { kind, nbufs: shape.load_bufs, buflen: 1024, pause };
                if let Ran::Refused = self.test(t, Section::MasterIdle)? {
                    return self.skipped("--idle", "the master load (idle) section is skipped");
                }
            }
        }
        Ok(())
    }

    /// A line now, after the lines held back.
    fn line(&mut self, line: &str) -> Result<()> {
        let mut lines = std::mem::take(&mut self.pending);
        lines.push(line.to_string());
        for l in &lines {
            self.reporters.emit(&self.progress, |rep| rep.on_line(l))?;
        }
        Ok(())
    }

    /// The section's lines held back are dropped: one line says it was skipped.
    fn skipped(&mut self, flag: &str, what: &str) -> Result<()> {
        self.pending.clear();
        self.line(&format!("{NOTE_PREFIX}the server refused {flag}: {what}"))
    }

    /// Runs `t`, then shows its lines and figures.
    fn test(&mut self, t: EcosTest, section: Section) -> Result<Ran> {
        if self.stop.is_raised() {
            bail!("interrupted");
        }
        let label = wire::start_line(t.kind, t.nbufs, t.buflen, t.pause);
        self.progress.set_current(label.trim_start_matches("Start "));
        let mut argv = t.argv(&self.host, section);
        if let Some(c) = &self.connect_timeout {
            argv.extend(["--connect-timeout".into(), c.clone()]);
        }
        let cli = crate::args::Cli::try_parse_from(&argv)
            .map_err(|e| anyhow::anyhow!("{}", e.to_string().lines().next().unwrap_or("")))?;
        let plans = match cli.command {
            Some(crate::args::Command::Echo(x)) => crate::plan::TcpPlan::from_echo_args(&x)?,
            Some(crate::args::Command::Tcp(x)) => vec![crate::plan::TcpPlan::from_args(&x)?],
            Some(crate::args::Command::Udp(x)) => vec![crate::plan::TcpPlan::from_udp_args(&x)?],
            _ => bail!("internal: {argv:?} is not a test"),
        };
        for mut p in plans {
            p.client.busy_wait = Duration::from_secs(5);
            p.console = self.console.clone();
            let step = self.steps.begin(&p.client);
            let mut run = crate::console::around(&p, self.stop, || client::run(&p.client, self.stop, &mut |_| {}))?;
            step.end(run.result.as_mut());
            if let (None, Some(e)) = (&run.result, &run.error) {
                if section != Section::Plain && refused_section(e, section) {
                    return Ok(Ran::Refused);
                }
            }
            if let Some(e) = run.error {
                bail!("{}: {e}", t.kind.name());
            }
            let r = run.result.ok_or_else(|| anyhow::anyhow!("{}: no result", t.kind.name()))?;
            let (lines, figures) = master_view(&t, &r, section);
            self.line(&label)?;
            for l in &lines {
                self.line(l)?;
            }
            self.reporters.emit(&self.progress, |rep| rep.on_line(&figures_line(&figures)))?;
            self.reporters.emit(&self.progress, |rep| rep.on_finish(&r))?;
            self.results.push(r);
        }
        Ok(Ran::Done)
    }
}

/// The server rejected the test for the flag its section adds (the C responder without the
/// platform's load or idle hook names it in its reason, the only place the protocol has for it).
fn refused_section(e: &ClientError, section: Section) -> bool {
    let flag = match section {
        Section::SlaveCompute(_) => "--server-load",
        Section::MasterIdle => "--idle",
        Section::Plain => return false,
    };
    matches!(e, ClientError::Rejected { reason } if reason.contains(flag))
}

/// Buffers of `len` bytes that `by` counted on its streams of `role`: datagrams for UDP,
/// bytes / len for TCP. None when that end reported no such stream.
fn buffers(r: &TestResult, by: Endpoint, role: Role, len: u32) -> Option<u32> {
    let mut streams = r.streams.iter().filter(|s| s.measured_by == by && s.role == role).peekable();
    streams.peek()?;
    let n: u64 = streams
        .map(|s| match (role, &s.udp_sent, &s.udp_received) {
            (Role::Sender, Some(u), _) => u.packets,
            (Role::Receiver, _, Some(u)) => u.packets,
            _ => s.bytes / u64::from(len.max(1)),
        })
        .sum();
    Some(n.min(u64::from(u32::MAX)) as u32)
}

/// The client's time on its streams of `role`: the stock master's time from its first buffer
/// to its last.
fn client_seconds(r: &TestResult, role: Role) -> f64 {
    r.streams
        .iter()
        .filter(|s| s.measured_by == Endpoint::Client && s.role == role)
        .map(|s| s.seconds)
        .fold(0.0, f64::max)
}

/// The stock master's lines of a netchar test (its result line and the slave's counts) and
/// netchar's figures of it, counted as the nc_test master counts: `bufs` is what the master
/// sent and received, the slave's counts are the server's record of its streams, `lost` what
/// the master waited for in vain.
fn master_view(t: &EcosTest, r: &TestResult, section: Section) -> (Vec<String>, MasterFigures) {
    let len = t.buflen;
    let mut f = MasterFigures {
        slave_receives: t.kind.slave_receives(),
        slave_sends: t.kind.slave_sends(),
        ..Default::default()
    };
    let (lost, seconds);
    if t.kind.slave_receives() && t.kind.slave_sends() {
        // Echo: each transaction is a buffer there and back. The server answers every buffer
        // it reads, so what it read is also what it sent.
        let rr = r.summary.rr.clone().unwrap_or_default();
        let answered = rr.transactions.min(u64::from(u32::MAX)) as u32;
        f.received = answered;
        f.sent = answered.saturating_add(rr.lost.min(u64::from(u32::MAX)) as u32);
        f.out_of_sequence = rr.late.min(u64::from(u32::MAX)) as u32;
        f.slave_counts = buffers(r, Endpoint::Server, Role::Receiver, len).map(|n| (n, n));
        let l = &rr.latency_us;
        f.rtt_us =
            (rr.transactions > 0).then_some(RttUs { min: l.min, p50: l.p50, p90: l.p90, p99: l.p99, max: l.max });
        lost = f.sent - f.received;
        seconds = client_seconds(r, Role::Sender);
    } else if t.kind.slave_sends() {
        // send: the server sends, the master receives.
        f.received = buffers(r, Endpoint::Client, Role::Receiver, len).unwrap_or(0);
        let slave_sent = buffers(r, Endpoint::Server, Role::Sender, len);
        f.slave_counts = slave_sent.map(|n| (n, 0));
        f.out_of_sequence = r
            .summary
            .down
            .as_ref()
            .and_then(|d| d.receiver.udp_received.as_ref())
            .map_or(0, |u| u.out_of_order.min(u64::from(u32::MAX)) as u32);
        lost = slave_sent.unwrap_or(t.nbufs).saturating_sub(f.received);
        seconds = client_seconds(r, Role::Receiver);
    } else {
        // recv: the master sends, the server receives.
        f.sent = buffers(r, Endpoint::Client, Role::Sender, len).unwrap_or(0);
        f.slave_counts = buffers(r, Endpoint::Server, Role::Receiver, len).map(|n| (0, n));
        lost = 0;
        seconds = client_seconds(r, Role::Sender);
    }
    let cpu = |c: &Option<netchar_model::CpuUsage>| c.as_ref().and_then(|c| c.idle_pct);
    if let Section::SlaveCompute(_) = section {
        f.slave_load_pct = r.cpu.remote.as_ref().and_then(|c| c.background_load_pct);
    }
    if section == Section::MasterIdle {
        f.idle_pct = (cpu(&r.cpu.remote), cpu(&r.cpu.local));
    }
    let total = f.sent.saturating_add(f.received);
    let elapsed = Duration::from_secs_f64(seconds.max(0.0));
    let mut lines = vec![wire::result_line(t.kind.name(), total, len, elapsed, lost, f.out_of_sequence)];
    lines.extend(under_one_tick(total, len, seconds));
    if let Some((ns, nr)) = f.slave_counts {
        lines.push(wire::slave_counts_line(ns, nr));
    } else {
        lines.push("No results record sent".into());
    }
    (lines, f)
}

/// nc_test's clock counts 10 ms ticks, so the stock line of a test shorter than one reads
/// 0.00 seconds and `inf KB/S`, as nc_test_master printed it. The line under it says so, with
/// the rate over the time netchar measured.
fn under_one_tick(total: u32, len: u32, seconds: f64) -> Option<String> {
    if seconds >= 0.01 {
        return None;
    }
    let bytes = f64::from(total) * f64::from(len);
    let measured = if seconds > 0.0 {
        format!(
            "measured over {:.3} ms: {:.2} KB/S - {:.4} Mbit/S",
            seconds * 1e3,
            bytes / seconds / 1024.0,
            bytes * 8.0 / seconds / 1e6
        )
    } else {
        "no time measured".into()
    };
    Some(format!("   under one tick of nc_test's 10 ms clock: the line above reads 0.00 seconds and an inf rate, as nc_test printed it; {measured}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A test shorter than nc_test's clock tick keeps the stock line (`inf KB/S`) and gets the
    /// rate netchar measured under it; a longer one gets no such line.
    #[test]
    fn a_test_under_one_tick_says_why_the_rate_is_inf_and_what_was_measured() {
        let stock = wire::result_line("UDP recv", 640, 1024, Duration::from_secs_f64(0.004), 0, 0);
        assert!(stock.contains("0.00 seconds - inf KB/S"), "{stock}");
        let under = under_one_tick(640, 1024, 0.004).unwrap();
        assert_eq!(
            under,
            "   under one tick of nc_test's 10 ms clock: the line above reads 0.00 seconds and an inf rate, as nc_test printed it; measured over 4.000 ms: 160000.00 KB/S - 1310.7200 Mbit/S"
        );
        assert!(under_one_tick(640, 1024, 0.0).unwrap().ends_with("no time measured"));
        assert_eq!(under_one_tick(640, 1024, 0.01), None);
    }

    fn t(kind: Kind) -> EcosTest {
        EcosTest { kind, nbufs: 640, buflen: 1024, pause: Pause::default() }
    }

    /// nc_test's words: "send" is the server sending (-R), "recv" the server receiving; no
    /// --pattern over UDP (the C responder refuses it): counted bytes instead.
    #[test]
    fn each_kind_is_the_netchar_test_of_the_same_direction() {
        let argv = |kind, section| t(kind).argv("h", section)[1..].join(" ");
        assert_eq!(argv(Kind::UdpSend, Section::Plain), "udp h -R -n 655360 -l 1024 -b 0 -i 0");
        assert_eq!(argv(Kind::UdpRecv, Section::Plain), "udp h -n 655360 -l 1024 -b 0 -i 0");
        assert_eq!(argv(Kind::TcpSend, Section::Plain), "tcp h -R -n 655360 -l 1024 -i 0");
        assert_eq!(argv(Kind::TcpRecv, Section::Plain), "tcp h -n 655360 -l 1024 -i 0");
        assert_eq!(argv(Kind::UdpEcho, Section::SlaveCompute(20)), "echo h --udp --pattern 640x1024 --server-load 20");
        let paused = EcosTest { pause: Pause { ticks: 5, threshold: 10 }, ..t(Kind::TcpEcho) };
        assert_eq!(paused.argv("h", Section::MasterIdle)[1..].join(" "), "echo h --pattern 640x1024,10@50ms --idle");
    }

    /// A server without the load or idle hook (the C responder on such a platform) rejects
    /// the test naming the flag: that section is skipped; any other failure is an error.
    #[test]
    fn only_the_sections_flag_refused_skips_the_section() {
        let rejected = |why: &str| ClientError::Rejected { reason: why.into() };
        let no_load =
            rejected("--server-load is not supported by this netchar-responder build (no background-load hook)");
        assert!(refused_section(&no_load, Section::SlaveCompute(10)));
        assert!(!refused_section(&no_load, Section::MasterIdle));
        assert!(refused_section(&rejected("--idle is not supported by this build"), Section::MasterIdle));
        assert!(!refused_section(&rejected("too many streams"), Section::SlaveCompute(0)));
        assert!(!refused_section(&ClientError::Stream("--idle".into()), Section::MasterIdle));
        // The server's own error during a test is no rejection, whatever its words.
        let ended = ClientError::Server("the server rejected the test: --idle".into());
        assert!(!refused_section(&ended, Section::MasterIdle));
    }
}
