//! echo, discard and chargen (RFC 862/863/864), both roles.
//!
//! Client ([`ServiceControl`]): no control connection (`ControlConnection::None`); the test
//! is its data streams, run by netchar's own workers, so every figure is netchar's exact count:
//! - discard: this end sends (TCP or UDP); nobody reports what arrived, so the result has a
//!   sender side only and says so;
//! - echo: this end sends on a socket and a second stream reads what comes back on the same
//!   socket (`-R`/`--bidir` do not apply): bytes back must equal bytes sent. Over UDP the
//!   datagrams carry netchar's own header (sequence number, send time), returned unchanged, so
//!   loss, reordering and duplicates are counted exactly against this end's sent count. `rr`
//!   and `echo` tests run their request/response workers against it (round-trip latency);
//! - chargen: this end receives (TCP) for `-t` seconds, then closes.
//!
//! Server ([`ServicesListener`]): the three services over TCP and UDP on their own ports, each
//! TCP connection and each UDP source admitted as a test through the shared admission (so the
//! one-test-at-a-time rule and the connection caps hold across protocols), idle TCP
//! connections closed, and no UDP answer longer than its request
//! (netchar_wire::services::udp_reply_len). Its own serve loops answer them, with no session
//! on the server driver: the registry's one `ListenerKind::StatelessService` (crate::protocols).

use crate::control::{
    AnswerEnd, ClientControl, ControlConnection, ControlEvent, NoUdpSetup, OpenStream, Opening, PeerAnswer, PeerInfo,
    Transport, UdpOutcome,
};
use crate::dataplane::{DataSocket, DataStream, DatagramFormatKind, Payload, PeerDatagrams, StreamOptions, UdpWorker};
use crate::peers::{AddressTests, Joined, PeerContext, PeerListener};
use crate::registry::SessionError;
use crate::server_shared::ServerLog;
use netchar_model::{
    CpuUsage, Direction, EndCondition, Endpoint, Flow, Role, StreamRecord, StreamTotal, TestKind, TestSpec,
};
use netchar_wire::hello::{identify_peer, recognised_protocol, Hello, KnownProtocol, HELLO_LEN, MAGIC};
use netchar_wire::services::{udp_reply_len, ChargenSource, Service, CHARGEN_CYCLE};
use netchar_wire::ProtocolError;
use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

/// How long a UDP test of a source lasts after its last datagram, on the server.
const UDP_IDLE: Duration = Duration::from_secs(2);
/// UDP sources served at once (beyond this, new sources are ignored until one expires).
const MAX_UDP_SOURCES: usize = 64;
/// The longest wait before the stop flag is checked again.
const POLL: Duration = Duration::from_millis(100);

/// The spec a client test against `service` runs with: `spec` with the direction the service
/// implies (discard up, chargen down, echo both on one socket), or why it cannot run.
pub fn service_spec(service: Service, spec: &TestSpec) -> Result<TestSpec, SessionError> {
    let name = service.name();
    let no = |what: &str| Err(SessionError::Unsupported(format!("--proto {name}: {what}")));
    let refuse = |flag: &'static str, what: &str| Err(SessionError::option(flag, format!("--proto {name}: {what}")));
    let direction_flag = if spec.direction == Direction::Down { "-R" } else { "--bidir" };
    let mut s = spec.clone();
    if let Some(flag) = crate::registry::netchar_server_feature(spec) {
        return refuse(flag, "--server-load, --idle and a server CPU in -A are netchar server features");
    }
    match spec.kind {
        TestKind::Rr if spec.direction != Direction::Up => {
            return refuse(direction_flag, "-R and --bidir do not apply")
        }
        TestKind::Rr => {
            if service != Service::Echo {
                return no("request/response tests need an echo server (--proto echo)");
            }
            let rr = spec.rr.clone().unwrap_or_default();
            if rr.connect_per_transaction {
                return no("crr needs a netchar server: an echo server answers on one connection");
            }
            if rr.response_bytes != rr.request_bytes {
                return refuse(
                    "--response",
                    "an echo server answers with the request itself: --response must equal -l",
                );
            }
            s.direction = Direction::Up;
        }
        TestKind::Tcp | TestKind::Udp => {
            let implied = match service {
                Service::Echo => Direction::Bidir,
                Service::Discard => Direction::Up,
                Service::Chargen => Direction::Down,
            };
            if spec.direction != Direction::Up && spec.direction != implied {
                return refuse(direction_flag, "-R and --bidir do not apply: the service decides which way data flows");
            }
            match service {
                Service::Discard => {}
                Service::Echo => s.direction = Direction::Bidir,
                Service::Chargen if spec.kind == TestKind::Udp => {
                    return no("UDP chargen answers each datagram with 0-512 random characters and no sequence \
                               number: loss and rate cannot be measured; use TCP (netchar tcp --proto chargen)");
                }
                Service::Chargen => {
                    if matches!(spec.end, EndCondition::Bytes(_)) {
                        return refuse("-n", "chargen sends until the client closes: use -t, not -n");
                    }
                    s.direction = Direction::Down;
                }
            }
        }
    }
    Ok(s)
}

