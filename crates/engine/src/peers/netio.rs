//! netio (netchar_wire::netio), both roles, over real sockets.
//!
//! Client ([`NetioControl`]): one block size of netio's sequence behind the client seam
//! (crate::control), run by the one client driver: TCP on the server's port, the blocks on the
//! control connection, or UDP with the control connection on port+1 and datagrams between
//! port+1 on both ends (netio's fixed ports: the server sends to the client's address at
//! port+1), with a Tx-only mode and an Rx timeout for sink servers (lwIP's contrib netio never
//! sends). The sequence of sizes is a job over such sessions (crate::jobs::netio).
//!
//! Server ([`NetioListener`]): answers the stock netio client on the TCP port (18767) and the
//! UDP test's port+1 (18768), each connection admitted as a test through the shared admission;
//! UDP datagrams go only to the address of an established control connection.

use crate::control::{ClientControl, ControlEvent, OpenStream, PeerInfo, Transport};
use crate::dataplane::{DataSocket, DataStream, DatagramFormatKind, PeerDatagrams, StreamOptions, UdpWorker};
use crate::peers::{PeerContext, PeerListener};
use crate::registry::{SessionArgs, SessionError};
use crate::server_shared::ServerLog;
use netchar_model::{
    CpuUsage, Direction, EndCondition, Endpoint, Flow, Role, StreamRecord, StreamTotal, TestKind, TestSpec, UdpSent,
};
use netchar_wire::netio::{Client, ClientStep, Cmd, Control, Server, ServerEvent, INTERVAL};
use netchar_wire::session::Timeouts;
use netchar_wire::ProtocolError;
use std::collections::HashMap;
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a blocked read or write waits before the stop flag is checked again.
const POLL: Duration = Duration::from_millis(100);
/// netio's socket buffers.
const SOCKET_BUFFER: usize = 131_072;

fn tune(s: &TcpStream) {
    let sock = socket2::SockRef::from(s);
    let _ = sock.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = sock.set_send_buffer_size(SOCKET_BUFFER);
    let _ = s.set_nodelay(true);
}

