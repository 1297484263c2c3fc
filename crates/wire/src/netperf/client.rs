//! netperf's control protocol, client side, sans-IO: netchar as netperf against an unmodified
//! netserver (2.5 and later, default build).
//!
//! ```text
//! [C→S PASSPHRASE (656), when the netserver was started with -Z]
//! C→S DO_OMNI request (656)
//!                                      S→C OMNI_RESPONSE (656) → Event::Connect(port)
//! data: the driver connects to the control peer's address at that port (UDP: sends there)
//! and runs the test; a timed test ends on Event::TimeUp, as netperf ends it:
//!   TCP_STREAM, TCP_RR: shutdown(SHUT_WR), read to EOF, close;
//!   UDP_STREAM, UDP_RR: three empty datagrams, close;
//!   TCP_MAERTS: netserver stops sending at its own timer and closes; read to EOF;
//!   TCP_CRR: stop opening connections; netserver's timer ends its side 4 s later.
//!                                      S→C results (656, unasked) → Event::Results
//! ```
//!
//! netserver sends the results as soon as its side of the data phase ends (at once for the
//! streams and TCP_RR, after its padded timer for TCP_CRR), so they may come before or after
//! the driver's own end; the session takes them in either order.

use super::figures::ServerFigures;
use super::omni::{self, direction, flag, socket_type, OmniRequest, OmniResponse, OmniResults};
use super::{code, errno, errno_text, hex_prefix, Family, Message, MessageBuffer, TestEnd, TestKind, MESSAGE_LEN};
use crate::ProtocolError;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How long the response to a request may take (netperf waits 120 s; a netserver answers at
/// once unless it calibrates a CPU looper).
const RESPONSE_WAIT: Duration = Duration::from_secs(30);
/// How long the results may take after this end stopped: netperf's own wait (`recv_response`,
/// 120 s), which covers netserver's padded timer.
const RESULTS_WAIT: Duration = Duration::from_secs(120);

/// A test as netchar asks a netserver for it: what netperf's options put in the request.
#[derive(Debug, Clone, PartialEq)]
pub struct TestParams {
    /// Which test.
    pub kind: TestKind,
    /// Time or count (`-l`); UDP tests end by time only.
    pub end: TestEnd,
    /// The data connection's family (netperf takes the control connection's).
    pub family: Family,
    /// Bytes per send() on the server (TCP_MAERTS; `-m ,N`); netserver's choice if `None`.
    pub remote_send_size: Option<u32>,
    /// Bytes per recv() on the server (TCP_STREAM, UDP_STREAM; `-M N,`).
    pub remote_recv_size: Option<u32>,
    /// Request bytes (request/response tests; `-r N,`; netperf's default 1).
    pub request_size: u32,
    /// Response bytes (`-r ,N`; default 1).
    pub response_size: u32,
    /// SO_SNDBUF on the server (`-S N,`).
    pub remote_send_buffer: Option<u32>,
    /// SO_RCVBUF on the server (`-S ,N`).
    pub remote_recv_buffer: Option<u32>,
    /// TCP_NODELAY on the server (`-D`).
    pub remote_nodelay: bool,
    /// Ask for the server's CPU figures (`-C`).
    pub remote_cpu: bool,
    /// The port the server should listen on (`-P ,N`), for firewalls.
    pub remote_data_port: Option<u16>,
    /// TCP_CONGESTION on the server (`-K ,name`; at most 15 bytes).
    pub remote_congestion: Option<String>,
    /// The CPU netserver should bind to (`-T ,N`).
    pub remote_affinity: Option<u32>,
    /// The TOS byte of netserver's data socket (`-Y ,TOS`; IPV6_TCLASS over IPv6).
    pub remote_tos: Option<u8>,
    /// The passphrase of a netserver started with `-Z` (at most 647 bytes).
    pub passphrase: Option<String>,
}

impl TestParams {
    /// A test with netperf's defaults.
    pub fn new(kind: TestKind, end: TestEnd) -> Self {
        Self {
            kind,
            end,
            family: Family::V4,
            remote_send_size: None,
            remote_recv_size: None,
            request_size: 1,
            response_size: 1,
            remote_send_buffer: None,
            remote_recv_buffer: None,
            remote_nodelay: false,
            remote_cpu: false,
            remote_data_port: None,
            remote_congestion: None,
            remote_affinity: None,
            remote_tos: None,
            passphrase: None,
        }
    }

    /// What netperf's request cannot carry, or netserver cannot run, if anything.
    pub fn check(&self) -> Result<(), String> {
        let i32_max = i32::MAX as u32;
        let name = self.kind.name();
        if self.kind.is_udp() && matches!(self.end, TestEnd::Units(_)) {
            return Err(format!("{name} ends by time only (a lost datagram would never be counted)"));
        }
        match self.end {
            TestEnd::Seconds(s) if s > i32_max => return Err(format!("{s} s exceeds netperf's test length")),
            TestEnd::Units(0) => return Err("a count of 0 would be an endless test".into()),
            TestEnd::Units(n) if n > i32_max => return Err(format!("a count of {n} exceeds netperf's test length")),
            _ => {}
        }
        if self.kind.is_rr() && !(1..=i32_max).contains(&self.request_size) {
            return Err(format!("{name} needs a request size of 1 to {i32_max}, not {}", self.request_size));
        }
        if self.kind.is_rr() && !(1..=i32_max).contains(&self.response_size) {
            return Err(format!("{name} needs a response size of 1 to {i32_max}, not {}", self.response_size));
        }
        let sizes = [self.remote_send_size, self.remote_recv_size, self.remote_send_buffer, self.remote_recv_buffer];
        if let Some(n) = sizes.into_iter().flatten().find(|n| !(1..=i32_max).contains(n)) {
            return Err(format!("a size of {n} bytes does not fit netperf's request (1 to {i32_max})"));
        }
        if self.remote_congestion.as_ref().is_some_and(|c| c.len() > 15) {
            return Err("netperf carries a congestion control name of at most 15 bytes".into());
        }
        if self.passphrase.as_ref().is_some_and(|p| p.len() >= super::SPEC_LEN) {
            return Err(format!("netperf carries a passphrase of at most {} bytes", super::SPEC_LEN - 1));
        }
        if self.remote_affinity.is_some_and(|a| a > i32_max) {
            return Err("the CPU number does not fit netperf's request".into());
        }
        Ok(())
    }

    /// The request netperf 2.7 sends for these options. Two kinds of field differ from
    /// netperf's own: the buffer-ring widths (netperf sends those of its own rings; netserver
    /// only reads the width of its own direction, and 0 lets it choose as it does for
    /// netperf's streams) and netperf's own data address and port (for UDP from the server,
    /// which none of the six tests has), which are 0 here.
    pub fn request(&self) -> OmniRequest {
        let k = self.kind;
        let opt = |v: Option<u32>| v.map_or(-1, |n| n.min(i32::MAX as u32) as i32);
        let rr_sizes = |n: u32| if k.is_rr() { n.min(i32::MAX as u32) as i32 } else { -1 };
        let (xmit, recv) = match k {
            TestKind::TcpStream | TestKind::UdpStream => (false, true),
            TestKind::TcpMaerts => (true, false),
            _ => (true, true),
        };
        let mut flags = 0;
        if self.remote_nodelay {
            flags |= flag::NO_DELAY;
        }
        if k == TestKind::TcpCrr {
            flags |= flag::CONNECT_TEST;
        }
        if self.remote_cpu {
            flags |= flag::MEASURE_CPU;
        }
        // netperf allows routing (no SO_DONTROUTE) except for UDP_STREAM ("-R" defaults).
        if k != TestKind::UdpStream {
            flags |= flag::ROUTING_ALLOWED;
        }
        let width = if k.is_rr() { 1 } else { 0 };
        OmniRequest {
            affinity: self.remote_affinity.map_or(-1, |a| a as i32),
            send_buf_size: opt(self.remote_send_buffer),
            send_size: opt(self.remote_send_size),
            send_alignment: 8,
            send_offset: 0,
            send_width: width,
            request_size: rr_sizes(self.request_size),
            recv_buf_size: opt(self.remote_recv_buffer),
            receive_size: opt(self.remote_recv_size),
            recv_alignment: 8,
            recv_offset: 0,
            recv_width: width,
            response_size: rr_sizes(self.response_size),
            flags,
            cpu_rate: 0.0,
            test_length: self.end.to_word(),
            so_rcvavoid: 0,
            so_sndavoid: 0,
            send_dirty_count: -1,
            recv_dirty_count: -1,
            recv_clean_count: -1,
            data_port: u32::from(self.remote_data_port.unwrap_or(0)),
            ipfamily: self.family.code(),
            socket_type: if k.is_udp() { socket_type::DGRAM } else { socket_type::STREAM },
            protocol: if k.is_udp() { omni::PROTO_UDP } else { omni::PROTO_TCP },
            direction: if xmit { direction::XMIT } else { 0 } | if recv { direction::RECV } else { 0 },
            netperf_port: 0,
            interval_burst: 0,
            interval_usecs: 0,
            netperf_ip: [0; 4],
            netserver_ip: [0; 4],
            socket_prio: -1,
            socket_tos: self.remote_tos.map_or(-1, i32::from),
            cong_control: omni::text_field(self.remote_congestion.as_deref().unwrap_or("")),
            fill_file: [0; 32],
        }
    }
}

/// What the driver must do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The server is ready: connect to the control peer's address at `port` (UDP: send there)
    /// and run the test. `response` says how the server set up (its buffers are netperf's
    /// RSR_SIZE/RSS_SIZE, its message sizes REMOTE_RECV_SIZE/REMOTE_SEND_SIZE).
    Connect {
        /// The data port.
        port: u16,
        /// The whole response.
        response: Box<OmniResponse>,
    },
    /// A timed test's time is up: end the data phase as netperf does (module docs).
    TimeUp,
    /// The server's figures; the session is over (close the control connection).
    Results(Box<ServerFigures>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    AwaitResponse,
    Running,
    AwaitResults,
    Done,
}

impl State {
    fn describe(self) -> &'static str {
        match self {
            Self::AwaitResponse => "waiting for netserver's response to the test request",
            Self::Running => "the test was running",
            Self::AwaitResults => "waiting for netserver's results",
            Self::Done => "the test was over",
        }
    }
}

