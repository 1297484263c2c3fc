//! The client and server drivers, each driven alone against an in-memory peer.
//!
//! The model is quinn-proto's test `Pair`: the control exchange runs over an in-memory link
//! ([`MemoryLink`]) instead of a socket, so a test can cut it, or speak for one end itself and
//! send what no netchar would. The data plane runs on loopback: the server's data connections
//! arrive at a loopback listener whose connections the server's own routing takes
//! (`server::handle_connection`), as they would at its port.
//!
//! What is asserted is measured: the bytes each end counted against the bytes the test asked
//! for, the error kinds the drivers return, the server's log.

use crate::admission::{Limits, Registry, Request, SourceCounts};
use crate::client::{ClientConfig, ClientError, ClientRun};
use crate::control_link::{ControlLink, LinkCut, MemoryLink};
use crate::error::ServerSessionError;
use crate::protocols::{ProtoChoice, Protocol};
use crate::reflection::{PeerPolicy, ReflectionGuard};
use crate::server_shared::{ServerConfig, ServerLog, Shared};
use crate::StopFlag;
use netchar_model::{EndCondition, Endpoint, Role, TestSpec};
use netchar_wire::hello::{Hello, HELLO_LEN};
use netchar_wire::ProtocolError;
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Where the client's control connection appears to come from, as the server sees it: the
/// loopback address its data connections come from too.
const CLIENT: &str = "127.0.0.1:40000";

/// A server's shared state and data listener on loopback, its log kept for the test.
struct ServerSide {
    shared: Arc<Shared>,
    log: Arc<Mutex<Vec<ServerLog>>>,
    data_addr: SocketAddr,
    router_stop: StopFlag,
    router: Option<JoinHandle<()>>,
}

