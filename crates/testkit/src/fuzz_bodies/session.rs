//! The server and client session bodies, and the invariants every step of either keeps.

use super::script::*;
use netchar_model::{CpuUsage, HostInfo, TestSpec};
use netchar_wire::auth::KeyTable;
use netchar_wire::codec::{FrameDecoder, MAX_CLIENT_FRAME, MAX_SERVER_FRAME};
use netchar_wire::hello::{Hello, HELLO_LEN};
use netchar_wire::message::{ClientMessage, ServerMessage};
use netchar_wire::session::{ClientEvent, ClientSession, ServerEvent, ServerSession, Timeouts};
use netchar_wire::ProtocolError;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What every step of either session must keep true, whichever side it is.
struct Watch {
    timeouts: Timeouts,
    steps: usize,
    input_bytes: usize,
    output_bytes: usize,
    output: Vec<u8>,
    hello_checked: bool,
    frames: FrameDecoder,
    was_done: bool,
}

impl Watch {
    fn new(timeouts: Timeouts, cap: u32) -> Self {
        Self {
            timeouts,
            steps: 0,
            input_bytes: 0,
            output_bytes: 0,
            output: Vec::new(),
            hello_checked: false,
            frames: FrameDecoder::new(cap),
            was_done: false,
        }
    }

    /// Checks one step's output, events, timer and end: `timer` is the result of a
    /// `handle_timeout(now)` made in the step.
    fn step(
        &mut self,
        now: Instant,
        out: &[u8],
        events: usize,
        done: bool,
        deadline: Option<Instant>,
        timer: Option<&Result<(), ProtocolError>>,
    ) {
        self.steps += 1;
        if self.was_done {
            assert!(done, "a finished session came back to life");
            assert!(out.is_empty(), "a finished session sent {} bytes", out.len());
            assert_eq!(events, 0, "a finished session raised events");
        }
        self.was_done = done;
        self.output_bytes += out.len();
        let allowed = HELLO_LEN + STEP_OUTPUT * self.steps + OUTPUT_PER_INPUT_BYTE * self.input_bytes;
        assert!(self.output_bytes <= allowed, "{} bytes out for {} in", self.output_bytes, self.input_bytes);
        if done {
            assert_eq!(deadline, None, "a finished session wants a timer");
        }
        if let Some(t) = deadline {
            assert!(t <= now + longest(&self.timeouts), "a deadline beyond every timeout");
            if matches!(timer, Some(Ok(()))) {
                assert!(t > now, "the timer fired at its deadline and asks to fire again at once");
            }
        }
        self.output.extend_from_slice(out);
    }

    /// The first 40 bytes the session sent, once they are all there.
    fn hello(&mut self) -> Option<[u8; HELLO_LEN]> {
        if self.hello_checked || self.output.len() < HELLO_LEN {
            return None;
        }
        self.hello_checked = true;
        let rest = self.output.split_off(HELLO_LEN);
        let hello = std::mem::replace(&mut self.output, rest);
        Some(hello.try_into().expect("40 bytes"))
    }

    /// The whole frames the session sent after its hello.
    fn frames(&mut self) -> Vec<Vec<u8>> {
        if !self.hello_checked {
            return Vec::new();
        }
        self.frames.push(&std::mem::take(&mut self.output));
        let mut out = Vec::new();
        while let Some(f) = self.frames.next_frame().expect("the session's own frames fit the peer's cap") {
            out.push(f);
        }
        out
    }
}

/// What the server session's driver has seen so far.
#[derive(Default)]
struct ServerSeen {
    requested: bool,
    started: bool,
    ended: bool,
}

