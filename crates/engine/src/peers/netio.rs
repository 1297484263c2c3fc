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
use crate::dataplane::{DatagramFormatKind, PeerDatagrams, UdpWorker};
use crate::registry::{SessionArgs, SessionError};
use netchar_model::{
    CpuUsage, Direction, EndCondition, Endpoint, Flow, Role, StreamRecord, StreamTotal, TestKind, TestSpec,
};
use netchar_wire::netio::{Client, ClientStep, Cmd, Control};
use netchar_wire::session::Timeouts;
use netchar_wire::ProtocolError;
use std::collections::VecDeque;
use std::io;
use std::time::{Duration, Instant};

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

pub(crate) use super::netio_server::bind_listener;
/// `netchar server --netio`: the TCP test port and the UDP test's port+1 (TCP control and UDP
/// data), bound.
// The listener half (`NetioListener` and its sessions) lives in peers/netio_server.rs, on the
// one server driver; its paths stay these.
pub use super::netio_server::NetioListener;
