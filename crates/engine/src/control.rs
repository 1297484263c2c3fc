//! The seam between a control protocol and the client's driver.
//!
//! A control protocol is a sans-IO session (bytes in, bytes out, events, timeouts: the shape of
//! quinn-proto and of `netchar_wire::session`) behind [`ClientControl`]. Its events are
//! protocol-neutral: "open these data streams, each with this preamble or UDP handshake",
//! "start", "the peer's senders are done", "the peer's report", "busy". The driver in
//! [`crate::client`] runs any such session over real sockets: it connects, pumps bytes and
//! timeouts, opens the streams as described, runs the workers with the protocol's datagram
//! format, and assembles one result.
//!
//! netchar's own protocol ([`NativeClient`]) is the first implementation, iperf3's
//! ([`crate::peers::iperf3::Iperf3Control`]) the second. A peer protocol is one more
//! implementation in its module under [`crate::peers`] (beside its server, which sits behind
//! the server seam, crate::server_control), its datagram format given to the data plane
//! through [`crate::dataplane::DatagramFormatKind::Peer`] when its UDP header is its own, and
//! one entry in the protocol registry ([`crate::protocols`]): its name, port, commands and
//! constructor. Protocols without a control connection (iperf2, echo/discard/chargen) say
//! [`ControlConnection::None`]. A protocol whose control connection carries its data too, a
//! phase after the other (netio's TCP test), writes and reads that data in the session
//! ([`ClientControl::writes_data`]) and reports what it counted ([`ControlEvent::Measured`]).
//! A protocol whose control is request/reply datagrams (nc_test's master) says
//! [`ControlConnection::Udp`], binds the UDP port its request names first
//! ([`ControlEvent::BindUdp`]), and runs lock-step data on the data plane's lock-step worker
//! (crate::dataplane::LockStep). A peer's sequence of tests is a job over sessions
//! (crate::jobs), not a session.

use crate::dataplane::DatagramFormatKind;
use netchar_model::{
    CpuUsage, Evidence, Flow, HostIdentity, HostInfo, StreamRecord, StreamTotal, TargetFigures, TestSpec,
};
use netchar_wire::auth::Credentials;
use netchar_wire::datagram::{DatagramHeader, SETUP_LEN};
use netchar_wire::hello::Hello;
use netchar_wire::session::{ClientEvent, ClientSession, Timeouts};
use netchar_wire::ProtocolError;
use std::collections::VecDeque;
use std::time::Instant;

/// What the driver must do next, whatever the protocol.
pub enum ControlEvent {
    /// The peer admitted the test: open these data streams.
    Admitted {
        /// Every data stream of the test.
        streams: Vec<OpenStream>,
        /// What the peer said about itself.
        peer: PeerInfo,
        /// The test's cookie, for a companion test (netchar's protocol only).
        cookie: Option<[u8; 16]>,
    },
    /// The peer turned the test away for now; retrying later may succeed.
    Busy {
        /// Tests running there.
        running: u32,
        /// Tests it admits at once.
        max: u32,
        /// The limit reached, when it is not the number of tests.
        reason: Option<String>,
    },
    /// Every data stream is in: start the workers (the protocol has said "start").
    Start,
    /// The peer's senders finished with these exact totals.
    PeerSenderDone(Vec<StreamTotal>),
    /// The far end's figures about itself over the test (a target's stack counters and idle
    /// loop: the C responder on a board), before its [`Self::PeerReport`]. An event of its
    /// own rather than a field of the report, so that the protocols whose far ends have none
    /// (every peer's) say nothing about it.
    PeerTarget(TargetFigures),
    /// The far end's counters over the test towards this end and its settings, before its
    /// [`Self::PeerReport`] (netchar's server; issue 23). An event of its own for the same
    /// reason as [`Self::PeerTarget`]: the peers' far ends have none.
    PeerEvidence {
        /// Its interface, qdisc and stack counters, as deltas over the test.
        evidence: Option<Box<Evidence>>,
        /// Its kernel command line, interface driver, offloads, coalescing, governors.
        identity: Option<Box<HostIdentity>>,
    },
    /// The peer's own figures; the session is over.
    PeerReport {
        /// The peer's end of every stream.
        streams: Vec<StreamRecord>,
        /// The peer's CPU.
        cpu: CpuUsage,
        /// Why the peer ended early, if it did.
        error: Option<String>,
    },
    /// End this end's receivers now, keeping what they counted (a peer that sends until the
    /// client closes, such as chargen, has no end of its own).
    EndReceivers,
    /// Open a TCP listener on this host for the peer to connect back to (iperf2's `-d`/`-r`)
    /// and tell its port to [`ClientControl::listening`]; streams with
    /// [`Transport::DialBack`] take their connection from it.
    Listen,
    /// What the session measured itself, on data its control connection carries (netio's TCP
    /// blocks share the connection with its commands): this end's records, put in the result
    /// beside the workers' (their `measured_by` says which end counted), and a note on what
    /// the test left out (netio's "Tx only"), which is the result's error line but no failure.
    /// This end's CPU is measured from the start to this event.
    Measured {
        /// Records the session counted.
        streams: Vec<StreamRecord>,
        /// What the test left out, if anything.
        note: Option<String>,
    },
    /// Bind a UDP socket on this host before the session's next output, at `port` or, when
    /// that one is taken, at any free port, and tell its port to [`ClientControl::udp_bound`]
    /// (nc_test's master names its UDP data port in the request that starts the test, and the
    /// peer may send there as soon as it answered: the port must be open before the request
    /// goes out). A stream with [`Transport::BoundUdp`] takes the socket.
    BindUdp {
        /// The port asked for (0: any).
        port: u16,
    },
}

