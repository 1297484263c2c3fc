//! `netchar suite netio`: netio's block-size table, over netchar's own protocol (a test per
//! size, protocol and direction) or as the client of a netio server (`--proto netio`: netio's
//! sequence and its lines). Both modes take the same sizes (`-b` list, `--preset`), protocols
//! (`--tcp`, `-u`), `--tx-only` and `-t`; a flag a mode cannot honour is refused. The flags
//! become the engine's typed plan (netchar_engine::jobs::netio::NetioPlan), the job runs it
//! and its results come out through the reporters.

use crate::args::NetioSuiteArgs;
use crate::figure_files::FigureFiles;
use crate::progress::Progress;
use crate::reporters::Reporters;
use crate::suites::{block_size_plans, run_variant, size_list, suite_reporters, trial_length};
use anyhow::{bail, Result};
use netchar_engine::jobs::netio::{self as job, Leg, NetioPlan, NetioServer, NetioSink};
use netchar_engine::StopFlag;
use netchar_model::{TestInfo, TestResult};
use netchar_report::block_sizes::{NetioColumn, NetioLinesReporter, NetioTableReporter};
use std::time::Duration;

/// The block sizes of the Keil MDK netio server's published table (MDK-Middleware's
/// `Test/Network/netio`): 256 to 4000 bytes, its server's buffer being 4096.
const MDK_SIZES: [u32; 5] = [256, 1024, 1440, 2000, 4000];

/// The flags to the job's plan; `peer`: as the client of a netio server.
fn plan_of(a: &NetioSuiteArgs, peer: bool) -> Result<NetioPlan> {
    let sizes = match (&a.block, a.preset.as_deref()) {
        // Within netio's largest block: size_list's bound.
        (Some(b), _) => {
            size_list("-b", b, u64::from(netchar_wire::netio::MAX_BLOCK))?.into_iter().map(|s| s as u32).collect()
        }
        (None, Some("mdk")) => MDK_SIZES.to_vec(),
        (None, _) => netchar_wire::netio::SIZES.to_vec(),
    };
    // Neither flag: netchar's own runs both, a netio client TCP (its UDP test needs port+1
    // free on this end, which a server on the same host holds).
    let (tcp, udp) = match (a.tcp, a.udp) {
        (false, false) => (true, !peer),
        both => both,
    };
    let max_udp = netchar_model::spec::MAX_UDP_PAYLOAD;
    if let Some(big) = sizes.iter().find(|&&s| udp && u64::from(s) > max_udp) {
        bail!("-b {big}: UDP blocks are at most {max_udp} bytes (use --tcp for TCP only)");
    }
    let default = if peer { netchar_wire::netio::INTERVAL.as_secs_f64() } else { 2.0 };
    let seconds = match &a.duration {
        Some(d) => crate::flags::seconds("-t", d)?,
        None => default,
    };
    if !(seconds > 0.0 && seconds <= 3600.0) {
        bail!("-t {seconds}: between 0 and 3600 seconds");
    }
    Ok(NetioPlan { sizes, tcp, udp, tx_only: a.tx_only, seconds })
}

/// The table's columns: the plan's legs.
fn columns(plan: &NetioPlan) -> Vec<NetioColumn> {
    plan.legs().into_iter().map(|Leg { kind, flow }| NetioColumn { kind, flow }).collect()
}

/// `netchar suite netio` (its `--proto` is auto, netchar or netio: args::SuiteProtoParser).
pub(crate) fn run(a: &NetioSuiteArgs, figures: &FigureFiles, stop: &StopFlag) -> Result<u8> {
    // `--proto` is auto, netchar or netio here (args::SuiteProtoParser): a peer is netio's.
    if !a.proto.protocol().is_native() {
        if a.target.step.step_cmd.is_some() {
            bail!("suite netio --proto netio: --step-cmd is not supported against a netio server yet; use netchar's own server");
        }
        return peer(a, &plan_of(a, true)?, figures, stop);
    }
    if let Some(t) = &a.rx_timeout {
        bail!("suite netio --rx-timeout {t}: with --proto netio only (netchar's own tests end on their own)");
    }
    native(a, &plan_of(a, false)?, figures, stop)
}

/// The job's sink: the reporters, under a progress line.
struct Shown<'a> {
    reporters: &'a mut Reporters,
    progress: &'a Progress,
}

impl NetioSink for Shown<'_> {
    fn running(&mut self, what: &str) {
        self.progress.set_current(what);
    }
    fn started(&mut self, info: &TestInfo) -> std::io::Result<()> {
        self.reporters.emit(self.progress, |rep| rep.on_start(info))
    }
    fn finished(&mut self, result: &TestResult) -> std::io::Result<()> {
        self.reporters.emit(self.progress, |rep| rep.on_finish(result))
    }
}

/// The native job's sink: its runner reports each test (run_variant), so only the test now
/// running is shown here.
struct Progressing<'a>(&'a Progress);

impl NetioSink for Progressing<'_> {
    fn running(&mut self, what: &str) {
        self.0.set_current(what);
    }
    fn started(&mut self, _: &TestInfo) -> std::io::Result<()> {
        Ok(())
    }
    fn finished(&mut self, _: &TestResult) -> std::io::Result<()> {
        Ok(())
    }
}

