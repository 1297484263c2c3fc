//! iperf3, both roles: [`Iperf3Control`] is netchar as the client of an iperf3 server (behind
//! the client seam, crate::control); [`Iperf3Listener`] is `netchar server --iperf3`, answering
//! unmodified iperf3 clients (3.7 and later; TCP and UDP, `-R`, `--bidir`, `-P`,
//! `--get-server-output`), with netchar's workers and counters. The codecs are
//! netchar_wire::iperf3.
//!
//! Server role:
//!
//! One TCP listener takes control and data connections alike, as iperf3's does: the first 37
//! bytes are a cookie, and a cookie of a test waiting for its streams makes a data connection.
//! UDP streams open with a 4-byte hello on the same port number; the hello's sender gets a
//! socket connected to it and the 4-byte answer. A test's data must come from its control
//! connection's address (or `--allow-data-from`), as for native tests.
//!
//! Exactness: iperf3 clients send their own results before the server's, so this server knows
//! each client sender's exact total before it answers and settles its receivers on it: TCP
//! receivers read until they have every byte the client wrote, UDP receivers count loss against
//! the client's datagram count. The client's "receiver" line is then the server's exact count.

use super::{PeerContext, PeerListener};
use crate::admission::canonical;
use crate::admission::{DataConn, Refusal, ServerLimit};
use crate::control::{ClientControl, ControlEvent, OpenStream, PeerInfo, Transport, UdpHandshake};
use crate::dataplane::{DatagramFormatKind, PeerDatagrams, UdpWorker};
use crate::error::PeerRequestError;
use crate::registry::SessionError;
use crate::server_control::{Admission, ServerControl, ServerControlEvent, ServerRequest};
use crate::server_shared::{bind_udp, ServerLog};
use netchar_model::{
    CpuUsage, Direction, EndCondition, Flow, Role, StreamRecord, StreamTotal, TestKind, TestSpec, UdpOptions, UdpRate,
};
use netchar_wire::iperf3::server::{self as wire, ClientParams, Event, Server as Session, StreamFigures};
use netchar_wire::iperf3::{udp_reply_to, wire_stream_id, COOKIE_LEN};
use netchar_wire::ProtocolError;
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// iperf3's port.
pub const DEFAULT_PORT: u16 = 5201;
/// iperf3's `i_errno` for more parallel streams than allowed (IENUMSTREAMS).
const IE_NUM_STREAMS: i32 = 6;
/// A new connection must present its cookie within this.
const COOKIE_WAIT: Duration = Duration::from_secs(5);

/// Tests waiting for their data streams: by cookie (TCP) and by client address (UDP).
#[derive(Default)]
struct Routes {
    by_cookie: HashMap<[u8; COOKIE_LEN], (IpAddr, mpsc::SyncSender<DataConn>)>,
}

/// The iperf3 listener: TCP and UDP on one port.
pub struct Iperf3Listener {
    tcp: TcpListener,
    udp: UdpSocket,
}

impl Iperf3Listener {
    /// Binds TCP and UDP on `addr` (`[::]` also takes IPv4).
    pub fn bind(addr: SocketAddr) -> io::Result<Self> {
        let (tcp, udp) = super::bind_tcp_and_udp(addr, bind_udp)?;
        Ok(Self { tcp, udp })
    }
}

/// The registry's binder (crate::protocols::LISTENERS): `ports` is the iperf3 port.
pub(crate) fn bind_listener(ip: IpAddr, ports: &[u16]) -> io::Result<Box<dyn PeerListener>> {
    Ok(Box::new(Iperf3Listener::bind(SocketAddr::new(ip, ports[0]))?))
}

impl PeerListener for Iperf3Listener {
    fn name(&self) -> &'static str {
        "iperf3"
    }

    fn describe(&self) -> String {
        format!("answering iperf3 clients on {} (TCP and UDP), under the same limits", self.local_addr())
    }

    fn local_addr(&self) -> SocketAddr {
        self.tcp.local_addr().expect("a bound listener has an address")
    }

    fn udp_ports(&self) -> Vec<u16> {
        self.udp.local_addr().map(|a| a.port()).into_iter().collect()
    }

    fn run(self: Box<Self>, ctx: PeerContext) {
        let routes = Arc::new(Mutex::new(Routes::default()));
        let hellos = {
            let (ctx, routes) = (ctx.clone(), routes.clone());
            let udp = self.udp;
            std::thread::Builder::new().name("netchar-iperf3-udp".into()).spawn(move || udp_hellos(udp, &ctx, &routes))
        };
        // iperf3 numbers a test's streams in the order the client connected them, and each
        // connection's cookie is read on a thread of its own: the accept order goes with it.
        super::serve_connections(self.tcp, &ctx, "iperf3", move |stream, peer, order, ctx| {
            handle_connection(stream, peer, order, ctx, &routes);
        });
        if let Ok(h) = hellos {
            let _ = h.join();
        }
    }
}