/// Writes all of `data`, checking `stop` while blocked.
fn write_all(s: &mut &TcpStream, mut data: &[u8], stop: &crate::StopFlag) -> io::Result<()> {
    while !data.is_empty() {
        if stop.is_raised() {
            return Err(io::Error::new(io::ErrorKind::Interrupted, "interrupted"));
        }
        match s.write(data) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "the peer stopped reading")),
            Ok(n) => data = &data[n..],
            Err(e) if crate::is_retry(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A buffer of whole zero-led blocks of `size`, about 256 KiB long (at least one block).
fn block_buffer(size: u32) -> (Vec<u8>, u64) {
    let size = size as usize;
    let blocks = (262_144 / size).max(1);
    let mut b = vec![0u8; size * blocks];
    // Filler like netio's (it only ever reads byte 0 of a block).
    for (i, x) in b.iter_mut().enumerate() {
        if i % size != 0 {
            *x = (i as u32).wrapping_mul(2_654_435_761).to_be_bytes()[0] | 1;
        }
    }
    (b, blocks as u64)
}

/// Sends whole TCP blocks until `until`, paced at `rate` by the data plane's pacer; returns
/// the blocks written.
///
/// Not a data plane stream: the blocks share the connection with netio's control messages and
/// must end on a block boundary with the marker block, after which the connection goes on
/// (the data plane's senders end a stream by shutting its write side down).
fn send_blocks(s: &TcpStream, size: u32, until: Instant, stop: &crate::StopFlag, rate: Option<u64>) -> io::Result<u64> {
    let (buf, per) = block_buffer(size);
    let mut w = s;
    let pacer = crate::dataplane::BytePacer::new(rate, Instant::now());
    let mut blocks = 0u64;
    while Instant::now() < until && !stop.is_raised() {
        if let Some(wait) = pacer.and_then(|p| p.wait(blocks * u64::from(size), Instant::now())) {
            std::thread::sleep(wait.min(POLL));
            continue;
        }
        write_all(&mut w, &buf, stop)?;
        blocks += per;
    }
    Ok(blocks)
}

/// netio's client legs as stream ids: client to server (Tx) and back (Rx).
const TX_STREAM: u32 = 1;
const RX_STREAM: u32 = 2;

/// The registry's session constructor (crate::protocols::PROTOCOLS): one block size of
/// netio's sequence as one test ([`NetioControl`]).
pub(crate) fn client_session(a: &SessionArgs<'_>) -> Result<Box<dyn ClientControl>, SessionError> {
    Ok(Box::new(NetioControl::new(a.now, a.spec, a.cfg.timeouts, a.cfg.port)?))
}

/// netio's client behind the client seam: one block size of the stock sequence, on a
/// connection of its own (C2S, the Tx phase, unless Tx only S2C and the Rx phase, QUIT), the
/// wire's [`Client`] deciding each step.
///
/// - TCP (`spec.kind` TCP, the session connected to netio's port): the blocks share the
///   control connection with the commands, a phase after the other, so the session writes and
///   reads them itself ([`ClientControl::writes_data`] while it sends) and reports the counts
///   as this end's records ([`ControlEvent::Measured`]). No data-plane stream runs.
/// - UDP (connected to the server's port+1, which is its UDP test's control): the datagrams
///   run in the data plane, one socket bound to port+1 on this end too
///   ([`Transport::UdpSamePort`], netio's server sends there), sending for the Tx phase and
///   counting from the start; the server's RES counts are its records ([`ControlEvent::PeerReport`]),
///   its sent count settles this end's loss ([`ControlEvent::PeerSenderDone`]).
///
/// `spec.direction` Up is netio's Tx only; `spec.end` the Tx phase's length; the silence limit
/// of the timeouts (`Timeouts::silence`) how long the Rx phase waits for a TCP block before it
/// is skipped (a sink server never sends: the note says so and the result keeps the Tx leg).
pub struct NetioControl {
    client: Client,
    udp: bool,
    size: u32,
    both_ways: bool,
    /// The port the session is connected to.
    port: u16,
    timeouts: Timeouts,
    /// Bytes for the connection: commands, the marker block.
    out: Vec<u8>,
    /// Whole blocks to write during the TCP Tx phase, and how many blocks they are.
    blocks: Option<(Vec<u8>, u64)>,
    /// TCP Tx: until when, and the blocks handed out so far.
    sending: Option<(Instant, u64)>,
    /// When the step awaited (a block, a command) times out.
    deadline: Option<Instant>,
    /// Bytes read that the client's next step takes.
    held: Vec<u8>,
    events: VecDeque<ControlEvent>,
    /// UDP: the data plane was started.
    plane: bool,
    /// The server's count of what it sent to this end (UDP), once known.
    peer_sent: Option<u64>,
    /// QUIT is written: the session waits for the server to close (its test's end there).
    quit: bool,
    /// The server's records, held until it closes.
    report: Option<ControlEvent>,
    /// The report is out: the session is over.
    done: bool,
}

/// How long the session waits for the server to close after QUIT: the server ends its test
/// there as it closes, so the next size's connection finds it free; one that keeps the
/// connection open is left after this.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

impl NetioControl {
    /// A session for the block size, protocol, direction and Tx length of `spec`, connected to
    /// `port` (UDP: the server's port+1, where its datagrams go and come from).
    pub fn new(now: Instant, spec: &TestSpec, timeouts: Timeouts, port: u16) -> Result<Self, SessionError> {
        let udp = match spec.kind {
            TestKind::Tcp => false,
            TestKind::Udp => true,
            other => {
                return Err(SessionError::Unsupported(format!(
                    "--proto netio: netio runs TCP and UDP block tests, not {}",
                    other.name()
                )))
            }
        };
        let size = u32::try_from(spec.block_bytes)
            .ok()
            .filter(|s| (1..=netchar_wire::netio::MAX_BLOCK).contains(s))
            .ok_or_else(|| {
                SessionError::Unsupported(format!(
                    "--proto netio: a block of {} bytes; netio's are 1 to {}",
                    spec.block_bytes,
                    netchar_wire::netio::MAX_BLOCK
                ))
            })?;
        let both_ways = match spec.direction {
            Direction::Up => false,
            Direction::Bidir => true,
            Direction::Down => {
                return Err(SessionError::Unsupported(
                    "--proto netio: netio's Rx phase follows its Tx phase; run both ways or Tx only".into(),
                ))
            }
        };
        let EndCondition::Seconds(secs) = spec.end else {
            return Err(SessionError::Unsupported("--proto netio: netio's phases are timed (-t)".into()));
        };
        let interval = Duration::try_from_secs_f64(secs)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| SessionError::Unsupported(format!("--proto netio: a Tx phase of {secs} s")))?;
        let mut session = Self {
            client: Client::new(&[size], udp, !both_ways, interval),
            udp,
            size,
            both_ways,
            port,
            timeouts,
            out: Vec::new(),
            blocks: None,
            sending: None,
            deadline: None,
            held: Vec::new(),
            events: VecDeque::new(),
            plane: false,
            peer_sent: None,
            quit: false,
            report: None,
            done: false,
        };
        if !udp {
            // The blocks go on the control connection: no data-plane stream, and the test's
            // clock starts with the session.
            let peer = PeerInfo::default();
            session.events.push_back(ControlEvent::Admitted { streams: Vec::new(), peer, cookie: None });
            session.events.push_back(ControlEvent::Start);
            session.plane = true;
        }
        session.advance(now);
        Ok(session)
    }

    /// Takes the client's steps until one waits for the peer, the clock or the data plane.
    fn advance(&mut self, now: Instant) {
        while !self.quit {
            match self.client.step(now) {
                ClientStep::Write(bytes) => {
                    self.out.extend_from_slice(&bytes);
                    self.deadline = None;
                }
                ClientStep::Transmit { until, .. } if !self.udp => {
                    if self.sending.is_none() {
                        self.blocks.get_or_insert_with(|| block_buffer(self.size));
                        self.sending = Some((until, 0));
                    }
                    return;
                }
                ClientStep::Transmit { .. } => {
                    if !self.plane {
                        self.plane = true;
                        self.events.push_back(ControlEvent::Admitted {
                            streams: self.udp_streams(),
                            peer: PeerInfo::default(),
                            cookie: None,
                        });
                        self.events.push_back(ControlEvent::Start);
                    }
                    return;
                }
                ClientStep::Receive { .. } => {
                    // netio's Rx: the server's blocks, each within the silence limit.
                    self.deadline.get_or_insert(now + self.timeouts.silence);
                    return;
                }
                ClientStep::AwaitControl => {
                    // An answer, or a RES after the server's own Rx phase (netio's 6 s).
                    self.deadline.get_or_insert(now + netchar_wire::netio::INTERVAL + self.timeouts.phase);
                    return;
                }
                ClientStep::Done => self.finish(now),
            }
        }
    }

    /// The UDP test's one socket, on port+1 at both ends: the Tx leg sends on it and the Rx leg
    /// counts what arrives on it.
    fn udp_streams(&self) -> Vec<OpenStream> {
        // The session is connected to the server's port+1: the data port is the same number.
        let transport = Transport::UdpSamePort { port: self.port };
        let mut streams = vec![OpenStream { id: TX_STREAM, flow: Flow::Up, transport }];
        if self.both_ways {
            streams.push(OpenStream {
                id: RX_STREAM,
                flow: Flow::Down,
                transport: Transport::SameAs { id: TX_STREAM },
            });
        }
        streams
    }

    /// QUIT is written: this end's records now, the server's once it closed.
    fn finish(&mut self, now: Instant) {
        self.quit = true;
        self.sending = None;
        self.deadline = Some(now + CLOSE_WAIT);
        let empty = ControlEvent::PeerReport { streams: Vec::new(), cpu: CpuUsage::default(), error: None };
        self.report = Some(empty);
        let Some(r) = self.client.results.first().cloned() else { return };
        let size = u64::from(r.size);
        let secs = |t: u64| t as f64 / 1024.0;
        let (mut mine, mut theirs) = (Vec::new(), Vec::new());
        if let Some(tx) = r.tx {
            if !self.udp {
                mine.push(StreamRecord::bare(
                    TX_STREAM,
                    Flow::Up,
                    Role::Sender,
                    Endpoint::Client,
                    tx.bytes,
                    secs(tx.t1024),
                ));
            }
            if let Some(got) = tx.received {
                theirs.push(StreamRecord::bare(
                    TX_STREAM,
                    Flow::Up,
                    Role::Receiver,
                    Endpoint::Server,
                    got * size,
                    secs(tx.t1024),
                ));
            }
        }
        if let Some(rx) = r.rx {
            if !self.udp {
                mine.push(StreamRecord::bare(
                    RX_STREAM,
                    Flow::Down,
                    Role::Receiver,
                    Endpoint::Client,
                    rx.bytes,
                    secs(rx.t1024),
                ));
            }
            if let Some(sent) = rx.sent {
                theirs.push(StreamRecord::bare(
                    RX_STREAM,
                    Flow::Down,
                    Role::Sender,
                    Endpoint::Server,
                    sent * size,
                    secs(rx.t1024),
                ));
            }
        }
        self.events.push_back(ControlEvent::Measured { streams: mine, note: r.note.clone() });
        self.report = Some(ControlEvent::PeerReport { streams: theirs, cpu: CpuUsage::default(), error: None });
    }

    /// The server closed (or was given [`CLOSE_WAIT`]): its records, and the end.
    fn release(&mut self) {
        self.events.extend(self.report.take());
        self.deadline = None;
        self.done = true;
    }

    /// Feeds what is held to the client's step that takes it.
    fn consume(&mut self, now: Instant) -> Result<(), ProtocolError> {
        while !self.held.is_empty() && !self.quit {
            let used = self.client.handle_input(now, &self.held).map_err(netio_error)?;
            self.held.drain(..used);
            if self.udp {
                if let (None, Some(rx)) = (self.peer_sent, self.client.results.first().and_then(|r| r.rx)) {
                    // RES after S2C: the server's count settles this end's receiver.
                    let sent = rx.sent.unwrap_or(0);
                    self.peer_sent = Some(sent);
                    let total = StreamTotal { id: RX_STREAM, bytes: sent * u64::from(self.size), packets: sent };
                    self.events.push_back(ControlEvent::PeerSenderDone(vec![total]));
                }
            }
            self.advance(now);
            if used == 0 {
                break;
            }
        }
        Ok(())
    }
}

