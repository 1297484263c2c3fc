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
    ClientConfig::to_server(server.data_addr, spec, ProtoChoice::Only(Protocol::native()))
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

/// netio's client session (crate::peers::netio::NetioControl) run by the client driver against
/// a netio server the test speaks for over an in-memory link.
mod netio {
    use super::*;
    use netchar_model::{Direction, Flow, TestKind};
    use netchar_wire::netio::{BlockReader, Cmd, Control, Server, CONTROL_LEN};
    use std::net::UdpSocket;

    fn netio_config(kind: TestKind, size: u32, both_ways: bool, peer: SocketAddr) -> ClientConfig {
        let mut spec = if kind == TestKind::Udp { TestSpec::udp_default() } else { TestSpec::tcp_default() };
        spec.block_bytes = u64::from(size);
        spec.direction = if both_ways { Direction::Bidir } else { Direction::Up };
        spec.end = EndCondition::Seconds(0.2);
        if let Some(u) = spec.udp.as_mut() {
            u.rate = netchar_model::UdpRate::Unlimited;
        }
        ClientConfig::to_server(peer, spec, ProtoChoice::Only(Protocol::find("netio").expect("netio's entry")))
    }

    /// The peer's end of the link, read a message or a block at a time.
    struct PeerEnd {
        link: MemoryLink,
        held: Vec<u8>,
    }

    impl PeerEnd {
        /// More bytes from the client; false once it closed.
        fn fill(&mut self, wait: Duration) -> bool {
            let mut buf = [0u8; 65536];
            match self.link.read_within(&mut buf, wait) {
                Ok(0) => false,
                Ok(n) => {
                    self.held.extend_from_slice(&buf[..n]);
                    true
                }
                Err(e) if crate::is_retry(&e) => true,
                Err(e) => panic!("the link failed: {e}"),
            }
        }

        /// The client's next CONTROL message, None if it closed first.
        fn control(&mut self) -> Option<Control> {
            while self.held.len() < CONTROL_LEN {
                if !self.fill(Duration::from_secs(60)) {
                    return None;
                }
            }
            let bytes: [u8; CONTROL_LEN] = self.held[..CONTROL_LEN].try_into().unwrap();
            self.held.drain(..CONTROL_LEN);
            Some(Control::decode(&bytes).0)
        }

        /// The client's blocks of `size` up to and with its end marker: their bytes.
        fn blocks(&mut self, size: u32) -> u64 {
            let mut reader = BlockReader::new(size);
            loop {
                let used = reader.feed(&self.held);
                self.held.drain(..used);
                if reader.done() {
                    return reader.bytes;
                }
                assert!(self.fill(Duration::from_secs(60)), "the client closed in the middle of its blocks");
            }
        }

        fn send(&mut self, bytes: &[u8]) {
            self.link.send_all(bytes).expect("the client reads");
        }
    }

    /// What a TCP netio peer saw: the C2S size, the bytes of the client's blocks (marker
    /// included), the S2C size, whether QUIT came.
    type TcpSaw = (u32, u64, Option<u32>, bool);

    /// A netio server on TCP over `link`: takes the client's blocks, and when asked sends
    /// `back` blocks and its marker, or with `cut` only `back` blocks before it dies.
    fn tcp_peer(link: MemoryLink, back: u64, cut: Option<LinkCut>) -> JoinHandle<TcpSaw> {
        std::thread::spawn(move || {
            let mut peer = PeerEnd { link, held: Vec::new() };
            let c2s = peer.control().expect("C2S");
            assert_eq!(c2s.command(), Some(Cmd::C2S));
            let got = peer.blocks(c2s.data);
            let Some(next) = peer.control() else { return (c2s.data, got, None, false) };
            if next.command() == Some(Cmd::Quit) {
                return (c2s.data, got, None, true);
            }
            assert_eq!(next.command(), Some(Cmd::S2C));
            let block = vec![0u8; next.data as usize];
            for _ in 0..back {
                peer.send(&block);
            }
            if let Some(cut) = cut {
                cut.cut();
                return (c2s.data, got, Some(next.data), false);
            }
            peer.send(&Server::marker(next.data));
            let quit = peer.control().is_some_and(|c| c.command() == Some(Cmd::Quit));
            (c2s.data, got, Some(next.data), quit)
        })
    }

