//! netperf's control protocol, server side, sans-IO: netchar answering an unmodified netperf
//! (2.5 and later, default build) as netserver does.
//!
//! ```text
//! C→S DO_OMNI request (656)            → Event::Test; the driver binds the data socket
//!                                        (TCP: and listens) and says `listening(port, buffers)`
//!                                      S→C OMNI_RESPONSE (656): sizes, buffers, data port
//! data: netperf connects / sends; the driver runs the test and ends it on netperf's end
//! (EOF, an empty datagram) or on Event::TimeUp (the server's timer), then says `finished`
//!                                      S→C results (656, unasked)
//! C→S the next request (`-i` iterations) or EOF
//! ```
//!
//! Other requests get netserver's answers: DEBUG_ON/OFF → DEBUG_OK, CPU_CALIBRATE → a rate of
//! 0 and no CPU count, DO_SYSINFO → ",Deprecated" four times, PASSPHRASE → nothing, and every
//! other type (the classic DO_TCP_STREAM and friends of a netperf built without OMNI, TCP_CC,
//! SCTP, ...) → errno 998 "unknown test", after which netserver keeps reading requests.
//! An OMNI test netchar does not run is refused the way netserver reports a failed setup: the
//! response with an errno, then the end of the connection.

use super::figures::ServerCounts;
use super::omni::{flag, res, rsp, OmniRequest};
use super::{code, errno, Family, Message, MessageBuffer, ResponseImage, TestEnd, TestKind, MESSAGE_LEN, PAD_TIME};
use crate::ProtocolError;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How long a request may take to come (netserver waits for ever; the driver's idle limit is
/// usually shorter).
const REQUEST_WAIT: Duration = Duration::from_secs(60);
/// The largest message size (bytes per send or recv) this server takes: it sizes the driver's
/// buffers; netperf's own default sends are a socket buffer (a few hundred KiB at most).
pub const MAX_MESSAGE_SIZE: i32 = 16 << 20;
/// errno EINVAL, for sizes netserver would divide by or allocate without bound.
const EINVAL: i32 = 22;
/// The largest UDP payload (netperf's `UDP_LENGTH_MAX`).
const UDP_LENGTH_MAX: i32 = 0xFFFF - 28;

/// A test netperf asked for, as the driver needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct TestRequest {
    /// Which test.
    pub kind: TestKind,
    /// The request as sent.
    pub omni: OmniRequest,
}

impl TestRequest {
    /// How the test ends.
    pub fn end(&self) -> TestEnd {
        self.omni.end()
    }

    /// The data socket's family.
    pub fn family(&self) -> Family {
        self.omni.family().unwrap_or(Family::V4)
    }

    /// The port to bind (`netperf -- -P ,N`); 0 for any.
    pub fn port(&self) -> u16 {
        self.omni.data_port as u16
    }

    /// SO_SNDBUF to set, if netperf asked for one (`-S N,`).
    pub fn send_buffer(&self) -> Option<u32> {
        u32::try_from(self.omni.send_buf_size).ok().filter(|&n| n > 0)
    }

    /// SO_RCVBUF to set (`-S ,N`).
    pub fn recv_buffer(&self) -> Option<u32> {
        u32::try_from(self.omni.recv_buf_size).ok().filter(|&n| n > 0)
    }

    /// TCP_NODELAY on the data socket (`-D`).
    pub fn nodelay(&self) -> bool {
        self.omni.flags & flag::NO_DELAY != 0
    }

    /// netperf asks for the server's CPU figures (`-C`).
    pub fn wants_cpu(&self) -> bool {
        self.omni.flags & flag::MEASURE_CPU != 0
    }

    /// The CPU to bind to (`-T ,N`).
    pub fn affinity(&self) -> Option<u32> {
        u32::try_from(self.omni.affinity).ok()
    }

    /// The requested congestion control (`-K ,name`).
    pub fn congestion_control(&self) -> Option<String> {
        self.omni.congestion_control()
    }

    /// Whether netperf sends to the server: then netserver pads its timer by [`PAD_TIME`] so
    /// that netperf's own end comes first.
    fn padded(&self) -> bool {
        self.kind != TestKind::TcpMaerts && self.omni.test_length > 0
    }