/// netchar as the client of an echo, discard or chargen server.
pub struct ServiceControl {
    service: Service,
    spec: TestSpec,
    events: VecDeque<ControlEvent>,
    admitted: bool,
    /// chargen: how long to receive, and the end once the workers started.
    receive_for: Option<Duration>,
    deadline: Option<Instant>,
    reported: bool,
    /// When the session was made: a time already past, for a timeout due at once.
    created: Instant,
    /// How long the driver waits for a stream's opening answer (the client's hello timeout).
    opening_wait: Duration,
}

impl ServiceControl {
    /// A session for `spec` (as [`service_spec`] made it).
    pub fn new(now: Instant, service: Service, spec: &TestSpec) -> Result<Self, SessionError> {
        let spec = service_spec(service, spec)?;
        let receive_for = match (service, spec.kind, spec.end) {
            (Service::Chargen, TestKind::Tcp, EndCondition::Seconds(s)) => Some(Duration::from_secs_f64(s)),
            _ => None,
        };
        Ok(Self {
            service,
            spec,
            events: VecDeque::new(),
            admitted: false,
            receive_for,
            deadline: None,
            reported: false,
            created: now,
            opening_wait: netchar_wire::session::Timeouts::default().hello,
        })
    }

    /// The data streams: echo's second stream reads on the first one's socket.
    fn streams(&self) -> Vec<OpenStream> {
        let spec = &self.spec;
        let mut out = Vec::new();
        let fresh = || {
            if spec.uses_udp() {
                Transport::Udp { handshake: Box::new(NoUdpSetup) }
            } else {
                Transport::Tcp { preamble: self.opening_bytes() }
            }
        };
        for &flow in spec.direction.flows() {
            for id in spec.stream_ids(flow) {
                let transport = match (flow, spec.direction) {
                    (Flow::Down, Direction::Bidir) => Transport::SameAs { id: id - spec.streams },
                    _ => fresh(),
                };
                out.push(OpenStream { id, flow, transport });
            }
        }
        out
    }

    /// What a TCP stream writes before the test: echo and chargen, netchar's control hello,
    /// which an echo server returns and a chargen server throws away, and to which the servers
    /// that speak first when spoken to (netchar's, iperf3's) answer so that they are named.
    /// Discard, nothing: its server never answers, so nothing could be learnt before the test.
    fn opening_bytes(&self) -> Vec<u8> {
        match self.service {
            Service::Echo | Service::Chargen => Hello::control().encode().to_vec(),
            Service::Discard => Vec::new(),
        }
    }

    /// "not an echo server: `what`".
    fn not_the_service(&self, what: String) -> ProtocolError {
        let article = if self.service == Service::Echo { "an" } else { "a" };
        ProtocolError::Peer(format!("not {article} {} server: {what}", self.service.name()))
    }

    fn report(&mut self) {
        if !self.reported {
            self.reported = true;
            self.events.push_back(ControlEvent::PeerReport {
                streams: Vec::new(),
                cpu: CpuUsage::default(),
                error: None,
            });
        }
    }
}

