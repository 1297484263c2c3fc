//! Tests made of tests: the RFC 2544-style search for the highest loss-free UDP rate
//! (`netchar udp --find-max-rate`) and the built-in suites: the `bwtest.sh` rate sweep
//! (`bwsweep`), netio's block-size table (`netio`) and stackthru's block-size sweep (`sizes`).
//! Each trial is an ordinary test; its result is kept whole.

use crate::figure_files::FigureFiles;
use crate::plan::TcpPlan;
use crate::progress::Progress;
use crate::reporters::Reporters;
use anyhow::Result;
use netchar_engine::client::{self, ClientError};
use netchar_engine::protocols::{ClientRole, Command};
use netchar_engine::StopFlag;
use netchar_model::units::format_si;
use netchar_model::{Direction, EndCondition, TestResult, UdpRate};
use netchar_report::block_sizes::{NetioLinesReporter, NetioTableReporter, SizesTableReporter};
use netchar_report::json::JobJsonReporter;
use netchar_report::max_rate::{self, MaxRateTableReporter};
use netchar_report::sweep::SweepTableReporter;

/// `netchar suite NAME HOST ...`.
pub(crate) fn run(a: &crate::args::SuiteArgs, figures: &FigureFiles, stop: &StopFlag) -> Result<u8> {
    use netchar_model::units::parse_bit_rate;
    match a.suite.as_str() {
        "bwsweep" => {
            let rate = |flag: &str, v: &str| parse_bit_rate(v).map_err(|e| anyhow::anyhow!("{flag} {v}: {e}"));
            let (from, to, step) = (rate("--from", &a.from)?, rate("--to", &a.to)?, rate("--step", &a.step)?);
            let secs = crate::plan::seconds("--duration", &a.duration)?;
            let udp = crate::args::UdpArgs::for_suite(&a.host, a.port, secs);
            let plan = crate::plan::TcpPlan::from_udp_args(&udp)?;
            bwsweep(&plan, from, to, step, a.json, figures, stop)
        }
        "netio" if matches!(a.proto.protocol().def().client, ClientRole::NetioClient) => netio_peer(a, figures, stop),
        "netio" if !a.proto.protocol().runs(Command::SuiteNetio) => anyhow::bail!(
            "suite netio --proto {}: one of auto, {}",
            a.proto.name(),
            netchar_engine::protocols::Protocol::names_for(Command::SuiteNetio)
        ),
        "netio" | "sizes" => {
            let secs = crate::plan::seconds("--duration", &a.duration)?;
            let udp = crate::plan::TcpPlan::from_udp_args(&crate::args::UdpArgs::for_suite(&a.host, a.port, secs))?;
            let mut tcp = udp.clone();
            tcp.client.spec = netchar_model::TestSpec {
                end: udp.client.spec.end,
                interval_seconds: 0.0,
                ..netchar_model::TestSpec::tcp_default()
            };
            if a.suite == "netio" {
                netio(&tcp, &udp, a.json, figures, stop)
            } else {
                sizes(&tcp, &udp, a.json, figures, stop)
            }
        }
        "ecos" => crate::ecos::run(a, figures, stop),
        other => anyhow::bail!("suite {other:?}: known suites: ecos, bwsweep, netio, sizes"),
    }
}

/// Trials of a search at most; the search also stops once the bracket is within 1%.
const MAX_TRIALS: usize = 14;

/// `plan` at the paced `rate`, as a trial runs it.
fn trial_plan(plan: &TcpPlan, rate: u64) -> TcpPlan {
    let mut p = plan.clone();
    p.client.spec.interval_seconds = 0.0;
    p.client.busy_wait = p.client.busy_wait.max(std::time::Duration::from_secs(5));
    if let Some(u) = p.client.spec.udp.as_mut() {
        u.rate = UdpRate::BitsPerSecond(rate);
    }
    p
}

/// One trial at the paced `rate`: its whole result.
fn trial(plan: &TcpPlan, rate: u64, stop: &StopFlag) -> Result<TestResult> {
    let p = trial_plan(plan, rate);
    let run = client::run(&p.client, stop, &mut |_| {});
    match (run.result, run.error) {
        (Some(result), None) => Ok(result),
        (_, Some(ClientError::Interrupted)) => anyhow::bail!("interrupted"),
        (_, Some(e)) => Err(e.into()),
        (None, None) => anyhow::bail!("the trial produced no result"),
    }
}

