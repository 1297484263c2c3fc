//! The lock-step worker: one data stream whose every buffer is a transaction a sans-IO
//! machine must see before the next goes out (eCos nc_test's master: a buffer, then the
//! slave's answer or a timeout, the master's pauses between, the slave's results record
//! last), rather than a stream the workers pace or pipeline themselves.
//!
//! The machine is the protocol's ([`LockStep`]), handed to the data plane by its session
//! through [`super::StreamOptions::lock_step`]; the worker only moves its bytes over the
//! stream's socket (TCP or connected UDP) and counts them, and looks at the plane's abort and
//! stop between waits. What the machine measured is its own: the session reads it back once the
//! worker is done (the stream's sender total tells it so).
//!
//! A machine may also run on an unconnected UDP socket that is not the test's alone (eCos
//! nc_test's slave: one data port, bound once, that no second socket may share and whose
//! connection std cannot undo): it names its peer ([`LockStep::peer`]), every buffer goes there,
//! and each datagram that comes is the machine's to take or turn away ([`LockStep::accepts`]),
//! so that nothing from another source counts as an answer.

use super::{Controls, StreamShared, POLL};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a lock-step machine asks for next.
#[derive(Debug, PartialEq, Eq)]
pub enum LockStepAction {
    /// Send this buffer (one datagram, or these bytes on the TCP stream).
    Send(Vec<u8>),
    /// Read one buffer of `len` bytes (a datagram is cut there), waiting at most `timeout`;
    /// then [`LockStep::received`] with it, or with nothing.
    Recv {
        /// Bytes wanted.
        len: usize,
        /// The longest wait.
        timeout: Duration,
    },
    /// Wait this long, sending nothing.
    Pause(Duration),
    /// The test is over.
    Done,
}

/// A protocol's lock-step data exchange, sans-IO.
pub trait LockStep: Send {
    /// What to do next; `now` is when the worker asks.
    fn next(&mut self, now: Instant) -> LockStepAction;
    /// The answer to the last [`LockStepAction::Recv`]: the bytes, or `None` (timeout, a TCP
    /// stream that closed or broke).
    fn received(&mut self, data: Option<&[u8]>, now: Instant);
    /// How the last [`LockStepAction::Send`] went: the bytes written, or why not (a machine
    /// that counts only what left this end minds it; the master's counts its answers instead).
    fn sent(&mut self, _outcome: io::Result<usize>) {}
    /// The peer of a UDP stream whose socket is not connected: buffers are sent there and
    /// datagrams taken through [`Self::accepts`]. `None` (the default): the socket is
    /// connected to the peer.
    fn peer(&self) -> Option<SocketAddr> {
        None
    }
    /// Whether a datagram of `len` bytes from `from` is an answer on an unconnected socket
    /// ([`Self::peer`]); one turned away is not waited for, and the wait goes on.
    fn accepts(&mut self, _from: SocketAddr, _len: usize) -> bool {
        true
    }
}

/// Where a session leaves its lock-step machine for the stream's worker to take.
#[derive(Clone)]
pub struct LockStepSlot(Arc<Mutex<Option<Box<dyn LockStep>>>>);

impl LockStepSlot {
    /// A slot holding `machine`.
    pub fn new(machine: Box<dyn LockStep>) -> Self {
        Self(Arc::new(Mutex::new(Some(machine))))
    }

    /// The machine, once: the first worker to ask runs it.
    pub(super) fn take(&self) -> Option<Box<dyn LockStep>> {
        self.0.lock().ok().and_then(|mut slot| slot.take())
    }
}

impl std::fmt::Debug for LockStepSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LockStepSlot")
    }
}