impl ServerSide {
    fn new(limits: Limits) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback listener");
        let data_addr = listener.local_addr().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut cfg = ServerConfig::new(data_addr);
        cfg.limits = limits.clone();
        let logged = log.clone();
        let shared = Arc::new(Shared {
            registry: Registry::default(),
            cfg,
            log: Arc::new(move |e| logged.lock().unwrap().push(e)),
            stop: StopFlag::new(),
            guard: ReflectionGuard::new(PeerPolicy::default(), Vec::new()),
        });
        let router_stop = StopFlag::new();
        let (stop, routing) = (router_stop.clone(), shared.clone());
        listener.set_nonblocking(true).unwrap();
        let router = std::thread::spawn(move || {
            let sources = Arc::new(SourceCounts::default());
            while !stop.is_raised() {
                match listener.accept() {
                    Ok((stream, peer)) => {
                        stream.set_nonblocking(false).unwrap();
                        let Ok(slot) = sources.take(peer.ip(), &limits) else {
                            panic!("no room for the test's streams")
                        };
                        let shared = routing.clone();
                        std::thread::spawn(move || crate::server::handle_connection(stream, peer, slot, &shared));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        Self { shared, log, data_addr, router_stop, router: Some(router) }
    }

    /// Serves one netchar control session over `link` in a thread, as the server does after
    /// accepting a control connection; the thread returns why the session ended early.
    fn serve(&self, mut link: MemoryLink) -> JoinHandle<Option<ServerSessionError>> {
        let shared = self.shared.clone();
        std::thread::spawn(move || {
            let deadline = Instant::now() + shared.cfg.limits.idle_timeout;
            let (got, raw) = crate::server::read_hello(&mut link, deadline, &shared.stop);
            assert_eq!(got, HELLO_LEN, "the client's hello");
            let hello = Hello::decode(&raw).expect("a netchar hello");
            crate::server::serve_native_over(Box::new(link), CLIENT.parse().unwrap(), &hello, &shared, deadline)
        })
    }

    fn log(&self) -> Vec<ServerLog> {
        self.log.lock().unwrap().clone()
    }
}

impl Drop for ServerSide {
    fn drop(&mut self) {
        self.router_stop.raise();
        if let Some(r) = self.router.take() {
            let _ = r.join();
        }
    }
}

fn client_config(spec: TestSpec, server: &ServerSide) -> ClientConfig {
    ClientConfig {
        host: server.data_addr.ip().to_string(),
        port: server.data_addr.port(),
        family: None,
        spec,
        connect_timeout: Duration::from_secs(10),
        busy_wait: Duration::ZERO,
        client_cpu: None,
        title: None,
        timeouts: Default::default(),
        companion: None,
        cookie_tx: None,
        auth: None,
        protocol: ProtoChoice::Only(Protocol::native()),
        dial_back: None,
        bind: None,
        target_ns_per_instruction: None,
        peer_block_bytes: None,
    }
}

/// The client driver against the server driver: the control exchange in memory.
fn run_pair(
    server: &ServerSide,
    spec: TestSpec,
    on_interval: &mut dyn FnMut(&netchar_model::IntervalRecord, &LinkCut),
) -> (ClientRun, Option<ServerSessionError>) {
    let (client_end, server_end, cut) = MemoryLink::pair(CLIENT.parse().unwrap());
    let served = server.serve(server_end);
    let cfg = client_config(spec, server);
    let run = crate::client::run_over(&cfg, server.data_addr, Box::new(client_end), &StopFlag::new(), &mut |iv| {
        on_interval(iv, &cut)
    });
    (run, served.join().expect("the server's session thread"))
}

fn bytes_of(run: &ClientRun, by: Endpoint, role: Role) -> u64 {
    let result = run.result.as_ref().expect("a result");
    result.streams.iter().filter(|s| s.measured_by == by && s.role == role).map(|s| s.bytes).sum()
}

#[test]
fn a_native_tcp_test_runs_end_to_end_and_both_ends_count_every_byte() {
    let server = ServerSide::new(Limits::default());
    let mut spec = TestSpec::tcp_default();
    spec.streams = 2;
    let asked = 3 << 20;
    spec.end = EndCondition::Bytes(asked);
    let (run, server_end) = run_pair(&server, spec, &mut |_, _| {});
    assert!(run.error.is_none(), "{:?}", run.error);
    assert!(server_end.is_none(), "{server_end:?}");
    // -n is per flow, split across its streams: each end counts all of it, no more.
    assert_eq!(bytes_of(&run, Endpoint::Client, Role::Sender), asked);
    assert_eq!(bytes_of(&run, Endpoint::Server, Role::Receiver), asked);
    let result = run.result.as_ref().unwrap();
    assert_eq!(result.streams.len(), 4, "{:?}", result.streams);
    assert!(result.error.is_none());
    // The server logged the same test, with the same figures.
    let logged: Vec<_> = server
        .log()
        .into_iter()
        .filter_map(|e| match e {
            ServerLog::Test(t) => Some(t),
            ServerLog::Rejected { .. } => None,
        })
        .collect();
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert!(logged[0].error.is_none(), "{:?}", logged[0].error);
    assert_eq!(logged[0].streams.iter().map(|s| s.bytes).sum::<u64>(), asked);
    assert_eq!(server.shared.registry.lock().running, 0, "the test's place is free again");
}

#[test]
fn a_busy_server_turns_the_test_away_with_a_kind_the_caller_matches() {
    let server = ServerSide::new(Limits::default());
    // The server's one place is held by another client's test.
    let holder = TestSpec::tcp_default();
    let (route, _routed) = std::sync::mpsc::sync_channel(1);
    let other =
        Request { spec: &holder, companion: None, client_ip: "192.0.2.9".parse().unwrap(), session_key: None, route };
    server.shared.registry.admit(other, &server.shared.cfg.limits, Instant::now()).expect("the first test's place");
    let (run, server_end) = run_pair(&server, TestSpec::tcp_default(), &mut |_, _| {});
    assert!(run.result.is_none(), "no test ran");
    assert!(matches!(&run.error, Some(ClientError::Busy { running: 1, max: 1, reason: None, .. })), "{:?}", run.error);
    assert!(server_end.is_none(), "a refusal answered is the session's end: {server_end:?}");
    let log = server.log();
    assert!(
        log.iter()
            .any(|e| matches!(e, ServerLog::Rejected { reason, .. } if reason.starts_with("turned away as busy"))),
        "{log:?}"
    );
    assert_eq!(server.shared.registry.lock().running, 1, "only the holder runs");
}

#[test]
fn a_server_that_dies_mid_test_leaves_the_client_its_figures_and_says_so() {
    let server = ServerSide::new(Limits::default());
    let mut spec = TestSpec::tcp_default();
    // Long enough never to end on its own before the cut; the cut comes at the first interval.
    spec.end = EndCondition::Seconds(60.0);
    spec.interval_seconds = 0.1;
    let (run, server_end) = run_pair(&server, spec, &mut |_, cut| cut.cut());
    assert!(matches!(&run.error, Some(ClientError::PeerGone { .. })), "{:?}", run.error);
    let sent = bytes_of(&run, Endpoint::Client, Role::Sender);
    assert!(sent > 0, "the client's figures until the cut are kept");
    let result = run.result.as_ref().unwrap();
    assert_eq!(result.error.as_deref(), Some(run.error.as_ref().unwrap().to_string().as_str()));
    // The server saw its client go: its figures are logged with the error.
    assert!(matches!(server_end, Some(ServerSessionError::ClientGone)), "{server_end:?}");
    let log = server.log();
    let test = log
        .iter()
        .find_map(|e| match e {
            ServerLog::Test(t) => Some(t),
            ServerLog::Rejected { .. } => None,
        })
        .expect("the test in the server's log");
    assert_eq!(test.error.as_deref(), Some("the client closed the control connection during the test"));
    let received: u64 = test.streams.iter().map(|s| s.bytes).sum();
    assert!(received > 0 && received <= sent, "the server received {received} of {sent} bytes sent");
    assert_eq!(server.shared.registry.lock().running, 0, "the test's place is free again");
}

/// Reads everything `link` gets until the peer closes it, failing the test if it never does.
fn read_to_close(link: &mut MemoryLink) -> Vec<u8> {
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    let give_up = Instant::now() + Duration::from_secs(60);
    loop {
        match link.read_within(&mut buf, Duration::from_millis(100)) {
            Ok(0) => return all,
            Ok(n) => all.extend_from_slice(&buf[..n]),
            Err(e) if crate::is_retry(&e) && Instant::now() < give_up => {}
            Err(e) => panic!("the peer never closed the link: {e}"),
        }
    }
}

#[test]
fn a_malformed_request_ends_the_server_session_with_one_typed_error() {
    let server = ServerSide::new(Limits::default());
    let (mut client, server_end, _) = MemoryLink::pair(CLIENT.parse().unwrap());
    let served = server.serve(server_end);
    let mut out = Hello::control().encode().to_vec();
    netchar_wire::codec::encode_frame(b"{\"type\": \"request\", \"spec\": 7", &mut out);
    client.send_all(&out).unwrap();
    // The server answers and closes; it does not wait for more.
    let answer = read_to_close(&mut client);
    assert!(answer.len() > HELLO_LEN, "the server's hello and its error message");
    let end = served.join().expect("no panic in the session thread");
    assert!(matches!(end, Some(ServerSessionError::Protocol(ProtocolError::Malformed(_)))), "{end:?}");
    let log = server.log();
    assert!(
        matches!(&log[..], [ServerLog::Rejected { reason, .. }] if reason.starts_with("malformed control message")),
        "{log:?}"
    );
    assert_eq!(server.shared.registry.lock().running, 0);
}

#[test]
fn a_malformed_answer_ends_the_client_run_with_one_typed_error() {
    // No server driver: the test speaks for the server, a hello and then garbage.
    let server = ServerSide::new(Limits::default());
    let (client_end, mut fake_server, _) = MemoryLink::pair(CLIENT.parse().unwrap());
    let speaker = std::thread::spawn(move || {
        let (got, _) =
            crate::server::read_hello(&mut fake_server, Instant::now() + Duration::from_secs(60), &StopFlag::new());
        assert_eq!(got, HELLO_LEN);
        let mut out = Hello::server_with_nonce([7; 16], false).encode().to_vec();
        netchar_wire::codec::encode_frame(b"\xff\xfe not a message", &mut out);
        fake_server.send_all(&out).unwrap();
        read_to_close(&mut fake_server)
    });
    let cfg = client_config(TestSpec::tcp_default(), &server);
    let run = crate::client::run_over(&cfg, server.data_addr, Box::new(client_end), &StopFlag::new(), &mut |_| {});
    assert!(run.result.is_none(), "no test ran");
    assert!(matches!(&run.error, Some(ClientError::Protocol(ProtocolError::Malformed(_)))), "{:?}", run.error);
    drop(run);
    speaker.join().expect("the fake server saw the client close");
}

#[test]
fn the_client_alone_takes_a_busy_answer_from_a_server_session_the_test_drives() {
    use netchar_wire::session::{ServerEvent, ServerSession};
    // No server driver: the test runs the server's sans-IO session by hand, and answers the
    // client's request with a busy refusal of its own figures.
    let server = ServerSide::new(Limits::default());
    let (client_end, mut by_hand, _) = MemoryLink::pair(CLIENT.parse().unwrap());
    let speaker = std::thread::spawn(move || {
        let (got, raw) =
            crate::server::read_hello(&mut by_hand, Instant::now() + Duration::from_secs(60), &StopFlag::new());
        assert_eq!(got, HELLO_LEN);
        let hello = Hello::decode(&raw).unwrap();
        let mut session = ServerSession::new(Instant::now(), &hello, Default::default()).expect("a netchar client");
        let mut buf = [0u8; 4096];
        let requested = loop {
            let mut out = Vec::new();
            session.poll_output(&mut out);
            if !out.is_empty() {
                by_hand.send_all(&out).unwrap();
            }
            if let Some(ServerEvent::Requested { spec, .. }) = session.poll_event() {
                break spec;
            }
            match by_hand.read_within(&mut buf, Duration::from_secs(60)) {
                Ok(0) => panic!("the client closed before its request"),
                Ok(n) => session.handle_input(Instant::now(), &buf[..n]).expect("a well-formed request"),
                Err(e) => panic!("no request from the client: {e}"),
            }
        };
        session.refuse_busy(Instant::now(), 3, 2, Some("a limit the test names".into()));
        let mut out = Vec::new();
        session.poll_output(&mut out);
        by_hand.send_all(&out).unwrap();
        read_to_close(&mut by_hand);
        requested
    });
    let mut spec = TestSpec::tcp_default();
    spec.streams = 3;
    let cfg = client_config(spec, &server);
    let run = crate::client::run_over(&cfg, server.data_addr, Box::new(client_end), &StopFlag::new(), &mut |_| {});
    assert!(run.result.is_none(), "no test ran");
    assert!(
        matches!(&run.error, Some(ClientError::Busy { running: 3, max: 2, reason: Some(r), .. }) if r == "a limit the test names"),
        "{:?}",
        run.error
    );
    drop(run);
    let requested = speaker.join().expect("the hand-driven server saw the request and the close");
    assert_eq!(requested.streams, 3, "the request the client sent is the test asked for");
}