    fn record(run: &ClientRun, flow: Flow, role: Role) -> Option<netchar_model::StreamRecord> {
        run.result.as_ref()?.streams.iter().find(|s| s.flow == flow && s.role == role).cloned()
    }

    #[test]
    fn a_tcp_size_runs_both_ways_and_each_end_counts_the_others_blocks() {
        let peer_addr: SocketAddr = "127.0.0.1:18767".parse().unwrap();
        let (client_end, peer_end, _) = MemoryLink::pair(CLIENT.parse().unwrap());
        let peer = tcp_peer(peer_end, 50, None);
        let cfg = netio_config(TestKind::Tcp, 4096, true, peer_addr);
        let run = crate::client::run_over(&cfg, peer_addr, Box::new(client_end), &StopFlag::new(), &mut |_| {});
        let (size, got, s2c, quit) = peer.join().expect("the peer's thread");
        assert!(run.error.is_none(), "{:?}", run.error);
        assert_eq!((size, s2c, quit), (4096, Some(4096), true), "C2S, S2C and QUIT of the size");
        let sent = record(&run, Flow::Up, Role::Sender).expect("the Tx leg");
        assert_eq!(sent.measured_by, Endpoint::Client);
        assert!(sent.bytes > 0 && sent.bytes.is_multiple_of(4096));
        // The peer read every block the client counted, and the marker block netio leaves out.
        assert_eq!(got, sent.bytes + 4096);
        let read = record(&run, Flow::Down, Role::Receiver).expect("the Rx leg");
        assert_eq!(read.bytes, 51 * 4096, "every block the peer sent, its marker included");
        let result = run.result.as_ref().unwrap();
        let title = result.test.title.as_deref().unwrap_or_default();
        assert!(title.starts_with("Packet size  4k bytes: ") && title.ends_with(" Rx."), "{title}");
        assert_eq!((result.test.protocol.as_str(), result.cpu.remote.is_none()), ("netio", true));
    }

    #[test]
    fn a_sink_that_never_sends_keeps_the_tx_leg_and_notes_the_missing_rx() {
        let peer_addr: SocketAddr = "127.0.0.1:18767".parse().unwrap();
        let (client_end, peer_end, _) = MemoryLink::pair(CLIENT.parse().unwrap());
        // The peer reads and never answers: the Rx phase hears nothing within the limit.
        let sink = std::thread::spawn(move || {
            let mut peer = PeerEnd { link: peer_end, held: Vec::new() };
            let c2s = peer.control().expect("C2S");
            let got = peer.blocks(c2s.data);
            let s2c = peer.control().expect("S2C");
            let quit = peer.control().expect("QUIT after the Rx limit");
            (got, s2c.command(), quit.command())
        });
        let mut cfg = netio_config(TestKind::Tcp, 2048, true, peer_addr);
        cfg.timeouts.silence = Duration::from_millis(300);
        let run = crate::client::run_over(&cfg, peer_addr, Box::new(client_end), &StopFlag::new(), &mut |_| {});
        let (got, s2c, quit) = sink.join().expect("the sink's thread");
        assert!(run.error.is_none(), "{:?}", run.error);
        assert_eq!((s2c, quit), (Some(Cmd::S2C), Some(Cmd::Quit)));
        let sent = record(&run, Flow::Up, Role::Sender).expect("the Tx leg").bytes;
        assert_eq!(got, sent + 2048);
        assert!(record(&run, Flow::Down, Role::Receiver).is_none(), "no Rx leg");
        let note = run.result.as_ref().unwrap().error.as_deref().unwrap_or_default();
        assert!(note.contains("Rx skipped"), "{note}");
    }

