//! irtt (the isochronous round-trip tester), the client role: `netchar rr --udp --proto irtt
//! HOST` against an unmodified `irtt server` (protocol version 1, Debian's irtt 0.9). The
//! codec is netchar_wire::irtt; the server role is crate::peers::irtt.
//!
//! There is no control connection (`ControlConnection::None`). The one UDP stream's setup
//! exchange ([`OpenExchange`]) is irtt's open: the test's parameters (duration from `-t`, the
//! interval, the packet length from `-l`, the received count and window and both timestamps
//! in every reply, the DSCP from `--tos`/`--dscp`), repeated after 1, 2 and 4 s as irtt's own
//! client does, until the server's open reply grants them and gives the connection's token.
//! A server that grants less than asked (its `-d`, `-l`, `--tstamp`, `--no-dscp`) refuses the
//! test with one line, as a stock client without `--loose` does; only a longer interval (its
//! `-i`) is taken, since `netchar rr` has no flag to ask for one.
//!
//! The data plane's UDP requester then sends irtt's data requests ([`IrttFraming`], behind
//! crate::dataplane::RrFraming): the token, the sequence number from 0 (its key, at offset
//! 12, or 28 when signed), one per interval on a fixed schedule whatever the answers, each
//! signed with HMAC-MD5 under the key when there is one (`--psk-file`: the secret of its line,
//! `0x...` read as hex, as irtt reads `--hmac`). Round trips are this end's own (monotonic
//! clock, like every rr test). From each reply it reads the server's receive and send stamps
//! on the wall clock: the send delay is the server's receive stamp less this end's send time,
//! the receive delay this end's read time less the server's send stamp, both on the realtime
//! clock, because the monotonic clocks of two hosts count from unrelated origins (their boot)
//! while wall clocks can be synchronised (NTP, PTP); on one host both ends read the same
//! clock. The window of the last 64 requests the server says it received splits the lost
//! round trips into requests that never arrived (up) and answers that never came back
//! (down); the last few, with no later reply, are counted as not known. A close ends the
//! server's connection after the last answer or timeout.

use crate::control::{ClientControl, ControlConnection, ControlEvent, OpenStream, PeerInfo, Transport, UdpHandshake};
use crate::dataplane::{DatagramFormatKind, RrFraming, RrFramingSlot, StreamOptions};
use crate::registry::{FarEndApplies, SessionArgs, SessionError};
use netchar_model::{
    Caveat, CpuUsage, Direction, EndCondition, FarEnd, Flow, LatencyUs, OneWayFigures, StreamTotal, TestKind, TestSpec,
};
use netchar_wire::irtt::{self, Params, ReceivedStats, Reply, ReplyFields, StampAt};
use netchar_wire::ProtocolError;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The interval asked for: irtt servers' default minimum (`irtt server -i 10ms`), so a stock
/// server grants it; a server with a longer minimum grants that, which is then taken.
const INTERVAL: Duration = Duration::from_millis(10);
/// When the open is sent again without an answer, after the first: irtt's client waits 1, 2,
/// 4 and 8 s; three retries (7 s in all) are enough to tell a silent server.
const OPEN_RETRIES: [Duration; 3] = [Duration::from_secs(1), Duration::from_secs(2), Duration::from_secs(4)];
/// How long after the last open the server may still answer it.
const OPEN_LAST_WAIT: Duration = Duration::from_secs(4);
/// How often the session looks whether the open was answered.
const TICK: Duration = Duration::from_millis(10);