impl ClientControl for ServiceControl {
    fn handle_input(&mut self, _now: Instant, _bytes: &[u8]) -> Result<(), ProtocolError> {
        Ok(())
    }
    fn handle_eof(&mut self, _now: Instant) -> Result<(), ProtocolError> {
        Ok(())
    }
    fn poll_output(&mut self, _out: &mut Vec<u8>) {}
    fn poll_event(&mut self) -> Option<ControlEvent> {
        if !self.admitted {
            self.admitted = true;
            self.events.push_back(ControlEvent::Admitted {
                streams: self.streams(),
                peer: PeerInfo { concurrent_tests: 1, ..PeerInfo::default() },
                cookie: None,
            });
            self.events.push_back(ControlEvent::Start);
        }
        self.events.pop_front()
    }
    fn poll_timeout(&self) -> Option<Instant> {
        match (self.receive_for, self.deadline) {
            (_, Some(d)) if !self.reported => Some(d),
            // Due at once: the first call after the start fixes the receiving deadline.
            (Some(_), None) if self.admitted => Some(self.created),
            _ => None,
        }
    }
    fn handle_timeout(&mut self, now: Instant) -> Result<(), ProtocolError> {
        match (self.receive_for, self.deadline) {
            (Some(d), None) if self.admitted => self.deadline = Some(now + d),
            (_, Some(d)) if now >= d && !self.reported => {
                self.events.push_back(ControlEvent::EndReceivers);
                self.report();
            }
            _ => {}
        }
        Ok(())
    }
    fn local_senders_done(&mut self, _now: Instant, totals: Vec<StreamTotal>) {
        if self.service == Service::Echo && self.spec.direction == Direction::Bidir {
            // What went out must come back: the echo streams wait for exactly this.
            let back = totals.iter().map(|t| StreamTotal { id: t.id + self.spec.streams, ..*t }).collect();
            self.events.push_back(ControlEvent::PeerSenderDone(back));
        }
        self.report();
    }
    fn stop(&mut self, _now: Instant, _reason: &str) {
        if !self.reported {
            self.events.push_back(ControlEvent::EndReceivers);
        }
        self.report();
    }
    fn is_done(&self) -> bool {
        self.reported
    }
    fn awaits_opening(&self) -> bool {
        !self.opening_bytes().is_empty()
    }
    fn opening_answer(&mut self, _id: u32, answer: PeerAnswer<'_>) -> Result<Opening, ProtocolError> {
        let hello = Hello::control().encode();
        let b = answer.bytes;
        // A netchar hello may still be arriving: an echo server's copy of this one, or a
        // netchar server's own (which differs from the 11th byte on).
        let hello_arriving = b.len() < HELLO_LEN && b[..b.len().min(MAGIC.len())] == MAGIC[..b.len().min(MAGIC.len())];
        match (self.service, answer.end) {
            (Service::Echo, _) if b.len() >= HELLO_LEN && b[..HELLO_LEN] == hello => Ok(Opening::Take(HELLO_LEN)),
            (Service::Chargen, _) if recognised_protocol(b) == Some(KnownProtocol::Chargen) && !hello_arriving => {
                Ok(Opening::Take(0))
            }
            (Service::Chargen, AnswerEnd::Open)
                if b.len() < 8 && b.iter().all(|c| c.is_ascii_graphic() || *c == b' ') =>
            {
                Ok(Opening::Wait)
            }
            (_, AnswerEnd::Open) if hello_arriving => Ok(Opening::Wait),
            (_, AnswerEnd::Silent) if b.is_empty() => {
                let (service, does) = match self.service {
                    Service::Echo => ("an echo server", "returns them at once"),
                    _ => ("a chargen server", "sends at once, unasked"),
                };
                Err(self.not_the_service(format!(
                    "nothing came back to netchar's opening bytes within {:.0} s ({service} {does}): the peer \
                     waits for its client's own bytes, as {} does",
                    self.opening_wait.as_secs_f64(),
                    netchar_wire::known::SILENT_SERVERS
                )))
            }
            _ => Err(self.not_the_service(identify_peer(b))),
        }
    }
    fn udp_unanswered(&mut self, outcome: &UdpOutcome) -> Option<String> {
        let what = match (outcome.refusal(), self.service) {
            (Some(refusal), _) => refusal,
            // An echo server returns every datagram: none at all is no echo server's doing.
            (None, Service::Echo) if self.spec.kind == TestKind::Udp && outcome.sent > 0 && outcome.received == 0 => {
                format!("none of the {} datagrams came back", outcome.sent)
            }
            // Discard answers nothing by design: silence tells nothing.
            _ => return None,
        };
        let article = if self.service == Service::Echo { "an" } else { "a" };
        Some(format!("not {article} {} server: {what}", self.service.name()))
    }
    fn unread_answer(&mut self, id: u32, answer: PeerAnswer<'_>, failed: bool) -> Result<(), ProtocolError> {
        if self.service != Service::Discard {
            return Ok(());
        }
        let closed_early = failed && answer.end == AnswerEnd::Closed;
        // The stream's first bytes as its sender wrote them, which an echo server returns.
        let first = answer.bytes.len().min(self.spec.block_bytes.max(1) as usize);
        let payload = netchar_wire::payload::StreamPayload::new(
            self.spec.payload.unwrap_or_default(),
            self.spec.block_bytes as usize,
            first,
        );
        let sent = payload.slice(id, 0, first);
        match netchar_wire::hello::not_a_silent_server("a discard server", sent, answer.bytes, closed_early) {
            Some(wrong) => Err(ProtocolError::Peer(wrong)),
            None => Ok(()),
        }
    }
    fn datagrams(&self) -> DatagramFormatKind {
        match self.spec.direction {
            Direction::Bidir => {
                DatagramFormatKind::Peer(PeerDatagrams { protocol: "echo", variant: 0, run: echo_worker })
            }
            _ => DatagramFormatKind::Native,
        }
    }
    fn connection(&self) -> ControlConnection {
        ControlConnection::None
    }
    fn stream_options(&self) -> StreamOptions {
        StreamOptions { echoed: self.service == Service::Echo, ..StreamOptions::default() }
    }
}

/// One UDP worker of an echo test: netchar's header through the echo server, the echoes
/// counted for the stream as many ids above the sender as the test has streams each way
/// (netchar_wire::services::EchoFormat).
fn echo_worker(worker: UdpWorker<'_>) -> io::Result<()> {
    let format = netchar_wire::services::EchoFormat { offset: worker.spec().streams };
    worker.run(&format)
}

/// The ports of `netchar server --services`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServicePorts {
    /// echo (7).
    pub echo: u16,
    /// discard (9).
    pub discard: u16,
    /// chargen (19).
    pub chargen: u16,
}

impl Default for ServicePorts {
    fn default() -> Self {
        Self { echo: 7, discard: 9, chargen: 19 }
    }
}