    /// The server's own timer: the test's length, plus [`PAD_TIME`] unless the server alone
    /// sends; none for tests that end by a count, or by netperf (length 0).
    pub fn server_timer(&self) -> Option<Duration> {
        match self.end() {
            TestEnd::Seconds(0) | TestEnd::Units(_) => None,
            TestEnd::Seconds(s) => {
                Some(Duration::from_secs(u64::from(s)) + if self.padded() { PAD_TIME } else { Duration::ZERO })
            }
        }
    }

    /// The bytes per send and per recv (and the buffer rings) netserver uses with a socket
    /// whose buffers came out as `send_buf` and `recv_buf` (SO_SNDBUF, SO_RCVBUF).
    pub fn sizes(&self, send_buf: i32, recv_buf: i32) -> Sizes {
        let r = &self.omni;
        let ring = |buf: i32, size: i32, asked: i32| {
            if asked != 0 {
                asked
            } else {
                // netserver: buf / size + 1, and never a ring of one (a size of 0 or less,
                // refused before a test starts, makes the smallest ring here).
                buf.checked_div(size).unwrap_or(0).saturating_add(1).max(2)
            }
        };
        let mut s = Sizes {
            send_size: r.send_size,
            send_width: r.send_width,
            recv_size: r.receive_size,
            recv_width: r.recv_width,
        };
        let (xmit, recv) =
            (self.kind != TestKind::TcpStream && self.kind != TestKind::UdpStream, self.kind != TestKind::TcpMaerts);
        if xmit {
            if self.kind.is_rr() {
                s.send_size = r.response_size;
                s.send_width = if r.send_width == 0 { 1 } else { r.send_width };
            } else {
                s.send_size = match r.send_size {
                    -1 if send_buf > 0 && self.kind.is_udp() => send_buf.min(UDP_LENGTH_MAX),
                    -1 if send_buf > 0 => send_buf,
                    -1 => 4096,
                    n => n,
                };
                s.send_width = ring(send_buf, s.send_size, r.send_width);
            }
        }
        if recv {
            if self.kind.is_rr() {
                s.recv_size = r.request_size;
                s.recv_width = if r.recv_width == 0 { 1 } else { r.recv_width };
            } else {
                s.recv_size = match r.receive_size {
                    -1 if recv_buf > 0 => recv_buf,
                    -1 => 4096,
                    n => n,
                };
                s.recv_width = ring(recv_buf, s.recv_size, r.recv_width);
            }
        }
        s
    }

    /// A size netserver would divide by zero with or allocate without bound, if any.
    fn bad_size(&self) -> Option<String> {
        let r = &self.omni;
        let check = |what: &str, n: i32, default_ok: bool| {
            let ok = (default_ok && n == -1) || (1..=MAX_MESSAGE_SIZE).contains(&n);
            (!ok).then(|| format!("{what} {n} (1 to {MAX_MESSAGE_SIZE}{})", if default_ok { ", or -1" } else { "" }))
        };
        match self.kind {
            TestKind::TcpStream | TestKind::UdpStream => check("receive size", r.receive_size, true),
            TestKind::TcpMaerts => check("send size", r.send_size, true),
            _ => {
                check("request size", r.request_size, false).or_else(|| check("response size", r.response_size, false))
            }
        }
    }
}

/// What netserver sizes its data plane by ([`TestRequest::sizes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    /// Bytes per send() (the response size of request/response tests).
    pub send_size: i32,
    /// Send buffers in the ring.
    pub send_width: i32,
    /// Bytes per recv() (the request size of request/response tests, read whole).
    pub recv_size: i32,
    /// Receive buffers in the ring.
    pub recv_width: i32,
}

/// What the driver set up for a test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DataSetup {
    /// The port the data socket is bound to.
    pub port: u16,
    /// SO_SNDBUF as getsockopt reports it after the requested size was applied (−1 unknown).
    pub send_buf_size: i32,
    /// SO_RCVBUF likewise.
    pub recv_buf_size: i32,
    /// `Some(rate)` when this server measures its CPU for a test that asks (`-C`): netserver
    /// with /proc/stat reports its tick rate, 100. `None`: the response says the CPU is not
    /// measured, and netperf prints no remote CPU figures.
    pub cpu_rate: Option<f32>,
}

