//! The client's side of control protocol v1.

use super::{Liveness, Timeouts};
use crate::auth::{Credentials, Exchange};
use crate::codec::{encode_frame, FrameDecoder, MAX_SERVER_FRAME};
use crate::hello::{identify_peer, not_netchar, Hello, KnownProtocol, Role, HELLO_LEN, MAGIC};
use crate::message::{cookie_from_hex, AuthProof, ClientMessage, ServerMessage};
use crate::{ProtocolError, PROTOCOL_VERSION};
use netchar_model::{CpuUsage, Evidence, HostIdentity, HostInfo, StreamRecord, StreamTotal, TargetFigures, TestSpec};
use std::collections::VecDeque;
use std::time::Instant;

/// What the driver must do next.
// Few events a test, the largest (the results) once: boxing its parts buys nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum ClientEvent {
    /// The server admitted the test: open the data connections with this cookie.
    Accepted {
        /// Present on every data connection.
        cookie: [u8; 16],
        /// Tests the server is running, this one included.
        concurrent_tests: u32,
        /// The server's machine.
        host: HostInfo,
        /// The server's netchar version.
        server_version: String,
        /// A listener the server opened for this test alone (crr).
        data_port: Option<u16>,
        /// The key that tags this test's data streams (authenticated tests).
        session_key: Option<[u8; 32]>,
    },
    /// The server is busy with other tests: retry later or give up.
    Busy {
        /// Tests running.
        running: u32,
        /// Tests admitted at once.
        max: u32,
        /// The limit reached, when it is not the number of tests.
        reason: Option<String>,
    },
    /// The server saw every data connection; `start` was sent: start the workers now.
    Started,
    /// The server's senders finished with these exact totals.
    PeerSenderDone(Vec<StreamTotal>),
    /// The server's results arrived; the session is over.
    Finished {
        /// The server's end of every stream.
        streams: Vec<StreamRecord>,
        /// The server's CPU.
        cpu: CpuUsage,
        /// A target's own figures over the test, when it sent them.
        target: Option<TargetFigures>,
        /// The server's counters over the test, when it sent them.
        evidence: Option<Evidence>,
        /// The server's settings that shape the test, when it sent them.
        identity: Option<HostIdentity>,
        /// Set when the server ended early.
        error: Option<String>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    AwaitHello,
    AwaitAnswer,
    AwaitReady,
    Running,
    Done,
}

impl State {
    fn describe(self) -> &'static str {
        match self {
            Self::AwaitHello => "waiting for the server's hello",
            Self::AwaitAnswer => "waiting for the server to accept the test",
            Self::AwaitReady => "waiting for the server to see the data connections",
            Self::Running => "the test was running",
            Self::Done => "the test was over",
        }
    }
}

/// The client's control session for one test.
#[derive(Debug)]
pub struct ClientSession {
    state: State,
    spec: TestSpec,
    companion: Option<[u8; 16]>,
    timeouts: Timeouts,
    hello_buf: Vec<u8>,
    decoder: FrameDecoder,
    out: Vec<u8>,
    events: VecDeque<ClientEvent>,
    live: Liveness,
    phase_deadline: Instant,
    /// This client's key and nonce, when it authenticates.
    auth: Option<(Credentials, [u8; 16])>,
    /// The server's nonce, from its hello.
    server_nonce: [u8; 16],
}

impl ClientSession {
    /// Starts a session for `spec`; the hello is queued for output at once.
    pub fn new(now: Instant, spec: TestSpec, timeouts: Timeouts) -> Self {
        Self::with_companion(now, spec, timeouts, None)
    }

    /// Like [`Self::new`], for a test that accompanies the running test with `companion`'s
    /// cookie (the server admits it beside that test).
    pub fn with_companion(now: Instant, spec: TestSpec, timeouts: Timeouts, companion: Option<[u8; 16]>) -> Self {
        Self::with_auth(now, spec, timeouts, companion, None)
    }

    /// Like [`Self::with_companion`]; with `auth` (the user's key and a fresh random nonce)
    /// the client proves the key to the server and requires the server to prove it back.
    pub fn with_auth(
        now: Instant,
        spec: TestSpec,
        timeouts: Timeouts,
        companion: Option<[u8; 16]>,
        auth: Option<(Credentials, [u8; 16])>,
    ) -> Self {
        let out = Hello::control().encode().to_vec();
        Self {
            state: State::AwaitHello,
            spec,
            companion,
            timeouts,
            hello_buf: Vec::new(),
            decoder: FrameDecoder::new(MAX_SERVER_FRAME),
            out,
            events: VecDeque::new(),
            live: Liveness::new(now),
            phase_deadline: now + timeouts.hello,
            auth,
            server_nonce: [0; 16],
        }
    }