/// The bound sockets of one service.
struct Bound {
    service: Service,
    tcp: TcpListener,
    udp: UdpSocket,
}

/// echo, discard and chargen over TCP and UDP, bound.
pub struct ServicesListener {
    bound: Vec<Bound>,
    first: SocketAddr,
}

impl ServicesListener {
    /// Binds the three services on `ip` (TCP and UDP each); a busy port fails here.
    pub fn bind(ip: IpAddr, ports: ServicePorts) -> io::Result<Self> {
        let mut bound = Vec::new();
        for (service, port) in
            [(Service::Echo, ports.echo), (Service::Discard, ports.discard), (Service::Chargen, ports.chargen)]
        {
            let addr = SocketAddr::new(ip, port);
            let err =
                |what: &str, e: io::Error| io::Error::new(e.kind(), format!("{} {what} {addr}: {e}", service.name()));
            // Port 0 picks a port for TCP; UDP takes the same number.
            let (tcp, udp) = super::bind_tcp_and_udp(addr, bind_udp).map_err(|e| err("TCP and UDP", e))?;
            bound.push(Bound { service, tcp, udp });
        }
        let first = bound[0].tcp.local_addr()?;
        Ok(Self { bound, first })
    }

    /// The port each service took (useful with port 0).
    pub fn ports(&self) -> ServicePorts {
        let port = |s: Service| {
            self.bound.iter().find(|b| b.service == s).and_then(|b| b.tcp.local_addr().ok()).map_or(0, |a| a.port())
        };
        ServicePorts { echo: port(Service::Echo), discard: port(Service::Discard), chargen: port(Service::Chargen) }
    }
}

/// The registry's binder (crate::protocols::LISTENERS): `ports` are echo, discard, chargen.
pub(crate) fn bind_listener(ip: IpAddr, ports: &[u16]) -> io::Result<Box<dyn PeerListener>> {
    Ok(Box::new(ServicesListener::bind(ip, ServicePorts { echo: ports[0], discard: ports[1], chargen: ports[2] })?))
}

fn session(a: &crate::registry::SessionArgs<'_>, service: Service) -> Result<Box<dyn ClientControl>, SessionError> {
    let mut control = ServiceControl::new(a.now, service, a.spec)?;
    control.opening_wait = a.cfg.timeouts.hello;
    Ok(Box::new(control))
}

/// The registry's client constructors and test shapes (crate::protocols).
pub(crate) fn echo_session(a: &crate::registry::SessionArgs<'_>) -> Result<Box<dyn ClientControl>, SessionError> {
    session(a, Service::Echo)
}
/// See [`echo_session`].
pub(crate) fn discard_session(a: &crate::registry::SessionArgs<'_>) -> Result<Box<dyn ClientControl>, SessionError> {
    session(a, Service::Discard)
}
/// See [`echo_session`].
pub(crate) fn chargen_session(a: &crate::registry::SessionArgs<'_>) -> Result<Box<dyn ClientControl>, SessionError> {
    session(a, Service::Chargen)
}
/// The service decides the direction (echo: both ways on one socket).
pub(crate) fn echo_shape(spec: &TestSpec) -> Result<TestSpec, SessionError> {
    service_spec(Service::Echo, spec)
}
/// See [`echo_shape`].
pub(crate) fn discard_shape(spec: &TestSpec) -> Result<TestSpec, SessionError> {
    service_spec(Service::Discard, spec)
}
/// See [`echo_shape`].
pub(crate) fn chargen_shape(spec: &TestSpec) -> Result<TestSpec, SessionError> {
    service_spec(Service::Chargen, spec)
}

/// echo returns what it gets and reports nothing.
pub(crate) fn echo_measurement(_: &TestSpec) -> (netchar_model::FarEnd, Vec<netchar_model::Caveat>) {
    let note = "round trip through the echo server: the server reports nothing, both figures are this end's";
    (netchar_model::FarEnd::Echoes, vec![netchar_model::Caveat::always(None, note)])
}

/// discard takes what comes and reports nothing.
pub(crate) fn discard_measurement(spec: &TestSpec) -> (netchar_model::FarEnd, Vec<netchar_model::Caveat>) {
    let what = if spec.kind == TestKind::Udp {
        " (no loss figure)"
    } else {
        " (TCP delivered what was acknowledged, but bytes still in the sender's socket buffer at the end count here)"
    };
    let note =
        format!("discard (RFC 863) reports nothing: what arrived is unknown{what}; these are the sender's figures");
    (netchar_model::FarEnd::Sink, vec![netchar_model::Caveat::always(Some(Flow::Up), note)])
}

/// chargen sends until the client closes and reports nothing.
pub(crate) fn chargen_measurement(_: &TestSpec) -> (netchar_model::FarEnd, Vec<netchar_model::Caveat>) {
    let note = "chargen (RFC 864) sends until the client closes: there is no sender count, only what arrived";
    (netchar_model::FarEnd::Source, vec![netchar_model::Caveat::always(Some(Flow::Down), note)])
}