/// A netio peer that breaks the sequence, as the control seam's error: a message netio never
/// sends is malformed, a right one at the wrong step unexpected.
fn netio_error(e: netchar_wire::netio::NetioError) -> ProtocolError {
    use netchar_wire::netio::NetioError;
    match e {
        NetioError::Unexpected(message) => ProtocolError::Unexpected { message, state: "running netio's sequence" },
        other => ProtocolError::Malformed(format!("from the netio server: {other}")),
    }
}

impl ClientControl for NetioControl {
    fn handle_input(&mut self, now: Instant, bytes: &[u8]) -> Result<(), ProtocolError> {
        if self.quit {
            // After QUIT nothing the server says changes the test.
            return Ok(());
        }
        if self.sending.is_some() {
            return Err(netio_error(netchar_wire::netio::NetioError::Unexpected("data from the server")));
        }
        self.held.extend_from_slice(bytes);
        if matches!(self.client.step(now), ClientStep::Receive { .. }) {
            // A block came: the silence limit counts from here.
            self.deadline = Some(now + self.timeouts.silence);
        }
        self.consume(now)
    }

    fn handle_eof(&mut self, _now: Instant) -> Result<(), ProtocolError> {
        if self.quit {
            if !self.done {
                self.release();
            }
            return Ok(());
        }
        Err(ProtocolError::Peer(format!(
            "the netio server closed the connection{}",
            if self.udp { "" } else { " (is `netio -s` running there?)" }
        )))
    }