    fn exchange(&self) -> Option<(Exchange<'_>, &[u8])> {
        self.auth.as_ref().map(|(c, nonce)| {
            (Exchange { server_nonce: &self.server_nonce, client_nonce: nonce, user: &c.user }, c.secret.as_slice())
        })
    }

    /// Feeds bytes read from the control connection.
    pub fn handle_input(&mut self, now: Instant, mut bytes: &[u8]) -> Result<(), ProtocolError> {
        self.live.heard = now;
        if self.state == State::AwaitHello {
            let need = HELLO_LEN - self.hello_buf.len();
            let take = need.min(bytes.len());
            self.hello_buf.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            let seen = self.hello_buf.len().min(MAGIC.len());
            if self.hello_buf[..seen] != MAGIC[..seen] {
                return self.fail(not_netchar(&self.hello_buf));
            }
            if self.hello_buf.len() < HELLO_LEN {
                return Ok(());
            }
            let mut raw = [0u8; HELLO_LEN];
            raw.copy_from_slice(&self.hello_buf);
            let hello = Hello::decode(&raw).or_else(|e| self.fail(e))?;
            if hello.version != PROTOCOL_VERSION {
                return self.fail(ProtocolError::Version { peer: hello.version, ours: PROTOCOL_VERSION });
            }
            if hello.role == Role::Control {
                // netchar's own hello came back: an echo server (RFC 862) answered.
                return self.fail(ProtocolError::PeerProtocol {
                    protocol: KnownProtocol::Echo,
                    what: "an echo server answered (it sent netchar's hello back); add --proto echo".into(),
                });
            }
            if hello.role != Role::Server {
                return self.fail(ProtocolError::Malformed("the peer answered with a client hello".into()));
            }
            self.server_nonce = hello.cookie;
            let auth = match (hello.auth_required(), self.exchange()) {
                (true, None) => return self.fail(ProtocolError::Auth(
                    "the server requires authentication: pass --psk-file FILE holding USER:SECRET from the server's operator".into(),
                )),
                (false, Some(_)) => return self.fail(ProtocolError::Auth(
                    "--psk-file was given but the server does not use authentication, so it cannot prove it holds the key; drop --psk-file, or start the server with --psk-file".into(),
                )),
                (_, Some((ex, key))) => Some(AuthProof {
                    user: ex.user.to_string(),
                    nonce: crate::auth::to_hex(ex.client_nonce),
                    proof: crate::auth::to_hex(&ex.client_proof(key)),
                }),
                (false, None) => None,
            };
            self.send(
                now,
                &ClientMessage::Request {
                    spec: self.spec.clone(),
                    client_version: env!("CARGO_PKG_VERSION").into(),
                    companion: self.companion.as_ref().map(crate::message::cookie_to_hex),
                    auth,
                },
            );
            self.enter(now, State::AwaitAnswer);
        }
        self.decoder.push(bytes);
        while let Some(frame) = self.decoder.next_frame().or_else(|e| self.fail(e))? {
            let msg = ServerMessage::decode(&frame).or_else(|e| self.fail(e))?;
            self.on_message(now, msg)?;
        }
        Ok(())
    }

    /// The one transition function.
    fn on_message(&mut self, now: Instant, msg: ServerMessage) -> Result<(), ProtocolError> {
        match (self.state, msg) {
            (_, ServerMessage::Keepalive) => {}
            (_, ServerMessage::Error { message }) => return self.fail(ProtocolError::Peer(message)),
            (
                State::AwaitAnswer,
                ServerMessage::Accepted { cookie, concurrent_tests, host, server_version, data_port, server_proof },
            ) => {
                let cookie = cookie_from_hex(&cookie).or_else(|e| self.fail(e))?;
                let session_key = match self.exchange() {
                    None => None,
                    Some((ex, key)) => {
                        let proof = server_proof.as_deref().and_then(crate::auth::from_hex::<32>);
                        if !proof.is_some_and(|p| ex.verify_server(key, &p)) {
                            return self.fail(ProtocolError::Auth(
                                "the server could not prove it holds the key of --psk-file; is it the server you meant?".into(),
                            ));
                        }
                        Some(ex.session_key(key))
                    }
                };
                self.events.push_back(ClientEvent::Accepted {
                    cookie,
                    concurrent_tests,
                    host,
                    server_version,
                    data_port,
                    session_key,
                });
                self.enter(now, State::AwaitReady);
            }
            (State::AwaitAnswer, ServerMessage::Busy { running, max, reason }) => {
                self.events.push_back(ClientEvent::Busy { running, max, reason });
                self.state = State::Done;
            }
            (State::AwaitAnswer, ServerMessage::Rejected { reason }) => {
                return self.fail(ProtocolError::Rejected(reason))
            }
            (State::AwaitReady, ServerMessage::Ready) => {
                self.send(now, &ClientMessage::Start);
                self.events.push_back(ClientEvent::Started);
                self.enter(now, State::Running);
            }
            (State::Running, ServerMessage::SenderDone { totals }) => {
                self.events.push_back(ClientEvent::PeerSenderDone(totals));
            }
            (
                State::AwaitReady | State::Running,
                ServerMessage::Results { streams, cpu, target, evidence, identity, error },
            ) => {
                self.events.push_back(ClientEvent::Finished { streams, cpu, target, evidence, identity, error });
                self.state = State::Done;
            }
            (state, msg) => {
                return self.fail(ProtocolError::Unexpected { message: msg.name(), state: state.describe() })
            }
        }
        Ok(())
    }