/// `netchar udp --find-max-rate`: binary search between 0 and the rate an unlimited trial
/// reaches (or -b), for the highest rate with loss ≤ `loss_percent`. The trials go through
/// the reporters: the trial table, or with `--json` one array of the trials' results.
pub(crate) fn find_max_rate(plan: &TcpPlan, loss_percent: f64, figures: &FigureFiles, stop: &StopFlag) -> Result<u8> {
    // Untimed: how many trials the search takes is what it finds out.
    let mut progress = Progress::start(plan.output.json, true, None);
    // The figure files keep the trials, not the probe: the job's end settles them.
    let mut reporters = suite_reporters(plan.output.json, Box::new(MaxRateTableReporter::new(loss_percent)), figures);
    if let EndCondition::Bytes(_) = plan.client.spec.end {
        anyhow::bail!("--find-max-rate: give the trial duration with -t, not -n");
    }
    progress.set_current("probing the highest rate");
    let ceiling = match plan.client.spec.udp.as_ref().map(|u| u.rate) {
        Some(UdpRate::BitsPerSecond(b)) if plan.explicit_rate => b,
        _ => {
            // What the sender and path deliver flat out: the search's upper bound.
            let mut p = plan.clone();
            p.client.spec.udp.as_mut().expect("UDP spec").rate = UdpRate::Unlimited;
            p.client.spec.interval_seconds = 0.0;
            let run = client::run(&p.client, stop, &mut |_| {});
            let r = run
                .result
                .ok_or_else(|| anyhow::anyhow!("the probing trial failed: {:?}", run.error.map(|e| e.to_string())))?;
            anyhow::ensure!(r.summary.up.is_some() || r.summary.down.is_some(), "no flow in the probe");
            reporters.emit(&progress, |rep| rep.on_finish(&r))?;
            max_rate::received_bps(&r).max(1e3) as u64
        }
    };
    let mut results = Vec::new();
    let searched = search(plan, ceiling, loss_percent, stop, &mut reporters, &progress, &mut results);
    progress.finish();
    // The trials so far are reported also when one failed: the error follows them.
    reporters.emit(&progress, |r| r.on_job_end(&results))?;
    searched?;
    let found = results.iter().any(|r| max_rate::verdict(r, loss_percent).passed());
    Ok(if found { 0 } else { 1 })
}

/// The trials of the search, from `ceiling` down, each reported and kept in `results`.
fn search(
    plan: &TcpPlan,
    ceiling: u64,
    loss_percent: f64,
    stop: &StopFlag,
    reporters: &mut Reporters,
    progress: &Progress,
    results: &mut Vec<TestResult>,
) -> Result<()> {
    let (mut lo, mut hi) = (0u64, ceiling);
    let mut rate = ceiling;
    for n in 1..=MAX_TRIALS {
        progress.set_current(format!("trial {n}: {}", format_si(rate as f64, "bit/s")));
        reporters.emit(progress, |r| r.on_start(&crate::single_run::test_info(&trial_plan(plan, rate))))?;
        let t = trial(plan, rate, stop)?;
        reporters.emit(progress, |r| r.on_finish(&t))?;
        let pass = max_rate::verdict(&t, loss_percent).passed();
        if pass {
            lo = rate;
        } else {
            hi = rate;
        }
        results.push(t);
        if pass && rate == ceiling || hi.saturating_sub(lo) <= hi / 100 {
            break;
        }
        rate = lo + (hi - lo) / 2;
    }
    Ok(())
}

/// `netchar suite bwsweep`: every rate from `from` to `to` by `step`, up then down; per rate
/// the achieved rate, loss and jitter, and the knee: the first rate that loses datagrams.
pub(crate) fn bwsweep(
    plan: &TcpPlan,
    from: u64,
    to: u64,
    step: u64,
    json: bool,
    figures: &FigureFiles,
    stop: &StopFlag,
) -> Result<u8> {
    anyhow::ensure!(step > 0 && from > 0 && from <= to, "--from, --to, --step: need 0 < from <= to and step > 0");
    let trials = 2 * ((to - from) / step + 1);
    let progress = Progress::start(json, true, trial_length(plan).map(|t| t * trials as u32));
    let mut reporters = suite_reporters(json, Box::new(SweepTableReporter::new(to)), figures);
    let mut results = Vec::new();
    for (direction, name) in [(Direction::Up, "up (client sends)"), (Direction::Down, "down (server sends)")] {
        let mut p = plan.clone();
        p.client.spec.direction = direction;
        let mut rate = from;
        while rate <= to {
            if stop.is_raised() {
                anyhow::bail!("interrupted");
            }
            progress.set_current(format!("{name}: {}", format_si(rate as f64, "bit/s")));
            reporters.emit(&progress, |r| r.on_start(&crate::single_run::test_info(&p)))?;
            let t = trial(&p, rate, stop)?;
            reporters.emit(&progress, |r| r.on_finish(&t))?;
            results.push(t);
            rate += step;
        }
    }
    reporters.emit(&progress, |r| r.on_job_end(&results))?;
    Ok(0)
}