/// The test a stock irtt server runs for `spec`: a UDP request/response test, one way, on one
/// connection, for `-t` seconds, its replies as long as its requests; `-l` below the
/// shortest packet that carries the reply's fields is taken up to it (irtt's `-l 0`).
pub(crate) fn shape(spec: &TestSpec) -> Result<TestSpec, SessionError> {
    let refuse = |flag: &'static str, what: &str| Err(SessionError::option(flag, format!("--proto irtt: {what}")));
    if let Some(flag) = crate::registry::netchar_server_feature(spec) {
        return refuse(flag, "--server-load, --idle and a server CPU in -A are netchar server features");
    }
    let Some(rr) = spec.rr.as_ref().filter(|_| spec.kind == TestKind::Rr) else {
        return Err(SessionError::Unsupported("--proto irtt runs request/response tests: `netchar rr --udp`".into()));
    };
    if !rr.udp {
        return refuse("--udp", "irtt is UDP only; add --udp");
    }
    if spec.direction != Direction::Up {
        return refuse("-R", "-R and --bidir do not apply: irtt's replies answer its requests");
    }
    if spec.streams != 1 {
        return refuse("-P", "one irtt connection per test (run several tests for more)");
    }
    if !matches!(spec.end, EndCondition::Seconds(s) if s > 0.0) {
        return refuse("-n", "an irtt test lasts a duration its open names: use -t, not -n");
    }
    if rr.inflight != 1 || rr.pause_every.is_some() {
        return refuse("--inflight", "irtt sends one request per interval whatever the answers; leave --inflight out");
    }
    if rr.response_bytes != rr.request_bytes {
        return refuse("--response", "an irtt server answers each request at its own length; leave --response out");
    }
    let mut s = spec.clone();
    let len = rr.request_bytes.max(asked_params(spec, None).min_data_len(false) as u64);
    if let Some(rr) = s.rr.as_mut() {
        (rr.request_bytes, rr.response_bytes) = (len, len);
    }
    s.block_bytes = len;
    Ok(s)
}

/// The registry's session constructor (crate::protocols).
pub(crate) fn client_session(a: &SessionArgs<'_>) -> Result<Box<dyn ClientControl>, SessionError> {
    let spec = shape(a.spec)?;
    let key = match &a.cfg.auth {
        Some(c) => Some(irtt::hmac_key(&c.secret).map_err(|e| {
            SessionError::option("--psk-file", format!("--proto irtt: the key of --psk-file's line: {e}"))
        })?),
        None => None,
    };
    Ok(Box::new(IrttControl::new(a.now, spec, key)))
}

/// What the far end reports: nothing of its own per flow; its counts and stamps come in every
/// reply and are read into the round trips' figures.
pub(crate) fn measurement(_: &TestSpec) -> (FarEnd, Vec<Caveat>) {
    (
        FarEnd::SilentOn(vec![Flow::Up]),
        vec![Caveat::always(
            None,
            "the irtt server's own figures are in its replies: rr.one_way has the send and receive delays (wall \
             clocks) and the lost round trips split up and down by its count of requests received",
        )],
    )
}

/// The server sets the DSCP its client names on its replies (unless run with `--no-dscp`,
/// which it says by granting none: the test is then refused).
pub(crate) fn far_end_applies(_: &TestSpec) -> FarEndApplies {
    FarEndApplies::TOS
}

/// The parameters asked for a test of `spec`.
fn asked_params(spec: &TestSpec, key: Option<&[u8]>) -> Params {
    let seconds = match spec.end {
        EndCondition::Seconds(s) => s,
        _ => 0.0,
    };
    let mut p = Params {
        protocol_version: irtt::PROTOCOL_VERSION,
        duration_ns: (seconds * 1e9) as i64,
        interval_ns: INTERVAL.as_nanos() as i64,
        stats: ReceivedStats { count: true, window: true },
        stamp_at: StampAt::Both,
        wall: true,
        monotonic: true,
        dscp: i64::from(spec.ip.tos.unwrap_or(0) >> 2),
        ..Params::default()
    };
    let asked = spec.rr.as_ref().map_or(0, |r| r.request_bytes) as usize;
    p.length = asked.max(p.min_data_len(key.is_some())) as i64;
    p
}

/// What the open exchange learned, shared by the session and the stream's setup.
#[derive(Default)]
struct Opening {
    /// The server's token and the parameters it granted.
    granted: Option<([u8; 8], Params)>,
    /// Opens sent so far.
    sent: usize,
}

