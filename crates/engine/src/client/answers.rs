//! What the peer of a protocol without a control connection (iperf2, echo, discard, chargen)
//! sends back on its data streams, looked at without taking it (`MSG_PEEK`): before the test,
//! the opening answer the session waits for (an echo server's copy of the preamble, a chargen
//! server's first line); after it, what arrived on a stream that no worker reads. The session
//! judges both (crate::control::ClientControl::opening_answer, `unread_answer`): these
//! protocols have no hello of their own, so the peer's bytes and its close are what tell
//! another kind of server from theirs. Over UDP, the host's refusals (port unreachable) and
//! what answers netchar's hello over TCP at the same port.

use crate::control::{AnswerEnd, ClientControl, Opening, PeerAnswer, UdpOutcome, ANSWER_BYTES};
use netchar_model::{Role, StreamRecord};
use netchar_wire::hello::{identify_peer, Hello, HELLO_LEN, MAGIC};
use netchar_wire::ProtocolError;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Waits for stream `id`'s opening answer until the session decides or `limit` passes, then
/// drops the bytes the session took as the answer to the preamble.
pub(super) fn await_opening(
    socket: &TcpStream,
    id: u32,
    session: &mut dyn ClientControl,
    limit: Duration,
) -> Result<(), ProtocolError> {
    let deadline = Instant::now() + limit;
    let mut buf = [0u8; ANSWER_BYTES];
    let mut seen = usize::MAX;
    let outcome = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let (n, end) = if left.is_zero() {
            (peek_now(socket, &mut buf).0, AnswerEnd::Silent)
        } else {
            let _ = socket.set_read_timeout(Some(left));
            match socket.peek(&mut buf) {
                Ok(0) => (0, AnswerEnd::Closed),
                Ok(n) => (n, AnswerEnd::Open),
                Err(e) if crate::is_retry(&e) => continue,
                Err(_) => (0, AnswerEnd::Closed),
            }
        };
        if end == AnswerEnd::Open && n == seen {
            // The same bytes again (a peek returns at once while any wait): give the peer time.
            std::thread::sleep(Duration::from_millis(2).min(left));
            continue;
        }
        seen = n;
        match session.opening_answer(id, PeerAnswer { bytes: &buf[..n], end })? {
            Opening::Wait if end == AnswerEnd::Open => continue,
            Opening::Wait => break Ok(0),
            Opening::Take(taken) => break Ok(taken),
        }
    };
    let _ = socket.set_read_timeout(None);
    let taken = outcome?;
    let mut preamble_echo = vec![0u8; taken];
    (&*socket)
        .read_exact(&mut preamble_echo)
        .map_err(|e| ProtocolError::Peer(format!("stream {id}: reading the peer's answer: {e}")))
}

/// What waits unread on `socket` now, and whether the peer closed it.
pub(super) fn unread(socket: &TcpStream) -> (Vec<u8>, AnswerEnd) {
    let mut buf = [0u8; ANSWER_BYTES];
    let (n, end) = peek_now(socket, &mut buf);
    (buf[..n].to_vec(), end)
}

/// Peeks without waiting: the bytes there, and `Closed` once the peer's FIN or reset is in.
fn peek_now(socket: &TcpStream, buf: &mut [u8]) -> (usize, AnswerEnd) {
    if socket.set_nonblocking(true).is_err() {
        return (0, AnswerEnd::Open);
    }
    let outcome = match socket.peek(buf) {
        Ok(0) => (0, AnswerEnd::Closed),
        Ok(n) => (n, AnswerEnd::Open),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => (0, AnswerEnd::Open),
        Err(_) => (0, AnswerEnd::Closed),
    };
    let _ = socket.set_nonblocking(false);
    outcome
}

/// What came of a UDP test's datagrams at this end, from its workers' records.
pub(super) fn udp_outcome(records: &[StreamRecord], port: u16) -> UdpOutcome {
    let mut outcome = UdpOutcome { port, ..UdpOutcome::default() };
    for r in records {
        if let (Role::Sender, Some(sent)) = (r.role, &r.udp_sent) {
            let refused = sent.send_errors_by_errno.get("ECONNREFUSED").copied().unwrap_or(0);
            outcome.sent += sent.packets + refused;
            outcome.refused += refused;
        }
        if let (Role::Receiver, Some(received)) = (r.role, &r.udp_received) {
            outcome.received += received.packets;
        }
    }
    outcome
}

/// What answers netchar's control hello over TCP at `addr`: "on TCP at the same port, ..."
/// with what [`identify_peer`] makes of the answer, its close or its silence within `limit`.
pub(super) fn tcp_identity(addr: SocketAddr, connect_timeout: Duration, limit: Duration) -> String {
    let mut socket = match TcpStream::connect_timeout(&addr, connect_timeout) {
        Ok(s) => s,
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => return "and nothing takes TCP at that port".into(),
        Err(e) => return format!("TCP at that port could not be asked ({e})"),
    };
    let what = |answer: &str| format!("on TCP at the same port, {answer}");
    if socket.write_all(&Hello::control().encode()).is_err() {
        return what(&identify_peer(&[]));
    }
    let deadline = Instant::now() + limit;
    let mut answer = Vec::new();
    let mut buf = [0u8; ANSWER_BYTES];
    // Until a netchar hello is whole, or the first bytes are not one's (iperf3's single byte).
    while answer.len() < HELLO_LEN && answer.iter().zip(MAGIC).all(|(a, m)| *a == m) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || socket.set_read_timeout(Some(left)).is_err() {
            break;
        }
        match socket.read(&mut buf) {
            Ok(0) => return what(&identify_peer(&answer)),
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) if crate::is_retry(&e) => break,
            Err(_) => return what(&identify_peer(&answer)),
        }
    }
    if answer.is_empty() {
        return what(&format!(
            "a server accepted netchar's hello and said nothing within {:.0} s, as {} does",
            limit.as_secs_f64(),
            netchar_wire::known::SILENT_SERVERS
        ));
    }
    what(&identify_peer(&answer))
}