/// What a peer says about itself when it admits a test.
#[derive(Debug, Clone, Default)]
pub struct PeerInfo {
    /// Tests the peer runs now, this one included.
    pub concurrent_tests: u32,
    /// The peer's machine, when it tells.
    pub host: Option<HostInfo>,
    /// The peer's software and version (`netchar 0.1.0`), when it tells.
    pub software: Option<String>,
}

/// One data stream to open.
pub struct OpenStream {
    /// Stream id (from 1: up streams first, then down streams).
    pub id: u32,
    /// Which way its data flows.
    pub flow: Flow,
    /// How to open it.
    pub transport: Transport,
}

/// How a data stream is opened.
pub enum Transport {
    /// A TCP connection to the peer's control address and port that first sends `preamble`.
    Tcp {
        /// Bytes written right after connecting (netchar's data hello).
        preamble: Vec<u8>,
    },
    /// A UDP socket connected to the peer's control address and port, set up by `handshake`
    /// before the test starts.
    Udp {
        /// The protocol's UDP setup exchange.
        handshake: Box<dyn UdpHandshake>,
    },
    /// A new TCP connection per transaction to this port of the peer (crr).
    PerTransaction {
        /// The port the peer opened for the test.
        port: u16,
    },
    /// The socket of the earlier stream `id`, shared (echo: one stream sends on it, another
    /// receives what comes back on it).
    SameAs {
        /// The stream whose socket this one shares.
        id: u32,
    },
    /// A connection the peer opens to this end's listener ([`ControlEvent::Listen`]) from the
    /// peer's own address, taken when it comes (at once or after the other direction).
    DialBack,
    /// A TCP connection to this port of the peer's control address (a data port the peer
    /// announced for the stream), with nothing written first.
    TcpToPort {
        /// The peer's data port.
        port: u16,
    },
    /// A UDP socket connected to this port of the peer's control address, with no setup
    /// exchange: the stream is ready at once.
    UdpToPort {
        /// The peer's data port.
        port: u16,
    },
    /// A UDP socket bound to `port` of this end's control-connection address and connected to
    /// the same port of the peer, with no setup exchange (netio's UDP test: its server sends
    /// to the client's address at its own port). A busy port there fails the test in a line.
    UdpSamePort {
        /// The port on both ends.
        port: u16,
    },
    /// The UDP socket bound at [`ControlEvent::BindUdp`], connected to this port of the peer's
    /// control address, with no setup exchange.
    BoundUdp {
        /// The peer's data port.
        port: u16,
    },
}