/// netchar as the client of an irtt server.
pub struct IrttControl {
    spec: TestSpec,
    asked: Params,
    key: Option<Vec<u8>>,
    opening: Arc<Mutex<Opening>>,
    events: VecDeque<ControlEvent>,
    admitted: bool,
    started: bool,
    reported: bool,
    created: Instant,
    /// When the session next looks whether the open was answered.
    next_look: Instant,
}

impl IrttControl {
    /// A session for `spec` (as [`shape`] made it), signing with `key` if given.
    pub fn new(now: Instant, spec: TestSpec, key: Option<Vec<u8>>) -> Self {
        let asked = asked_params(&spec, key.as_deref());
        Self {
            spec,
            asked,
            key,
            opening: Arc::default(),
            events: VecDeque::new(),
            admitted: false,
            started: false,
            reported: false,
            created: now,
            next_look: now,
        }
    }

    /// Why the granted parameters cannot run the test asked for, if they cannot.
    fn refusal(&self, granted: &Params) -> Option<String> {
        let a = &self.asked;
        let secs = |ns: i64| ns as f64 / 1e9;
        if granted.duration_ns != a.duration_ns {
            return Some(format!(
                "the irtt server grants tests of at most {:.3} s (its -d), not the {:.3} s asked: run with -t {}",
                secs(granted.duration_ns),
                secs(a.duration_ns),
                secs(granted.duration_ns)
            ));
        }
        if granted.length != a.length {
            return Some(format!(
                "the irtt server takes packets of at most {} bytes (its -l), not the {} asked: run with -l {}",
                granted.length, a.length, granted.length
            ));
        }
        if (granted.stats, granted.stamp_at, granted.wall) != (a.stats, a.stamp_at, a.wall) {
            return Some(
                "the irtt server does not give the received count, the window and both timestamps on the wall clock \
                 in its replies (its --tstamp): the one-way delays and loss split need them"
                    .into(),
            );
        }
        if granted.dscp != a.dscp {
            return Some(format!(
                "the irtt server does not set DSCP {} on its replies (run with --no-dscp): leave --tos/--dscp out",
                a.dscp
            ));
        }
        if granted.interval_ns < a.interval_ns || granted.protocol_version != a.protocol_version {
            return Some(format!("the irtt server granted parameters it was not asked for: {granted:?}"));
        }
        None
    }

    fn report(&mut self) {
        if !self.reported {
            self.reported = true;
            self.events.push_back(ControlEvent::PeerReport {
                streams: Vec::new(),
                cpu: CpuUsage::default(),
                error: None,
            });
        }
    }

    /// When the last open has waited long enough for its answer.
    fn open_deadline(&self) -> Instant {
        self.created + OPEN_RETRIES.iter().sum::<Duration>() + OPEN_LAST_WAIT
    }
}

