//! A stream this end opens and sends on itself, at its session's request
//! (ServerControlEvent::OwnStream): iperf2's `-d`/`-r` dial-back, netio's UDP S2C phases,
//! nc_test's slave's lock-step exchange (its machine on the data plane's lock-step worker). It
//! runs on a data plane of its own, apart from the test's workers, and the driver looks at it
//! each turn like them, so the session's thread keeps reading its peer, its timers and the
//! server's stop while the data flows (and while a dial-back waits for the client's listener).
//! Its record and why it ended early go back to the session
//! (crate::server_control::ServerControl::own_stream_done).

use crate::admission::Limits;
use crate::dataplane::{
    DataPlane, DataPlaneConfig, DataSocket, DataStream, DatagramFormatKind, LockStepSlot, StreamOptions,
};
use crate::server_control::{OwnStream, OwnTarget};
use netchar_model::{Endpoint, Flow, Role, StreamRecord, TestSpec};
use socket2::{Domain, Socket, Type};
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// How long a refused connection waits before the next try: the client's listener (a
/// `-r` client opens it once it saw the server's close) is usually up within a few.
const RETRY_REFUSED: Duration = Duration::from_millis(20);
/// Past its time or byte budget, a sender still running this long after its start is stopped
/// at the server's `--max-duration`: the margin a sender's own end takes on a busy host.
const MAX_DURATION_MARGIN: Duration = Duration::from_secs(2);

/// One own stream, from its connection to its record.
pub(super) struct OwnStreamRun {
    id: u32,
    run: TestSpec,
    datagrams: DatagramFormatKind,
    purpose: &'static str,
    lock_step: Option<LockStepSlot>,
    state: State,
}

enum State {
    /// A non-blocking connect under way (or waiting for its next try until `retry_at`).
    Connecting { to: SocketAddr, until: Instant, socket: Option<Socket>, retry_at: Instant },
    /// A UDP socket waiting for the plane (started at the first turn).
    Ready(DataSocket),
    /// The sender runs; the bytes it had moved when last looked at, and since when.
    Running { plane: DataPlane, started: Instant, moved: (u64, Instant) },
    /// Over, its outcome given back.
    Over,
}

impl OwnStreamRun {
    /// Starts `request` now: a connection begins, a UDP socket is ready for its sender.
    pub(super) fn start(request: OwnStream, now: Instant) -> Self {
        let OwnStream { id, target, run, datagrams, purpose, lock_step } = request;
        let state = match target {
            OwnTarget::Connect { to, until } => State::Connecting { to, until, socket: None, retry_at: now },
            OwnTarget::Udp(socket) => State::Ready(DataSocket::Udp(socket)),
            OwnTarget::Tcp(stream) => State::Ready(DataSocket::Tcp(stream)),
        };
        Self { id, run, datagrams, purpose, lock_step, state }
    }

    /// Bytes the sender has moved so far.
    pub(super) fn bytes_moved(&self) -> u64 {
        match &self.state {
            State::Running { plane, .. } => plane.bytes_moved(),
            _ => 0,
        }
    }

    /// Moves the stream on: the connection's progress, the sender's start and end, its
    /// limits. Returns its record and error once, when it is over.
    pub(super) fn poll(&mut self, now: Instant, limits: &Limits) -> Option<(StreamRecord, Option<String>)> {
        match &mut self.state {
            State::Connecting { to, until, socket, retry_at } => {
                let (to, until) = (*to, *until);
                match step_connect(socket, to, now, *retry_at, until) {
                    Ok(None) => {
                        if socket.is_none() {
                            *retry_at = now + RETRY_REFUSED;
                        }
                        None
                    }
                    Ok(Some(stream)) => {
                        self.state = State::Ready(DataSocket::Tcp(stream));
                        self.poll(now, limits)
                    }
                    Err(e) => self.over(Some(format!("cannot connect back to {to} for {}: {e}", self.purpose))),
                }
            }
            State::Ready(_) => {
                let State::Ready(socket) = std::mem::replace(&mut self.state, State::Over) else { unreachable!() };
                let cfg = DataPlaneConfig {
                    spec: self.run.clone(),
                    datagrams: self.datagrams,
                    endpoint: Endpoint::Server,
                    cpu: None,
                    interleave_senders: false,
                };
                let stream = DataStream { id: self.id, flow: Flow::Down, role: Role::Sender, socket };
                let options = StreamOptions { lock_step: self.lock_step.clone(), ..StreamOptions::default() };
                match DataPlane::start_with(cfg, vec![stream], None, now, options) {
                    Ok(plane) => {
                        self.state = State::Running { plane, started: now, moved: (0, now) };
                        None
                    }
                    Err(e) => self.over(Some(format!("cannot start the sender for {}: {e}", self.purpose))),
                }
            }
            State::Running { plane, started, moved } => {
                let bytes = plane.bytes_moved();
                if bytes != moved.0 {
                    *moved = (bytes, now);
                }
                let error = if plane.all_done() {
                    plane.first_error()
                } else if limits.max_duration.is_some_and(|d| now - *started > d + MAX_DURATION_MARGIN) {
                    Some("the server's --max-duration was reached".to_string())
                } else if self.lock_step.is_none() && now - moved.1 >= limits.idle_timeout {
                    // (A lock-step machine bounds each of its waits itself, and a slave that
                    // only receives moves no byte of its own until its results.)
                    Some(format!("idle for {:.0} s (the server's --idle-timeout)", limits.idle_timeout.as_secs_f64()))
                } else {
                    return None;
                };
                Some(self.end(error))
            }
            State::Over => None,
        }
    }

