//! netio's server role: `netchar server --netio` ([`NetioListener`]) answering the stock netio
//! client on the TCP port (18767) and the UDP test's port+1 (18768). The listener accepts; each
//! connection is a test, a session ([`NetioSession`]) behind the server seam
//! (crate::server_control) on the one driver (crate::server_session), admitted through the
//! shared admission.
//!
//! netio's commands and its TCP data alternate on the one connection, a phase after the other,
//! so the session measures itself (ServerControl::measures_itself) rather than through the
//! driver's workers: the client's blocks are counted as the session reads them (the wire
//! server's block reader), and the server's blocks are the session's own output, written by
//! the driver for the interval (paced at the server's `--max-rate`) and ended by the marker
//! block. The UDP test's control is its connection on port+1; its datagrams come to one socket
//! shared by every client, counted per source address by the listener for the session's RES,
//! and go out only to the address of an established control connection (its TCP handshake
//! proved it), from netio's UDP port, through the data plane's sender, which the driver runs
//! for the session (ServerControlEvent::OwnStream) while it goes on reading the connection.

use crate::admission::{Limits, Refusal};
use crate::dataplane::{BytePacer, DatagramFormatKind, PeerDatagrams, UdpWorker};
use crate::peers::{PeerContext, PeerListener};
use crate::server_control::{
    Admission, OwnStream, OwnTarget, Phase, ServerControl, ServerControlEvent, ServerRequest, SessionPhase,
};
use crate::server_session::SessionDriver;
use netchar_model::{Direction, EndCondition, Endpoint, Flow, Role, StreamRecord, TestSpec, UdpSent};
use netchar_wire::netio::{Server, ServerEvent, INTERVAL};
use netchar_wire::ProtocolError;
use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a blocked read waits before the stop flag is checked again.
const POLL: Duration = Duration::from_millis(100);
/// netio's socket buffers.
const SOCKET_BUFFER: usize = 131_072;
/// The server's blocks queued for the connection per turn of the driver: a few of
/// [`block_buffer`]'s buffers, so the turns' own cost stays small beside the writes.
const BUFFERS_PER_TURN: usize = 4;

/// `netchar server --netio`: the TCP test port and the UDP test's port+1 (TCP control, UDP).
pub struct NetioListener {
    tcp: TcpListener,
    udp_control: TcpListener,
    udp: UdpSocket,
}

impl NetioListener {
    /// Binds `ip`:`port` (TCP) and `ip`:`port+1` (TCP and UDP); a busy port fails here. Port 0
    /// takes a free port whose next one is free too (tried a few times: another program may
    /// hold the next one).
    pub fn bind(ip: IpAddr, port: u16) -> io::Result<Self> {
        if port != 0 {
            return Self::bind_pair(ip, port);
        }
        let mut tries = 0;
        loop {
            let free = TcpListener::bind(SocketAddr::new(ip, 0))?.local_addr()?.port();
            tries += 1;
            match Self::bind_pair(ip, free) {
                Err(e) if tries < PORT_PAIR_TRIES => drop(e),
                outcome => return outcome,
            }
        }
    }

    fn bind_pair(ip: IpAddr, port: u16) -> io::Result<Self> {
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

/// How many free ports `--netio-port 0` tries before giving up on finding a free pair.
const PORT_PAIR_TRIES: u32 = 20;

/// Datagrams and bytes received per source address since each UDP test's C2S.
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
            threads.push(std::thread::spawn(move || {
                super::serve_connections(listener, &ctx, "netio", move |stream, peer, _, ctx| {
                    tune(&stream);
                    let side = is_udp.then(|| UdpSide { socket: udp.clone(), counts: counts.clone() });
                    let session = NetioSession::new(Instant::now(), peer, ctx.clone(), side);
                    let deadline = Instant::now() + ctx.limits().idle_timeout;
                    SessionDriver::serve(stream, peer, Box::new(session), &ctx.shared, deadline);
                })
            }));
        }
        for t in threads {
            let _ = t.join();
        }
    }
}