impl ClientControl for IrttControl {
    fn handle_input(&mut self, _now: Instant, _bytes: &[u8]) -> Result<(), ProtocolError> {
        Ok(())
    }
    fn handle_eof(&mut self, _now: Instant) -> Result<(), ProtocolError> {
        Ok(())
    }
    fn poll_output(&mut self, _out: &mut Vec<u8>) {}
    fn poll_event(&mut self) -> Option<ControlEvent> {
        if !self.admitted {
            self.admitted = true;
            let handshake = OpenExchange {
                open: irtt::open_request(&self.asked, self.key.as_deref()),
                asked: self.asked.clone(),
                key: self.key.clone(),
                opening: Arc::clone(&self.opening),
                created: self.created,
            };
            self.events.push_back(ControlEvent::Admitted {
                streams: vec![OpenStream {
                    id: 1,
                    flow: Flow::Up,
                    transport: Transport::Udp { handshake: Box::new(handshake) },
                }],
                peer: PeerInfo {
                    concurrent_tests: 1,
                    software: Some(format!("irtt (protocol version {})", irtt::PROTOCOL_VERSION)),
                    ..PeerInfo::default()
                },
                cookie: None,
            });
        }
        self.events.pop_front()
    }
    fn poll_timeout(&self) -> Option<Instant> {
        // Until the open is answered, look often: the test starts as soon as it is.
        (self.admitted && !self.started && !self.reported).then_some(self.next_look)
    }
    fn handle_timeout(&mut self, now: Instant) -> Result<(), ProtocolError> {
        if self.started || self.reported {
            return Ok(());
        }
        self.next_look = now + TICK;
        let (granted, sent) = {
            let o = self.opening.lock().map_err(|_| ProtocolError::Peer("irtt open state poisoned".into()))?;
            (o.granted.clone(), o.sent)
        };
        match granted {
            Some((_, params)) => {
                if let Some(why) = self.refusal(&params) {
                    return Err(ProtocolError::Rejected(why));
                }
                self.started = true;
                self.events.push_back(ControlEvent::Start);
                Ok(())
            }
            None if now >= self.open_deadline() => Err(ProtocolError::Timeout(format!(
                "no answer from the irtt server to {sent} opens in {:.0} s: none is listening there, or it wants an \
                 HMAC key other than the one given (irtt server --hmac; here --psk-file's secret{})",
                (self.open_deadline() - self.created).as_secs_f64(),
                if self.key.is_some() { "" } else { ": none was given" }
            ))),
            None => Ok(()),
        }
    }
    fn local_senders_done(&mut self, _now: Instant, _totals: Vec<StreamTotal>) {
        self.report();
    }
    fn stop(&mut self, _now: Instant, _reason: &str) {
        self.report();
    }
    fn is_done(&self) -> bool {
        self.reported
    }
    fn datagrams(&self) -> DatagramFormatKind {
        // The replies return each request's sequence number (at the framing's offset).
        DatagramFormatKind::Native
    }
    fn connection(&self) -> ControlConnection {
        ControlConnection::None
    }
    fn stream_options(&self) -> StreamOptions {
        let granted = self.opening.lock().ok().and_then(|o| o.granted.clone());
        let Some((token, params)) = granted else { return StreamOptions::default() };
        let framing = IrttFraming::new(token, params, self.key.clone(), &self.spec);
        StreamOptions { rr_framing: Some(RrFramingSlot::new(Box::new(framing))), ..StreamOptions::default() }
    }
}

/// irtt's open, as the stream's setup exchange: sent at once and again after 1, 2 and 4 s,
/// done when the server's open reply (signed under the key, if there is one) arrives.
struct OpenExchange {
    open: Vec<u8>,
    asked: Params,
    key: Option<Vec<u8>>,
    opening: Arc<Mutex<Opening>>,
    created: Instant,
}

impl UdpHandshake for OpenExchange {
    fn datagram(&self) -> Vec<u8> {
        self.open.clone()
    }
    fn on_datagram(&mut self, bytes: &[u8]) -> bool {
        if let Ok(Reply::Open(token, params)) = irtt::parse_reply(bytes, &self.asked, self.key.as_deref()) {
            if let Ok(mut o) = self.opening.lock() {
                o.granted.get_or_insert((token, params));
            }
        }
        false
    }
    fn answered(&self) -> bool {
        self.opening.lock().map_or(true, |o| o.granted.is_some())
    }
    fn due(&mut self, now: Instant) -> bool {
        let Ok(mut o) = self.opening.lock() else { return false };
        let at = self.created + OPEN_RETRIES.iter().take(o.sent).sum::<Duration>();
        let due = o.sent <= OPEN_RETRIES.len() && now >= at;
        if due {
            o.sent += 1;
        }
        due
    }
}

/// irtt's data requests for the rr requester, and what its replies say.
struct IrttFraming {
    token: [u8; 8],
    params: Params,
    key: Option<Vec<u8>>,
    len: usize,
    /// The reply just accepted, read once for [`RrFraming::answered`].
    last: Option<ReplyFields>,
    send_delays: Vec<i64>,
    receive_delays: Vec<i64>,
    /// By sequence number: whether it was answered, and what the server's windows said of it.
    answered: Vec<bool>,
    server_got: Vec<Option<bool>>,
    peer_received: u64,
}