    fn poll_output(&mut self, out: &mut Vec<u8>) {
        if !self.out.is_empty() {
            out.append(&mut self.out);
            return;
        }
        if let (Some((_, handed)), Some((blocks, per))) = (self.sending.as_mut(), &self.blocks) {
            out.extend_from_slice(blocks);
            *handed += per;
        }
    }

    fn poll_event(&mut self) -> Option<ControlEvent> {
        self.events.pop_front()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        match self.sending {
            Some((until, _)) => Some(until),
            None => self.deadline,
        }
    }

    fn handle_timeout(&mut self, now: Instant) -> Result<(), ProtocolError> {
        if let Some((until, blocks)) = self.sending {
            if now >= until {
                self.sending = None;
                self.client.transmitted(now, blocks);
                self.advance(now);
            }
            return Ok(());
        }
        if self.deadline.is_some_and(|d| now >= d) {
            self.deadline = None;
            if self.quit {
                self.release();
                return Ok(());
            }
            if matches!(self.client.step(now), ClientStep::Receive { .. }) {
                // A sink server: the size keeps its Tx leg, and the note says why Rx is missing.
                self.client.receive_timed_out(now);
                self.advance(now);
                return Ok(());
            }
            return Err(ProtocolError::Timeout(format!(
                "the netio server did not answer within {:.0} s",
                (netchar_wire::netio::INTERVAL + self.timeouts.phase).as_secs_f64()
            )));
        }
        Ok(())
    }

