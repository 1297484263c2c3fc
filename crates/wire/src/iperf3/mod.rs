//! iperf3's control protocol, client side, sans-IO: netchar as the client of an iperf3 server
//! (reference/iperf.md §1, checked against esnet/iperf's `src/iperf_api.c`).
//!
//! ```text
//! C→S cookie[37]                       S→C PARAM_EXCHANGE (9)
//! C→S u32 len + params JSON            S→C CREATE_STREAMS (10)
//! C→S data connections: cookie[37] each
//!                                      S→C TEST_START (1), TEST_RUNNING (2)   ... data ...
//! C→S TEST_END (4)                     S→C EXCHANGE_RESULTS (13)
//! C→S u32 len + results JSON           S→C u32 len + results JSON
//!                                      S→C DISPLAY_RESULTS (14)
//! C→S IPERF_DONE (16)
//! ```
//!
//! The client always ends the test (also with `-R`): TEST_END goes out when this end's senders
//! are done and, when the server sends, when the test's time is up. The server stops counting
//! when TEST_END arrives, so bytes still in flight then are not in its figures.
//!
//! Stream ids on the wire are 1, 3, 4, 5, ... (iperf3 skips 2); [`wire_stream_id`] maps
//! netchar's 1, 2, 3, ... onto them in connect order.
//!
//! [`server`] is the other end (netchar answering iperf3 clients); [`Iperf3Datagrams`] is the
//! UDP header both ends use.

pub mod server;

use crate::ProtocolError;
use serde::Deserialize;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Bytes of the cookie: 36 characters and a NUL.
pub const COOKIE_LEN: usize = 37;
/// The cap this client puts on the server's results JSON (iperf3 sets none; a long test
/// with many streams and server output is a few hundred KiB).
pub const MAX_RESULTS_JSON: u32 = 8 * 1024 * 1024;

pub(crate) const TEST_START: u8 = 1;
pub(crate) const TEST_RUNNING: u8 = 2;
pub(crate) const TEST_END: u8 = 4;
pub(crate) const PARAM_EXCHANGE: u8 = 9;
pub(crate) const CREATE_STREAMS: u8 = 10;
pub(crate) const SERVER_TERMINATE: u8 = 11;
pub(crate) const EXCHANGE_RESULTS: u8 = 13;
pub(crate) const DISPLAY_RESULTS: u8 = 14;
pub(crate) const IPERF_DONE: u8 = 16;
pub(crate) const SERVER_ERROR: u8 = 0xFE;
pub(crate) const ACCESS_DENIED: u8 = 0xFF;

/// A UDP stream's first datagram, client to server, as 3.12+ put it on the wire.
pub const UDP_HELLO: [u8; 4] = *b"9876";
/// The server's answer to [`UDP_HELLO`].
pub const UDP_REPLY: [u8; 4] = *b"6789";
/// The answer 3.7–3.11 servers send (987654321, host order, little-endian).
pub const UDP_REPLY_LEGACY: [u8; 4] = 987_654_321u32.to_le_bytes();

/// The answer a server gives to a UDP `hello`: big-endian 3.12–3.16 clients send the bytes
/// swapped and accept only the swapped answer (interop-factcheck.md, iperf3 correction 3).
pub fn udp_reply_to(hello: &[u8]) -> [u8; 4] {
    if hello == UDP_REPLY {
        UDP_HELLO
    } else {
        UDP_REPLY
    }
}

/// True when `reply` is an iperf3 server's answer to a UDP hello (any version).
pub fn is_udp_reply(reply: &[u8]) -> bool {
    reply == UDP_REPLY || reply == UDP_REPLY_LEGACY || reply == UDP_HELLO
}

/// iperf3's UDP header: send time (sec, usec; the sender's monotonic clock) and a sequence
/// number from 1, 32-bit, or 64-bit when the client asks `udp_counters_64bit`.
///
/// ```text
/// 0      4      8              12 / 16
/// | sec  | usec | sequence     | payload ...
/// ```
///
/// It names no stream: each stream has its own socket. netchar's sequence numbers start at
/// 0, so the wire carries sequence + 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Iperf3Datagrams {
    /// 64-bit sequence numbers.
    pub wide: bool,
}

