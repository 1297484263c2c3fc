//! `netchar suite ecos` over netchar's own protocol (a `netchar server` or the C responder),
//! and how the eCos sequence's tests are shown in either mode: the flags to the engine's job
//! (netchar_engine::jobs::ecos, which runs the sequence), and its tests as the stock master's
//! lines (`Start UDP send [640,1024] - no delays`, `UDP send - 640 bufs of ...`, `   slave
//! sent 640, recvd 0`) with netchar's figures line under them, through the reporters
//! ([`MasterLines`], the sink of both modes: nc_test.rs runs the master against a slave).
//! The words are nc_test's, named from the server's ("slave's") side: in "send" the server
//! sends (`-R`), in "recv" it receives.

use crate::args::EcosSuiteArgs;
use crate::figure_files::FigureFiles;
use crate::progress::Progress;
use crate::reporters::Reporters;
use anyhow::{bail, Result};
use netchar_engine::client;
use netchar_engine::jobs::ecos::{run_native, EcosSink, EcosTest, Section};
use netchar_engine::StopFlag;
use netchar_model::{Endpoint, Role, TestResult};
use netchar_report::json::JobJsonReporter;
use netchar_report::nc_test_lines::{figures_line, MasterFigures, NcTestLinesReporter, RttUs};
use netchar_wire::nc_test::{self as wire, MasterReport, SuiteShape};
use std::time::Duration;

/// `netchar suite ecos HOST` over netchar's own protocol (jobs::ecos::run_native): the
/// sections of nc6_test_master in the shape of `--proto nc6-test` (`--quick`: its short form),
/// each test on the suite's server with its console and step commands.
pub(crate) fn run(a: &EcosSuiteArgs, figures: &FigureFiles, stop: &StopFlag) -> Result<u8> {
    if let Some(p) = a.nc_test_data_port {
        bail!("suite ecos --nc-test-data-port {p}: with --proto nc-test or nc6-test only (netchar's own protocol needs no data port)");
    }
    // The suite's server, port and connect timeout; each test sets its own spec.
    let mut base = crate::plan::TcpPlan::from_udp_args(&crate::args::UdpArgs::for_suite(&a.target, 1.0))?;
    base.client.busy_wait = Duration::from_secs(5);
    base.console = crate::plan::console_source(&a.target.console_args)?;
    let steps = crate::hooks::StepCommand::new(crate::hooks::UserCommand::of_step(&a.target.step)?);
    // Untimed: the tests run counts of buffers.
    let mut progress = Progress::start(a.target.json, true, None);
    let reporter: Box<dyn netchar_report::Reporter> =
        if a.target.json { Box::new(JobJsonReporter) } else { Box::new(NcTestLinesReporter) };
    let mut reporters = Reporters::of(reporter).with_figures(figures);
    let mut sink = MasterLines { reporters: &mut reporters, progress: &progress };
    let run = run_native(&SuiteShape::new(a.quick), stop, &mut sink, &mut |spec| {
        let mut p = base.clone();
        p.client.spec = spec;
        let step = steps.begin(&p.client);
        // The console's error with its causes, in one line.
        let mut run = crate::console::around(&p, stop, || client::run(&p.client, stop, &mut |_| {}))
            .map_err(|e| format!("{e:#}"))?;
        step.end(run.result.as_mut());
        Ok(run)
    });
    progress.finish();
    // The results so far also after a failed test: the error follows them.
    reporters.emit(&progress, |rep| rep.on_job_end(&run.results))?;
    if let Some(e) = run.error {
        return Err(e.into());
    }
    Ok(crate::exit::OK)
}

/// netchar's own figures of a test, for the line under its stock lines.
fn figures(r: &MasterReport) -> MasterFigures {
    MasterFigures {
        rtt_us: RttUs::of_samples(&r.rtts.iter().map(|d| d.as_secs_f64() * 1e6).collect::<Vec<_>>()),
        sent: r.sent,
        received: r.received,
        slave_receives: r.kind.slave_receives(),
        slave_sends: r.kind.slave_sends(),
        slave_counts: r.results.map(|x| (x.nsent, x.nrecvd)),
        out_of_sequence: r.seq_errors,
        bad: r.bad,
        ..Default::default()
    }
}

