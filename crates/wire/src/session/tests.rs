//! Client and server sessions driven against each other in memory, with fake time.

use super::*;
use crate::hello::{Hello, HELLO_LEN};
use crate::ProtocolError;
use netchar_model::{CpuUsage, HostInfo, StreamTotal, TestSpec};
use std::time::{Duration, Instant};

/// A client and a server joined by two in-memory pipes, and a fake clock.
struct Pair {
    now: Instant,
    client: ClientSession,
    server: Option<ServerSession>,
    to_server: Vec<u8>,
}

impl Pair {
    fn new(spec: TestSpec) -> Self {
        let now = Instant::now();
        Self { now, client: ClientSession::new(now, spec, Timeouts::default()), server: None, to_server: Vec::new() }
    }

    /// Moves bytes both ways until nothing moves.
    fn drive(&mut self) {
        loop {
            let mut c2s = Vec::new();
            self.client.poll_output(&mut c2s);
            self.to_server.extend_from_slice(&c2s);
            if self.server.is_none() && self.to_server.len() >= HELLO_LEN {
                let raw: [u8; HELLO_LEN] = self.to_server[..HELLO_LEN].try_into().unwrap();
                self.to_server.drain(..HELLO_LEN);
                let hello = Hello::decode(&raw).unwrap();
                self.server = Some(ServerSession::new(self.now, &hello, Timeouts::default()).unwrap());
            }
            let mut s2c = Vec::new();
            if let Some(server) = &mut self.server {
                let bytes = std::mem::take(&mut self.to_server);
                if !bytes.is_empty() {
                    server.handle_input(self.now, &bytes).unwrap();
                }
                server.poll_output(&mut s2c);
            }
            if !s2c.is_empty() {
                self.client.handle_input(self.now, &s2c).unwrap();
            }
            if c2s.is_empty() && s2c.is_empty() {
                return;
            }
        }
    }

    fn server(&mut self) -> &mut ServerSession {
        self.server.as_mut().unwrap()
    }
}

#[test]
fn a_whole_test_runs_from_hello_to_results() {
    let mut p = Pair::new(TestSpec::tcp_default());
    p.drive();
    assert_eq!(
        p.server().poll_event(),
        Some(ServerEvent::Requested {
            spec: Box::new(TestSpec::tcp_default()),
            companion: None,
            auth: None,
            client_version: env!("CARGO_PKG_VERSION").into()
        })
    );
    let now = p.now;
    p.server().admit(now, &[9; 16], 1, HostInfo::default(), None);
    p.drive();
    assert!(matches!(p.client.poll_event(), Some(ClientEvent::Accepted { cookie, .. }) if cookie == [9; 16]));
    p.server().streams_connected(now);
    p.drive();
    assert_eq!(p.client.poll_event(), Some(ClientEvent::Started));
    assert_eq!(p.server().poll_event(), Some(ServerEvent::Start));
    p.client.local_senders_done(now, vec![StreamTotal { id: 1, bytes: 1234, packets: 0 }]);
    p.drive();
    assert_eq!(
        p.server().poll_event(),
        Some(ServerEvent::PeerSenderDone(vec![StreamTotal { id: 1, bytes: 1234, packets: 0 }]))
    );
    p.server().finish(now, vec![], CpuUsage::default(), None);
    p.drive();
    assert!(matches!(p.client.poll_event(), Some(ClientEvent::Finished { error: None, .. })));
    assert!(p.client.is_done() && p.server().is_done());
}

