//! iperf3's control protocol, server side, sans-IO: netchar answering an unmodified iperf3
//! client (3.7 and later). The exchange is the client's ([`super`]) seen from the other end:
//!
//! ```text
//! (cookie[37] read by the listener)    S→C PARAM_EXCHANGE
//! C→S u32 len + params JSON            → Event::Requested; the driver admits, then
//!                                      S→C CREATE_STREAMS (accept) or ACCESS_DENIED / SERVER_ERROR
//! C→S data connections                 the driver says streams_connected:
//!                                      S→C TEST_START, TEST_RUNNING
//! C→S TEST_END                         → Event::TestEnd; S→C EXCHANGE_RESULTS
//! C→S u32 len + results JSON           → Event::ClientResults; the driver stops its workers and
//!                                      S→C u32 len + results JSON, DISPLAY_RESULTS
//! C→S IPERF_DONE                       done
//! ```
//!
//! Only the client ends a test (TEST_END); this server never sends TEST_END. It aborts with
//! SERVER_TERMINATE (shutting down) or SERVER_ERROR plus two int32 (a refused request).

use super::{
    Results, ACCESS_DENIED, CREATE_STREAMS, DISPLAY_RESULTS, EXCHANGE_RESULTS, IPERF_DONE, MAX_RESULTS_JSON,
    PARAM_EXCHANGE, SERVER_ERROR, SERVER_TERMINATE, TEST_END, TEST_RUNNING, TEST_START,
};
use crate::ProtocolError;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The longest params JSON taken (iperf3 3.18+ caps it at 8 KiB too).
pub const MAX_PARAMS_JSON: u32 = 8 * 1024;
/// A client's state byte for "I was interrupted" (SIGINT on the client).
const CLIENT_TERMINATE: u8 = 12;

/// iperf3's `i_errno` for a test longer than the server allows (IEMAXSERVERTESTDURATIONEXCEEDED).
pub const IE_MAX_DURATION: i32 = 37;
/// iperf3's `i_errno` for a rate above the server's total (IETOTALRATE).
pub const IE_TOTAL_RATE: i32 = 27;
/// iperf3's `i_errno` for an unsupported request (IEUNIMP, "not implemented").
pub const IE_NOT_IMPLEMENTED: i32 = 13;

/// The transport an iperf3 client asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// `tcp: true`.
    Tcp,
    /// `udp: true`.
    Udp,
}

/// What an iperf3 client asked for, read from its params JSON the way iperf3 3.18+ reads it:
/// by type, a key of the wrong type is as good as absent.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientParams {
    /// TCP or UDP.
    pub transport: Transport,
    /// Seconds (`time`); 0 when the test ends by bytes or blocks.
    pub seconds: u64,
    /// Bytes in all (`num`), 0 if none.
    pub bytes: u64,
    /// Blocks in all (`blockcount`), 0 if none.
    pub blocks: u64,
    /// Streams per direction (`parallel`).
    pub parallel: u32,
    /// Block or datagram size (`len`).
    pub len: u64,
    /// The server sends (`reverse`).
    pub reverse: bool,
    /// Both ways (`bidirectional`).
    pub bidirectional: bool,
    /// Warm-up seconds (`omit`).
    pub omit: u64,
    /// Rate per stream in bit/s (`bandwidth`); 0 unlimited.
    pub bandwidth: u64,
    /// SO_SNDBUF/SO_RCVBUF (`window`).
    pub window: Option<u64>,
    /// TCP_MAXSEG (`MSS`).
    pub mss: Option<u32>,
    /// TCP_NODELAY.
    pub nodelay: bool,
    /// TCP_CONGESTION.
    pub congestion: Option<String>,
    /// The TOS byte of the data sockets (`TOS`, the client's `-S`), when one is set.
    pub tos: Option<u8>,
    /// The client wants the server's output in the results (`get_server_output`).
    pub get_server_output: bool,
    /// UDP sequence numbers are 64-bit (`udp_counters_64bit`).
    pub udp_counters_64bit: bool,
    /// The client's version string, as it tells it.
    pub client_version: Option<String>,
    /// Keys asking for what this server does not do (sctp, mptcp, authtoken, ...).
    pub unsupported: Vec<&'static str>,
}