fn tune(s: &TcpStream) {
    let sock = socket2::SockRef::from(s);
    let _ = sock.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = sock.set_send_buffer_size(SOCKET_BUFFER);
    let _ = s.set_nodelay(true);
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

/// A UDP test's datagram side: netio's UDP socket and the listener's counts per source.
pub(crate) struct UdpSide {
    socket: Arc<UdpSocket>,
    counts: UdpCounts,
}

impl UdpSide {
    /// A side on `socket` with counts of its own (the engine's tests send from it).
    #[cfg(test)]
    pub(crate) fn new(socket: Arc<UdpSocket>) -> Self {
        Self { socket, counts: UdpCounts::default() }
    }
}

/// A TCP S2C phase under way: the server's blocks, written as the driver's turns come.
struct Sending {
    size: u32,
    started: Instant,
    until: Instant,
    /// Whole blocks queued so far (the marker aside).
    blocks: u64,
    pacer: Option<BytePacer>,
    /// When the next buffer may be queued (the pacer's wait).
    next: Instant,
    /// A buffer of whole blocks and how many it holds.
    buffer: (Vec<u8>, u64),
}

/// One netio connection's test, server side: the TCP test on netio's port, or the UDP test's
/// control connection on port+1 (with `udp`).
pub(crate) struct NetioSession {
    peer: SocketAddr,
    ctx: PeerContext,
    udp: Option<UdpSide>,
    wire: Server,
    phase: SessionPhase,
    events: VecDeque<ServerControlEvent>,
    out: Vec<u8>,
    sending: Option<Sending>,
    /// The client's bytes counted, and the seconds it spent sending them.
    received: u64,
    recv_secs: f64,
    receiving_since: Option<Instant>,
    /// This end's bytes sent, and the seconds spent sending them.
    sent: u64,
    send_secs: f64,
    udp_sent: Option<UdpSent>,
    /// A UDP S2C phase is under way on the driver's sender (ServerControlEvent::OwnStream).
    udp_sending: bool,
    /// Why the test must end, found outside a call that can say so (a UDP S2C phase that
    /// failed): the session's next timeout returns it.
    failed: Option<String>,
    /// The last time the connection moved: a read, or the end of a phase of sending.
    last: Instant,
}

impl NetioSession {
    /// A session for the connection from `peer`, accepted at `now`: the test it asks for is
    /// the connection itself (netio sends no request).
    pub(crate) fn new(now: Instant, peer: SocketAddr, ctx: PeerContext, udp: Option<UdpSide>) -> Self {
        let mut spec = if udp.is_some() { TestSpec::udp_default() } else { TestSpec::tcp_default() };
        spec.direction = Direction::Bidir;
        spec.end = EndCondition::Seconds(INTERVAL.as_secs_f64());
        if let Some(r) = ctx.limits().max_rate {
            // Admitted as the server's --max-rate in all (admission adds the two directions
            // up): netio's directions take turns, each phase paced at that rate on its own.
            let per_direction = (r / 2).max(1);
            spec.tcp.rate_bps_per_stream = Some(per_direction);
            if let Some(u) = spec.udp.as_mut() {
                u.rate = netchar_model::UdpRate::BitsPerSecond(per_direction);
            }
        }
        let events = VecDeque::from([ServerControlEvent::Requested(Box::new(ServerRequest {
            // Measured by the session: no workers' streams.
            run: Some(TestSpec { streams: 0, ..spec.clone() }),
            spec,
            companion: None,
            auth: None,
            peer_software: None,
            own_data_port: None,
        }))]);
        Self {
            peer,
            wire: Server::new(udp.is_some()),
            udp,
            ctx,
            phase: SessionPhase::new(Phase::Asked),
            events,
            out: Vec::new(),
            sending: None,
            received: 0,
            recv_secs: 0.0,
            receiving_since: None,
            sent: 0,
            send_secs: 0.0,
            udp_sent: None,
            udp_sending: false,
            failed: None,
            last: now,
        }
    }

    fn ip(&self) -> IpAddr {
        crate::admission::canonical(self.peer.ip())
    }

    fn limits(&self) -> &Limits {
        self.ctx.limits()
    }

    /// Acts on what the wire server asks for, until it asks for nothing more now.
    fn drain(&mut self, now: Instant) -> Result<(), ProtocolError> {
        while let Some(ev) = self.wire.poll_event() {
            match ev {
                ServerEvent::Receive { .. } => {
                    self.receiving_since = Some(now);
                    if let Some(side) = &self.udp {
                        if let Ok(mut m) = side.counts.lock() {
                            m.insert(self.ip(), (0, 0));
                        }
                    }
                }
                ServerEvent::Received { bytes, .. } => {
                    self.received += bytes;
                    self.recv_secs += self.receiving_since.take().map_or(0.0, |t| (now - t).as_secs_f64());
                }
                ServerEvent::CountRequested => {
                    self.recv_secs += self.receiving_since.take().map_or(0.0, |t| (now - t).as_secs_f64());
                    let counted = self.udp.as_ref().and_then(|s| s.counts.lock().ok()?.get(&self.ip()).copied());
                    let (n, b) = counted.unwrap_or((0, 0));
                    self.received += b;
                    self.wire.udp_count(n.min(u64::from(u32::MAX)) as u32).map_err(wire_error)?;
                }
                ServerEvent::Send { size } if self.udp.is_some() => self.send_datagrams(size, now)?,
                ServerEvent::Send { size } => {
                    let pacer = BytePacer::new(self.limits().max_rate, now);
                    self.sending = Some(Sending {
                        size,
                        started: now,
                        until: now + INTERVAL,
                        blocks: 0,
                        pacer,
                        next: now,
                        buffer: block_buffer(size),
                    });
                }
                ServerEvent::Quit => {}
            }
        }
        self.wire.poll_output(&mut self.out);
        if self.wire.is_closed() {
            self.phase.set(Phase::Done);
        }
        Ok(())
    }

    /// One S2C phase of the UDP test: datagrams of `size` to the control connection's address
    /// at port+1, as netio's server sends them (the TCP handshake proved that address, so this
    /// cannot be aimed elsewhere), for the interval, sent by the driver's sender on a socket
    /// of netio's UDP port connected there; RES with the count follows
    /// ([`ServerControl::own_stream_done`]).
    fn send_datagrams(&mut self, size: u32, now: Instant) -> Result<(), ProtocolError> {
        let Some(side) = &self.udp else { return Ok(()) };
        let to = SocketAddr::new(self.peer.ip(), side.socket.local_addr().map_or(0, |a| a.port()));
        let socket = datagram_socket(&side.socket, to).map_err(ProtocolError::Peer)?;
        self.udp_sending = true;
        self.last = now;
        self.events.push_back(ServerControlEvent::OwnStream(Box::new(OwnStream {
            id: 2,
            target: OwnTarget::Udp(socket),
            run: datagrams_spec(size, self.limits()),
            datagrams: netio_datagrams(),
            purpose: "netio's UDP S2C",
            lock_step: None,
        })));
        Ok(())
    }

    /// The longest phase of the client's sending the server waits out: the stock client sends
    /// for 6 s; a phase far longer is not netio's (or a client that holds the test slot).
    fn longest_phase(&self) -> Duration {
        self.limits().max_duration.map_or(INTERVAL * 3, |d| d.max(INTERVAL) + INTERVAL)
    }
}

fn wire_error(e: netchar_wire::netio::NetioError) -> ProtocolError {
    ProtocolError::Peer(e.to_string())
}

impl ServerControl for NetioSession {
    fn protocol(&self) -> &'static str {
        "netio"
    }
    fn handle_input(&mut self, now: Instant, bytes: &[u8]) -> Result<(), ProtocolError> {
        self.last = now;
        self.wire.handle_input(bytes).map_err(wire_error)?;
        self.drain(now)
    }
    fn handle_eof(&mut self, now: Instant) -> Result<(), ProtocolError> {
        // A phase of this end's sending cut short by the close ends the test early too.
        let sending = self.udp_sending || self.sending.is_some();
        let ended = self.wire.handle_eof().map_err(wire_error);
        self.drain(now)?;
        self.phase.set(Phase::Done);
        match ended {
            Ok(()) if sending => Err(ProtocolError::Peer(
                "the client closed the control connection in the middle of the server's sending".into(),
            )),
            ended => ended,
        }
    }
    fn poll_output(&mut self, out: &mut Vec<u8>) {
        out.append(&mut self.out);
    }
    fn poll_event(&mut self) -> Option<ServerControlEvent> {
        self.events.pop_front()
    }
    fn poll_timeout(&self) -> Option<Instant> {
        if self.phase.get() != Phase::Running {
            return None;
        }
        if self.failed.is_some() {
            return Some(self.last);
        }
        if self.udp_sending {
            // The sender keeps its own limits; the phase ends with it.
            return None;
        }
        let idle = self.last + self.limits().idle_timeout;
        let phase = self.receiving_since.map(|t| t + self.longest_phase());
        let send = self.sending.as_ref().map(|s| s.next.min(s.until));
        Some([Some(idle), phase, send].into_iter().flatten().min().unwrap_or(idle))
    }
    fn handle_timeout(&mut self, now: Instant) -> Result<(), ProtocolError> {
        if let Some(e) = self.failed.take() {
            return Err(ProtocolError::Peer(e));
        }
        if let Some(s) = self.sending.as_mut() {
            if now >= s.until {
                // The phase is over: the marker block, then the next command.
                let s = self.sending.take().expect("a phase of sending");
                self.out.extend_from_slice(&Server::marker(s.size));
                self.sent += (s.blocks + 1) * u64::from(s.size);
                self.send_secs += (now - s.started).as_secs_f64();
                self.last = now;
                self.wire.sent().map_err(wire_error)?;
                return self.drain(now);
            }
            for _ in 0..BUFFERS_PER_TURN {
                let queued = s.blocks * u64::from(s.size);
                if let Some(wait) = s.pacer.as_ref().and_then(|p| p.wait(queued, now)) {
                    s.next = now + wait.min(POLL);
                    return Ok(());
                }
                self.out.extend_from_slice(&s.buffer.0);
                s.blocks += s.buffer.1;
            }
            s.next = now;
            return Ok(());
        }
        if self.receiving_since.is_some_and(|t| now - t > self.longest_phase()) {
            let longest = self.longest_phase().as_secs_f64();
            return Err(ProtocolError::Timeout(format!("the client sent for more than {longest:.0} s in one phase")));
        }
        let idle = self.limits().idle_timeout;
        if now - self.last >= idle {
            return Err(ProtocolError::Timeout(format!(
                "idle for {:.0} s (the server's --idle-timeout)",
                idle.as_secs_f64()
            )));
        }
        Ok(())
    }
    fn admitted(&mut self, _now: Instant, _admission: &Admission<'_>) {
        self.phase.set(Phase::Running);
        if let Some(side) = &self.udp {
            if let Ok(mut m) = side.counts.lock() {
                m.insert(self.ip(), (0, 0));
            }
        }
    }
    fn turned_away(&mut self, _now: Instant, _why: &Refusal) {
        // netio has no way to say "busy": the connection is closed, and logged.
        self.phase.set(Phase::Done);
    }
    fn streams_connected(&mut self, _now: Instant) {}
    fn datagrams(&self) -> DatagramFormatKind {
        netio_datagrams()
    }
    fn own_stream_done(&mut self, now: Instant, record: StreamRecord, error: Option<String>) {
        self.udp_sending = false;
        self.send_secs += record.seconds;
        self.sent += record.bytes;
        let n = record.udp_sent.as_ref().map_or(0, |u| u.packets);
        if let Some(u) = record.udp_sent {
            let total = self.udp_sent.get_or_insert_with(UdpSent::default);
            total.packets += u.packets;
            total.send_errors += u.send_errors;
            total.sends += u.sends;
        }
        self.last = now;
        if self.phase.get() != Phase::Running {
            // The test ended while it sent: what it sent is counted, nothing more to say.
            return;
        }
        let answered = self.wire.udp_sent(n.min(u64::from(u32::MAX)) as u32).map_err(wire_error);
        if let Err(e) = answered.and_then(|()| self.drain(now)) {
            self.failed = Some(e.to_string());
        }
        if let Some(e) = error {
            self.failed = Some(e);
        }
    }
    fn phase(&self) -> Option<&SessionPhase> {
        Some(&self.phase)
    }
    fn measures_itself(&self) -> bool {
        true
    }
    fn complete_records(
        &mut self,
        now: Instant,
        records: &mut Vec<StreamRecord>,
        data_paths: &mut Vec<(u32, SocketAddr)>,
    ) -> Option<String> {
        // A phase of sending cut short (the server stopping, the client gone): what was
        // queued up to now counts as sent, as the old loop counted what it had written.
        if let Some(s) = self.sending.take() {
            self.sent += s.blocks * u64::from(s.size);
            self.send_secs += (now - s.started).as_secs_f64();
        }
        let mut down = StreamRecord::bare(2, Flow::Down, Role::Sender, Endpoint::Server, self.sent, self.send_secs);
        down.udp_sent = self.udp_sent.clone();
        let up = StreamRecord::bare(1, Flow::Up, Role::Receiver, Endpoint::Server, self.received, self.recv_secs);
        records.extend([up, down]);
        data_paths.push((1, self.peer));
        None
    }
}