/// One trial's length, if timed: the progress line's estimate of what is left.
fn trial_length(plan: &TcpPlan) -> Option<std::time::Duration> {
    match plan.client.spec.end {
        EndCondition::Seconds(s) => Some(std::time::Duration::from_secs_f64(s)),
        EndCondition::Bytes(_) => None,
    }
}

/// Runs one variant of `base` (a TCP or UDP plan), returning its result.
fn run_variant(
    base: &TcpPlan,
    adjust: impl FnOnce(&mut netchar_model::TestSpec),
    stop: &StopFlag,
    reporters: &mut Reporters,
    progress: &Progress,
) -> Result<TestResult> {
    let mut p = base.clone();
    p.client.spec.interval_seconds = 0.0;
    p.client.busy_wait = p.client.busy_wait.max(std::time::Duration::from_secs(5));
    adjust(&mut p.client.spec);
    p.client.spec.validate()?;
    reporters.emit(progress, |r| r.on_start(&crate::single_run::test_info(&p)))?;
    let run = client::run(&p.client, stop, &mut |_| {});
    let r = match (run.result, run.error) {
        (Some(r), None) => r,
        (_, Some(e)) => return Err(e.into()),
        (None, None) => anyhow::bail!("the test produced no result"),
    };
    reporters.emit(progress, |rep| rep.on_finish(&r))?;
    Ok(r)
}