/// netchar as netperf: one test on one control connection.
#[derive(Debug)]
pub struct Client {
    state: State,
    params: TestParams,
    input: MessageBuffer,
    out: Vec<u8>,
    events: VecDeque<Event>,
    deadline: Option<Instant>,
    cpu_measured: bool,
}

impl Client {
    /// A session for `params`; the request (after the passphrase, if any) is queued. Refuses
    /// what netperf's request cannot carry ([`TestParams::check`]).
    pub fn new(now: Instant, params: TestParams) -> Result<Self, ProtocolError> {
        params
            .check()
            .map_err(|why| ProtocolError::Malformed(format!("netperf {} request: {why}", params.kind.name())))?;
        let mut out = Vec::with_capacity(2 * MESSAGE_LEN);
        if let Some(p) = &params.passphrase {
            // netperf sends it unconverted, NUL-terminated, with its affinity word.
            let mut m = Message::new(code::PASSPHRASE, -1);
            m.set_bytes(0, p.as_bytes());
            out.extend_from_slice(&m.encode());
        }
        out.extend_from_slice(&params.request().encode().encode());
        Ok(Self {
            state: State::AwaitResponse,
            params,
            input: MessageBuffer::default(),
            out,
            events: VecDeque::new(),
            deadline: Some(now + RESPONSE_WAIT),
            cpu_measured: false,
        })
    }

