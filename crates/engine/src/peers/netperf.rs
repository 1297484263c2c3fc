//! netperf, both roles (docs/netperf.md): [`NetperfControl`] is netchar as netperf, the client
//! of an unmodified `netserver` (behind the client seam, crate::control); [`NetperfListener`]
//! is `netchar server --netperf`, answering an unmodified `netperf` (behind the server seam,
//! crate::server_control). The protocol is netchar_wire::netperf's; the workers and counters
//! are netchar's.
//!
//! The six tests netperf's default build runs as OMNI tests map onto netchar's commands:
//!
//! | netperf | netchar | data |
//! |---|---|---|
//! | TCP_STREAM | `tcp` | client → server, ended by the client's shutdown |
//! | TCP_MAERTS | `tcp -R` | server → client, ended by the server's timer (or count) |
//! | UDP_STREAM | `udp` | client → server, ended by empty datagrams |
//! | TCP_RR | `rr` | one transaction in flight on one connection |
//! | UDP_RR | `rr --udp` | one transaction in flight over UDP, ended by empty datagrams |
//! | TCP_CRR | `crr` | a connection per transaction, ended by the server's timer |
//!
//! netserver runs one data connection per test, so `-P N` is N tests at once, each on its own
//! control connection (ClientControl::control_connections), their figures one result of N
//! streams. netserver listens for each test on a data port of its own, which its response
//! announces; netchar's server binds one per test likewise (ServerRequest::own_data_port).
//! netperf's UDP payload carries nothing but filler: its datagrams are counted, not sequenced
//! (DatagramFormatKind::Unsequenced), and loss is what the sender sent less what the
//! server's results say arrived. netperf's UDP data is accepted only from the control
//! connection's address, which TCP proved (crate::reflection).
//!
//! As a server, each control connection is a test under the shared admission; one client's
//! tests that overlap in time (flent's flows, each a netperf process) are one job under
//! `--max-concurrent` (crate::admission, "Jobs"; the driver, crate::server_session, asks for it
//! by this protocol's name). A test turned away gets netserver's errno: netperf prints only
//! `remote error 16`, so the server's log says who was turned away and why.

use super::{PeerContext, PeerListener};
use crate::admission::Refusal;
use crate::control::{ClientControl, ControlEvent, OpenStream, PeerInfo, Transport};
use crate::dataplane::DatagramFormatKind;
use crate::error::{PeerRequestError, SessionError};
use crate::server_control::{Admission, ServerControl, ServerControlEvent, ServerRequest};
use netchar_model::{
    Caveat, CpuUsage, Direction, EndCondition, Endpoint, FarEnd, Flow, Role, RrFigures, RrOptions, StreamRecord,
    StreamTotal, TestKind, TestSpec, UdpOptions, UdpRate, UdpReceived,
};
use netchar_wire::netperf::client::{Client, Event as ClientEvent, TestParams};
use netchar_wire::netperf::figures::{CpuFigures, ServerCounts, ServerFigures};
use netchar_wire::netperf::server::{DataSetup, Event as ServerEvent, Server, TestRequest};
use netchar_wire::netperf::{errno, Family, TestEnd, TestKind as NetperfTest};
use netchar_wire::ProtocolError;
use std::collections::VecDeque;
use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::time::Instant;

/// netserver's port.
pub const DEFAULT_PORT: u16 = netchar_wire::netperf::CONTROL_PORT;
/// Empty datagrams netperf sends to end a UDP test.
const END_MARKS: u32 = 3;
/// errno EINVAL: what netserver answers a request it cannot set up for its sizes.
const EINVAL: i32 = 22;
/// The format of netperf's UDP data, as netchar's client sends it and its server reads it.
const DATAGRAMS: DatagramFormatKind = DatagramFormatKind::Unsequenced { end_marks: END_MARKS };

// ---------------------------------------------------------------- client role

/// The registry's client constructor (crate::protocols).
pub(crate) fn client_session(a: &crate::registry::SessionArgs<'_>) -> Result<Box<dyn ClientControl>, SessionError> {
    let v6 = a.cfg.family == Some(crate::registry::Family::V6)
        || a.cfg.host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>().is_ok_and(|ip| ip.is_ipv6());
    Ok(Box::new(NetperfControl::new(a.now, a.spec, if v6 { Family::V6 } else { Family::V4 })?))
}