impl crate::datagram::DatagramFormat for Iperf3Datagrams {
    const STREAM_IDS: bool = false;

    fn header_len(&self) -> usize {
        if self.wide {
            16
        } else {
            12
        }
    }

    fn emit(&self, buf: &mut [u8], _stream_id: u32, sequence: u64, sent_ns: u64) {
        self.stamp(buf, sequence, sent_ns);
    }

    fn stamp(&self, buf: &mut [u8], sequence: u64, sent_ns: u64) {
        let sec = (sent_ns / 1_000_000_000) as u32;
        let usec = ((sent_ns % 1_000_000_000) / 1000) as u32;
        buf[0..4].copy_from_slice(&sec.to_be_bytes());
        buf[4..8].copy_from_slice(&usec.to_be_bytes());
        let wire = sequence.wrapping_add(1);
        if self.wide {
            buf[8..16].copy_from_slice(&wire.to_be_bytes());
        } else {
            buf[8..12].copy_from_slice(&(wire as u32).to_be_bytes());
        }
    }

    fn classify(&self, buf: &[u8]) -> crate::datagram::Received {
        use crate::datagram::Received;
        if buf.len() < self.header_len() {
            // The 4-byte UDP hello and reply, late or repeated.
            return Received::Control;
        }
        let sec = u64::from(u32::from_be_bytes(buf[0..4].try_into().expect("4 bytes")));
        let usec = u64::from(u32::from_be_bytes(buf[4..8].try_into().expect("4 bytes")));
        let wire = if self.wide {
            u64::from_be_bytes(buf[8..16].try_into().expect("8 bytes"))
        } else {
            u64::from(u32::from_be_bytes(buf[8..12].try_into().expect("4 bytes")))
        };
        match wire.checked_sub(1) {
            Some(sequence) => Received::Data { stream_id: 0, sequence, sent_ns: sec * 1_000_000_000 + usec * 1000 },
            None => Received::Foreign,
        }
    }
}

/// The alphabet current iperf3 clients draw their cookie from (`make_cookie`).
const COOKIE_ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// Takes one length-prefixed JSON document (u32 big-endian length, then the JSON) off the
/// front of `input` when it is all there; a length over `cap` is refused before buffering.
pub(crate) fn take_json_frame(input: &mut Vec<u8>, cap: u32) -> Result<Option<Vec<u8>>, ProtocolError> {
    if input.len() < 4 {
        return Ok(None);
    }
    let len = u32::from_be_bytes(input[..4].try_into().expect("4 bytes"));
    if len > cap {
        return Err(ProtocolError::Oversize { len, max: cap });
    }
    let end = 4 + len as usize;
    if input.len() < end {
        return Ok(None);
    }
    let json = input[4..end].to_vec();
    input.drain(..end);
    Ok(Some(json))
}

/// A cookie from 36 random bytes.
pub fn make_cookie(random: &[u8; 36]) -> [u8; COOKIE_LEN] {
    let mut c = [0u8; COOKIE_LEN];
    for (i, r) in random.iter().enumerate() {
        c[i] = COOKIE_ALPHABET[usize::from(r % 32)];
    }
    c
}

/// iperf3's id of the `n`th stream (netchar's id `n`, from 1): 1, 3, 4, 5, ...
pub fn wire_stream_id(n: u32) -> u32 {
    if n <= 1 {
        1
    } else {
        n + 1
    }
}

/// What the client asks the server for (the params JSON).
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    /// UDP (with 64-bit sequence numbers), else TCP.
    pub udp: bool,
    /// Seconds (`time`); 0 with `bytes`.
    pub seconds: f64,
    /// Bytes in all (`num`); 0 with `seconds`.
    pub bytes: u64,
    /// Streams per direction (`parallel`).
    pub parallel: u32,
    /// Block size (`len`).
    pub len: u64,
    /// The server sends (`reverse`).
    pub reverse: bool,
    /// Both ways (`bidirectional`).
    pub bidirectional: bool,
    /// Warm-up seconds (`omit`).
    pub omit: f64,
    /// Rate cap per stream, bit/s (`bandwidth`).
    pub bandwidth: Option<u64>,
    /// SO_SNDBUF/SO_RCVBUF (`window`).
    pub window: Option<u64>,
    /// TCP_MAXSEG (`MSS`).
    pub mss: Option<u32>,
    /// TCP_NODELAY (`nodelay`).
    pub nodelay: bool,
    /// TCP_CONGESTION (`congestion`).
    pub congestion: Option<String>,
    /// The TOS byte of the server's data sockets (`TOS`, iperf3's `-S`).
    pub tos: Option<u8>,
    /// Don't-fragment on the server's UDP sockets over IPv4 (`dont_fragment`, iperf3 3.10+'s
    /// `--dont-fragment`; earlier servers ignore it).
    pub dont_fragment: bool,
}