/// What the driver must do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A test: bind its data socket (TCP: listen), then [`Server::listening`] or
    /// [`Server::refuse`].
    Test(Box<TestRequest>),
    /// The server's timer ran out ([`TestRequest::server_timer`]): end the data phase now (close
    /// the data socket; TCP_MAERTS ends so, and TCP_CRR always), then [`Server::finished`].
    TimeUp,
    /// A request netchar answers as netserver answers an unknown test (errno 998); the
    /// connection stays up. The type, for the log.
    Unknown(i32),
    /// An OMNI test netchar does not run, refused (the reason, for the log); the session is
    /// over.
    Refused(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    AwaitRequest,
    AwaitSetup,
    Running,
    Stopping,
    Done,
}

impl State {
    fn describe(self) -> &'static str {
        match self {
            Self::AwaitRequest => "waiting for netperf's request",
            Self::AwaitSetup => "setting up the data socket",
            Self::Running | Self::Stopping => "the test was running",
            Self::Done => "the session was over",
        }
    }
}

/// One netperf control connection, served.
#[derive(Debug)]
pub struct Server {
    state: State,
    input: MessageBuffer,
    out: Vec<u8>,
    events: VecDeque<Event>,
    image: ResponseImage,
    test: Option<TestRequest>,
    started: Instant,
    deadline: Option<Instant>,
    timed_out: bool,
    measured: bool,
}

impl Server {
    /// A session on a control connection just accepted (netperf speaks first).
    pub fn new(now: Instant) -> Self {
        Self {
            state: State::AwaitRequest,
            input: MessageBuffer::default(),
            out: Vec::new(),
            events: VecDeque::new(),
            image: ResponseImage::default(),
            test: None,
            started: now,
            deadline: Some(now + REQUEST_WAIT),
            timed_out: false,
            measured: false,
        }
    }

    /// Feeds bytes read from the control connection.
    pub fn handle_input(&mut self, now: Instant, bytes: &[u8]) -> Result<(), ProtocolError> {
        if self.state == State::Done {
            return Ok(());
        }
        // netperf sends one request and waits for its answers: two messages' worth while a
        // test runs is already more than it ever sends.
        if self.state != State::AwaitRequest && self.input.len() + bytes.len() > 2 * MESSAGE_LEN {
            return Err(self.fail(ProtocolError::Malformed(format!(
                "netperf sent {} bytes on the control connection while {}",
                self.input.len() + bytes.len(),
                self.state.describe()
            ))));
        }
        self.input.push(bytes);
        while self.state == State::AwaitRequest {
            let Some(msg) = self.input.take() else { break };
            self.on_request(now, msg);
        }
        Ok(())
    }

    fn on_request(&mut self, now: Instant, msg: Message) {
        self.deadline = Some(now + REQUEST_WAIT);
        match msg.kind {
            code::DO_OMNI => self.on_omni(&msg),
            code::PASSPHRASE => {}
            code::DEBUG_ON | code::DEBUG_OFF => {
                self.image.set_kind(code::DEBUG_OK);
                self.send(None);
            }
            code::CPU_CALIBRATE => {
                // netserver bcopies the rate and its CPU count into the first two words; this
                // server calibrates nothing.
                self.image.set_kind(code::CPU_CALIBRATE);
                self.image.set_word(0, 0f32.to_bits());
                self.image.set_word(1, 0);
                self.send(None);
            }
            code::DO_SYSINFO => {
                self.image.set_kind(code::SYSINFO_RESPONSE);
                self.image.set_bytes(0, b",Deprecated,Deprecated,Deprecated,Deprecated\0");
                self.send(Some(0));
            }
            other => {
                self.image.set_errno(errno::UNKNOWN_REQUEST);
                self.send(None);
                self.events.push_back(Event::Unknown(other));
            }
        }
    }

    fn on_omni(&mut self, msg: &Message) {
        let omni = OmniRequest::decode(msg);
        // netserver sets the type first: a refusal goes out as OMNI_RESPONSE with its errno.
        self.image.set_kind(code::OMNI_RESPONSE);
        let kind = match omni.kind() {
            Ok(k) => k,
            Err(why) => return self.refuse_because(errno::NOT_SUPPORTED, why),
        };
        if omni.family().is_none() {
            return self.refuse_because(
                97,
                format!("netperf asked for address family {} (netchar runs 4 and 6)", omni.ipfamily),
            );
        }
        if omni.data_port > u32::from(u16::MAX) {
            return self.refuse_because(EINVAL, format!("netperf asked for data port {}", omni.data_port));
        }
        let test = TestRequest { kind, omni };
        if let Some(why) = test.bad_size() {
            return self.refuse_because(EINVAL, format!("netperf's {} asked for {why}", kind.name()));
        }
        self.test = Some(test.clone());
        self.events.push_back(Event::Test(Box::new(test)));
        self.state = State::AwaitSetup;
        self.deadline = None;
    }

