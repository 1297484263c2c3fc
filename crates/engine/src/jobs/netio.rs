//! `netchar suite netio` as a job: netio's block-size table, over netchar's own protocol or as
//! the client of a netio server, from one typed [`NetioPlan`] (sizes, protocols, Tx only, each
//! test's length).
//!
//! - Over netchar's own protocol ([`run_native`]): for each size, each leg of the table (TCP
//!   and UDP as asked, client to server, then back unless Tx only) is one netchar test, run by
//!   the caller's runner (the client driver, with the caller's console and step commands).
//! - As the client of a netio server ([`run_peer`]): netio's own sequence, a protocol after the
//!   other, each size one session of netio's client (crate::peers::netio::NetioControl) run by
//!   the one client driver (crate::client), a result per size as it ends.
//!
//! Either way the job says what runs and hands each result to a [`NetioSink`] as it comes; the
//! caller prints through its reporters. The job never prints.

use crate::client::{ClientConfig, ClientError};
use crate::protocols::{ProtoChoice, Protocol};
use crate::StopFlag;
use netchar_model::{Direction, EndCondition, Flow, TestInfo, TestKind, TestResult, TestSpec, UdpRate};
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

/// What `suite netio` runs, in either mode.
#[derive(Debug, Clone, PartialEq)]
pub struct NetioPlan {
    /// Block sizes, in order (each within netio's largest block).
    pub sizes: Vec<u32>,
    /// The TCP legs.
    pub tcp: bool,
    /// The UDP legs.
    pub udp: bool,
    /// Client to server only (a sink server).
    pub tx_only: bool,
    /// Each test's length (netchar's own), or each direction's (netio's Tx).
    pub seconds: f64,
}

/// One leg of netio's table: a protocol, one way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leg {
    /// TCP or UDP.
    pub kind: TestKind,
    /// Client to server (netio's Tx) or back (Rx).
    pub flow: Flow,
}

impl Leg {
    /// Every leg, in netio's order: TCP-tx, TCP-rx, UDP-tx, UDP-rx.
    pub const ALL: [Leg; 4] = [
        Leg { kind: TestKind::Tcp, flow: Flow::Up },
        Leg { kind: TestKind::Tcp, flow: Flow::Down },
        Leg { kind: TestKind::Udp, flow: Flow::Up },
        Leg { kind: TestKind::Udp, flow: Flow::Down },
    ];

    /// As netio's table heads it: `TCP-tx`.
    pub fn label(self) -> String {
        let way = if self.flow == Flow::Up { "tx" } else { "rx" };
        format!("{}-{way}", self.kind.name().to_uppercase())
    }
}

impl NetioPlan {
    /// The legs the plan runs, in netio's order.
    pub fn legs(&self) -> Vec<Leg> {
        Leg::ALL
            .into_iter()
            .filter(|l| if l.kind == TestKind::Tcp { self.tcp } else { self.udp })
            .filter(|l| l.flow == Flow::Up || !self.tx_only)
            .collect()
    }

    /// The netchar test of `size` on `leg`, from its protocol's base test: netio's blocks,
    /// one way, UDP as fast as it goes (netio sends flat out).
    pub fn native_spec(size: u32, leg: Leg, base: &TestSpec) -> TestSpec {
        let mut spec = base.clone();
        spec.block_bytes = u64::from(size);
        spec.direction = if leg.flow == Flow::Up { Direction::Up } else { Direction::Down };
        if let Some(u) = spec.udp.as_mut() {
            u.rate = UdpRate::Unlimited;
        }
        spec
    }

    /// How long the sequence against a netio server takes: each size sends for the plan's
    /// length, then (unless Tx only) receives for netio's own interval, per protocol.
    pub fn peer_duration(&self) -> Duration {
        let rx = if self.tx_only { Duration::ZERO } else { netchar_wire::netio::INTERVAL };
        let protocols = u32::from(self.tcp) + u32::from(self.udp);
        (Duration::from_secs_f64(self.seconds) + rx) * (self.sizes.len() as u32 * protocols)
    }
}