/// The server's session fed anything a client might send, interleaved with time, timers and
/// the driver's calls. No panic; its output is its hello then well-formed server messages,
/// bounded by its input and steps; it ends exactly when it sends a final message (busy,
/// rejected, results, error), then stays ended and silent; its events come in protocol order
/// (a request that validates and, with keys, authenticates; then start); its timer always
/// moves on; and left alone it ends, or waits for the driver, or reports the silent client.
pub fn server_session(input: &ServerInput) {
    let mut now = Instant::now();
    let timeouts = timeouts_of(input.timeouts);
    let keys = input.auth.then(|| Arc::new(KeyTable::new(vec![credentials()])));
    let hello = match input.hello {
        HelloPick::Control => Hello::control(),
        HelloPick::Version(v) => Hello { version: v, ..Hello::control() },
        HelloPick::Data => Hello::data([1; 16], 1),
    };
    let mut s = match ServerSession::with_auth(now, &hello, timeouts, SERVER_NONCE, keys) {
        Ok(s) => s,
        Err(refused) => refused.0,
    };
    let mut watch = Watch::new(timeouts, MAX_SERVER_FRAME);
    let mut seen = ServerSeen::default();
    server_step(&mut s, &mut watch, &mut seen, input.auth, now, None);
    for step in &input.steps {
        let mut timer = None;
        match step {
            ServerStep::Bytes(b) => {
                watch.input_bytes += b.len();
                let _ = s.handle_input(now, b);
            }
            ServerStep::Send(msg, how) => {
                for chunk in deliver(client_bytes(msg), how) {
                    watch.input_bytes += chunk.len();
                    let _ = s.handle_input(now, &chunk);
                }
            }
            ServerStep::Wait(ms) => {
                now = later(now, *ms);
                timer = Some(s.handle_timeout(now));
            }
            ServerStep::Advance(ms) => now = later(now, *ms),
            ServerStep::WaitForDeadline => {
                now = s.poll_timeout().map_or(now, |t| t.max(now));
                timer = Some(s.handle_timeout(now));
            }
            ServerStep::Admit(port) => s.admit(now, &[0xc0; 16], 1, HostInfo::default(), *port),
            ServerStep::Busy(reason) => s.refuse_busy(now, 1, 1, reason.then(|| "--max-per-source".into())),
            ServerStep::Reject => s.reject(now, "fuzz: over a limit"),
            ServerStep::StreamsConnected => s.streams_connected(now),
            ServerStep::SendersDone(n) => s.local_senders_done(now, totals(*n)),
            ServerStep::Finish(error) => s.finish(now, Vec::new(), CpuUsage::default(), error.then(|| "fuzz".into())),
            ServerStep::Error => s.error(now, "fuzz"),
            ServerStep::Eof => {
                let _ = s.handle_eof(now);
            }
        }
        server_step(&mut s, &mut watch, &mut seen, input.auth, now, timer.as_ref());
    }
    // Left alone past every deadline: the slowloris promise (docs/reliability.md).
    now += longest(&timeouts) + Duration::from_millis(1);
    let timer = s.handle_timeout(now);
    let waits_for_driver = !s.is_done() && s.poll_timeout().is_none();
    assert!(
        s.is_done() || waits_for_driver || matches!(timer, Err(ProtocolError::Timeout(_))),
        "a server session outlived its deadlines: {timer:?}"
    );
    server_step(&mut s, &mut watch, &mut seen, input.auth, now, Some(&timer));
}

fn server_step(
    s: &mut ServerSession,
    watch: &mut Watch,
    seen: &mut ServerSeen,
    auth: bool,
    now: Instant,
    timer: Option<&Result<(), ProtocolError>>,
) {
    let mut out = Vec::new();
    s.poll_output(&mut out);
    let mut events = 0;
    while let Some(e) = s.poll_event() {
        events += 1;
        match e {
            ServerEvent::Requested { spec, auth: who, .. } => {
                assert!(!seen.requested, "two requests on one session");
                assert!(spec.validate().is_ok(), "the server passed on an invalid spec");
                assert_eq!(who.is_some(), auth, "authentication was skipped or invented");
                seen.requested = true;
            }
            ServerEvent::Start => {
                assert!(seen.requested && !seen.started, "start out of order");
                seen.started = true;
            }
            ServerEvent::PeerSenderDone(_) | ServerEvent::StopRequested(_) => {
                assert!(seen.requested, "a test event before the request")
            }
        }
    }
    watch.step(now, &out, events, s.is_done(), s.poll_timeout(), timer);
    if let Some(h) = watch.hello() {
        assert_eq!(h, Hello::server_with_nonce(SERVER_NONCE, auth).encode(), "the server's hello");
    }
    for f in watch.frames() {
        let m = ServerMessage::decode(&f).expect("the server sends only server messages");
        assert!(!seen.ended, "the server sent {} after its final message", m.name());
        seen.ended = matches!(
            m,
            ServerMessage::Busy { .. }
                | ServerMessage::Rejected { .. }
                | ServerMessage::Results { .. }
                | ServerMessage::Error { .. }
        );
    }
    assert_eq!(s.is_done(), seen.ended, "the session ended without a final message, or did not end after one");
}

/// What the client session's driver has seen so far.
#[derive(Default)]
struct ClientSeen {
    accepted: bool,
    started: bool,
    ended: bool,
    requests: usize,
    starts: usize,
}

