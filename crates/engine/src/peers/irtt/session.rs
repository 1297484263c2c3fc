//! One irtt connection behind the server seam (crate::server_control), run by the one driver
//! (crate::server_session) over the link of its source's datagrams (DatagramLink): the session
//! owns the connection's open (admission, the grant, the open reply), its close and its end
//! (`--idle-timeout`, the granted duration and 5 s more, the server stopping), and reports
//! what was counted. The data requests in between are answered by the listener's loop, in
//! place, through the [`Connection`] the two share: a round trip must not wait for a thread.

use super::{AFTER_DURATION, BURST, MIN_INTERVAL_NS, NAME};
use crate::admission::{Limits, Refusal};
use crate::dataplane::DatagramFormatKind;
use crate::server_control::{
    Admission, Phase, ServerControl, ServerControlEvent, ServerRequest, SessionPhase, TestsByAddress,
};
use netchar_model::{CpuUsage, Direction, EndCondition, Endpoint, Flow, Role, RrFigures, StreamRecord, TestSpec};
use netchar_wire::irtt::{self, Params, ReplyFields, Request, Stamp};
use netchar_wire::ProtocolError;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One connection's state, shared by its session (which opens and ends it) and the listener's
/// loop (which answers its data requests where it reads them, with the stamps it took there).
#[derive(Default)]
pub(crate) struct Connection(Mutex<Answering>);

/// What the listener's loop needs to answer a data request, and what it counted.
#[derive(Default)]
struct Answering {
    /// The token and the granted parameters while the connection is open: set when the open
    /// reply goes out, cleared at its end (no request is answered or counted after it).
    open: Option<([u8; 8], Params)>,
    /// Set once the connection was opened (its session admitted).
    opened: bool,
    counts: Counts,
}

/// What a connection counted: the figures its log line reports.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Counts {
    /// When the open reply went out.
    pub(crate) started: Instant,
    /// When the last request came.
    pub(crate) last: Instant,
    /// Requests answered faster than the interval may use: irtt's burst.
    credit: f64,
    /// Data requests received: count, bytes.
    pub(crate) received: (u64, u64),
    /// Replies sent: count, bytes.
    pub(crate) sent: (u64, u64),
    /// Requests dropped unanswered (faster than the interval, too short for their reply, over
    /// the reflection guard's budget, after the granted duration).
    pub(crate) dropped: u64,
    /// The highest sequence number received and the window of the 64 below it.
    highest: Option<u32>,
    window: u64,
}

impl Default for Counts {
    fn default() -> Self {
        let now = Instant::now();
        Self {
            started: now,
            last: now,
            credit: BURST,
            received: (0, 0),
            sent: (0, 0),
            dropped: 0,
            highest: None,
            window: 0,
        }
    }
}

/// What answering a data request came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answered {
    /// Not this connection's (no open connection, another token): not counted.
    NotOurs,
    /// Counted and dropped unanswered.
    Dropped,
    /// Answered: the packet, rewritten in place, went back.
    Sent,
}

/// How a reply leaves: the reflection guard's check, then the socket.
pub(crate) trait ReplyPath {
    /// Whether the guard lets `bytes` go back to the source now.
    fn may_answer(&mut self, bytes: usize) -> bool;
    /// The send stamp, taken just before the send.
    fn stamp(&mut self) -> Stamp;
    /// Sends the reply; false if it did not go.
    fn send(&mut self, reply: &[u8]) -> bool;
}

impl Connection {
    /// The open reply goes out now: requests of `token` are answered from now on.
    fn open(&self, token: [u8; 8], params: Params, now: Instant) {
        let mut a = self.lock();
        a.open = Some((token, params));
        a.opened = true;
        a.counts = Counts { started: now, last: now, ..Counts::default() };
    }