/// A protocol's UDP setup exchange for one stream, sans-IO: the driver sends
/// [`Self::datagram`] now and then until the test starts, and hands every datagram the peer
/// sends meanwhile to [`Self::on_datagram`].
pub trait UdpHandshake: Send {
    /// The datagram to (re)send now; an empty one is not sent (a protocol without a setup).
    fn datagram(&self) -> Vec<u8>;
    /// A datagram from the peer during setup; true when the datagram to send changed and
    /// should go out at once.
    fn on_datagram(&mut self, bytes: &[u8]) -> bool;
    /// True once setup is complete on this end: the driver then neither sends nor reads on
    /// the stream's socket, so data the peer sends before "start" arrives waits for the worker.
    fn answered(&self) -> bool {
        false
    }
    /// Whether [`Self::datagram`] should go out now (the driver asks every 50 ms).
    fn due(&mut self, _now: Instant) -> bool {
        true
    }
}

/// No UDP setup at all (iperf2, echo/discard/chargen): the peer takes whatever comes, so the
/// stream is ready at once and its socket is left to the worker.
pub struct NoUdpSetup;

impl UdpHandshake for NoUdpSetup {
    fn datagram(&self) -> Vec<u8> {
        Vec::new()
    }
    fn on_datagram(&mut self, _bytes: &[u8]) -> bool {
        false
    }
    fn answered(&self) -> bool {
        true
    }
}

/// What the peer of a protocol without a control connection sent on one of its TCP data
/// streams (at most [`ANSWER_BYTES`] of it, read without taking it), and how its side stood:
/// all a client of a service that has no hello of its own can learn of what answered.
#[derive(Debug, Clone, Copy)]
pub struct PeerAnswer<'a> {
    /// The peer's first bytes on the stream.
    pub bytes: &'a [u8],
    /// How its side of the stream stood when this end looked.
    pub end: AnswerEnd,
}

/// How the peer's side of a data stream stood when this end looked at its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerEnd {
    /// Still open: more may come.
    Open,
    /// It closed the connection (or reset it).
    Closed,
    /// Still open, and nothing more came within the client's hello timeout (before the test).
    Silent,
}

/// The most bytes of a peer's answer a [`PeerAnswer`] carries: a netchar hello and more.
pub const ANSWER_BYTES: usize = 64;

/// What came of a UDP test's datagrams at this end, for [`ClientControl::udp_unanswered`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UdpOutcome {
    /// Datagrams this end's senders offered (the kernel's refusals included).
    pub sent: u64,
    /// Of those, the ones the kernel refused with ECONNREFUSED: the host answered an earlier
    /// one with ICMP port unreachable, so nothing takes UDP at that port.
    pub refused: u64,
    /// Datagrams this end's receivers got back.
    pub received: u64,
    /// The peer's port.
    pub port: u16,
}

impl UdpOutcome {
    /// "nothing takes UDP at port 5300 (the host refused 42 of 43 datagrams: port
    /// unreachable)", when the host said so.
    pub fn refusal(&self) -> Option<String> {
        (self.refused > 0).then(|| {
            format!(
                "nothing takes UDP at port {} (the host refused {} of {} datagrams: port unreachable)",
                self.port, self.refused, self.sent
            )
        })
    }
}

/// What a session makes of a stream's opening answer ([`ClientControl::opening_answer`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opening {
    /// Not decided yet: wait for more bytes, the peer's close or the timeout.
    Wait,
    /// The peer is the protocol's: the first `n` bytes answered the preamble and are not the
    /// test's (an echo server's copy of it), the rest is data.
    Take(usize),
}