/// Routes UDP hellos to the test of the sender's address that waits for UDP streams.
fn udp_hellos(udp: UdpSocket, ctx: &PeerContext, routes: &Mutex<Routes>) {
    let _ = udp.set_read_timeout(Some(Duration::from_millis(100)));
    let mut buf = [0u8; 64];
    while !ctx.stop().is_raised() {
        let Ok((n, from)) = udp.recv_from(&mut buf) else { continue };
        // Only the hello's 4 bytes: anything longer is a data datagram that lost its race
        // with a stream socket's connect, or not iperf3's.
        if n != 4 || !ctx.inbound("iperf3", from, n) {
            continue;
        }
        let routes = routes.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((control, tx)) = routes.by_cookie.values().find(|(ip, _)| ctx.data_allowed(*ip, from.ip())) {
            // From the control connection's address, the handshake proved it; from another
            // (`--allow-data-from`), a hello proves nothing, and the test's traffic may go
            // there only for an allowed network.
            let proven = canonical(*control) == canonical(from.ip());
            if proven || ctx.may_send_unprompted("iperf3", from).is_ok() {
                let _ = tx.try_send(DataConn::UdpHello(from, buf[..n].to_vec()));
            }
        }
    }
}

/// Reads a connection's cookie, then hands it to its test or serves it as a control connection.
fn handle_connection(
    mut stream: TcpStream,
    peer: SocketAddr,
    order: u64,
    ctx: &PeerContext,
    routes: &Arc<Mutex<Routes>>,
) {
    let _ = stream.set_nonblocking(false);
    let mut cookie = [0u8; COOKIE_LEN];
    let deadline = Instant::now() + COOKIE_WAIT;
    let mut got = 0;
    while got < COOKIE_LEN {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || ctx.stop().is_raised() {
            ctx.log(ServerLog::Rejected {
                peer,
                reason: format!("iperf3: no cookie within {} s of connecting", COOKIE_WAIT.as_secs()),
            });
            return;
        }
        let _ = stream.set_read_timeout(Some(left.min(Duration::from_millis(200))));
        match stream.read(&mut cookie[got..]) {
            Ok(0) => return,
            Ok(n) => got += n,
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
            Err(_) => return,
        }
    }
    {
        let routes = routes.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((control_ip, tx)) = routes.by_cookie.get(&cookie) {
            if ctx.data_allowed(*control_ip, peer.ip()) {
                let _ = tx.try_send(DataConn::TcpInOrder(order, stream));
            } else {
                ctx.log(ServerLog::Rejected {
                    peer,
                    reason: format!("iperf3: a data connection for a test of {control_ip} from another address"),
                });
                // iperf3 answers a data connection it will not take with ACCESS_DENIED.
                let _ = stream.write_all(&[0xFF]);
            }
            return;
        }
    }
    let session = Iperf3Server::new(Instant::now(), cookie, peer, routes);
    let deadline = Instant::now() + ctx.limits().idle_timeout;
    crate::server_session::SessionDriver::serve(stream, peer, Box::new(session), &ctx.shared, deadline);
}

/// An iperf3 client's test, server side, behind the server seam (crate::server_control):
/// the wire session (netchar_wire::iperf3::server) and the listener's routing of the test's
/// data connections by its cookie.
struct Iperf3Server {
    session: Session,
    cookie: [u8; COOKIE_LEN],
    peer: SocketAddr,
    routes: Arc<Mutex<Routes>>,
    routed: bool,
    params: Option<ClientParams>,
    spec: Option<TestSpec>,
    events: std::collections::VecDeque<ServerControlEvent>,
}

impl Iperf3Server {
    fn new(now: Instant, cookie: [u8; COOKIE_LEN], peer: SocketAddr, routes: &Arc<Mutex<Routes>>) -> Self {
        Self {
            session: Session::new(now),
            cookie,
            peer,
            routes: routes.clone(),
            routed: false,
            params: None,
            spec: None,
            events: Default::default(),
        }
    }

    fn unroute(&mut self) {
        if std::mem::take(&mut self.routed) {
            self.routes.lock().unwrap_or_else(|p| p.into_inner()).by_cookie.remove(&self.cookie);
        }
    }