    fn local_senders_done(&mut self, now: Instant, totals: Vec<StreamTotal>) {
        let sent = totals.iter().find(|t| t.id == TX_STREAM).map_or(0, |t| t.packets);
        self.client.transmitted(now, sent);
        self.advance(now);
    }

    fn stop(&mut self, now: Instant, _reason: &str) {
        // netio has no way to stop a phase: end it, say QUIT and report what was counted.
        if let Some((_, blocks)) = self.sending.take() {
            self.client.transmitted(now, blocks);
        }
        if !self.quit {
            self.out.extend_from_slice(&Control::new(Cmd::Quit, 0).encode());
            self.finish(now);
        }
        if !self.done {
            self.release();
        }
    }

    fn is_done(&self) -> bool {
        self.done && self.events.is_empty()
    }

    fn datagrams(&self) -> DatagramFormatKind {
        DatagramFormatKind::Peer(PeerDatagrams { protocol: "netio", variant: 1, run: client_blocks })
    }

    fn writes_data(&self) -> bool {
        self.sending.is_some() && self.out.is_empty()
    }

    /// netio's line for the size; with UDP, the Rx leg as this end's receiver counted it.
    fn title(&self, streams: &[StreamRecord]) -> Option<String> {
        let mut r = self.client.results.first().cloned()?;
        if let (true, Some(rx)) = (self.udp, r.rx.as_mut()) {
            let mine = streams.iter().find(|s| s.id == RX_STREAM && s.measured_by == Endpoint::Client);
            rx.bytes = mine.map_or(0, |s| s.bytes);
            rx.received = Some(mine.and_then(|s| s.udp_received.as_ref()).map_or(0, |u| u.packets));
        }
        Some(r.line())
    }

    fn reports_peer_cpu(&self) -> bool {
        false
    }
}

/// netio's UDP blocks (netchar_wire::netio::BlockDatagrams) for this end's workers.
fn client_blocks(worker: UdpWorker<'_>) -> io::Result<()> {
    worker.run(&netchar_wire::netio::BlockDatagrams::default())
}

/// `netchar server --netio`: the TCP test port and the UDP test's port+1 (TCP control and UDP
/// data), bound.
pub struct NetioListener {
    tcp: TcpListener,
    udp_control: TcpListener,
    udp: UdpSocket,
}

impl NetioListener {
    /// Binds `ip`:`port` (TCP) and `ip`:`port+1` (TCP and UDP); a busy port fails here.
    pub fn bind(ip: IpAddr, port: u16) -> io::Result<Self> {
        use socket2::{Domain, Socket, Type};
        let aux = port.checked_add(1).ok_or_else(|| io::Error::other("the netio port must be below 65535"))?;
        let listen = |p: u16| -> io::Result<TcpListener> {
            let addr = SocketAddr::new(ip, p);
            let s = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
            s.set_reuse_address(true)?;
            if addr.is_ipv6() {
                s.set_only_v6(false)?;
            }
            s.bind(&addr.into())?;
            s.listen(2)?;
            Ok(s.into())
        };
        let tcp = listen(port)?;
        let udp_control = listen(aux)?;
        // Shared with each S2C phase's socket, connected to its client (crate::server_shared::bind_udp).
        let udp = crate::server_shared::bind_udp(SocketAddr::new(ip, aux))?;
        let s = socket2::SockRef::from(&udp);
        let _ = s.set_recv_buffer_size(SOCKET_BUFFER * 4);
        let _ = s.set_send_buffer_size(SOCKET_BUFFER);
        Ok(Self { tcp, udp_control, udp })
    }

