//! Latency under load (`netchar rr --under-load`): request/response latency measured idle,
//! then again while a throughput test runs beside it on the same path. The difference is the
//! queueing the load causes (bufferbloat), the figure crusader and flent's RRUL report.
//!
//! Three tests in sequence and in parallel: the idle rr test; then the load test, and, once
//! the load has run for a second, the loaded rr test as its companion (the server admits a
//! companion beside the test it accompanies even when it admits one test at a time).

use crate::client::{self, ClientConfig, ClientError, ClientRun};
use crate::StopFlag;
use netchar_model::{Direction, EndCondition, IntervalRecord, TestResult, TestSpec, UdpRate};
use std::sync::mpsc;
use std::time::Duration;

/// The throughput test that loads the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Load {
    /// TCP, client to server.
    TcpUp,
    /// TCP, server to client.
    TcpDown,
    /// TCP, both ways.
    TcpBidir,
    /// UDP client to server at this many bit/s.
    UdpUp(u64),
}

impl Load {
    /// Parses `tcp-up`, `tcp-down`, `tcp-bidir`, `udp-up:RATE`.
    pub fn parse(s: &str) -> Result<Self, String> {
        Ok(match s {
            "tcp-up" => Self::TcpUp,
            "tcp-down" => Self::TcpDown,
            "tcp-bidir" => Self::TcpBidir,
            _ => match s.strip_prefix("udp-up:") {
                Some(rate) => Self::UdpUp(netchar_model::units::parse_bit_rate(rate).map_err(|e| e.to_string())?),
                None => return Err("expected tcp-up, tcp-down, tcp-bidir or udp-up:RATE".into()),
            },
        })
    }

    fn spec(self, seconds: f64) -> TestSpec {
        let mut spec = match self {
            Self::UdpUp(rate) => {
                let mut s = TestSpec::udp_default();
                s.udp.as_mut().expect("UDP spec").rate =
                    if rate == 0 { UdpRate::Unlimited } else { UdpRate::BitsPerSecond(rate) };
                s
            }
            _ => TestSpec::tcp_default(),
        };
        spec.direction = match self {
            Self::TcpDown => Direction::Down,
            Self::TcpBidir => Direction::Bidir,
            _ => Direction::Up,
        };
        spec.end = EndCondition::Seconds(seconds);
        spec.interval_seconds = 0.0;
        spec
    }
}

/// How long the load runs before and after the loaded latency phase.
const LOAD_MARGIN: Duration = Duration::from_secs(1);

/// Runs the idle phase, then the loaded phase with its load, and merges them into one result:
/// the loaded rr result with `summary.rr_idle`, `summary.rr_loaded` and `summary.load`.
pub fn run(rr: &ClientConfig, load: Load, stop: &StopFlag, on_interval: &mut dyn FnMut(&IntervalRecord)) -> ClientRun {
    let EndCondition::Seconds(seconds) = rr.spec.end else {
        let e = ClientError::Stream("--under-load needs a duration (-t), not a transaction count".into());
        return ClientRun::failed(e);
    };
    let idle = client::run(rr, stop, on_interval);
    if idle.error.is_some() || stop.is_raised() {
        return idle;
    }
    let (tx, rx) = mpsc::channel();
    let mut load_cfg = rr.clone();
    load_cfg.spec = load.spec(seconds + 2.0 * LOAD_MARGIN.as_secs_f64());
    load_cfg.spec.server_cpu = None;
    load_cfg.cookie_tx = Some(tx);
    let load_stop = stop.clone();
    let load_thread = std::thread::spawn(move || client::run(&load_cfg, &load_stop, &mut |_| {}));
    let loaded = match rx.recv_timeout(rr.connect_timeout + rr.timeouts.phase) {
        Ok(cookie) => {
            std::thread::sleep(LOAD_MARGIN);
            let mut cfg = rr.clone();
            cfg.companion = Some(cookie);
            client::run(&cfg, stop, on_interval)
        }
        Err(_) => ClientRun::failed(ClientError::Stream("the load test did not start".into())),
    };
    let load_run = load_thread
        .join()
        .unwrap_or_else(|_| ClientRun::failed(ClientError::Stream("the load test's thread failed".into())));
    merge(idle, loaded, load_run)
}

fn merge(idle: ClientRun, loaded: ClientRun, load: ClientRun) -> ClientRun {
    let error = loaded.error.or(load.error);
    let Some(mut result): Option<TestResult> = loaded.result else {
        return ClientRun { result: idle.result, error, clock_zero: idle.clock_zero };
    };
    result.summary.rr_idle = idle.result.and_then(|r| r.summary.rr);
    result.summary.rr_loaded = result.summary.rr.clone();
    result.summary.load = load.result.map(|r| Box::new(r.summary));
    if let (Some(e), None) = (&error, &result.error) {
        result.error = Some(e.to_string());
    }
    // The result is the loaded phase's: so is its clock.
    ClientRun { result: Some(result), error, clock_zero: loaded.clock_zero }
}
