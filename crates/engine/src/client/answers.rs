//! What the peer of a protocol without a control connection (iperf2, echo, discard, chargen)
//! sends back on its data streams, looked at without taking it (`MSG_PEEK`): before the test,
//! the opening answer the session waits for (an echo server's copy of the preamble, a chargen
//! server's first line); after it, what arrived on a stream that no worker reads. The session
//! judges both (crate::control::ClientControl::opening_answer, `unread_answer`): these
//! protocols have no hello of their own, so the peer's bytes and its close are what tell
//! another kind of server from theirs.

use crate::control::{AnswerEnd, ClientControl, Opening, PeerAnswer, ANSWER_BYTES};
use netchar_wire::ProtocolError;
use std::io::{self, Read};
use std::net::TcpStream;
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
