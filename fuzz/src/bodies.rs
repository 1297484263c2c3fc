//! The bodies of netchar's fuzz targets, one function per decoder, each asserting invariants
//! rather than only "no panic". Shared by the cargo-fuzz targets (`fuzz/fuzz_targets/`) and by
//! the arbitrary-bytes test that CI runs on stable Rust (`crates/wire/tests/arbitrary_bytes.rs`
//! includes this file), so both exercise the same code.
//!
//! Bodies take raw bytes (no `arbitrary` derive) so that the test can include this file with
//! only the wire crate's own dependencies.
#![allow(dead_code, unreachable_pub)]

use netchar_model::{CpuUsage, HostInfo, StreamTotal, TestSpec};
use netchar_wire::auth::{Credentials, KeyTable};
use netchar_wire::codec::FrameDecoder;
use netchar_wire::datagram::{DatagramHeader, CHALLENGE_LEN, HEADER_LEN, SETUP_LEN};
use netchar_wire::hello::{identify_peer, Hello, HELLO_LEN};
use netchar_wire::message::{ClientMessage, ServerMessage};
use netchar_wire::session::{ClientSession, ServerSession, Timeouts};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The hello: any bytes decode or fail cleanly; a decoded hello re-encodes to the same bytes'
/// meaning; `identify_peer` takes any length.
pub fn hello(data: &[u8]) {
    let _ = identify_peer(data);
    if data.len() >= HELLO_LEN {
        let raw: [u8; HELLO_LEN] = data[..HELLO_LEN].try_into().expect("40 bytes");
        if let Ok(h) = Hello::decode(&raw) {
            assert_eq!(Hello::decode(&h.encode()), Ok(h));
        }
    }
}