    fn refuse_because(&mut self, errno: i32, why: String) {
        self.image.set_errno(errno);
        self.send(None);
        self.events.push_back(Event::Refused(why));
        self.state = State::Done;
    }

    fn send(&mut self, converted: Option<usize>) {
        let bytes = self.image.emit(converted);
        self.out.extend_from_slice(&bytes);
    }

    /// The data socket is bound (and listening): the response goes out and the test runs from
    /// `now`.
    pub fn listening(&mut self, now: Instant, setup: DataSetup) {
        if self.state != State::AwaitSetup {
            return;
        }
        let Some(test) = self.test.clone() else { return };
        let r = &test.omni;
        let sizes = test.sizes(setup.send_buf_size, setup.recv_buf_size);
        let img = &mut self.image;
        // In netserver's order: its own fields, then what the socket gave.
        img.set_word(rsp::SEND_SIZE, sizes.send_size as u32);
        img.set_word(rsp::SEND_WIDTH, sizes.send_width as u32);
        img.set_word(rsp::SOCKET_PRIO, r.socket_prio as u32);
        img.set_word(rsp::SOCKET_TOS, r.socket_tos as u32);
        img.set_word(rsp::RECEIVE_SIZE, sizes.recv_size as u32);
        img.set_word(rsp::RECV_WIDTH, sizes.recv_width as u32);
        img.set_word(rsp::DATA_PORT, u32::from(setup.port));
        img.set_errno(0);
        // Only the two bits are touched; the rest of the word is what the buffer held.
        let mut flags = img.word(rsp::FLAGS) & !flag::MEASURE_CPU;
        let mut rate = 0f32;
        self.measured = false;
        if let (true, Some(r)) = (test.wants_cpu(), setup.cpu_rate) {
            flags |= flag::MEASURE_CPU;
            rate = r;
            self.measured = true;
        }
        if test.nodelay() {
            flags |= flag::NO_DELAY;
        } else {
            flags &= !flag::NO_DELAY;
        }
        img.set_word(rsp::CPU_RATE, rate.to_bits());
        img.set_word(rsp::SEND_BUF_SIZE, setup.send_buf_size as u32);
        img.set_word(rsp::RECV_BUF_SIZE, setup.recv_buf_size as u32);
        img.set_word(rsp::FLAGS, flags);
        img.set_word(rsp::SO_RCVAVOID, r.so_rcvavoid);
        img.set_word(rsp::SO_SNDAVOID, r.so_sndavoid);
        // A default netserver build has no pacing (WANT_INTERVALS): it reports none.
        img.set_word(rsp::INTERVAL_USECS, 0);
        img.set_word(rsp::INTERVAL_BURST, 0);
        self.send(Some(super::omni::RESPONSE_CONVERTED));
        self.state = State::Running;
        self.started = now;
        self.timed_out = false;
        self.deadline = test.server_timer().map(|t| now + t);
    }

    /// The test cannot run here: the response carries `errno` ([`errno`]), netperf prints
    /// "netperf: remote error N" and its strerror, and the session is over.
    pub fn refuse(&mut self, errno: i32) {
        if self.state == State::AwaitSetup {
            self.image.set_errno(errno);
            self.send(None);
            self.state = State::Done;
        }
    }