    /// Feeds bytes read from the control connection.
    pub fn handle_input(&mut self, now: Instant, bytes: &[u8]) -> Result<(), ProtocolError> {
        if self.state == State::Done {
            return Ok(());
        }
        if self.state == State::AwaitResponse && self.input.len() == 0 {
            // Every netserver response starts with a big-endian type below 2^24: a first byte
            // that is not 0 is another protocol's, named now rather than after 656 bytes.
            if let Some(&b) = bytes.first() {
                if b != 0 {
                    return Err(self.fail(ProtocolError::Peer(format!(
                        "not a netserver: {}",
                        crate::hello::identify_peer(bytes)
                    ))));
                }
            }
        }
        self.input.push(bytes);
        while let Some(msg) = self.input.take() {
            match self.state {
                State::AwaitResponse => self.on_response(now, &msg)?,
                State::Running | State::AwaitResults => {
                    self.on_results(&msg)?;
                    break;
                }
                State::Done => break,
            }
        }
        if self.state == State::Done {
            self.input.clear();
        }
        Ok(())
    }

    fn on_response(&mut self, now: Instant, msg: &Message) -> Result<(), ProtocolError> {
        let name = self.params.kind.name();
        if msg.kind == code::DO_OMNI || msg.kind == code::PASSPHRASE {
            // Only an echo server answers with the client's own request.
            return Err(self.fail(ProtocolError::Peer(
                "not a netserver: an echo server answered (it sent netperf's request back); add --proto echo".into(),
            )));
        }
        if msg.status != 0 {
            let why = if msg.status == errno::UNKNOWN_REQUEST {
                "it does not know OMNI tests (a netserver older than 2.5, or built with --disable-omni)".to_string()
            } else {
                errno_text(msg.status)
            };
            return Err(self.fail(ProtocolError::Peer(format!("netserver refused the {name} test: {why}"))));
        }
        if msg.kind != code::OMNI_RESPONSE {
            return Err(self.fail(ProtocolError::Malformed(format!(
                "netserver answered the {name} request with message type {} (expected {}, OMNI_RESPONSE)",
                msg.kind,
                code::OMNI_RESPONSE
            ))));
        }
        let response = OmniResponse::decode(msg);
        let port = match u16::try_from(response.data_port) {
            Ok(p) if p != 0 => p,
            _ => {
                return Err(self.fail(ProtocolError::Malformed(format!(
                    "netserver gave data port {} for the {name} test",
                    response.data_port
                ))))
            }
        };
        self.cpu_measured = response.cpu_measured();
        self.events.push_back(Event::Connect { port, response: Box::new(response) });
        self.state = State::Running;
        self.deadline = match self.params.end {
            TestEnd::Seconds(s) if s > 0 => Some(now + Duration::from_secs(u64::from(s))),
            _ => None,
        };
        Ok(())
    }

