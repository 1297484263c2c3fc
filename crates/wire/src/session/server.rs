//! The server's side of control protocol v1.
//!
//! The listener reads the 40-byte hello itself (it must tell control from data connections),
//! so a server session starts from an already decoded hello.

use super::{Liveness, Timeouts};
use crate::auth::{Exchange, KeyTable};
use crate::codec::{encode_frame, FrameDecoder, MAX_CLIENT_FRAME};
use crate::hello::{Hello, Role};
use crate::message::{cookie_to_hex, AuthProof, ClientMessage, ServerMessage};
use crate::{ProtocolError, PROTOCOL_VERSION};
use netchar_model::{CpuUsage, Evidence, HostIdentity, HostInfo, StreamRecord, StreamTotal, TestSpec};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

/// What the server's driver must do next.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerEvent {
    /// A valid test was requested: answer with [`ServerSession::admit`] or [`ServerSession::busy`].
    Requested {
        /// The test.
        spec: Box<TestSpec>,
        /// The cookie of a running test this one accompanies (latency under load).
        companion: Option<[u8; 16]>,
        /// The authenticated user and the key that tags this test's data streams; `None`
        /// when the server does not require authentication.
        auth: Option<(String, [u8; 32])>,
        /// The client's version as it told it (64 characters at most).
        client_version: String,
    },
    /// The client said start: start the clocks and workers.
    Start,
    /// The client's senders finished with these exact totals.
    PeerSenderDone(Vec<StreamTotal>),
    /// The client asked to stop now.
    StopRequested(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    AwaitRequest,
    AwaitAdmission,
    AwaitStreams,
    AwaitStart,
    Running,
    Done,
}

impl State {
    fn describe(self) -> &'static str {
        match self {
            Self::AwaitRequest => "waiting for the test request",
            Self::AwaitAdmission => "deciding whether to admit the test",
            Self::AwaitStreams => "waiting for the data connections",
            Self::AwaitStart => "waiting for start",
            Self::Running => "the test was running",
            Self::Done => "the session was over",
        }
    }
}

/// The server's control session with one client.
#[derive(Debug)]
pub struct ServerSession {
    state: State,
    timeouts: Timeouts,
    decoder: FrameDecoder,
    out: Vec<u8>,
    events: VecDeque<ServerEvent>,
    live: Liveness,
    phase_deadline: Instant,
    /// The nonce sent in our hello; the client's proof must be computed over it.
    nonce: [u8; 16],
    /// The keys of the users allowed to run tests; `None`: anyone may.
    keys: Option<Arc<KeyTable>>,
    /// The server's proof for `accepted`, once the client authenticated.
    server_proof: Option<[u8; 32]>,
    /// This end's counters and settings, for `results` ([`Self::set_evidence`]).
    evidence: (Option<Evidence>, Option<HostIdentity>),
}

impl ServerSession {
    /// Starts from the client's decoded hello, without authentication. A wrong version or
    /// role is answered (our hello, then an error message, so the client can say what it
    /// found) and returned as an error.
    pub fn new(now: Instant, hello: &Hello, timeouts: Timeouts) -> Result<Self, Box<(Self, ProtocolError)>> {
        Self::with_auth(now, hello, timeouts, [0; 16], None)
    }

    /// Like [`Self::new`]; with `keys`, only a request carrying a valid proof of one user's
    /// key over `nonce` (fresh random bytes for each connection) is taken.
    pub fn with_auth(
        now: Instant,
        hello: &Hello,
        timeouts: Timeouts,
        nonce: [u8; 16],
        keys: Option<Arc<KeyTable>>,
    ) -> Result<Self, Box<(Self, ProtocolError)>> {
        let mut s = Self {
            state: State::AwaitRequest,
            timeouts,
            decoder: FrameDecoder::new(MAX_CLIENT_FRAME),
            out: Hello::server_with_nonce(nonce, keys.is_some()).encode().to_vec(),
            events: VecDeque::new(),
            live: Liveness::new(now),
            phase_deadline: now + timeouts.phase,
            nonce,
            keys,
            server_proof: None,
            evidence: (None, None),
        };
        let problem = if hello.version != PROTOCOL_VERSION {
            Some(ProtocolError::Version { peer: hello.version, ours: PROTOCOL_VERSION })
        } else if hello.role != Role::Control {
            Some(ProtocolError::Malformed("a control session must start with a control hello".into()))
        } else {
            None
        };
        match problem {
            Some(e) => {
                s.error(now, &e.to_string());
                Err(Box::new((s, e)))
            }
            None => Ok(s),
        }
    }