/// The client's session fed anything a server (or whatever answers on the port) might send,
/// interleaved with time, timers and the driver's calls. No panic; its output is its hello,
/// then client messages that fit the server's cap, one request after the server's hello and
/// one start, bounded by its steps whatever arrives; it stays ended and silent once ended; its
/// events come in protocol order (accepted, with the session key when authenticating; started;
/// finished or busy last); its timer always moves on; and left alone it ends.
pub fn client_session(input: &ClientInput) {
    let mut now = Instant::now();
    let timeouts = timeouts_of(input.timeouts);
    let auth = input.auth.then(|| (credentials(), CLIENT_NONCE));
    let mut c = ClientSession::with_auth(now, TestSpec::tcp_default(), timeouts, None, auth);
    // The client's output never grows with what arrives: its input is not counted, so the
    // output allowance is per step only.
    let mut watch = Watch::new(timeouts, MAX_CLIENT_FRAME);
    let mut seen = ClientSeen::default();
    client_step(&mut c, &mut watch, &mut seen, input.auth, now, None);
    for step in &input.steps {
        let mut timer = None;
        match step {
            ClientStep::Bytes(b) => {
                let _ = c.handle_input(now, b);
            }
            ClientStep::Send(msg, how) => {
                for chunk in deliver(server_bytes(msg), how) {
                    let _ = c.handle_input(now, &chunk);
                }
            }
            ClientStep::Wait(ms) => {
                now = later(now, *ms);
                timer = Some(c.handle_timeout(now));
            }
            ClientStep::Advance(ms) => now = later(now, *ms),
            ClientStep::WaitForDeadline => {
                now = c.poll_timeout().map_or(now, |t| t.max(now));
                timer = Some(c.handle_timeout(now));
            }
            ClientStep::SendersDone(n) => c.local_senders_done(now, totals(*n)),
            ClientStep::Stop => c.stop(now, "fuzz"),
            ClientStep::Eof => {
                let _ = c.handle_eof(now);
            }
        }
        client_step(&mut c, &mut watch, &mut seen, input.auth, now, timer.as_ref());
    }
    now += longest(&timeouts) + Duration::from_millis(1);
    let timer = c.handle_timeout(now);
    assert!(c.is_done(), "a client session outlived its deadlines: {timer:?}");
    client_step(&mut c, &mut watch, &mut seen, input.auth, now, Some(&timer));
}

fn client_step(
    c: &mut ClientSession,
    watch: &mut Watch,
    seen: &mut ClientSeen,
    auth: bool,
    now: Instant,
    timer: Option<&Result<(), ProtocolError>>,
) {
    let mut out = Vec::new();
    c.poll_output(&mut out);
    let mut events = 0;
    let mut started_now = false;
    while let Some(e) = c.poll_event() {
        events += 1;
        assert!(!seen.ended, "an event after the test ended");
        match e {
            ClientEvent::Accepted { session_key, .. } => {
                assert!(!seen.accepted, "accepted twice");
                assert_eq!(session_key.is_some(), auth, "a session key without authentication, or none with it");
                seen.accepted = true;
            }
            ClientEvent::Busy { .. } => {
                assert!(!seen.accepted, "busy after accepted");
                seen.ended = true;
            }
            ClientEvent::Started => {
                assert!(seen.accepted && !seen.started, "started out of order");
                seen.started = true;
                started_now = true;
            }
            // Not "after started": a client that stops before the server is ready counts the test
            // as running, to wait for its results, and takes the server's totals then too.
            ClientEvent::PeerSenderDone(_) => {
                assert!(seen.accepted, "the server's totals before the test was accepted")
            }
            ClientEvent::Finished { .. } => {
                assert!(seen.accepted, "results before the test was accepted");
                seen.ended = true;
            }
        }
    }
    watch.step(now, &out, events, c.is_done(), c.poll_timeout(), timer);
    if let Some(h) = watch.hello() {
        assert_eq!(h, Hello::control().encode(), "the client's hello");
    }
    for f in watch.frames() {
        match ClientMessage::decode(&f).expect("the client sends only client messages") {
            ClientMessage::Request { .. } => seen.requests += 1,
            ClientMessage::Start => {
                assert!(started_now, "start sent without telling the driver");
                seen.starts += 1;
            }
            _ => assert_eq!(seen.requests, 1, "a message before the request"),
        }
        assert!(seen.requests <= 1 && seen.starts <= 1, "a second request or start");
    }
    if seen.ended {
        assert!(c.is_done(), "the test ended and the session goes on");
    }
}