    /// The data phase is over and its sockets closed: the results go out (elapsed time from
    /// the response to `now`, less [`PAD_TIME`] when the server's timer ended a padded test,
    /// as netserver reports it). The session then waits for the next request.
    pub fn finished(&mut self, now: Instant, counts: &ServerCounts) {
        if !matches!(self.state, State::Running | State::Stopping) {
            return;
        }
        let Some(test) = self.test.take() else { return };
        let mut elapsed = now.saturating_duration_since(self.started).as_secs_f64();
        if self.timed_out && test.padded() {
            elapsed -= PAD_TIME.as_secs_f64();
        }
        let img = &mut self.image;
        // netserver reads the congestion control and its end-of-test sizes only from a data
        // connection still open at the end: TCP streams and TCP_RR, not TCP_CRR (each
        // connection is closed) nor UDP (never connected).
        let open_at_end = !test.kind.is_udp() && test.kind != TestKind::TcpCrr;
        if open_at_end {
            let name = match counts.congestion_control.as_deref() {
                Some(n) if test.omni.flags & flag::ROUTING_ALLOWED != 0 => super::omni::text_field::<16>(n),
                _ => [0; 16],
            };
            img.set_bytes(res::CONG_CONTROL_AT, &name);
        }
        let retrans = match counts.retransmits {
            Some(n) if open_at_end => n.min(i32::MAX as u32),
            _ => u32::MAX,
        };
        img.set_word(res::SEND_CALLS, counts.send_calls);
        img.set_word(res::BYTES_RECEIVED_LO, counts.bytes_received as u32);
        img.set_word(res::BYTES_RECEIVED_HI, (counts.bytes_received >> 32) as u32);
        img.set_word(res::RECV_BUF_SIZE, counts.recv_buf_size as u32);
        img.set_word(res::RECV_CALLS, counts.recv_calls);
        img.set_word(res::BYTES_SENT_LO, counts.bytes_sent as u32);
        img.set_word(res::BYTES_SENT_HI, (counts.bytes_sent >> 32) as u32);
        img.set_word(res::SEND_BUF_SIZE, counts.send_buf_size as u32);
        img.set_word(res::TRANS_RECEIVED, counts.transactions);
        img.set_word(res::ELAPSED_TIME, (elapsed as f32).to_bits());
        img.set_word(res::TRANSPORT_RETRANS, retrans);
        img.set_word(res::CPU_METHOD, counts.cpu_method);
        img.set_word(res::NUM_CPUS, counts.cpus);
        if let (true, Some(c)) = (self.measured, counts.cpu) {
            for (w, v) in [
                (res::CPU_UTIL, c.util),
                (res::CPU_PERCENT_USER, c.user),
                (res::CPU_PERCENT_SYSTEM, c.system),
                (res::CPU_PERCENT_IOWAIT, c.iowait),
                (res::CPU_PERCENT_IRQ, c.irq),
                (res::CPU_PERCENT_SWINTR, c.softirq),
                (res::PEAK_CPU_UTIL, c.peak_util),
            ] {
                img.set_word(w, v.to_bits());
            }
            img.set_word(res::PEAK_CPU_ID, c.peak_cpu as u32);
        }
        self.send(Some(super::omni::RESULTS_CONVERTED));
        self.state = State::AwaitRequest;
        self.deadline = Some(now + REQUEST_WAIT);
        // A request that came early (it cannot, from netperf) is read now.
        while self.state == State::AwaitRequest {
            let Some(msg) = self.input.take() else { break };
            self.on_request(now, msg);
        }
    }

    /// netperf closed the control connection: the normal end after its last results, an error
    /// before.
    pub fn handle_eof(&mut self, _now: Instant) -> Result<(), ProtocolError> {
        match self.state {
            State::Done => Ok(()),
            State::AwaitRequest if self.input.len() == 0 => {
                self.state = State::Done;
                Ok(())
            }
            State::AwaitRequest => Err(self.fail(ProtocolError::Peer(format!(
                "netperf closed the control connection after {} bytes of a {MESSAGE_LEN}-byte request",
                self.input.len()
            )))),
            s => {
                Err(self
                    .fail(ProtocolError::Peer(format!("netperf closed the control connection while {}", s.describe()))))
            }
        }
    }

    /// Moves queued bytes for the control connection into `out`.
    pub fn poll_output(&mut self, out: &mut Vec<u8>) {
        out.append(&mut self.out);
    }

    /// The next thing the driver must do.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When [`Self::handle_timeout`] must be called next: the request's deadline, or the
    /// server's timer while a test runs.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            State::AwaitRequest | State::Running => self.deadline,
            _ => None,
        }
    }

    /// The server's timer ends a running test ([`Event::TimeUp`]); a request that does not come
    /// fails the session.
    pub fn handle_timeout(&mut self, now: Instant) -> Result<(), ProtocolError> {
        match (self.state, self.deadline) {
            (State::Running, Some(t)) if now >= t => {
                self.timed_out = true;
                self.state = State::Stopping;
                self.events.push_back(Event::TimeUp);
                Ok(())
            }
            (State::AwaitRequest, Some(t)) if now >= t => Err(self
                .fail(ProtocolError::Timeout(format!("netperf sent no request within {} s", REQUEST_WAIT.as_secs())))),
            _ => Ok(()),
        }
    }

    /// The test in progress, if any.
    pub fn test(&self) -> Option<&TestRequest> {
        self.test.as_ref()
    }

    /// True while a test's data phase runs (from the response to the results).
    pub fn is_running(&self) -> bool {
        matches!(self.state, State::Running | State::Stopping)
    }

    /// True once the session is over.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    fn fail(&mut self, e: ProtocolError) -> ProtocolError {
        self.state = State::Done;
        self.input.clear();
        e
    }
}

