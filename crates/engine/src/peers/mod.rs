//! Peer-protocol servers: netchar answering the clients of tools already deployed (iperf3,
//! iperf2, netio, eCos nc_test, echo/discard/chargen), each on its own port, all in the one
//! server process.
//!
//! Each is a [`PeerListener`]: bound by its own constructor (a busy port fails at start, not
//! later), then run on its own thread with a [`PeerContext`]. The context is the native
//! server's: one admission registry, so the one-test-at-a-time rule and every limit
//! (`--max-duration`, `--max-rate`, `--max-streams`, per-source connections) hold across all
//! protocols; one log, rate-limited per source. A peer protocol maps its client's request to a
//! [`TestSpec`] and admits that, so the limits apply to what the test really asks for.

pub mod netio;
pub(crate) mod netio_server;
pub mod services;
pub mod sink;

use crate::admission::{canonical, ConnRefusal, Limits, Refusal, Request, SourceCounts, SourceSlot};
use crate::dataplane::{DataPlane, DataPlaneConfig, DataStream, DatagramFormatKind, StreamOptions};
/// Why a connection was turned away (the error of [`PeerContext::connection`]).
pub use crate::error::ConnectionLimit;
use crate::reflection::RefusalKind;
use crate::server_shared::{ServerLog, Shared, TestLog};
use crate::StopFlag;
use netchar_model::{Endpoint, StreamRecord, TestSpec};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::Instant;

pub mod iperf2;
pub mod iperf3;
pub mod irtt;
pub mod irtt_client;
pub mod nc_test;
pub mod netperf;

/// A peer protocol's server, bound and ready to run.
pub trait PeerListener: Send {
    /// The protocol, as the log and the start-up line name it (e.g. "iperf3").
    fn name(&self) -> &'static str;
    /// The address it listens on.
    fn local_addr(&self) -> SocketAddr;
    /// The start-up line: what it answers, where.
    fn describe(&self) -> String;
    /// The UDP ports it listens on: a datagram from one of them is another server's answer,
    /// never a client's (crate::reflection).
    fn udp_ports(&self) -> Vec<u16>;
    /// Serves until [`PeerContext::stop`] is raised, returning within about 200 ms of it.
    fn run(self: Box<Self>, ctx: PeerContext);
}

/// What a peer-protocol server shares with the native server.
#[derive(Clone)]
pub struct PeerContext {
    pub(crate) shared: Arc<Shared>,
    pub(crate) sources: Arc<SourceCounts>,
}

/// A test admitted for a peer protocol; gives its slot back when dropped.
pub struct PeerTest {
    shared: Arc<Shared>,
    cookie: [u8; 16],
    running: u32,
}

impl PeerTest {
    /// Tests running, this one included.
    pub fn concurrent_tests(&self) -> u32 {
        self.running
    }

    /// Logs the test of `protocol` whose one data path is its client, `peer`.
    pub(crate) fn log(
        &self,
        ctx: &PeerContext,
        protocol: &'static str,
        peer: SocketAddr,
        spec: TestSpec,
        streams: Vec<StreamRecord>,
        error: Option<String>,
    ) {
        ctx.log(ServerLog::Test(Box::new(TestLog {
            peer_software: None,
            protocol,
            peer,
            data_paths: vec![(1, peer)],
            user: None,
            spec,
            streams,
            concurrent_tests: self.concurrent_tests(),
            refused_data: 0,
            error,
        })));
    }
}

impl Drop for PeerTest {
    fn drop(&mut self) {
        self.shared.registry.release(&self.cookie);
    }
}

/// Why a peer protocol's test was not admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerRefusal {
    /// True when retrying later may succeed (the server is at a limit that frees up).
    pub busy: bool,
    /// One line for the log and, where the protocol can carry it, the client.
    pub reason: String,
}

impl std::fmt::Display for PeerRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