/// What a netserver reports: its results (bytes, transactions, CPU, retransmits), counted to
/// its end of the data phase.
pub(crate) fn measurement(spec: &TestSpec) -> (FarEnd, Vec<Caveat>) {
    let mut caveats = Vec::new();
    if spec.kind == TestKind::Tcp && spec.direction == Direction::Down {
        caveats.push(Caveat::always(
            Some(Flow::Down),
            "netserver counts only whole sends: the one its timer cut short is in what this end read, not in \
             the server's figure",
        ));
    }
    if spec.kind == TestKind::Udp {
        caveats.push(Caveat::always(
            Some(Flow::Up),
            "netperf's datagrams carry no sequence number: loss is the datagrams sent less those netserver \
             counted, with no reordering or jitter",
        ));
    }
    (FarEnd::Reports, caveats)
}

/// `--proto netperf`'s refusal of `flag`, as `why` says.
fn refuse<T>(flag: &'static str, why: impl std::fmt::Display) -> Result<T, SessionError> {
    Err(SessionError::option(flag, format!("--proto netperf: {why}")))
}

/// `--proto netperf`'s line about a test netperf cannot run.
fn unsupported<T>(why: impl std::fmt::Display) -> Result<T, SessionError> {
    Err(SessionError::Unsupported(format!("--proto netperf: {why}")))
}

/// The netperf test a netchar test is, or why netserver cannot run it (said before any
/// traffic).
fn test_of(spec: &TestSpec) -> Result<NetperfTest, SessionError> {
    match (spec.kind, spec.direction, spec.rr.as_ref()) {
        (TestKind::Tcp, Direction::Up, _) => Ok(NetperfTest::TcpStream),
        (TestKind::Tcp, Direction::Down, _) => Ok(NetperfTest::TcpMaerts),
        (TestKind::Udp, Direction::Up, _) => Ok(NetperfTest::UdpStream),
        (TestKind::Rr, _, Some(r)) if r.connect_per_transaction => Ok(NetperfTest::TcpCrr),
        (TestKind::Rr, _, Some(r)) if r.udp => Ok(NetperfTest::UdpRr),
        (TestKind::Rr, _, Some(_)) => Ok(NetperfTest::TcpRr),
        (TestKind::Tcp, _, _) => {
            refuse("--bidir", "--bidir: netperf's streams go one way (TCP_STREAM up, TCP_MAERTS with -R)")
        }
        (TestKind::Udp, direction, _) => refuse(
            if direction == Direction::Down { "-R" } else { "--bidir" },
            "-R/--bidir over UDP: netperf's UDP_STREAM only sends to netserver",
        ),
        _ => unsupported("netperf runs tcp, udp, rr and crr tests"),
    }
}

