//! `netchar` with no arguments: an in-process server on 127.0.0.1 and a short
//! characterization against it (TCP up, down, bidir; UDP paced at 1 Gbit/s and at maximum
//! rate; TCP and UDP request/response latency), printed as two tables, or with `--json` as
//! one array of the results (each test's name in `test.title`).

use crate::figure_files::FigureFiles;
use crate::flags::seconds;
use crate::progress::Progress;
use crate::reporters::Reporters;
use anyhow::{Context, Result};
use netchar_engine::client::{self, ClientConfig};
use netchar_engine::server::{Server, ServerConfig};
use netchar_engine::StopFlag;
use netchar_model::units::RateFormat;
use netchar_model::{Direction, EndCondition, TestSpec, UdpRate};
use netchar_report::json::JobJsonReporter;
use netchar_report::quick::QuickTableReporter;
use std::time::Duration;

fn tcp(direction: Direction) -> TestSpec {
    TestSpec { direction, ..TestSpec::tcp_default() }
}

/// Interval records every quarter of a test (0.1 s to 1 s): not printed, but kept in the
/// JSON and drawn by `--plot` and `--report` as throughput over time.
fn interval_for(secs: f64) -> f64 {
    (secs / 4.0).clamp(0.1, 1.0)
}

pub(crate) fn run(time: &str, json: bool, figures: &FigureFiles, stop: &StopFlag) -> Result<u8> {
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
    let mut reporters = if json {
        Reporters::of(Box::new(JobJsonReporter))
    } else {
        Reporters::of(Box::new(QuickTableReporter::new(RateFormat::AutoBits)))
    }
    .with_figures(figures);
    let mut results = Vec::new();
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
    let mut progress = Progress::start(json, true, Some(Duration::from_secs_f64(secs) * plan.len() as u32));
    for (name, mut spec) in plan {
        if stop.is_raised() {
            break;
        }
        spec.end = EndCondition::Seconds(secs);
        spec.interval_seconds = interval_for(secs);
        let mut check = spec.clone();
        check.block_bytes = check.block_bytes.max(1472);
        check.validate()?;
        progress.set_current(name);
        progress.suspend(|| eprintln!("  running {name} for {secs} s ..."));
        let cfg = ClientConfig {
            connect_timeout: Duration::from_secs(5),
            busy_wait: Duration::from_secs(5),
            title: Some(name.to_string()),
            ..ClientConfig::to_server(addr, spec, netchar_engine::protocols::ProtoChoice::Auto)
        };
        reporters.emit(&progress, |r| r.on_start(&crate::single_run::client_test_info(&cfg)))?;
        let run = client::run(&cfg, stop, &mut |_| {});
        if let Some(e) = run.error {
            failed.get_or_insert(format!("{name}: {e}"));
        }
        if let Some(r) = run.result {
            reporters.emit(&progress, |rep| rep.on_finish(&r))?;
            results.push(r);
        }
    }
    server_stop.raise();
    let _ = handle.join();
    // Every test has ended: the line goes before the tables, which print whole.
    progress.finish();
    // The figures measured, also when a test failed: the error follows them on stderr.
    reporters.emit(&progress, |r| r.on_job_end(&results))?;
    match failed {
        Some(e) => {
            eprintln!("netchar: error: {e}");
            Ok(if stop.is_raised() { 130 } else { 2 })
        }
        None => Ok(0),
    }
}