    fn on_results(&mut self, msg: &Message) -> Result<(), ProtocolError> {
        if msg.status != 0 {
            return Err(self.fail(ProtocolError::Peer(format!(
                "netserver failed during the {} test: {}",
                self.params.kind.name(),
                errno_text(msg.status)
            ))));
        }
        let kind = msg.kind_any_order();
        if kind != code::OMNI_RESPONSE && kind != code::OMNI_RESULTS {
            return Err(self.fail(ProtocolError::Malformed(format!(
                "netserver's results came as message type {} ({})",
                msg.kind,
                hex_prefix(&msg.encode()[..8])
            ))));
        }
        let figures = ServerFigures::from_results(&OmniResults::decode(msg), self.cpu_measured);
        self.events.push_back(Event::Results(Box::new(figures)));
        self.state = State::Done;
        Ok(())
    }

    /// Ends the test early (Ctrl-C, a failed worker): the driver ends the data phase as on
    /// [`Event::TimeUp`]; the results are still awaited.
    pub fn stop(&mut self, now: Instant) {
        if self.state == State::Running {
            self.state = State::AwaitResults;
            self.deadline = Some(now + RESULTS_WAIT);
        }
    }

    /// The driver ended its side of the data phase (a count reached, a peer's EOF): the results
    /// are awaited from now.
    pub fn data_done(&mut self, now: Instant) {
        self.stop(now);
    }

