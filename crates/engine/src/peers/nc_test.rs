//! eCos nc_test over real sockets, both roles: netchar as the master of an unmodified
//! `nc_test_slave` / `nc6_test_slave`, each request a client session ([`NcTestControl`]) that
//! the job of the sequence (crate::jobs::ecos::run_master) runs through the client driver, and
//! as a slave answering an unmodified `nc_test_master` / `nc6_test_master`
//! ([`NcTestListener`]). The protocol itself, and every decision in it, is the sans-IO
//! `netchar_wire::nc_test`; this module only moves its bytes.
//!
//! The master's session rides the seam's datagram pieces: a UDP control connection, a UDP
//! data port bound before the request that names it, and the data plane's lock-step worker
//! (crate::dataplane::LockStep) running the wire's `MasterTest` on the data stream.
//!
//! The slave's test is a session on the one server driver, and its exchange runs on the same
//! lock-step worker as a stream of the session's own (crate::server_control::OwnStream), the
//! wire's `SlaveTest` its machine: over the data port's one UDP socket, shared and unconnected
//! (no second socket may bind the port), the machine names the master's data port as its peer
//! and turns away datagrams from elsewhere; a TCP test's connection is looked for by the session
//! without blocking, then handed to the worker. The session's thread meanwhile keeps the
//! driver's turns (the server's stop, its --max-duration).
//!
//! Why lock step rather than the data plane's streaming workers: nc_test's control is UDP
//! (request/reply datagrams on 7777), not a TCP control connection, and its data is lock-step
//! (one buffer, then one answer, with per-buffer timeouts and the master's pauses), so every
//! buffer is a transaction whose outcome the state machine must see before the next one goes
//! out; only the pacing of a UDP send test and the count of refused sends are the data plane's
//! streaming senders' (its `DatagramPacer`, their schedule and counters, one datagram at a
//! time). The figures are the state machine's exact buffer counts (what was sent, received,
//! lost, out of sequence, and the slave's own results record), mapped into the one result model
//! by [`master_result`].
//!
//! Deviations from the stock programs, all compatible with them: the master binds its UDP data
//! port before it sends a UDP request (the stock master binds after the ACK, so a stock slave's
//! first datagrams of a "UDP send" can be lost); each request goes out from a UDP control
//! socket of its own session (the stock master keeps one; slaves answer each request's
//! source); a TCP test's data connection is tried once, 3 s after the ACK (the stock master
//! retries a refusal 5 times); the slave binds its data sockets once at start
//! and drains stale datagrams before each ACK; TCP reads time out (21 s) where the stock ones
//! block forever; the slave accepts data only from its master's address (or
//! `--allow-data-from`).

use super::{ConnectionSlot, PeerContext, PeerListener};
use crate::admission::Refusal;
use crate::control::{ClientControl, ControlConnection, ControlEvent, OpenStream, PeerInfo, Transport};
use crate::dataplane::{DatagramFormatKind, LockStepSlot, StreamOptions};
use crate::error::SessionError;
use crate::load::{BackgroundLoad, IdleMark, IdleMeter};
use crate::registry::SessionArgs;
use crate::server_control::{
    Admission, OwnStream, OwnTarget, Phase, ServerControl, ServerControlEvent, ServerRequest, SessionPhase,
};
use crate::server_session::{DatagramLink, SessionDriver};
use crate::server_shared::ServerLog;
use netchar_model::{CpuUsage, StreamTotal};
use netchar_model::{
    Direction, EndCondition, Endpoint, Flow, HostInfo, LatencyUs, Role, RrFigures, RrOptions, StreamRecord, TestInfo,
    TestResult, TestSpec, UdpOptions, UdpReceived, UdpSent,
};
use netchar_stats::distribution::Distribution;
use netchar_wire::nc_test::{self as wire, Kind, MasterReport, Pause, Request, SlaveAction, SlaveTest, Step};
use netchar_wire::ProtocolError;
use std::collections::VecDeque;
use std::io::{self, Write};
use std::net::{IpAddr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often blocking waits look at the stop flag.
const POLL: Duration = Duration::from_millis(200);
/// TCP buffer reads: the stock programs block forever; this gives up after the results wait.
const TCP_READ_TIMEOUT: Duration = wire::RESULTS_TIMEOUT;
/// The slave waits this long for the master's TCP connection after an ACK (the stock master
/// waits 3 s, then retries 5 times 1 s apart).
const ACCEPT_WAIT: Duration = Duration::from_secs(15);
/// How often a TCP test's session looks for its master's connection on the data port.
const ACCEPT_POLL: Duration = Duration::from_millis(10);
/// In a UDP_SEND test, the slave's first datagram waits this long after the ACK.
const UDP_SEND_HEAD_START: Duration = Duration::from_millis(100);
/// The slave's UDP_SEND datagrams a second (about the 100 Mbit/s wire of the boards a slave
/// stands in for), paced by the data plane's pacer (crate::dataplane::DatagramPacer): a stock
/// master reads one datagram per loop and waits 3 s for every one it lost, so an unpaced
/// sender turns a test into minutes.
const UDP_SEND_RATE: f64 = 10_000.0;
/// A background load left running by a master that went away stops after this long without
/// requests.
const LOAD_IDLE_OFF: Duration = Duration::from_secs(120);

/// What the master runs.
#[derive(Debug, Clone)]
pub enum MasterPlan {
    /// A stock master's whole sequence.
    Suite(wire::Sequence),
    /// The same sections shortened (`suite ecos --quick`, [`MasterSuite::quick`]).
    QuickSuite(wire::Sequence),
    /// One test.
    Single {
        /// The test.
        kind: Kind,
        /// Buffers.
        nbufs: u32,
        /// Payload bytes per buffer.
        buflen: u32,
        /// Pause after a number of received buffers.
        pause: Pause,
    },
}

/// The master's settings.
#[derive(Debug, Clone)]
pub struct MasterConfig {
    /// The slave's control address (port 7777 by default).
    pub slave: SocketAddr,
    /// The slave's data port (8770), sent in every test request.
    pub slave_data_port: u16,
    /// This end's UDP data port (8771; another one when that is taken), sent in every test
    /// request: the slave sends there.
    pub master_data_port: u16,
    /// What to run.
    pub plan: MasterPlan,
}

fn unspecified(v6: bool, port: u16) -> SocketAddr {
    if v6 {
        SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port)
    } else {
        SocketAddr::new(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), port)
    }
}

fn same_ip(a: IpAddr, b: IpAddr) -> bool {
    crate::admission::canonical(a) == crate::admission::canonical(b)
}

fn bind_udp(addr: SocketAddr) -> io::Result<UdpSocket> {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, None)?;
    // No SO_REUSEADDR: on UDP it would let a second master or slave bind the same port and
    // take some of this one's datagrams.
    // Room for a burst: nc_test senders never wait for their receiver (capped by rmem_max).
    let _ = s.set_recv_buffer_size(4 << 20);
    if addr.is_ipv6() {
        s.set_only_v6(false)?;
    }
    s.bind(&addr.into())?;
    Ok(s.into())
}