    /// Maps the request to a netchar test, or refuses what cannot run here.
    fn requested(&mut self, params: ClientParams) -> ServerControlEvent {
        if let Some(what) = params.unsupported.first() {
            self.session.refuse(wire::IE_NOT_IMPLEMENTED);
            return ServerControlEvent::Refused(format!("refused: {what} is not supported by netchar's iperf3 server"));
        }
        let spec = match to_spec(&params, self.peer.is_ipv4()) {
            Ok(spec) => spec,
            Err(why) => {
                self.session.refuse(wire::IE_NOT_IMPLEMENTED);
                return ServerControlEvent::Refused(format!("refused: {why}"));
            }
        };
        let peer_software = params.client_version.as_ref().map(|v| format!("iperf3 {v}"));
        self.spec = Some(spec.clone());
        self.params = Some(params);
        ServerControlEvent::Requested(Box::new(ServerRequest {
            run: Some(run_spec(&spec)),
            spec,
            companion: None,
            auth: None,
            peer_software,
            own_data_port: None,
        }))
    }

    /// The client's results: its senders' totals, by netchar id; the receivers settle on them
    /// when they are exact.
    fn client_results(&mut self, client: &netchar_wire::iperf3::Results) {
        let Some(spec) = &self.spec else { return };
        let totals: Vec<StreamTotal> = client
            .streams
            .iter()
            .filter_map(|s| {
                let id = match u32::try_from(s.id).ok()? {
                    1 => 1,
                    n if n >= 3 => n - 1,
                    _ => return None,
                };
                (spec.flow_of(id) == Some(Flow::Up)).then_some(StreamTotal { id, bytes: s.bytes, packets: s.packets })
            })
            .collect();
        // The client's counts exclude its warm-up (-O): then they are not totals. A UDP
        // sender's datagram count is what loss is settled on: without it, none is.
        let exact = self.params.as_ref().is_some_and(|p| p.omit == 0)
            && (spec.kind == TestKind::Tcp || totals.iter().all(|t| t.packets > 0 || t.bytes == 0));
        if exact {
            self.events.push_back(ServerControlEvent::PeerSendersDone(totals));
        }
        self.events.push_back(ServerControlEvent::Settle);
    }

    /// What `--get-server-output` shows: netchar's own line per stream.
    fn output_text(records: &[StreamRecord]) -> String {
        let mut text = String::from("netchar server (iperf3 protocol)\n");
        for r in records {
            let role = if r.role == Role::Sender { "sent" } else { "received" };
            text.push_str(&format!(
                "[{:>3}] {role} {} bytes in {:.3} s = {}",
                wire_stream_id(r.id),
                r.bytes,
                r.seconds,
                netchar_model::units::format_si(netchar_model::bits_per_second(r.bytes, r.seconds), "bit/s")
            ));
            if let Some(u) = &r.udp_received {
                text.push_str(&format!(
                    ", {} of {} datagrams lost, jitter {:.3} ms",
                    u.lost,
                    u.packets + u.lost,
                    u.jitter_ms
                ));
            }
            text.push('\n');
        }
        text
    }
}

impl Drop for Iperf3Server {
    fn drop(&mut self) {
        self.unroute();
    }
}