    /// The TCP test port.
    pub fn port(&self) -> u16 {
        self.tcp.local_addr().map_or(0, |a| a.port())
    }
}

/// Datagrams received per source address since each UDP test's C2S.
type UdpCounts = Arc<Mutex<HashMap<IpAddr, (u64, u64)>>>;

/// The registry's binder (crate::protocols::LISTENERS): `ports` is the netio TCP port.
pub(crate) fn bind_listener(ip: IpAddr, ports: &[u16]) -> io::Result<Box<dyn PeerListener>> {
    Ok(Box::new(NetioListener::bind(ip, ports[0])?))
}

impl PeerListener for NetioListener {
    fn name(&self) -> &'static str {
        "netio"
    }
    fn describe(&self) -> String {
        format!("netio: TCP test on {}, UDP test on {} (TCP control and UDP)", self.port(), self.port() + 1)
    }
    fn local_addr(&self) -> SocketAddr {
        self.tcp.local_addr().expect("a bound listener has an address")
    }
    fn udp_ports(&self) -> Vec<u16> {
        self.udp.local_addr().map(|a| a.port()).into_iter().collect()
    }
    fn run(self: Box<Self>, ctx: PeerContext) {
        let counts: UdpCounts = Arc::default();
        let udp = Arc::new(self.udp);
        let mut threads = Vec::new();
        {
            let (udp, counts, ctx) = (udp.clone(), counts.clone(), ctx.clone());
            threads.push(std::thread::spawn(move || count_udp(&udp, &counts, &ctx)));
        }
        for (listener, is_udp) in [(self.tcp, false), (self.udp_control, true)] {
            let (ctx, udp, counts) = (ctx.clone(), udp.clone(), counts.clone());
            threads.push(std::thread::spawn(move || accept_loop(listener, is_udp, &ctx, &udp, &counts)));
        }
        for t in threads {
            let _ = t.join();
        }
    }
}

fn count_udp(udp: &UdpSocket, counts: &UdpCounts, ctx: &PeerContext) {
    let _ = udp.set_read_timeout(Some(POLL));
    let mut buf = vec![0u8; 65_536];
    while !ctx.stop().is_raised() {
        if let Ok((n, from)) = udp.recv_from(&mut buf) {
            // Only counted, never answered, so no loop can start here: a datagram from a
            // service port is not a client's, but netio clients send from this very port
            // number (port+1 on both ends), so the own-port rule does not apply.
            if ctx.guard().check_service_port(from).is_err() {
                continue;
            }
            let ip = crate::admission::canonical(from.ip());
            if let Ok(mut m) = counts.lock() {
                // Only sources with a running UDP test are counted (and kept).
                if let Some(c) = m.get_mut(&ip) {
                    c.0 += 1;
                    c.1 += n as u64;
                }
            }
        }
    }
}

fn accept_loop(listener: TcpListener, is_udp: bool, ctx: &PeerContext, udp: &Arc<UdpSocket>, counts: &UdpCounts) {
    let (udp, counts) = (udp.clone(), counts.clone());
    super::serve_connections(listener, ctx, "netio", move |stream, peer, _, ctx| {
        let mut spec = if is_udp { TestSpec::udp_default() } else { TestSpec::tcp_default() };
        spec.direction = Direction::Bidir;
        spec.end = EndCondition::Seconds(INTERVAL.as_secs_f64());
        if let Some(r) = ctx.limits().max_rate {
            spec.tcp.rate_bps_per_stream = Some(r);
            if let Some(u) = spec.udp.as_mut() {
                u.rate = netchar_model::UdpRate::BitsPerSecond(r);
            }
        }
        let test = match ctx.admit(&spec, peer) {
            Ok(t) => t,
            Err(r) => {
                // netio has no way to say "busy": the connection is closed, and logged.
                ctx.log(ServerLog::Rejected { peer, reason: format!("netio: {}", r.reason) });
                return;
            }
        };
        let ip = crate::admission::canonical(peer.ip());
        if is_udp {
            if let Ok(mut m) = counts.lock() {
                m.insert(ip, (0, 0));
            }
        }
        let (received, sent, error, secs, udp_sent) = serve(&stream, peer, is_udp, ctx, &udp, &counts);
        if is_udp {
            if let Ok(mut m) = counts.lock() {
                m.remove(&ip);
            }
        }
        let mut down = StreamRecord::bare(2, Flow::Down, Role::Sender, Endpoint::Server, sent, secs.1);
        down.udp_sent = udp_sent;
        let streams = vec![StreamRecord::bare(1, Flow::Up, Role::Receiver, Endpoint::Server, received, secs.0), down];
        test.log(ctx, "netio", peer, spec, streams, error);
    });
}