impl PeerListener for ServicesListener {
    fn name(&self) -> &'static str {
        "services"
    }
    fn describe(&self) -> String {
        let p = self.ports();
        format!("services: echo on {}, discard on {}, chargen on {} (TCP and UDP)", p.echo, p.discard, p.chargen)
    }
    fn local_addr(&self) -> SocketAddr {
        self.first
    }
    fn udp_ports(&self) -> Vec<u16> {
        self.bound.iter().filter_map(|b| b.udp.local_addr().ok()).map(|a| a.port()).collect()
    }
    fn run(self: Box<Self>, ctx: PeerContext) {
        let mut threads = Vec::new();
        let tests = AddressTests::default();
        for b in self.bound {
            let (c1, c2) = (ctx.clone(), ctx.clone());
            let (t1, t2) = (tests.clone(), tests.clone());
            let Bound { service, tcp, udp } = b;
            threads.push(std::thread::spawn(move || serve_tcp(service, tcp, c1, t1)));
            threads.push(std::thread::spawn(move || serve_udp(service, udp, c2, t2)));
        }
        for t in threads {
            let _ = t.join();
        }
    }
}

/// The spec a service connection is admitted as: what it does, for as long as the server
/// allows one test to run.
fn admitted_spec(service: Service, kind: TestKind, ctx: &PeerContext) -> TestSpec {
    let mut spec = if kind == TestKind::Udp { TestSpec::udp_default() } else { TestSpec::tcp_default() };
    spec.direction = match service {
        Service::Echo => Direction::Bidir,
        Service::Discard => Direction::Up,
        Service::Chargen => Direction::Down,
    };
    if let Some(d) = ctx.limits().max_duration {
        spec.end = EndCondition::Seconds(d.as_secs_f64());
    }
    if let Some(r) = ctx.limits().max_rate {
        // A rate-capped server admits tests that state a rate: these services are paced to
        // the whole cap while they run.
        spec.tcp.rate_bps_per_stream = Some(r);
        if let Some(u) = spec.udp.as_mut() {
            u.rate = netchar_model::UdpRate::BitsPerSecond(r);
        }
    }
    spec
}

fn serve_tcp(service: Service, listener: TcpListener, ctx: PeerContext, tests: AddressTests) {
    super::serve_connections(listener, &ctx, service.name(), move |stream, peer, _, ctx| {
        let spec = admitted_spec(service, TestKind::Tcp, ctx);
        let test = match tests.join(ctx, &spec, peer) {
            Ok(t) => t,
            Err(r) => {
                ctx.log(ServerLog::Rejected { peer, reason: format!("{}: {}", service.name(), r.reason) });
                return;
            }
        };
        let (streams, error) = tcp_session(service, &stream, &spec, ctx);
        test.test.log(ctx, service.name(), peer, spec, streams, error);
    });
}

/// Serves one TCP connection: discard counts and chargen sends through the data plane
/// (chargen's RFC 864 lines as its payload); echo returns what it reads ([`echo_reflect`]).
/// Each ends at the client's close, the idle timeout (nothing read: echo, discard; nothing
/// accepted: chargen), the server's --max-duration or its stop.
fn tcp_session(
    service: Service,
    stream: &TcpStream,
    spec: &TestSpec,
    ctx: &PeerContext,
) -> (Vec<StreamRecord>, Option<String>) {
    let _ = stream.set_nonblocking(false);
    if service == Service::Echo {
        return echo_reflect(stream, ctx);
    }
    let mut run = crate::peers::capped(spec, ctx.limits());
    run.streams = 1;
    // Until the client closes, within the server's --max-duration.
    run.end =
        ctx.limits().max_duration.map_or(EndCondition::Bytes(u64::MAX), |d| EndCondition::Seconds(d.as_secs_f64()));
    let (flow, role, options) = if service == Service::Chargen {
        run.direction = Direction::Down;
        run.block_bytes = 16 * 1024;
        let payload = Payload { fill: |buf| ChargenSource::new().fill(buf), period: CHARGEN_CYCLE };
        (
            Flow::Down,
            Role::Sender,
            StreamOptions { payload: Some(payload), until_peer_closes: true, ..Default::default() },
        )
    } else {
        run.direction = Direction::Up;
        run.block_bytes = 64 * 1024;
        // Under --max-rate discard takes no more than the rate.
        (Flow::Up, Role::Receiver, StreamOptions { pace_receivers: true, ..Default::default() })
    };
    let socket = match stream.try_clone() {
        Ok(s) => DataSocket::Tcp(s),
        Err(e) => return (Vec::new(), Some(e.to_string())),
    };
    let stream = DataStream { id: 1, flow, role, socket };
    crate::peers::run_streams(ctx, run, DatagramFormatKind::Native, options, vec![stream], Instant::now())
}