/// A client's control protocol, sans-IO. Every method's contract is that of
/// `netchar_wire::session::ClientSession`, whose shape this is.
pub trait ClientControl: Send {
    /// Feeds bytes read from the control connection.
    fn handle_input(&mut self, now: Instant, bytes: &[u8]) -> Result<(), ProtocolError>;
    /// The peer closed the control connection.
    fn handle_eof(&mut self, now: Instant) -> Result<(), ProtocolError>;
    /// Moves queued bytes for the control connection into `out`.
    fn poll_output(&mut self, out: &mut Vec<u8>);
    /// The next thing the driver must do.
    fn poll_event(&mut self) -> Option<ControlEvent>;
    /// When [`Self::handle_timeout`] must be called next, if ever.
    fn poll_timeout(&self) -> Option<Instant>;
    /// Keepalives, silence, phase deadlines.
    fn handle_timeout(&mut self, now: Instant) -> Result<(), ProtocolError>;
    /// This end's senders finished with these exact totals.
    fn local_senders_done(&mut self, now: Instant, totals: Vec<StreamTotal>);
    /// What the peer answered on the data sockets to the UDP senders' end datagrams (iperf2's
    /// server reports), by stream id; given just before [`Self::local_senders_done`].
    fn end_replies(&mut self, _now: Instant, _replies: Vec<(u32, Vec<u8>)>) {}
    /// The listener asked for by [`ControlEvent::Listen`] is open on `port`.
    fn listening(&mut self, _now: Instant, _port: u16) {}
    /// The UDP socket asked for by [`ControlEvent::BindUdp`] is bound at `port`.
    fn udp_bound(&mut self, _now: Instant, _port: u16) {}
    /// End the test early (Ctrl-C, a failed worker): the peer should stop and report.
    fn stop(&mut self, now: Instant, reason: &str);
    /// True once the session is over.
    fn is_done(&self) -> bool;
    /// The UDP datagram format of this protocol's tests.
    fn datagrams(&self) -> DatagramFormatKind;
    /// Whether this end's TCP senders, when they outnumber the CPUs, share a thread per CPU
    /// and write a block to each stream in turn, as the peer's own client does
    /// (dataplane/send_group.rs); otherwise each has a thread.
    fn interleaves_senders(&self) -> bool {
        false
    }
    /// What this end's data streams need beyond netchar's own defaults: for a peer that returns
    /// what it gets (the echo service), that receivers compare it with what was sent.
    fn stream_options(&self) -> crate::dataplane::StreamOptions {
        crate::dataplane::StreamOptions::default()
    }
    /// Without a control connection: whether each TCP stream's peer must answer its preamble
    /// before the test starts (an echo server returns it, a chargen server talks unasked); the
    /// driver then gives [`Self::opening_answer`] what comes until it is decided.
    fn awaits_opening(&self) -> bool {
        false
    }
    /// The opening answer of TCP stream `id` so far ([`Self::awaits_opening`]): wait, take it,
    /// or name the peer that answered instead.
    fn opening_answer(&mut self, _id: u32, _answer: PeerAnswer<'_>) -> Result<Opening, ProtocolError> {
        Ok(Opening::Take(0))
    }
    /// Without a control connection, after the test: what the peer sent back on TCP stream `id`,
    /// which this end only wrote to and no worker read, and whether a worker of this end failed
    /// on it (the peer's reset or close during the test); an error names a peer of another
    /// protocol. A service that never answers (discard, an iperf2 server) may still be told
    /// from the one that did.
    fn unread_answer(&mut self, _id: u32, _answer: PeerAnswer<'_>, _failed: bool) -> Result<(), ProtocolError> {
        Ok(())
    }
    /// Without a control connection, after a UDP test: what came of this end's datagrams
    /// ([`UdpOutcome`]); a complaint ("not an echo server: none of the 85 datagrams came
    /// back") when that is not what the protocol's server does. The driver then asks the same
    /// port over TCP what answers there and names it after the complaint. A server that is
    /// silent by design (discard) is only told from nothing at all by the host's refusals.
    fn udp_unanswered(&mut self, _outcome: &UdpOutcome) -> Option<String> {
        None
    }
    /// Whether the driver connects a control connection for this session first.
    fn connection(&self) -> ControlConnection {
        ControlConnection::Tcp
    }
    /// How many control connections the session runs over, with [`ControlConnection::Tcp`]: a
    /// protocol whose server runs one stream per test (netperf's `-P` is several tests at
    /// once) runs each stream's test on a connection of its own. The driver connects them all
    /// to the peer's address and port before the first poll, and gives each one's bytes and
    /// end to the `_on` methods with its index (0 is the first).
    fn control_connections(&self) -> usize {
        1
    }
    /// [`Self::handle_input`] for control connection `conn`.
    fn handle_input_on(&mut self, conn: usize, now: Instant, bytes: &[u8]) -> Result<(), ProtocolError> {
        let _ = conn;
        self.handle_input(now, bytes)
    }
    /// [`Self::handle_eof`] for control connection `conn`.
    fn handle_eof_on(&mut self, conn: usize, now: Instant) -> Result<(), ProtocolError> {
        let _ = conn;
        self.handle_eof(now)
    }
    /// [`Self::poll_output`] for control connection `conn`.
    fn poll_output_on(&mut self, conn: usize, out: &mut Vec<u8>) {
        if conn == 0 {
            self.poll_output(out);
        }
    }
    /// True while the session's output is data it makes as fast as the connection takes it
    /// (netio's TCP blocks, which share its control connection with its commands): the
    /// driver then keeps writing until [`Self::poll_timeout`] is due, and reads nothing
    /// meanwhile (the peer says nothing while it reads).
    fn writes_data(&self) -> bool {
        false
    }
    /// The test's title once it ran, from the result's records (netio names each test by the
    /// line its own client prints); none leaves the caller's.
    fn title(&self, _streams: &[StreamRecord]) -> Option<String> {
        None
    }
    /// Whether the peer's report carries its CPU (a protocol whose far end says nothing about
    /// its CPU reports none, not zero).
    fn reports_peer_cpu(&self) -> bool {
        true
    }
}

