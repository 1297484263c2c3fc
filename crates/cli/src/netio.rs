//! `netchar suite netio`: netio's block-size table, over netchar's own protocol (a test per
//! size, protocol and direction) or as the client of a netio server (`--proto netio`: netio's
//! sequence and its lines). Both modes take the same sizes (`-b` list, `--preset`), protocols
//! (`--tcp`, `-u`), `--tx-only` and `-t`; a flag a mode cannot honour is refused.

use crate::args::NetioSuiteArgs;
use crate::figure_files::FigureFiles;
use crate::progress::Progress;
use crate::suites::{block_size_plans, run_variant, size_list, suite_reporters, trial_length};
use anyhow::{bail, Result};
use netchar_engine::protocols::ClientRole;
use netchar_engine::StopFlag;
use netchar_model::{Direction, Flow, TestKind, TestResult, UdpRate};
use netchar_report::block_sizes::{NetioColumn, NetioLinesReporter, NetioTableReporter};
use std::time::Duration;

/// The block sizes of the Keil MDK netio server's published table (MDK-Middleware's
/// `Test/Network/netio`): 256 to 4000 bytes, its server's buffer being 4096.
const MDK_SIZES: [u64; 5] = [256, 1024, 1440, 2000, 4000];

/// What the flags ask of either mode.
#[derive(Debug, Clone, PartialEq)]
struct NetioRun {
    sizes: Vec<u64>,
    tcp: bool,
    udp: bool,
    tx_only: bool,
    /// Each test's, or with netio each direction's, length.
    seconds: f64,
}