impl IrttFraming {
    fn new(token: [u8; 8], params: Params, key: Option<Vec<u8>>, spec: &TestSpec) -> Self {
        let asked = spec.rr.as_ref().map_or(0, |r| r.request_bytes) as usize;
        let len = asked.max(params.length as usize).max(params.min_data_len(key.is_some()));
        Self {
            token,
            params,
            key,
            len,
            last: None,
            send_delays: Vec::new(),
            receive_delays: Vec::new(),
            answered: Vec::new(),
            server_got: Vec::new(),
            peer_received: 0,
        }
    }

    /// Marks what a reply to `sequence` with `window` says the server received.
    fn read_window(&mut self, sequence: u64, window: u64) {
        for i in 0..64u64.min(sequence + 1) {
            let s = (sequence - i) as usize;
            if s >= self.server_got.len() {
                self.server_got.resize(s + 1, None);
            }
            let got = window & (1 << i) != 0;
            // A later reply's "received" stands; a "not received" may be one still on its way.
            self.server_got[s] = Some(self.server_got[s] == Some(true) || got);
        }
    }
}

/// Percentiles of signed one-way delays (ns; negative where the two hosts' wall clocks
/// disagree by more than the delay), exact from every value.
fn delay_figures(values: &mut [i64]) -> LatencyUs {
    if values.is_empty() {
        return LatencyUs::default();
    }
    values.sort_unstable();
    let us = |ns: i64| ns as f64 / 1e3;
    let n = values.len();
    let at = |q: f64| us(values[((q * n as f64).ceil() as usize).clamp(1, n) - 1]);
    let mean = values.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
    let var = values.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n as f64;
    LatencyUs {
        min: us(values[0]),
        mean: mean / 1e3,
        stddev: var.sqrt() / 1e3,
        p50: at(0.5),
        p90: at(0.9),
        p99: at(0.99),
        p999: at(0.999),
        max: us(values[n - 1]),
    }
}

