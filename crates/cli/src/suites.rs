//! Tests made of tests: the RFC 2544-style search for the highest loss-free UDP rate
//! (`netchar udp --find-max-rate`) and the built-in suites, each its own command: the
//! `bwtest.sh` rate sweep (`bwsweep`) and stackthru's block-size sweep (`sizes`) here; netio's
//! table and the eCos sequence are the engine's jobs (netchar_engine::jobs), their flags and
//! output in netio.rs, ecos.rs and nc_test.rs; main.rs dispatches each. Each trial is an
//! ordinary test; its result is kept whole.

use crate::args::{BwsweepSuiteArgs, SizesSuiteArgs, SuiteTarget};
use crate::figure_files::FigureFiles;
use crate::plan::TcpPlan;
use crate::progress::Progress;
use crate::reporters::Reporters;
use anyhow::Result;
use netchar_engine::client::{self, ClientError};
use netchar_engine::StopFlag;
use netchar_model::units::format_si;
use netchar_model::{Direction, EndCondition, TestResult, UdpRate};
use netchar_report::block_sizes::SizesTableReporter;
use netchar_report::json::JobJsonReporter;
use netchar_report::max_rate::{self, MaxRateTableReporter};
use netchar_report::sweep::SweepTableReporter;

/// `netchar suite bwsweep HOST --from R --to R --step R`.
pub(crate) fn bwsweep_suite(a: &BwsweepSuiteArgs, figures: &FigureFiles, stop: &StopFlag) -> Result<u8> {
    use netchar_model::units::parse_bit_rate;
    let rate = |flag: &str, v: &str| parse_bit_rate(v).map_err(|e| anyhow::anyhow!("{flag} {v}: {e}"));
    let (from, to, step) = (rate("--from", &a.from)?, rate("--to", &a.to)?, rate("--step", &a.step)?);
    let secs = crate::flags::seconds("-t", &a.duration)?;
    let knee_loss = knee_loss_percent(&a.knee_loss)?;
    let udp = crate::args::UdpArgs::for_suite(&a.target, secs);
    let mut plan = crate::plan::TcpPlan::from_udp_args(&udp)?;
    plan.console = crate::plan::console_source(&a.target.console_args)?;
    plan.step = crate::hooks::StepCommand::new(crate::hooks::UserCommand::of_step(&a.target.step)?);
    let sweep = Sweep { from, to, step, knee_loss_percent: knee_loss };
    bwsweep(&plan, &sweep, a.target.json, figures, stop)
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

/// Trials of a search at most; the search also stops once the bracket is within 1%.
const MAX_TRIALS: usize = 14;
/// Trials run again because their sender stalled, at most, over a whole search.
const MAX_STALL_RETRIES: usize = 6;

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

/// One trial at the paced `rate`: its whole result, with its step record (`--step-cmd`).
fn trial(plan: &TcpPlan, rate: u64, stop: &StopFlag) -> Result<TestResult> {
    let p = trial_plan(plan, rate);
    let step = p.step.begin(&p.client);
    let mut run = crate::console::around(&p, stop, || client::run(&p.client, stop, &mut |_| {}))?;
    step.end(run.result.as_mut());
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
            let run = crate::console::around(&p, stop, || client::run(&p.client, stop, &mut |_| {}))?;
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
    let mut stalls = 0;
    let mut n = 0;
    while n < MAX_TRIALS {
        n += 1;
        progress.set_current(format!("trial {n}: {}", format_si(rate as f64, "bit/s")));
        reporters.emit(progress, |r| r.on_start(&crate::single_run::test_info(&trial_plan(plan, rate))))?;
        let t = trial(plan, rate, stop)?;
        reporters.emit(progress, |r| r.on_finish(&t))?;
        let verdict = max_rate::verdict(&t, loss_percent);
        if verdict == max_rate::Verdict::SenderStalled && stalls < MAX_STALL_RETRIES {
            // The rate was not offered as paced: run it again, not counted as a trial of
            // the search; past the retries the machine cannot test it, and it fails.
            stalls += 1;
            n -= 1;
            results.push(t);
            continue;
        }
        let pass = verdict.passed();
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

/// A rate sweep's rates and its knee threshold.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sweep {
    pub(crate) from: u64,
    pub(crate) to: u64,
    pub(crate) step: u64,
    /// `--knee-loss`, in percent.
    pub(crate) knee_loss_percent: f64,
}

/// `--knee-loss PCT`: a percentage from 0 to 100, with or without its `%`.
fn knee_loss_percent(text: &str) -> Result<f64> {
    let pct = text.trim().trim_end_matches('%').trim().parse::<f64>().ok().filter(|p| (0.0..100.0).contains(p));
    pct.ok_or_else(|| anyhow::anyhow!("--knee-loss {text}: expected a loss share from 0 to under 100%, like 0.1%"))
}

/// `netchar suite bwsweep`: every rate from `from` to `to` by `step`, up then down; per rate
/// the achieved rate, loss and jitter, and the knee: the first rate of a direction whose loss
/// is above the threshold, marked in the step's record as in the table.
pub(crate) fn bwsweep(plan: &TcpPlan, sweep: &Sweep, json: bool, figures: &FigureFiles, stop: &StopFlag) -> Result<u8> {
    let Sweep { from, to, step, knee_loss_percent } = *sweep;
    anyhow::ensure!(step > 0 && from > 0 && from <= to, "--from, --to, --step: need 0 < from <= to and step > 0");
    let trials = 2 * ((to - from) / step + 1);
    let progress = Progress::start(json, true, trial_length(plan).map(|t| t * trials as u32));
    let table = SweepTableReporter::new(to).with_knee_loss(knee_loss_percent);
    let mut reporters = suite_reporters(json, Box::new(table), figures);
    let mut results = Vec::new();
    for (direction, name) in [(Direction::Up, "up (client sends)"), (Direction::Down, "down (server sends)")] {
        let mut p = plan.clone();
        p.client.spec.direction = direction;
        let mut rate = from;
        let mut knee_found = false;
        while rate <= to {
            if stop.is_raised() {
                anyhow::bail!("interrupted");
            }
            progress.set_current(format!("{name}: {}", format_si(rate as f64, "bit/s")));
            reporters.emit(&progress, |r| r.on_start(&crate::single_run::test_info(&p)))?;
            let mut t = trial(&p, rate, stop)?;
            let knee = !knee_found && netchar_report::sweep::step_loss_percent(&t) > knee_loss_percent;
            knee_found |= knee;
            let record = t.step.get_or_insert_with(Default::default);
            record.knee_loss_percent = Some(knee_loss_percent);
            record.knee = knee;
            reporters.emit(&progress, |r| r.on_finish(&t))?;
            results.push(t);
            rate += step;
        }
    }
    reporters.emit(&progress, |r| r.on_job_end(&results))?;
    Ok(0)
}

/// One trial's length, if timed: the progress line's estimate of what is left.
pub(crate) fn trial_length(plan: &TcpPlan) -> Option<std::time::Duration> {
    match plan.client.spec.end {
        EndCondition::Seconds(s) => Some(std::time::Duration::from_secs_f64(s)),
        EndCondition::Bytes(_) => None,
    }
}

/// Runs one variant of `base` (a TCP or UDP plan), returning its result.
pub(crate) fn run_variant(
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
    let step = p.step.begin(&p.client);
    let mut run = crate::console::around(&p, stop, || client::run(&p.client, stop, &mut |_| {}))?;
    step.end(run.result.as_mut());
    let r = match (run.result, run.error) {
        (Some(r), None) => r,
        (_, Some(e)) => return Err(e.into()),
        (None, None) => anyhow::bail!("the test produced no result"),
    };
    reporters.emit(progress, |rep| rep.on_finish(&r))?;
    Ok(r)
}

/// `suite sizes`' block sizes besides the full-frame payloads: small writes, and large ones.
const SIZES: [u64; 7] = [64, 256, 512, 1024, 4096, 16384, 65507];
/// A standard Ethernet MTU, and a jumbo frame's.
const MTUS: [u32; 2] = [1500, 9000];

/// The block sizes `suite sizes` runs over each protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SizeLists {
    tcp: Vec<u64>,
    udp: Vec<u64>,
    /// UDP sizes left out: their datagrams are larger than the path's MTU (they would leave
    /// fragmented).
    udp_above_mtu: Vec<u64>,
}

/// `listed` (-b), or the default list with the payloads of full frames: TCP's (with
/// timestamps, 32 bytes of TCP header) and UDP's, for a 1500-byte MTU and, where the path
/// `mtu` takes one, a 9000-byte jumbo frame. UDP sizes whose datagram is larger than `mtu`
/// are left out. `ipv6`: 40 bytes of IP header rather than 20.
fn size_lists(listed: Option<&[u64]>, mtu: Option<u32>, ipv6: bool) -> SizeLists {
    let ip: u64 = if ipv6 { 40 } else { 20 };
    let sizes = match listed {
        Some(l) => l.to_vec(),
        None => {
            let mut v = SIZES.to_vec();
            for frame in MTUS.into_iter().filter(|&m| m == MTUS[0] || mtu.is_some_and(|p| p >= m)) {
                v.extend([u64::from(frame) - ip - 32, u64::from(frame) - ip - 8]);
            }
            v.sort_unstable();
            v
        }
    };
    let fits = |s: &u64| mtu.is_none_or(|m| s + ip + 8 <= u64::from(m));
    let (udp, udp_above_mtu) = sizes.iter().partition(|s| fits(s));
    SizeLists { tcp: sizes, udp, udp_above_mtu }
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

/// `netchar suite sizes`: the flags to plans, the sizes the path takes, then the sweep.
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
    let lists = size_lists(listed.as_deref(), path.map(|p| p.0), path.is_some_and(|p| p.1));
    let progress = Progress::start(
        a.target.json,
        true,
        trial_length(&tcp).map(|t| t * (lists.tcp.len() + lists.udp.len()) as u32),
    );
    if let (Some((mtu, _)), false) = (path, lists.udp_above_mtu.is_empty()) {
        let skipped: Vec<String> = lists.udp_above_mtu.iter().map(u64::to_string).collect();
        progress.suspend(|| {
            eprintln!(
                "netchar: suite sizes: UDP {} bytes skipped: larger datagrams than the path's MTU of {mtu} bytes",
                skipped.join(", ")
            )
        });
    }
    sizes(&tcp, &udp, &lists, a.target.json, figures, &progress, stop)
}

/// `netchar suite sizes`: stackthru's block-size sweep over TCP and UDP (client sends):
/// real and system time, MB/s (2^20), Mbit/s (10^6) and frames/s; with -n, a transfer of
/// that many bytes per size, the last block shorter (stackthru's X-Block) where the size
/// does not divide it.
fn sizes(
    tcp: &TcpPlan,
    udp: &TcpPlan,
    lists: &SizeLists,
    json: bool,
    figures: &FigureFiles,
    progress: &Progress,
    stop: &StopFlag,
) -> Result<u8> {
    let mut reporters = suite_reporters(json, Box::<SizesTableReporter>::default(), figures);
    let mut results = Vec::new();
    for (name, plan, sizes) in [("TCP", tcp, &lists.tcp), ("UDP", udp, &lists.udp)] {
        for &size in sizes {
            let pattern = match (plan.client.spec.end, name) {
                (EndCondition::Bytes(n), "UDP") => match transfer_datagrams(n, size) {
                    Ok(p) => Some(p),
                    Err(why) => {
                        progress.suspend(|| eprintln!("netchar: suite sizes: UDP {size} bytes skipped: {why}"));
                        continue;
                    }
                },
                _ => None,
            };
            progress.set_current(format!("{name}, {size} bytes"));
            let r = run_variant(
                plan,
                |s| {
                    s.block_bytes = size;
                    s.direction = Direction::Up;
                    if let Some(u) = s.udp.as_mut() {
                        u.rate = UdpRate::Unlimited;
                        u.pattern = pattern;
                    }
                },
                stop,
                &mut reporters,
                progress,
            )?;
            anyhow::ensure!(r.summary.up.is_some(), "no up flow");
            results.push(r);
        }
    }
    reporters.emit(progress, |r| r.on_job_end(&results))?;
    Ok(0)
}

/// The datagrams of a UDP transfer of `total` bytes in blocks of `size`: the whole blocks,
/// then one datagram of what is left (stackthru's X-Block). A remainder under netchar's
/// datagram header cannot be sent as a datagram of its own.
fn transfer_datagrams(total: u64, size: u64) -> Result<netchar_model::Pattern, String> {
    let (blocks, rest) = (total / size, total % size);
    let header = netchar_model::spec::UDP_HEADER_BYTES;
    if rest > 0 && rest < header {
        return Err(format!("-n leaves a last block of {rest} bytes, under netchar's {header}-byte datagram header"));
    }
    let sizes = [(blocks, size), (1, rest)].into_iter().filter(|&(n, s)| n > 0 && s > 0).collect();
    Ok(netchar_model::Pattern { sizes, ..Default::default() })
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
    fn the_size_list_follows_the_paths_mtu() {
        // A standard Ethernet path: the full-frame payloads of 1500, no jumbo sizes, and the
        // UDP sizes whose datagrams would leave fragmented left out.
        let eth = size_lists(None, Some(1500), false);
        assert_eq!(eth.tcp, [64, 256, 512, 1024, 1448, 1472, 4096, 16384, 65507]);
        assert_eq!(eth.udp, [64, 256, 512, 1024, 1448, 1472]);
        assert_eq!(eth.udp_above_mtu, [4096, 16384, 65507]);
        // Jumbo frames: their payloads join the list; IPv6 has 20 bytes more of header.
        let jumbo = size_lists(None, Some(9000), true);
        assert_eq!(jumbo.tcp, [64, 256, 512, 1024, 1428, 1452, 4096, 8928, 8952, 16384, 65507]);
        assert_eq!(jumbo.udp_above_mtu, [16384, 65507]);
        // Loopback (65536) takes every size; an unknown MTU leaves the list as it is.
        assert!(size_lists(None, Some(65536), false).udp_above_mtu.is_empty());
        let unknown = size_lists(Some(&[100, 70000]), None, false);
        assert_eq!((unknown.tcp.len(), unknown.udp.len()), (2, 2));
    }

    #[test]
    fn a_udp_transfer_is_its_whole_blocks_and_the_rest() {
        let p = transfer_datagrams(256 << 20, 1448).unwrap();
        assert_eq!(p.sizes, [(185_383, 1448), (1, 872)]);
        assert_eq!(transfer_datagrams(4096, 1024).unwrap().sizes, [(4, 1024)]);
        assert_eq!(transfer_datagrams(100, 1024).unwrap().sizes, [(1, 100)]);
        let short = transfer_datagrams(1034, 1024).unwrap_err();
        assert!(short.contains("last block of 10 bytes"), "{short}");
    }

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