impl Drop for NetioSession {
    fn drop(&mut self) {
        // The source's datagrams are counted no longer.
        if let Some(side) = &self.udp {
            if let Ok(mut m) = side.counts.lock() {
                m.remove(&self.ip());
            }
        }
    }
}

/// A buffer of whole zero-led blocks of `size`, about 256 KiB long (at least one block), and
/// how many blocks it holds: netio's client only ever reads byte 0 of a block (1 marks the
/// last), so the filler is any nonzero bytes.
fn block_buffer(size: u32) -> (Vec<u8>, u64) {
    let size = size.max(1) as usize;
    let blocks = (262_144 / size).max(1);
    let mut b = vec![0u8; size * blocks];
    for (i, x) in b.iter_mut().enumerate() {
        if i % size != 0 {
            *x = (i as u32).wrapping_mul(2_654_435_761).to_be_bytes()[0] | 1;
        }
    }
    (b, blocks as u64)
}

/// netio's UDP datagrams (netchar_wire::netio::BlockDatagrams).
fn netio_datagrams() -> DatagramFormatKind {
    DatagramFormatKind::Peer(PeerDatagrams { protocol: "netio", variant: 0, run: block_sender })
}

/// What one S2C phase of the UDP test runs: datagrams of `size` for the interval, as fast as
/// the socket takes them or at the server's `--max-rate`; refused sends are counted
/// (`send_errors`), never retried as data.
fn datagrams_spec(size: u32, limits: &Limits) -> TestSpec {
    let mut spec = TestSpec::udp_default();
    spec.direction = Direction::Down;
    spec.block_bytes = u64::from(size.max(1));
    spec.end = EndCondition::Seconds(INTERVAL.as_secs_f64());
    if let Some(u) = spec.udp.as_mut() {
        u.rate = netchar_model::UdpRate::Unlimited;
        u.per_stream = true;
    }
    crate::peers::capped(&spec, limits)
}