/// `--proto auto` where nothing takes a TCP connection: whether an eCos nc_test slave answers
/// on UDP at `addr`. The probe is one request with code 0, which no slave knows: a stock slave
/// NAKs it ("Unrecognized request") and runs nothing, so asking is harmless. True when a NAK
/// of the probe's own seq comes back within `wait` (an LP64 slave's 40-byte reply counts).
pub fn slave_answers(addr: SocketAddr, wait: Duration) -> bool {
    let local: SocketAddr =
        if addr.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse().expect("literal addresses parse");
    let Ok(socket) = UdpSocket::bind(local) else { return false };
    if socket.connect(addr).is_err() {
        return false;
    }
    let mut seq = [0u8; 4];
    let _ = getrandom::getrandom(&mut seq);
    let seq = u32::from_ne_bytes(seq) | 1;
    let probe = Request { code: 0, seq, nbufs: 0, buflen: 0, slave_port: 0, master_port: 0, timeout: 0 };
    let deadline = Instant::now() + wait;
    let mut buf = [0u8; 64];
    for _ in 0..2 {
        let _ = socket.send(&probe.encode());
        while let Some(left) = deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()) {
            let _ = socket.set_read_timeout(Some(left.min(wait / 2).max(Duration::from_millis(1))));
            match socket.recv(&mut buf) {
                Ok(n) if n == wire::REPLY_LEN_LP64 && be_word(&buf, 4) == seq => return true,
                Ok(n) => {
                    if wire::Reply::decode(&buf[..n]).is_ok_and(|r| r.seq == seq && !r.is_ack()) {
                        return true;
                    }
                }
                // A refusal (ICMP port unreachable) or the half wait over: resend once.
                Err(_) => break,
            }
        }
    }
    false
}