/// How a protocol talks to its peer besides the data streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlConnection {
    /// A TCP connection to the peer's address and port, carrying the session's bytes.
    Tcp,
    /// None (iperf2, echo/discard/chargen): the driver connects nothing itself; the session
    /// emits its events from its first poll, its timeouts and the local senders' totals, and
    /// its output bytes are discarded.
    None,
    /// A UDP socket connected to the peer's address and port (nc_test's requests and replies):
    /// each [`ClientControl::poll_output`] is one datagram and each datagram read is one
    /// [`ClientControl::handle_input`]. Nothing ever closes it: a peer that does not answer
    /// (an ICMP refusal reads as nothing) is the session's timeout to notice.
    Udp,
}

/// netchar's own control protocol (docs/protocol.md) behind the seam.
pub struct NativeClient {
    session: ClientSession,
    spec: TestSpec,
    /// The events that follow the first of a finished session's (its target's figures, its
    /// evidence, its report), until they are polled.
    pending: VecDeque<ControlEvent>,
}

impl NativeClient {
    /// A session for `spec` (the hello is queued at once), accompanying the test with cookie
    /// `companion` if given, authenticating with `auth` (credentials and a fresh nonce).
    pub fn new(
        now: Instant,
        spec: TestSpec,
        timeouts: Timeouts,
        companion: Option<[u8; 16]>,
        auth: Option<(Credentials, [u8; 16])>,
    ) -> Self {
        let session = ClientSession::with_auth(now, spec.clone(), timeouts, companion, auth);
        Self { session, spec, pending: VecDeque::new() }
    }

    /// The streams of an admitted test: TCP with netchar's data hello (tagged when
    /// authenticated), UDP with the return-routability handshake, crr to the test's port.
    fn streams(&self, cookie: [u8; 16], data_port: Option<u16>, key: Option<[u8; 32]>) -> Vec<OpenStream> {
        let spec = &self.spec;
        if let (Some(port), true) = (data_port, spec.rr.as_ref().is_some_and(|r| r.connect_per_transaction)) {
            return spec
                .stream_ids(Flow::Up)
                .map(|id| OpenStream { id, flow: Flow::Up, transport: Transport::PerTransaction { port } })
                .collect();
        }
        let mut streams = Vec::new();
        for &flow in spec.direction.flows() {
            for id in spec.stream_ids(flow) {
                let transport = if spec.uses_udp() {
                    Transport::Udp { handshake: Box::new(NativeUdpSetup { cookie, id, key, token: None }) }
                } else {
                    let tag = key.map_or([0; 8], |k| netchar_wire::auth::data_tag(&k, &cookie, id));
                    Transport::Tcp { preamble: Hello::data_tagged(cookie, id, tag).encode().to_vec() }
                };
                streams.push(OpenStream { id, flow, transport });
            }
        }
        streams
    }
}

