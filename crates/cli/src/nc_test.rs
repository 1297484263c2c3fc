//! `--proto nc-test` (and `nc6-test` for the suite): netchar as the master of an eCos
//! `nc_test_slave`. The tests map as the stock master names them, from the slave's side:
//!
//! | command | nc_test request |
//! |---|---|
//! | `netchar echo --proto nc-test HOST [--udp] --pattern NxSIZE[,BURST@GAP]` | TCP_ECHO / UDP_ECHO, N buffers of SIZE, pause GAP (10 ms ticks) after BURST received |
//! | `netchar tcp --proto nc-test HOST [-R] [-l SIZE] [-n BYTES]` | TCP_RECV (netchar sends) / TCP_SEND with -R |
//! | `netchar udp --proto nc-test HOST [-R] [--pattern NxSIZE]` | UDP_RECV / UDP_SEND with -R |
//! | `netchar suite ecos --proto nc-test HOST` | nc_test_master's sequence (`nc6-test`: nc6_test_master's) |
//!
//! Output: the stock master's lines as it printed them, then netchar's own figures for each
//! test (latency percentiles of the echoes, loss, out-of-sequence), through the reporters
//! (crates/report/src/nc_test_lines.rs); `--json` gives the results as one document (an object,
//! the suite an array), and the suite shows a progress line on a terminal.
//!
//! A single test is the master job of one test (`MasterPlan::Single`) run by the engine's
//! repeat job, as every client test is: `--warmup`, `--repeat`, `--save`, `--reset-cmd`,
//! `--console` around each run, then the statistics and the gates (`--expect`, `--baseline`)
//! over the counted runs.

use crate::args::{CommonArgs, EchoArgs, EcosSuiteArgs, TcpArgs, UdpArgs};
use crate::figure_files::FigureFiles;
use crate::plan::Output;
use crate::progress::Progress;
use crate::reporters::Reporters;
use anyhow::{bail, Result};
use netchar_engine::jobs::ecos::{master_sequence, run_master};
use netchar_engine::jobs::repeat::{Ended, Repeat, Run, RunOutcome};
use netchar_engine::peers::nc_test::{spec_for, MasterConfig, MasterPlan};
use netchar_engine::protocols::ProtoChoice;
use netchar_engine::StopFlag;
use netchar_model::{Pattern, TestResult};
use netchar_report::json::{JobJsonReporter, JsonReporter};
use netchar_report::nc_test_lines::NcTestLinesReporter;
use netchar_wire::nc_test::{self as wire, Kind, Pause, Sequence};
use std::net::{SocketAddr, ToSocketAddrs};

/// Does `--proto` run nc_test's master (netchar_engine::jobs::ecos::master_sequence)?
pub(crate) fn wanted(proto: &ProtoChoice) -> bool {
    master_sequence(proto.protocol()).is_some()
}

fn resolve(host: &str, port: Option<u16>, v4: bool, v6: bool) -> Result<SocketAddr> {
    let (name, in_host) = crate::plan::split_host(host).map_err(|e| anyhow::anyhow!("{host}: {e}"))?;
    let port = port.or(in_host).unwrap_or(wire::SLAVE_PORT);
    let addrs: Vec<SocketAddr> = (name.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| anyhow::anyhow!("{name}: cannot resolve: {e}"))?
        .filter(|a| (!v4 || a.is_ipv4()) && (!v6 || a.is_ipv6()))
        .collect();
    addrs.first().copied().ok_or_else(|| anyhow::anyhow!("{name}: no address of the family asked for"))
}

fn pause_of(p: &Pattern) -> Result<Pause> {
    let Some(burst) = p.burst else { return Ok(Pause::default()) };
    let ticks = (p.gap_seconds / wire::TICK.as_secs_f64()).round();
    if !(1.0..=100_000.0).contains(&ticks) || burst == 0 || burst > u64::from(u32::MAX) {
        bail!("--pattern: nc_test pauses in 10 ms ticks after 1 or more buffers (e.g. 10@10ms)");
    }
    Ok(Pause { ticks: ticks as u32, threshold: burst as u32 })
}