#[test]
fn keepalives_flow_and_silence_is_detected() {
    let mut p = Pair::new(TestSpec::tcp_default());
    p.drive();
    let now = p.now;
    p.server().admit(now, &[1; 16], 1, HostInfo::default(), None);
    p.server().streams_connected(now);
    p.drive();
    // Both sides want a keepalive one second in.
    let t1 = now + Duration::from_secs(1);
    assert_eq!(p.client.poll_timeout(), Some(t1));
    p.client.handle_timeout(t1).unwrap();
    let mut out = Vec::new();
    p.client.poll_output(&mut out);
    assert_eq!(&out[4..], br#"{"type":"keepalive"}"#);
    // The server never answers: ten seconds of silence ends the client's session.
    let t10 = now + Duration::from_secs(10);
    let err = p.client.handle_timeout(t10).unwrap_err();
    assert!(matches!(err, ProtocolError::Timeout(ref m) if m.contains("went silent")), "{err}");
    assert!(p.client.is_done());
}

#[test]
fn busy_server_ends_the_session_with_an_event() {
    let mut p = Pair::new(TestSpec::tcp_default());
    p.drive();
    let now = p.now;
    p.server().busy(now, 1, 1);
    p.drive();
    assert_eq!(p.client.poll_event(), Some(ClientEvent::Busy { running: 1, max: 1, reason: None }));
    assert!(p.client.is_done());
}

#[test]
fn an_invalid_spec_is_rejected_by_the_server() {
    let mut spec = TestSpec::tcp_default();
    spec.streams = 0;
    let now = Instant::now();
    let mut client = ClientSession::new(now, spec, Timeouts::default());
    let mut c2s = Vec::new();
    client.poll_output(&mut c2s);
    let raw: [u8; HELLO_LEN] = c2s[..HELLO_LEN].try_into().unwrap();
    let mut server = ServerSession::new(now, &Hello::decode(&raw).unwrap(), Timeouts::default()).unwrap();
    let mut s2c = Vec::new();
    server.poll_output(&mut s2c);
    client.handle_input(now, &s2c).unwrap();
    let mut c2s = Vec::new();
    client.poll_output(&mut c2s);
    assert!(server.handle_input(now, &c2s).is_err());
    let mut s2c = Vec::new();
    server.poll_output(&mut s2c);
    let err = client.handle_input(now, &s2c).unwrap_err();
    assert!(err.to_string().contains("rejected the test: -P 0"), "{err}");
    // A caller tells a rejection by its kind, and has the server's reason alone.
    let ProtocolError::Rejected(reason) = &err else { panic!("a rejection expected: {err:?}") };
    assert!(reason.starts_with("-P 0"), "{reason}");
    assert!(client.is_done());
}

#[test]
fn an_iperf3_server_is_named_from_its_first_byte() {
    let now = Instant::now();
    let mut client = ClientSession::new(now, TestSpec::tcp_default(), Timeouts::default());
    let err = client.handle_input(now, &[0x09]).unwrap_err();
    assert!(err.to_string().contains("iperf3 server"), "{err}");
    assert!(
        matches!(err, ProtocolError::PeerProtocol { protocol: crate::hello::KnownProtocol::Iperf3, .. }),
        "{err:?}"
    );
}

#[test]
fn an_echo_server_and_an_unknown_peer_are_told_apart_by_kind() {
    let now = Instant::now();
    let mut client = ClientSession::new(now, TestSpec::tcp_default(), Timeouts::default());
    let err = client.handle_input(now, &Hello::control().encode()).unwrap_err();
    assert!(matches!(err, ProtocolError::PeerProtocol { protocol: crate::hello::KnownProtocol::Echo, .. }), "{err:?}");
    let mut client = ClientSession::new(now, TestSpec::tcp_default(), Timeouts::default());
    let err = client.handle_input(now, b"SSH-2.0-OpenSSH_9.2\r\n").unwrap_err();
    assert!(matches!(&err, ProtocolError::NotNetchar(what) if what.contains("SSH")), "{err:?}");
}

#[test]
fn a_peer_that_closes_without_a_word_is_not_a_silent_one() {
    let now = Instant::now();
    let mut client = ClientSession::new(now, TestSpec::tcp_default(), Timeouts::default());
    let err = client.handle_eof(now).unwrap_err();
    assert!(matches!(&err, ProtocolError::NotNetchar(what) if what.contains("closed")), "{err:?}");
}

#[test]
fn a_silent_peer_times_out_in_the_hello() {
    let now = Instant::now();
    let mut client = ClientSession::new(now, TestSpec::tcp_default(), Timeouts::default());
    let deadline = client.poll_timeout().unwrap();
    assert_eq!(deadline, now + Duration::from_secs(5));
    let err = client.handle_timeout(deadline).unwrap_err();
    assert_eq!(err, ProtocolError::Silent { waited: Duration::from_secs(5) });
    assert_eq!(
        err.to_string(),
        "the peer is not a netchar server: no netchar hello within 5 s: the peer accepted the connection and said \
         nothing, as an iperf2 server (--proto iperf2), netperf's netserver (--proto netperf), a netio server (suite \
         netio --proto netio) or a discard service (--proto discard) does"
    );
}

#[test]
fn a_peer_that_sent_part_of_something_else_is_no_silent_peer() {
    let now = Instant::now();
    let mut client = ClientSession::new(now, TestSpec::tcp_default(), Timeouts::default());
    client.handle_input(now, b"net").unwrap();
    let deadline = client.poll_timeout().unwrap();
    let err = client.handle_timeout(deadline).unwrap_err();
    assert_eq!(
        err,
        ProtocolError::NotNetchar(
            "no netchar hello within 5 s: it sent 3 of the 40 bytes of a netchar hello and stopped".into()
        )
    );
}

#[test]
fn a_version_mismatch_is_explained_to_both_ends() {
    let now = Instant::now();
    let mut hello = Hello::control();
    hello.version = 7;
    let (mut server, err) = *ServerSession::new(now, &hello, Timeouts::default()).unwrap_err();
    assert!(err.to_string().contains("v7"));
    let mut out = Vec::new();
    server.poll_output(&mut out);
    assert!(out.len() > HELLO_LEN);
    // A client that gets a newer server's hello names both versions.
    let mut raw = Hello::server().encode();
    raw[9] = 9;
    let mut client = ClientSession::new(now, TestSpec::tcp_default(), Timeouts::default());
    let err = client.handle_input(now, &raw).unwrap_err();
    assert_eq!(err, ProtocolError::Version { peer: 9, ours: crate::PROTOCOL_VERSION });
}

#[test]
fn messages_out_of_order_are_refused_without_panic() {
    let now = Instant::now();
    let mut server = ServerSession::new(now, &Hello::control(), Timeouts::default()).unwrap();
    let mut frame = Vec::new();
    crate::codec::encode_frame(br#"{"type":"start"}"#, &mut frame);
    let err = server.handle_input(now, &frame).unwrap_err();
    assert!(matches!(err, ProtocolError::Unexpected { message: "start", .. }));
    assert!(server.is_done());
}

mod auth {
    use super::*;
    use crate::auth::{Credentials, KeyTable};
    use std::sync::Arc;

    fn creds(user: &str, secret: &str) -> Credentials {
        Credentials { user: user.into(), secret: secret.as_bytes().to_vec() }
    }

    /// Runs hello → request → (accepted | rejected) between a client with `client` and a
    /// server with `server` keys; returns what each side said.
    fn exchange(
        client: Option<Credentials>,
        server: Option<KeyTable>,
        server_nonce: [u8; 16],
    ) -> (Result<Option<ServerEvent>, ProtocolError>, Result<Option<ClientEvent>, ProtocolError>) {
        let now = Instant::now();
        let mut c = ClientSession::with_auth(
            now,
            TestSpec::tcp_default(),
            Timeouts::default(),
            None,
            client.map(|k| (k, [0x5a; 16])),
        );
        let mut c2s = Vec::new();
        c.poll_output(&mut c2s);
        let raw: [u8; HELLO_LEN] = c2s[..HELLO_LEN].try_into().unwrap();
        let mut s = ServerSession::with_auth(
            now,
            &Hello::decode(&raw).unwrap(),
            Timeouts::default(),
            server_nonce,
            server.map(Arc::new),
        )
        .unwrap();
        let mut s2c = Vec::new();
        s.poll_output(&mut s2c);
        if let Err(e) = c.handle_input(now, &s2c) {
            return (Ok(None), Err(e));
        }
        let mut c2s = Vec::new();
        c.poll_output(&mut c2s);
        let server_side = s.handle_input(now, &c2s).map(|_| s.poll_event());
        if let Ok(Some(ServerEvent::Requested { .. })) = &server_side {
            s.admit(now, &[1; 16], 1, HostInfo::default(), None);
        }
        let mut s2c = Vec::new();
        s.poll_output(&mut s2c);
        let client_side = c.handle_input(now, &s2c).map(|_| c.poll_event());
        (server_side, client_side)
    }

    #[test]
    fn a_client_with_the_right_key_is_admitted_and_both_ends_share_the_session_key() {
        let table = KeyTable::new(vec![creds("lab", "0123456789abcdef"), creds("ci", "fedcba9876543210")]);
        let (server, client) = exchange(Some(creds("ci", "fedcba9876543210")), Some(table), [7; 16]);
        let Ok(Some(ServerEvent::Requested { auth: Some((user, server_key)), .. })) = server else {
            panic!("{server:?}")
        };
        assert_eq!(user, "ci");
        let Ok(Some(ClientEvent::Accepted { session_key: Some(client_key), .. })) = client else {
            panic!("{client:?}")
        };
        assert_eq!(server_key, client_key);
    }

    #[test]
    fn a_wrong_key_an_unknown_user_and_no_key_are_refused_with_the_reason() {
        let table = || KeyTable::new(vec![creds("lab", "0123456789abcdef")]);
        let (server, client) = exchange(Some(creds("lab", "0123456789abcdeX")), Some(table()), [7; 16]);
        assert!(
            matches!(server, Err(ProtocolError::Auth(ref m)) if m.contains("authentication failed for user \"lab\""))
        );
        assert!(client.unwrap_err().to_string().contains("authentication failed"));
        let (server, _) = exchange(Some(creds("eve", "0123456789abcdef")), Some(table()), [7; 16]);
        assert!(matches!(server, Err(ProtocolError::Auth(_))));
        // No key at all: the client stops at the server's hello and says what to pass.
        let (_, client) = exchange(None, Some(table()), [7; 16]);
        assert!(client.unwrap_err().to_string().contains("--psk-file"));
    }

    #[test]
    fn a_recorded_proof_is_useless_against_another_nonce() {
        let table = KeyTable::new(vec![creds("lab", "0123456789abcdef")]);
        // Record the request a genuine client sends for nonce A ...
        let now = Instant::now();
        let mut c = ClientSession::with_auth(
            now,
            TestSpec::tcp_default(),
            Timeouts::default(),
            None,
            Some((creds("lab", "0123456789abcdef"), [1; 16])),
        );
        let mut c2s = Vec::new();
        c.poll_output(&mut c2s);
        c.handle_input(now, &Hello::server_with_nonce([0xA; 16], true).encode()).unwrap();
        let mut request = Vec::new();
        c.poll_output(&mut request);
        // ... and replay it to a server that sent nonce B.
        let mut s =
            ServerSession::with_auth(now, &Hello::control(), Timeouts::default(), [0xB; 16], Some(Arc::new(table)))
                .unwrap();
        assert!(matches!(s.handle_input(now, &request), Err(ProtocolError::Auth(_))));
    }

    #[test]
    fn a_client_with_a_key_refuses_a_server_that_cannot_prove_it() {
        let (_, client) = exchange(Some(creds("lab", "0123456789abcdef")), None, [7; 16]);
        assert!(client.unwrap_err().to_string().contains("does not use authentication"));
    }
}

#[test]
fn an_ended_session_stays_ended_whatever_the_driver_calls() {
    // Found by fuzzing: admit() on a session the client had already ended revived it.
    let now = Instant::now();
    let mut server = ServerSession::new(now, &Hello::control(), Timeouts::default()).unwrap();
    server.handle_eof(now).unwrap_err();
    assert!(server.is_done());
    server.admit(now, &[1; 16], 1, HostInfo::default(), None);
    server.streams_connected(now);
    assert!(server.is_done());
    let mut out = Vec::new();
    server.poll_output(&mut out);
    assert!(!String::from_utf8_lossy(&out).contains("accepted"));
}