impl ServerControl for Iperf3Server {
    fn protocol(&self) -> &'static str {
        "iperf3"
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
        let ev = match self.session.poll_event()? {
            Event::Requested(params) => self.requested(*params),
            Event::TestEnd => ServerControlEvent::StopSenders(None),
            Event::ClientResults(results) => {
                self.client_results(&results);
                self.events.pop_front()?
            }
            Event::ClientTerminated => {
                ServerControlEvent::Ended("the iperf3 client was interrupted (CLIENT_TERMINATE)".into())
            }
        };
        Some(ev)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.session.poll_timeout()
    }
    fn handle_timeout(&mut self, now: Instant) -> Result<(), ProtocolError> {
        self.session.handle_timeout(now)
    }
    fn admitted(&mut self, now: Instant, a: &Admission<'_>) {
        // The test's data connections present this control connection's cookie to the
        // listener, which sends them here.
        self.routes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .by_cookie
            .insert(self.cookie, (self.peer.ip(), a.route.clone()));
        self.routed = true;
        self.session.accept(now);
    }
    fn turned_away(&mut self, _now: Instant, why: &Refusal) {
        // iperf3 prints its own text for the code it is sent: each refusal gets the code whose
        // text names its reason (the server's log has the whole of it). A busy server is
        // ACCESS_DENIED, "the server is busy running a test. try again later"; a limit the test
        // exceeds is not busy, and retrying would not help.
        match why {
            Refusal::Busy { .. } => self.session.deny(),
            Refusal::Rejected(rejection) => match rejection.limit {
                // iperf3's own code for its server's --max-server-duration (what it prints for
                // it depends on its version)
                Some(ServerLimit::Duration) => self.session.refuse(wire::IE_MAX_DURATION),
                // "total required bandwidth is larger than server limit"
                Some(ServerLimit::Rate) => self.session.refuse(wire::IE_TOTAL_RATE),
                // "number of parallel streams too large (maximum = 128)": iperf3's own maximum
                // in the text, the server's --max-streams in its log.
                Some(ServerLimit::Streams) => self.session.refuse(IE_NUM_STREAMS),
                None => self.session.deny(),
            },
        }
    }
    fn streams_connected(&mut self, now: Instant) {
        self.unroute();
        self.session.streams_connected(now);
        // iperf3's client starts as soon as it hears TEST_START: so does this end.
        self.events.push_back(ServerControlEvent::Start);
    }
    fn udp_answer(&self, hello: &[u8]) -> Option<Vec<u8>> {
        Some(udp_reply_to(hello).to_vec())
    }
    fn datagrams(&self) -> DatagramFormatKind {
        datagrams(self.params.as_ref().is_some_and(|p| p.udp_counters_64bit))
    }
    fn local_senders_done(&mut self, _now: Instant, _totals: Vec<StreamTotal>) {
        // iperf3's client ends the test (TEST_END); this end's totals go in its results.
    }
    fn ends_with_workers(&self) -> bool {
        false
    }
    fn finish(&mut self, now: Instant, records: &[StreamRecord], cpu: CpuUsage, error: Option<String>) {
        let (Some(spec), None) = (&self.spec, error) else { return };
        let figures: Vec<StreamFigures> = records.iter().map(figures_of).collect();
        let has_tcp_senders = spec.kind == TestKind::Tcp && spec.direction != Direction::Up;
        let sender_has_retransmits = if spec.direction == Direction::Up {
            -1
        } else if has_tcp_senders && records.iter().any(|r| r.retransmits.is_some()) {
            1
        } else {
            0
        };
        let text = self.params.as_ref().is_some_and(|p| p.get_server_output).then(|| Self::output_text(records));
        let json = wire::results_json(
            (cpu.total_pct, cpu.user_pct, cpu.system_pct),
            sender_has_retransmits,
            &figures,
            text.as_deref(),
        );
        self.session.send_results(now, &json);
    }
    fn stopping(&mut self, _now: Instant) {
        // iperf3 has no error message: a server that stops ends the test (SERVER_TERMINATE).
        self.session.terminate();
    }
    fn fail(&mut self, _now: Instant, _message: &str) {
        // Nothing to say in iperf3's protocol: the connection closes.
    }
    fn is_running(&self) -> bool {
        self.session.is_running()
    }
    fn is_done(&self) -> bool {
        self.session.is_done()
    }
}

/// A stream's figures as iperf3's results JSON carries them.
/// iperf3's UDP datagrams (its 12-byte header, 16 with 64-bit sequence numbers: `wide`) for
/// the data plane's workers, both roles.
fn datagrams(wide: bool) -> DatagramFormatKind {
    DatagramFormatKind::Peer(PeerDatagrams { protocol: "iperf3", variant: u32::from(wide), run: udp_worker })
}

/// One UDP worker over iperf3's datagrams ([`datagrams`]: the variant says `wide`).
fn udp_worker(worker: UdpWorker<'_>) -> std::io::Result<()> {
    let format = netchar_wire::iperf3::Iperf3Datagrams { wide: worker.variant() != 0 };
    worker.run(&format)
}

fn figures_of(r: &StreamRecord) -> StreamFigures {
    let mut f = StreamFigures {
        id: wire_stream_id(r.id),
        bytes: r.bytes,
        retransmits: r.retransmits.map_or(-1, |n| n as i64),
        seconds: r.seconds,
        ..StreamFigures::default()
    };
    if let Some(u) = &r.udp_received {
        f.jitter_seconds = u.jitter_ms / 1000.0;
        f.lost = u.lost;
        // iperf3's receivers report the highest sequence number: what was sent, as far as
        // they can tell.
        f.packets = u.packets + u.lost;
    }
    if let Some(s) = &r.udp_sent {
        f.packets = s.packets;
    }
    f
}

