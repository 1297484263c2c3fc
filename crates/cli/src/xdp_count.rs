//! `netchar xdp-count IFACE -p PORT`: an XDP program on IFACE counts and drops the UDP
//! datagrams to PORT in the driver (netchar_sys::xdp_count), everything else passes. The
//! receiving end of a packet-rate test into a sink, counted at the earliest point a host can
//! count: the count an AF_XDP sender's (`--xdp`) or the kernel path's datagrams are checked
//! against. It runs until `-t` passes or Ctrl-C, then prints the totals; the program is
//! detached on every way out (its BPF link closes with the process).

use crate::exit;
use anyhow::Result;
use clap::Args;
use netchar_engine::StopFlag;
use std::io::Write;
use std::time::{Duration, Instant};

/// `netchar xdp-count`.
#[derive(Debug, Args)]
pub(crate) struct XdpCountArgs {
    /// The interface the datagrams arrive on.
    #[arg(value_name = "IFACE")]
    pub(crate) interface: String,
    /// The UDP destination port to count and drop.
    #[arg(short = 'p', long)]
    pub(crate) port: u16,
    /// Seconds to count (default: until Ctrl-C).
    #[arg(short = 't', long, value_name = "SECS")]
    pub(crate) time: Option<String>,
    /// Print the totals as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

/// How often the wait checks the stop flag and the time.
const TICK: Duration = Duration::from_millis(50);

pub(crate) fn run(a: &XdpCountArgs, stop: &StopFlag) -> Result<u8> {
    let seconds = match &a.time {
        Some(t) => Some(crate::flags::seconds("-t", t).map_err(|e| anyhow::anyhow!("{e}"))?),
        None => None,
    };
    if seconds.is_some_and(|s| s <= 0.0) {
        eprintln!("netchar: -t {}: give a positive number of seconds", a.time.as_deref().unwrap_or(""));
        return Ok(exit::ERROR);
    }
    let counter = match netchar_sys::xdp_count::XdpCounter::attach(&a.interface, a.port) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("netchar: {e}");
            return Ok(exit::ERROR);
        }
    };
    let mode = counter.mode().name();
    let started = Instant::now();
    // Said once attached, so whoever starts the senders knows the count has begun.
    eprintln!(
        "netchar xdp-count: counting and dropping UDP to port {} on {} ({mode} XDP); {}",
        a.port,
        a.interface,
        seconds.map_or("Ctrl-C ends".to_string(), |s| format!("for {s} s"))
    );
    let until = seconds.map(|s| started + Duration::from_secs_f64(s));
    while !stop.is_raised() && until.is_none_or(|u| Instant::now() < u) {
        std::thread::sleep(TICK);
    }
    let c = counter.counts()?;
    let elapsed = started.elapsed().as_secs_f64();
    drop(counter);
    let mut out = std::io::stdout().lock();
    if a.json {
        let v = serde_json::json!({
            "interface": a.interface,
            "port": a.port,
            "mode": mode,
            "packets": c.packets,
            "bytes": c.bytes,
            "seconds": elapsed,
        });
        writeln!(out, "{v}")?;
    } else {
        writeln!(
            out,
            "{}: {} datagrams, {} bytes (Ethernet frames) of UDP to port {}, dropped in the driver ({mode} XDP) in {elapsed:.3} s",
            a.interface, c.packets, c.bytes, a.port
        )?;
    }
    // Without -t, Ctrl-C is the way it ends; with -t, an interrupted count is cut short.
    Ok(if stop.is_raised() && seconds.is_some() { exit::INTERRUPTED } else { exit::OK })
}