/// Framing: fed in chunks whose sizes come from the data, the decoder never returns a frame
/// over its cap and never buffers more than it was given.
pub fn frame(data: &[u8]) {
    const CAP: u32 = 1024;
    let mut d = FrameDecoder::new(CAP);
    let mut fed = 0usize;
    let mut taken = 0usize;
    let mut rest = data;
    while !rest.is_empty() {
        let n = (usize::from(rest[0]) % 97 + 1).min(rest.len());
        d.push(&rest[..n]);
        fed += n;
        rest = &rest[n..];
        loop {
            match d.next_frame() {
                Ok(Some(f)) => {
                    assert!(f.len() <= CAP as usize);
                    taken += 4 + f.len();
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
        assert_eq!(d.pending(), fed - taken);
    }
}

/// Control messages: decoding never panics; what decodes re-encodes and decodes equal.
pub fn control_messages(data: &[u8]) {
    if let Ok(m) = ClientMessage::decode(data) {
        assert_eq!(ClientMessage::decode(&m.encode()).as_ref(), Ok(&m));
    }
    if let Ok(m) = ServerMessage::decode(data) {
        assert_eq!(ServerMessage::decode(&m.encode()).as_ref(), Ok(&m));
    }
}

/// The UDP datagram header and the setup/challenge/confirm datagrams.
pub fn datagram(data: &[u8]) {
    if let Ok(h) = DatagramHeader::parse(data) {
        let mut b = [0u8; HEADER_LEN];
        h.emit(&mut b);
        assert_eq!(DatagramHeader::parse(&b), Ok(h));
    }
    if let Some(s) = DatagramHeader::parse_setup(data) {
        assert!(data.len() >= SETUP_LEN);
        let again = match s.confirm {
            None => DatagramHeader::setup(s.stream_id, &s.cookie),
            Some((token, tag)) => DatagramHeader::confirm(s.stream_id, &s.cookie, &token, &tag),
        };
        assert_eq!(DatagramHeader::parse_setup(&again), Some(s));
    }
    if let Some((id, token)) = DatagramHeader::parse_challenge(data) {
        assert!(data.len() >= CHALLENGE_LEN);
        assert!(DatagramHeader::is_challenge(&DatagramHeader::challenge(id, &token)));
    }
}

/// A test request's spec: JSON from anyone. `validate` never panics, and a spec it accepts
/// has figures that do not overflow.
pub fn spec(data: &[u8]) {
    let Ok(spec) = serde_json::from_slice::<TestSpec>(data) else { return };
    if spec.validate().is_err() {
        return;
    }
    let total = spec.total_streams();
    assert!(total >= 1);
    for id in 1..=total.min(512) {
        assert!(spec.flow_of(id).is_some());
        let _ = spec.byte_budget(id);
    }
    let _ = spec.receive_grace_seconds();
    let _ = spec.udp_pps_per_stream();
    let _ = netchar_wire::message::ClientMessage::Request {
        spec,
        client_version: String::new(),
        companion: None,
        auth: None,
    }
    .encode();
}

/// Splits the script into steps: each step's first byte says what to do.
struct Script<'a> {
    rest: &'a [u8],
}

impl<'a> Script<'a> {
    fn next(&mut self) -> Option<(u8, &'a [u8])> {
        let (&op, tail) = self.rest.split_first()?;
        let n = (usize::from(op) % 61).min(tail.len());
        let (chunk, rest) = tail.split_at(n);
        self.rest = rest;
        Some((op, chunk))
    }
}

/// Output of one step must stay small: a few frames, never an echo of what came in.
const MAX_OUTPUT_PER_STEP: usize = 64 * 1024;

/// The server's session fed anything a client might send, interleaved with timeouts and the
/// driver's own calls: no panic, bounded output, and once done it stays done.
pub fn server_session(data: &[u8]) {
    let Some((&mode, script)) = data.split_first() else { return };
    let mut now = Instant::now();
    let keys = (mode & 1 == 1).then(|| {
        Arc::new(KeyTable::new(vec![Credentials { user: "lab".into(), secret: b"0123456789abcdef".to_vec() }]))
    });
    let mut s = match ServerSession::with_auth(now, &Hello::control(), Timeouts::default(), [mode; 16], keys) {
        Ok(s) => s,
        Err(_) => return,
    };
    let mut out = Vec::new();
    let mut script = Script { rest: script };
    let mut was_done = false;
    while let Some((op, chunk)) = script.next() {
        match op % 8 {
            0..=3 => {
                let _ = s.handle_input(now, chunk);
            }
            4 => {
                now += Duration::from_millis(u64::from(op) * 50);
                let _ = s.handle_timeout(now);
            }
            5 => s.admit(now, &[op; 16], 1, HostInfo::default(), None),
            6 => s.streams_connected(now),
            _ => match op % 3 {
                0 => s.local_senders_done(now, vec![StreamTotal { id: 1, bytes: u64::from(op), packets: 0 }]),
                1 => s.finish(now, Vec::new(), CpuUsage::default(), None),
                _ => {
                    let _ = s.handle_eof(now);
                }
            },
        }
        while s.poll_event().is_some() {}
        out.clear();
        s.poll_output(&mut out);
        assert!(out.len() <= MAX_OUTPUT_PER_STEP, "{} bytes out for one step", out.len());
        if was_done {
            assert!(s.is_done(), "a finished session came back to life");
        }
        was_done = s.is_done();
    }
}

/// The client's session fed anything a server (or something else on the port) might send.
pub fn client_session(data: &[u8]) {
    let Some((&mode, script)) = data.split_first() else { return };
    let mut now = Instant::now();
    let auth =
        (mode & 1 == 1).then(|| (Credentials { user: "lab".into(), secret: b"0123456789abcdef".to_vec() }, [mode; 16]));
    let mut c = ClientSession::with_auth(now, TestSpec::tcp_default(), Timeouts::default(), None, auth);
    let mut out = Vec::new();
    let mut script = Script { rest: script };
    let mut was_done = false;
    // A well-formed server hello first half of the time, so later steps reach deeper states.
    if mode & 2 == 2 {
        let _ = c.handle_input(now, &Hello::server_with_nonce([mode; 16], mode & 4 == 4).encode());
    }
    while let Some((op, chunk)) = script.next() {
        match op % 6 {
            0..=2 => {
                let _ = c.handle_input(now, chunk);
            }
            3 => {
                now += Duration::from_millis(u64::from(op) * 50);
                let _ = c.handle_timeout(now);
            }
            4 => c.local_senders_done(now, vec![StreamTotal { id: 1, bytes: 1, packets: 0 }]),
            _ => c.stop(now, "fuzz"),
        }
        while c.poll_event().is_some() {}
        out.clear();
        c.poll_output(&mut out);
        assert!(out.len() <= MAX_OUTPUT_PER_STEP, "{} bytes out for one step", out.len());
        if was_done {
            assert!(c.is_done(), "a finished session came back to life");
        }
        was_done = c.is_done();
    }
}

/// A fuzz body.
pub type Body = fn(&[u8]);

/// Every body, by name: the fuzz targets and the CI test use the same list.
pub const TARGETS: &[(&str, Body)] = &[
    ("hello", hello),
    ("frame", frame),
    ("control_messages", control_messages),
    ("datagram", datagram),
    ("spec", spec),
    ("server_session", server_session),
    ("client_session", client_session),
];