/// The netchar test an iperf3 request asks for, or why it cannot run here.
pub fn to_spec(p: &ClientParams, ipv4: bool) -> Result<TestSpec, PeerRequestError> {
    let mut spec = match p.transport {
        wire::Transport::Tcp => TestSpec::tcp_default(),
        wire::Transport::Udp => TestSpec::udp_default(),
    };
    spec.direction = match (p.reverse, p.bidirectional) {
        (_, true) => Direction::Bidir,
        (true, false) => Direction::Down,
        (false, false) => Direction::Up,
    };
    spec.streams = p.parallel;
    spec.end = if p.bytes > 0 {
        EndCondition::Bytes(p.bytes)
    } else if p.blocks > 0 {
        EndCondition::Bytes(p.blocks.saturating_mul(p.len.max(1)))
    } else {
        EndCondition::Seconds(if p.seconds == 0 { 10.0 } else { p.seconds as f64 })
    };
    spec.omit_seconds = p.omit as f64;
    // The client's -S: this server marks its data sockets as an iperf3 server does.
    spec.ip.tos = p.tos;
    match p.transport {
        wire::Transport::Tcp => {
            if p.len > 0 {
                spec.block_bytes = p.len;
            }
            spec.tcp.window_bytes = p.window;
            spec.tcp.mss = p.mss;
            spec.tcp.nodelay = p.nodelay;
            spec.tcp.congestion = p.congestion.clone();
            spec.tcp.rate_bps_per_stream = (p.bandwidth > 0).then_some(p.bandwidth);
        }
        wire::Transport::Udp => {
            spec.block_bytes = if p.len > 0 {
                p.len
            } else if ipv4 {
                1472
            } else {
                1452
            };
            spec.udp = Some(UdpOptions {
                rate: if p.bandwidth > 0 { UdpRate::BitsPerSecond(p.bandwidth) } else { UdpRate::Unlimited },
                per_stream: true,
                // iperf3's GSO is its own business; netchar's sender batches where it can.
                ..UdpOptions::default()
            });
            spec.tcp.window_bytes = p.window;
        }
    }
    spec.validate().map_err(|source| PeerRequestError::OutOfRange { asker: "the iperf3 client".into(), source })?;
    Ok(spec)
}

/// The spec the workers run: senders go until the client's TEST_END (iperf3 clients end every
/// test, on their clock), not on a clock of their own.
fn run_spec(spec: &TestSpec) -> TestSpec {
    let mut run = spec.clone();
    if spec.direction != Direction::Up {
        run.end = EndCondition::Seconds(24.0 * 3600.0);
    }
    run
}

// ---------------------------------------------------------------- client role

/// The registry's client constructor (crate::protocols).
pub(crate) fn client_session(a: &crate::registry::SessionArgs<'_>) -> Result<Box<dyn ClientControl>, SessionError> {
    let mut random = [0u8; 36];
    let _ = getrandom::getrandom(&mut random);
    Ok(Box::new(Iperf3Control::new(a.now, a.spec, &random)?))
}

/// What an iperf3 server reports: its results JSON, counted until TEST_END.
pub(crate) fn measurement(_: &TestSpec) -> (netchar_model::FarEnd, Vec<netchar_model::Caveat>) {
    (netchar_model::FarEnd::Reports, crate::registry::short_count_caveats("the iperf3 server", None))
}

/// netchar as the client of an iperf3 server (netchar_wire::iperf3): TCP tests, up, `-R`
/// and `--bidir`, `-P`, `-t`/`-n`, `-l`, `-b`, `-w`, `-M`, `-N`, `-C`, `-O`.
pub struct Iperf3Control {
    client: netchar_wire::iperf3::Client,
    spec: TestSpec,
    /// The peer's report, held back one poll behind its senders' totals.
    pending: Option<ControlEvent>,
}

impl Iperf3Control {
    /// A session for `spec`, or why iperf3 cannot run it (said before any traffic).
    pub fn new(now: Instant, spec: &TestSpec, cookie_random: &[u8; 36]) -> Result<Self, SessionError> {
        let params = iperf3_params(spec)?;
        let cookie = netchar_wire::iperf3::make_cookie(cookie_random);
        Ok(Self { client: netchar_wire::iperf3::Client::new(now, params, cookie), spec: spec.clone(), pending: None })
    }

    /// The server's results as netchar's records of the server's end of each stream.
    fn server_records(&self, r: &netchar_wire::iperf3::Results) -> Vec<StreamRecord> {
        let total = self.spec.total_streams();
        r.streams
            .iter()
            .filter_map(|s| {
                // iperf3 numbers streams 1, 3, 4, ... in connect order: back to 1, 2, 3, ...
                let id = match u32::try_from(s.id).ok()? {
                    1 => 1,
                    n if n >= 3 => n - 1,
                    _ => return None,
                };
                let flow = self.spec.flow_of(id).filter(|_| id <= total)?;
                let role = if flow == Flow::Up { netchar_model::Role::Receiver } else { netchar_model::Role::Sender };
                let retransmits =
                    (role == netchar_model::Role::Sender && r.sender_has_retransmits == 1 && s.retransmits >= 0)
                        .then_some(s.retransmits as u64);
                let seconds = (s.end_time - s.start_time).max(0.0);
                let mut record = StreamRecord::bare(id, flow, role, netchar_model::Endpoint::Server, s.bytes, seconds);
                record.retransmits = retransmits;
                if self.spec.kind == netchar_model::TestKind::Udp {
                    if role == netchar_model::Role::Receiver {
                        // iperf3's `packets` on a receiver is the highest sequence number seen.
                        let received = s.packets.saturating_sub(s.errors);
                        record.udp_received = Some(netchar_model::UdpReceived {
                            packets: received,
                            lost: s.errors,
                            loss_percent: if s.packets > 0 { 100.0 * s.errors as f64 / s.packets as f64 } else { 0.0 },
                            jitter_ms: s.jitter * 1000.0,
                            ..Default::default()
                        });
                    } else {
                        record.udp_sent = Some(netchar_model::UdpSent { packets: s.packets, ..Default::default() });
                    }
                }
                Some(record)
            })
            .collect()
    }
}