    #[test]
    fn a_netio_server_that_dies_mid_rx_ends_the_run_as_gone() {
        let peer_addr: SocketAddr = "127.0.0.1:18767".parse().unwrap();
        let (client_end, peer_end, cut) = MemoryLink::pair(CLIENT.parse().unwrap());
        let peer = tcp_peer(peer_end, 10, Some(cut));
        let cfg = netio_config(TestKind::Tcp, 1024, true, peer_addr);
        let run = crate::client::run_over(&cfg, peer_addr, Box::new(client_end), &StopFlag::new(), &mut |_| {});
        let (_, _, s2c, _) = peer.join().expect("the peer's thread");
        assert_eq!(s2c, Some(1024), "the peer died in the Rx phase");
        assert!(matches!(&run.error, Some(ClientError::PeerGone { .. })), "{:?}", run.error);
        let result = run.result.as_ref().expect("the test ran: its result says how it ended");
        assert_eq!(result.error.as_deref(), Some(run.error.as_ref().unwrap().to_string().as_str()));
    }

    #[test]
    fn a_command_netio_never_sends_ends_the_run_as_malformed_before_any_data() {
        let peer_addr: SocketAddr = "127.0.0.1:18768".parse().unwrap();
        let (client_end, peer_end, _) = MemoryLink::pair(CLIENT.parse().unwrap());
        let peer = std::thread::spawn(move || {
            let mut peer = PeerEnd { link: peer_end, held: Vec::new() };
            let c2s = peer.control().expect("C2S");
            // Answered with command 99 (the four are 0 to 3).
            peer.send(&Control { cmd: 99, data: c2s.data }.encode());
            (c2s.command(), c2s.data, peer.control())
        });
        let cfg = netio_config(TestKind::Udp, 1024, true, peer_addr);
        let run = crate::client::run_over(&cfg, peer_addr, Box::new(client_end), &StopFlag::new(), &mut |_| {});
        let (cmd, size, after) = peer.join().expect("the peer's thread");
        assert_eq!((cmd, size), (Some(Cmd::C2S), 1024));
        assert!(after.is_none(), "the client closed without another word: {after:?}");
        assert!(run.result.is_none(), "no data moved");
        assert!(matches!(&run.error, Some(ClientError::Protocol(ProtocolError::Malformed(_)))), "{:?}", run.error);
    }

    /// A port free for UDP on both loopback addresses the test uses.
    fn free_udp_port_on_both() -> (UdpSocket, u16) {
        loop {
            let peer = UdpSocket::bind("127.0.0.2:0").expect("127.0.0.2 is loopback on Linux");
            let port = peer.local_addr().unwrap().port();
            if UdpSocket::bind(("127.0.0.1", port)).is_ok() {
                return (peer, port);
            }
        }
    }