    /// Answers the data request `packet` (of `token`, numbered `sequence`, received at `at`)
    /// in place, at its own length, with the counts and stamps irtt's reply carries, signed
    /// under `key`, unless it comes faster than the granted interval allows (beyond irtt's
    /// burst), after the granted duration, too short for its reply or over the guard's budget.
    pub(crate) fn answer(
        &self,
        packet: &mut [u8],
        (token, sequence): ([u8; 8], u32),
        at: Stamp,
        now: Instant,
        key: Option<&[u8]>,
        path: &mut dyn ReplyPath,
    ) -> Answered {
        let mut a = self.lock();
        let Answering { open: Some((ours, params)), counts: c, .. } = &mut *a else { return Answered::NotOurs };
        if *ours != token {
            return Answered::NotOurs;
        }
        c.received.0 += 1;
        c.received.1 += packet.len() as u64;
        let interval = Duration::from_nanos(params.interval_ns as u64).as_secs_f64();
        c.credit = (c.credit + now.saturating_duration_since(c.last).as_secs_f64() / interval).min(BURST);
        c.last = c.last.max(now);
        match c.highest {
            Some(h) if sequence > h => {
                let d = sequence - h;
                c.window = if d >= 64 { 1 } else { (c.window << d) | 1 };
                c.highest = Some(sequence);
            }
            Some(h) if h - sequence < 64 => c.window |= 1 << (h - sequence),
            Some(_) => {}
            None => (c.highest, c.window) = (Some(sequence), 1),
        }
        if c.credit < 1.0 || now.saturating_duration_since(c.started) > granted(params) + AFTER_DURATION {
            c.dropped += 1;
            return Answered::Dropped;
        }
        c.credit -= 1.0;
        let fields = ReplyFields { received: c.received.0 as u32, window: c.window, received_at: at, sent_at: at };
        if irtt::write_data_reply(packet, params, &fields).is_none() || !path.may_answer(packet.len()) {
            c.dropped += 1;
            return Answered::Dropped;
        }
        irtt::restamp_send(packet, params, path.stamp());
        if let Some(k) = key {
            irtt::sign(packet, k);
        }
        if !path.send(packet) {
            return Answered::Dropped;
        }
        c.sent.0 += 1;
        c.sent.1 += packet.len() as u64;
        Answered::Sent
    }

    /// Ends the connection: no request is answered from now on. Returns what it counted, if
    /// it was open.
    fn end(&self) -> Option<Counts> {
        let mut a = self.lock();
        a.open.take().map(|_| a.counts)
    }

    /// Whether the connection was ever opened (its session admitted and answered).
    pub(crate) fn was_opened(&self) -> bool {
        self.lock().opened
    }

    /// Whether the connection is open with `token`.
    fn is_token(&self, token: [u8; 8]) -> bool {
        self.lock().open.as_ref().is_some_and(|(t, _)| *t == token)
    }