/// netperf's request for stream `id` of `spec`, or the one line that says what netperf's
/// request cannot carry.
fn params_of(spec: &TestSpec, id: u32, family: Family) -> Result<TestParams, SessionError> {
    let kind = test_of(spec)?;
    if spec.server_load.is_some() || spec.measure_idle {
        let flag = if spec.server_load.is_some() { "--server-load" } else { "--idle" };
        return refuse(flag, "--server-load and --idle are netchar server features a netserver does not have");
    }
    if spec.omit_seconds > 0.0 {
        return refuse("-O", "-O: netserver counts the whole test, warm-up included; leave -O out");
    }
    let end = match spec.end {
        EndCondition::Seconds(s) if s.fract() != 0.0 || s < 1.0 => {
            return refuse("-t", format!("-t {s}: netperf runs whole seconds (its -l); use -t 1 or more, whole"))
        }
        EndCondition::Seconds(s) => TestEnd::Seconds(s as u32),
        EndCondition::Bytes(_) if kind.is_udp() => {
            return refuse("-n", "-n over UDP: netperf's UDP tests end by time only (a lost datagram is never counted)")
        }
        EndCondition::Bytes(_) if kind == NetperfTest::TcpCrr => {
            return refuse("-n", "-n with crr: netchar runs netperf's TCP_CRR by time only; use -t")
        }
        EndCondition::Bytes(_) => {
            let n = spec.byte_budget(id).unwrap_or(0);
            match u32::try_from(n) {
                Ok(units) => TestEnd::Units(units),
                Err(_) => return refuse("-n", format!("-n: {n} per stream exceeds netperf's count")),
            }
        }
    };
    let mut p = TestParams::new(kind, end);
    p.family = family;
    if let Some(r) = &spec.rr {
        if r.inflight > 1 {
            return refuse("--inflight", "--inflight: netperf's request/response tests keep one transaction in flight");
        }
        let Ok(request_size) = u32::try_from(r.request_bytes) else { return refuse("-l", "-l: too large for netperf") };
        let Ok(response_size) = u32::try_from(r.response_bytes) else {
            return refuse("--response", "--response: too large for netperf");
        };
        (p.request_size, p.response_size) = (request_size, response_size);
    }
    if kind == NetperfTest::TcpMaerts {
        // netserver writes what this end would: -l.
        p.remote_send_size = u32::try_from(spec.block_bytes).ok();
    }
    let window = spec.tcp.window_bytes.map(|w| u32::try_from(w).unwrap_or(u32::MAX));
    (p.remote_send_buffer, p.remote_recv_buffer) = (window, window);
    p.remote_nodelay = spec.tcp.nodelay;
    p.remote_congestion = spec.tcp.congestion.clone();
    p.remote_tos = spec.ip.tos;
    p.remote_affinity = spec.server_cpu.and_then(|c| u32::try_from(c).ok());
    p.remote_cpu = true;
    if let Err(why) = p.check() {
        return unsupported(why);
    }
    Ok(p)
}

/// netchar as netperf: one netperf test per stream, each on its own control connection.
pub struct NetperfControl {
    spec: TestSpec,
    kind: NetperfTest,
    /// The tests, by stream: connection `i` runs stream `i + 1`.
    tests: Vec<Client>,
    ports: Vec<Option<u16>>,
    results: Vec<Option<ServerFigures>>,
    /// This end's senders' totals (UDP loss is settled on them).
    sent: Vec<StreamTotal>,
    events: VecDeque<ControlEvent>,
    admitted: bool,
    reported: bool,
}