fn not_applicable(c: &CommonArgs) -> Result<()> {
    if c.time.is_some() || c.bidir || c.parallel != "1" || c.psk_file.is_some() || c.server_load.is_some() || c.idle {
        bail!("--proto nc-test: nc_test runs a count of buffers, one stream, one way or echoed, without authentication (-t, --bidir, -P, --psk-file, --server-load and --idle do not apply; the suite runs the slave's load and idle sections)");
    }
    if c.traffic.given() {
        bail!("--proto nc-test: --tos, --dscp, --flowlabel, --df, -B and --bind-dev are not applied by netchar's nc_test master (its own sockets), and nc_test carries none of them to the slave");
    }
    if c.payload.given() {
        bail!("--proto nc-test: the slave writes and reads its own buffers (--payload and --verify are netchar's own generator; use --proto echo or a netchar server)");
    }
    if !c.nft_counter.is_empty() {
        bail!("--proto nc-test: --nft-counter is not supported with nc_test yet; read the chain with the native protocol (--proto auto) or on its own");
    }
    Ok(())
}

fn counts(pattern: &Pattern) -> Result<(u32, u32)> {
    let [(n, size)] = pattern.sizes[..] else {
        bail!("--pattern: nc_test runs one buffer size per test, e.g. 640x1024");
    };
    if n == 0 || n > 1_000_000 || size > u64::from(wire::MAX_BUFLEN) {
        bail!("--pattern {n}x{size}: 1 to 1000000 buffers of at most {} bytes", wire::MAX_BUFLEN);
    }
    Ok((n as u32, size as u32))
}

/// `netchar echo --proto nc-test`.
pub(crate) fn echo(a: &EchoArgs, figures: &FigureFiles, stop: &StopFlag) -> Result<u8> {
    not_applicable(&a.common)?;
    let pattern = Pattern::parse(&a.pattern).map_err(|e| anyhow::anyhow!("--pattern {}: {e}", a.pattern))?;
    let (nbufs, buflen) = counts(&pattern)?;
    let kind = if a.udp { Kind::UdpEcho } else { Kind::TcpEcho };
    single(&a.common, kind, nbufs, buflen, pause_of(&pattern)?, figures, stop)
}

/// `netchar tcp --proto nc-test`.
pub(crate) fn tcp(a: &TcpArgs, figures: &FigureFiles, stop: &StopFlag) -> Result<u8> {
    not_applicable(&a.common)?;
    if a.bitrate.is_some() || a.window.is_some() || a.mss.is_some() || a.congestion.is_some() || a.zerocopy {
        bail!("--proto nc-test: the slave sets up its own sockets (-b, -w, -M, -C and --zerocopy do not apply)");
    }
    let buflen = match &a.length {
        None => 1024,
        Some(l) => netchar_model::units::parse_bytes(l).map_err(|e| anyhow::anyhow!("-l {l}: {e}"))?,
    };
    if buflen == 0 || buflen > u64::from(wire::MAX_BUFLEN) {
        bail!("-l {}: nc_test buffers are 1 to {} bytes", a.length.as_deref().unwrap_or_default(), wire::MAX_BUFLEN);
    }
    let nbufs = match &a.common.bytes {
        Some(b) => netchar_model::units::parse_bytes(b).map_err(|e| anyhow::anyhow!("-n {b}: {e}"))?.div_ceil(buflen),
        None => 640,
    };
    if nbufs == 0 || nbufs > 1_000_000 {
        bail!("-n: nc_test runs 1 to 1000000 buffers");
    }
    let kind = if a.common.reverse { Kind::TcpSend } else { Kind::TcpRecv };
    single(&a.common, kind, nbufs as u32, buflen as u32, Pause::default(), figures, stop)
}