/// What one connection's test came to: bytes received, bytes sent, why it ended early, the
/// seconds spent receiving (C2S to the end marker, or to RES for UDP) and sending, and (UDP)
/// the S2C phases' datagram counts summed.
type Served = (u64, u64, Option<String>, (f64, f64), Option<UdpSent>);

/// Serves one connection.
fn serve(
    stream: &TcpStream,
    peer: SocketAddr,
    is_udp: bool,
    ctx: &PeerContext,
    udp: &UdpSocket,
    counts: &UdpCounts,
) -> Served {
    tune(stream);
    let (mut recv_secs, mut send_secs) = (0.0f64, 0.0f64);
    let mut receiving_since: Option<Instant> = None;
    let _ = stream.set_read_timeout(Some(POLL));
    let _ = stream.set_write_timeout(Some(POLL));
    let stop = ctx.stop();
    let idle = ctx.limits().idle_timeout;
    let rate = ctx.limits().max_rate;
    let mut server = Server::new(is_udp);
    let (mut received, mut sent) = (0u64, 0u64);
    let mut udp_sent: Option<UdpSent> = None;
    let mut buf = vec![0u8; 256 * 1024];
    let mut last = Instant::now();
    let mut out = Vec::new();
    let (mut r, mut w) = (stream, stream);
    let ip = crate::admission::canonical(peer.ip());
    let error = loop {
        if stop.is_raised() {
            break Some("the server is stopping".to_string());
        }
        server.poll_output(&mut out);
        if !out.is_empty() {
            if let Err(e) = write_all(&mut w, &out, stop) {
                break Some(e.to_string());
            }
            out.clear();
        }
        let mut failed = None;
        while let Some(ev) = server.poll_event() {
            match ev {
                ServerEvent::Receive { .. } if is_udp => {
                    receiving_since = Some(Instant::now());
                    if let Ok(mut m) = counts.lock() {
                        m.insert(ip, (0, 0));
                    }
                }
                ServerEvent::Receive { .. } => receiving_since = Some(Instant::now()),
                ServerEvent::Received { bytes, .. } => {
                    received += bytes;
                    recv_secs += receiving_since.take().map_or(0.0, |t| t.elapsed().as_secs_f64());
                }
                ServerEvent::CountRequested => {
                    recv_secs += receiving_since.take().map_or(0.0, |t| t.elapsed().as_secs_f64());
                    let (n, b) = counts.lock().ok().and_then(|m| m.get(&ip).copied()).unwrap_or((0, 0));
                    received += b;
                    if let Err(e) = server.udp_count(n.min(u64::from(u32::MAX)) as u32) {
                        failed = Some(e.to_string());
                    }
                }
                ServerEvent::Send { size } if is_udp => {
                    // To the control connection's address at port+1, as netio's server does:
                    // the TCP handshake proved that address, so this cannot be aimed elsewhere.
                    let to = SocketAddr::new(peer.ip(), udp.local_addr().map_or(0, |a| a.port()));
                    let (record, error) = send_datagrams(udp, to, size, ctx);
                    send_secs += record.seconds;
                    sent += record.bytes;
                    let n = record.udp_sent.as_ref().map_or(0, |u| u.packets);
                    if let Some(u) = record.udp_sent {
                        let total = udp_sent.get_or_insert_with(UdpSent::default);
                        total.packets += u.packets;
                        total.send_errors += u.send_errors;
                        total.sends += u.sends;
                    }
                    if let Err(e) = server.udp_sent(n.min(u64::from(u32::MAX)) as u32) {
                        failed = Some(e.to_string());
                    }
                    if error.is_some() {
                        failed = error;
                    }
                }
                ServerEvent::Send { size } => {
                    let t = Instant::now();
                    let until = t + INTERVAL;
                    match send_blocks(stream, size, until, stop, rate)
                        .and_then(|n| write_all(&mut w, &Server::marker(size), stop).map(|_| n))
                    {
                        Ok(n) => {
                            send_secs += t.elapsed().as_secs_f64();
                            sent += (n + 1) * u64::from(size);
                            if let Err(e) = server.sent() {
                                failed = Some(e.to_string());
                            }
                        }
                        Err(e) => failed = Some(format!("sending: {e}")),
                    }
                    last = Instant::now();
                }
                ServerEvent::Quit => {}
            }
        }
        if failed.is_some() {
            break failed;
        }
        if server.is_closed() {
            break None;
        }
        // The stock client sends for 6 s; a phase far longer is not netio's (or a client that
        // holds the test slot): closed, as a longer test than the server allows would be.
        let longest = ctx.limits().max_duration.map_or(INTERVAL * 3, |d| d.max(INTERVAL) + INTERVAL);
        if receiving_since.is_some_and(|t| t.elapsed() > longest) {
            break Some(format!("the client sent for more than {:.0} s in one phase", longest.as_secs_f64()));
        }
        if last.elapsed() >= idle {
            break Some(format!("idle for {:.0} s (the server's --idle-timeout)", idle.as_secs_f64()));
        }
        match r.read(&mut buf) {
            Ok(0) => break server.handle_eof().err().map(|e| e.to_string()),
            Ok(n) => {
                last = Instant::now();
                if let Err(e) = server.handle_input(&buf[..n]) {
                    break Some(e.to_string());
                }
            }
            Err(e) if crate::is_retry(&e) => {}
            Err(e) => break Some(e.to_string()),
        }
    };
    (received, sent, error, (recv_secs, send_secs), udp_sent)
}