impl Params {
    /// The JSON the server reads (unknown keys are ignored by every iperf3 version).
    pub fn to_json(&self) -> Vec<u8> {
        let mut m = serde_json::Map::new();
        if self.udp {
            m.insert("udp".into(), true.into());
            // 64-bit sequence numbers (every 3.x from 3.1 reads the key): no wrap after 2^32.
            m.insert("udp_counters_64bit".into(), 1.into());
        } else {
            m.insert("tcp".into(), true.into());
        }
        m.insert("omit".into(), (self.omit.round() as u64).into());
        m.insert("time".into(), (self.seconds.ceil() as u64).into());
        m.insert("num".into(), self.bytes.into());
        m.insert("blockcount".into(), 0.into());
        m.insert("parallel".into(), self.parallel.into());
        m.insert("len".into(), self.len.into());
        m.insert("pacing_timer".into(), 1000.into());
        if self.reverse {
            m.insert("reverse".into(), true.into());
        }
        if self.bidirectional {
            m.insert("bidirectional".into(), true.into());
        }
        if let Some(b) = self.bandwidth {
            m.insert("bandwidth".into(), b.into());
        }
        if let Some(w) = self.window {
            m.insert("window".into(), w.into());
        }
        if let Some(mss) = self.mss {
            m.insert("MSS".into(), mss.into());
        }
        if self.nodelay {
            m.insert("nodelay".into(), true.into());
        }
        if let Some(c) = &self.congestion {
            m.insert("congestion".into(), c.clone().into());
        }
        // iperf3 sends each only when set (a TOS of 0 is its default).
        if let Some(tos) = self.tos.filter(|&t| t != 0) {
            m.insert("TOS".into(), tos.into());
        }
        if self.dont_fragment {
            m.insert("dont_fragment".into(), 1.into());
        }
        m.insert("client_version".into(), concat!("netchar ", env!("CARGO_PKG_VERSION")).into());
        serde_json::to_vec(&serde_json::Value::Object(m)).expect("a JSON map serialises")
    }
}

/// One stream of a results JSON.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ResultStream {
    /// iperf3's stream id (1, 3, 4, ...).
    pub id: i64,
    /// Bytes sent (sender, warm-up excluded) or received.
    #[serde(default, deserialize_with = "lenient_u64")]
    pub bytes: u64,
    /// TCP retransmits (senders with TCP_INFO), −1 when unknown.
    #[serde(default, deserialize_with = "lenient_i64")]
    pub retransmits: i64,
    /// UDP: datagrams sent (sender), or the highest sequence number seen (receiver).
    #[serde(default, deserialize_with = "lenient_u64")]
    pub packets: u64,
    /// UDP receivers: datagrams lost.
    #[serde(default, deserialize_with = "lenient_u64")]
    pub errors: u64,
    /// UDP receivers: RFC 3550 jitter, seconds.
    #[serde(default)]
    pub jitter: f64,
    /// Seconds since the test's start.
    #[serde(default)]
    pub start_time: f64,
    /// Seconds since the test's start.
    #[serde(default)]
    pub end_time: f64,
}

/// A results JSON (the server's, or this client's own).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Results {
    /// CPU use of the whole process, % of one CPU.
    #[serde(default)]
    pub cpu_util_total: f64,
    /// User part.
    #[serde(default)]
    pub cpu_util_user: f64,
    /// System part.
    #[serde(default)]
    pub cpu_util_system: f64,
    /// 1: retransmits are known; 0: not; −1: a pure receiver.
    #[serde(default, deserialize_with = "lenient_i64")]
    pub sender_has_retransmits: i64,
    /// Every stream.
    #[serde(default)]
    pub streams: Vec<ResultStream>,
}