    /// When the connection ends without a close: `idle` after its last request, or the
    /// granted duration and [`AFTER_DURATION`] after its open.
    fn deadline(&self, idle: Duration) -> Option<Instant> {
        let a = self.lock();
        let (_, params) = a.open.as_ref()?;
        Some((a.counts.last + idle).min(a.counts.started + granted(params) + AFTER_DURATION))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Answering> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The granted duration (a year for a client that named none, on a server without
/// `--max-duration`: its `--idle-timeout` still ends it).
fn granted(params: &Params) -> Duration {
    match params.duration_ns {
        d if d > 0 => Duration::from_nanos(d as u64),
        _ => Duration::from_secs(365 * 86_400),
    }
}

/// The parameters granted: the asked ones within the server's limits.
pub(crate) fn grant(asked: &Params, limits: &Limits) -> Params {
    let mut p = asked.clone();
    if let Some(max) = limits.max_duration {
        let max = i64::try_from(max.as_nanos()).unwrap_or(i64::MAX);
        if p.duration_ns == 0 || p.duration_ns > max {
            p.duration_ns = max;
        }
    }
    p.interval_ns = p.interval_ns.max(MIN_INTERVAL_NS);
    if let Some(rate) = limits.max_rate.filter(|&r| r > 0) {
        // Both ways carry the packet: its bits per interval within the rate.
        let len = (p.length as u64).max(p.min_data_len(false) as u64);
        let ns = (len * 8).saturating_mul(1_000_000_000) / rate;
        p.interval_ns = p.interval_ns.max(i64::try_from(ns).unwrap_or(i64::MAX));
    }
    // The server sets no DSCP on its replies and pads with zeros.
    p.dscp = 0;
    p.server_fill = None;
    p
}

/// The test admitted and logged for a connection: a UDP rr test of the packet's length, both
/// ways (the log shows what came and what went).
fn spec_of(p: &Params, limits: &Limits) -> TestSpec {
    let mut spec = TestSpec::rr_default();
    let len = (p.length.max(0) as u64).max(p.min_data_len(false) as u64);
    spec.block_bytes = len;
    spec.direction = Direction::Bidir;
    if let Some(rr) = spec.rr.as_mut() {
        rr.udp = true;
        rr.request_bytes = len;
        rr.response_bytes = len;
    }
    spec.end = EndCondition::Seconds(if p.duration_ns > 0 {
        p.duration_ns as f64 / 1e9
    } else {
        limits.max_duration.map_or(0.0, |d| d.as_secs_f64())
    });
    spec
}

/// One irtt connection, from its open to its end.
pub(crate) struct IrttSession {
    from: SocketAddr,
    /// The HMAC key every packet must be signed with, if any.
    key: Option<Vec<u8>>,
    limits: Limits,
    tests: TestsByAddress,
    conn: Arc<Connection>,
    phase: SessionPhase,
    /// Bytes of the source's opens (those the listener counted before this session included)
    /// and of the open replies sent to it: a reply goes only while the second stays within
    /// the first.
    opens_in: usize,
    replies_out: usize,
    token: [u8; 8],
    granted: Option<Params>,
    /// The open reply, queued for the driver.
    output: Option<Vec<u8>>,
    events: VecDeque<ServerControlEvent>,
    /// What the connection counted, once it ended.
    counts: Option<Counts>,
    /// Why it ended without the client's close, if it did.
    ended: Option<String>,
}

impl IrttSession {
    /// A session for `from`, whose opens before the one handed next came to `earlier_opens`
    /// bytes; `conn` is shared with the listener's loop.
    pub(crate) fn new(
        from: SocketAddr,
        earlier_opens: usize,
        key: Option<Vec<u8>>,
        limits: Limits,
        tests: TestsByAddress,
        conn: Arc<Connection>,
    ) -> Self {
        Self {
            from,
            key,
            limits,
            tests,
            conn,
            phase: SessionPhase::new(Phase::Request),
            opens_in: earlier_opens,
            replies_out: 0,
            token: [0; 8],
            granted: None,
            output: None,
            events: VecDeque::new(),
            counts: None,
            ended: None,
        }
    }

    /// An open of `n` bytes asking for `asked`: the first asks for admission, a repeated one
    /// (its reply lost) gets the same reply within the byte rule.
    fn on_open(&mut self, n: usize, asked: Params) -> Result<(), ProtocolError> {
        if asked.protocol_version != irtt::PROTOCOL_VERSION {
            return Ok(());
        }
        self.opens_in += n;
        match self.phase.get() {
            Phase::Request => {
                let granted = grant(&asked, &self.limits);
                getrandom::getrandom(&mut self.token)
                    .map_err(|e| ProtocolError::Peer(format!("no random token for the connection: {e}")))?;
                if irtt::open_reply_keyed(self.token, &granted, self.key.as_deref()).len() > self.opens_in {
                    // The listener hands an open only once the opens add up; kept as a rule here.
                    return Ok(());
                }
                let spec = spec_of(&granted, &self.limits);
                // The session counts the requests itself (the listener's loop, in place): no
                // workers' streams.
                let run = TestSpec { streams: 0, ..spec.clone() };
                self.granted = Some(granted);
                self.phase.set(Phase::Asked);
                self.events.push_back(ServerControlEvent::Requested(Box::new(ServerRequest {
                    spec,
                    run: Some(run),
                    companion: None,
                    auth: None,
                    peer_software: None,
                    own_data_port: None,
                })));
            }
            Phase::Running => self.queue_reply(),
            Phase::Asked | Phase::Done => {}
        }
        Ok(())
    }

    /// Queues the open reply if the source's opens cover it.
    fn queue_reply(&mut self) {
        let Some(granted) = &self.granted else { return };
        let reply = irtt::open_reply_keyed(self.token, granted, self.key.as_deref());
        if self.replies_out + reply.len() <= self.opens_in {
            self.replies_out += reply.len();
            self.output = Some(reply);
        }
    }

    /// The connection ends: what it counted is kept for the report.
    fn end(&mut self, why: Option<String>) {
        if let Some(counts) = self.conn.end() {
            self.counts = Some(counts);
            if self.ended.is_none() {
                self.ended = why;
            }
        }
        self.phase.set(Phase::Done);
    }
}

impl ServerControl for IrttSession {
    fn protocol(&self) -> &'static str {
        NAME
    }
    fn handle_input(&mut self, _now: Instant, bytes: &[u8]) -> Result<(), ProtocolError> {
        match irtt::parse_request_keyed(bytes, self.key.as_deref()) {
            Ok(Request::Open(asked)) => self.on_open(bytes.len(), asked),
            Ok(Request::Close { token }) => {
                if self.phase.get() == Phase::Running && self.conn.is_token(token) {
                    self.end(None);
                }
                Ok(())
            }
            // Data requests are the listener's to answer; unsigned, forged or malformed
            // packets are dropped unanswered.
            Ok(Request::Data { .. }) | Err(_) => Ok(()),
        }
    }
    fn handle_eof(&mut self, _now: Instant) -> Result<(), ProtocolError> {
        // The listener let the source go: it is stopping.
        self.end(Some("the server is stopping".into()));
        Ok(())
    }
    fn poll_output(&mut self, out: &mut Vec<u8>) {
        // One datagram per flush: the driver sends what it is given as one.
        if let Some(reply) = self.output.take() {
            out.extend_from_slice(&reply);
        }
    }
    fn poll_event(&mut self) -> Option<ServerControlEvent> {
        self.events.pop_front()
    }
    fn poll_timeout(&self) -> Option<Instant> {
        (self.phase.get() == Phase::Running).then(|| self.conn.deadline(self.limits.idle_timeout)).flatten()
    }
    fn handle_timeout(&mut self, now: Instant) -> Result<(), ProtocolError> {
        if self.poll_timeout().is_some_and(|t| now >= t) {
            self.end(Some("no close from the client".into()));
        }
        Ok(())
    }
    fn admitted(&mut self, now: Instant, _admission: &Admission<'_>) {
        let Some(granted) = self.granted.clone() else { return };
        self.conn.open(self.token, granted, now);
        self.phase.set(Phase::Running);
        self.queue_reply();
    }
    fn turned_away(&mut self, _now: Instant, _why: &Refusal) {
        // irtt has no word for a refusal: the client's opens go unanswered (the log says why).
        self.phase.set(Phase::Done);
    }
    fn streams_connected(&mut self, _now: Instant) {}
    fn datagrams(&self) -> DatagramFormatKind {
        DatagramFormatKind::Native
    }
    fn phase(&self) -> Option<&SessionPhase> {
        Some(&self.phase)
    }
    fn finish(&mut self, _now: Instant, _records: &[StreamRecord], _cpu: CpuUsage, _error: Option<String>) {
        self.end(None);
    }
    fn stopping(&mut self, _now: Instant) {
        self.end(Some("the server is stopping".into()));
    }
    fn fail(&mut self, _now: Instant, message: &str) {
        self.end(Some(message.to_string()));
    }
    fn tests_by_address(&self) -> Option<TestsByAddress> {
        Some(self.tests.clone())
    }
    fn measures_itself(&self) -> bool {
        true
    }
    /// The requests received (up) and the replies sent (down), their counts as the rr
    /// figures' transactions, over the time from the open to the last request.
    fn complete_records(
        &mut self,
        _now: Instant,
        records: &mut Vec<StreamRecord>,
        data_paths: &mut Vec<(u32, SocketAddr)>,
    ) -> Option<String> {
        if let Some(counts) = self.conn.end() {
            self.counts = Some(counts);
        }
        let c = self.counts?;
        let seconds = c.last.saturating_duration_since(c.started).as_secs_f64();
        let mut up = StreamRecord::bare(1, Flow::Up, Role::Receiver, Endpoint::Server, c.received.1, seconds);
        up.rr = Some(RrFigures { transactions: c.received.0, ..RrFigures::default() });
        let mut down = StreamRecord::bare(2, Flow::Down, Role::Sender, Endpoint::Server, c.sent.1, seconds);
        down.rr = Some(RrFigures { transactions: c.sent.0, lost: c.dropped, ..RrFigures::default() });
        records.extend([up, down]);
        data_paths.push((1, self.from));
        match (self.ended.clone(), c.dropped) {
            (e, 0) => e,
            (e, n) => Some(format!(
                "{}{n} request(s) dropped unanswered (faster than the granted interval, too short for their \
                 reply, or over the reflection guard's budget)",
                e.map(|e| format!("{e}; ")).unwrap_or_default()
            )),
        }
    }
}