#[cfg(test)]
mod tests {
    use super::super::client::{Client, Event as ClientEvent, TestParams};
    use super::*;

    fn request_bytes(kind: TestKind) -> Vec<u8> {
        let mut c = Client::new(Instant::now(), TestParams::new(kind, TestEnd::Seconds(1))).unwrap();
        let mut out = Vec::new();
        c.poll_output(&mut out);
        out
    }

    fn setup(port: u16) -> DataSetup {
        DataSetup { port, send_buf_size: 16384, recv_buf_size: 131072, cpu_rate: None }
    }

    #[test]
    fn a_stream_test_from_request_to_results() {
        let now = Instant::now();
        let mut s = Server::new(now);
        let req = request_bytes(TestKind::TcpStream);
        s.handle_input(now, &req[..100]).unwrap();
        assert_eq!(s.poll_event(), None);
        s.handle_input(now, &req[100..]).unwrap();
        let Some(Event::Test(t)) = s.poll_event() else { panic!("no test") };
        assert_eq!(t.kind, TestKind::TcpStream);
        assert_eq!(t.server_timer(), Some(Duration::from_secs(5)));
        assert_eq!(t.sizes(16384, 131072).recv_size, 131072);
        s.listening(now, setup(40000));
        let mut out = Vec::new();
        s.poll_output(&mut out);
        let rsp = super::super::omni::OmniResponse::decode(&Message::decode(&out).unwrap());
        assert_eq!((rsp.data_port, rsp.recv_buf_size, rsp.receive_size, rsp.recv_width), (40000, 131072, 131072, 2));
        assert_eq!(s.poll_timeout(), Some(now + Duration::from_secs(5)));
        let counts = ServerCounts { bytes_received: 1 << 33, recv_calls: 9, ..Default::default() };
        s.finished(now + Duration::from_millis(1500), &counts);
        out.clear();
        s.poll_output(&mut out);
        let m = Message::decode(&out).unwrap();
        assert_eq!(m.kind, 0x6200_0000, "netserver's results type goes out little-endian");
        let r = super::super::omni::OmniResults::decode(&m);
        assert_eq!((r.bytes_received, r.recv_calls, r.elapsed_time), (1 << 33, 9, 1.5));
        assert!(!s.is_running() && !s.is_done());
        s.handle_eof(now).unwrap();
        assert!(s.is_done());
    }

    #[test]
    fn the_timer_ends_a_crr_test_and_its_pad_is_not_counted() {
        let now = Instant::now();
        let mut s = Server::new(now);
        s.handle_input(now, &request_bytes(TestKind::TcpCrr)).unwrap();
        let Some(Event::Test(_)) = s.poll_event() else { panic!() };
        s.listening(now, setup(40001));
        let t = s.poll_timeout().unwrap();
        assert_eq!(t, now + Duration::from_secs(5));
        s.handle_timeout(t - Duration::from_millis(1)).unwrap();
        assert_eq!(s.poll_event(), None);
        s.handle_timeout(t).unwrap();
        assert_eq!(s.poll_event(), Some(Event::TimeUp));
        s.finished(
            t + Duration::from_millis(250),
            &ServerCounts { transactions: 7, retransmits: Some(3), ..Default::default() },
        );
        let mut out = Vec::new();
        s.poll_output(&mut out);
        let r = super::super::omni::OmniResults::decode(&Message::decode(&out[MESSAGE_LEN..]).unwrap());
        assert_eq!((r.trans_received, r.elapsed_time, r.transport_retrans), (7, 1.25, -1));
    }