/// iperf3 3.12–3.13 print −1 as 18446744073709551615 (esnet/iperf#1435), and some counters are
/// negative when unknown: take any JSON integer, negative as 0.
fn lenient_u64<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    Ok(v.as_u64()
        .or_else(|| v.as_i64().map(|i| i.max(0) as u64))
        .or_else(|| v.as_f64().map(|f| f.max(0.0) as u64))
        .unwrap_or(0))
}

/// A signed counter as 3.12–3.13 print it: 2^64 − 1 is −1 (two's complement), as they meant.
fn lenient_i64<'de, D: serde::Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    Ok(v.as_i64().or_else(|| v.as_u64().map(|u| u as i64)).or_else(|| v.as_f64().map(|f| f as i64)).unwrap_or(-1))
}

/// What the driver must do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Open the data connections now; each sends [`Client::cookie`] first.
    CreateStreams,
    /// The test runs: start the workers.
    Running,
    /// The server's own figures.
    ServerResults(Results),
    /// The server is busy with another test.
    Busy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    AwaitParamExchange,
    AwaitCreateStreams,
    AwaitTestStart,
    AwaitTestRunning,
    Running,
    AwaitExchangeResults,
    AwaitServerResults,
    AwaitDisplayResults,
    Done,
}

impl State {
    fn describe(self) -> &'static str {
        match self {
            Self::AwaitParamExchange => "waiting for the iperf3 server to ask for the test's parameters",
            Self::AwaitCreateStreams => "waiting for the iperf3 server to take the data connections",
            Self::AwaitTestStart | Self::AwaitTestRunning => "waiting for the iperf3 server to start the test",
            Self::Running => "the test was running",
            Self::AwaitExchangeResults | Self::AwaitServerResults | Self::AwaitDisplayResults => {
                "exchanging results with the iperf3 server"
            }
            Self::Done => "the test was over",
        }
    }
}

/// How long each setup step may take (iperf3 itself waits longer; 10 s says "stuck" clearly).
const PHASE: Duration = Duration::from_secs(10);

/// netchar as an iperf3 client.
#[derive(Debug)]
pub struct Client {
    state: State,
    cookie: [u8; COOKIE_LEN],
    params: Params,
    out: Vec<u8>,
    input: Vec<u8>,
    events: VecDeque<Event>,
    phase_deadline: Instant,
    /// When the test's time is up (server-sending tests end on the client's clock).
    end_at: Option<Instant>,
    /// This end's senders are done (or it has none).
    senders_done: bool,
    /// Bytes and datagrams each of this end's sending streams wrote (netchar ids), for the
    /// results JSON.
    local_bytes: Vec<(u32, u64, u64)>,
}

impl Client {
    /// A session asking for `params`, with `cookie` ([`make_cookie`]); the cookie is queued.
    pub fn new(now: Instant, params: Params, cookie: [u8; COOKIE_LEN]) -> Self {
        let senders_done = params.reverse && !params.bidirectional;
        Self {
            state: State::AwaitParamExchange,
            cookie,
            params,
            out: cookie.to_vec(),
            input: Vec::new(),
            events: VecDeque::new(),
            phase_deadline: now + PHASE,
            end_at: None,
            senders_done,
            local_bytes: Vec::new(),
        }
    }

    /// The cookie every data connection sends first.
    pub fn cookie(&self) -> [u8; COOKIE_LEN] {
        self.cookie
    }