    /// netserver closed the control connection.
    pub fn handle_eof(&mut self, _now: Instant) -> Result<(), ProtocolError> {
        match self.state {
            State::Done => Ok(()),
            State::AwaitResponse if self.input.len() == 0 => Err(self.fail(ProtocolError::Peer(
                "the server closed the connection without answering netperf's request: not a netserver, \
                 or a netserver requiring a passphrase (-Z)"
                    .into(),
            ))),
            s => Err(self
                .fail(ProtocolError::Peer(format!("netserver closed the control connection while {}", s.describe())))),
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

    /// When [`Self::handle_timeout`] must be called next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            State::Done => None,
            _ => self.deadline,
        }
    }

    /// Ends a timed test ([`Event::TimeUp`]); a response or results that do not come fail the
    /// session.
    pub fn handle_timeout(&mut self, now: Instant) -> Result<(), ProtocolError> {
        let Some(t) = self.deadline else { return Ok(()) };
        if now < t {
            return Ok(());
        }
        match self.state {
            State::Running => {
                self.events.push_back(Event::TimeUp);
                self.stop(now);
                Ok(())
            }
            State::AwaitResponse if self.input.len() == 0 => Err(self.fail(ProtocolError::Timeout(format!(
                "timed out after {} s {}: the server said nothing, as {} does",
                RESPONSE_WAIT.as_secs(),
                self.state.describe(),
                crate::known::SILENT_SERVERS
            )))),
            State::AwaitResponse | State::AwaitResults => {
                let wait = if self.state == State::AwaitResponse { RESPONSE_WAIT } else { RESULTS_WAIT };
                Err(self.fail(ProtocolError::Timeout(format!(
                    "timed out after {} s {}",
                    wait.as_secs(),
                    self.state.describe()
                ))))
            }
            State::Done => Ok(()),
        }
    }