/// echo over TCP: what is read is written back, on the one socket, paced by the data plane's
/// pacer under `--max-rate`.
///
/// Its own loop, not the data plane's: its workers own one direction of a stream each, and
/// echo's writes are its reads (no schedule, no payload of its own).
fn echo_reflect(stream: &TcpStream, ctx: &PeerContext) -> (Vec<StreamRecord>, Option<String>) {
    let _ = stream.set_read_timeout(Some(POLL));
    let _ = stream.set_write_timeout(Some(POLL));
    let idle = ctx.limits().idle_timeout;
    let until = ctx.limits().max_duration.map(|d| Instant::now() + d);
    let started = Instant::now();
    let pacer = crate::dataplane::BytePacer::new(ctx.limits().max_rate, started);
    let mut last_progress = started;
    let (mut received, mut sent) = (0u64, 0u64);
    let (mut r_end, mut s_end) = (0.0f64, 0.0f64);
    let mut buf = vec![0u8; 64 * 1024];
    let mut pending: (usize, usize) = (0, 0);
    let (mut reader, mut writer) = (stream, stream);
    let error = loop {
        let now = Instant::now();
        if ctx.stop().is_raised() {
            break Some("the server is stopping".to_string());
        }
        if until.is_some_and(|u| now >= u) {
            break Some("the server's --max-duration was reached".to_string());
        }
        if now - last_progress >= idle {
            break Some(format!("idle for {:.0} s (the server's --idle-timeout)", idle.as_secs_f64()));
        }
        if let Some(wait) = pacer.and_then(|p| p.wait(received.max(sent), now)) {
            std::thread::sleep(wait.min(POLL));
            continue;
        }
        if pending.0 < pending.1 {
            match writer.write(&buf[pending.0..pending.1]) {
                Ok(0) => break None,
                Ok(n) => {
                    pending.0 += n;
                    sent += n as u64;
                    s_end = started.elapsed().as_secs_f64();
                    last_progress = Instant::now();
                }
                Err(e) if crate::is_retry(&e) => {}
                Err(e) if closed(&e) => break None,
                Err(e) => break Some(e.to_string()),
            }
            continue;
        }
        match reader.read(&mut buf) {
            Ok(0) => break None,
            Ok(n) => {
                received += n as u64;
                r_end = started.elapsed().as_secs_f64();
                last_progress = Instant::now();
                pending = (0, n);
            }
            Err(e) if crate::is_retry(&e) => {}
            Err(e) if closed(&e) => break None,
            Err(e) => break Some(e.to_string()),
        }
    };
    let records = vec![
        StreamRecord::bare(1, Flow::Up, Role::Receiver, Endpoint::Server, received, r_end),
        StreamRecord::bare(2, Flow::Down, Role::Sender, Endpoint::Server, sent, s_end),
    ];
    (records, error)
}

/// A UDP socket on `addr` (dual-stack on `::`); a port in use fails.
fn bind_udp(addr: SocketAddr) -> io::Result<UdpSocket> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, None)?;
    if addr.is_ipv6() {
        socket.set_only_v6(false)?;
    }
    socket.bind(&addr.into())?;
    Ok(socket.into())
}

fn closed(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionAborted)
}

/// One UDP source's test on the server.
struct UdpSource {
    test: Joined,
    spec: TestSpec,
    started: Instant,
    last: Instant,
    received: (u64, u64),
    sent: (u64, u64),
    chargen: ChargenSource,
}

fn serve_udp(service: Service, socket: UdpSocket, ctx: PeerContext, tests: AddressTests) {
    let _ = socket.set_read_timeout(Some(POLL));
    let mut sources: HashMap<SocketAddr, UdpSource> = HashMap::new();
    let mut buf = vec![0u8; 65_536];
    let mut random = 0x9e37_79b9_7f4a_7c15u64 ^ std::process::id() as u64;
    let mut refused_logged: HashMap<IpAddr, Instant> = HashMap::new();
    loop {
        let now = Instant::now();
        let stopping = ctx.stop().is_raised();
        // Sources quiet for a while (or all, when stopping) end their test and free the slot.
        let expired: Vec<SocketAddr> =
            sources.iter().filter(|(_, s)| stopping || now - s.last >= UDP_IDLE).map(|(a, _)| *a).collect();
        for a in expired {
            if let Some(s) = sources.remove(&a) {
                finish_udp(&ctx, service, a, s);
            }
        }
        if stopping {
            return;
        }
        refused_logged.retain(|_, t| now - *t < Duration::from_secs(10));
        let (n, from) = match socket.recv_from(&mut buf) {
            Ok(x) => x,
            Err(_) => continue,
        };
        // From a service port (a forged 7 -> 7 or 19 -> 7) or one of ours: never answered,
        // or two services would answer each other for ever.
        if !ctx.inbound(service.name(), from, n) {
            continue;
        }
        let now = Instant::now();
        if !sources.contains_key(&from) {
            if sources.len() >= MAX_UDP_SOURCES {
                continue;
            }
            let spec = admitted_spec(service, TestKind::Udp, &ctx);
            match tests.join(&ctx, &spec, from) {
                Ok(test) => {
                    sources.insert(
                        from,
                        UdpSource {
                            test,
                            spec,
                            started: now,
                            last: now,
                            received: (0, 0),
                            sent: (0, 0),
                            chargen: ChargenSource::new(),
                        },
                    );
                }
                Err(r) => {
                    // Dropped unanswered; logged once per source per 10 s.
                    if refused_logged.len() < 1024 && refused_logged.insert(from.ip(), now).is_none() {
                        ctx.log(ServerLog::Rejected {
                            peer: from,
                            reason: format!("{} (UDP): {}", service.name(), r.reason),
                        });
                    }
                    continue;
                }
            }
        }
        let Some(s) = sources.get_mut(&from) else { continue };
        s.last = now;
        s.received.0 += 1;
        s.received.1 += n as u64;
        if ctx.limits().max_duration.is_some_and(|d| now - s.started > d) {
            continue;
        }
        if let Some(r) = ctx.limits().max_rate {
            let due = s.started + Duration::from_secs_f64(s.sent.1 as f64 * 8.0 / r as f64);
            if due > now {
                continue;
            }
        }
        random ^= random << 13;
        random ^= random >> 7;
        random ^= random << 17;
        let wanted = (random % 513) as usize;
        let Some(len) = udp_reply_len(service, n, wanted) else { continue };
        if !ctx.may_answer(service.name(), from, len) {
            continue;
        }
        let reply = match service {
            Service::Echo => buf[..len].to_vec(),
            _ => s.chargen.datagram(len),
        };
        if socket.send_to(&reply, from).is_ok() {
            s.sent.0 += 1;
            s.sent.1 += len as u64;
        }
    }
}