/// iperf3's parameters for `spec`, or the one line that says what iperf3 cannot do.
fn iperf3_params(spec: &TestSpec) -> Result<netchar_wire::iperf3::Params, SessionError> {
    use netchar_model::{Direction, EndCondition, TestKind, UdpRate};
    let no = |what: &str| Err(SessionError::Unsupported(format!("--proto iperf3: {what}")));
    let refuse = |flag: &'static str, what: &str| Err(SessionError::option(flag, format!("--proto iperf3: {what}")));
    if !matches!(spec.kind, TestKind::Tcp | TestKind::Udp) {
        return no("only TCP and UDP throughput tests run against an iperf3 server (rr, crr, echo: iperf3 has none)");
    }
    if let Some(flag) = crate::registry::netchar_server_feature(spec) {
        return refuse(
            flag,
            "--server-load, --idle and a server CPU in -A are netchar server features an iperf3 server does not have",
        );
    }
    if spec.tcp.zerocopy {
        return refuse(
            "--zerocopy",
            "--zerocopy is netchar's sender; run it without --proto iperf3 or drop --zerocopy",
        );
    }
    if spec.tcp.skip_rx_copy && spec.direction != Direction::Down {
        return refuse(
            "--skip-rx-copy",
            "--skip-rx-copy is netchar's receiver, so it needs -R here (the iperf3 server receives the rest)",
        );
    }
    let (seconds, bytes) = match spec.end {
        EndCondition::Seconds(s) => (s, 0),
        EndCondition::Bytes(_) if spec.direction != Direction::Up => {
            return refuse("-n", "-n with -R or --bidir: iperf3 ends those tests on the client's clock; use -t")
        }
        EndCondition::Bytes(n) => (0.0, n),
    };
    // iperf3's rate is per stream.
    let bandwidth = match &spec.udp {
        None => spec.tcp.rate_bps_per_stream,
        Some(u) => {
            if u.pattern.is_some() {
                return refuse(
                    "--pattern",
                    "--pattern is netchar's sender schedule; an iperf3 server sends evenly paced datagrams",
                );
            }
            let per_stream = |total: u64| if u.per_stream { total } else { total / u64::from(spec.streams.max(1)) };
            match u.rate {
                UdpRate::BitsPerSecond(b) => Some(per_stream(b).max(1)),
                UdpRate::PacketsPerSecond(p) => Some(per_stream(p.saturating_mul(spec.block_bytes * 8)).max(1)),
                // iperf3's "no limit" is a bandwidth of 0.
                UdpRate::Unlimited => Some(0),
            }
        }
    };
    Ok(netchar_wire::iperf3::Params {
        udp: spec.kind == TestKind::Udp,
        seconds,
        bytes,
        parallel: spec.streams,
        len: spec.block_bytes,
        reverse: spec.direction == Direction::Down,
        bidirectional: spec.direction == Direction::Bidir,
        omit: spec.omit_seconds,
        bandwidth,
        window: spec.tcp.window_bytes,
        mss: spec.tcp.mss,
        nodelay: spec.tcp.nodelay,
        congestion: spec.tcp.congestion.clone(),
        tos: spec.ip.tos,
        dont_fragment: spec.ip.dont_fragment,
    })
}

/// The IP options an iperf3 server applies, its parameters carrying them: the TOS (`TOS`, on
/// every data socket since 3.0) and don't-fragment (`dont_fragment`, 3.10+, on UDP sockets
/// over IPv4; TCP sets DF itself). Its server never sets a flow label (iperf3 labels only a
/// client's TCP connections) nor zero UDP checksums.
pub(crate) fn far_end_applies(_: &TestSpec) -> crate::registry::FarEndApplies {
    crate::registry::FarEndApplies { tos: true, dont_fragment: true, ..crate::registry::FarEndApplies::NONE }
}

/// iperf3's UDP stream setup: a 4-byte hello per stream, one stream after the other as iperf3
/// servers take them (each re-binds its listener after connecting the previous stream's
/// socket), repeated after a second without an answer (iperf3's own client sends it once and
/// waits 30 s: a lost hello hangs its test). A hello repeated sooner could reach the stream's
/// socket after the test starts, and iperf3 counts it as 4 bytes of data. The answer is only
/// noted: the test starts on the control connection's TEST_RUNNING.
struct Iperf3UdpHello {
    /// This stream's place in the order (0, 1, ...).
    index: usize,
    /// Streams answered so far, shared by the test's hellos.
    answered_streams: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    answered: bool,
    sent: Option<Instant>,
}

