//! netperf's control protocol: the message codec and both roles' sessions fed anything.
//!
//! One input is a script: byte 0 picks the client's test (kind, time or count, CPU, a
//! passphrase); every following step byte `n` does `n & 7` with a length of `(n >> 3) * 16`:
//! 0 and 1 feed that many of the next bytes (at least one) to the server, 2 and 3 to the
//! client, 4 lets time pass, 5 jumps to the sessions' deadlines, 6 is the driver's next move
//! (the server: listen, refuse or finish; the client: end its data phase), 7 closes the control
//! connection.

use netchar_wire::netperf::client::{Client, Event as ClientEvent, TestParams};
use netchar_wire::netperf::figures::ServerCounts;
use netchar_wire::netperf::omni::{OmniRequest, OmniResponse, OmniResults};
use netchar_wire::netperf::server::{DataSetup, Event, Server};
use netchar_wire::netperf::{Message, TestEnd, TestKind, MESSAGE_LEN, SPEC_LEN};
use std::time::{Duration, Instant};

/// Bytes of the data each OMNI layout covers: the request to `fill_file`, the response to
/// `security_string`, the results to `cong_control`.
const REQUEST_BYTES: usize = 200;
const RESPONSE_BYTES: usize = 201;
const RESULTS_BYTES: usize = 284;

/// The codec and both sessions over `data`.
pub fn netperf(data: &[u8]) {
    codec(data);
    server(data);
    client(data);
}

/// A message decodes exactly from 656 bytes and re-encodes to them; each layout reads any
/// message and writes back the bytes it covers.
fn codec(data: &[u8]) {
    match Message::decode(data) {
        Ok(m) => assert_eq!(&m.encode()[..], data, "a message re-encodes to other bytes"),
        Err(e) => assert!(data.len() != MESSAGE_LEN, "656 bytes refused: {e}"),
    }
    let mut padded = [0u8; MESSAGE_LEN];
    let n = data.len().min(MESSAGE_LEN);
    padded[..n].copy_from_slice(&data[..n]);
    let m = Message::decode(&padded).expect("656 bytes decode");
    let covered = |out: &Message, len: usize, what: &str| {
        assert_eq!(out.status, m.status, "{what}: the status word changed");
        assert_eq!(out.data[..len], m.data[..len], "{what}: bytes changed on re-encoding");
        assert!(out.data[len..].iter().all(|&b| b == 0), "{what}: bytes beyond the layout");
    };
    let r = OmniRequest::decode(&m);
    covered(&r.encode(), REQUEST_BYTES, "request");
    // Any request is one of the six tests or a refusal naming what it asked for.
    if let Err(why) = r.kind() {
        assert!(why.contains("does not run"), "{why}");
    }
    covered(&OmniResponse::decode(&m).encode(), RESPONSE_BYTES, "response");
    covered(&OmniResults::decode(&m).encode(), RESULTS_BYTES, "results");
    assert!(m.kind_any_order() == m.kind || m.kind_any_order() == m.kind.swap_bytes());
    assert!(REQUEST_BYTES.max(RESPONSE_BYTES).max(RESULTS_BYTES) <= SPEC_LEN);
}

/// One step of a script.
fn steps(data: &[u8]) -> impl Iterator<Item = (u8, &[u8])> {
    let mut rest = data.get(1..).unwrap_or(&[]);
    std::iter::from_fn(move || {
        let (&n, tail) = rest.split_first()?;
        let len = if n & 7 < 4 { (usize::from(n >> 3) * 16).max(1).min(tail.len()) } else { 0 };
        let (chunk, next) = tail.split_at(len);
        rest = next;
        Some((n, chunk))
    })
}

/// The server: whatever arrives, it answers in whole messages, never more than one per
/// message or driver move, and nothing once over.
fn server(data: &[u8]) {
    let start = Instant::now();
    let mut now = start;
    let mut s = Server::new(now);
    let (mut fed, mut moves, mut sent) = (0usize, 0usize, 0usize);
    let mut out = Vec::new();
    let mut was_done = false;
    let mut pending_test = false;
    for (n, chunk) in steps(data) {
        let r = match n & 7 {
            0 | 1 => {
                fed += chunk.len();
                s.handle_input(now, chunk)
            }
            2 | 3 => Ok(()),
            4 => {
                now += Duration::from_millis(u64::from(n));
                s.handle_timeout(now)
            }
            5 => {
                if let Some(t) = s.poll_timeout() {
                    now = now.max(t);
                }
                s.handle_timeout(now)
            }
            6 => {
                moves += 1;
                if pending_test && n & 0x80 != 0 {
                    s.refuse(i32::from(n));
                } else if pending_test {
                    let buf = i32::from(n) << 10;
                    s.listening(
                        now,
                        DataSetup {
                            port: u16::from(n),
                            send_buf_size: buf,
                            recv_buf_size: -buf,
                            cpu_rate: Some(100.0),
                        },
                    );
                } else {
                    let counts = ServerCounts {
                        bytes_received: u64::from(n) << 33,
                        transactions: u32::from(n),
                        ..Default::default()
                    };
                    s.finished(now, &counts);
                }
                pending_test = false;
                Ok(())
            }
            _ => s.handle_eof(now),
        };
        while let Some(ev) = s.poll_event() {
            assert!(!was_done, "events after the end: {ev:?}");
            match ev {
                Event::Test(t) => {
                    pending_test = true;
                    let sizes = t.sizes(i32::from(n) << 10, -1);
                    if t.kind.is_rr() {
                        assert_eq!((sizes.recv_size, sizes.send_size), (t.omni.request_size, t.omni.response_size));
                    }
                    if t.kind != TestKind::TcpMaerts {
                        assert!(sizes.recv_size > 0 && sizes.recv_width != 0, "{sizes:?} for {t:?}");
                    }
                }
                Event::TimeUp => assert!(s.is_running()),
                Event::Unknown(_) | Event::Refused(_) => {}
            }
        }
        out.clear();
        s.poll_output(&mut out);
        assert_eq!(out.len() % MESSAGE_LEN, 0, "{} bytes: not whole messages", out.len());
        sent += out.len() / MESSAGE_LEN;
        assert!(sent <= fed / MESSAGE_LEN + moves, "{sent} messages for {fed} bytes and {moves} moves");
        if was_done {
            assert!(out.is_empty() && s.is_done(), "a closed session came back to life");
        }
        if r.is_err() {
            assert!(s.is_done(), "an error left the session open");
        }
        was_done = s.is_done();
    }
}