/// The master job's sink: its lines and each test's figures line through the reporters, the
/// test now running on the progress line.
pub(crate) struct MasterLines<'a> {
    pub(crate) reporters: &'a mut Reporters,
    pub(crate) progress: &'a Progress,
}

impl EcosSink for MasterLines<'_> {
    fn running(&mut self, what: &str) {
        self.progress.set_current(what);
    }
    fn line(&mut self, line: &str) -> std::io::Result<()> {
        self.reporters.emit(self.progress, |rep| rep.on_line(line))
    }
    fn master_test(&mut self, report: &MasterReport) -> std::io::Result<()> {
        self.line(&figures_line(&figures(report)))
    }
    fn native_test(&mut self, test: &EcosTest, section: Section, result: &TestResult) -> std::io::Result<()> {
        let (lines, figures) = master_view(test, result, section);
        for l in &lines {
            self.line(l)?;
        }
        self.line(&figures_line(&figures))?;
        self.reporters.emit(self.progress, |rep| rep.on_finish(result))
    }
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
pub(crate) fn master_view(t: &EcosTest, r: &TestResult, section: Section) -> (Vec<String>, MasterFigures) {
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
    lines.extend(wire::under_one_tick_line(total, len, elapsed));
    if let Some((ns, nr)) = f.slave_counts {
        lines.push(wire::slave_counts_line(ns, nr));
    } else {
        lines.push("No results record sent".into());
    }
    (lines, f)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The spec `netchar` builds from a command line, as the native suite once built each
    /// test's (an argument string parsed again): the typed spec of the engine's job must be
    /// the same test.
    fn parsed(argv: &str) -> netchar_model::TestSpec {
        use clap::Parser;
        let argv = std::iter::once("netchar").chain(argv.split(' '));
        let plans = match crate::args::Cli::try_parse_from(argv).unwrap().command {
            Some(crate::args::Command::Echo(x)) => crate::plan::TcpPlan::from_echo_args(&x).unwrap(),
            Some(crate::args::Command::Tcp(x)) => vec![crate::plan::TcpPlan::from_args(&x).unwrap()],
            Some(crate::args::Command::Udp(x)) => vec![crate::plan::TcpPlan::from_udp_args(&x).unwrap()],
            other => panic!("{other:?}"),
        };
        plans.into_iter().next().unwrap().client.spec
    }

    /// nc_test's words: "send" is the server sending (-R), "recv" the server receiving; no
    /// --pattern over UDP (the C responder refuses it): counted bytes instead. Each test of the
    /// job is the test of the netchar command that says the same.
    #[test]
    fn each_test_of_the_job_is_the_netchar_command_of_the_same_direction() {
        use wire::{Kind, Pause};
        let t = |kind| EcosTest { kind, nbufs: 640, buflen: 1024, pause: Pause::default() };
        let paused = EcosTest { pause: Pause { ticks: 5, threshold: 10 }, ..t(Kind::TcpEcho) };
        for (test, section, command) in [
            (t(Kind::UdpSend), Section::Plain, "udp h -R -n 655360 -l 1024 -b 0 -i 0"),
            (t(Kind::UdpRecv), Section::Plain, "udp h -n 655360 -l 1024 -b 0 -i 0"),
            (t(Kind::TcpSend), Section::Plain, "tcp h -R -n 655360 -l 1024 -i 0"),
            (t(Kind::TcpRecv), Section::Plain, "tcp h -n 655360 -l 1024 -i 0"),
            (t(Kind::UdpEcho), Section::Plain, "echo h --udp --pattern 640x1024"),
            (t(Kind::UdpEcho), Section::SlaveCompute(20), "echo h --udp --pattern 640x1024 --server-load 20"),
            (t(Kind::TcpEcho), Section::SlaveCompute(0), "echo h --pattern 640x1024 --server-load 0"),
            (paused, Section::MasterIdle, "echo h --pattern 640x1024,10@50ms --idle"),
        ] {
            assert_eq!(test.spec(section), parsed(command), "{command}");
        }
    }
}