/// `netchar udp --proto nc-test`.
pub(crate) fn udp(a: &UdpArgs, figures: &FigureFiles, stop: &StopFlag) -> Result<u8> {
    not_applicable(&a.common)?;
    if a.bitrate.is_some() || a.pps.is_some() || a.find_max_rate {
        bail!("--proto nc-test: nc_test senders send as fast as they can (-b, --pps and --find-max-rate do not apply)");
    }
    if a.no_udp_checksum {
        bail!("--proto nc-test: --no-udp-checksum is not applied by netchar's nc_test master, and nc_test carries no such setting to the slave");
    }
    let pattern = a.pattern.clone().unwrap_or_else(|| "640x1024".into());
    let p = Pattern::parse(&pattern).map_err(|e| anyhow::anyhow!("--pattern {pattern}: {e}"))?;
    let (mut nbufs, mut buflen) = counts(&p)?;
    if let Some(l) = &a.length {
        buflen = netchar_model::units::parse_bytes(l).map_err(|e| anyhow::anyhow!("-l {l}: {e}"))? as u32;
    }
    // -n counts buffers of -l bytes, as for TCP (never ignored beside a pattern).
    if let Some(b) = &a.common.bytes {
        if a.pattern.is_some() {
            bail!("--proto nc-test: give the buffers either as --pattern or as -n with -l, not both");
        }
        let bytes = netchar_model::units::parse_bytes(b).map_err(|e| anyhow::anyhow!("-n {b}: {e}"))?;
        let n = bytes.div_ceil(u64::from(buflen.max(1)));
        if n == 0 || n > 1_000_000 {
            bail!("-n: nc_test runs 1 to 1000000 buffers");
        }
        nbufs = n as u32;
    }
    let kind = if a.common.reverse { Kind::UdpSend } else { Kind::UdpRecv };
    single(&a.common, kind, nbufs, buflen, pause_of(&p)?, figures, stop)
}

fn single(
    c: &CommonArgs,
    kind: Kind,
    nbufs: u32,
    buflen: u32,
    pause: Pause,
    figures: &FigureFiles,
    stop: &StopFlag,
) -> Result<u8> {
    let out = Output::from_args(c)?;
    let console = crate::plan::console_source(&c.console_args)?;
    out.check_expectations(&spec_for(kind, nbufs, buflen, pause))?;
    let slave = resolve(&c.host, c.port, c.ipv4, c.ipv6)?;
    let cfg = MasterConfig {
        slave,
        slave_data_port: c.nc_test_data_port.unwrap_or(wire::DATA_SLAVE_PORT),
        master_data_port: wire::DATA_MASTER_PORT,
        plan: MasterPlan::Single { kind, nbufs, buflen, pause },
    };
    let repeat = Repeat { warmup: out.warmup, counted: out.repeat };
    // Counted buffers, no end time: elapsed time and the run now going, when there are several.
    let progress = if repeat.total() > 1 { Progress::start(out.json, true, None) } else { Progress::hidden() };
    let mut reporters = Reporters::of(match (out.json, repeat.total()) {
        (false, _) => Box::new(NcTestLinesReporter),
        (true, 1) => Box::new(JsonReporter),
        (true, _) => Box::new(JobJsonReporter),
    })
    .with_figures(figures);
    crate::repeat::add_statistics(&mut reporters, &out);
    // The runs print through the reporters, and so do the job's headings: one at a time.
    let reporters = std::cell::RefCell::new(reporters);
    let run_one = |run: &Run| -> Result<RunOutcome> {
        let reset =
            out.reset.as_ref().map(|r| crate::repeat::reset_before(r, run.number, &c.host, slave.port(), &progress));
        // The console from before the request to a second after the results record.
        let capture = crate::console::start(console.as_ref())?;
        let mut reporters = reporters.borrow_mut();
        let job =
            run_master(&cfg, stop, &mut crate::ecos::MasterLines { reporters: &mut reporters, progress: &progress })?;
        let mut result = job.results.into_iter().next();
        if let Some(capture) = capture {
            capture.finish_into_result(result.as_mut(), None, stop);
        }
        if let (Some(r), Some(reset)) = (result.as_mut(), reset) {
            r.reset = Some(reset);
        }
        match &result {
            Some(r) => {
                crate::save::save_json(&out, r)?;
                reporters.emit(&progress, |rep| rep.on_finish(r))?;
            }
            // No test ran: the reporters say so (JSON stays one document), then the error.
            None => reporters.emit(&progress, |rep| rep.on_no_result(job.error.as_deref()))?,
        }
        if let Some(e) = &job.error {
            progress.suspend(|| eprintln!("netchar: error: {e}"));
        }
        let ended = match (&job.error, stop.is_raised()) {
            (_, true) => Ended::Interrupted,
            (Some(_), false) => Ended::Failed,
            (None, false) => Ended::Completed,
        };
        Ok(RunOutcome { result, ended })
    };
    let (counted, code) = crate::repeat::run_job(&out, &repeat, stop, &reporters, &progress, run_one)?;
    progress.suspend(|| crate::gate::judged(&out, &counted, code))
}