/// Where a netio job's tests go as they run.
pub trait NetioSink {
    /// The test now running, in a few words (`1024 bytes, TCP-tx`), for a progress line.
    fn running(&mut self, what: &str);
    /// A protocol's sequence against a netio server begins: the test it runs.
    fn started(&mut self, info: &TestInfo) -> io::Result<()>;
    /// A size's result against a netio server, as it ends (its line).
    fn finished(&mut self, result: &TestResult) -> io::Result<()>;
}

/// Over netchar's own protocol: each size, each leg, one test run by `run_test` with the
/// spec of [`NetioPlan::native_spec`] from `tcp_base` or `udp_base` (the caller's runner
/// reports each result). The results in order, or the first test's error.
pub fn run_native<E>(
    plan: &NetioPlan,
    tcp_base: &TestSpec,
    udp_base: &TestSpec,
    sink: &mut dyn NetioSink,
    run_test: &mut dyn FnMut(TestSpec) -> Result<TestResult, E>,
) -> Result<Vec<TestResult>, E> {
    let mut results = Vec::new();
    for &size in &plan.sizes {
        for leg in plan.legs() {
            let base = if leg.kind == TestKind::Tcp { tcp_base } else { udp_base };
            sink.running(&format!("{size} bytes, {}", leg.label()));
            results.push(run_test(NetioPlan::native_spec(size, leg, base))?);
        }
    }
    Ok(results)
}

/// A netio server and how to reach it.
#[derive(Debug, Clone)]
pub struct NetioServer {
    /// The protocol its client speaks (the registry's netio entry).
    pub protocol: Protocol,
    /// Its TCP test port's address (the UDP test's control is this port plus one).
    pub addr: SocketAddr,
    /// Rx gives up on a size after this long without data, and the rest runs Tx only.
    pub rx_timeout: Duration,
    /// Limit for the TCP connect.
    pub connect_timeout: Duration,
}

impl NetioServer {
    /// The client's settings for one size of `udp`'s sequence: its test (netio's blocks, both
    /// ways or Tx only, the plan's Tx length) against the server's port (UDP: port+1, its UDP
    /// test's control), Rx's silence limit the Rx timeout.
    pub fn session(&self, plan: &NetioPlan, size: u32, udp: bool, tx_only: bool) -> ClientConfig {
        let mut spec = if udp { TestSpec::udp_default() } else { TestSpec::tcp_default() };
        spec.direction = if tx_only { Direction::Up } else { Direction::Bidir };
        spec.block_bytes = u64::from(size);
        spec.end = EndCondition::Seconds(plan.seconds);
        spec.interval_seconds = 0.0;
        if let Some(u) = spec.udp.as_mut() {
            // netio sends flat out.
            u.rate = UdpRate::Unlimited;
        }
        let port = if udp { self.addr.port().saturating_add(1) } else { self.addr.port() };
        let timeouts = netchar_wire::session::Timeouts { silence: self.rx_timeout, ..Default::default() };
        ClientConfig {
            connect_timeout: self.connect_timeout,
            timeouts,
            ..ClientConfig::new(self.addr.ip().to_string(), port, spec, ProtoChoice::Only(self.protocol))
        }
    }
}

/// What a job against a netio server came to.
#[derive(Debug, Default)]
pub struct PeerRun {
    /// A result per size and protocol that ran (those of a failed protocol carry its error).
    pub results: Vec<TestResult>,
    /// Why the sequence stopped early, if it did.
    pub error: Option<ClientError>,
}

/// As the client of a netio server: TCP's sequence then UDP's (those the plan asks for), each
/// size a session of its own run by the client driver, its result to `sink` as it ends. A size
/// whose Rx phase heard nothing (a sink server) runs the rest Tx only, as netio's client
/// does. A size that fails ends the job with its error, the sizes that ran kept with it. A
/// sink that cannot write does not stop the test: its first error is returned once the
/// protocol's sequence is over.
pub fn run_peer(
    plan: &NetioPlan,
    server: &NetioServer,
    stop: &StopFlag,
    sink: &mut dyn NetioSink,
) -> io::Result<PeerRun> {
    let mut run = PeerRun::default();
    for udp in [false, true].into_iter().filter(|&udp| if udp { plan.udp } else { plan.tcp }) {
        let (results, error) = peer_protocol(plan, server, udp, stop, sink)?;
        run.results.extend(results);
        if error.is_some() {
            run.error = error;
            break;
        }
    }
    Ok(run)
}