/// A socket of netio's UDP port (`udp`'s) connected to `to`, for one S2C phase.
fn datagram_socket(udp: &UdpSocket, to: SocketAddr) -> Result<UdpSocket, String> {
    let local = udp.local_addr().map_err(|e| format!("netio UDP: {e}"))?;
    let socket = crate::server_shared::bind_udp(local)
        .and_then(|s| s.connect(to).map(|_| s))
        .map_err(|e| format!("netio UDP: cannot open a socket to {to}: {e}"))?;
    let _ = socket2::SockRef::from(&socket).set_send_buffer_size(SOCKET_BUFFER);
    Ok(socket)
}

/// One worker of netio's UDP datagrams ([`send_datagrams`]).
fn block_sender(worker: UdpWorker<'_>) -> io::Result<()> {
    worker.run(&netchar_wire::netio::BlockDatagrams::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_0_takes_a_free_pair_and_two_listeners_get_two() {
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let a = NetioListener::bind(ip, 0).expect("a free pair");
        let b = NetioListener::bind(ip, 0).expect("a second free pair");
        for l in [&a, &b] {
            let p = l.port();
            assert_ne!(p, 0);
            assert_eq!(l.udp_control.local_addr().unwrap().port(), p + 1);
            assert_eq!(l.udp.local_addr().unwrap().port(), p + 1);
        }
        assert_ne!(a.port(), b.port());
    }
}