/// The stream's socket as the machine's exchange uses it. A TCP stream that broke reads and
/// writes nothing more: the machine sees timeouts and ends on its own terms.
enum Channel<'a> {
    Udp(&'a UdpSocket),
    /// An unconnected UDP socket and the peer the machine names.
    UdpTo(&'a UdpSocket, SocketAddr),
    Tcp {
        socket: &'a TcpStream,
        broken: bool,
    },
}

/// Runs `machine` over `socket` until it is done or the plane aborts; counts the bytes sent
/// as the stream's bytes and the buffers sent as its packets.
pub(super) fn run(
    shared: &StreamShared,
    controls: &Controls,
    socket: &super::DataSocket,
    mut machine: Box<dyn LockStep>,
) -> io::Result<()> {
    let mut channel = match socket {
        super::DataSocket::Udp(s) => match machine.peer() {
            Some(peer) => Channel::UdpTo(s, peer),
            None => Channel::Udp(s),
        },
        super::DataSocket::Tcp(s) => Channel::Tcp { socket: s, broken: false },
        _ => return Err(io::Error::other(format!("stream {}: a lock-step stream is TCP or UDP", shared.id))),
    };
    // A lock-step sender has no end to wind down to: asked to stop sending (Ctrl-C, another
    // stream's failure), it stops as when aborted, and its machine keeps what it counted.
    let aborted = || controls.abort.load(Ordering::Relaxed) || controls.stop_senders.load(Ordering::Relaxed);
    let mut buf = vec![0u8; 70_000];
    let started = Instant::now();
    shared
        .start_ns
        .store(started.saturating_duration_since(shared.started).as_nanos().max(1) as u64, Ordering::Release);
    while !aborted() {
        match machine.next(Instant::now()) {
            LockStepAction::Done => break,
            LockStepAction::Pause(d) => sleep_unless(d, &aborted),
            LockStepAction::Send(bytes) => {
                let outcome = match &mut channel {
                    // ENOBUFS and the like: the buffer is lost, as on the wire; the exchange
                    // goes on and the machine counts it missing.
                    Channel::Udp(s) => s.send(&bytes),
                    Channel::UdpTo(s, peer) => s.send_to(&bytes, *peer),
                    Channel::Tcp { broken: true, .. } => Err(io::ErrorKind::BrokenPipe.into()),
                    Channel::Tcp { socket, broken } => {
                        let written = write_all_within(socket, &bytes, &aborted).map(|()| bytes.len());
                        *broken = written.is_err();
                        written
                    }
                };
                if outcome.is_ok() {
                    shared.bytes.fetch_add(bytes.len() as u64, Ordering::AcqRel);
                    shared.packets.fetch_add(1, Ordering::AcqRel);
                }
                machine.sent(outcome);
            }
            LockStepAction::Recv { len, timeout } => {
                let len = len.min(buf.len());
                let got = match &mut channel {
                    Channel::Udp(s) => recv_within(s, &mut buf[..len], timeout, &aborted),
                    Channel::UdpTo(s, _) => {
                        let accepts = &mut |from: SocketAddr, n: usize| machine.accepts(from, n);
                        recv_from_within(s, &mut buf, timeout, &aborted, accepts).map(|n| n.min(len))
                    }
                    Channel::Tcp { broken: true, .. } => None,
                    Channel::Tcp { socket, broken } => {
                        let got = read_exact_within(socket, &mut buf[..len], timeout, &aborted);
                        *broken = got.is_none();
                        got
                    }
                };
                machine.received(got.map(|n| &buf[..n]), Instant::now());
            }
        }
    }
    shared.end_ns.store(Instant::now().saturating_duration_since(shared.started).as_nanos() as u64, Ordering::Release);
    Ok(())
}

fn sleep_unless(d: Duration, aborted: &dyn Fn() -> bool) {
    let end = Instant::now() + d;
    while !aborted() {
        let Some(left) = end.checked_duration_since(Instant::now()).filter(|l| !l.is_zero()) else { return };
        std::thread::sleep(left.min(POLL));
    }
}

/// One datagram (cut to the buffer) within `timeout`; a refusal (the peer's port closed
/// meanwhile) is waited through as silence.
fn recv_within(s: &UdpSocket, buf: &mut [u8], timeout: Duration, aborted: &dyn Fn() -> bool) -> Option<usize> {
    let deadline = Instant::now() + timeout;
    while !aborted() {
        let left = deadline.checked_duration_since(Instant::now()).filter(|l| !l.is_zero())?;
        s.set_read_timeout(Some(left.min(POLL))).ok()?;
        match s.recv(buf) {
            Ok(n) => return Some(n),
            Err(e) if crate::is_retry(&e) || e.kind() == io::ErrorKind::ConnectionRefused => {}
            Err(_) => return None,
        }
    }
    None
}

/// One datagram the machine accepts (cut by the caller) within `timeout`, on an unconnected
/// socket: whole, so that the machine judges it by its real size; others are waited past.
fn recv_from_within(
    s: &UdpSocket,
    buf: &mut [u8],
    timeout: Duration,
    aborted: &dyn Fn() -> bool,
    accepts: &mut dyn FnMut(SocketAddr, usize) -> bool,
) -> Option<usize> {
    let deadline = Instant::now() + timeout;
    while !aborted() {
        let left = deadline.checked_duration_since(Instant::now()).filter(|l| !l.is_zero())?;
        s.set_read_timeout(Some(left.min(POLL))).ok()?;
        match s.recv_from(buf) {
            Ok((n, from)) if accepts(from, n) => return Some(n),
            Ok(_) => {}
            Err(e) if crate::is_retry(&e) || e.kind() == io::ErrorKind::ConnectionRefused => {}
            Err(_) => return None,
        }
    }
    None
}

/// Exactly `buf.len()` bytes within `timeout`; `None` on timeout, end of stream or error.
fn read_exact_within(s: &TcpStream, buf: &mut [u8], timeout: Duration, aborted: &dyn Fn() -> bool) -> Option<usize> {
    let deadline = Instant::now() + timeout;
    let mut got = 0;
    let mut reader = s;
    while got < buf.len() {
        if aborted() {
            return None;
        }
        let left = deadline.checked_duration_since(Instant::now()).filter(|l| !l.is_zero())?;
        s.set_read_timeout(Some(left.min(POLL))).ok()?;
        match reader.read(&mut buf[got..]) {
            Ok(0) => return None,
            Ok(n) => got += n,
            Err(e) if crate::is_retry(&e) => {}
            Err(_) => return None,
        }
    }
    Some(got)
}

/// All of `bytes`, or the stream is broken (a peer that stops reading for long is one).
fn write_all_within(s: &TcpStream, bytes: &[u8], aborted: &dyn Fn() -> bool) -> io::Result<()> {
    s.set_write_timeout(Some(POLL))?;
    let deadline = Instant::now() + Duration::from_secs(30);
    let (mut writer, mut at) = (s, 0);
    while at < bytes.len() {
        if aborted() || Instant::now() > deadline {
            return Err(io::ErrorKind::TimedOut.into());
        }
        match writer.write(&bytes[at..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => at += n,
            Err(e) if crate::is_retry(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