    /// The test asked for.
    pub fn params(&self) -> &TestParams {
        &self.params
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
    use super::*;

    fn response(port: u32, flags: u32) -> Vec<u8> {
        let mut r = OmniResponse::decode(&Message::new(code::OMNI_RESPONSE, 0));
        r.data_port = port;
        r.flags = flags;
        r.recv_buf_size = 131072;
        r.encode().encode().to_vec()
    }

    #[test]
    fn a_timed_test_from_request_to_results() {
        let now = Instant::now();
        let mut p = TestParams::new(TestKind::TcpStream, TestEnd::Seconds(2));
        p.passphrase = Some("secret".into());
        let mut c = Client::new(now, p).unwrap();
        let mut out = Vec::new();
        c.poll_output(&mut out);
        assert_eq!(out.len(), 2 * MESSAGE_LEN);
        assert_eq!(&out[..4], &code::PASSPHRASE.to_be_bytes());
        assert_eq!(&out[8..15], b"secret\0");
        let req = OmniRequest::decode(&Message::decode(&out[MESSAGE_LEN..]).unwrap());
        assert_eq!((req.kind(), req.end()), (Ok(TestKind::TcpStream), TestEnd::Seconds(2)));
        let rsp = response(41000, 0);
        c.handle_input(now, &rsp[..1]).unwrap();
        c.handle_input(now, &rsp[1..]).unwrap();
        let Some(Event::Connect { port, response }) = c.poll_event() else { panic!("no connect") };
        assert_eq!((port, response.recv_buf_size), (41000, 131072));
        let t = c.poll_timeout().unwrap();
        assert_eq!(t, now + Duration::from_secs(2));
        c.handle_timeout(t).unwrap();
        assert_eq!(c.poll_event(), Some(Event::TimeUp));
        let mut r = OmniResults::decode(&Message::new(0, 0));
        r.bytes_received = 123;
        r.cpu_util = 50.0;
        let mut m = r.encode();
        m.kind = 0x6200_0000;
        c.handle_input(now, &m.encode()).unwrap();
        let Some(Event::Results(f)) = c.poll_event() else { panic!("no results") };
        assert_eq!((f.counts.bytes_received, f.counts.cpu), (123, None), "CPU not asked: its words are leftovers");
        assert!(c.is_done());
    }

    #[test]
    fn refusals_and_foreign_peers_are_named() {
        let now = Instant::now();
        let p = TestParams::new(TestKind::TcpRr, TestEnd::Units(100));
        let mut c = Client::new(now, p.clone()).unwrap();
        let e = c.handle_input(now, &Message::new(0, errno::UNKNOWN_REQUEST).encode()).unwrap_err();
        assert!(e.to_string().contains("does not know OMNI"), "{e}");
        let mut c = Client::new(now, p.clone()).unwrap();
        let e = c.handle_input(now, &Message::new(code::OMNI_RESPONSE, 16).encode()).unwrap_err();
        assert!(e.to_string().contains("busy"), "{e}");
        let mut c = Client::new(now, p.clone()).unwrap();
        let e = c.handle_input(now, b"netchar\0").unwrap_err();
        assert!(e.to_string().contains("not a netserver"), "{e}");
        let mut c = Client::new(now, p.clone()).unwrap();
        assert!(c.handle_input(now, &response(0, 0)).unwrap_err().to_string().contains("data port 0"));
        let mut c = Client::new(now, p.clone()).unwrap();
        assert!(c.handle_eof(now).unwrap_err().to_string().contains("not a netserver"));
        // An echo server sends the request back; a netchar server its hello; a silent one
        // nothing, and is named by the servers that wait without a word.
        let mut c = Client::new(now, p.clone()).unwrap();
        let mut request = Vec::new();
        c.poll_output(&mut request);
        let e = c.handle_input(now, &request).unwrap_err();
        assert_eq!(
            e.to_string(),
            "not a netserver: an echo server answered (it sent netperf's request back); add --proto echo"
        );
        let mut c = Client::new(now, p.clone()).unwrap();
        let e = c.handle_input(now, &crate::hello::Hello::server().encode()).unwrap_err();
        assert!(e.to_string().starts_with("not a netserver: a netchar server answered"), "{e}");
        let mut c = Client::new(now, p.clone()).unwrap();
        let e = c.handle_timeout(now + RESPONSE_WAIT).unwrap_err();
        assert!(e.to_string().contains("the server said nothing, as an iperf2 server (--proto iperf2)"), "{e}");
        // A count-based test has no timer; results may come before the driver's end.
        let mut c = Client::new(now, p).unwrap();
        c.handle_input(now, &response(9, flag::MEASURE_CPU)).unwrap();
        assert_eq!(c.poll_timeout(), None);
        let mut r = OmniResults::decode(&Message::new(code::OMNI_RESPONSE, 0));
        r.cpu_util = 7.5;
        c.handle_input(now, &r.encode().encode()).unwrap();
        c.poll_event();
        let Some(Event::Results(f)) = c.poll_event() else { panic!() };
        assert_eq!(f.counts.cpu.map(|c| c.util), Some(7.5));
    }

    #[test]
    fn what_netperf_cannot_carry_is_refused() {
        let now = Instant::now();
        for p in [
            TestParams::new(TestKind::UdpStream, TestEnd::Units(10)),
            TestParams { request_size: 0, ..TestParams::new(TestKind::UdpRr, TestEnd::Seconds(1)) },
            TestParams {
                remote_congestion: Some("a-very-long-name".into()),
                ..TestParams::new(TestKind::TcpStream, TestEnd::Seconds(1))
            },
            TestParams::new(TestKind::TcpStream, TestEnd::Units(0)),
        ] {
            let e = Client::new(now, p).unwrap_err();
            assert!(e.to_string().contains("netperf"), "{e}");
        }
    }

    #[test]
    fn silence_times_out() {
        let now = Instant::now();
        let mut c = Client::new(now, TestParams::new(TestKind::TcpCrr, TestEnd::Seconds(1))).unwrap();
        let t = c.poll_timeout().unwrap();
        assert!(matches!(c.handle_timeout(t), Err(ProtocolError::Timeout(_))));
        assert!(c.is_done());
    }
}