/// One protocol's sizes against a netio server, each size's result as it ends: the results,
/// with the run's error (the sizes that ran are kept, the error on each).
fn peer_protocol(
    plan: &NetioPlan,
    server: &NetioServer,
    udp: bool,
    stop: &StopFlag,
    sink: &mut dyn NetioSink,
) -> io::Result<(Vec<TestResult>, Option<ClientError>)> {
    let proto = if udp { "UDP" } else { "TCP" };
    let Some(&first) = plan.sizes.first() else { return Ok((Vec::new(), None)) };
    let first_cfg = server.session(plan, first, udp, plan.tx_only);
    sink.started(&TestInfo {
        spec: first_cfg.spec.clone(),
        remote: server.addr.to_string(),
        family: if server.addr.is_ipv4() { "ipv4" } else { "ipv6" }.into(),
        title: None,
        client_cpu: None,
        concurrent_tests: 1,
        protocol: server.protocol.name().into(),
        peer_software: None,
        far_end: Default::default(),
        caveats: Vec::new(),
    })?;
    let mut tx_only = plan.tx_only;
    let mut results: Vec<TestResult> = Vec::new();
    let mut failed = None;
    for (done, &size) in plan.sizes.iter().enumerate() {
        sink.running(&format!("{} of {}: {size} bytes, {proto}", done + 1, plan.sizes.len()));
        let cfg = server.session(plan, size, udp, tx_only);
        let outcome = crate::client::run(&cfg, stop, &mut |_| {});
        if let Some(error) = outcome.error {
            // netio's client reports the sizes it finished; the failed one is the error's.
            for r in &mut results {
                r.error.get_or_insert_with(|| error.to_string());
            }
            return failed.map_or(Ok((results, Some(error))), Err);
        }
        let Some(result) = outcome.result else { continue };
        // Rx heard nothing within the limit: the server is a sink, the rest runs Tx only.
        let received = result.streams.iter().any(|s| s.flow == Flow::Down && s.role == netchar_model::Role::Receiver);
        if !tx_only && !received {
            tx_only = true;
        }
        if let Err(e) = sink.finished(&result) {
            failed.get_or_insert(e);
        }
        results.push(result);
    }
    failed.map_or(Ok((results, None)), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(tcp: bool, udp: bool, tx_only: bool) -> NetioPlan {
        NetioPlan { sizes: vec![1024, 4096], tcp, udp, tx_only, seconds: 2.0 }
    }

    #[test]
    fn legs_follow_netios_order_and_the_plans_protocols() {
        let labels = |p: &NetioPlan| p.legs().into_iter().map(Leg::label).collect::<Vec<_>>();
        assert_eq!(labels(&plan(true, true, false)), ["TCP-tx", "TCP-rx", "UDP-tx", "UDP-rx"]);
        assert_eq!(labels(&plan(false, true, false)), ["UDP-tx", "UDP-rx"]);
        assert_eq!(labels(&plan(true, true, true)), ["TCP-tx", "UDP-tx"]);
    }

    #[test]
    fn a_native_test_is_its_size_one_way_and_udp_flat_out() {
        let mut base = TestSpec::udp_default();
        base.udp.as_mut().unwrap().rate = UdpRate::BitsPerSecond(1_000_000);
        let spec = NetioPlan::native_spec(2048, Leg { kind: TestKind::Udp, flow: Flow::Down }, &base);
        assert_eq!((spec.block_bytes, spec.direction), (2048, Direction::Down));
        assert_eq!(spec.udp.unwrap().rate, UdpRate::Unlimited);
    }

    /// The native job runs each size's legs in order and stops at the first failed test.
    #[test]
    fn the_native_job_runs_every_leg_of_every_size_and_stops_at_a_failure() {
        struct Seen(Vec<String>);
        impl NetioSink for Seen {
            fn running(&mut self, what: &str) {
                self.0.push(what.to_string());
            }
            fn started(&mut self, _: &TestInfo) -> io::Result<()> {
                Ok(())
            }
            fn finished(&mut self, _: &TestResult) -> io::Result<()> {
                Ok(())
            }
        }
        let (tcp, udp) = (TestSpec::tcp_default(), TestSpec::udp_default());
        let mut seen = Seen(Vec::new());
        let mut specs = Vec::new();
        let out = run_native(&plan(true, false, false), &tcp, &udp, &mut seen, &mut |s| {
            specs.push((s.block_bytes, s.direction));
            Err::<TestResult, _>("refused")
        });
        assert_eq!(out.unwrap_err(), "refused");
        assert_eq!(specs, [(1024, Direction::Up)]);
        assert_eq!(seen.0, ["1024 bytes, TCP-tx"]);
        assert_eq!(plan(true, true, false).peer_duration(), Duration::from_secs(2 * 2 * (2 + 6)));
    }

    /// Against a sink (a netio server that reads and never sends): the first size's Rx hears
    /// nothing within the limit, so the job runs the next size Tx only, and each size is a
    /// connection of its own that the sink counts exactly.
    #[test]
    fn after_a_silent_rx_the_peer_job_runs_the_rest_tx_only() {
        use netchar_wire::netio::{BlockReader, Cmd, Control, CONTROL_LEN};
        use std::io::Read;
        struct Seen(Vec<TestResult>);
        impl NetioSink for Seen {
            fn running(&mut self, _: &str) {}
            fn started(&mut self, _: &TestInfo) -> io::Result<()> {
                Ok(())
            }
            fn finished(&mut self, r: &TestResult) -> io::Result<()> {
                self.0.push(r.clone());
                Ok(())
            }
        }
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        // Each connection: its commands in order and the bytes of the blocks it read.
        let sink = std::thread::spawn(move || {
            (0..2)
                .map(|_| {
                    let (mut s, _) = listener.accept().unwrap();
                    let mut all = Vec::new();
                    s.read_to_end(&mut all).unwrap();
                    let mut commands = Vec::new();
                    let mut blocks = 0;
                    let mut at = 0;
                    while at + CONTROL_LEN <= all.len() {
                        let c = Control::decode(all[at..at + CONTROL_LEN].try_into().unwrap()).0;
                        at += CONTROL_LEN;
                        commands.push(c.command());
                        if c.command() == Some(Cmd::C2S) {
                            let mut reader = BlockReader::new(c.data);
                            at += reader.feed(&all[at..]);
                            blocks = reader.bytes;
                        }
                    }
                    (commands, blocks)
                })
                .collect::<Vec<_>>()
        });
        let plan = NetioPlan { sizes: vec![1024, 2048], tcp: true, udp: false, tx_only: false, seconds: 0.2 };
        let server = NetioServer {
            protocol: Protocol::find("netio").unwrap(),
            addr,
            rx_timeout: Duration::from_millis(300),
            connect_timeout: Duration::from_secs(10),
        };
        let mut seen = Seen(Vec::new());
        let run = run_peer(&plan, &server, &StopFlag::new(), &mut seen).unwrap();
        let connections = sink.join().unwrap();
        assert!(run.error.is_none(), "{:?}", run.error);
        assert_eq!(run.results.len(), 2);
        let (c2s, s2c, quit) = (Some(Cmd::C2S), Some(Cmd::S2C), Some(Cmd::Quit));
        assert_eq!(connections[0].0, [c2s, s2c, quit], "the first size asks for Rx");
        assert_eq!(connections[1].0, [c2s, quit], "the second runs Tx only");
        for ((r, (_, got)), size) in run.results.iter().zip(&connections).zip([1024, 2048]) {
            let sent: u64 = r.streams.iter().filter(|s| s.flow == Flow::Up).map(|s| s.bytes).sum();
            assert_eq!(*got, sent + size, "the sink read every block counted, and the marker");
            assert!(r.streams.iter().all(|s| s.flow == Flow::Up), "no Rx leg: {:?}", r.streams);
        }
        assert!(run.results[0].error.as_deref().unwrap_or_default().contains("Rx skipped"));
        assert!(run.results[1].error.as_deref().unwrap_or_default().contains("Tx only"));
        assert_eq!(seen.0.len(), 2, "each size went to the sink as it ended");
    }
}