/// How long an iperf3 UDP hello waits for its answer before it is sent again.
const IPERF3_HELLO_REPEAT: std::time::Duration = std::time::Duration::from_secs(1);

impl UdpHandshake for Iperf3UdpHello {
    fn datagram(&self) -> Vec<u8> {
        netchar_wire::iperf3::UDP_HELLO.to_vec()
    }

    fn on_datagram(&mut self, bytes: &[u8]) -> bool {
        if !self.answered && netchar_wire::iperf3::is_udp_reply(bytes) {
            self.answered = true;
            self.answered_streams.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        false
    }

    fn answered(&self) -> bool {
        self.answered
    }

    fn due(&mut self, now: Instant) -> bool {
        let my_turn = self.answered_streams.load(std::sync::atomic::Ordering::SeqCst) == self.index;
        let due = my_turn && self.sent.is_none_or(|t| now.duration_since(t) >= IPERF3_HELLO_REPEAT);
        if due {
            self.sent = Some(now);
        }
        due
    }
}

impl ClientControl for Iperf3Control {
    fn handle_input(&mut self, now: Instant, bytes: &[u8]) -> Result<(), ProtocolError> {
        self.client.handle_input(now, bytes)
    }
    fn handle_eof(&mut self, now: Instant) -> Result<(), ProtocolError> {
        self.client.handle_eof(now)
    }
    fn poll_output(&mut self, out: &mut Vec<u8>) {
        self.client.poll_output(out);
    }
    fn poll_event(&mut self) -> Option<ControlEvent> {
        use netchar_wire::iperf3::Event;
        if let Some(ev) = self.pending.take() {
            return Some(ev);
        }
        Some(match self.client.poll_event()? {
            Event::CreateStreams => {
                let cookie = self.client.cookie().to_vec();
                let answered_streams = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
                let mut streams = Vec::new();
                for &flow in self.spec.direction.flows() {
                    for id in self.spec.stream_ids(flow) {
                        let transport = if self.spec.kind == netchar_model::TestKind::Udp {
                            Transport::Udp {
                                handshake: Box::new(Iperf3UdpHello {
                                    index: streams.len(),
                                    answered_streams: answered_streams.clone(),
                                    answered: false,
                                    sent: None,
                                }),
                            }
                        } else {
                            Transport::Tcp { preamble: cookie.clone() }
                        };
                        streams.push(OpenStream { id, flow, transport });
                    }
                }
                ControlEvent::Admitted {
                    streams,
                    peer: PeerInfo { concurrent_tests: 1, ..PeerInfo::default() },
                    cookie: None,
                }
            }
            Event::Running => ControlEvent::Start,
            Event::ServerResults(r) => {
                let streams = self.server_records(&r);
                // The server's senders' totals first: this end's receivers settle on them (UDP
                // loss against the datagrams the server sent).
                let totals: Vec<StreamTotal> = streams
                    .iter()
                    .filter(|s| s.role == netchar_model::Role::Sender)
                    .map(|s| StreamTotal {
                        id: s.id,
                        bytes: s.bytes,
                        packets: s.udp_sent.as_ref().map_or(0, |u| u.packets),
                    })
                    .collect();
                let report = ControlEvent::PeerReport {
                    streams,
                    cpu: CpuUsage {
                        user_pct: r.cpu_util_user,
                        system_pct: r.cpu_util_system,
                        total_pct: r.cpu_util_total,
                        ..CpuUsage::default()
                    },
                    error: None,
                };
                if totals.is_empty() {
                    report
                } else {
                    self.pending = Some(report);
                    ControlEvent::PeerSenderDone(totals)
                }
            }
            Event::Busy => ControlEvent::Busy {
                running: 1,
                max: 1,
                reason: Some("the iperf3 server answered ACCESS_DENIED: it runs one test at a time".into()),
            },
        })
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.client.poll_timeout()
    }
    fn handle_timeout(&mut self, now: Instant) -> Result<(), ProtocolError> {
        self.client.handle_timeout(now)
    }
    fn local_senders_done(&mut self, now: Instant, totals: Vec<StreamTotal>) {
        let totals: Vec<(u32, u64, u64)> = totals.iter().map(|t| (t.id, t.bytes, t.packets)).collect();
        self.client.local_senders_done(now, &totals);
    }
    fn stop(&mut self, now: Instant, _reason: &str) {
        self.client.stop(now);
    }
    fn is_done(&self) -> bool {
        self.client.is_done()
    }
    fn datagrams(&self) -> DatagramFormatKind {
        datagrams(true)
    }
    /// An iperf3 server (up to 3.15) reads every stream from one select loop, which its own
    /// client feeds a block per stream in turn; threads that take turns by the scheduler's
    /// slice fed it one stream at a time (`-P 4` pinned: 0.88-1.05x iperf3's client, block by
    /// block 1.01-1.29x).
    fn interleaves_senders(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each refusal reaches an iperf3 client as the code whose text names its reason, chosen
    /// by the limit the admission names, never by the words of its line.
    #[test]
    fn each_refusal_is_answered_with_the_code_of_its_limit() {
        use crate::admission::Rejection;
        let server_error = |code: i32| [&[0xFE][..], &code.to_be_bytes(), &0i32.to_be_bytes()].concat();
        let worded_otherwise = "a line that names no flag";
        let cases = [
            (Refusal::Busy { running: 1, max: 1, reason: None }, vec![0xFF]),
            (
                Refusal::Rejected(Rejection::over(ServerLimit::Duration, worded_otherwise)),
                server_error(wire::IE_MAX_DURATION),
            ),
            (
                Refusal::Rejected(Rejection::over(ServerLimit::Rate, worded_otherwise)),
                server_error(wire::IE_TOTAL_RATE),
            ),
            (Refusal::Rejected(Rejection::over(ServerLimit::Streams, worded_otherwise)), server_error(IE_NUM_STREAMS)),
            // A line that names a limit, with none as its kind: denied, not mistaken for one.
            (Refusal::Rejected(Rejection::other("beyond --max-rate, in words only")), vec![0xFF]),
        ];
        let routes = Arc::new(Mutex::new(Routes::default()));
        for (refusal, expected) in cases {
            let now = Instant::now();
            let mut server = Iperf3Server::new(now, [b'a'; COOKIE_LEN], "192.0.2.1:40000".parse().unwrap(), &routes);
            // What it said first (PARAM_EXCHANGE) is not the answer.
            server.poll_output(&mut Vec::new());
            server.turned_away(now, &refusal);
            let mut out = Vec::new();
            server.poll_output(&mut out);
            assert_eq!(out, expected, "{refusal:?}");
            assert!(server.is_done(), "{refusal:?}");
        }
    }

    #[test]
    fn iperf3_refuses_what_it_cannot_run_before_any_traffic() {
        let now = Instant::now();
        let rr = Iperf3Control::new(now, &TestSpec::rr_default(), &[0; 36]).err().unwrap();
        assert!(matches!(&rr, SessionError::Unsupported(m) if m.contains("TCP and UDP")), "{rr:?}");
        assert!(Iperf3Control::new(now, &TestSpec::udp_default(), &[0; 36]).is_ok());
        let mut reverse_bytes = TestSpec::tcp_default();
        reverse_bytes.direction = Direction::Down;
        reverse_bytes.end = netchar_model::EndCondition::Bytes(1000);
        let e = Iperf3Control::new(now, &reverse_bytes, &[0; 36]).err().unwrap();
        assert!(e.flag() == Some("-n") && e.to_string().contains("use -t"), "{e:?}");
        let mut idle = TestSpec::tcp_default();
        idle.measure_idle = true;
        assert_eq!(Iperf3Control::new(now, &idle, &[0; 36]).err().unwrap().flag(), Some("--idle"));
        assert!(Iperf3Control::new(now, &TestSpec::tcp_default(), &[0; 36]).is_ok());
    }

    #[test]
    fn requests_map_to_netchar_tests() {
        let p = ClientParams::parse(
            br#"{"udp":true,"time":3,"parallel":2,"len":1400,"bandwidth":5000000,"reverse":true,"udp_counters_64bit":1}"#,
        )
        .unwrap();
        let spec = to_spec(&p, true).unwrap();
        assert_eq!(
            (spec.kind, spec.direction, spec.streams, spec.block_bytes),
            (TestKind::Udp, Direction::Down, 2, 1400)
        );
        assert_eq!(spec.udp.as_ref().unwrap().rate, UdpRate::BitsPerSecond(5_000_000));
        assert!(spec.udp.as_ref().unwrap().per_stream);
        let p = ClientParams::parse(br#"{"tcp":true,"num":1000000,"parallel":1,"len":131072,"bidirectional":true}"#)
            .unwrap();
        let spec = to_spec(&p, true).unwrap();
        assert_eq!((spec.direction, spec.end), (Direction::Bidir, EndCondition::Bytes(1_000_000)));
        let p = ClientParams::parse(br#"{"tcp":true,"time":1,"parallel":100000}"#).unwrap();
        let e = to_spec(&p, true).unwrap_err();
        assert!(
            matches!(&e, PeerRequestError::OutOfRange { source: netchar_model::SpecError::Streams(100_000), .. }),
            "{e:?}"
        );
        assert!(e.to_string().starts_with("the iperf3 client asked for -P 100000: "), "{e}");
    }
}