    /// Ends the stream now (the test is over): what it sent so far, with no error of its own
    /// if it ran (the test's names why it ended), or why it never did.
    pub(super) fn abort(mut self) -> (StreamRecord, Option<String>) {
        match &self.state {
            State::Running { .. } => self.end(None),
            State::Over => (self.bare(), None),
            State::Connecting { to, .. } => {
                let why = format!("not connected back to {to} for {} before the test ended", self.purpose);
                (self.bare(), Some(why))
            }
            State::Ready(_) => {
                let why = format!("{} ended before its sender started", self.purpose);
                (self.bare(), Some(why))
            }
        }
    }

    /// Stops the sender without waiting for it (the driver is going away).
    pub(super) fn stop(&self) {
        if let State::Running { plane, .. } = &self.state {
            plane.abort();
        }
    }

    fn end(&mut self, error: Option<String>) -> (StreamRecord, Option<String>) {
        let State::Running { plane, .. } = std::mem::replace(&mut self.state, State::Over) else {
            return (self.bare(), error);
        };
        plane.abort();
        let error = error.or_else(|| plane.first_error());
        let record = plane.join().into_iter().find(|r| r.id == self.id).unwrap_or_else(|| self.bare());
        (record, error)
    }

    fn over(&mut self, error: Option<String>) -> Option<(StreamRecord, Option<String>)> {
        self.state = State::Over;
        Some((self.bare(), error))
    }

    fn bare(&self) -> StreamRecord {
        StreamRecord::bare(self.id, Flow::Down, Role::Sender, Endpoint::Server, 0, 0.0)
    }
}

/// One step of a non-blocking connect to `to`: a new try once `retry_at` has come, or a look
/// at the one under way. A refusal before `until` is waited out (`socket` left empty for the
/// next try); any other error, or `until` passed, ends it. Returns the connection once made.
fn step_connect(
    socket: &mut Option<Socket>,
    to: SocketAddr,
    now: Instant,
    retry_at: Instant,
    until: Instant,
) -> io::Result<Option<TcpStream>> {
    let Some(s) = socket.as_ref() else {
        if now < retry_at {
            return Ok(None);
        }
        let s = Socket::new(Domain::for_address(to), Type::STREAM, None)?;
        s.set_nonblocking(true)?;
        match s.connect(&to.into()) {
            Ok(()) => return connected(s).map(Some),
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused && now < until => return Ok(None),
            Err(e) => return Err(e),
        }
        *socket = Some(s);
        return Ok(None);
    };
    match s.take_error()? {
        Some(e) if e.kind() == io::ErrorKind::ConnectionRefused && now < until => {
            *socket = None;
            Ok(None)
        }
        Some(e) => Err(e),
        // Connected once it has a peer; still under way until then.
        None if s.peer_addr().is_ok() => connected(socket.take().expect("the socket looked at")).map(Some),
        None if now >= until => Err(io::ErrorKind::TimedOut.into()),
        None => Ok(None),
    }
}

/// The connection made, blocking again as the data plane's senders expect.
fn connected(s: Socket) -> io::Result<TcpStream> {
    s.set_nonblocking(false)?;
    Ok(s.into())
}