    /// Feeds bytes read from the control connection.
    pub fn handle_input(&mut self, now: Instant, bytes: &[u8]) -> Result<(), ProtocolError> {
        self.live.heard = now;
        self.decoder.push(bytes);
        loop {
            let frame = match self.decoder.next_frame() {
                Ok(Some(f)) => f,
                Ok(None) => return Ok(()),
                Err(e) => return self.fail(now, e),
            };
            match ClientMessage::decode(&frame) {
                Ok(msg) => self.on_message(now, msg)?,
                Err(e) => return self.fail(now, e),
            }
        }
    }

    /// The one transition function.
    fn on_message(&mut self, now: Instant, msg: ClientMessage) -> Result<(), ProtocolError> {
        match (self.state, msg) {
            (_, ClientMessage::Keepalive) => {}
            (State::AwaitRequest, ClientMessage::Request { spec, companion, auth, client_version }) => {
                let auth = match self.authenticate(auth.as_ref()) {
                    Ok(a) => a,
                    Err(reason) => {
                        self.send(now, &ServerMessage::Rejected { reason: reason.clone() });
                        self.state = State::Done;
                        return Err(ProtocolError::Auth(reason));
                    }
                };
                if let Err(e) = spec.validate() {
                    self.send(now, &ServerMessage::Rejected { reason: e.to_string() });
                    self.state = State::Done;
                    return Err(ProtocolError::Malformed(format!("rejected request: {e}")));
                }
                let companion = match companion.as_deref().map(crate::message::cookie_from_hex) {
                    Some(Ok(c)) => Some(c),
                    Some(Err(e)) => return self.fail(now, e),
                    None => None,
                };
                let client_version = client_version.chars().filter(|c| !c.is_control()).take(64).collect();
                self.events.push_back(ServerEvent::Requested { spec: Box::new(spec), companion, auth, client_version });
                self.state = State::AwaitAdmission;
            }
            (State::AwaitStart, ClientMessage::Start) => {
                self.events.push_back(ServerEvent::Start);
                self.enter(now, State::Running);
            }
            (State::Running, ClientMessage::SenderDone { totals }) => {
                self.events.push_back(ServerEvent::PeerSenderDone(totals));
            }
            (State::AwaitStreams | State::AwaitStart | State::Running, ClientMessage::Stop { reason }) => {
                self.events.push_back(ServerEvent::StopRequested(reason));
                self.state = State::Running;
            }
            (state, msg) => {
                return self.fail(now, ProtocolError::Unexpected { message: msg.name(), state: state.describe() })
            }
        }
        Ok(())
    }

    /// Checks the client's proof against the key table; the user and session key when it
    /// holds, `None` when the server requires no authentication, the reason otherwise.
    fn authenticate(&mut self, auth: Option<&AuthProof>) -> Result<Option<(String, [u8; 32])>, String> {
        let Some(keys) = self.keys.clone() else { return Ok(None) };
        let Some(a) = auth else {
            return Err("this server requires authentication: run the client with --psk-file FILE holding USER:SECRET from the server's operator".into());
        };
        let failed = || format!("authentication failed for user {:?}: unknown user or wrong key", a.user);
        let client_nonce = crate::auth::from_hex::<16>(&a.nonce).ok_or_else(failed)?;
        let proof = crate::auth::from_hex::<32>(&a.proof).ok_or_else(failed)?;
        // An unknown user costs the same MAC as a known one, so timing does not tell which
        // user names exist.
        let known = keys.key(&a.user);
        let ex = Exchange { server_nonce: &self.nonce, client_nonce: &client_nonce, user: &a.user };
        let verified = ex.verify_client(known.unwrap_or(b"netchar: no such user"), &proof);
        let key = match known {
            Some(key) if verified => key,
            _ => return Err(failed()),
        };
        self.server_proof = Some(ex.server_proof(key));
        Ok(Some((a.user.clone(), ex.session_key(key))))
    }

    /// Admits the requested test; the client will open data connections with `cookie`.
    pub fn admit(
        &mut self,
        now: Instant,
        cookie: &[u8; 16],
        concurrent_tests: u32,
        host: HostInfo,
        data_port: Option<u16>,
    ) {
        // Only an open request can be admitted: a session that already ended (the client
        // closed or failed while the driver decided) stays ended.
        if self.state != State::AwaitAdmission {
            return;
        }
        self.send(
            now,
            &ServerMessage::Accepted {
                cookie: cookie_to_hex(cookie),
                concurrent_tests,
                host,
                server_version: env!("CARGO_PKG_VERSION").into(),
                data_port,
                server_proof: self.server_proof.map(|p| crate::auth::to_hex(&p)),
            },
        );
        self.enter(now, State::AwaitStreams);
    }

    /// Turns the request away: the server is running as many tests as it admits.
    pub fn busy(&mut self, now: Instant, running: u32, max: u32) {
        self.refuse_busy(now, running, max, None);
    }