/// `netchar suite netio`: TCP and UDP, each block size, client to server (tx) and server to
/// client (rx), in netio's table: the receiving end's rate in MB/s (2^20 bytes, as netio).
pub(crate) fn netio(tcp: &TcpPlan, udp: &TcpPlan, json: bool, figures: &FigureFiles, stop: &StopFlag) -> Result<u8> {
    const SIZES: [u64; 6] = [1024, 2048, 4096, 8192, 16384, 32767];
    let progress = Progress::start(json, true, trial_length(tcp).map(|t| t * 4 * SIZES.len() as u32));
    let mut reporters = suite_reporters(json, Box::<NetioTableReporter>::default(), figures);
    let mut results = Vec::new();
    for size in SIZES {
        for (plan, direction) in
            [(tcp, Direction::Up), (tcp, Direction::Down), (udp, Direction::Up), (udp, Direction::Down)]
        {
            let way = if direction == Direction::Up { "tx" } else { "rx" };
            progress.set_current(format!("{size} bytes, {}-{way}", plan.client.spec.kind.name().to_uppercase()));
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

/// `netchar suite sizes`: stackthru's block-size sweep over TCP and UDP (client sends):
/// real and system time, MB/s (2^20), Mbit/s (10^6) and frames/s.
pub(crate) fn sizes(tcp: &TcpPlan, udp: &TcpPlan, json: bool, figures: &FigureFiles, stop: &StopFlag) -> Result<u8> {
    const SIZES: [u64; 9] = [64, 256, 512, 1024, 1448, 1472, 4096, 16384, 65507];
    let progress = Progress::start(json, true, trial_length(tcp).map(|t| t * 2 * SIZES.len() as u32));
    let mut reporters = suite_reporters(json, Box::<SizesTableReporter>::default(), figures);
    let mut results = Vec::new();
    for (name, plan) in [("TCP", tcp), ("UDP", udp)] {
        for size in SIZES {
            progress.set_current(format!("{name}, {size} bytes"));
            let r = run_variant(
                plan,
                |s| {
                    s.block_bytes = size;
                    s.direction = Direction::Up;
                    if let Some(u) = s.udp.as_mut() {
                        u.rate = UdpRate::Unlimited;
                    }
                },
                stop,
                &mut reporters,
                &progress,
            )?;
            anyhow::ensure!(r.summary.up.is_some(), "no up flow");
            results.push(r);
        }
    }
    reporters.emit(&progress, |r| r.on_job_end(&results))?;
    Ok(0)
}

/// A suite's reporters: its classic `table`, or with `--json` one array of every result; and
/// the figure files'.
fn suite_reporters(json: bool, table: Box<dyn netchar_report::Reporter>, figures: &FigureFiles) -> Reporters {
    if json { Reporters::of(Box::new(JobJsonReporter)) } else { Reporters::of(table) }.with_figures(figures)
}

/// `netchar suite netio --proto netio HOST`: netchar as the client of a netio server, netio's
/// sequence and its output lines (NetioLinesReporter) under a progress line; with --json, one
/// array of a result per block size (`test.protocol` "netio", the line in `test.title`).
pub(crate) fn netio_peer(a: &crate::args::SuiteArgs, figures: &FigureFiles, stop: &StopFlag) -> Result<u8> {
    use netchar_engine::peers::netio::{run_client, to_results, NetioClientConfig};
    use std::net::ToSocketAddrs;
    let (host, host_port) = crate::plan::split_host(&a.host).map_err(|e| anyhow::anyhow!("{}", e.0))?;
    let port = a.port.or(host_port).unwrap_or(netchar_wire::netio::TCP_PORT);
    let server = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| anyhow::anyhow!("cannot resolve {host}: {e}"))?
        .next()
        .ok_or_else(|| anyhow::anyhow!("cannot resolve {host}: no address"))?;
    let sizes = match &a.block {
        None => netchar_wire::netio::SIZES.to_vec(),
        Some(b) => {
            let t = b.trim();
            let (num, k) = t.strip_suffix(['k', 'K']).map_or((t, 1), |n| (n, 1024));
            let n: u32 = num.parse().map_err(|_| anyhow::anyhow!("-b {b}: a size in bytes, or NUMk"))?;
            vec![(n.saturating_mul(k)).clamp(1, netchar_wire::netio::MAX_BLOCK)]
        }
    };
    let secs = |flag: &str, v: &str| -> Result<std::time::Duration> {
        let s = crate::plan::seconds(flag, v).map_err(|e| anyhow::anyhow!("{}", e.0))?;
        anyhow::ensure!(s > 0.0 && s <= 3600.0, "{flag} {v}: between 0 and 3600 seconds");
        Ok(std::time::Duration::from_secs_f64(s))
    };
    let cfg = NetioClientConfig {
        server,
        udp: a.udp,
        sizes,
        tx_only: a.tx_only,
        rx_timeout: secs("--rx-timeout", &a.rx_timeout)?,
        interval: secs("--netio-interval", &a.netio_interval)?,
        connect_timeout: std::time::Duration::from_secs(5),
    };
    // Each size: Tx for --netio-interval, then (unless Tx only) Rx for as long as the server
    // sends, netio's own interval.
    let rx = if cfg.tx_only { std::time::Duration::ZERO } else { netchar_wire::netio::INTERVAL };
    let expected = (cfg.interval + rx) * cfg.sizes.len() as u32;
    let progress = Progress::start(a.json, true, Some(expected));
    // The figure files keep the results with the run's error (the job's end settles them).
    let mut reporters = suite_reporters(a.json, Box::<NetioLinesReporter>::default(), figures);
    let info = netchar_engine::peers::netio::test_info(&cfg, cfg.sizes[0], !cfg.tx_only, None);
    reporters.emit(&progress, |rep| rep.on_start(&info))?;
    let now_running = |done: usize| {
        if let Some(size) = cfg.sizes.get(done) {
            progress.set_current(format!("{} of {}: {size} bytes", done + 1, cfg.sizes.len()));
        }
    };
    now_running(0);
    let mut shown = 0;
    let mut failed = None;
    let (results, error) = run_client(&cfg, stop, &mut |r| {
        // The size's line as it ends; its result is made again below with the run's error.
        if let Some(live) = to_results(&cfg, std::slice::from_ref(r), None).first() {
            if let Err(e) = reporters.emit(&progress, |rep| rep.on_finish(live)) {
                failed.get_or_insert(e);
            }
        }
        shown += 1;
        now_running(shown);
    });
    if let Some(e) = failed {
        return Err(e.into());
    }
    let finished = to_results(&cfg, &results, error.as_deref());
    reporters.emit(&progress, |rep| rep.on_job_end(&finished))?;
    match error {
        None => Ok(0),
        Some(e) => {
            progress.suspend(|| eprintln!("netchar: error: {e}"));
            Ok(2)
        }
    }
}