    /// Feeds bytes read from the control connection.
    pub fn handle_input(&mut self, now: Instant, bytes: &[u8]) -> Result<(), ProtocolError> {
        if self.state == State::Done {
            // After IPERF_DONE: 3.21 servers may still report an error of their cleanup (a
            // reset UDP socket, i_errno 111); the test's figures are in.
            return Ok(());
        }
        self.input.extend_from_slice(bytes);
        loop {
            if self.state == State::AwaitServerResults {
                let Some(json) = self.take_json()? else { return Ok(()) };
                let results: Results = serde_json::from_slice(&json)
                    .map_err(|e| self.fail(ProtocolError::Malformed(format!("iperf3 results JSON: {e}"))))?;
                self.events.push_back(Event::ServerResults(results));
                self.enter(now, State::AwaitDisplayResults);
                continue;
            }
            let Some(&byte) = self.input.first() else { return Ok(()) };
            if self.state == State::AwaitParamExchange && byte == crate::hello::MAGIC[0] {
                // A netchar server answers a cookie with its own hello ("netchar\0..."): named
                // once the 40 bytes are in, not as iperf3 state byte 110.
                let seen = self.input.len().min(crate::hello::MAGIC.len());
                if self.input[..seen] == crate::hello::MAGIC[..seen] {
                    if self.input.len() < crate::hello::HELLO_LEN {
                        return Ok(());
                    }
                    let what = crate::hello::identify_peer(&self.input);
                    return Err(self.fail(ProtocolError::Peer(format!("not an iperf3 server: {what}"))));
                }
            }
            if self.state == State::AwaitParamExchange && ![PARAM_EXCHANGE, ACCESS_DENIED, SERVER_ERROR].contains(&byte)
            {
                // Not an iperf3 server's first word: an echo server sends the cookie back, any
                // other peer is named by what it sent.
                let seen = self.input.len().min(COOKIE_LEN);
                let what = if seen > 0 && self.input[..seen] == self.cookie[..seen] {
                    "an echo server answered (it sent iperf3's cookie back); add --proto echo".to_string()
                } else {
                    crate::hello::identify_peer(&self.input)
                };
                return Err(self.fail(ProtocolError::Peer(format!("not an iperf3 server: {what}"))));
            }
            if byte == SERVER_ERROR {
                if self.input.len() < 9 {
                    return Ok(());
                }
                let i_errno = i32::from_be_bytes(self.input[1..5].try_into().expect("4 bytes"));
                let errno = i32::from_be_bytes(self.input[5..9].try_into().expect("4 bytes"));
                return Err(self.fail(ProtocolError::Peer(format!(
                    "the iperf3 server reported an error (i_errno {i_errno}, errno {errno}) while {}",
                    self.state.describe()
                ))));
            }
            self.input.remove(0);
            self.on_state_byte(now, byte)?;
        }
    }

    fn take_json(&mut self) -> Result<Option<Vec<u8>>, ProtocolError> {
        take_json_frame(&mut self.input, MAX_RESULTS_JSON).map_err(|e| self.fail(e))
    }

    fn on_state_byte(&mut self, now: Instant, byte: u8) -> Result<(), ProtocolError> {
        match (self.state, byte) {
            (State::AwaitParamExchange, ACCESS_DENIED) => {
                self.events.push_back(Event::Busy);
                self.state = State::Done;
            }
            (State::AwaitParamExchange, PARAM_EXCHANGE) => {
                let json = self.params.to_json();
                self.out.extend_from_slice(&(json.len() as u32).to_be_bytes());
                self.out.extend_from_slice(&json);
                self.enter(now, State::AwaitCreateStreams);
            }
            (State::AwaitCreateStreams, CREATE_STREAMS) => {
                self.events.push_back(Event::CreateStreams);
                self.enter(now, State::AwaitTestStart);
            }
            (State::AwaitTestStart, TEST_START) => self.enter(now, State::AwaitTestRunning),
            (State::AwaitTestRunning, TEST_RUNNING) => {
                self.events.push_back(Event::Running);
                self.state = State::Running;
                if self.params.reverse || self.params.bidirectional {
                    self.end_at = Some(now + Duration::from_secs_f64(self.params.seconds));
                }
            }
            (State::AwaitExchangeResults, EXCHANGE_RESULTS) => {
                let mine = self.own_results();
                self.out.extend_from_slice(&(mine.len() as u32).to_be_bytes());
                self.out.extend_from_slice(&mine);
                self.enter(now, State::AwaitServerResults);
            }
            (State::AwaitDisplayResults, DISPLAY_RESULTS) => {
                self.out.push(IPERF_DONE);
                self.state = State::Done;
            }
            (_, SERVER_TERMINATE) => {
                return Err(self.fail(ProtocolError::Peer(format!(
                    "the iperf3 server was stopped (SERVER_TERMINATE) while {}",
                    self.state.describe()
                ))))
            }
            (state, other) => {
                return Err(self.fail(ProtocolError::Malformed(format!(
                    "unexpected iperf3 state byte {other} while {}",
                    state.describe()
                ))))
            }
        }
        Ok(())
    }