    /// Turns the request away for now, for the reason given (a limit other than
    /// `--max-concurrent`), or as [`Self::busy`] without one.
    pub fn refuse_busy(&mut self, now: Instant, running: u32, max: u32, reason: Option<String>) {
        if self.state != State::Done {
            self.send(now, &ServerMessage::Busy { running, max, reason });
            self.state = State::Done;
        }
    }

    /// Refuses the request for good (it exceeds a server limit); the reason names the limit.
    pub fn reject(&mut self, now: Instant, reason: &str) {
        if self.state != State::Done {
            self.send(now, &ServerMessage::Rejected { reason: reason.to_string() });
            self.state = State::Done;
        }
    }

    /// Every data connection arrived.
    pub fn streams_connected(&mut self, now: Instant) {
        if self.state == State::AwaitStreams {
            self.send(now, &ServerMessage::Ready);
            self.enter(now, State::AwaitStart);
        }
    }

    /// The server's senders finished with these exact totals.
    pub fn local_senders_done(&mut self, now: Instant, totals: Vec<StreamTotal>) {
        if self.state == State::Running {
            self.send(now, &ServerMessage::SenderDone { totals });
        }
    }

    /// The server's counters and settings over the test, sent with its figures by
    /// [`Self::finish`].
    pub fn set_evidence(&mut self, evidence: Option<Evidence>, identity: Option<HostIdentity>) {
        self.evidence = (evidence, identity);
    }

    /// Sends the server's figures and ends the session.
    pub fn finish(&mut self, now: Instant, streams: Vec<StreamRecord>, cpu: CpuUsage, error: Option<String>) {
        if self.state != State::Done {
            let (evidence, identity) = std::mem::take(&mut self.evidence);
            self.send(now, &ServerMessage::Results { streams, cpu, target: None, evidence, identity, error });
            self.state = State::Done;
        }
    }

    /// Ends the session with a message the client will print.
    pub fn error(&mut self, now: Instant, message: &str) {
        if self.state != State::Done {
            self.send(now, &ServerMessage::Error { message: message.to_string() });
            self.state = State::Done;
        }
    }

    /// The client closed the control connection.
    pub fn handle_eof(&mut self, now: Instant) -> Result<(), ProtocolError> {
        if self.state == State::Done {
            return Ok(());
        }
        let what = self.state.describe();
        self.fail(now, ProtocolError::Peer(format!("the client closed the control connection while {what}")))
    }

    /// Moves queued bytes for the control connection into `out`.
    pub fn poll_output(&mut self, out: &mut Vec<u8>) {
        out.append(&mut self.out);
    }

    /// The next thing the driver must do.
    pub fn poll_event(&mut self) -> Option<ServerEvent> {
        self.events.pop_front()
    }

    /// When [`Self::handle_timeout`] must be called next, if ever.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            State::Done | State::AwaitAdmission => None,
            State::Running => Some(self.live.next_deadline(&self.timeouts)),
            _ => Some(self.phase_deadline),
        }
    }

    /// Sends keepalives, detects a silent client and setup phases that take too long.
    pub fn handle_timeout(&mut self, now: Instant) -> Result<(), ProtocolError> {
        match self.state {
            State::Done | State::AwaitAdmission => Ok(()),
            State::Running => {
                if self.live.silent_too_long(now, &self.timeouts) {
                    let secs = self.timeouts.silence.as_secs_f64();
                    return self.fail(now, ProtocolError::Timeout(format!("the client went silent for {secs:.0} s")));
                }
                if self.live.keepalive_due(now, &self.timeouts) {
                    self.send(now, &ServerMessage::Keepalive);
                }
                Ok(())
            }
            s if now >= self.phase_deadline => {
                let secs = self.timeouts.phase.as_secs_f64();
                self.fail(now, ProtocolError::Timeout(format!("timed out after {secs:.0} s {}", s.describe())))
            }
            _ => Ok(()),
        }
    }

    /// True once the session is over.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    fn send(&mut self, now: Instant, msg: &ServerMessage) {
        encode_frame(&msg.encode(), &mut self.out);
        self.live.spoke = now;
    }

    fn enter(&mut self, now: Instant, state: State) {
        self.state = state;
        self.phase_deadline = now + self.timeouts.phase;
        self.live = Liveness::new(now);
    }

    /// Tells the client why (when the connection still works) and ends the session. While a
    /// test runs the session stays open instead, so the driver can stop the workers and still
    /// send the figures measured so far with [`Self::finish`].
    fn fail<T>(&mut self, now: Instant, e: ProtocolError) -> Result<T, ProtocolError> {
        if self.state != State::Running {
            self.error(now, &e.to_string());
        }
        Err(e)
    }
}