impl ClientParams {
    /// Reads a params JSON.
    pub fn parse(json: &[u8]) -> Result<Self, ProtocolError> {
        let v: serde_json::Value =
            serde_json::from_slice(json).map_err(|e| ProtocolError::Malformed(format!("iperf3 params JSON: {e}")))?;
        let m = v.as_object().ok_or_else(|| ProtocolError::Malformed("iperf3 params JSON: not an object".into()))?;
        let flag = |k: &str| m.get(k).and_then(|v| v.as_bool()).unwrap_or(false);
        let num = |k: &str| m.get(k).and_then(|v| v.as_u64());
        let transport = if flag("udp") {
            Transport::Udp
        } else if flag("tcp") {
            Transport::Tcp
        } else if flag("sctp") {
            return Err(ProtocolError::Malformed("iperf3 params: SCTP is not supported by this server".into()));
        } else {
            return Err(ProtocolError::Malformed("iperf3 params: neither tcp nor udp".into()));
        };
        let mut unsupported = Vec::new();
        for (key, name) in [("mptcp", "--mptcp"), ("authtoken", "--username/--rsa-public-key-path")] {
            if m.contains_key(key) {
                unsupported.push(name);
            }
        }
        if num("fqrate").is_some_and(|r| r > 0) {
            unsupported.push("--fq-rate");
        }
        Ok(Self {
            transport,
            seconds: num("time").unwrap_or(0),
            bytes: num("num").unwrap_or(0),
            blocks: num("blockcount").unwrap_or(0),
            parallel: num("parallel").unwrap_or(1).min(u64::from(u32::MAX)) as u32,
            len: num("len").unwrap_or(0),
            reverse: flag("reverse"),
            bidirectional: flag("bidirectional"),
            omit: num("omit").unwrap_or(0),
            bandwidth: num("bandwidth").unwrap_or(0),
            window: num("window").filter(|&w| w > 0),
            mss: num("MSS").filter(|&w| w > 0).map(|w| w.min(u64::from(u32::MAX)) as u32),
            nodelay: flag("nodelay"),
            congestion: m.get("congestion").and_then(|v| v.as_str()).map(str::to_string),
            tos: num("TOS").filter(|&t| t > 0).and_then(|t| u8::try_from(t).ok()),
            get_server_output: num("get_server_output").is_some_and(|n| n != 0),
            udp_counters_64bit: num("udp_counters_64bit").is_some_and(|n| n != 0),
            client_version: m.get("client_version").and_then(|v| v.as_str()).map(|s| s.chars().take(64).collect()),
            unsupported,
        })
    }

    /// Data streams the test has, both directions.
    pub fn total_streams(&self) -> u32 {
        if self.bidirectional {
            self.parallel.saturating_mul(2)
        } else {
            self.parallel
        }
    }
}

/// What the driver must do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The client's test: admit it ([`Server::accept`]) or turn it away ([`Server::deny`],
    /// [`Server::refuse`]).
    Requested(Box<ClientParams>),
    /// The client ended the test: stop counting (this end's senders stop now).
    TestEnd,
    /// The client's own figures (its senders' totals, for an exact settle).
    ClientResults(Results),
    /// The client was interrupted (CLIENT_TERMINATE); the session is over.
    ClientTerminated,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    AwaitParams,
    AwaitAdmission,
    AwaitStreams,
    Running,
    AwaitClientResults,
    AwaitOwnResults,
    AwaitDone,
    Done,
}

impl State {
    fn describe(self) -> &'static str {
        match self {
            Self::AwaitParams => "waiting for the iperf3 client's parameters",
            Self::AwaitAdmission => "admitting the test",
            Self::AwaitStreams => "waiting for the iperf3 client's data connections",
            Self::Running => "the test was running",
            Self::AwaitClientResults | Self::AwaitOwnResults => "exchanging results with the iperf3 client",
            Self::AwaitDone => "waiting for the iperf3 client to finish",
            Self::Done => "the test was over",
        }
    }
}

