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
//! ([`Iperf3Control`]) the second. A peer protocol is one more implementation here, one
//! [`crate::dataplane::DatagramFormatKind`] variant when its UDP header differs, and one CLI
//! value.

use crate::dataplane::DatagramFormatKind;
use netchar_model::{CpuUsage, Flow, HostInfo, StreamRecord, StreamTotal, TestSpec};
use netchar_wire::auth::Credentials;
use netchar_wire::datagram::{DatagramHeader, SETUP_LEN};
use netchar_wire::hello::Hello;
use netchar_wire::session::{ClientEvent, ClientSession, Timeouts};
use netchar_wire::ProtocolError;
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
    /// The peer's own figures; the session is over.
    PeerReport {
        /// The peer's end of every stream.
        streams: Vec<StreamRecord>,
        /// The peer's CPU.
        cpu: CpuUsage,
        /// Why the peer ended early, if it did.
        error: Option<String>,
    },
}

/// What a peer says about itself when it admits a test.
#[derive(Debug, Clone, Default)]
pub struct PeerInfo {
    /// Tests the peer runs now, this one included.
    pub concurrent_tests: u32,
    /// The peer's machine, when it tells.
    pub host: Option<HostInfo>,
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
}

/// A protocol's UDP setup exchange for one stream, sans-IO: the driver sends
/// [`Self::datagram`] now and then until the test starts, and hands every datagram the peer
/// sends meanwhile to [`Self::on_datagram`].
pub trait UdpHandshake: Send {
    /// The datagram to (re)send now.
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
    /// End the test early (Ctrl-C, a failed worker): the peer should stop and report.
    fn stop(&mut self, now: Instant, reason: &str);
    /// True once the session is over.
    fn is_done(&self) -> bool;
    /// The UDP datagram format of this protocol's tests.
    fn datagrams(&self) -> DatagramFormatKind;
    /// Whether the driver connects a control connection for this session first.
    fn connection(&self) -> ControlConnection {
        ControlConnection::Tcp
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
}

/// netchar's own control protocol (docs/protocol.md) behind the seam.
pub struct NativeClient {
    session: ClientSession,
    spec: TestSpec,
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
        Self { session: ClientSession::with_auth(now, spec.clone(), timeouts, companion, auth), spec }
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
        Some(match self.session.poll_event()? {
            ClientEvent::Accepted { cookie, concurrent_tests, host, data_port, session_key, .. } => {
                ControlEvent::Admitted {
                    streams: self.streams(cookie, data_port, session_key),
                    peer: PeerInfo { concurrent_tests, host: Some(host) },
                    cookie: Some(cookie),
                }
            }
            ClientEvent::Busy { running, max, reason } => ControlEvent::Busy { running, max, reason },
            ClientEvent::Started => ControlEvent::Start,
            ClientEvent::PeerSenderDone(totals) => ControlEvent::PeerSenderDone(totals),
            ClientEvent::Finished { streams, cpu, error } => ControlEvent::PeerReport { streams, cpu, error },
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
        self.session.is_done()
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
    pub fn new(now: Instant, spec: &TestSpec, cookie_random: &[u8; 36]) -> Result<Self, String> {
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
fn iperf3_params(spec: &TestSpec) -> Result<netchar_wire::iperf3::Params, String> {
    use netchar_model::{Direction, EndCondition, TestKind, UdpRate};
    let no = |what: &str| Err(format!("--proto iperf3: {what}"));
    if !matches!(spec.kind, TestKind::Tcp | TestKind::Udp) {
        return no("only TCP and UDP throughput tests run against an iperf3 server (rr, crr, echo: iperf3 has none)");
    }
    if spec.server_load.is_some() || spec.measure_idle || spec.server_cpu.is_some() {
        return no(
            "--server-load, --idle and a server CPU in -A are netchar server features an iperf3 server does not have",
        );
    }
    if spec.tcp.zerocopy {
        return no("--zerocopy is netchar's sender; run it without --proto iperf3 or drop --zerocopy");
    }
    let (seconds, bytes) = match spec.end {
        EndCondition::Seconds(s) => (s, 0),
        EndCondition::Bytes(_) if spec.direction != Direction::Up => {
            return no("-n with -R or --bidir: iperf3 ends those tests on the client's clock; use -t")
        }
        EndCondition::Bytes(n) => (0.0, n),
    };
    // iperf3's rate is per stream.
    let bandwidth = match &spec.udp {
        None => spec.tcp.rate_bps_per_stream,
        Some(u) => {
            if u.pattern.is_some() {
                return no("--pattern is netchar's sender schedule; an iperf3 server sends evenly paced datagrams");
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
    })
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
        let due = my_turn && self.sent.map_or(true, |t| now.duration_since(t) >= IPERF3_HELLO_REPEAT);
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
                ControlEvent::Admitted { streams, peer: PeerInfo { concurrent_tests: 1, host: None }, cookie: None }
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
        DatagramFormatKind::Iperf3 { wide: true }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netchar_model::Direction;

    #[test]
    fn iperf3_refuses_what_it_cannot_run_before_any_traffic() {
        let now = Instant::now();
        assert!(Iperf3Control::new(now, &TestSpec::udp_default(), &[0; 36]).err().unwrap().contains("TCP"));
        let mut reverse_bytes = TestSpec::tcp_default();
        reverse_bytes.direction = Direction::Down;
        reverse_bytes.end = netchar_model::EndCondition::Bytes(1000);
        assert!(Iperf3Control::new(now, &reverse_bytes, &[0; 36]).err().unwrap().contains("use -t"));
        assert!(Iperf3Control::new(now, &TestSpec::tcp_default(), &[0; 36]).is_ok());
    }

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
}