fn be_word(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The netchar spec a test maps to (for the result file and the server's admission).
pub fn spec_for(kind: Kind, nbufs: u32, buflen: u32, pause: Pause) -> TestSpec {
    let (nbufs, buflen) = (u64::from(nbufs), u64::from(buflen));
    let mut spec = match kind {
        Kind::UdpEcho | Kind::TcpEcho => {
            let mut s = TestSpec::rr_default();
            s.block_bytes = buflen.max(1);
            s.rr = Some(RrOptions {
                udp: kind == Kind::UdpEcho,
                request_bytes: buflen + wire::DATA_HEADER_LEN as u64,
                response_bytes: buflen + wire::DATA_HEADER_LEN as u64,
                inflight: 1,
                timeout_seconds: wire::TEST_TIMEOUT.as_secs_f64(),
                busy_poll: false,
                wakeup_stamps: false,
                connect_per_transaction: false,
                pause_every: (pause.ticks > 0).then_some(u64::from(pause.threshold)),
                pause_seconds: (wire::TICK * pause.ticks).as_secs_f64(),
            });
            s.end = EndCondition::Bytes(nbufs);
            s
        }
        Kind::UdpSend | Kind::UdpRecv => {
            let mut s = TestSpec::udp_default();
            s.udp = Some(UdpOptions::default());
            s
        }
        _ => TestSpec::tcp_default(),
    };
    if matches!(kind, Kind::UdpSend | Kind::UdpRecv | Kind::TcpSend | Kind::TcpRecv) {
        spec.block_bytes = buflen + wire::DATA_HEADER_LEN as u64;
        spec.end = EndCondition::Bytes(nbufs * (buflen + wire::DATA_HEADER_LEN as u64));
        // Named from the slave's side: in "recv" the master (netchar) sends, up.
        spec.direction = if matches!(kind, Kind::UdpRecv | Kind::TcpRecv) { Direction::Up } else { Direction::Down };
    }
    spec.interval_seconds = 0.0;
    spec
}

fn latency(rtts: &[Duration]) -> LatencyUs {
    let mut d = Distribution::new();
    for r in rtts {
        d.record((r.as_nanos() as u64).max(1));
    }
    if rtts.is_empty() {
        return LatencyUs::default();
    }
    let us = |ns: u64| ns as f64 / 1e3;
    LatencyUs {
        min: us(d.min()),
        mean: d.mean() / 1e3,
        stddev: d.stddev() / 1e3,
        p50: us(d.quantile(0.5)),
        p90: us(d.quantile(0.9)),
        p99: us(d.quantile(0.99)),
        p999: us(d.quantile(0.999)),
        max: us(d.max()),
    }
}

fn record(id: u32, flow: Flow, role: Role, by: Endpoint, buffers: u64, bytes_per: u64, secs: f64) -> StreamRecord {
    StreamRecord::bare(id, flow, role, by, buffers * bytes_per, secs)
}

/// One test of the master as a netchar result: `test.protocol` is "nc-test"; the master's
/// figures are netchar's own (measured here); the far side's are the slave's results record
/// (buffers it sent and received, counted by the slave). Bytes count whole buffers, the 16-byte
/// header included (the stock master's printed KB/s excludes it: see `lines`).
pub fn master_result(cfg: &MasterConfig, r: &MasterReport, started_at: &str, error: Option<String>) -> TestResult {
    let spec = spec_for(r.kind, r.nbufs, r.buflen, r.pause);
    let td = u64::from(r.buflen) + wire::DATA_HEADER_LEN as u64;
    let secs = r.elapsed.as_secs_f64();
    let mut streams = Vec::new();
    let slave = r.results;
    match r.kind {
        Kind::UdpEcho | Kind::TcpEcho => {
            let mut s = record(1, Flow::Up, Role::Sender, Endpoint::Client, u64::from(r.sent), td, secs);
            s.rr = Some(RrFigures {
                transactions: u64::from(r.received),
                transactions_per_second: if secs > 0.0 { f64::from(r.received) / secs } else { 0.0 },
                lost: u64::from(r.lost),
                late: u64::from(r.late),
                latency_us: latency(&r.rtts),
                ..RrFigures::default()
            });
            streams.push(s);
        }
        k => {
            let up = matches!(k, Kind::UdpRecv | Kind::TcpRecv);
            let flow = if up { Flow::Up } else { Flow::Down };
            let (mine, theirs) = if up {
                (u64::from(r.sent), slave.map(|x| u64::from(x.nrecvd)))
            } else {
                (u64::from(r.received), slave.map(|x| u64::from(x.nsent)))
            };
            let (my_role, their_role) =
                if up { (Role::Sender, Role::Receiver) } else { (Role::Receiver, Role::Sender) };
            let mut me = record(1, flow, my_role, Endpoint::Client, mine, td, secs);
            let mut them = record(1, flow, their_role, Endpoint::Server, theirs.unwrap_or(0), td, secs);
            if k.is_udp() {
                let (sent, recvd) = if up { (mine, theirs.unwrap_or(0)) } else { (theirs.unwrap_or(0), mine) };
                let sent_fig = UdpSent { packets: sent, ..Default::default() };
                let lost = sent.saturating_sub(recvd);
                let recv_fig = UdpReceived {
                    packets: recvd,
                    lost,
                    loss_percent: if sent > 0 { 100.0 * lost as f64 / sent as f64 } else { 0.0 },
                    out_of_order: if up { 0 } else { u64::from(r.seq_errors) },
                    ..Default::default()
                };
                let (snd, rcv) = if up { (&mut me, &mut them) } else { (&mut them, &mut me) };
                snd.udp_sent = Some(sent_fig);
                rcv.udp_received = Some(recv_fig);
            }
            streams.push(me);
            if theirs.is_some() {
                streams.push(them);
            }
        }
    }
    let test = TestInfo {
        spec,
        remote: cfg.slave.to_string(),
        family: if cfg.slave.is_ipv6() { "ipv6" } else { "ipv4" }.into(),
        title: None,
        client_cpu: None,
        concurrent_tests: 1,
        protocol: "nc-test".into(),
        // nc_test carries no software name or version.
        peer_software: None,
        far_end: Default::default(),
        caveats: Vec::new(),
    };
    let header = netchar_model::ResultHeader {
        test,
        started_at: started_at.to_string(),
        host: crate::measure::host_info(),
        remote_host: None::<HostInfo>,
    };
    let error = error.or_else(|| {
        if r.denied {
            Some(format!("the nc_test slave denied {} [{},{}]", r.kind.name(), r.nbufs, r.buflen))
        } else if r.results.is_none() {
            Some("the nc_test slave sent no results record".into())
        } else {
            None
        }
    });
    let mut result = TestResult::assemble(header, streams, Default::default(), error);
    // Echo tests are request/response: their figures are the summary's, as for netchar's echo.
    result.summary.rr = result.streams.iter().find_map(|s| s.rr.clone());
    result
}

// ------------------------------------------------------------------------------------------
// The master's requests as sessions

/// What one request of the master came to, read by the job that ran it (the session is the
/// driver's until it is done).
#[derive(Debug, Default)]
pub struct RequestOutcome {
    /// The slave's reply datagram, as it came (none within the reply timeout: `None`).
    pub reply: Option<Vec<u8>>,
    /// The UDP data port this end bound for the test and named in the request.
    pub master_port: Option<u16>,
    /// What the master measured, when the slave ACKed a test and its data ran.
    pub report: Option<MasterReport>,
}

/// One request of nc_test's master behind the client seam ([`ClientControl`]): the request
/// datagram on the UDP control connection ([`ControlConnection::Udp`]), the slave's reply, and
/// for an ACKed test its data stream, run in lock-step by the data plane
/// ([`crate::dataplane::LockStep`]) with the wire's [`wire::MasterTest`].
///
/// - A UDP test asks the driver for its data port first ([`ControlEvent::BindUdp`]): the
///   request names it, and the slave may send as soon as it ACKed.
/// - A TCP test connects to the slave's data port [`wire::TCP_CONNECT_DELAY`] after the ACK,
///   as the stock master does (the slave listens after it answered).
/// - A request that carries no test (SET_LOAD, START_IDLE, STOP_IDLE, DISCONNECT) and a
///   denied test end at the reply, with no stream.
/// - No reply within [`wire::REPLY_TIMEOUT`] fails the session with a line naming the slave;
///   a reply that is not one fails it as malformed. Either way the [`RequestOutcome`] keeps
///   what came, for the sequence to go on as the stock master's does.
pub struct NcTestControl {
    request: Request,
    pause: Pause,
    slave: SocketAddr,
    outcome: Arc<Mutex<RequestOutcome>>,
    phase: RequestPhase,
    /// The request datagram, until the driver takes it.
    out: Option<Vec<u8>>,
    events: VecDeque<ControlEvent>,
    /// The reply's deadline, then the TCP connect's moment.
    deadline: Option<Instant>,
    /// The test the data stream runs, shared with its lock-step worker.
    test: Option<Arc<Mutex<wire::MasterTest>>>,
    done: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RequestPhase {
    /// Waiting for the driver's UDP data port.
    Binding,
    /// The request is out; waiting for the reply.
    Asking,
    /// A TCP test was ACKed: connecting after the master's delay.
    Connecting,
    /// The data stream runs.
    Running,
    /// The report is out.
    Over,
}

impl NcTestControl {
    /// A session sending `request` (a test's with its ports filled in, or a control request)
    /// to the slave at `slave`, a test pausing as `pause` says; the job reads its outcome
    /// from the handle returned beside it.
    pub fn new(now: Instant, request: Request, pause: Pause, slave: SocketAddr) -> (Self, Arc<Mutex<RequestOutcome>>) {
        let outcome = Arc::new(Mutex::new(RequestOutcome::default()));
        let mut session = Self {
            request,
            pause,
            slave,
            outcome: outcome.clone(),
            phase: RequestPhase::Binding,
            out: None,
            events: VecDeque::new(),
            deadline: None,
            test: None,
            done: false,
        };
        if request.kind().is_some_and(Kind::is_udp) {
            let port = u16::try_from(request.master_port).unwrap_or(wire::DATA_MASTER_PORT);
            session.events.push_back(ControlEvent::BindUdp { port });
        } else {
            session.ask(now);
        }
        (session, outcome)
    }

    fn ask(&mut self, now: Instant) {
        self.out = Some(self.request.encode().to_vec());
        self.deadline = Some(now + wire::REPLY_TIMEOUT);
        self.phase = RequestPhase::Asking;
    }

    fn kind(&self) -> Option<Kind> {
        self.request.kind()
    }

    /// The request is over without a data stream (a control request, a denied test).
    fn end_without_stream(&mut self) {
        self.events.push_back(ControlEvent::Admitted { streams: Vec::new(), peer: PeerInfo::default(), cookie: None });
        self.events.push_back(ControlEvent::Start);
        self.events.push_back(ControlEvent::PeerReport { streams: Vec::new(), cpu: CpuUsage::default(), error: None });
        self.phase = RequestPhase::Over;
        self.deadline = None;
    }

    fn open_stream(&mut self, transport: Transport) {
        let stream = OpenStream { id: 1, flow: Flow::Up, transport };
        self.events.push_back(ControlEvent::Admitted {
            streams: vec![stream],
            peer: PeerInfo::default(),
            cookie: None,
        });
        self.events.push_back(ControlEvent::Start);
        self.phase = RequestPhase::Running;
        self.deadline = None;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RequestOutcome> {
        self.outcome.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// `--proto nc-test` as a session of the registry: the one test `spec` describes (as
/// [`spec_for`] maps a test), with the stock master's ports and the sequence number of its
/// first test. The suite runs its own requests ([`NcTestControl::new`]); this is a test asked
/// for on its own.
pub fn client_session(args: &SessionArgs<'_>) -> Result<Box<dyn ClientControl>, SessionError> {
    let (kind, nbufs, buflen, pause) = single_test_of(args.spec)?;
    let mut request = Request::new(kind, 2, nbufs, buflen);
    request.slave_port = u32::from(wire::DATA_SLAVE_PORT);
    request.master_port = u32::from(wire::DATA_MASTER_PORT);
    // The address as given names the slave in the session's lines (the driver resolves it).
    let ip = args.cfg.host.trim_matches(['[', ']']).parse().unwrap_or(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED));
    let slave = SocketAddr::new(ip, args.cfg.port);
    Ok(Box::new(NcTestControl::new(args.now, request, pause, slave).0))
}

/// The nc_test test a netchar spec is ([`spec_for`] the other way).
pub(crate) fn single_test_of(spec: &TestSpec) -> Result<(Kind, u32, u32, Pause), SessionError> {
    let unsupported = || {
        SessionError::Unsupported(
            "--proto nc-test runs a count of buffers: echo --pattern NxSIZE, tcp -n/-l, udp --pattern, or suite ecos"
                .into(),
        )
    };
    let EndCondition::Bytes(total) = spec.end else { return Err(unsupported()) };
    let count = |n: u64| u32::try_from(n).map_err(|_| unsupported());
    match (&spec.rr, spec.direction) {
        (Some(rr), _) => {
            let kind = if rr.udp { Kind::UdpEcho } else { Kind::TcpEcho };
            let ticks = (rr.pause_seconds / wire::TICK.as_secs_f64()).round() as u32;
            let pause = match rr.pause_every {
                Some(every) => Pause { ticks, threshold: count(every)? },
                None => Pause::default(),
            };
            Ok((kind, count(total)?, count(spec.block_bytes)?, pause))
        }
        (None, direction @ (Direction::Up | Direction::Down)) => {
            let td = spec.block_bytes.max(wire::DATA_HEADER_LEN as u64 + 1);
            let up = direction == Direction::Up;
            let kind = match (spec.uses_udp(), up) {
                (true, true) => Kind::UdpRecv,
                (true, false) => Kind::UdpSend,
                (false, true) => Kind::TcpRecv,
                (false, false) => Kind::TcpSend,
            };
            Ok((kind, count(total / td)?, count(td - wire::DATA_HEADER_LEN as u64)?, Pause::default()))
        }
        _ => Err(unsupported()),
    }
}

/// A session the driver let go of with its test's data still out (a failed stream, the
/// driver's own limit after a stop) leaves what the test measured to the job all the same.
impl Drop for NcTestControl {
    fn drop(&mut self) {
        if let Some(test) = self.test.take() {
            let report = test.lock().unwrap_or_else(|p| p.into_inner()).report().clone();
            self.lock().report.get_or_insert(report);
        }
    }
}

/// A test's data loop as the lock-step worker runs it.
struct SharedMasterTest {
    test: Arc<Mutex<wire::MasterTest>>,
    tcp: bool,
}

impl crate::dataplane::LockStep for SharedMasterTest {
    fn next(&mut self, now: Instant) -> crate::dataplane::LockStepAction {
        use crate::dataplane::LockStepAction as A;
        let mut test = self.test.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            return match test.next_step(now) {
                // The lines are the report's; the job prints them once the test is over.
                Step::Print(_) => continue,
                Step::Send(bytes) => A::Send(bytes),
                // TCP reads: the stock master blocks forever; this one waits the results' wait.
                Step::Recv { len, timeout } => {
                    A::Recv { len, timeout: if self.tcp { timeout.max(TCP_READ_TIMEOUT) } else { timeout } }
                }
                Step::Pause(d) => A::Pause(d),
                Step::Done => A::Done,
            };
        }
    }
    fn received(&mut self, data: Option<&[u8]>, now: Instant) {
        self.test.lock().unwrap_or_else(|p| p.into_inner()).received(data, now);
    }
}

impl ClientControl for NcTestControl {
    fn handle_input(&mut self, now: Instant, bytes: &[u8]) -> Result<(), ProtocolError> {
        if self.phase != RequestPhase::Asking {
            // A repeated or late reply: the stock master reads one per request.
            return Ok(());
        }
        self.lock().reply = Some(bytes.to_vec());
        let reply = wire::Reply::decode(bytes).map_err(|e| {
            self.phase = RequestPhase::Over;
            self.done = true;
            ProtocolError::Malformed(format!("the nc_test slave at {} answered with no reply: {e}", self.slave))
        })?;
        match self.kind() {
            Some(kind) if kind.is_test() && reply.is_ack() => {
                let test =
                    wire::MasterTest::new(kind, self.request.seq, self.request.nbufs, self.request.buflen, self.pause);
                self.test = Some(Arc::new(Mutex::new(test)));
                let port = u16::try_from(self.request.slave_port).unwrap_or(wire::DATA_SLAVE_PORT);
                if kind.is_udp() {
                    self.open_stream(Transport::BoundUdp { port });
                } else {
                    self.phase = RequestPhase::Connecting;
                    self.deadline = Some(now + wire::TCP_CONNECT_DELAY);
                }
            }
            _ => self.end_without_stream(),
        }
        Ok(())
    }
    fn handle_eof(&mut self, _now: Instant) -> Result<(), ProtocolError> {
        Ok(())
    }
    fn poll_output(&mut self, out: &mut Vec<u8>) {
        if let Some(datagram) = self.out.take() {
            out.extend_from_slice(&datagram);
        }
    }
    fn poll_event(&mut self) -> Option<ControlEvent> {
        let ev = self.events.pop_front();
        if matches!(ev, Some(ControlEvent::PeerReport { .. })) {
            self.done = true;
        }
        ev
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.deadline
    }
    fn handle_timeout(&mut self, now: Instant) -> Result<(), ProtocolError> {
        if self.deadline.is_none_or(|d| now < d) {
            return Ok(());
        }
        match self.phase {
            RequestPhase::Asking => {
                self.phase = RequestPhase::Over;
                self.done = true;
                Err(ProtocolError::Timeout(format!(
                    "no nc_test slave answered at {} within {} s: is nc_test_slave (or netchar server --nc-test) \
                     running there?",
                    self.slave,
                    wire::REPLY_TIMEOUT.as_secs()
                )))
            }
            RequestPhase::Connecting => {
                let port = u16::try_from(self.request.slave_port).unwrap_or(wire::DATA_SLAVE_PORT);
                self.open_stream(Transport::TcpToPort { port });
                Ok(())
            }
            _ => {
                self.deadline = None;
                Ok(())
            }
        }
    }
    fn local_senders_done(&mut self, _now: Instant, _totals: Vec<StreamTotal>) {
        // The lock-step worker is done: its test's report is complete.
        let Some(test) = self.test.take() else { return };
        let report = test.lock().unwrap_or_else(|p| p.into_inner()).report().clone();
        let mut slave = Vec::new();
        let mut error = None;
        match report.results {
            Some(r) => {
                let td = u64::from(report.buflen) + wire::DATA_HEADER_LEN as u64;
                let secs = report.elapsed.as_secs_f64();
                // The slave's own count: what it sent in "send", what it took in otherwise.
                let (flow, role, buffers) = match report.kind {
                    Kind::UdpSend | Kind::TcpSend => (Flow::Down, Role::Sender, r.nsent),
                    _ => (Flow::Up, Role::Receiver, r.nrecvd),
                };
                slave.push(record(1, flow, role, Endpoint::Server, u64::from(buffers), td, secs));
            }
            None => error = Some("the nc_test slave sent no results record".to_string()),
        }
        self.lock().report = Some(report);
        self.events.push_back(ControlEvent::PeerReport { streams: slave, cpu: CpuUsage::default(), error });
        self.phase = RequestPhase::Over;
    }
    fn udp_bound(&mut self, now: Instant, port: u16) {
        self.request.master_port = u32::from(port);
        self.lock().master_port = Some(port);
        self.ask(now);
    }
    fn stop(&mut self, _now: Instant, reason: &str) {
        if self.phase == RequestPhase::Over {
            return;
        }
        if let Some(test) = self.test.take() {
            self.lock().report = Some(test.lock().unwrap_or_else(|p| p.into_inner()).report().clone());
        }
        self.events.push_back(ControlEvent::PeerReport {
            streams: Vec::new(),
            cpu: CpuUsage::default(),
            error: Some(reason.to_string()),
        });
        self.phase = RequestPhase::Over;
        self.deadline = None;
    }
    fn is_done(&self) -> bool {
        self.done && self.events.is_empty()
    }
    fn datagrams(&self) -> DatagramFormatKind {
        DatagramFormatKind::Native
    }
    fn stream_options(&self) -> StreamOptions {
        let lock_step = self.test.as_ref().map(|test| {
            let tcp = self.kind().is_some_and(Kind::is_tcp);
            LockStepSlot::new(Box::new(SharedMasterTest { test: test.clone(), tcp }))
        });
        StreamOptions { lock_step, ..StreamOptions::default() }
    }
    fn connection(&self) -> ControlConnection {
        ControlConnection::Udp
    }
    fn reports_peer_cpu(&self) -> bool {
        false
    }
}

// ------------------------------------------------------------------------------------------
// Slave

/// `netchar server --nc-test`: the UDP control socket (7777) and the data sockets (8770, TCP
/// listener and UDP), all bound at start, dual-stack.
pub struct NcTestListener {
    ctrl: UdpSocket,
    /// The data port's sockets, shared with the session of the test running.
    udp: Arc<UdpSocket>,
    tcp: Arc<TcpListener>,
    data_port: u16,
}

impl NcTestListener {
    /// Binds control on `control` and data on the same address with `data_port`.
    pub fn bind(control: SocketAddr, data_port: u16) -> io::Result<Self> {
        let ctrl = bind_udp(control)?;
        let (tcp, udp) = super::bind_tcp_and_udp(SocketAddr::new(control.ip(), data_port), bind_udp)?;
        tcp.set_nonblocking(true)?;
        let data_port = tcp.local_addr()?.port();
        Ok(Self { ctrl, udp: Arc::new(udp), tcp: Arc::new(tcp), data_port })
    }

    /// The data port (the one bound, when 0 was asked for).
    pub fn data_port(&self) -> u16 {
        self.data_port
    }
}

/// The registry's binder (crate::protocols::LISTENERS): `ports` are control and data.
pub(crate) fn bind_listener(ip: IpAddr, ports: &[u16]) -> io::Result<Box<dyn PeerListener>> {
    Ok(Box::new(NcTestListener::bind(SocketAddr::new(ip, ports[0]), ports[1])?))
}

impl PeerListener for NcTestListener {
    fn name(&self) -> &'static str {
        "nc-test"
    }

    fn describe(&self) -> String {
        format!(
            "answering eCos nc_test masters on UDP {} (data on port {}), under the same limits",
            self.local_addr(),
            self.data_port()
        )
    }

    fn local_addr(&self) -> SocketAddr {
        self.ctrl.local_addr().unwrap_or_else(|_| unspecified(true, wire::SLAVE_PORT))
    }

    fn udp_ports(&self) -> Vec<u16> {
        [&self.ctrl, &self.udp].iter().filter_map(|s| s.local_addr().ok()).map(|a| a.port()).collect()
    }

    fn run(self: Box<Self>, ctx: PeerContext) {
        let mut slave = SlaveState {
            wire: wire::Slave { data_port: self.data_port, ..wire::Slave::default() },
            load: None,
            idle: None,
            last_request: Instant::now(),
        };
        let mut buf = vec![0u8; 2048];
        let _ = self.ctrl.set_read_timeout(Some(POLL));
        while !ctx.stop().is_raised() {
            if (slave.load.is_some() || slave.idle.is_some()) && slave.last_request.elapsed() > LOAD_IDLE_OFF {
                slave.set_load(0);
                slave.idle = None;
            }
            let (n, master) = match self.ctrl.recv_from(&mut buf) {
                Ok(x) => x,
                Err(_) => continue,
            };
            if !ctx.inbound("nc-test", master, n) {
                continue;
            }
            slave.last_request = Instant::now();
            let Some(mut d) = slave.wire.handle(&buf[..n]) else {
                ctx.log(ServerLog::Rejected {
                    peer: master,
                    reason: format!("nc-test: a {n}-byte datagram is not a request"),
                });
                continue;
            };
            // A test runs as a session on the one driver (SlaveSession): admitted there, its
            // ACK its first answer. What no test may do is refused here, before admission.
            let mut test: Option<(Request, TestSpec)> = None;
            match &d.action {
                SlaveAction::Test(req) => {
                    let kind = req.kind().unwrap_or(Kind::UdpEcho);
                    let spec = spec_for(kind, req.nbufs, req.buflen, Pause::default());
                    // A UDP_SEND request proves nothing of its source: its datagrams go only to
                    // an allowed network (the guard logs that once per source; the stock master
                    // prints the NAK and goes on).
                    // Nor does any UDP test send to a service port or one of ours: a loop.
                    let to = SocketAddr::new(master.ip(), req.master_port as u16);
                    let allowed = match kind {
                        Kind::UdpSend => ctx.may_send_unprompted("nc-test", master).map_err(|_| None),
                        _ => Ok(()),
                    }
                    .and_then(|()| match (kind.is_udp(), ctx.guard().check_source(to)) {
                        (true, Err(why)) => Err(Some(format!("{} to {to} refused: {why}", kind.name()))),
                        _ => Ok(()),
                    });
                    match allowed {
                        Ok(()) => test = Some((*req, spec)),
                        Err(refusal) => {
                            if let Some(reason) = refusal {
                                ctx.log(ServerLog::Rejected { peer: master, reason: format!("nc-test: {reason}") });
                            }
                            d.reply = wire::Reply::nak(req.seq, wire::NAK_BAD_REQUEST);
                            d.action = SlaveAction::None;
                        }
                    }
                    // Stale datagrams and connections of an earlier test must not count in
                    // this one.
                    drain(&self.udp);
                    while self.tcp.accept().is_ok() {}
                }
                SlaveAction::SetLoad(l) => slave.set_load(*l),
                SlaveAction::StartIdle => slave.start_idle(),
                SlaveAction::StopIdle => slave.stop_idle(&mut d.reply),
                SlaveAction::Disconnect => {
                    slave.set_load(0);
                    slave.idle = None;
                }
                SlaveAction::None => {
                    if !d.reply.is_ack() {
                        if let Some(l) = &d.line {
                            ctx.log(ServerLog::Rejected { peer: master, reason: format!("nc-test: {l}") });
                        }
                    }
                }
            }
            match test {
                // The session answers (ACK, or NAK when admission turns it away), runs the
                // test, and the driver logs it. The control port is read again after it, as
                // the stock slave serves one master's test at a time.
                Some((req, spec)) => self.run_session(req, d.reply, spec, master, &ctx),
                None => {
                    // A reply is smaller than its request; the budget still holds a flood of
                    // forged ones to a rate.
                    let reply = d.reply.encode();
                    if ctx.may_answer("nc-test", master, reply.len()) {
                        let _ = self.ctrl.send_to(&reply, master);
                    }
                }
            }
            if ctx.one_off_done() {
                break;
            }
        }
        slave.set_load(0);
    }
}

struct SlaveState {
    wire: wire::Slave,
    load: Option<BackgroundLoad>,
    idle: Option<(IdleMeter, IdleMark)>,
    last_request: Instant,
}

impl SlaveState {
    /// eCos's load threads each take about 10% of the CPU, `load/10` of them run: here one
    /// duty-cycled thread at `load`% of a CPU.
    fn set_load(&mut self, load: u32) {
        if let Some(l) = self.load.take() {
            let _ = l.finish();
        }
        if load > 0 {
            self.load = Some(BackgroundLoad::start(f64::from(load.min(100)), 1));
        }
    }

    /// The idle counters start at the first START_IDLE and keep running (at idle priority)
    /// until DISCONNECT or a quiet spell, so that every run counts with the same threads.
    fn start_idle(&mut self) {
        let meter = match self.idle.take() {
            Some((m, _)) => m,
            None => IdleMeter::start(),
        };
        let mark = meter.mark();
        self.idle = Some((meter, mark));
    }

    fn stop_idle(&mut self, reply: &mut wire::Reply) {
        if let Some((meter, start)) = &self.idle {
            // At least one tick: a stock master divides by it (SIGFPE on a test under 10 ms).
            let ticks = ((start.at.elapsed().as_millis() / wire::TICK.as_millis()) as u32).max(1);
            let count = meter.mark().count.saturating_sub(start.count);
            reply.elapsed_ticks = ticks;
            reply.count_hi = (count >> 32) as u32;
            reply.count_lo = count as u32;
        }
    }
}

fn drain(udp: &UdpSocket) {
    let _ = udp.set_nonblocking(true);
    let mut b = [0u8; 2048];
    while udp.recv_from(&mut b).is_ok() {}
    let _ = udp.set_nonblocking(false);
}

/// What one test of the slave came to, for the driver's report and log.
struct SlaveLog {
    streams: Vec<StreamRecord>,
    data_path: Option<SocketAddr>,
    error: Option<String>,
}

impl NcTestListener {
    /// Runs one admitted-to-be test as a [`SlaveSession`] on the one driver, its answers sent
    /// from the control port to `master` as the reflection guard allows.
    fn run_session(&self, req: Request, ack: wire::Reply, spec: TestSpec, master: SocketAddr, ctx: &PeerContext) {
        let Ok(answers) = self.ctrl.try_clone() else { return };
        let answer_ctx = ctx.clone();
        let (link, _source) =
            DatagramLink::new(answers, master, Box::new(move |bytes| answer_ctx.may_answer("nc-test", master, bytes)));
        let session = SlaveSession::new(req, ack, spec, master, ctx.clone(), self.udp.clone(), self.tcp.clone());
        let deadline = Instant::now() + ctx.limits().idle_timeout;
        // `_source` lives until the session ends: its link reads no end of file meanwhile.
        SessionDriver::serve_over(Box::new(link), master, Box::new(session), &ctx.shared, deadline);
    }
}

/// One nc_test test, server side, behind the server seam (crate::server_control): opened by
/// the master's request datagram (its link answers it, crate::server_session::DatagramLink),
/// admitted by the driver, then run as nc_test runs it, in lock step, one buffer after the
/// other on the data port (the master's own pace). The exchange is a stream of the session's
/// own (ServerControlEvent::OwnStream) on the data plane's lock-step worker, the wire's
/// `SlaveTest` its machine ([`SlaveMachine`]); the session's thread meanwhile keeps to the
/// driver's turns (the server's stop, its limits) and counts the test from the machine once
/// the worker is done.
pub(crate) struct SlaveSession {
    req: Request,
    /// The answer to the request once admitted.
    ack: wire::Reply,
    spec: TestSpec,
    master: SocketAddr,
    ctx: PeerContext,
    udp: Arc<UdpSocket>,
    tcp: Arc<TcpListener>,
    phase: SessionPhase,
    requested: bool,
    out: Vec<u8>,
    /// The exchange's stream, once there is one for the driver to run.
    own_stream: Option<ServerControlEvent>,
    /// A TCP test waits for the master's connection until then, looking again at `next_accept`.
    accept_until: Option<Instant>,
    next_accept: Instant,
    /// The exchange's state, shared with its machine on the worker.
    exchange: Option<Arc<Mutex<SlaveExchange>>>,
    /// The TCP test's connection (the worker's is a copy) and its place under the caps, held
    /// until the session ends.
    connection: Option<(TcpStream, ConnectionSlot)>,
    /// When the exchange began (the ACK's turn), for the records' time.
    started: Instant,
    data_path: Option<SocketAddr>,
    /// Connections the session turned away while it waited for its master's.
    refused: u64,
    log: Option<SlaveLog>,
}

impl SlaveSession {
    /// A session for `master`'s request `req`, answered `ack` once admitted, on the data
    /// port's sockets.
    pub(crate) fn new(
        req: Request,
        ack: wire::Reply,
        spec: TestSpec,
        master: SocketAddr,
        ctx: PeerContext,
        udp: Arc<UdpSocket>,
        tcp: Arc<TcpListener>,
    ) -> Self {
        let now = Instant::now();
        Self {
            req,
            ack,
            spec,
            master,
            ctx,
            udp,
            tcp,
            phase: SessionPhase::new(Phase::Asked),
            requested: false,
            out: Vec::new(),
            own_stream: None,
            accept_until: None,
            next_accept: now,
            exchange: None,
            connection: None,
            started: now,
            data_path: None,
            refused: 0,
            log: None,
        }
    }

    fn kind(&self) -> Kind {
        self.req.kind().unwrap_or(Kind::UdpEcho)
    }

    /// Whether data from `ip` belongs to this test: its master's address, or one
    /// `--allow-data-from` pairs with it.
    fn data_from(&self, ip: IpAddr) -> bool {
        same_ip(ip, self.master.ip()) || self.ctx.data_allowed(self.master.ip(), ip)
    }

    /// Hands the exchange to a lock-step worker over `target` (the data port's UDP socket, or
    /// the master's connection).
    fn start_exchange(&mut self, target: OwnTarget, udp_to: Option<SocketAddr>) {
        let Some(test) = SlaveTest::new(self.req) else {
            self.end(SlaveLog { streams: Vec::new(), data_path: None, error: Some("not a test".into()) });
            return;
        };
        let kind = self.kind();
        // Every datagram the slave sends, counted as the data plane's senders count theirs
        // (refused sends as send errors); only UDP_SEND's are paced.
        let rate = (kind == Kind::UdpSend).then_some(UDP_SEND_RATE);
        let pacer = kind.is_udp().then(|| crate::dataplane::DatagramPacer::new(rate, Instant::now()));
        let exchange =
            Arc::new(Mutex::new(SlaveExchange { test, pacer, data_send: false, finished: false, refused: 0 }));
        self.exchange = Some(exchange.clone());
        let machine = SlaveMachine {
            exchange,
            ctx: self.ctx.clone(),
            master: self.master,
            udp_to,
            // The stock master binds its data port only once it has the ACK: datagrams sent at
            // once meet a closed port (all of them, from a fast slave; the stock master then
            // waits 3 s for each of the buffers it never gets).
            head_start: (kind == Kind::UdpSend).then_some(UDP_SEND_HEAD_START),
        };
        self.own_stream = Some(ServerControlEvent::OwnStream(Box::new(OwnStream {
            id: 1,
            target,
            run: self.spec.clone(),
            datagrams: DatagramFormatKind::Native,
            purpose: "nc_test's data exchange",
            lock_step: Some(LockStepSlot::new(Box::new(machine))),
        })));
    }

    /// One look for the master's TCP connection; the data port's listener does not block.
    fn accept(&mut self, now: Instant) {
        loop {
            match self.tcp.accept() {
                Ok((s, peer)) if self.data_from(peer.ip()) => match self.ctx.connection(peer.ip()) {
                    Ok(slot) => {
                        let worker = s.set_nonblocking(false).and_then(|()| s.try_clone());
                        let Ok(worker) = worker else { continue };
                        let _ = s.set_nodelay(true);
                        self.data_path = Some(peer);
                        self.connection = Some((s, slot));
                        self.accept_until = None;
                        self.start_exchange(OwnTarget::Tcp(worker), None);
                        return;
                    }
                    Err(limit) => {
                        self.ctx.log(ServerLog::Rejected { peer, reason: limit.to_string() });
                        self.refused += 1;
                    }
                },
                Ok(_) => self.refused += 1,
                Err(_) => break,
            }
        }
        if self.accept_until.is_some_and(|until| now >= until) {
            self.accept_until = None;
            let error = format!("the master did not connect to the data port within {} s", ACCEPT_WAIT.as_secs());
            self.end(SlaveLog { streams: Vec::new(), data_path: None, error: Some(error) });
        } else {
            self.next_accept = now + ACCEPT_POLL;
        }
    }

    fn end(&mut self, log: SlaveLog) {
        self.log = Some(log);
        self.phase.set(Phase::Done);
    }

    /// The slave's records from what its machine counted, and why the test ended early.
    fn counted(&self, exchange: &SlaveExchange, error: Option<String>) -> SlaveLog {
        let kind = self.kind();
        let (test, r) = (&exchange.test, exchange.test.results());
        let td = u64::from(self.req.buflen) + wire::DATA_HEADER_LEN as u64;
        let secs = self.started.elapsed().as_secs_f64();
        let mut streams = Vec::new();
        if kind.slave_receives() {
            let mut rec = record(1, Flow::Up, Role::Receiver, Endpoint::Server, u64::from(r.nrecvd), td, secs);
            if kind.is_udp() {
                rec.udp_received = Some(UdpReceived {
                    packets: u64::from(r.nrecvd),
                    out_of_order: u64::from(test.seq_errors()),
                    ..Default::default()
                });
            }
            streams.push(rec);
        }
        if kind.slave_sends() {
            let mut rec = record(2, Flow::Down, Role::Sender, Endpoint::Server, u64::from(r.nsent), td, secs);
            if let Some(figures) = exchange.pacer.as_ref().map(|p| p.figures()) {
                rec.udp_sent = Some(UdpSent { packets: u64::from(r.nsent), ..figures });
            }
            streams.push(rec);
        }
        let error = error.or_else(|| {
            (test.lost() > wire::MAX_ERRORS).then(|| format!("gave up after {} receive timeouts", test.lost()))
        });
        SlaveLog { streams, data_path: self.data_path, error }
    }

    /// An exchange cut short (the server's stop, its --max-duration): the master gets the
    /// counts so far rather than a 21 s wait for nothing.
    fn send_results_so_far(&mut self, results: &[u8]) {
        match (&self.connection, self.data_path) {
            (Some((conn, _)), _) => {
                // The worker is done with the connection; a full one is not waited for.
                let _ = conn.set_nonblocking(true);
                let _ = (&*conn).write_all(results);
            }
            (None, Some(to)) => {
                let _ = self.udp.send_to(results, to);
            }
            (None, None) => {}
        }
    }
}

impl ServerControl for SlaveSession {
    fn protocol(&self) -> &'static str {
        "nc-test"
    }
    fn handle_input(&mut self, _now: Instant, _bytes: &[u8]) -> Result<(), ProtocolError> {
        // The listener read the request; nothing else comes on this link.
        Ok(())
    }
    fn handle_eof(&mut self, _now: Instant) -> Result<(), ProtocolError> {
        Ok(())
    }
    fn poll_output(&mut self, out: &mut Vec<u8>) {
        out.append(&mut self.out);
    }
    fn poll_event(&mut self) -> Option<ServerControlEvent> {
        if let Some(own) = self.own_stream.take() {
            return Some(own);
        }
        if std::mem::replace(&mut self.requested, true) {
            return None;
        }
        Some(ServerControlEvent::Requested(Box::new(ServerRequest {
            spec: self.spec.clone(),
            // Measured by the session: no workers' streams.
            run: Some(TestSpec { streams: 0, ..self.spec.clone() }),
            companion: None,
            auth: None,
            peer_software: None,
            own_data_port: None,
        })))
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.accept_until.map(|_| self.next_accept)
    }
    fn handle_timeout(&mut self, now: Instant) -> Result<(), ProtocolError> {
        if self.accept_until.is_some() && now >= self.next_accept {
            self.accept(now);
        }
        Ok(())
    }
    fn admitted(&mut self, now: Instant, _admission: &Admission<'_>) {
        // The ACK goes out before the exchange's worker starts (at the driver's next turn).
        self.out = self.ack.encode().to_vec();
        self.started = now;
        self.phase.set(Phase::Running);
        if self.kind().is_udp() {
            let to = SocketAddr::new(self.master.ip(), self.req.master_port as u16);
            self.data_path = Some(to);
            match self.udp.try_clone() {
                Ok(socket) => self.start_exchange(OwnTarget::Udp(socket), Some(to)),
                Err(e) => self.end(SlaveLog {
                    streams: Vec::new(),
                    data_path: None,
                    error: Some(format!("the data port's socket: {e}")),
                }),
            }
        } else {
            // The master connects 3 s after the ACK.
            self.accept_until = Some(now + ACCEPT_WAIT);
            self.next_accept = now;
        }
    }
    fn turned_away(&mut self, _now: Instant, _why: &Refusal) {
        // The stock master prints the NAK and goes on; the log says why.
        self.out = wire::Reply::nak(self.req.seq, wire::NAK_BAD_REQUEST).encode().to_vec();
        self.phase.set(Phase::Done);
    }
    fn streams_connected(&mut self, _now: Instant) {}
    fn datagrams(&self) -> DatagramFormatKind {
        DatagramFormatKind::Native
    }
    fn own_stream_done(&mut self, _now: Instant, _record: StreamRecord, error: Option<String>) {
        // The worker's record counts bytes; the test's figures are the machine's buffers.
        let Some(exchange) = self.exchange.take() else { return };
        let exchange = exchange.lock().unwrap_or_else(|p| p.into_inner());
        if !exchange.finished {
            self.send_results_so_far(&exchange.test.results().encode());
        }
        let log = self.counted(&exchange, error);
        self.refused += exchange.refused;
        drop(exchange);
        self.end(log);
    }
    fn phase(&self) -> Option<&SessionPhase> {
        Some(&self.phase)
    }
    fn measures_itself(&self) -> bool {
        true
    }
    fn complete_records(
        &mut self,
        _now: Instant,
        records: &mut Vec<StreamRecord>,
        data_paths: &mut Vec<(u32, SocketAddr)>,
    ) -> Option<String> {
        let log = self.log.as_mut()?;
        records.append(&mut log.streams);
        data_paths.extend(log.data_path.map(|p| (1, p)));
        log.error.clone()
    }
    fn refused_data(&self) -> u64 {
        // (The exchange's own count joins the session's once its worker is done.)
        let running = self.exchange.as_ref().map_or(0, |e| e.lock().unwrap_or_else(|p| p.into_inner()).refused);
        self.refused + running
    }
}

/// One test's exchange as the slave's machine and its session share it.
struct SlaveExchange {
    test: SlaveTest,
    /// UDP: the data plane's pacer of the slave's data sends (paced in UDP_SEND only), which
    /// counts them as its UDP senders count theirs.
    pacer: Option<crate::dataplane::DatagramPacer>,
    /// The send under way is a data buffer (the pacer's), not the results record.
    data_send: bool,
    /// The machine reached its end (the results record is out).
    finished: bool,
    /// Datagrams that came to the data port from elsewhere during the test.
    refused: u64,
}

/// The wire's `SlaveTest` as the lock-step worker runs it (crate::dataplane::LockStep): over
/// the data port's shared UDP socket it names the master's data port as its peer and takes
/// datagrams only from the master (the reflection guard's inbound budget first); its answers
/// go out within the guard's budget for the master's address.
struct SlaveMachine {
    exchange: Arc<Mutex<SlaveExchange>>,
    ctx: PeerContext,
    /// The master's control address.
    master: SocketAddr,
    /// UDP: the master's data port.
    udp_to: Option<SocketAddr>,
    /// UDP_SEND: the wait before the first datagram.
    head_start: Option<Duration>,
}

impl SlaveMachine {
    fn exchange(&self) -> std::sync::MutexGuard<'_, SlaveExchange> {
        self.exchange.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl crate::dataplane::LockStep for SlaveMachine {
    fn next(&mut self, _now: Instant) -> crate::dataplane::LockStepAction {
        use crate::dataplane::LockStepAction as A;
        if let Some(wait) = self.head_start.take() {
            return A::Pause(wait);
        }
        let (to, ctx) = (self.udp_to, &self.ctx);
        let mut exchange = self.exchange.lock().unwrap_or_else(|p| p.into_inner());
        let udp_send = exchange.test.request().kind() == Some(Kind::UdpSend);
        loop {
            match exchange.test.next_step() {
                Step::Done => {
                    exchange.finished = true;
                    return A::Done;
                }
                Step::Print(_) | Step::Pause(_) => {}
                Step::Recv { len, timeout } => return A::Recv { len, timeout },
                // Echoes and the results record answer what the master sent: within the
                // guard's budget for an address outside --allow-peers (UDP_SEND was admitted
                // only inside it).
                Step::Send(b) if to.is_some_and(|to| !udp_send && !ctx.may_answer("nc-test", to, b.len())) => {
                    exchange.test.send_failed();
                }
                Step::Send(b) => {
                    exchange.data_send = b.len() != wire::RESULTS_LEN;
                    if exchange.data_send {
                        if let Some(pacer) = exchange.pacer.as_mut() {
                            pacer.wait(|| ctx.stop().is_raised());
                        }
                    }
                    return A::Send(b);
                }
            }
        }
    }
    fn received(&mut self, data: Option<&[u8]>, _now: Instant) {
        self.exchange().test.received(data);
    }
    fn sent(&mut self, outcome: io::Result<usize>) {
        let mut exchange = self.exchange();
        if outcome.is_err() {
            exchange.test.send_failed();
        }
        if std::mem::take(&mut exchange.data_send) {
            // (A send that every later one would fail as well is the state machine's to
            // count, as a lost buffer.)
            if let Some(pacer) = exchange.pacer.as_mut() {
                let _ = pacer.record(outcome);
            }
        }
    }
    fn peer(&self) -> Option<SocketAddr> {
        self.udp_to
    }
    fn accepts(&mut self, from: SocketAddr, len: usize) -> bool {
        let master = self.master.ip();
        let ours = self.ctx.inbound("nc-test", from, len)
            && (same_ip(from.ip(), master) || self.ctx.data_allowed(master, from.ip()));
        if !ours {
            self.exchange().refused += 1;
        }
        ours
    }
}