/// How long each step may take before the session fails.
const PHASE: Duration = Duration::from_secs(10);

/// One iperf3 client's control connection, served.
#[derive(Debug)]
pub struct Server {
    state: State,
    input: Vec<u8>,
    out: Vec<u8>,
    events: VecDeque<Event>,
    deadline: Instant,
}

impl Server {
    /// A session whose cookie the listener has read: asks for the parameters at once.
    pub fn new(now: Instant) -> Self {
        Self {
            state: State::AwaitParams,
            input: Vec::new(),
            out: vec![PARAM_EXCHANGE],
            events: VecDeque::new(),
            deadline: now + PHASE,
        }
    }

    /// Feeds bytes read from the control connection.
    pub fn handle_input(&mut self, now: Instant, bytes: &[u8]) -> Result<(), ProtocolError> {
        // Between the steps a client sends nothing but single state bytes and two JSON
        // documents, each capped: more than that buffered is not an iperf3 client.
        if self.input.len() + bytes.len() > MAX_RESULTS_JSON as usize + 8 {
            return Err(self.fail(ProtocolError::Oversize { len: u32::MAX, max: MAX_RESULTS_JSON }));
        }
        self.input.extend_from_slice(bytes);
        loop {
            match self.state {
                State::AwaitParams => {
                    let Some(json) = self.take_json(MAX_PARAMS_JSON)? else { return Ok(()) };
                    let params = ClientParams::parse(&json).map_err(|e| self.fail(e))?;
                    self.events.push_back(Event::Requested(Box::new(params)));
                    self.enter(now, State::AwaitAdmission);
                }
                State::AwaitClientResults => {
                    let Some(json) = self.take_json(MAX_RESULTS_JSON)? else { return Ok(()) };
                    let results: Results = serde_json::from_slice(&json)
                        .map_err(|e| self.fail(ProtocolError::Malformed(format!("iperf3 results JSON: {e}"))))?;
                    self.events.push_back(Event::ClientResults(results));
                    self.enter(now, State::AwaitOwnResults);
                }
                State::Done => {
                    // Whatever follows the end is not read.
                    self.input.clear();
                    return Ok(());
                }
                state => {
                    let Some(&byte) = self.input.first() else { return Ok(()) };
                    self.input.remove(0);
                    match (state, byte) {
                        (State::Running, TEST_END) => {
                            self.events.push_back(Event::TestEnd);
                            self.out.push(EXCHANGE_RESULTS);
                            self.enter(now, State::AwaitClientResults);
                        }
                        (State::AwaitDone, IPERF_DONE) => self.state = State::Done,
                        (_, CLIENT_TERMINATE) => {
                            self.events.push_back(Event::ClientTerminated);
                            self.state = State::Done;
                        }
                        (state, other) => {
                            return Err(self.fail(ProtocolError::Malformed(format!(
                                "unexpected iperf3 state byte {other} while {}",
                                state.describe()
                            ))))
                        }
                    }
                }
            }
        }
    }

    fn take_json(&mut self, cap: u32) -> Result<Option<Vec<u8>>, ProtocolError> {
        super::take_json_frame(&mut self.input, cap).map_err(|e| self.fail(e))
    }

    /// The test is admitted: the client may open its data connections.
    pub fn accept(&mut self, now: Instant) {
        if self.state == State::AwaitAdmission {
            self.out.push(CREATE_STREAMS);
            self.enter(now, State::AwaitStreams);
        }
    }

    /// The server is busy: ACCESS_DENIED ("the server is busy running a test"), and the end.
    pub fn deny(&mut self) {
        if self.state == State::Done {
            return;
        }
        self.out.push(ACCESS_DENIED);
        self.state = State::Done;
    }

    /// The request cannot run here: SERVER_ERROR with iperf3's `i_errno`, and the end.
    pub fn refuse(&mut self, i_errno: i32) {
        if self.state == State::Done {
            return;
        }
        self.out.push(SERVER_ERROR);
        self.out.extend_from_slice(&i_errno.to_be_bytes());
        self.out.extend_from_slice(&0i32.to_be_bytes());
        self.state = State::Done;
    }