    #[test]
    fn other_requests_get_netservers_answers() {
        let now = Instant::now();
        let mut s = Server::new(now);
        let mut out = Vec::new();
        for kind in [code::DO_TCP_STREAM, code::DEBUG_ON, code::PASSPHRASE, code::DO_SYSINFO, code::CPU_CALIBRATE] {
            s.handle_input(now, &Message::new(kind, -1).encode()).unwrap();
        }
        s.poll_output(&mut out);
        assert_eq!(out.len(), 4 * MESSAGE_LEN, "no answer to PASSPHRASE");
        let m: Vec<Message> = out.chunks(MESSAGE_LEN).map(|c| Message::decode(c).unwrap()).collect();
        assert_eq!((m[0].kind, m[0].status), (0, errno::UNKNOWN_REQUEST));
        assert_eq!(m[1].kind, code::DEBUG_OK);
        assert_eq!(m[2].kind, code::SYSINFO_RESPONSE);
        assert_eq!(super::super::omni::field_text(m[2].bytes(0, 64)), ",Deprecated,Deprecated,Deprecated,Deprecated");
        assert_eq!((m[3].kind, m[3].word(0)), (code::CPU_CALIBRATE, 0));
        assert_eq!(s.poll_event(), Some(Event::Unknown(code::DO_TCP_STREAM)));
        assert!(!s.is_done());
    }

    #[test]
    fn unsupported_tests_and_refusals_end_the_session() {
        let now = Instant::now();
        let mut req = Message::decode(&request_bytes(TestKind::TcpRr)).unwrap();
        req.set_word(super::super::omni::req::DIRECTION, 0);
        let mut s = Server::new(now);
        s.handle_input(now, &req.encode()).unwrap();
        let Some(Event::Refused(why)) = s.poll_event() else { panic!() };
        assert!(why.contains("does not run"), "{why}");
        let mut out = Vec::new();
        s.poll_output(&mut out);
        let m = Message::decode(&out).unwrap();
        assert_eq!((m.kind, m.status), (code::OMNI_RESPONSE, errno::NOT_SUPPORTED));
        assert!(s.is_done());

        let mut zero = Message::decode(&request_bytes(TestKind::TcpRr)).unwrap();
        zero.set_word(super::super::omni::req::REQUEST_SIZE, 0);
        let mut s = Server::new(now);
        s.handle_input(now, &zero.encode()).unwrap();
        assert!(matches!(s.poll_event(), Some(Event::Refused(w)) if w.contains("request size 0")));

        let mut s = Server::new(now);
        s.handle_input(now, &request_bytes(TestKind::UdpRr)).unwrap();
        s.poll_event();
        s.refuse(errno::BUSY);
        out.clear();
        s.poll_output(&mut out);
        assert_eq!(Message::decode(&out).unwrap().status, errno::BUSY);
        assert!(s.is_done());
    }

    #[test]
    fn floods_silence_and_early_eof() {
        let now = Instant::now();
        let mut s = Server::new(now);
        s.handle_input(now, &request_bytes(TestKind::TcpRr)).unwrap();
        s.poll_event();
        s.listening(now, setup(1));
        assert!(s.handle_input(now, &[0; 3 * MESSAGE_LEN]).is_err());
        let mut s = Server::new(now);
        let t = s.poll_timeout().unwrap();
        assert!(matches!(s.handle_timeout(t), Err(ProtocolError::Timeout(_))));
        let mut s = Server::new(now);
        s.handle_input(now, &[0; 10]).unwrap();
        assert!(s.handle_eof(now).unwrap_err().to_string().contains("10 bytes"));
    }

    #[test]
    fn netchar_client_and_server_agree() {
        let now = Instant::now();
        for kind in TestKind::ALL {
            let mut c = Client::new(now, TestParams::new(kind, TestEnd::Seconds(2))).unwrap();
            let mut s = Server::new(now);
            let mut wire = Vec::new();
            c.poll_output(&mut wire);
            s.handle_input(now, &wire).unwrap();
            let Some(Event::Test(t)) = s.poll_event() else { panic!("{kind:?}") };
            assert_eq!(t.kind, kind);
            s.listening(now, setup(5555));
            wire.clear();
            s.poll_output(&mut wire);
            c.handle_input(now, &wire).unwrap();
            let Some(ClientEvent::Connect { port, .. }) = c.poll_event() else { panic!("{kind:?}") };
            assert_eq!(port, 5555);
            s.finished(now + Duration::from_secs(2), &ServerCounts { bytes_received: 77, ..Default::default() });
            wire.clear();
            s.poll_output(&mut wire);
            c.handle_input(now, &wire).unwrap();
            let Some(ClientEvent::Results(f)) = c.poll_event() else { panic!("{kind:?}") };
            assert_eq!((f.counts.bytes_received, f.elapsed_seconds), (77, 2.0));
        }
    }
}