    /// The server closed the control connection.
    pub fn handle_eof(&mut self, _now: Instant) -> Result<(), ProtocolError> {
        match self.state {
            State::Done => Ok(()),
            State::AwaitHello => self.fail(not_netchar(&self.hello_buf)),
            s => self
                .fail(ProtocolError::Peer(format!("the server closed the control connection while {}", s.describe()))),
        }
    }

    /// The client's sending streams finished with these exact totals.
    pub fn local_senders_done(&mut self, now: Instant, totals: Vec<StreamTotal>) {
        if self.state == State::Running {
            self.send(now, &ClientMessage::SenderDone { totals });
        }
    }

    /// Ends the test early (Ctrl-C, a failed worker): the server stops and sends its results.
    pub fn stop(&mut self, now: Instant, reason: &str) {
        if matches!(self.state, State::AwaitReady | State::Running) {
            self.send(now, &ClientMessage::Stop { reason: reason.to_string() });
            self.state = State::Running;
        }
    }

    /// Moves queued bytes for the control connection into `out`.
    pub fn poll_output(&mut self, out: &mut Vec<u8>) {
        out.append(&mut self.out);
    }

    /// The next thing the driver must do.
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.events.pop_front()
    }

    /// When [`Self::handle_timeout`] must be called next, if ever.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            State::Done => None,
            State::Running => Some(self.live.next_deadline(&self.timeouts)),
            _ => Some(self.phase_deadline),
        }
    }

    /// Sends keepalives and detects a silent server.
    pub fn handle_timeout(&mut self, now: Instant) -> Result<(), ProtocolError> {
        match self.state {
            State::Done => Ok(()),
            State::Running => {
                if self.live.silent_too_long(now, &self.timeouts) {
                    let secs = self.timeouts.silence.as_secs_f64();
                    return self.fail(ProtocolError::Timeout(format!(
                        "the server went silent for {secs:.0} s during the test; it may have died or the path to it failed"
                    )));
                }
                if self.live.keepalive_due(now, &self.timeouts) {
                    self.send(now, &ClientMessage::Keepalive);
                }
                Ok(())
            }
            State::AwaitHello if now >= self.phase_deadline => {
                if self.hello_buf.is_empty() {
                    return self.fail(ProtocolError::Silent { waited: self.timeouts.hello });
                }
                if let e @ ProtocolError::PeerProtocol { .. } = not_netchar(&self.hello_buf) {
                    return self.fail(e);
                }
                let secs = self.timeouts.hello.as_secs_f64();
                self.fail(ProtocolError::NotNetchar(format!(
                    "no netchar hello within {secs:.0} s: {}",
                    identify_peer(&self.hello_buf)
                )))
            }
            s if now >= self.phase_deadline => self.fail(ProtocolError::Timeout(format!(
                "timed out after {:.0} s {}",
                self.timeouts.phase.as_secs_f64(),
                s.describe()
            ))),
            _ => Ok(()),
        }
    }

    /// True once the session is over (results in, busy, or failed).
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    fn send(&mut self, now: Instant, msg: &ClientMessage) {
        encode_frame(&msg.encode(), &mut self.out);
        self.live.spoke = now;
    }

    fn enter(&mut self, now: Instant, state: State) {
        self.state = state;
        self.phase_deadline = now + self.timeouts.phase;
        self.live = Liveness::new(now);
    }

    fn fail<T>(&mut self, e: ProtocolError) -> Result<T, ProtocolError> {
        self.state = State::Done;
        Err(e)
    }
}