impl ClientControl for NativeClient {
    fn handle_input(&mut self, now: Instant, bytes: &[u8]) -> Result<(), ProtocolError> {
        self.session.handle_input(now, bytes)
    }
    fn handle_eof(&mut self, now: Instant) -> Result<(), ProtocolError> {
        self.session.handle_eof(now)
    }
    fn poll_output(&mut self, out: &mut Vec<u8>) {
        self.session.poll_output(out);
    }
    fn poll_event(&mut self) -> Option<ControlEvent> {
        if let Some(next) = self.pending.pop_front() {
            return Some(next);
        }
        Some(match self.session.poll_event()? {
            ClientEvent::Accepted {
                cookie, concurrent_tests, host, data_port, session_key, server_version, ..
            } => ControlEvent::Admitted {
                streams: self.streams(cookie, data_port, session_key),
                peer: PeerInfo { concurrent_tests, host: Some(host), software: Some(peer_software(&server_version)) },
                cookie: Some(cookie),
            },
            ClientEvent::Busy { running, max, reason } => ControlEvent::Busy { running, max, reason },
            ClientEvent::Started => ControlEvent::Start,
            ClientEvent::PeerSenderDone(totals) => ControlEvent::PeerSenderDone(totals),
            ClientEvent::Finished { streams, cpu, target, evidence, identity, error } => {
                self.pending.extend(target.map(ControlEvent::PeerTarget));
                if evidence.is_some() || identity.is_some() {
                    let (evidence, identity) = (evidence.map(Box::new), identity.map(Box::new));
                    self.pending.push_back(ControlEvent::PeerEvidence { evidence, identity });
                }
                self.pending.push_back(ControlEvent::PeerReport { streams, cpu, error });
                self.pending.pop_front()?
            }
        })
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.session.poll_timeout()
    }
    fn handle_timeout(&mut self, now: Instant) -> Result<(), ProtocolError> {
        self.session.handle_timeout(now)
    }
    fn local_senders_done(&mut self, now: Instant, totals: Vec<StreamTotal>) {
        self.session.local_senders_done(now, totals);
    }
    fn stop(&mut self, now: Instant, reason: &str) {
        self.session.stop(now, reason);
    }
    fn is_done(&self) -> bool {
        self.session.is_done() && self.pending.is_empty()
    }
    fn datagrams(&self) -> DatagramFormatKind {
        DatagramFormatKind::Native
    }
}

/// netchar's UDP setup for one stream (docs/protocol.md, "UDP streams"): setup datagrams
/// until the server's challenge arrives, then confirms echoing its token.
struct NativeUdpSetup {
    cookie: [u8; 16],
    id: u32,
    key: Option<[u8; 32]>,
    token: Option<[u8; 16]>,
}

impl UdpHandshake for NativeUdpSetup {
    fn datagram(&self) -> Vec<u8> {
        let d: [u8; SETUP_LEN] = match self.token {
            None => DatagramHeader::setup(self.id, &self.cookie),
            Some(token) => {
                let tag = self.key.map_or([0; 8], |k| netchar_wire::auth::data_tag(&k, &self.cookie, self.id));
                DatagramHeader::confirm(self.id, &self.cookie, &token, &tag)
            }
        };
        d.to_vec()
    }

    fn on_datagram(&mut self, bytes: &[u8]) -> bool {
        match DatagramHeader::parse_challenge(bytes) {
            Some((id, token)) if id == self.id && self.token != Some(token) => {
                self.token = Some(token);
                true
            }
            _ => false,
        }
    }
}

