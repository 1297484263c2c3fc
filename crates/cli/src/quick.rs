//! `netchar` with no arguments: an in-process server on 127.0.0.1 and a short
//! characterization against it (TCP up, down, bidir; UDP paced at 1 Gbit/s and at maximum
//! rate; TCP and UDP request/response latency), printed as two tables.

fn tcp(direction: Direction) -> TestSpec {
    TestSpec { direction, ..TestSpec::tcp_default() }
}

use crate::plan::seconds;
use anyhow::{Context, Result};
use netchar_engine::client::{self, ClientConfig};
use netchar_engine::server::{Server, ServerConfig};
use netchar_engine::StopFlag;
use netchar_model::units::RateFormat;
use netchar_model::{Direction, EndCondition, TestSpec, UdpRate};
use netchar_wire::session::Timeouts;
use std::io::Write;
use std::time::Duration;

pub(crate) fn run(time: &str, json: bool, stop: &StopFlag) -> Result<u8> {
    let secs = seconds("-t", time)?;
    let server_stop = StopFlag::new();
    let server = Server::bind(ServerConfig::new("127.0.0.1:0".parse().expect("literal address")))
        .context("cannot start the in-process server on 127.0.0.1")?;
    let addr = server.local_addr()?;
    let handle = {
        let s = server_stop.clone();
        std::thread::spawn(move || server.run(&s, |_| {}))
    };
    eprintln!("netchar {}: quick characterization against an in-process server on {addr}", env!("CARGO_PKG_VERSION"));
    let mut rows = Vec::new();
    let mut failed = None;
    let mut udp_paced = TestSpec::udp_default();
    udp_paced.udp.as_mut().expect("UDP spec").rate = UdpRate::BitsPerSecond(1_000_000_000);
    let mut udp_max = TestSpec::udp_default();
    udp_max.udp.as_mut().expect("UDP spec").rate = UdpRate::Unlimited;
    let mut udp_rr = TestSpec::rr_default();
    udp_rr.rr.as_mut().expect("rr spec").udp = true;
    let plan = [
        ("tcp up", tcp(Direction::Up)),
        ("tcp down", tcp(Direction::Down)),
        ("tcp bidir", tcp(Direction::Bidir)),
        ("udp 1G", udp_paced),
        ("udp max", udp_max),
        ("tcp rr", TestSpec::rr_default()),
        ("udp rr", udp_rr),
    ];
    for (name, mut spec) in plan {
        if stop.is_raised() {
            break;
        }
        spec.end = EndCondition::Seconds(secs);
        spec.interval_seconds = 0.0;
        let mut check = spec.clone();
        check.block_bytes = check.block_bytes.max(1472);
        check.validate()?;
        eprintln!("  running {name} for {secs} s ...");
        let cfg = ClientConfig {
            host: addr.ip().to_string(),
            port: addr.port(),
            family: None,
            spec,
            connect_timeout: Duration::from_secs(5),
            busy_wait: Duration::from_secs(5),
            client_cpu: None,
            title: Some(name.to_string()),
            timeouts: Timeouts::default(),
            companion: None,
            cookie_tx: None,
            auth: None,
            protocol: Default::default(),
        };
        let run = client::run(&cfg, stop, &mut |_| {});
        if let Some(e) = run.error {
            failed.get_or_insert(format!("{name}: {e}"));
        }
        if let Some(r) = run.result {
            rows.push((name.to_string(), r));
        }
    }
    server_stop.raise();
    let _ = handle.join();
    let mut out = std::io::stdout().lock();
    if json {
        let results: Vec<_> = rows.iter().map(|(_, r)| r.clone()).collect();
        out.write_all(netchar_report::json::many_to_json(&results).as_bytes())?;
    } else {
        out.write_all(netchar_report::text::quick_table(&rows, RateFormat::AutoBits).as_bytes())?;
        writeln!(out, "(one machine, loopback: sender, receiver and the kernel share its CPUs; see `netchar tcp --help` for real tests)")?;
    }
    match failed {
        Some(e) => {
            eprintln!("netchar: error: {e}");
            Ok(if stop.is_raised() { 130 } else { 2 })
        }
        None => Ok(0),
    }
}
