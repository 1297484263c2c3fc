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
//! test (latency percentiles of the echoes, loss, out-of-sequence); `--json` gives the results.

use crate::args::{CommonArgs, EchoArgs, SuiteArgs, TcpArgs, UdpArgs};
use anyhow::{bail, Result};
use netchar_engine::peers::nc_test::{master_result, run_master, MasterConfig, MasterPlan};
use netchar_engine::StopFlag;
use netchar_model::{Pattern, TestResult};
use netchar_wire::nc_test::{self as wire, Kind, MasterReport, Pause, Sequence};
use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};

/// Is `--proto` one of nc_test's?
pub(crate) fn wanted(proto: &str) -> bool {
    matches!(proto, "nc-test" | "nc6-test")
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
    if !c.expect.is_empty() || c.baseline.is_some() || c.save.is_some() || c.repeat != "1" || c.warmup != "0" {
        bail!("--proto nc-test: --expect, --baseline, --save, --repeat and --warmup are not supported with nc_test yet; use --json and judge the result file");
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
pub(crate) fn echo(a: &EchoArgs, stop: &StopFlag) -> Result<u8> {
    not_applicable(&a.common)?;
    let pattern = Pattern::parse(&a.pattern).map_err(|e| anyhow::anyhow!("--pattern {}: {e}", a.pattern))?;
    let (nbufs, buflen) = counts(&pattern)?;
    let kind = if a.udp { Kind::UdpEcho } else { Kind::TcpEcho };
    single(&a.common, kind, nbufs, buflen, pause_of(&pattern)?, stop)
}

/// `netchar tcp --proto nc-test`.
pub(crate) fn tcp(a: &TcpArgs, stop: &StopFlag) -> Result<u8> {
    not_applicable(&a.common)?;
    if a.bitrate.is_some() || a.window.is_some() || a.mss.is_some() || a.congestion.is_some() || a.zerocopy {
        bail!("--proto nc-test: the slave sets up its own sockets (-b, -w, -M, -C and --zerocopy do not apply)");
    }
    let buflen = if a.length == "128Ki" {
        1024
    } else {
        netchar_model::units::parse_bytes(&a.length).map_err(|e| anyhow::anyhow!("-l {}: {e}", a.length))?
    };
    if buflen == 0 || buflen > u64::from(wire::MAX_BUFLEN) {
        bail!("-l {}: nc_test buffers are 1 to {} bytes", a.length, wire::MAX_BUFLEN);
    }
    let nbufs = match &a.common.bytes {
        Some(b) => netchar_model::units::parse_bytes(b).map_err(|e| anyhow::anyhow!("-n {b}: {e}"))?.div_ceil(buflen),
        None => 640,
    };
    if nbufs == 0 || nbufs > 1_000_000 {
        bail!("-n: nc_test runs 1 to 1000000 buffers");
    }
    let kind = if a.common.reverse { Kind::TcpSend } else { Kind::TcpRecv };
    single(&a.common, kind, nbufs as u32, buflen as u32, Pause::default(), stop)
}

/// `netchar udp --proto nc-test`.
pub(crate) fn udp(a: &UdpArgs, stop: &StopFlag) -> Result<u8> {
    not_applicable(&a.common)?;
    if a.bitrate.is_some() || a.pps.is_some() || a.find_max_rate {
        bail!("--proto nc-test: nc_test senders send as fast as they can (-b, --pps and --find-max-rate do not apply)");
    }
    let pattern = a.pattern.clone().unwrap_or_else(|| "640x1024".into());
    let p = Pattern::parse(&pattern).map_err(|e| anyhow::anyhow!("--pattern {pattern}: {e}"))?;
    let (nbufs, mut buflen) = counts(&p)?;
    if let Some(l) = &a.length {
        buflen = netchar_model::units::parse_bytes(l).map_err(|e| anyhow::anyhow!("-l {l}: {e}"))? as u32;
    }
    let kind = if a.common.reverse { Kind::UdpSend } else { Kind::UdpRecv };
    single(&a.common, kind, nbufs, buflen, pause_of(&p)?, stop)
}

fn single(c: &CommonArgs, kind: Kind, nbufs: u32, buflen: u32, pause: Pause, stop: &StopFlag) -> Result<u8> {
    let slave = resolve(&c.host, c.port, c.ipv4, c.ipv6)?;
    let cfg = MasterConfig {
        slave,
        slave_data_port: c.nc_test_data_port.unwrap_or(wire::DATA_SLAVE_PORT),
        master_data_port: wire::DATA_MASTER_PORT,
        plan: MasterPlan::Single { kind, nbufs, buflen, pause },
    };
    let results = run(&cfg, c.json, stop)?;
    let r = results.first();
    if let (Some(path), Some(r)) = (&c.json_out, r) {
        std::fs::write(path, netchar_report::json::to_json(r))?;
    }
    if c.json {
        if let Some(r) = r {
            std::io::stdout().lock().write_all(netchar_report::json::to_json(r).as_bytes())?;
        }
    }
    Ok(exit_code(&results, stop))
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
pub(crate) fn suite(a: &SuiteArgs, stop: &StopFlag) -> Result<u8> {
    if a.suite != "ecos" {
        bail!("suite {}: --proto {} runs only with the ecos suite", a.suite, a.proto);
    }
    let sequence = match a.proto.as_str() {
        "nc-test" => Sequence::Nc,
        _ => Sequence::Nc6 { tcp: true, udp: true, slave_loads: true, master_loads: true },
    };
    let slave = resolve(&a.host, a.port, false, false)?;
    let cfg = MasterConfig {
        slave,
        slave_data_port: a.nc_test_data_port.unwrap_or(wire::DATA_SLAVE_PORT),
        master_data_port: wire::DATA_MASTER_PORT,
        plan: if a.quick { MasterPlan::QuickSuite(sequence) } else { MasterPlan::Suite(sequence) },
    };
    let results = run(&cfg, a.json, stop)?;
    if a.json {
        std::io::stdout().lock().write_all(netchar_report::json::many_to_json(&results).as_bytes())?;
    }
    Ok(exit_code(&results, stop))
}

/// netchar's own figures under a test's stock lines.
fn figures(r: &MasterReport) -> String {
    let mut parts = Vec::new();
    if !r.rtts.is_empty() {
        let mut v: Vec<f64> = r.rtts.iter().map(|d| d.as_secs_f64() * 1e6).collect();
        v.sort_by(f64::total_cmp);
        let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
        parts.push(format!(
            "rtt us min {:.0} p50 {:.0} p90 {:.0} p99 {:.0} max {:.0}",
            v[0],
            q(0.5),
            q(0.9),
            q(0.99),
            v[v.len() - 1]
        ));
    }
    let (sent, recvd) = (r.sent, r.received);
    let far = r.results.map(|x| (x.nsent, x.nrecvd));
    match (r.kind.slave_receives(), r.kind.slave_sends(), far) {
        (true, true, Some((ns, nr))) => parts.push(format!(
            "buffers: sent {sent}, slave received {nr}, slave sent {ns}, received {recvd}; lost {} (to the slave {}, from it {})",
            sent.saturating_sub(recvd),
            sent.saturating_sub(nr),
            ns.saturating_sub(recvd)
        )),
        (true, false, Some((_, nr))) => parts.push(format!(
            "buffers: sent {sent}, slave received {nr}: lost {} ({:.2}%)",
            sent.saturating_sub(nr),
            pct(sent.saturating_sub(nr), sent)
        )),
        (false, true, Some((ns, _))) => parts.push(format!(
            "buffers: slave sent {ns}, received {recvd}: lost {} ({:.2}%)",
            ns.saturating_sub(recvd),
            pct(ns.saturating_sub(recvd), ns)
        )),
        _ => parts.push(format!("buffers: sent {sent}, received {recvd}, no results record from the slave")),
    }
    parts.push(format!("out of sequence {}", r.seq_errors));
    if r.bad > 0 {
        parts.push(format!("bad {}", r.bad));
    }
    format!("    netchar: {}\n", parts.join("; "))
}

fn pct(a: u32, b: u32) -> f64 {
    if b == 0 {
        0.0
    } else {
        100.0 * f64::from(a) / f64::from(b)
    }
}

fn run(cfg: &MasterConfig, json: bool, stop: &StopFlag) -> Result<Vec<TestResult>> {
    let out = std::cell::RefCell::new(std::io::stdout().lock());
    let mut on_line = |l: &str| {
        if !json {
            let mut o = out.borrow_mut();
            let _ = writeln!(o, "{l}");
            let _ = o.flush();
        }
    };
    let mut on_report = |r: &MasterReport| {
        if !json {
            let mut o = out.borrow_mut();
            let _ = o.write_all(figures(r).as_bytes());
            let _ = o.flush();
        }
    };
    let run = run_master(cfg, stop, &mut on_line, &mut on_report);
    let mut results: Vec<TestResult> =
        run.reports.iter().map(|r| master_result(cfg, r, &run.started_at, None)).collect();
    if let Some(e) = &run.error {
        eprintln!("netchar: error: {e}");
        match results.last_mut() {
            Some(last) => {
                last.error.get_or_insert_with(|| e.clone());
            }
            None => bail!("{e}"),
        }
    }
    results.iter().for_each(crate::report::keep);
    Ok(results)
}