impl RrFraming for IrttFraming {
    fn template(&self) -> Vec<u8> {
        irtt::data_request(self.token, 0, self.len, self.key.is_some())
    }
    fn key_at(&self) -> (usize, usize) {
        (irtt::sequence_at(self.key.is_some()), 4)
    }
    fn interval(&self) -> Option<Duration> {
        Some(Duration::from_nanos(self.params.interval_ns.max(1) as u64))
    }
    fn seal(&mut self, request: &mut [u8]) {
        if let Some(k) = &self.key {
            irtt::sign(request, k);
        }
    }
    fn accepts(&mut self, answer: &[u8]) -> bool {
        let at = irtt::body_at(self.key.is_some());
        self.last = match irtt::parse_reply(answer, &self.params, self.key.as_deref()) {
            Ok(Reply::Data { fields, .. }) if answer[at..at + irtt::TOKEN_LEN] == self.token => Some(fields),
            _ => None,
        };
        self.last.is_some()
    }
    fn answered(&mut self, sequence: u64, sent_real_ns: u64, read_real_ns: u64, _answer: &[u8]) {
        let Some(f) = self.last.take() else { return };
        self.send_delays.push(f.received_at.wall - sent_real_ns as i64);
        self.receive_delays.push(read_real_ns as i64 - f.sent_at.wall);
        self.peer_received = self.peer_received.max(u64::from(f.received));
        let s = sequence as usize;
        if s >= self.answered.len() {
            self.answered.resize(s + 1, false);
        }
        self.answered[s] = true;
        self.read_window(sequence, f.window);
    }
    fn finish(&mut self, requests: u64) -> (Vec<Vec<u8>>, Option<OneWayFigures>) {
        let mut one_way = OneWayFigures {
            clock: "wall".into(),
            send_delay_us: delay_figures(&mut self.send_delays),
            receive_delay_us: delay_figures(&mut self.receive_delays),
            peer_received: self.peer_received,
            ..OneWayFigures::default()
        };
        for s in 0..requests as usize {
            if self.answered.get(s).copied().unwrap_or(false) {
                continue;
            }
            match self.server_got.get(s).copied().flatten() {
                Some(true) => one_way.lost_down += 1,
                Some(false) => one_way.lost_up += 1,
                None => one_way.lost_unknown += 1,
            }
        }
        (vec![irtt::close_request(self.token, self.key.as_deref())], Some(one_way))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rr_spec(seconds: f64, len: u64) -> TestSpec {
        let mut spec = TestSpec::rr_default();
        spec.end = EndCondition::Seconds(seconds);
        if let Some(rr) = spec.rr.as_mut() {
            (rr.udp, rr.request_bytes, rr.response_bytes) = (true, len, len);
        }
        spec
    }

    #[test]
    fn the_shape_takes_a_short_length_up_to_the_reply_and_refuses_what_irtt_has_not() {
        let s = shape(&rr_spec(2.0, 1)).unwrap();
        assert_eq!(s.rr.as_ref().unwrap().request_bytes, 60, "irtt's default packet: room for the reply");
        assert_eq!(shape(&rr_spec(2.0, 200)).unwrap().rr.unwrap().response_bytes, 200);
        let mut tcp = rr_spec(2.0, 1);
        tcp.rr.as_mut().unwrap().udp = false;
        assert_eq!(shape(&tcp).unwrap_err().flag(), Some("--udp"));
        let mut count = rr_spec(2.0, 1);
        count.end = EndCondition::Bytes(100);
        assert_eq!(shape(&count).unwrap_err().flag(), Some("-n"));
        let mut response = rr_spec(2.0, 100);
        response.rr.as_mut().unwrap().response_bytes = 10;
        assert_eq!(shape(&response).unwrap_err().flag(), Some("--response"));
    }

    #[test]
    fn a_restricted_grant_is_refused_with_what_to_run_instead() {
        let c = IrttControl::new(Instant::now(), shape(&rr_spec(5.0, 1)).unwrap(), None);
        assert_eq!(c.refusal(&c.asked), None);
        let shorter = Params { duration_ns: 1_000_000_000, ..c.asked.clone() };
        assert!(c.refusal(&shorter).unwrap().ends_with("run with -t 1"), "{:?}", c.refusal(&shorter));
        let slower = Params { interval_ns: 50_000_000, ..c.asked.clone() };
        assert_eq!(c.refusal(&slower), None, "a longer interval is taken");
        let no_stamps = Params { stamp_at: StampAt::None, ..c.asked.clone() };
        assert!(c.refusal(&no_stamps).is_some());
    }

    #[test]
    fn windows_split_the_lost_round_trips_up_and_down_and_the_tail_is_unknown() {
        let mut f = IrttFraming::new([1; 8], asked_params(&rr_spec(1.0, 60), None), None, &rr_spec(1.0, 60));
        // Requests 0..10: 3 never reached the server, 5's reply was lost, 9 (the last) is lost
        // with no reply after it.
        let mut got = 0u64;
        for s in 0..9u64 {
            if s == 3 {
                continue;
            }
            got += 1;
            let window = (0..=s).filter(|&i| i != 3).fold(0u64, |w, i| w | 1 << (s - i));
            if s == 5 {
                f.read_window(s, window); // seen in a later reply's window only
                continue;
            }
            f.last = Some(ReplyFields { received: got as u32, window, ..ReplyFields::default() });
            f.answered(s, 1_000, 3_000, &[]);
        }
        let (closing, one_way) = f.finish(10);
        let o = one_way.unwrap();
        assert_eq!((o.lost_up, o.lost_down, o.lost_unknown, o.peer_received), (1, 1, 1, 8));
        assert_eq!(closing, vec![irtt::close_request([1; 8], None)]);
    }

    #[test]
    fn delay_percentiles_are_exact_and_keep_negative_delays() {
        let mut v: Vec<i64> = (1..=1000).map(|i| i * 1000 - 100_000).collect();
        let d = delay_figures(&mut v);
        assert_eq!((d.min, d.p50, d.p99, d.max), (-99.0, 400.0, 890.0, 900.0));
    }
}