/// A connection's place under the per-source and total connection caps; given back on drop.
pub struct ConnectionSlot(#[allow(dead_code)] SourceSlot);

impl PeerContext {
    /// Raised when the server must stop.
    pub fn stop(&self) -> &StopFlag {
        &self.shared.stop
    }

    /// The server's reflection guard (crate::reflection).
    pub fn guard(&self) -> &crate::reflection::ReflectionGuard {
        &self.shared.guard
    }

    /// The server's limits.
    pub fn limits(&self) -> &Limits {
        &self.shared.cfg.limits
    }

    /// Admits `spec` for a client at `client`, under the same rules as a native test.
    pub fn admit(&self, spec: &TestSpec, client: SocketAddr) -> Result<PeerTest, PeerRefusal> {
        // Peer protocols bring their data streams themselves: nothing is routed to them.
        let (route, _) = mpsc::sync_channel(1);
        let req = Request { spec, companion: None, client_ip: client.ip(), session_key: None, route };
        match self.shared.registry.admit(req, &self.shared.cfg.limits, Instant::now()) {
            Ok(a) => Ok(PeerTest { shared: self.shared.clone(), cookie: a.cookie, running: a.running }),
            Err(Refusal::Busy { running, max, reason }) => Err(PeerRefusal {
                busy: true,
                reason: reason.unwrap_or_else(|| {
                    format!("the server is busy: {running} of {max} test(s) running (--max-concurrent); retry later")
                }),
            }),
            Err(Refusal::Rejected(rejection)) => Err(PeerRefusal { busy: false, reason: rejection.reason }),
        }
    }

    /// Takes a connection slot for `ip`, or says which cap it hit.
    pub fn connection(&self, ip: IpAddr) -> Result<ConnectionSlot, ConnectionLimit> {
        let limits = &self.shared.cfg.limits;
        self.sources.take(ip, limits).map(ConnectionSlot).map_err(|why| match why {
            ConnRefusal::PerSource(open) => ConnectionLimit::PerSource { ip: canonical(ip), open },
            ConnRefusal::Total(open) => ConnectionLimit::Total { open },
        })
    }

    /// The one check every datagram a peer listener reads goes through: false when it must be
    /// dropped unanswered (a service port or one of ours: a loop); otherwise its bytes become
    /// the credit answers to its address may spend. The first drop per source is logged.
    pub fn inbound(&self, protocol: &'static str, from: SocketAddr, bytes: usize) -> bool {
        let now = Instant::now();
        match self.shared.guard.inbound(from, bytes, now) {
            Ok(()) => true,
            Err(dropped) => {
                if self.shared.guard.first_refusal(from.ip(), RefusalKind::Source, protocol, now) {
                    self.log(ServerLog::Rejected {
                        peer: from,
                        reason: format!("{protocol} (UDP): dropped unanswered: {dropped}"),
                    });
                }
                false
            }
        }
    }

    /// May this listener answer `to` with `bytes` now (crate::reflection's amplification and
    /// rate budgets for addresses outside `--allow-peers`)? The first refusal per
    /// destination is logged with the flag that lifts it.
    pub fn may_answer(&self, protocol: &'static str, to: SocketAddr, bytes: usize) -> bool {
        let now = Instant::now();
        let guard = &self.shared.guard;
        if guard.may_answer(to, bytes, now) {
            return true;
        }
        if guard.first_refusal(to.ip(), RefusalKind::Budget, protocol, now) {
            let ip = canonical(to.ip());
            let host = if ip.is_ipv4() { 32 } else { 128 };
            self.log(ServerLog::Rejected {
                peer: to,
                reason: format!(
                    "{protocol} (UDP): answers to {ip} held back: outside --allow-peers ({}) an address gets no \
                     more bytes than it sent, at most {} kB/s each and {} kB/s in all (add --allow-peers \
                     {ip}/{host} to lift this)",
                    guard.policy().describe(),
                    crate::reflection::PER_DESTINATION_RATE / 1000,
                    crate::reflection::TOTAL_RATE / 1000,
                ),
            });
        }
        false
    }

    /// May a test send a stream of datagrams to `to`, an address no handshake proved (iperf2
    /// UDP `-R`, nc_test `UDP_SEND`)? Only within `--allow-peers`; the refusal, logged once
    /// per source, names the flag.
    pub fn may_send_unprompted(
        &self,
        protocol: &'static str,
        to: SocketAddr,
    ) -> Result<(), crate::error::UnpromptedRefused> {
        let guard = &self.shared.guard;
        guard.may_send_unprompted(to).inspect_err(|why| {
            if guard.first_refusal(to.ip(), RefusalKind::Unprompted, protocol, Instant::now()) {
                self.log(ServerLog::Rejected { peer: to, reason: format!("{protocol} (UDP): {why}") });
            }
        })
    }

    /// True when a data stream from `data` may belong to a test controlled from `control`.
    pub fn data_allowed(&self, control: IpAddr, data: IpAddr) -> bool {
        self.shared.cfg.data_paths.allows(control, data)
    }

    /// Logs one event (rejections are rate-limited per source, as the native server's).
    pub fn log(&self, entry: ServerLog) {
        (self.shared.log)(entry);
    }

    /// True with `--one-off` once a test of any protocol has run and none is running.
    pub fn one_off_done(&self) -> bool {
        let r = &self.shared.registry;
        self.shared.cfg.one_off && r.admitted_total.load(Ordering::SeqCst) > 0 && r.running.load(Ordering::SeqCst) == 0
    }
}

/// How often a peer test's data plane is looked at (its end, the stop flag, the limits).
const PLANE_POLL: std::time::Duration = std::time::Duration::from_millis(20);

/// The test a peer server's data plane runs for `spec`, held to the server's limits: a
/// sender's time within `--max-duration`, its rate within `--max-rate`.
pub(crate) fn capped(spec: &TestSpec, limits: &Limits) -> TestSpec {
    use netchar_model::{EndCondition, UdpRate};
    let mut run = spec.clone();
    if let Some(max) = limits.max_duration {
        let max = max.as_secs_f64();
        run.end = match run.end {
            EndCondition::Seconds(s) => EndCondition::Seconds(s.min(max)),
            // A byte count still ends at the limit (the run loop stops it there).
            bytes => bytes,
        };
    }
    if let Some(max) = limits.max_rate.filter(|&r| r > 0) {
        run.tcp.rate_bps_per_stream = Some(run.tcp.rate_bps_per_stream.map_or(max, |r| r.min(max)));
        if let Some(u) = run.udp.as_mut() {
            u.rate = match u.rate {
                UdpRate::BitsPerSecond(r) if r > 0 => UdpRate::BitsPerSecond(r.min(max)),
                _ => UdpRate::BitsPerSecond(max),
            };
        }
    }
    run
}

/// Runs a peer test's data streams through the data plane (its workers, pacer, counters and
/// interval records, as for netchar's own tests) to their end, under the server's limits: the
/// stop flag, `--max-duration` (with 2 s to spare) and `--idle-timeout` (no stream moved a
/// byte) end it early, with that reason. Returns the streams' records (this end's, the
/// server's) and why the test ended early, if it did.
pub(crate) fn run_streams(
    ctx: &PeerContext,
    spec: TestSpec,
    datagrams: DatagramFormatKind,
    options: StreamOptions,
    streams: Vec<DataStream>,
    started: Instant,
) -> (Vec<StreamRecord>, Option<String>) {
    let limits = ctx.limits();
    let cfg = DataPlaneConfig { spec, datagrams, endpoint: Endpoint::Server, cpu: None, interleave_senders: false };
    let plane = match DataPlane::start_with(cfg, streams, None, started, options) {
        Ok(p) => p,
        Err(e) => return (Vec::new(), Some(format!("cannot start workers: {e}"))),
    };
    let mut moved = (0u64, Instant::now());
    let mut error = None;
    while !plane.all_done() {
        let now = Instant::now();
        let bytes = plane.bytes_moved();
        if bytes != moved.0 {
            moved = (bytes, now);
        }
        error = if ctx.stop().is_raised() {
            Some("the server is stopping".to_string())
        } else if limits.max_duration.is_some_and(|d| started.elapsed() > d + std::time::Duration::from_secs(2)) {
            Some("the server's --max-duration was reached".to_string())
        } else if now - moved.1 >= limits.idle_timeout {
            Some(format!("idle for {:.0} s (the server's --idle-timeout)", limits.idle_timeout.as_secs_f64()))
        } else {
            None
        };
        if error.is_some() {
            plane.abort();
            break;
        }
        std::thread::sleep(PLANE_POLL);
    }
    let error = error.or_else(|| plane.first_error());
    (plane.join(), error)
}

/// The one accept loop of every peer listener: each connection takes a connection slot (the
/// per-source and total caps; a refusal is logged, rate-limited per source, and the
/// connection closed) and is served on a thread of its own, named after the protocol, by
/// `serve(stream, peer, n, ctx)`, where `n` numbers the connections in accept order (iperf3
/// numbers a test's streams so). Returns within about 20 ms of the stop flag.
pub(crate) fn serve_connections<F>(listener: std::net::TcpListener, ctx: &PeerContext, protocol: &str, serve: F)
where
    F: Fn(std::net::TcpStream, SocketAddr, u64, &PeerContext) + Send + Sync + 'static,
{
    let serve = Arc::new(serve);
    if listener.set_nonblocking(true).is_err() {
        let peer = listener.local_addr().unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        ctx.log(ServerLog::Rejected { peer, reason: format!("{protocol} listener: cannot poll") });
        return;
    }
    let mut accepted: u64 = 0;
    while !ctx.stop().is_raised() {
        let (stream, peer) = match listener.accept() {
            Ok(c) => c,
            Err(_) => {
                std::thread::sleep(std::time::Duration::from_millis(20));
                continue;
            }
        };
        let slot = match ctx.connection(peer.ip()) {
            Ok(slot) => slot,
            Err(limit) => {
                ctx.log(ServerLog::Rejected { peer, reason: limit.to_string() });
                continue;
            }
        };
        // A connection inherits the listener's non-blocking mode on some systems: never.
        let _ = stream.set_nonblocking(false);
        accepted += 1;
        let (n, ctx, serve) = (accepted, ctx.clone(), serve.clone());
        let _ = std::thread::Builder::new().name(format!("netchar-{protocol}")).spawn(move || {
            let _slot = slot;
            serve(stream, peer, n, &ctx);
        });
    }
}

/// A TCP listener on `addr` (`[::]` also takes IPv4), as every peer protocol's server binds
/// one: a port in use fails here, at start.
pub(crate) fn bind_tcp_listener(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    if addr.is_ipv6() {
        socket.set_only_v6(false)?;
    }
    socket.bind(&addr.into())?;
    socket.listen(128)?;
    Ok(socket.into())
}

/// Binds a TCP listener on `addr` and, with `bind_udp`, a UDP socket on the same port number.
/// With port 0 the kernel picks the TCP port, which another program's UDP socket may already
/// hold: then a fresh number is tried, a few times.
pub(crate) fn bind_tcp_and_udp<U>(
    addr: SocketAddr,
    bind_udp: impl Fn(SocketAddr) -> std::io::Result<U>,
) -> std::io::Result<(std::net::TcpListener, U)> {
    let mut attempts = if addr.port() == 0 { 16 } else { 1 };
    loop {
        let tcp = bind_tcp_listener(addr)?;
        match bind_udp(tcp.local_addr()?) {
            Ok(udp) => return Ok((tcp, udp)),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && attempts > 1 => attempts -= 1,
            Err(e) => return Err(e),
        }
    }
}

/// The tests running per client address, for protocols without a control connection (iperf2,
/// echo/discard/chargen): every connection and UDP source of one address is one test under
/// the shared admission, so a client's `-P` streams are one test, not one each.
#[derive(Clone, Default)]
pub(crate) struct AddressTests(Arc<std::sync::Mutex<std::collections::HashMap<IpAddr, Shares>>>);

/// An address's test and how many connections or UDP sources share it.
type Shares = (Arc<PeerTest>, usize);

/// A connection's or UDP source's share of its address's test; the last one out frees it.
pub(crate) struct Joined {
    tests: AddressTests,
    ip: IpAddr,
    /// The address's test.
    pub(crate) test: Arc<PeerTest>,
}

impl AddressTests {
    /// Joins the test of `peer`'s address, admitting `spec` for it when it has none.
    pub(crate) fn join(&self, ctx: &PeerContext, spec: &TestSpec, peer: SocketAddr) -> Result<Joined, PeerRefusal> {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let ip = peer.ip();
        if let Some((test, n)) = map.get_mut(&ip) {
            *n += 1;
            return Ok(Joined { tests: self.clone(), ip, test: test.clone() });
        }
        let test = Arc::new(ctx.admit(spec, peer)?);
        map.insert(ip, (test.clone(), 1));
        Ok(Joined { tests: self.clone(), ip, test })
    }
}

impl Drop for Joined {
    fn drop(&mut self) {
        let mut map = self.tests.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, n)) = map.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::Registry;
    use crate::reflection::{PeerPolicy, ReflectionGuard};
    use crate::server_shared::ServerConfig;

    fn context(max_per_source: usize, max_connections: usize) -> PeerContext {
        let mut cfg = ServerConfig::new("127.0.0.1:0".parse().unwrap());
        cfg.limits.max_per_source = max_per_source;
        cfg.limits.max_connections = max_connections;
        let shared = Arc::new(Shared {
            registry: Registry::default(),
            cfg,
            log: Arc::new(|_| {}),
            stop: StopFlag::new(),
            guard: ReflectionGuard::new(PeerPolicy::default(), Vec::new()),
        });
        PeerContext { shared, sources: Arc::new(SourceCounts::default()) }
    }

    #[test]
    fn a_connection_over_a_cap_names_the_cap_and_a_closed_one_frees_its_slot() {
        let ctx = context(2, 3);
        let (a, b): (IpAddr, IpAddr) = ("192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap());
        let first = ctx.connection(a).unwrap();
        let _second = ctx.connection(a).unwrap();
        // A v4-mapped address is the same source, named as IPv4.
        let mapped: IpAddr = "::ffff:192.0.2.1".parse().unwrap();
        assert_eq!(ctx.connection(mapped).err(), Some(ConnectionLimit::PerSource { ip: a, open: 2 }));
        let _third = ctx.connection(b).unwrap();
        assert_eq!(ctx.connection(b).err(), Some(ConnectionLimit::Total { open: 3 }));
        drop(first);
        assert!(ctx.connection(b).is_ok(), "the slot a closed connection held is free again");
        assert_eq!(
            ConnectionLimit::Total { open: 3 }.to_string(),
            "the server has 3 connections open, its limit (--max-connections); retry later"
        );
    }
}