/// Over netchar's own protocol (jobs::netio::run_native): each size and leg a test, each
/// result through the reporters as it ends; netio's table a row per size.
fn native(a: &NetioSuiteArgs, plan: &NetioPlan, figures: &FigureFiles, stop: &StopFlag) -> Result<u8> {
    let (tcp, udp) = block_size_plans(&a.target, plan.seconds)?;
    let tests = (plan.sizes.len() * plan.legs().len()) as u32;
    let progress = Progress::start(a.target.json, true, trial_length(&tcp).map(|t| t * tests));
    let table = NetioTableReporter::new(&columns(plan), true);
    let mut reporters = suite_reporters(a.target.json, Box::new(table), figures);
    // run_variant reports each test as it ends; the sink names the test now running.
    let mut sink = Progressing(&progress);
    let results = job::run_native(plan, &tcp.client.spec, &udp.client.spec, &mut sink, &mut |spec| {
        let base = if spec.uses_udp() { &udp } else { &tcp };
        run_variant(base, |s| *s = spec, stop, &mut reporters, &progress)
    })?;
    reporters.emit(&progress, |r| r.on_job_end(&results))?;
    Ok(0)
}

/// `netchar suite netio --proto netio HOST`: netchar as the client of a netio server
/// (jobs::netio::run_peer), netio's lines (NetioLinesReporter) under a progress line, a
/// protocol after the other; with both, netio's table of the two at the end. With --json, one
/// array of a result per block size and protocol (`test.protocol` "netio", the line in
/// `test.title`).
fn peer(a: &NetioSuiteArgs, plan: &NetioPlan, figures: &FigureFiles, stop: &StopFlag) -> Result<u8> {
    use std::net::ToSocketAddrs;
    if a.target.console_args.given() {
        anyhow::bail!("suite netio --proto netio: --console and --console-cmd are not supported with a netio server yet; read the console with the native protocol (--proto auto) or on its own");
    }
    let (host, host_port) = crate::plan::split_host(&a.target.host).map_err(|e| anyhow::anyhow!("{}", e.0))?;
    let port = a.target.port.or(host_port).unwrap_or(netchar_wire::netio::TCP_PORT);
    let addr = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| anyhow::anyhow!("cannot resolve {host}: {e}"))?
        .next()
        .ok_or_else(|| anyhow::anyhow!("cannot resolve {host}: no address"))?;
    let rx_timeout = match &a.rx_timeout {
        None => Duration::from_secs(10),
        Some(t) => {
            let s = crate::flags::seconds("--rx-timeout", t)?;
            anyhow::ensure!(s > 0.0 && s <= 3600.0, "--rx-timeout {t}: between 0 and 3600 seconds");
            Duration::from_secs_f64(s)
        }
    };
    let connect_timeout = match &a.target.connect_timeout {
        None => Duration::from_secs(5),
        Some(t) => {
            let s = crate::flags::seconds("--connect-timeout", t)?;
            anyhow::ensure!(s > 0.0 && s <= 3600.0, "--connect-timeout {t}: more than 0 and at most 3600 seconds");
            Duration::from_secs_f64(s)
        }
    };
    let server = NetioServer { protocol: a.proto.protocol(), addr, rx_timeout, connect_timeout };
    let progress = Progress::start(a.target.json, true, Some(plan.peer_duration()));
    // The figure files keep the results with the run's error (the job's end settles them).
    let mut reporters = suite_reporters(a.target.json, Box::<NetioLinesReporter>::default(), figures);
    if plan.tcp && plan.udp && !a.target.json {
        reporters.push(Box::new(NetioTableReporter::new(&columns(plan), false)));
    }
    let run = job::run_peer(plan, &server, stop, &mut Shown { reporters: &mut reporters, progress: &progress })?;
    reporters.emit(&progress, |rep| rep.on_job_end(&run.results))?;
    match run.error {
        None => Ok(0),
        Some(e) => {
            progress.suspend(|| eprintln!("netchar: error: {e}"));
            Ok(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn args(extra: &[&str]) -> NetioSuiteArgs {
        let argv = ["netchar", "suite", "netio", "192.0.2.1"].iter().chain(extra);
        match crate::args::Cli::try_parse_from(argv).unwrap().command {
            Some(crate::args::Command::Suite(crate::args::SuiteCommand::Netio(a))) => a,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn sizes_come_from_the_list_the_preset_or_netio() {
        let run = |extra: &[&str], peer| plan_of(&args(extra), peer).unwrap();
        assert_eq!(run(&["-b", "256,1k,1440,2000,4000"], false).sizes, MDK_SIZES);
        assert_eq!(run(&["--preset", "mdk"], true).sizes, MDK_SIZES);
        assert_eq!(run(&[], false).sizes, [1024, 2048, 4096, 8192, 16384, 32767]);
        assert_eq!(run(&["-b", "4k"], true).sizes, [4096]);
        assert!(plan_of(&args(&["-b", "1k,x"]), false).is_err());
        assert!(plan_of(&args(&["-b", "64k", "-u"]), false).is_err());
    }

    #[test]
    fn protocols_default_to_both_natively_and_tcp_against_netio() {
        let run = |extra: &[&str], peer| {
            let r = plan_of(&args(extra), peer).unwrap();
            (r.tcp, r.udp, columns(&r).len(), r.seconds)
        };
        assert_eq!(run(&[], false), (true, true, 4, 2.0));
        assert_eq!(run(&[], true), (true, false, 2, 6.0));
        assert_eq!(run(&["-u"], false), (false, true, 2, 2.0));
        assert_eq!(run(&["--tcp", "-u", "--tx-only"], true), (true, true, 2, 6.0));
        assert_eq!(run(&["--netio-interval", "1"], true), (true, false, 2, 1.0));
    }
}