impl NetioRun {
    /// The flags to a run; `peer`: as the client of a netio server.
    fn from_args(a: &NetioSuiteArgs, peer: bool) -> Result<Self> {
        let sizes = match (&a.block, a.preset.as_deref()) {
            (Some(b), _) => size_list("-b", b, u64::from(netchar_wire::netio::MAX_BLOCK))?,
            (None, Some("mdk")) => MDK_SIZES.to_vec(),
            (None, _) => netchar_wire::netio::SIZES.iter().map(|&s| u64::from(s)).collect(),
        };
        // Neither flag: netchar's own runs both, a netio client TCP (its UDP test needs port+1
        // free on this end, which a server on the same host holds).
        let (tcp, udp) = match (a.tcp, a.udp) {
            (false, false) => (true, !peer),
            both => both,
        };
        let max_udp = netchar_model::spec::MAX_UDP_PAYLOAD;
        if let Some(big) = sizes.iter().find(|&&s| udp && s > max_udp) {
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
        Ok(Self { sizes, tcp, udp, tx_only: a.tx_only, seconds })
    }

    /// The table's columns.
    fn columns(&self) -> Vec<NetioColumn> {
        NetioColumn::ALL
            .into_iter()
            .filter(|c| if c.kind == TestKind::Tcp { self.tcp } else { self.udp })
            .filter(|c| c.flow == Flow::Up || !self.tx_only)
            .collect()
    }
}

/// `netchar suite netio` (its `--proto` is auto, netchar or netio: args::SuiteProtoParser).
pub(crate) fn run(a: &NetioSuiteArgs, figures: &FigureFiles, stop: &StopFlag) -> Result<u8> {
    if matches!(a.proto.protocol().def().client, ClientRole::NetioClient) {
        if a.target.step.step_cmd.is_some() {
            bail!("suite netio --proto netio: --step-cmd is not supported against a netio server yet (netio's sequence runs as one); use netchar's own server");
        }
        return peer(a, &NetioRun::from_args(a, true)?, figures, stop);
    }
    if let Some(t) = &a.rx_timeout {
        bail!("suite netio --rx-timeout {t}: with --proto netio only (netchar's own tests end on their own)");
    }
    native(a, &NetioRun::from_args(a, false)?, figures, stop)
}

/// Over netchar's own protocol: for each size, TCP and UDP (those asked for), client to server
/// (tx) then back (rx, unless --tx-only), each a test; netio's table a row per size.
fn native(a: &NetioSuiteArgs, run: &NetioRun, figures: &FigureFiles, stop: &StopFlag) -> Result<u8> {
    let (tcp, udp) = block_size_plans(&a.target, run.seconds)?;
    let columns = run.columns();
    let tests = (run.sizes.len() * columns.len()) as u32;
    let progress = Progress::start(a.target.json, true, trial_length(&tcp).map(|t| t * tests));
    let table = NetioTableReporter::new(&columns, true);
    let mut reporters = suite_reporters(a.target.json, Box::new(table), figures);
    let mut results = Vec::new();
    for &size in &run.sizes {
        for c in &columns {
            let plan = if c.kind == TestKind::Tcp { &tcp } else { &udp };
            let (direction, way) = if c.flow == Flow::Up { (Direction::Up, "tx") } else { (Direction::Down, "rx") };
            progress.set_current(format!("{size} bytes, {}-{way}", c.kind.name().to_uppercase()));
            let r = run_variant(
                plan,
                |s| {
                    s.block_bytes = size;
                    s.direction = direction;
                    if let Some(u) = s.udp.as_mut() {
                        u.rate = UdpRate::Unlimited;
                    }
                },
                stop,
                &mut reporters,
                &progress,
            )?;
            results.push(r);
        }
    }
    reporters.emit(&progress, |r| r.on_job_end(&results))?;
    Ok(0)
}

/// `netchar suite netio --proto netio HOST`: netchar as the client of a netio server, netio's
/// sequence and its output lines (NetioLinesReporter) under a progress line, a protocol after
/// the other; with both, netio's table of the two at the end. With --json, one array of a
/// result per block size and protocol (`test.protocol` "netio", the line in `test.title`).
fn peer(a: &NetioSuiteArgs, run: &NetioRun, figures: &FigureFiles, stop: &StopFlag) -> Result<u8> {
    use netchar_engine::peers::netio::NetioClientConfig;
    use std::net::ToSocketAddrs;
    if a.target.console_args.given() {
        anyhow::bail!("suite netio --proto netio: --console and --console-cmd are not supported with a netio server yet; read the console with the native protocol (--proto auto) or on its own");
    }
    let (host, host_port) = crate::plan::split_host(&a.target.host).map_err(|e| anyhow::anyhow!("{}", e.0))?;
    let port = a.target.port.or(host_port).unwrap_or(netchar_wire::netio::TCP_PORT);
    let server = (host.as_str(), port)
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
    let configs: Vec<NetioClientConfig> = [(false, run.tcp), (true, run.udp)]
        .into_iter()
        .filter(|&(_, on)| on)
        .map(|(udp, _)| NetioClientConfig {
            server,
            udp,
            // Within MAX_BLOCK: size_list's bound.
            sizes: run.sizes.iter().map(|&s| s as u32).collect(),
            tx_only: run.tx_only,
            rx_timeout,
            interval: Duration::from_secs_f64(run.seconds),
            connect_timeout,
        })
        .collect();
    // Each size: Tx for -t, then (unless Tx only) Rx for as long as the server sends,
    // netio's own interval.
    let rx = if run.tx_only { Duration::ZERO } else { netchar_wire::netio::INTERVAL };
    let per_size = Duration::from_secs_f64(run.seconds) + rx;
    let expected = per_size * (run.sizes.len() * configs.len()) as u32;
    let progress = Progress::start(a.target.json, true, Some(expected));
    // The figure files keep the results with the run's error (the job's end settles them).
    let mut reporters = suite_reporters(a.target.json, Box::<NetioLinesReporter>::default(), figures);
    if configs.len() > 1 && !a.target.json {
        reporters.push(Box::new(NetioTableReporter::new(&run.columns(), false)));
    }
    let mut finished = Vec::new();
    let mut error = None;
    for cfg in &configs {
        let (results, e) = peer_protocol(cfg, &mut reporters, &progress, stop)?;
        finished.extend(results);
        if let Some(e) = e {
            error = Some(e);
            break;
        }
    }
    reporters.emit(&progress, |rep| rep.on_job_end(&finished))?;
    match error {
        None => Ok(0),
        Some(e) => {
            progress.suspend(|| eprintln!("netchar: error: {e}"));
            Ok(2)
        }
    }
}

/// One protocol's sizes against a netio server, each size's line as it ends: the results,
/// with the run's error (the sizes that ran are kept).
fn peer_protocol(
    cfg: &netchar_engine::peers::netio::NetioClientConfig,
    reporters: &mut crate::reporters::Reporters,
    progress: &Progress,
    stop: &StopFlag,
) -> Result<(Vec<TestResult>, Option<String>)> {
    use netchar_engine::peers::netio::{run_client, test_info, to_results};
    let proto = if cfg.udp { "UDP" } else { "TCP" };
    let info = test_info(cfg, cfg.sizes[0], !cfg.tx_only, None);
    reporters.emit(progress, |rep| rep.on_start(&info))?;
    let now_running = |done: usize| {
        if let Some(size) = cfg.sizes.get(done) {
            progress.set_current(format!("{} of {}: {size} bytes, {proto}", done + 1, cfg.sizes.len()));
        }
    };
    now_running(0);
    let mut shown = 0;
    let mut failed = None;
    let (results, error) = run_client(cfg, stop, &mut |r| {
        // The size's line as it ends; its result is made again below with the run's error.
        if let Some(live) = to_results(cfg, std::slice::from_ref(r), None).first() {
            if let Err(e) = reporters.emit(progress, |rep| rep.on_finish(live)) {
                failed.get_or_insert(e);
            }
        }
        shown += 1;
        now_running(shown);
    });
    if let Some(e) = failed {
        return Err(e.into());
    }
    Ok((to_results(cfg, &results, error.as_deref()), error))
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
        let run = |extra: &[&str], peer| NetioRun::from_args(&args(extra), peer).unwrap();
        assert_eq!(run(&["-b", "256,1k,1440,2000,4000"], false).sizes, MDK_SIZES);
        assert_eq!(run(&["--preset", "mdk"], true).sizes, MDK_SIZES);
        assert_eq!(run(&[], false).sizes, [1024, 2048, 4096, 8192, 16384, 32767]);
        assert_eq!(run(&["-b", "4k"], true).sizes, [4096]);
        assert!(NetioRun::from_args(&args(&["-b", "1k,x"]), false).is_err());
        assert!(NetioRun::from_args(&args(&["-b", "64k", "-u"]), false).is_err());
    }

    #[test]
    fn protocols_default_to_both_natively_and_tcp_against_netio() {
        let run = |extra: &[&str], peer| {
            let r = NetioRun::from_args(&args(extra), peer).unwrap();
            (r.tcp, r.udp, r.columns().len(), r.seconds)
        };
        assert_eq!(run(&[], false), (true, true, 4, 2.0));
        assert_eq!(run(&[], true), (true, false, 2, 6.0));
        assert_eq!(run(&["-u"], false), (false, true, 2, 2.0));
        assert_eq!(run(&["--tcp", "-u", "--tx-only"], true), (true, true, 2, 6.0));
        assert_eq!(run(&["--netio-interval", "1"], true), (true, false, 2, 1.0));
    }
}