/// One S2C phase of the UDP test: datagrams of `size` to `to` for the interval (netio's
/// blocks, netchar_wire::netio::BlockDatagrams), as fast as the socket takes them or at the
/// server's `--max-rate`, through the data plane's sender on a socket of netio's UDP port
/// connected to `to`; refused sends are counted (`send_errors`), never retried as data.
/// Returns the sender's record and why it failed, if it did.
fn send_datagrams(udp: &UdpSocket, to: SocketAddr, size: u32, ctx: &PeerContext) -> (StreamRecord, Option<String>) {
    let mut spec = TestSpec::udp_default();
    spec.direction = Direction::Down;
    spec.block_bytes = u64::from(size.max(1));
    spec.end = EndCondition::Seconds(INTERVAL.as_secs_f64());
    if let Some(u) = spec.udp.as_mut() {
        u.rate = netchar_model::UdpRate::Unlimited;
        u.per_stream = true;
    }
    let spec = crate::peers::capped(&spec, ctx.limits());
    let empty = StreamRecord::bare(2, Flow::Down, Role::Sender, Endpoint::Server, 0, 0.0);
    let local = match udp.local_addr() {
        Ok(a) => a,
        Err(e) => return (empty, Some(format!("netio UDP: {e}"))),
    };
    let socket = match crate::server_shared::bind_udp(local).and_then(|s| s.connect(to).map(|_| s)) {
        Ok(s) => s,
        Err(e) => return (empty, Some(format!("netio UDP: cannot open a socket to {to}: {e}"))),
    };
    let _ = socket2::SockRef::from(&socket).set_send_buffer_size(SOCKET_BUFFER);
    let datagrams = DatagramFormatKind::Peer(PeerDatagrams { protocol: "netio", variant: 0, run: block_sender });
    let stream = DataStream { id: 2, flow: Flow::Down, role: Role::Sender, socket: DataSocket::Udp(socket) };
    let (records, error) =
        crate::peers::run_streams(ctx, spec, datagrams, StreamOptions::default(), vec![stream], Instant::now());
    (records.into_iter().next().unwrap_or(empty), error)
}

/// One worker of netio's UDP datagrams ([`send_datagrams`]).
fn block_sender(worker: UdpWorker<'_>) -> io::Result<()> {
    worker.run(&netchar_wire::netio::BlockDatagrams::default())
}