fn exit_code(results: &[TestResult], stop: &StopFlag) -> u8 {
    if stop.is_raised() {
        130
    } else if results.is_empty() || results.iter().any(|r| r.error.is_some()) {
        2
    } else {
        0
    }
}

/// `netchar suite ecos --proto nc-test|nc6-test HOST`.
pub(crate) fn suite(a: &EcosSuiteArgs, figures: &FigureFiles, stop: &StopFlag) -> Result<u8> {
    if a.target.console_args.given() {
        bail!("suite ecos --proto nc-test: --console and --console-cmd are not supported with nc_test yet; read the console with the native protocol (--proto auto) or on its own");
    }
    if a.target.step.step_cmd.is_some() {
        bail!("suite ecos --proto nc-test: --step-cmd is not supported against an eCos slave yet; use netchar's own server (the native eCos sequence)");
    }
    let sequence = master_sequence(a.proto.protocol()).unwrap_or(Sequence::Nc);
    let slave = resolve(&a.target.host, a.target.port, false, false)?;
    let cfg = MasterConfig {
        slave,
        slave_data_port: a.nc_test_data_port.unwrap_or(wire::DATA_SLAVE_PORT),
        master_data_port: wire::DATA_MASTER_PORT,
        plan: if a.quick { MasterPlan::QuickSuite(sequence) } else { MasterPlan::Suite(sequence) },
    };
    // A sequence of untimed tests: elapsed time and the test now running.
    let progress = Progress::start(a.target.json, true, None);
    let mut reporters =
        Reporters::of(if a.target.json { Box::new(JobJsonReporter) } else { Box::new(NcTestLinesReporter) })
            .with_figures(figures);
    let results = run(&cfg, &mut reporters, &progress, stop)?;
    for r in &results {
        reporters.emit(&progress, |rep| rep.on_finish(r))?;
    }
    reporters.emit(&progress, |rep| rep.on_job_end(&results))?;
    Ok(exit_code(&results, stop))
}

/// Runs the master job (jobs::ecos::run_master), its lines and figures through the reporters
/// as they come; the results of every test it ran (the caller reports them). With no test
/// run, the error, after the reporters said it (JSON stays one document).
fn run(cfg: &MasterConfig, reporters: &mut Reporters, progress: &Progress, stop: &StopFlag) -> Result<Vec<TestResult>> {
    let job = run_master(cfg, stop, &mut crate::ecos::MasterLines { reporters, progress })?;
    if let Some(e) = &job.error {
        if job.results.is_empty() {
            reporters.emit(progress, |rep| rep.on_no_result(Some(e)))?;
            bail!("{e}");
        }
        progress.suspend(|| eprintln!("netchar: error: {e}"));
    }
    Ok(job.results)
}