    #[test]
    fn a_udp_size_runs_in_the_data_plane_and_settles_against_the_peers_counts() {
        // netio's UDP test uses one port number on both ends: the peer on 127.0.0.2, the
        // client (the link's address) on 127.0.0.1.
        let (socket, port) = free_udp_port_on_both();
        let peer_addr = SocketAddr::new("127.0.0.2".parse().unwrap(), port);
        let (client_end, peer_end, _) = MemoryLink::pair(CLIENT.parse().unwrap());
        const BACK: u64 = 200;
        let peer = std::thread::spawn(move || {
            let mut peer = PeerEnd { link: peer_end, held: Vec::new() };
            let c2s = peer.control().expect("C2S");
            peer.send(&c2s.encode());
            socket.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
            let (mut counted, mut from) = (0u64, None);
            let mut buf = vec![0u8; 65536];
            // Counts the client's datagrams until its RES, then every one still queued.
            while peer.held.len() < CONTROL_LEN {
                while let Ok((n, at)) = socket.recv_from(&mut buf) {
                    assert_eq!(n, c2s.data as usize, "a datagram is one block");
                    counted += 1;
                    from = Some(at);
                }
                assert!(peer.fill(Duration::from_millis(1)), "the client closed during Tx");
            }
            while let Ok((_, at)) = socket.recv_from(&mut buf) {
                counted += 1;
                from = Some(at);
            }
            let res = peer.control().unwrap();
            assert_eq!(res.command(), Some(Cmd::Res));
            peer.send(&Control::new(Cmd::Res, counted as u32).encode());
            let s2c = peer.control().expect("S2C");
            assert_eq!(s2c.command(), Some(Cmd::S2C));
            let to = from.expect("the client's datagrams came");
            let block = vec![0u8; s2c.data as usize];
            let sent = (0..BACK).filter(|_| socket.send_to(&block, to).is_ok()).count() as u64;
            peer.send(&Control::new(Cmd::Res, sent as u32).encode());
            let quit = peer.control().map(|c| c.command());
            (counted, sent, to, quit)
        });
        let cfg = netio_config(TestKind::Udp, 1024, true, peer_addr);
        let run = crate::client::run_over(&cfg, peer_addr, Box::new(client_end), &StopFlag::new(), &mut |_| {});
        let (counted, sent, from, quit) = peer.join().expect("the peer's thread");
        assert!(run.error.is_none(), "{:?}", run.error);
        assert_eq!(quit, Some(Some(Cmd::Quit)));
        assert_eq!(from.port(), port, "the client sends from the server's port number");
        let tx = record(&run, Flow::Up, Role::Sender).expect("this end's sender");
        let peer_got = record(&run, Flow::Up, Role::Receiver).expect("the peer's RES count");
        assert_eq!((tx.measured_by, peer_got.measured_by), (Endpoint::Client, Endpoint::Server));
        assert_eq!(peer_got.bytes, counted * 1024);
        let tx_sent = tx.udp_sent.as_ref().expect("the sender's UDP figures").packets;
        assert!(counted > 0 && counted <= tx_sent, "the peer counted {counted} of {tx_sent}");
        let rx = record(&run, Flow::Down, Role::Receiver).expect("this end's receiver");
        let peer_sent = record(&run, Flow::Down, Role::Sender).expect("the peer's count of what it sent");
        assert_eq!(peer_sent.bytes, sent * 1024);
        let received = rx.udp_received.as_ref().expect("UDP figures");
        // Loss settled against the peer's own count: every datagram it sent is received or lost.
        assert_eq!(received.packets + received.lost, sent, "{received:?}");
        assert_eq!(rx.bytes, received.packets * 1024);
        let title = run.result.as_ref().unwrap().test.title.clone().unwrap_or_default();
        assert!(title.starts_with("Packet size  1k bytes: ") && title.ends_with("Rx."), "{title}");
    }
}