    /// Every data stream is in: TEST_START and TEST_RUNNING; the test runs from now.
    pub fn streams_connected(&mut self, now: Instant) {
        if self.state == State::AwaitStreams {
            self.out.extend_from_slice(&[TEST_START, TEST_RUNNING]);
            self.state = State::Running;
            self.deadline = now;
        }
    }

    /// This server's results JSON, once its workers have stopped: it goes out with
    /// DISPLAY_RESULTS.
    pub fn send_results(&mut self, now: Instant, json: &[u8]) {
        if self.state == State::AwaitOwnResults {
            self.out.extend_from_slice(&(json.len() as u32).to_be_bytes());
            self.out.extend_from_slice(json);
            self.out.push(DISPLAY_RESULTS);
            self.enter(now, State::AwaitDone);
        }
    }

    /// The server is shutting down: SERVER_TERMINATE, and the end.
    pub fn terminate(&mut self) {
        if self.state != State::Done {
            self.out.push(SERVER_TERMINATE);
            self.state = State::Done;
        }
    }

    /// The client closed the control connection.
    pub fn handle_eof(&mut self, _now: Instant) -> Result<(), ProtocolError> {
        match self.state {
            State::Done => Ok(()),
            // Some clients close right after reading DISPLAY_RESULTS without IPERF_DONE.
            State::AwaitDone => {
                self.state = State::Done;
                Ok(())
            }
            s => Err(self.fail(ProtocolError::Peer(format!(
                "the iperf3 client closed the control connection while {}",
                s.describe()
            )))),
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

    /// When [`Self::handle_timeout`] must be called next: a step's deadline; none while the
    /// test runs (the driver bounds a test's length by its own limits).
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            State::Done | State::Running | State::AwaitAdmission | State::AwaitOwnResults => None,
            _ => Some(self.deadline),
        }
    }

    /// A step that took too long fails the session.
    pub fn handle_timeout(&mut self, now: Instant) -> Result<(), ProtocolError> {
        match self.poll_timeout() {
            Some(t) if now >= t => Err(self.fail(ProtocolError::Timeout(format!(
                "timed out after {:.0} s {}",
                PHASE.as_secs_f64(),
                self.state.describe()
            )))),
            _ => Ok(()),
        }
    }

    /// True while the test runs (between TEST_RUNNING and TEST_END).
    pub fn is_running(&self) -> bool {
        self.state == State::Running
    }

    /// True once the session is over.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    fn enter(&mut self, now: Instant, state: State) {
        self.state = state;
        self.deadline = now + PHASE;
    }

    fn fail(&mut self, e: ProtocolError) -> ProtocolError {
        self.state = State::Done;
        e
    }
}

/// One stream of a server's results JSON.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StreamFigures {
    /// iperf3's stream id (1, 3, 4, ...).
    pub id: u32,
    /// Bytes sent or received.
    pub bytes: u64,
    /// TCP retransmits (senders with TCP_INFO), else −1.
    pub retransmits: i64,
    /// UDP receivers: RFC 3550 jitter in seconds.
    pub jitter_seconds: f64,
    /// UDP receivers: datagrams lost.
    pub lost: u64,
    /// UDP: datagrams sent, or the receiver's count of sent (the highest sequence number).
    pub packets: u64,
    /// Seconds the stream ran.
    pub seconds: f64,
}