fn finish_udp(ctx: &PeerContext, service: Service, from: SocketAddr, s: UdpSource) {
    let seconds = s.last.saturating_duration_since(s.started).as_secs_f64();
    let mut streams = Vec::new();
    let mut up = StreamRecord::bare(1, Flow::Up, Role::Receiver, Endpoint::Server, s.received.1, seconds);
    up.udp_received = None;
    streams.push(up);
    if service != Service::Discard {
        let id = if service == Service::Echo { 2 } else { 1 };
        streams.push(StreamRecord::bare(id, Flow::Down, Role::Sender, Endpoint::Server, s.sent.1, seconds));
    }
    let mut spec = s.spec;
    if service == Service::Chargen {
        // The log shows both what came and what went.
        spec.direction = Direction::Bidir;
    }
    s.test.test.log(ctx, service.name(), from, spec, streams, None);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_service_runs_the_test_it_can_and_refuses_the_rest() {
        let tcp = TestSpec::tcp_default();
        assert_eq!(service_spec(Service::Discard, &tcp).unwrap().direction, Direction::Up);
        assert_eq!(service_spec(Service::Echo, &tcp).unwrap().direction, Direction::Bidir);
        assert_eq!(service_spec(Service::Chargen, &tcp).unwrap().direction, Direction::Down);
        let e = service_spec(Service::Chargen, &TestSpec::udp_default()).unwrap_err();
        assert!(matches!(&e, SessionError::Unsupported(m) if m.contains("UDP chargen")), "{e:?}");
        let mut rev = tcp.clone();
        rev.direction = Direction::Down;
        let e = service_spec(Service::Echo, &rev).unwrap_err();
        assert!(e.flag() == Some("-R") && e.to_string().contains("-R and --bidir do not apply"), "{e:?}");
        assert!(service_spec(Service::Discard, &TestSpec::rr_default()).is_err());
        assert!(service_spec(Service::Echo, &TestSpec::rr_default()).is_ok());
    }

    #[test]
    fn echo_streams_share_their_senders_socket() {
        let mut spec = TestSpec::tcp_default();
        spec.streams = 2;
        let mut c = ServiceControl::new(Instant::now(), Service::Echo, &spec).unwrap();
        let Some(ControlEvent::Admitted { streams, .. }) = c.poll_event() else { panic!("admitted first") };
        let shape: Vec<_> = streams
            .iter()
            .map(|s| (s.id, s.flow, matches!(s.transport, Transport::SameAs { id } if id + 2 == s.id)))
            .collect();
        assert_eq!(shape, [(1, Flow::Up, false), (2, Flow::Up, false), (3, Flow::Down, true), (4, Flow::Down, true)]);
        assert!(matches!(c.poll_event(), Some(ControlEvent::Start)));
        assert!(c.poll_event().is_none());
        c.local_senders_done(Instant::now(), vec![StreamTotal { id: 1, bytes: 10, packets: 0 }]);
        let Some(ControlEvent::PeerSenderDone(t)) = c.poll_event() else { panic!("echo waits for its bytes") };
        assert_eq!((t[0].id, t[0].bytes), (3, 10));
        assert!(matches!(c.poll_event(), Some(ControlEvent::PeerReport { .. })));
        assert!(c.is_done());
    }

    #[test]
    fn chargen_receives_for_its_time_then_ends_its_receivers() {
        let mut spec = TestSpec::tcp_default();
        spec.end = EndCondition::Seconds(2.0);
        let mut c = ServiceControl::new(Instant::now(), Service::Chargen, &spec).unwrap();
        while c.poll_event().is_some() {}
        let t0 = Instant::now();
        c.handle_timeout(t0).unwrap();
        assert_eq!(c.poll_timeout(), Some(t0 + Duration::from_secs(2)));
        c.handle_timeout(t0 + Duration::from_secs(1)).unwrap();
        assert!(c.poll_event().is_none());
        c.handle_timeout(t0 + Duration::from_secs(2)).unwrap();
        assert!(matches!(c.poll_event(), Some(ControlEvent::EndReceivers)));
        assert!(matches!(c.poll_event(), Some(ControlEvent::PeerReport { .. })));
        assert!(c.is_done() && c.poll_timeout().is_none());
    }

    #[test]
    fn echo_and_chargen_judge_the_answer_to_netchars_hello_and_discard_what_came_back() {
        let now = Instant::now();
        let tcp = TestSpec::tcp_default();
        let hello = Hello::control().encode();
        fn answer(bytes: &[u8], end: AnswerEnd) -> PeerAnswer<'_> {
            PeerAnswer { bytes, end }
        }
        let mut echo = ServiceControl::new(now, Service::Echo, &tcp).unwrap();
        assert!(echo.awaits_opening() && echo.opening_bytes() == hello);
        // Its copy of the hello, taken off the stream; a part of it is waited on.
        assert_eq!(echo.opening_answer(1, answer(&hello[..11], AnswerEnd::Open)), Ok(Opening::Wait));
        assert_eq!(echo.opening_answer(1, answer(&hello, AnswerEnd::Open)), Ok(Opening::Take(HELLO_LEN)));
        let server = Hello::server().encode();
        let e = echo.opening_answer(1, answer(&server, AnswerEnd::Open)).unwrap_err().to_string();
        assert!(e.starts_with("not an echo server: a netchar server answered"), "{e}");
        let e = echo.opening_answer(1, answer(&[], AnswerEnd::Closed)).unwrap_err().to_string();
        assert!(e.contains("as a netio server does"), "{e}");
        let e = echo.opening_answer(1, answer(&[], AnswerEnd::Silent)).unwrap_err().to_string();
        assert!(e.contains("nothing came back to netchar's opening bytes within 5 s"), "{e}");

        let mut chargen = ServiceControl::new(now, Service::Chargen, &tcp).unwrap();
        let line = b" !\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefgh\r\n";
        assert_eq!(chargen.opening_answer(1, answer(&line[..5], AnswerEnd::Open)), Ok(Opening::Wait));
        assert_eq!(chargen.opening_answer(1, answer(line, AnswerEnd::Open)), Ok(Opening::Take(0)), "kept as data");
        let e = chargen.opening_answer(1, answer(&hello, AnswerEnd::Open)).unwrap_err().to_string();
        assert!(e.contains("an echo server answered"), "{e}");
        let e = chargen.opening_answer(1, answer(&[0x09], AnswerEnd::Open)).unwrap_err().to_string();
        assert!(e.starts_with("not a chargen server: an iperf3 server answered"), "{e}");

        let mut discard = ServiceControl::new(now, Service::Discard, &tcp).unwrap();
        assert!(!discard.awaits_opening());
        assert_eq!(discard.unread_answer(1, answer(&[], AnswerEnd::Closed), false), Ok(()), "closed after the client");
        let e = discard.unread_answer(1, answer(&[], AnswerEnd::Closed), true).unwrap_err().to_string();
        assert!(e.contains("during the test without a word"), "{e}");
        // What its sender wrote (netchar's pattern by default), returned: an echo server.
        let e = discard.unread_answer(1, answer(b"0123456789012", AnswerEnd::Open), false).unwrap_err().to_string();
        assert!(e.contains("an echo server answered"), "{e}");
    }

    #[test]
    fn over_udp_only_the_hosts_refusals_tell_against_discard_and_nothing_back_against_echo() {
        let now = Instant::now();
        let udp = TestSpec::udp_default();
        let silent = UdpOutcome { sent: 85, refused: 0, received: 0, port: 9 };
        let refused = UdpOutcome { sent: 85, refused: 42, received: 0, port: 9 };
        let mut discard = ServiceControl::new(now, Service::Discard, &udp).unwrap();
        assert_eq!(discard.udp_unanswered(&silent), None, "discard is silent by design");
        assert_eq!(
            discard.udp_unanswered(&refused).as_deref(),
            Some("not a discard server: nothing takes UDP at port 9 (the host refused 42 of 85 datagrams: port unreachable)")
        );
        let mut echo = ServiceControl::new(now, Service::Echo, &udp).unwrap();
        assert_eq!(
            echo.udp_unanswered(&silent).as_deref(),
            Some("not an echo server: none of the 85 datagrams came back")
        );
        assert_eq!(
            echo.udp_unanswered(&UdpOutcome { received: 80, ..silent }),
            None,
            "5 lost is loss, not a wrong server"
        );
    }
}