/// The far end's software as a result names it: a netchar server says its version
/// (`0.1.0` reads `netchar 0.1.0`); another program speaking the native protocol names itself
/// (`netchar-responder 0.1`, the C responder of responder/) and is taken as it says.
pub(crate) fn peer_software(server_version: &str) -> String {
    if server_version.starts_with("netchar") {
        server_version.to_string()
    } else {
        format!("netchar {server_version}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netchar_model::Direction;

    #[test]
    fn native_streams_carry_netchars_preambles_and_handshakes() {
        let mut spec = TestSpec::tcp_default();
        spec.direction = Direction::Bidir;
        spec.streams = 2;
        let c = NativeClient::new(Instant::now(), spec, Timeouts::default(), None, None);
        let streams = c.streams([7; 16], None, None);
        assert_eq!(
            streams.iter().map(|s| (s.id, s.flow)).collect::<Vec<_>>(),
            [(1, Flow::Up), (2, Flow::Up), (3, Flow::Down), (4, Flow::Down)]
        );
        let Transport::Tcp { preamble } = &streams[2].transport else { panic!("TCP expected") };
        assert_eq!(Hello::decode(preamble.as_slice().try_into().unwrap()).unwrap(), Hello::data([7; 16], 3));
    }

    #[test]
    fn the_native_udp_handshake_answers_its_own_challenge_once() {
        let mut h = NativeUdpSetup { cookie: [1; 16], id: 2, key: None, token: None };
        assert!(DatagramHeader::parse_setup(&h.datagram()).is_some_and(|s| s.confirm.is_none()));
        assert!(!h.on_datagram(&DatagramHeader::challenge(3, &[9; 16])), "another stream's challenge");
        assert!(h.on_datagram(&DatagramHeader::challenge(2, &[9; 16])));
        assert!(!h.on_datagram(&DatagramHeader::challenge(2, &[9; 16])), "the same token again");
        let confirm = DatagramHeader::parse_setup(&h.datagram()).unwrap();
        assert_eq!(confirm.confirm, Some(([9; 16], [0; 8])));
    }

    #[test]
    fn a_targets_figures_and_the_evidence_come_before_the_report_and_the_session_ends_after_them() {
        use netchar_wire::codec::encode_frame;
        use netchar_wire::message::ServerMessage;
        let now = Instant::now();
        let mut c = NativeClient::new(now, TestSpec::tcp_default(), Timeouts::default(), None, None);
        let mut bytes = Hello::server().encode().to_vec();
        let target = TargetFigures { idle_count: Some(5), idle_per_second: Some(10), ..TargetFigures::default() };
        for m in [
            ServerMessage::Accepted {
                cookie: "07".repeat(16),
                concurrent_tests: 1,
                host: HostInfo::default(),
                server_version: "netchar-responder 0.1".into(),
                data_port: None,
                server_proof: None,
            },
            ServerMessage::Ready,
            ServerMessage::Results {
                streams: Vec::new(),
                cpu: CpuUsage::default(),
                target: Some(target.clone()),
                evidence: Some(Evidence { interface: "eth0".into(), ..Evidence::default() }),
                identity: None,
                error: None,
            },
        ] {
            encode_frame(&m.encode(), &mut bytes);
        }
        c.handle_input(now, &bytes).unwrap();
        assert!(matches!(c.poll_event(), Some(ControlEvent::Admitted { .. })));
        assert!(matches!(c.poll_event(), Some(ControlEvent::Start)));
        assert!(matches!(c.poll_event(), Some(ControlEvent::PeerTarget(t)) if t == target));
        assert!(!c.is_done(), "the report is still to come");
        assert!(matches!(
            c.poll_event(),
            Some(ControlEvent::PeerEvidence { evidence: Some(e), identity: None }) if e.interface == "eth0"
        ));
        assert!(matches!(c.poll_event(), Some(ControlEvent::PeerReport { error: None, .. })));
        assert!(c.is_done());
        assert!(c.poll_event().is_none());
    }

    #[test]
    fn peer_software_names_a_netchar_server_and_takes_another_programs_own_name() {
        assert_eq!(super::peer_software("0.1.0"), "netchar 0.1.0");
        assert_eq!(super::peer_software("netchar-responder 0.1"), "netchar-responder 0.1");
    }
}