    /// This client's results JSON: its sending streams' bytes (its receiving streams' are
    /// netchar's own figures, reported by netchar, not sent back).
    fn own_results(&self) -> Vec<u8> {
        let streams: Vec<serde_json::Value> = self
            .local_bytes
            .iter()
            .map(|&(id, bytes, packets)| {
                serde_json::json!({"id": wire_stream_id(id), "bytes": bytes, "retransmits": -1, "jitter": 0,
                    "errors": 0, "omitted_errors": 0, "packets": packets, "omitted_packets": 0,
                    "start_time": 0, "end_time": self.params.seconds})
            })
            .collect();
        let v = serde_json::json!({"cpu_util_total": 0, "cpu_util_user": 0, "cpu_util_system": 0,
            "sender_has_retransmits": if self.local_bytes.is_empty() { -1 } else { 0 }, "streams": streams});
        serde_json::to_vec(&v).expect("JSON values serialise")
    }

    /// This end's senders finished, with what each wrote (netchar ids).
    /// `totals`: (netchar id, bytes, datagrams) of each sending stream (datagrams 0 for TCP).
    pub fn local_senders_done(&mut self, now: Instant, totals: &[(u32, u64, u64)]) {
        self.local_bytes = totals.to_vec();
        self.senders_done = true;
        self.maybe_end(now);
    }

    /// Ends the test early (Ctrl-C, a failed worker): TEST_END now, then the results exchange.
    pub fn stop(&mut self, now: Instant) {
        self.senders_done = true;
        self.end_at = Some(now);
        self.maybe_end(now);
    }

    fn maybe_end(&mut self, now: Instant) {
        let time_up = match self.end_at {
            None => true,
            Some(t) => now >= t,
        };
        if self.state == State::Running && self.senders_done && time_up {
            self.out.push(TEST_END);
            self.enter(now, State::AwaitExchangeResults);
        }
    }

    /// The server closed the control connection.
    pub fn handle_eof(&mut self, _now: Instant) -> Result<(), ProtocolError> {
        match self.state {
            State::Done => Ok(()),
            State::AwaitParamExchange if self.input.is_empty() => Err(self.fail(ProtocolError::Peer(
                "the server closed the connection without answering iperf3's cookie: not an iperf3 server (an \
                 iperf 2.1 server closes so, taking the cookie for a header with a bad permit key: --proto iperf2)"
                    .into(),
            ))),
            s => Err(self
                .fail(ProtocolError::Peer(format!("the iperf3 server closed the connection while {}", s.describe())))),
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
            State::Running => self.end_at,
            _ => Some(self.phase_deadline),
        }
    }

    /// Ends a server-sending test when its time is up; setup steps that take too long fail.
    pub fn handle_timeout(&mut self, now: Instant) -> Result<(), ProtocolError> {
        match self.state {
            State::Done => Ok(()),
            State::Running => {
                self.maybe_end(now);
                Ok(())
            }
            State::AwaitParamExchange if now >= self.phase_deadline => Err(self.fail(ProtocolError::Timeout(format!(
                "timed out after {:.0} s {}: the server said nothing, as {} does",
                PHASE.as_secs_f64(),
                State::AwaitParamExchange.describe(),
                crate::known::SILENT_SERVERS
            )))),
            s if now >= self.phase_deadline => Err(self.fail(ProtocolError::Timeout(format!(
                "timed out after {:.0} s {}",
                PHASE.as_secs_f64(),
                s.describe()
            )))),
            _ => Ok(()),
        }
    }