impl NetperfControl {
    /// The tests for `spec`, or why netperf cannot run it (said before any traffic).
    pub fn new(now: Instant, spec: &TestSpec, family: Family) -> Result<Self, SessionError> {
        let kind = test_of(spec)?;
        let flow = if kind == NetperfTest::TcpMaerts { Flow::Down } else { Flow::Up };
        let tests = spec
            .stream_ids(flow)
            .map(|id| {
                let params = params_of(spec, id, family)?;
                // params_of checked what the request carries: a refusal here is netperf's own.
                Client::new(now, params).map_err(|e| SessionError::Unsupported(e.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let n = tests.len();
        Ok(Self {
            spec: spec.clone(),
            kind,
            tests,
            ports: vec![None; n],
            results: vec![None; n],
            sent: Vec::new(),
            events: VecDeque::new(),
            admitted: false,
            reported: false,
        })
    }

    fn flow(&self) -> Flow {
        if self.kind == NetperfTest::TcpMaerts {
            Flow::Down
        } else {
            Flow::Up
        }
    }

    /// Takes test `i`'s events: its data port, its results.
    fn drain(&mut self, i: usize) {
        while let Some(ev) = self.tests[i].poll_event() {
            match ev {
                ClientEvent::Connect { port, .. } => self.ports[i] = Some(port),
                // This end's workers stop on their own clock; netserver ends its side itself.
                ClientEvent::TimeUp => {}
                ClientEvent::Results(figures) => self.results[i] = Some(*figures),
            }
        }
        if !self.admitted && self.ports.iter().all(Option::is_some) {
            self.admitted = true;
            let flow = self.flow();
            let streams = self
                .ports
                .iter()
                .flatten()
                .zip(self.spec.stream_ids(flow))
                .map(|(&port, id)| {
                    let transport = match self.kind {
                        NetperfTest::TcpCrr => Transport::PerTransaction { port },
                        NetperfTest::UdpStream | NetperfTest::UdpRr => Transport::UdpToPort { port },
                        _ => Transport::TcpToPort { port },
                    };
                    OpenStream { id, flow, transport }
                })
                .collect();
            let peer = PeerInfo { concurrent_tests: 1, host: None, software: Some("netserver".into()) };
            self.events.push_back(ControlEvent::Admitted { streams, peer, cookie: None });
            // netperf has no start message: its data flows as soon as it connects.
            self.events.push_back(ControlEvent::Start);
        }
        // UDP loss is settled on this end's count: the report waits for it (netserver's
        // results can come before this end's sender has said it finished).
        let counted = self.kind != NetperfTest::UdpStream || !self.sent.is_empty();
        if !self.reported && counted && self.results.iter().all(Option::is_some) {
            self.reported = true;
            let figures: Vec<ServerFigures> = self.results.iter().flatten().cloned().collect();
            let streams = self.server_records(&figures);
            self.events.push_back(ControlEvent::PeerReport { streams, cpu: server_cpu(&figures), error: None });
        }
    }

    /// netserver's end of each stream, from its results.
    fn server_records(&self, figures: &[ServerFigures]) -> Vec<StreamRecord> {
        let flow = self.flow();
        figures
            .iter()
            .zip(self.spec.stream_ids(flow))
            .map(|(f, id)| {
                let c = &f.counts;
                let seconds = f64::from(f.elapsed_seconds).max(0.0);
                let sends = self.kind == NetperfTest::TcpMaerts;
                let role = if sends { Role::Sender } else { Role::Receiver };
                let bytes = if sends { c.bytes_sent } else { c.bytes_received };
                let mut r = StreamRecord::bare(id, flow, role, Endpoint::Server, bytes, seconds);
                r.retransmits = c.retransmits.map(u64::from);
                if self.kind == NetperfTest::UdpStream {
                    let sent = self.sent.iter().find(|t| t.id == id).map_or(0, |t| t.packets);
                    let packets = u64::from(c.recv_calls);
                    let mut u = UdpReceived { packets, ..UdpReceived::default() };
                    u.set_lost(sent.saturating_sub(packets));
                    r.udp_received = Some(u);
                }
                if self.kind.is_rr() {
                    let t = u64::from(c.transactions);
                    r.rr = Some(RrFigures {
                        transactions: t,
                        transactions_per_second: if seconds > 0.0 { t as f64 / seconds } else { 0.0 },
                        ..RrFigures::default()
                    });
                }
                r
            })
            .collect()
    }

    fn each<T>(&mut self, f: impl Fn(&mut Client) -> Result<T, ProtocolError>) -> Result<(), ProtocolError> {
        for i in 0..self.tests.len() {
            f(&mut self.tests[i])?;
            self.drain(i);
        }
        Ok(())
    }
}

/// The server's CPU over its tests, when it measured: netserver reads /proc/stat, so its
/// figures are the whole machine's (netchar's `machine busy`), the mean of its tests' (each
/// test is the same machine over the same time). It says nothing of its own process.
fn server_cpu(figures: &[ServerFigures]) -> CpuUsage {
    let measured: Vec<&CpuFigures> = figures.iter().filter_map(|f| f.counts.cpu.as_ref()).collect();
    if measured.is_empty() {
        return CpuUsage::default();
    }
    let mean =
        |get: fn(&CpuFigures) -> f32| measured.iter().map(|c| f64::from(get(c))).sum::<f64>() / measured.len() as f64;
    CpuUsage {
        host_busy_pct: mean(|c| c.util),
        host_softirq_pct: mean(|c| c.softirq),
        cpus: figures.iter().map(|f| f.counts.cpus).max().unwrap_or(0),
        ..CpuUsage::default()
    }
}

impl ClientControl for NetperfControl {
    fn handle_input(&mut self, now: Instant, bytes: &[u8]) -> Result<(), ProtocolError> {
        self.handle_input_on(0, now, bytes)
    }
    fn handle_eof(&mut self, now: Instant) -> Result<(), ProtocolError> {
        self.handle_eof_on(0, now)
    }
    fn poll_output(&mut self, out: &mut Vec<u8>) {
        self.poll_output_on(0, out);
    }
    fn control_connections(&self) -> usize {
        self.tests.len()
    }
    fn handle_input_on(&mut self, conn: usize, now: Instant, bytes: &[u8]) -> Result<(), ProtocolError> {
        let Some(test) = self.tests.get_mut(conn) else { return Ok(()) };
        test.handle_input(now, bytes)?;
        self.drain(conn);
        Ok(())
    }
    fn handle_eof_on(&mut self, conn: usize, now: Instant) -> Result<(), ProtocolError> {
        let Some(test) = self.tests.get_mut(conn) else { return Ok(()) };
        test.handle_eof(now)
    }
    fn poll_output_on(&mut self, conn: usize, out: &mut Vec<u8>) {
        if let Some(test) = self.tests.get_mut(conn) {
            test.poll_output(out);
        }
    }
    fn poll_event(&mut self) -> Option<ControlEvent> {
        self.events.pop_front()
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.tests.iter().filter_map(Client::poll_timeout).min()
    }
    fn handle_timeout(&mut self, now: Instant) -> Result<(), ProtocolError> {
        self.each(|t| t.handle_timeout(now))
    }
    fn local_senders_done(&mut self, now: Instant, totals: Vec<StreamTotal>) {
        self.sent = totals;
        let _ = self.each(|t| {
            t.data_done(now);
            Ok(())
        });
    }
    fn stop(&mut self, now: Instant, _reason: &str) {
        let _ = self.each(|t| {
            t.stop(now);
            Ok(())
        });
    }
    fn is_done(&self) -> bool {
        self.tests.iter().all(Client::is_done)
    }
    fn datagrams(&self) -> DatagramFormatKind {
        DATAGRAMS
    }
}

// ---------------------------------------------------------------- server role

/// The registry's binder (crate::protocols::LISTENERS): `ports` is the netperf control port.
pub(crate) fn bind_listener(ip: IpAddr, ports: &[u16]) -> io::Result<Box<dyn PeerListener>> {
    Ok(Box::new(NetperfListener { tcp: super::bind_tcp_listener(SocketAddr::new(ip, ports[0]))? }))
}

/// `netchar server --netperf`: netserver's control port.
pub struct NetperfListener {
    tcp: TcpListener,
}

impl PeerListener for NetperfListener {
    fn name(&self) -> &'static str {
        "netperf"
    }

    fn describe(&self) -> String {
        format!(
            "answering netperf clients on {} (TCP_STREAM, TCP_MAERTS, UDP_STREAM, TCP_RR, UDP_RR, TCP_CRR), under the \
             same limits",
            self.local_addr()
        )
    }

    fn local_addr(&self) -> SocketAddr {
        self.tcp.local_addr().expect("a bound listener has an address")
    }

    fn udp_ports(&self) -> Vec<u16> {
        // Each test's UDP socket is its own, on a port of the moment.
        Vec::new()
    }

    fn run(self: Box<Self>, ctx: PeerContext) {
        super::serve_connections(self.tcp, &ctx, "netperf", |stream, peer, _, ctx| {
            let session = NetperfServer::new(Instant::now());
            let deadline = Instant::now() + ctx.limits().idle_timeout;
            crate::server_session::SessionDriver::serve(stream, peer, Box::new(session), &ctx.shared, deadline);
        });
    }
}

/// A netperf client's test, server side, behind the server seam (crate::server_control).
struct NetperfServer {
    session: Server,
    test: Option<TestRequest>,
    /// The data socket's buffers as set up (netserver reports its setup values at the end of
    /// UDP and TCP_CRR tests; netchar reports them for all).
    buffers: (u32, u32),
    events: VecDeque<ServerControlEvent>,
}

impl NetperfServer {
    fn new(now: Instant) -> Self {
        Self { session: Server::new(now), test: None, buffers: (0, 0), events: VecDeque::new() }
    }

    fn on_event(&mut self, ev: ServerEvent) -> Option<ServerControlEvent> {
        Some(match ev {
            ServerEvent::Test(req) => match to_spec(&req) {
                Ok(spec) => {
                    let run = (req.kind == NetperfTest::TcpMaerts).then(|| spec.clone());
                    let port = req.port();
                    self.test = Some(*req);
                    ServerControlEvent::Requested(Box::new(ServerRequest {
                        spec,
                        run,
                        companion: None,
                        auth: None,
                        peer_software: Some("netperf".into()),
                        own_data_port: Some(port),
                    }))
                }
                Err(why) => {
                    self.session.refuse(EINVAL);
                    ServerControlEvent::Refused(format!("refused: {why}"))
                }
            },
            ServerEvent::TimeUp => match self.test.as_ref().map(|t| t.kind) {
                // netserver's timer ends its sending: the sender shuts down so netperf reads
                // every byte and its end.
                Some(NetperfTest::TcpMaerts) => ServerControlEvent::StopSenders(None),
                _ => ServerControlEvent::EndWorkers,
            },
            ServerEvent::Unknown(kind) => ServerControlEvent::Refused(format!(
                "request type {kind} answered as netserver answers an unknown test (errno 998): netchar runs \
                 netperf's OMNI tests (a default netperf 2.5 or later)"
            )),
            ServerEvent::Refused(why) => ServerControlEvent::Refused(format!("refused: {why}")),
        })
    }

    /// What netserver's results carry, from this end's records.
    fn counts(&self, records: &[StreamRecord], cpu: &CpuUsage) -> ServerCounts {
        let Some(test) = &self.test else { return ServerCounts::default() };
        let received: u64 = records.iter().filter(|r| r.role == Role::Receiver).map(|r| r.bytes).sum();
        let sent: u64 = records.iter().filter(|r| r.role == Role::Sender).map(|r| r.bytes).sum();
        let sizes = test.sizes(self.buffers.0 as i32, self.buffers.1 as i32);
        let mut c = ServerCounts {
            bytes_received: received,
            bytes_sent: sent,
            recv_buf_size: self.buffers.1 as i32,
            send_buf_size: self.buffers.0 as i32,
            retransmits: records.iter().filter_map(|r| r.retransmits).map(|n| n as u32).max().or(Some(0)),
            cpu_method: 0,
            ..ServerCounts::default()
        };
        if test.kind.is_rr() {
            // The responders answer whole requests only: each request is one transaction.
            let t = received / u64::from(test.omni.request_size.max(1) as u32);
            c.transactions = t as u32;
            c.recv_calls = t as u32;
            c.send_calls = t as u32;
            c.bytes_sent = t * u64::from(test.omni.response_size.max(1) as u32);
        } else if let Some(u) = records.iter().find_map(|r| r.udp_received.as_ref()) {
            c.recv_calls = u.packets as u32;
        } else if sizes.send_size > 0 && sent > 0 {
            c.send_calls = sent.div_ceil(sizes.send_size as u64) as u32;
        }
        if test.wants_cpu() {
            // netserver's figures are the machine's (/proc/stat), in percent of all its CPUs.
            let cpus = f64::from(cpu.cpus.max(1));
            c.cpu = Some(CpuFigures {
                util: cpu.host_busy_pct as f32,
                user: (cpu.user_pct / cpus) as f32,
                system: (cpu.system_pct / cpus) as f32,
                softirq: cpu.host_softirq_pct as f32,
                ..CpuFigures::default()
            });
            // 8: /proc/stat, what a Linux netserver names ('S').
            c.cpu_method = 8;
            c.cpus = cpu.cpus;
        }
        c
    }
}

impl ServerControl for NetperfServer {
    fn protocol(&self) -> &'static str {
        "netperf"
    }
    fn handle_input(&mut self, now: Instant, bytes: &[u8]) -> Result<(), ProtocolError> {
        self.session.handle_input(now, bytes)
    }
    fn handle_eof(&mut self, now: Instant) -> Result<(), ProtocolError> {
        self.session.handle_eof(now)
    }
    fn poll_output(&mut self, out: &mut Vec<u8>) {
        self.session.poll_output(out);
    }
    fn poll_event(&mut self) -> Option<ServerControlEvent> {
        if let Some(e) = self.events.pop_front() {
            return Some(e);
        }
        let ev = self.session.poll_event()?;
        self.on_event(ev)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.session.poll_timeout()
    }
    fn handle_timeout(&mut self, now: Instant) -> Result<(), ProtocolError> {
        self.session.handle_timeout(now)
    }
    fn admitted(&mut self, now: Instant, a: &Admission<'_>) {
        let (Some(port), Some(buffers)) = (a.data_port, a.data_buffers) else {
            self.session.refuse(errno::NOT_SUPPORTED);
            return;
        };
        self.buffers = buffers;
        let setup = DataSetup {
            port,
            send_buf_size: buffers.0 as i32,
            recv_buf_size: buffers.1 as i32,
            // netchar measures its CPU for every test; netserver with /proc/stat says 100.
            cpu_rate: Some(100.0),
        };
        self.session.listening(now, setup);
    }
    fn turned_away(&mut self, _now: Instant, why: &Refusal) {
        self.session.refuse(match why {
            Refusal::Busy { .. } => errno::BUSY,
            Refusal::Rejected(_) => errno::NOT_PERMITTED,
        });
    }
    fn streams_connected(&mut self, _now: Instant) {
        self.events.push_back(ServerControlEvent::Start);
    }
    fn datagrams(&self) -> DatagramFormatKind {
        DATAGRAMS
    }
    fn local_senders_done(&mut self, _now: Instant, _totals: Vec<StreamTotal>) {}
    fn finish(&mut self, now: Instant, records: &[StreamRecord], cpu: CpuUsage, _error: Option<String>) {
        // netserver sends its results whatever ended the data phase; the counts say what ran.
        let counts = self.counts(records, &cpu);
        self.session.finished(now, &counts);
    }
    fn fail(&mut self, _now: Instant, _message: &str) {
        // Before the response, netperf hears a refusal; after it, the connection closes.
        self.session.refuse(errno::NOT_PERMITTED);
    }
    fn is_running(&self) -> bool {
        self.session.is_running()
    }
    fn is_done(&self) -> bool {
        self.session.is_done()
    }
}

/// The netchar test a netperf request asks for, or why it cannot run here.
pub fn to_spec(req: &TestRequest) -> Result<TestSpec, PeerRequestError> {
    let r = &req.omni;
    let mut spec = match req.kind {
        NetperfTest::TcpStream | NetperfTest::TcpMaerts => TestSpec::tcp_default(),
        NetperfTest::UdpStream => TestSpec::udp_default(),
        NetperfTest::TcpRr | NetperfTest::UdpRr | NetperfTest::TcpCrr => TestSpec::rr_default(),
    };
    spec.end = match req.end() {
        TestEnd::Seconds(0) => return Err(PeerRequestError::Endless),
        TestEnd::Seconds(s) => EndCondition::Seconds(f64::from(s)),
        TestEnd::Units(n) => EndCondition::Bytes(u64::from(n)),
    };
    spec.interval_seconds = 0.0;
    // netperf's `-Y ,TOS`: netserver marks its data socket (−1, and 0, leave it alone).
    spec.ip.tos = u8::try_from(r.socket_tos).ok().filter(|&t| t > 0);
    match req.kind {
        NetperfTest::TcpStream => {
            if r.receive_size > 0 {
                spec.block_bytes = r.receive_size as u64;
            }
        }
        NetperfTest::TcpMaerts => {
            spec.direction = Direction::Down;
            if r.send_size > 0 {
                spec.block_bytes = r.send_size as u64;
            }
        }
        NetperfTest::UdpStream => {
            // netperf's datagram size is not in its request: room for the largest.
            spec.block_bytes = netchar_model::spec::MAX_UDP_PAYLOAD;
            spec.udp = Some(UdpOptions { rate: UdpRate::Unlimited, ..UdpOptions::default() });
        }
        kind => {
            let (Ok(request), Ok(response)) = (u64::try_from(r.request_size), u64::try_from(r.response_size)) else {
                return Err(PeerRequestError::TransactionSizes {
                    test: kind.name(),
                    request: r.request_size,
                    response: r.response_size,
                });
            };
            spec.rr = Some(RrOptions {
                udp: kind == NetperfTest::UdpRr,
                request_bytes: request,
                response_bytes: response,
                connect_per_transaction: kind == NetperfTest::TcpCrr,
                ..RrOptions::default()
            });
        }
    }
    spec.tcp.window_bytes = req.send_buffer().max(req.recv_buffer()).map(u64::from);
    spec.tcp.nodelay = req.nodelay();
    spec.tcp.congestion = req.congestion_control();
    spec.server_cpu = req.affinity().map(|c| c as usize);
    spec.validate()
        .map_err(|source| PeerRequestError::OutOfRange { asker: format!("netperf's {}", req.kind.name()), source })?;
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use netchar_wire::netperf::server::Event;

    fn request(kind: NetperfTest, end: TestEnd) -> TestRequest {
        let mut c = Client::new(Instant::now(), TestParams::new(kind, end)).unwrap();
        let mut wire = Vec::new();
        c.poll_output(&mut wire);
        let mut s = Server::new(Instant::now());
        s.handle_input(Instant::now(), &wire).unwrap();
        let Some(Event::Test(t)) = s.poll_event() else { panic!("no test") };
        *t
    }

    #[test]
    fn netchar_tests_map_to_netperfs_and_back() {
        for (cmd, kind) in [
            (TestSpec::tcp_default(), NetperfTest::TcpStream),
            (TestSpec { direction: Direction::Down, ..TestSpec::tcp_default() }, NetperfTest::TcpMaerts),
            (TestSpec::udp_default(), NetperfTest::UdpStream),
            (TestSpec::rr_default(), NetperfTest::TcpRr),
        ] {
            assert_eq!(test_of(&cmd), Ok(kind));
            let spec = to_spec(&request(kind, TestEnd::Seconds(3))).unwrap();
            assert_eq!((spec.kind, spec.direction, spec.end), (cmd.kind, cmd.direction, EndCondition::Seconds(3.0)));
        }
        let crr = to_spec(&request(NetperfTest::TcpCrr, TestEnd::Seconds(1))).unwrap();
        assert!(crr.rr.unwrap().connect_per_transaction);
        let udp_rr = to_spec(&request(NetperfTest::UdpRr, TestEnd::Seconds(2))).unwrap();
        assert!(udp_rr.rr.unwrap().udp);
        let counted = to_spec(&request(NetperfTest::TcpRr, TestEnd::Units(50))).unwrap();
        assert_eq!(counted.end, EndCondition::Bytes(50), "-l -50: 50 transactions");
        assert_eq!(to_spec(&request(NetperfTest::TcpRr, TestEnd::Seconds(0))), Err(PeerRequestError::Endless));
    }

    #[test]
    fn what_netperf_cannot_carry_is_refused_before_any_traffic() {
        let now = Instant::now();
        // Each refusal names its flag, and its line says what to do.
        let refused = |spec: TestSpec, flag: &str, what: &str| {
            let e = NetperfControl::new(now, &spec, Family::V4).err().expect("refused");
            assert!(matches!(&e, SessionError::OptionRefused { flag: f, .. } if *f == flag), "{e:?}");
            assert!(e.to_string().starts_with("--proto netperf: ") && e.to_string().contains(what), "{e}");
        };
        refused(TestSpec { direction: Direction::Bidir, ..TestSpec::tcp_default() }, "--bidir", "go one way");
        refused(TestSpec { direction: Direction::Down, ..TestSpec::udp_default() }, "-R", "UDP_STREAM only sends");
        refused(TestSpec { end: EndCondition::Bytes(1000), ..TestSpec::udp_default() }, "-n", "by time only");
        refused(TestSpec { end: EndCondition::Seconds(1.5), ..TestSpec::tcp_default() }, "-t", "whole seconds");
        refused(TestSpec { omit_seconds: 1.0, ..TestSpec::tcp_default() }, "-O", "leave -O out");
        refused(TestSpec { measure_idle: true, ..TestSpec::tcp_default() }, "--idle", "netchar server features");
        let mut inflight = TestSpec::rr_default();
        inflight.rr.as_mut().unwrap().inflight = 4;
        refused(inflight, "--inflight", "one transaction in flight");
        // An rr kind without its options is no test netperf has.
        let bare = TestSpec { kind: TestKind::Rr, rr: None, ..TestSpec::tcp_default() };
        let e = NetperfControl::new(now, &bare, Family::V4).err().expect("refused");
        assert_eq!(e, SessionError::Unsupported("--proto netperf: netperf runs tcp, udp, rr and crr tests".into()));
        let mut p4 = TestSpec::rr_default();
        p4.streams = 4;
        assert_eq!(NetperfControl::new(now, &p4, Family::V4).unwrap().control_connections(), 4);
    }
}