/// A results JSON as iperf3 clients 3.7 and later read it (`omitted_*` as a pair, -1 as -1).
pub fn results_json(
    cpu: (f64, f64, f64),
    sender_has_retransmits: i64,
    streams: &[StreamFigures],
    server_output_text: Option<&str>,
) -> Vec<u8> {
    let streams: Vec<serde_json::Value> = streams
        .iter()
        .map(|s| {
            serde_json::json!({"id": s.id, "bytes": s.bytes, "retransmits": s.retransmits,
                "jitter": s.jitter_seconds, "errors": s.lost, "omitted_errors": 0, "packets": s.packets,
                "omitted_packets": 0, "start_time": 0, "end_time": s.seconds})
        })
        .collect();
    let mut v = serde_json::json!({"cpu_util_total": cpu.0, "cpu_util_user": cpu.1, "cpu_util_system": cpu.2,
        "sender_has_retransmits": sender_has_retransmits, "streams": streams});
    if let Some(text) = server_output_text {
        v["server_output_text"] = text.into();
    }
    serde_json::to_vec(&v).expect("JSON values serialise")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params_frame(json: &str) -> Vec<u8> {
        let mut v = (json.len() as u32).to_be_bytes().to_vec();
        v.extend_from_slice(json.as_bytes());
        v
    }

    /// The params of a real `iperf3 -c -P 2 -b 100M --get-server-output` (3.12, iperf.md §1).
    const CAPTURED: &str = r#"{"tcp":true,"omit":0,"time":1,"num":0,"blockcount":0,"parallel":2,"len":131072,"bandwidth":100000000,"pacing_timer":1000,"get_server_output":1,"client_version":"3.12"}"#;

    #[test]
    fn a_whole_test_from_the_servers_side() {
        let now = Instant::now();
        let mut s = Server::new(now);
        let mut out = Vec::new();
        s.poll_output(&mut out);
        assert_eq!(out, [PARAM_EXCHANGE]);
        let frame = params_frame(CAPTURED);
        s.handle_input(now, &frame[..5]).unwrap();
        assert_eq!(s.poll_event(), None);
        s.handle_input(now, &frame[5..]).unwrap();
        let Some(Event::Requested(p)) = s.poll_event() else { panic!("no request") };
        assert_eq!((p.transport, p.parallel, p.seconds, p.bandwidth), (Transport::Tcp, 2, 1, 100_000_000));
        assert!(p.get_server_output && p.unsupported.is_empty());
        assert_eq!(p.client_version.as_deref(), Some("3.12"));
        s.accept(now);
        s.streams_connected(now);
        out.clear();
        s.poll_output(&mut out);
        assert_eq!(out, [CREATE_STREAMS, TEST_START, TEST_RUNNING]);
        assert!(s.is_running());
        s.handle_input(now, &[TEST_END]).unwrap();
        assert_eq!(s.poll_event(), Some(Event::TestEnd));
        out.clear();
        s.poll_output(&mut out);
        assert_eq!(out, [EXCHANGE_RESULTS]);
        let client = br#"{"cpu_util_total":1,"cpu_util_user":0.5,"cpu_util_system":0.5,"sender_has_retransmits":1,"streams":[{"id":1,"bytes":12345,"retransmits":0,"jitter":0,"errors":0,"packets":0}]}"#;
        s.handle_input(now, &params_frame(std::str::from_utf8(client).unwrap())).unwrap();
        let Some(Event::ClientResults(r)) = s.poll_event() else { panic!("no client results") };
        assert_eq!(r.streams[0].bytes, 12345);
        let fig = StreamFigures { id: 1, bytes: 12345, retransmits: -1, seconds: 1.0, ..Default::default() };
        let json = results_json((1.0, 0.5, 0.5), -1, &[fig], Some("text"));
        s.send_results(now, &json);
        out.clear();
        s.poll_output(&mut out);
        assert_eq!(u32::from_be_bytes(out[..4].try_into().unwrap()) as usize, json.len());
        assert_eq!(*out.last().unwrap(), DISPLAY_RESULTS);
        // What the server sent reads back as a client reads it.
        let back: Results = serde_json::from_slice(&out[4..out.len() - 1]).unwrap();
        assert_eq!((back.streams[0].id, back.streams[0].bytes, back.sender_has_retransmits), (1, 12345, -1));
        s.handle_input(now, &[IPERF_DONE]).unwrap();
        assert!(s.is_done());
    }

    #[test]
    fn refusals_busy_and_hostile_input() {
        let now = Instant::now();
        let mut s = Server::new(now);
        s.handle_input(now, &params_frame(CAPTURED)).unwrap();
        s.poll_event();
        s.refuse(IE_MAX_DURATION);
        let mut out = Vec::new();
        s.poll_output(&mut out);
        assert_eq!(out[1..], [SERVER_ERROR, 0, 0, 0, 37, 0, 0, 0, 0]);
        assert!(s.is_done());
        // An oversized params frame is refused before it is buffered.
        let mut s = Server::new(now);
        assert!(matches!(s.handle_input(now, &u32::MAX.to_be_bytes()), Err(ProtocolError::Oversize { .. })));
        // Not JSON, not an object, no transport.
        for bad in ["nope", "[1]", r#"{"time":1}"#] {
            let mut s = Server::new(now);
            assert!(s.handle_input(now, &params_frame(bad)).is_err(), "{bad}");
        }
        // Wrong-typed keys are ignored, as iperf3 3.18+ reads them.
        let p = ClientParams::parse(br#"{"udp":true,"parallel":"9","time":2,"reverse":1}"#).unwrap();
        assert_eq!((p.transport, p.parallel, p.reverse), (Transport::Udp, 1, false));
        // A stray byte while running is named.
        let mut s = Server::new(now);
        s.handle_input(now, &params_frame(CAPTURED)).unwrap();
        s.accept(now);
        s.streams_connected(now);
        let e = s.handle_input(now, &[99]).unwrap_err();
        assert!(e.to_string().contains("state byte 99"), "{e}");
        // The client may stop while the test runs.
        let mut s = Server::new(now);
        s.handle_input(now, &params_frame(CAPTURED)).unwrap();
        s.accept(now);
        s.streams_connected(now);
        s.poll_event();
        s.handle_input(now, &[CLIENT_TERMINATE]).unwrap();
        assert_eq!(s.poll_event(), Some(Event::ClientTerminated));
        assert!(s.is_done());
    }

    proptest::proptest! {
        /// What netchar's iperf3 client asks for, netchar's iperf3 server reads back exactly.
        #[test]
        fn client_params_read_back_on_the_server(
            udp: bool, seconds in 1u32..86_400, bytes in proptest::option::of(1u64..1 << 40),
            parallel in 1u32..128, len in 1u64..1 << 20, way in 0u8..3,
            bandwidth in proptest::option::of(0u64..1 << 40), window in proptest::option::of(1u64..1 << 30),
            mss in proptest::option::of(88u32..9000), nodelay: bool, tos in proptest::option::of(1u8..=255),
        ) {
            let p = super::super::Params {
                udp, seconds: f64::from(seconds), bytes: bytes.unwrap_or(0), parallel, len,
                reverse: way == 1, bidirectional: way == 2, omit: 0.0, bandwidth, window, mss: if udp { None } else { mss },
                nodelay: nodelay && !udp, congestion: None, tos, dont_fragment: false,
            };
            let back = ClientParams::parse(&p.to_json()).unwrap();
            proptest::prop_assert_eq!(back.transport, if udp { Transport::Udp } else { Transport::Tcp });
            proptest::prop_assert_eq!(back.seconds, u64::from(seconds));
            proptest::prop_assert_eq!(back.bytes, p.bytes);
            proptest::prop_assert_eq!((back.parallel, back.len), (parallel, len));
            proptest::prop_assert_eq!((back.reverse, back.bidirectional), (way == 1, way == 2));
            proptest::prop_assert_eq!(back.bandwidth, bandwidth.unwrap_or(0));
            proptest::prop_assert_eq!(back.window, window);
            proptest::prop_assert_eq!(back.mss, p.mss);
            proptest::prop_assert_eq!(back.nodelay, p.nodelay);
            proptest::prop_assert_eq!(back.tos, tos);
            proptest::prop_assert_eq!(back.udp_counters_64bit, udp);
            proptest::prop_assert!(back.unsupported.is_empty());
        }
    }

    #[test]
    fn a_silent_client_times_out_but_a_running_test_does_not() {
        let now = Instant::now();
        let mut s = Server::new(now);
        let t = s.poll_timeout().unwrap();
        assert!(s.handle_timeout(t).is_err());
        let mut s = Server::new(now);
        s.handle_input(now, &params_frame(CAPTURED)).unwrap();
        s.accept(now);
        s.streams_connected(now);
        assert_eq!(s.poll_timeout(), None);
    }
}