    /// True once the session is over.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    fn enter(&mut self, now: Instant, state: State) {
        self.state = state;
        self.phase_deadline = now + PHASE;
    }

    fn fail(&mut self, e: ProtocolError) -> ProtocolError {
        self.state = State::Done;
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> Params {
        Params {
            udp: false,
            seconds: 1.0,
            bytes: 0,
            parallel: 2,
            len: 131072,
            reverse: false,
            bidirectional: false,
            omit: 0.0,
            bandwidth: None,
            window: None,
            mss: None,
            nodelay: false,
            congestion: None,
            tos: None,
            dont_fragment: false,
        }
    }

    /// The exchange of a real `iperf3 -s` (3.12) as reference/iperf.md §1 records it, replayed.
    #[test]
    fn a_whole_upload_test_against_a_scripted_iperf3_server() {
        let now = Instant::now();
        let cookie = make_cookie(&[7; 36]);
        let mut c = Client::new(now, params(), cookie);
        let mut out = Vec::new();
        c.poll_output(&mut out);
        assert_eq!(out, cookie);
        assert!(out[..36].iter().all(|b| COOKIE_ALPHABET.contains(b)) && out[36] == 0);
        c.handle_input(now, &[PARAM_EXCHANGE]).unwrap();
        out.clear();
        c.poll_output(&mut out);
        let len = u32::from_be_bytes(out[..4].try_into().unwrap()) as usize;
        let p: serde_json::Value = serde_json::from_slice(&out[4..4 + len]).unwrap();
        assert_eq!((p["tcp"].as_bool(), p["parallel"].as_u64(), p["time"].as_u64()), (Some(true), Some(2), Some(1)));
        c.handle_input(now, &[CREATE_STREAMS, TEST_START, TEST_RUNNING]).unwrap();
        assert_eq!(c.poll_event(), Some(Event::CreateStreams));
        assert_eq!(c.poll_event(), Some(Event::Running));
        c.local_senders_done(now, &[(1, 1000, 0), (2, 2000, 0)]);
        out.clear();
        c.poll_output(&mut out);
        assert_eq!(out, [TEST_END]);
        c.handle_input(now, &[EXCHANGE_RESULTS]).unwrap();
        out.clear();
        c.poll_output(&mut out);
        let mine: Results = serde_json::from_slice(&out[4..]).unwrap();
        assert_eq!(mine.streams.iter().map(|s| (s.id, s.bytes)).collect::<Vec<_>>(), [(1, 1000), (3, 2000)]);
        // 3.12 writes −1 as 2^64 − 1: read as 0, not an error.
        let server = br#"{"cpu_util_total":1.5,"cpu_util_user":0.5,"cpu_util_system":1.0,"sender_has_retransmits":-1,
            "streams":[{"id":1,"bytes":990,"retransmits":18446744073709551615,"jitter":0,"errors":0,"packets":0,"start_time":0,"end_time":1.0},
                       {"id":3,"bytes":2000,"retransmits":-1,"jitter":0,"errors":0,"packets":0,"start_time":0,"end_time":1.0}]}"#;
        let mut msg = (server.len() as u32).to_be_bytes().to_vec();
        msg.extend_from_slice(server);
        // Split anywhere: the JSON arrives in pieces.
        c.handle_input(now, &msg[..7]).unwrap();
        c.handle_input(now, &msg[7..]).unwrap();
        let Some(Event::ServerResults(r)) = c.poll_event() else { panic!("no results") };
        assert_eq!(r.streams[0].bytes, 990);
        c.handle_input(now, &[DISPLAY_RESULTS]).unwrap();
        out.clear();
        c.poll_output(&mut out);
        assert_eq!(out, [IPERF_DONE]);
        assert!(c.is_done());
    }

    #[test]
    fn a_reverse_test_ends_on_the_clients_clock() {
        let now = Instant::now();
        let mut c = Client::new(now, Params { reverse: true, ..params() }, make_cookie(&[1; 36]));
        c.handle_input(now, &[PARAM_EXCHANGE, CREATE_STREAMS, TEST_START, TEST_RUNNING]).unwrap();
        let mut out = Vec::new();
        c.poll_output(&mut out);
        let end = c.poll_timeout().unwrap();
        assert_eq!(end, now + Duration::from_secs(1));
        c.handle_timeout(end - Duration::from_millis(1)).unwrap();
        out.clear();
        c.poll_output(&mut out);
        assert!(out.is_empty(), "TEST_END before the time is up");
        c.handle_timeout(end).unwrap();
        c.poll_output(&mut out);
        assert_eq!(out, [TEST_END]);
    }

    #[test]
    fn busy_errors_and_garbage_are_named() {
        let now = Instant::now();
        let mut c = Client::new(now, params(), make_cookie(&[1; 36]));
        c.handle_input(now, &[ACCESS_DENIED]).unwrap();
        assert_eq!(c.poll_event(), Some(Event::Busy));
        let mut c = Client::new(now, params(), make_cookie(&[1; 36]));
        let e = c.handle_input(now, &[SERVER_ERROR, 0, 0, 0, 27, 0, 0, 0, 0]).unwrap_err();
        assert!(e.to_string().contains("i_errno 27"), "{e}");
        let mut c = Client::new(now, params(), make_cookie(&[1; 36]));
        let e = c.handle_input(now, b"SSH-2.0").unwrap_err();
        assert_eq!(e.to_string(), "not an iperf3 server: an SSH server answered");
        // An echo server sends the cookie back.
        let cookie = make_cookie(&[1; 36]);
        let mut c = Client::new(now, params(), cookie);
        let e = c.handle_input(now, &cookie[..20]).unwrap_err();
        assert!(
            e.to_string().contains("an echo server answered (it sent iperf3's cookie back); add --proto echo"),
            "{e}"
        );
        // A silent server is named by the servers that wait without a word.
        let mut c = Client::new(now, params(), make_cookie(&[1; 36]));
        let e = c.handle_timeout(now + PHASE).unwrap_err();
        assert!(e.to_string().contains("the server said nothing, as an iperf2 server (--proto iperf2)"), "{e}");
        // A netchar server's hello, in two reads: named as netchar's once whole.
        let mut c = Client::new(now, params(), make_cookie(&[1; 36]));
        let hello = crate::hello::Hello::server().encode();
        c.handle_input(now, &hello[..5]).unwrap();
        let e = c.handle_input(now, &hello[5..]).unwrap_err();
        assert!(e.to_string().contains("a netchar server answered"), "{e}");
        let mut c = Client::new(now, params(), make_cookie(&[1; 36]));
        c.handle_input(now, &[PARAM_EXCHANGE, CREATE_STREAMS, TEST_START, TEST_RUNNING]).unwrap();
        c.local_senders_done(now, &[]);
        c.handle_input(now, &[EXCHANGE_RESULTS]).unwrap();
        assert!(matches!(c.handle_input(now, &u32::MAX.to_be_bytes()), Err(ProtocolError::Oversize { .. })));
    }

    proptest::proptest! {
        /// iperf3's UDP header carries sequence + 1 and the send time to the microsecond; any
        /// shorter datagram is setup, never data.
        #[test]
        fn udp_headers_round_trip(wide: bool, seq in 0u64..u32::MAX as u64 - 1, sent_ns in 0u64..(u32::MAX as u64) * 1_000_000_000, short in 0usize..12) {
            use crate::datagram::{DatagramFormat, Received};
            let f = Iperf3Datagrams { wide };
            let mut buf = [0u8; 64];
            f.emit(&mut buf, 9, seq, sent_ns);
            let wire = if wide { u64::from_be_bytes(buf[8..16].try_into().unwrap()) } else { u64::from(u32::from_be_bytes(buf[8..12].try_into().unwrap())) };
            proptest::prop_assert_eq!(wire, seq + 1);
            match f.classify(&buf[..f.header_len()]) {
                Received::Data { sequence, sent_ns: t, .. } => {
                    proptest::prop_assert_eq!(sequence, seq);
                    proptest::prop_assert_eq!(t, sent_ns / 1000 * 1000);
                }
                other => proptest::prop_assert!(false, "{:?}", other),
            }
            proptest::prop_assert_eq!(f.classify(&buf[..short.min(f.header_len() - 1)]), Received::Control);
        }
    }

    #[test]
    fn wire_ids_skip_two() {
        assert_eq!((1..=4).map(wire_stream_id).collect::<Vec<_>>(), [1, 3, 4, 5]);
    }
}