/// The client: its request goes out first and alone; it connects at most once and before the
/// results, which end it.
fn client(data: &[u8]) {
    let Some(&mode) = data.first() else { return };
    let kind = TestKind::ALL[usize::from(mode % 6)];
    let end =
        if mode & 8 != 0 && !kind.is_udp() { TestEnd::Units(100) } else { TestEnd::Seconds(u32::from(mode >> 6)) };
    let mut p = TestParams::new(kind, end);
    p.remote_cpu = mode & 16 != 0;
    p.passphrase = (mode & 32 != 0).then(|| "pass".to_string());
    let start = Instant::now();
    let mut now = start;
    let mut c = Client::new(now, p).expect("valid options");
    let mut out = Vec::new();
    c.poll_output(&mut out);
    assert_eq!(out.len(), if mode & 32 != 0 { 2 } else { 1 } * MESSAGE_LEN);
    let (mut connected, mut results) = (false, false);
    for (n, chunk) in steps(data) {
        let r = match n & 7 {
            0 | 1 => Ok(()),
            2 | 3 => c.handle_input(now, chunk),
            4 => {
                now += Duration::from_millis(u64::from(n) * 100);
                c.handle_timeout(now)
            }
            5 => {
                if let Some(t) = c.poll_timeout() {
                    now = now.max(t);
                }
                c.handle_timeout(now)
            }
            6 => {
                c.data_done(now);
                Ok(())
            }
            _ => c.handle_eof(now),
        };
        while let Some(ev) = c.poll_event() {
            assert!(!results, "an event after the results: {ev:?}");
            match ev {
                ClientEvent::Connect { port, .. } => {
                    assert!(!connected && port != 0, "a second connect, or to port 0");
                    connected = true;
                }
                ClientEvent::TimeUp => assert!(connected, "time up before the test began"),
                ClientEvent::Results(_) => {
                    assert!(connected && c.is_done(), "results before the response, or a session still open");
                    results = true;
                }
            }
        }
        out.clear();
        c.poll_output(&mut out);
        assert!(out.is_empty(), "the client wrote after its request");
        if r.is_err() {
            assert!(c.is_done(), "an error left the session open");
        }
    }
}

/// A whole TCP_STREAM as a script for both roles: netchar's own request fed to the server, its
/// answers fed to the client.
pub fn seeds() -> Vec<Vec<u8>> {
    let now = Instant::now();
    let params = TestParams::new(TestKind::TcpStream, TestEnd::Seconds(1));
    let mut c = Client::new(now, params).expect("valid options");
    let mut request = Vec::new();
    c.poll_output(&mut request);
    let mut s = Server::new(now);
    s.handle_input(now, &request).expect("a valid request");
    s.poll_event();
    s.listening(now, DataSetup { port: 40000, send_buf_size: 16384, recv_buf_size: 131072, cpu_rate: None });
    s.finished(
        now + Duration::from_secs(1),
        &ServerCounts { bytes_received: 1 << 20, recv_calls: 64, ..Default::default() },
    );
    let mut answers = Vec::new();
    s.poll_output(&mut answers);
    // Mode 64: TCP_STREAM for 1 s; 656 bytes go as 496 then 160 (steps 248 and 80 to the
    // server, 250 and 82 to the client).
    let feed = |script: &mut Vec<u8>, msg: &[u8], to_client: u8| {
        script.push(248 | to_client);
        script.extend_from_slice(&msg[..496]);
        script.push(80 | to_client);
        script.extend_from_slice(&msg[496..]);
    };
    let mut script = vec![64u8];
    feed(&mut script, &request, 0);
    script.push(6);
    feed(&mut script, &answers[..MESSAGE_LEN], 2);
    script.push(5);
    script.push(6);
    feed(&mut script, &answers[MESSAGE_LEN..], 2);
    script.push(7);
    vec![script, request, answers[MESSAGE_LEN..].to_vec()]
}