/// nc_test's master, one request a session (crate::peers::nc_test::NcTestControl), run by the
/// client driver against a slave the test speaks for: its control datagrams over an in-memory
/// link, its data on loopback, its data loop the wire's own slave (`SlaveTest`).
mod nc_test {
    use super::*;
    use crate::peers::nc_test::{spec_for, NcTestControl, RequestOutcome};
    use netchar_wire::nc_test::{Kind, MasterReport, Pause, Reply, Request, Slave, SlaveAction, SlaveTest, Step};
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream, UdpSocket};

    fn config(kind: Kind, nbufs: u32, buflen: u32) -> ClientConfig {
        ClientConfig::new(
            "127.0.0.1",
            netchar_wire::nc_test::SLAVE_PORT,
            spec_for(kind, nbufs, buflen, Pause::default()),
            ProtoChoice::Only(Protocol::find("nc-test").expect("nc_test's entry")),
        )
    }

    /// The slave's data channel.
    enum Data {
        Udp(UdpSocket, SocketAddr),
        Tcp(TcpStream),
    }

    /// Runs the slave's loop of `req` over `data`, dying (closing everything) after `die_after`
    /// buffers received if given; returns the buffers it received and sent.
    fn slave_loop(req: Request, mut data: Data, die_after: Option<u32>) -> (u32, u32) {
        let mut test = SlaveTest::new(req).expect("a data test");
        let (mut got, mut sent) = (0, 0);
        let mut buf = vec![0u8; 70_000];
        loop {
            match test.next_step() {
                Step::Done => return (got, sent),
                Step::Print(_) | Step::Pause(_) => {}
                Step::Send(bytes) => {
                    let ok = match &mut data {
                        Data::Udp(s, to) => s.send_to(&bytes, *to).is_ok(),
                        Data::Tcp(s) => s.write_all(&bytes).is_ok(),
                    };
                    sent += u32::from(ok && bytes.len() != netchar_wire::nc_test::RESULTS_LEN);
                }
                Step::Recv { len, timeout } => {
                    let read = match &mut data {
                        Data::Udp(s, _) => {
                            s.set_read_timeout(Some(timeout)).unwrap();
                            s.recv(&mut buf).ok().map(|n| buf[..n.min(len)].to_vec())
                        }
                        Data::Tcp(s) => {
                            s.set_read_timeout(Some(timeout)).unwrap();
                            let mut b = vec![0u8; len];
                            s.read_exact(&mut b).ok().map(|_| b)
                        }
                    };
                    got += u32::from(read.is_some());
                    test.received(read.as_deref());
                    if die_after == Some(got) {
                        return (got, sent);
                    }
                }
            }
        }
    }

    /// What the slave saw.
    struct SlaveSaw {
        request: Request,
        received: u32,
        sent: u32,
    }

    /// A slave answering one request over `link` with `answer` (the stock slave's decision
    /// when None), then running the test it ACKed on loopback.
    fn slave(
        mut link: MemoryLink,
        udp: Option<UdpSocket>,
        tcp: Option<TcpListener>,
        answer: Option<Vec<u8>>,
        die_after: Option<u32>,
        cut: Option<LinkCut>,
    ) -> JoinHandle<SlaveSaw> {
        std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            let n = link.read_within(&mut buf, Duration::from_secs(60)).expect("the master's request");
            let request = Request::decode(&buf[..n]).expect("a request");
            let data_port = udp.as_ref().map(|s| s.local_addr().unwrap().port());
            let data_port = data_port.or(tcp.as_ref().map(|l| l.local_addr().unwrap().port())).unwrap_or(8770);
            let decision = Slave { data_port, ..Slave::default() }.handle(&buf[..n]).expect("a decision");
            link.send_all(&answer.unwrap_or_else(|| decision.reply.encode().to_vec())).unwrap();
            let (received, sent) = match decision.action {
                SlaveAction::Test(req) if req.kind().is_some_and(Kind::is_udp) => {
                    let to = SocketAddr::new("127.0.0.1".parse().unwrap(), req.master_port as u16);
                    slave_loop(req, Data::Udp(udp.expect("a UDP data socket"), to), die_after)
                }
                SlaveAction::Test(req) => {
                    let (stream, _) = tcp.expect("a TCP data listener").accept().unwrap();
                    slave_loop(req, Data::Tcp(stream), die_after)
                }
                _ => (0, 0),
            };
            if let Some(cut) = cut {
                cut.cut();
            }
            SlaveSaw { request, received, sent }
        })
    }

    fn request(kind: Kind, nbufs: u32, buflen: u32, slave_port: u16) -> Request {
        let mut r = Request::new(kind, 2, nbufs, buflen);
        r.slave_port = u32::from(slave_port);
        // A UDP test binds any free port (the session names it); a TCP one names the stock
        // port, which the slave checks and does not use.
        r.master_port = if kind.is_udp() { 0 } else { u32::from(netchar_wire::nc_test::DATA_MASTER_PORT) };
        r
    }

    fn outcome_of(o: &Arc<Mutex<RequestOutcome>>) -> (Option<Vec<u8>>, Option<u16>, Option<MasterReport>) {
        let mut o = o.lock().unwrap();
        (o.reply.take(), o.master_port, o.report.take())
    }

    const SLAVE_ADDR: &str = "127.0.0.1:7777";

    #[test]
    fn a_udp_echo_is_one_session_and_both_ends_count_every_buffer() {
        let data = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = data.local_addr().unwrap().port();
        let (mine, theirs, _) = MemoryLink::pair(CLIENT.parse().unwrap());
        let peer = slave(theirs, Some(data), None, None, None, None);
        let req = request(Kind::UdpEcho, 64, 512, port);
        let (session, outcome) = NcTestControl::new(Instant::now(), req, Pause::default(), SLAVE_ADDR.parse().unwrap());
        let cfg = config(Kind::UdpEcho, 64, 512);
        let run = crate::client::run_session_over(
            &cfg,
            SLAVE_ADDR.parse().unwrap(),
            Box::new(session),
            Box::new(mine),
            &StopFlag::new(),
        );
        let saw = peer.join().unwrap();
        assert!(run.error.is_none(), "{:?}", run.error);
        let (reply, bound, report) = outcome_of(&outcome);
        assert!(Reply::decode(&reply.unwrap()).unwrap().is_ack());
        // The request named the port the driver bound before it went out.
        assert_eq!(Some(saw.request.master_port as u16), bound);
        let report = report.expect("the test's report");
        assert_eq!((report.sent, report.received, report.lost), (64, 64, 0));
        let results = report.results.expect("the slave's results record");
        assert_eq!((results.nrecvd, results.nsent), (saw.received, saw.sent));
        assert_eq!((saw.received, saw.sent), (64, 64));
        assert_eq!(report.rtts.len(), 64, "a round trip per answered buffer");
        let result = run.result.expect("a result");
        let theirs: u64 = result.streams.iter().filter(|s| s.measured_by == Endpoint::Server).map(|s| s.bytes).sum();
        assert_eq!(theirs, 64 * (512 + 16), "the slave's own count, whole buffers");
    }

    #[test]
    fn a_tcp_recv_sends_every_buffer_the_slave_counts() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (mine, theirs, _) = MemoryLink::pair(CLIENT.parse().unwrap());
        let peer = slave(theirs, None, Some(listener), None, None, None);
        let req = request(Kind::TcpRecv, 40, 1024, port);
        let (session, outcome) = NcTestControl::new(Instant::now(), req, Pause::default(), SLAVE_ADDR.parse().unwrap());
        let run = crate::client::run_session_over(
            &config(Kind::TcpRecv, 40, 1024),
            SLAVE_ADDR.parse().unwrap(),
            Box::new(session),
            Box::new(mine),
            &StopFlag::new(),
        );
        let saw = peer.join().unwrap();
        assert!(run.error.is_none(), "{:?}", run.error);
        let (_, bound, report) = outcome_of(&outcome);
        assert_eq!(bound, None, "a TCP test binds no UDP port");
        let report = report.expect("the test's report");
        assert_eq!(report.sent, 40);
        assert_eq!(saw.received, 40);
        assert_eq!(report.results.expect("the results record").nrecvd, saw.received);
        let result = run.result.expect("a result");
        let mine: u64 = result.streams.iter().filter(|s| s.measured_by == Endpoint::Client).map(|s| s.bytes).sum();
        assert_eq!(mine, 40 * (1024 + 16), "the worker counted every buffer it wrote");
    }

    #[test]
    fn a_slave_that_dies_mid_test_leaves_the_buffers_it_echoed_and_an_error_naming_the_missing_results() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (mine, theirs, cut) = MemoryLink::pair(CLIENT.parse().unwrap());
        let peer = slave(theirs, None, Some(listener), None, Some(10), Some(cut));
        let req = request(Kind::TcpEcho, 100, 256, port);
        let (session, outcome) = NcTestControl::new(Instant::now(), req, Pause::default(), SLAVE_ADDR.parse().unwrap());
        let run = crate::client::run_session_over(
            &config(Kind::TcpEcho, 100, 256),
            SLAVE_ADDR.parse().unwrap(),
            Box::new(session),
            Box::new(mine),
            &StopFlag::new(),
        );
        let saw = peer.join().unwrap();
        let report = outcome_of(&outcome).2.expect("the report of what ran");
        // The slave read 10 and echoed 9 before it died (the 10th read was its last act).
        assert_eq!(saw.received, 10);
        assert_eq!(report.received, saw.sent, "every buffer the slave echoed, and no other");
        assert_eq!(report.results, None);
        assert_eq!(report.received + report.lost, report.nbufs, "each buffer answered or counted lost");
        let error = run.error.expect("the test failed").to_string();
        assert!(error.contains("no results record"), "{error}");
        assert!(run.result.is_some(), "what was measured is kept");
    }

    #[test]
    fn a_stop_while_the_slave_holds_still_ends_the_test_with_what_was_answered() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (mine, mut theirs, _) = MemoryLink::pair(CLIENT.parse().unwrap());
        let stop = StopFlag::new();
        let (stopper, held) = (stop.clone(), std::sync::mpsc::channel::<()>());
        // A slave that reads 5 buffers and echoes the first 4 (the master sent the 5th once the
        // 4th came back: it has taken every echo it will get), then keeps the connection open
        // and says nothing until the test is over: the master would wait 21 s per buffer due.
        let peer = std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            let n = theirs.read_within(&mut buf, Duration::from_secs(60)).unwrap();
            let decision = Slave { data_port: port, ..Slave::default() }.handle(&buf[..n]).unwrap();
            theirs.send_all(&decision.reply.encode()).unwrap();
            let SlaveAction::Test(req) = decision.action else { panic!("the test was refused") };
            let (mut stream, _) = listener.accept().unwrap();
            let echoed = slave_loop(req, Data::Tcp(stream.try_clone().unwrap()), Some(5));
            stopper.raise();
            let _ = held.1.recv();
            let _ = stream.flush();
            echoed
        });
        let req = request(Kind::TcpEcho, 100, 256, port);
        let (session, outcome) = NcTestControl::new(Instant::now(), req, Pause::default(), SLAVE_ADDR.parse().unwrap());
        let run = crate::client::run_session_over(
            &config(Kind::TcpEcho, 100, 256),
            SLAVE_ADDR.parse().unwrap(),
            Box::new(session),
            Box::new(mine),
            &stop,
        );
        held.0.send(()).unwrap();
        let (received, sent) = peer.join().unwrap();
        assert_eq!(received, 5);
        assert!(matches!(run.error, Some(ClientError::Interrupted)), "{:?}", run.error);
        let report = outcome_of(&outcome).2.expect("the report of what ran is kept");
        assert_eq!(report.received, sent, "the buffers the slave echoed before it held still");
        assert_eq!(report.results, None);
    }

    #[test]
    fn a_slave_that_never_answers_fails_the_request_naming_it_after_the_reply_wait() {
        let (mine, mut theirs, _) = MemoryLink::pair(CLIENT.parse().unwrap());
        let peer = std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            let n = theirs.read_within(&mut buf, Duration::from_secs(60)).unwrap();
            let request = Request::decode(&buf[..n]).unwrap();
            // Read on, answering nothing, until the master gives up (its end closes).
            while !matches!(theirs.read_within(&mut buf, Duration::from_secs(60)), Ok(0)) {}
            request
        });
        let req = Request::new(Kind::SetLoad, 2, 10, 0);
        let (session, outcome) = NcTestControl::new(Instant::now(), req, Pause::default(), SLAVE_ADDR.parse().unwrap());
        let run = crate::client::run_session_over(
            &config(Kind::SetLoad, 0, 0),
            SLAVE_ADDR.parse().unwrap(),
            Box::new(session),
            Box::new(mine),
            &StopFlag::new(),
        );
        assert_eq!(peer.join().unwrap().kind(), Some(Kind::SetLoad));
        let error = run.error.expect("no reply fails the request");
        assert!(matches!(error, ClientError::Protocol(ProtocolError::Timeout(_))), "{error:?}");
        let line = error.to_string();
        assert!(line.contains(SLAVE_ADDR) && line.contains("netchar server --nc-test"), "{line}");
        assert_eq!(outcome_of(&outcome).0, None);
    }

    #[test]
    fn a_malformed_reply_fails_the_request_in_a_line_and_keeps_the_bytes() {
        let (mine, theirs, _) = MemoryLink::pair(CLIENT.parse().unwrap());
        let peer = slave(theirs, None, None, Some(b"\x00\x00\x00\x01junk".to_vec()), None, None);
        let req = Request::new(Kind::SetLoad, 2, 20, 0);
        let (session, outcome) = NcTestControl::new(Instant::now(), req, Pause::default(), SLAVE_ADDR.parse().unwrap());
        let run = crate::client::run_session_over(
            &config(Kind::SetLoad, 0, 0),
            SLAVE_ADDR.parse().unwrap(),
            Box::new(session),
            Box::new(mine),
            &StopFlag::new(),
        );
        assert_eq!(peer.join().unwrap().request.nbufs, 20);
        let error = run.error.expect("a malformed reply fails the request");
        assert!(matches!(error, ClientError::Protocol(ProtocolError::Malformed(_))), "{error:?}");
        assert!(error.to_string().contains(SLAVE_ADDR), "{error}");
        assert_eq!(outcome_of(&outcome).0.as_deref(), Some(&b"\x00\x00\x00\x01junk"[..]));
    }

    #[test]
    fn a_control_request_ends_at_its_reply_and_a_nak_is_no_failure() {
        let (mine, theirs, _) = MemoryLink::pair(CLIENT.parse().unwrap());
        let nak = Reply::nak(2, netchar_wire::nc_test::NAK_NO_BACKGROUND).encode().to_vec();
        let peer = slave(theirs, None, None, Some(nak.clone()), None, None);
        let req = Request::new(Kind::StartIdle, 2, 0, 0);
        let (session, outcome) = NcTestControl::new(Instant::now(), req, Pause::default(), SLAVE_ADDR.parse().unwrap());
        let run = crate::client::run_session_over(
            &config(Kind::StartIdle, 0, 0),
            SLAVE_ADDR.parse().unwrap(),
            Box::new(session),
            Box::new(mine),
            &StopFlag::new(),
        );
        assert_eq!(peer.join().unwrap().request.kind(), Some(Kind::StartIdle));
        assert!(run.error.is_none(), "{:?}", run.error);
        let (reply, _, report) = outcome_of(&outcome);
        assert_eq!(reply, Some(nak));
        assert!(report.is_none(), "no test ran");
    }

    /// The registry's session runs the test the command's spec is: every kind, count, size
    /// and pause [`spec_for`] maps comes back as it went in.
    #[test]
    fn a_spec_maps_back_to_the_nc_test_it_was_made_from() {
        let paused = Pause { ticks: 5, threshold: 10 };
        for (kind, nbufs, buflen, pause) in [
            (Kind::UdpEcho, 640, 1024, Pause::default()),
            (Kind::TcpEcho, 2048, 1024, paused),
            (Kind::UdpSend, 640, 1024, Pause::default()),
            (Kind::UdpRecv, 10, 65_000, Pause::default()),
            (Kind::TcpSend, 64, 10_240, Pause::default()),
            (Kind::TcpRecv, 1, 1, Pause::default()),
        ] {
            let spec = spec_for(kind, nbufs, buflen, pause);
            assert_eq!(crate::peers::nc_test::single_test_of(&spec).unwrap(), (kind, nbufs, buflen, pause), "{kind:?}");
        }
        let timed = TestSpec::tcp_default();
        assert!(
            matches!(crate::peers::nc_test::single_test_of(&timed), Err(crate::error::SessionError::Unsupported(_))),
            "a timed test is no nc_test"
        );
    }
}
