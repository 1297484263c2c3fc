//! The server driver (crate::server_session) alone, running the sessions of the protocols
//! without a control connection of their own, against a peer the test speaks for itself.
//!
//! iperf2's TCP test is a connection whose first bytes are its header (a loopback pair: the
//! connection is the test's data stream too); its UDP test is a source whose datagrams the
//! test hands to the session's link itself (crate::server_session::DatagramLink), as the
//! listener does, with the session's answers read from a loopback socket. A test can thus
//! send what no iperf2 would: a header cut short, a FIN first, a stream that goes silent.
//!
//! What is asserted is measured: the bytes and datagrams the server counted against what the
//! test sent, the report it answered, the errors the driver returns, the server's log and the
//! admission registry once the session is over.

use crate::admission::{Limits, Registry, Request, SourceCounts};
use crate::error::ServerSessionError;
use crate::peers::iperf2::{TcpSession, UdpSession};
use crate::peers::PeerContext;
use crate::reflection::{PeerPolicy, ReflectionGuard};
use crate::server_control::TestsByAddress;
use crate::server_session::{DatagramLink, SessionDriver};
use crate::server_shared::{ServerConfig, ServerLog, Shared, TestLog};
use crate::StopFlag;
use netchar_model::{Direction, TestSpec};
use netchar_wire::iperf2::{Amount, ClientHeader, Layout, ServerReport, UdpHeader, HEADER_LEN_BIT, HEADER_VERSION1};
use netchar_wire::ProtocolError;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

/// A server's shared state, its log kept for the test.
struct Bed {
    ctx: PeerContext,
    log: Arc<Mutex<Vec<ServerLog>>>,
    tests: TestsByAddress,
}

impl Bed {
    fn new(limits: Limits) -> Self {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut cfg = ServerConfig::new("127.0.0.1:0".parse().unwrap());
        cfg.limits = limits;
        let logged = log.clone();
        let shared = Arc::new(Shared {
            registry: Registry::default(),
            cfg,
            log: Arc::new(move |e| logged.lock().unwrap().push(e)),
            stop: StopFlag::new(),
            guard: ReflectionGuard::new(PeerPolicy::default(), Vec::new()),
        });
        let ctx = PeerContext { shared, sources: Arc::new(SourceCounts::default()) };
        Self { ctx, log, tests: TestsByAddress::default() }
    }

    fn shared(&self) -> &Shared {
        &self.ctx.shared
    }

    /// Serves the server end of an iperf2 TCP connection in a thread, as the listener does.
    fn serve_tcp(&self, stream: TcpStream) -> JoinHandle<Option<ServerSessionError>> {
        let (ctx, tests) = (self.ctx.clone(), self.tests.clone());
        std::thread::spawn(move || {
            let peer = stream.peer_addr().unwrap();
            let session = TcpSession::new(Instant::now(), peer, stream.try_clone().ok(), ctx.clone(), tests);
            let deadline = Instant::now() + ctx.limits().idle_timeout;
            SessionDriver::serve_data_connection(stream, peer, Box::new(session), &ctx.shared, deadline)
        })
    }

    /// Serves one UDP source's session in a thread over `link`, as the listener does.
    fn serve_udp(
        &self,
        link: DatagramLink,
        from: SocketAddr,
    ) -> (JoinHandle<Option<ServerSessionError>>, Arc<AtomicBool>) {
        let (ctx, tests) = (self.ctx.clone(), self.tests.clone());
        let admitted = Arc::new(AtomicBool::new(false));
        let session = UdpSession::new(from, ctx.limits().clone(), tests, link.arrivals(), admitted.clone());
        let thread = std::thread::spawn(move || {
            let deadline = Instant::now() + ctx.limits().idle_timeout;
            SessionDriver::serve_over(Box::new(link), from, Box::new(session), &ctx.shared, deadline)
        });
        (thread, admitted)
    }

    fn tests_logged(&self) -> Vec<TestLog> {
        let log = self.log.lock().unwrap();
        log.iter().filter_map(|e| if let ServerLog::Test(t) = e { Some((**t).clone()) } else { None }).collect()
    }

    fn rejections(&self) -> Vec<String> {
        let log = self.log.lock().unwrap();
        log.iter()
            .filter_map(|e| if let ServerLog::Rejected { reason, .. } = e { Some(reason.clone()) } else { None })
            .collect()
    }

    fn running(&self) -> u32 {
        self.shared().registry.lock().running
    }
}

/// A connected loopback pair: (the client's end, the server's end).
fn tcp_pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    (client, server)
}

/// Reads until the server closes the connection.
fn read_to_close(stream: &mut TcpStream) {
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest);
}

/// `n` bytes of a client's data.
fn payload(n: usize) -> Vec<u8> {
    (0..n).map(|i| b"0123456789"[i % 10]).collect()
}

#[test]
fn an_iperf2_tcp_test_is_its_header_then_its_data_counted_as_the_client_counts() {
    let bed = Bed::new(Limits::default());
    let (mut client, server) = tcp_pair();
    let session = bed.serve_tcp(server);
    // iperf 2.0.5's header (24 bytes, written on its own, not counted by the client), then the
    // data: some in the same write as the header, as a client may send it.
    let sent = 3_000_000;
    let mut bytes = ClientHeader::new(Amount::Bytes(sent as u64), 128 * 1024, 0).encode(Layout::V205);
    bytes.extend(payload(sent));
    client.write_all(&bytes).unwrap();
    client.shutdown(std::net::Shutdown::Write).unwrap();
    read_to_close(&mut client);
    assert!(session.join().unwrap().is_none(), "the test ended well");
    let tests = bed.tests_logged();
    assert_eq!(tests.len(), 1, "{:?}", bed.rejections());
    let t = &tests[0];
    assert_eq!((t.protocol, t.spec.direction, t.concurrent_tests), ("iperf2", Direction::Up, 1));
    assert!(t.error.is_none(), "{:?}", t.error);
    assert_eq!(t.streams.iter().map(|s| s.bytes).sum::<u64>(), sent as u64, "every byte after the header");
    assert_eq!(t.data_paths, vec![(1, client.local_addr().unwrap())]);
    assert_eq!(bed.running(), 0, "the slot is free again");
}

#[test]
fn two_connections_of_one_address_are_one_test_under_admission() {
    // One place: iperf2's -P 2 from one address must still run.
    let bed = Bed::new(Limits { max_concurrent: 1, ..Limits::default() });
    let header = ClientHeader::new(Amount::Bytes(1 << 30), 128 * 1024, 0).encode(Layout::V205);
    let (mut first, server) = tcp_pair();
    let first_session = bed.serve_tcp(server);
    first.write_all(&header).unwrap();
    first.write_all(&payload(100_000)).unwrap();
    // Until the first connection's test holds the one place.
    while bed.shared().registry.admitted_total.load(Ordering::SeqCst) == 0 {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let (mut second, server) = tcp_pair();
    let second_session = bed.serve_tcp(server);
    second.write_all(&header).unwrap();
    second.write_all(&payload(200_000)).unwrap();
    second.shutdown(std::net::Shutdown::Write).unwrap();
    read_to_close(&mut second);
    assert!(second_session.join().unwrap().is_none());
    assert_eq!(bed.running(), 1, "the address's test runs on while its first connection does");
    first.shutdown(std::net::Shutdown::Write).unwrap();
    read_to_close(&mut first);
    assert!(first_session.join().unwrap().is_none());
    let mut bytes: Vec<u64> = bed.tests_logged().iter().map(|t| t.streams.iter().map(|s| s.bytes).sum()).collect();
    bytes.sort_unstable();
    assert_eq!(bytes, vec![100_000, 200_000], "{:?}", bed.rejections());
    assert!(bed.tests_logged().iter().all(|t| t.concurrent_tests == 1 && t.error.is_none()));
    assert_eq!(bed.shared().registry.admitted_total.load(Ordering::SeqCst), 1, "one admission for both");
    assert_eq!(bed.running(), 0);
}

#[test]
fn a_header_cut_short_ends_the_session_with_one_typed_error_and_no_test() {
    let bed = Bed::new(Limits::default());
    let (mut client, server) = tcp_pair();
    let session = bed.serve_tcp(server);
    // LEN_BIT with the longest length iperf2 allows (255 bytes), then 3 bytes and the close.
    let flags = HEADER_LEN_BIT | 0x1FE;
    client.write_all(&[&flags.to_be_bytes()[..], &[1, 2, 3]].concat()).unwrap();
    client.shutdown(std::net::Shutdown::Write).unwrap();
    read_to_close(&mut client);
    let error = session.join().unwrap();
    assert!(matches!(&error, Some(ServerSessionError::Protocol(ProtocolError::Peer(_)))), "{error:?}");
    assert!(bed.tests_logged().is_empty());
    assert_eq!(bed.rejections(), vec!["iperf2: closed before its iperf2 header".to_string()]);
    assert_eq!(bed.shared().registry.admitted_total.load(Ordering::SeqCst), 0, "nothing was admitted");
}

#[test]
fn a_dial_back_to_a_service_port_is_refused_and_the_clients_direction_still_counted() {
    let bed = Bed::new(Limits::default());
    let (mut client, server) = tcp_pair();
    let session = bed.serve_tcp(server);
    // -r (VERSION1 without RUN_NOW) naming chargen's port: connecting there would feed us.
    let mut header = ClientHeader::new(Amount::Bytes(50_000), 128 * 1024, 19);
    header.flags = HEADER_VERSION1;
    client.write_all(&[header.encode(Layout::V205), payload(50_000)].concat()).unwrap();
    client.shutdown(std::net::Shutdown::Write).unwrap();
    read_to_close(&mut client);
    assert!(session.join().unwrap().is_none());
    let t = &bed.tests_logged()[0];
    assert_eq!(t.spec.direction, Direction::Bidir, "the test asked for");
    let error = t.error.as_deref().unwrap_or_default();
    assert!(error.starts_with("-d/-r: not connected back to 127.0.0.1:19"), "{error}");
    assert_eq!(t.streams.len(), 1, "no dial-back stream: {:?}", t.streams);
    assert_eq!(t.streams[0].bytes, 50_000);
    assert_eq!(t.data_paths.len(), 1, "nothing was sent to the client's port 19");
}

/// A loopback port nothing listens on (yet): one the kernel gave a listener just closed.
fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Takes the one dial-back connection `listener` gets, unless the session ends first (a
/// dial-back that never came).
fn accept_dial_back(listener: &TcpListener, session: &JoinHandle<Option<ServerSessionError>>) -> Option<TcpStream> {
    listener.set_nonblocking(true).unwrap();
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false).unwrap();
                return Some(stream);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && !session.is_finished() => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(e) => panic!("no dial-back came: {e}"),
        }
    }
}

/// Every byte a stream carries until its end.
fn read_all(stream: &mut TcpStream) -> u64 {
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return total,
            Ok(n) => total += n as u64,
        }
    }
}

#[test]
fn a_refused_dial_back_is_tried_again_until_the_clients_listener_is_up() {
    // The tries outlast the server's --idle-timeout: the client's data is all in by then.
    let bed = Bed::new(Limits { idle_timeout: std::time::Duration::from_secs(1), ..Limits::default() });
    let (mut client, server) = tcp_pair();
    let session = bed.serve_tcp(server);
    // -r: the server dials back once the client's direction is over and it closed the
    // client's connection. The client's listener comes up only well after that close, so the
    // server's first tries meet a closed port.
    let port = closed_port();
    let mut header = ClientHeader::new(Amount::Bytes(400_000), 128 * 1024, port);
    header.flags = HEADER_VERSION1;
    client.write_all(&[header.encode(Layout::V205), payload(400_000)].concat()).unwrap();
    client.shutdown(std::net::Shutdown::Write).unwrap();
    read_to_close(&mut client);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
    let mut back = accept_dial_back(&listener, &session).expect("the dial-back, once the listener is up");
    let received = read_all(&mut back);
    assert!(session.join().unwrap().is_none(), "the test ended well");
    let t = &bed.tests_logged()[0];
    assert!(t.error.is_none(), "{:?}", t.error);
    let bytes = |id| t.streams.iter().find(|s| s.id == id).map(|s| s.bytes);
    assert_eq!(bytes(1), Some(400_000), "the client's direction");
    assert_eq!(bytes(2), Some(received), "the server's direction as the client read it");
    assert!(received > 0);
    assert_eq!(t.data_paths.iter().find(|p| p.0 == 2).map(|p| p.1.port()), Some(port));
    assert_eq!(bed.running(), 0);
}

#[test]
fn a_stop_during_a_dial_back_ends_the_test_with_what_the_client_read() {
    let bed = Bed::new(Limits::default());
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let (mut client, server) = tcp_pair();
    let session = bed.serve_tcp(server);
    // -d for a minute: the server sends beside the client from the start.
    let mut header = ClientHeader::new(Amount::Seconds(60.0), 128 * 1024, listener.local_addr().unwrap().port());
    header.flags = HEADER_VERSION1 | netchar_wire::iperf2::RUN_NOW;
    client.write_all(&[header.encode(Layout::V205), payload(100_000)].concat()).unwrap();
    let mut back = accept_dial_back(&listener, &session).expect("the -d dial-back");
    // Data flows: then the server stops.
    let mut buf = vec![0u8; 64 * 1024];
    let mut received = 0u64;
    while received < 1_000_000 {
        received += back.read(&mut buf).unwrap() as u64;
    }
    bed.shared().stop.raise();
    received += read_all(&mut back);
    let error = session.join().unwrap();
    assert!(matches!(error, Some(ServerSessionError::ShuttingDown)), "{error:?}");
    let t = &bed.tests_logged()[0];
    assert!(t.error.is_some(), "a test the server stopped says so");
    let down = t.streams.iter().find(|s| s.id == 2).expect("the dial-back's record");
    assert_eq!(down.bytes, received, "every byte the server sent, as the client read them");
    assert_eq!(bed.running(), 0, "the slot is free again");
    drop(client);
}

#[test]
fn a_client_that_goes_silent_mid_test_is_ended_at_the_idle_limit_with_its_bytes_kept() {
    let bed = Bed::new(Limits { idle_timeout: std::time::Duration::from_secs(1), ..Limits::default() });
    let (mut client, server) = tcp_pair();
    let session = bed.serve_tcp(server);
    let header = ClientHeader::new(Amount::Bytes(1 << 30), 128 * 1024, 0).encode(Layout::V205);
    client.write_all(&[header, payload(300_000)].concat()).unwrap();
    // The client keeps its connection open and sends nothing more: no end of file comes.
    let error = session.join().unwrap();
    assert!(matches!(&error, Some(ServerSessionError::Data(e)) if e.contains("--idle-timeout")), "{error:?}");
    let t = &bed.tests_logged()[0];
    assert!(t.error.as_deref().is_some_and(|e| e.contains("--idle-timeout")), "{:?}", t.error);
    assert_eq!(t.streams[0].bytes, 300_000, "what came before the silence is kept");
    assert_eq!(bed.running(), 0);
    drop(client);
}

/// An iperf 2.1 UDP client's datagram `seq` of `len` bytes: the 16-byte header, then its
/// settings.
fn udp_datagram(seq: i64, len: usize) -> Vec<u8> {
    let mut d = vec![0u8; 16];
    UdpHeader { seq, sec: 1_700_000_000, usec: (seq.unsigned_abs() * 100) as u32 % 1_000_000 }
        .emit(&mut d, Layout::V21);
    d.extend(ClientHeader::udp_settings(Layout::V21, Amount::Seconds(1.0), len as u32, 1_000_000, 0));
    d.resize(len.max(d.len()), 0);
    d
}

/// A server socket for a session's answers and the client's socket that reads them.
fn udp_pair() -> (UdpSocket, UdpSocket) {
    let server = UdpSocket::bind("127.0.0.1:0").unwrap();
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    (server, client)
}

#[test]
fn an_iperf2_udp_test_is_a_source_whose_fin_is_answered_with_its_counts() {
    let bed = Bed::new(Limits::default());
    let (server, client) = udp_pair();
    let from = client.local_addr().unwrap();
    let (link, source) = DatagramLink::new(server.try_clone().unwrap(), from, Box::new(|_| true));
    let (session, admitted) = bed.serve_udp(link, from);
    let now = std::time::SystemTime::now();
    // Datagrams 1 to 10 but 4, then the FIN (−11), every one 1000 bytes.
    for seq in (1..=10).filter(|&s| s != 4) {
        source.hand(now, &udp_datagram(seq, 1000));
    }
    source.hand(now, &udp_datagram(-11, 1000));
    let mut buf = [0u8; 2048];
    let n = client.recv(&mut buf).unwrap();
    let (report, _) = ServerReport::parse_reply(&buf[..n]).expect("the server's report");
    assert_eq!((report.datagrams, report.lost, report.bytes), (11, 1, 10_000), "{report:?}");
    // A repeated FIN gets the same report again.
    source.hand(now, &udp_datagram(-11, 1000));
    let n = client.recv(&mut buf).unwrap();
    assert_eq!(ServerReport::parse_reply(&buf[..n]).unwrap().0, report);
    // Then silence: the session ends and logs what it counted.
    assert!(session.join().unwrap().is_none());
    assert!(admitted.load(Ordering::SeqCst));
    let t = &bed.tests_logged()[0];
    assert!(t.error.is_none(), "{:?}", t.error);
    assert_eq!(t.streams[0].bytes, 10_000);
    let received = t.streams[0].udp_received.as_ref().unwrap();
    assert_eq!((received.packets, received.lost), (10, 1));
    assert_eq!(t.data_paths, vec![(1, from)]);
    assert_eq!(bed.running(), 0);
}

#[test]
fn a_report_the_guard_holds_back_is_not_sent() {
    let bed = Bed::new(Limits::default());
    let (server, client) = udp_pair();
    let from = client.local_addr().unwrap();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let record = asked.clone();
    let check = Box::new(move |bytes| {
        record.lock().unwrap().push(bytes);
        false
    });
    let (link, source) = DatagramLink::new(server.try_clone().unwrap(), from, check);
    let (session, _) = bed.serve_udp(link, from);
    let now = std::time::SystemTime::now();
    source.hand(now, &udp_datagram(1, 1000));
    source.hand(now, &udp_datagram(-2, 1000));
    assert!(session.join().unwrap().is_none());
    assert_eq!(asked.lock().unwrap().len(), 1, "the report was offered to the guard once");
    client.set_nonblocking(true).unwrap();
    let nothing = client.recv(&mut [0u8; 64]).unwrap_err();
    assert_eq!(nothing.kind(), std::io::ErrorKind::WouldBlock, "nothing was sent");
    assert_eq!(bed.tests_logged()[0].streams[0].bytes, 2000);
}

#[test]
fn a_udp_source_that_stops_without_its_fin_is_logged_with_what_it_sent() {
    let bed = Bed::new(Limits::default());
    let (server, client) = udp_pair();
    let from = client.local_addr().unwrap();
    let (link, source) = DatagramLink::new(server.try_clone().unwrap(), from, Box::new(|_| true));
    let (session, _) = bed.serve_udp(link, from);
    let now = std::time::SystemTime::now();
    for seq in 1..=5 {
        source.hand(now, &udp_datagram(seq, 1200));
    }
    // The client dies: no FIN, nothing more.
    assert!(session.join().unwrap().is_none());
    let t = &bed.tests_logged()[0];
    assert_eq!(t.error.as_deref(), Some("no FIN came: the client stopped without ending"));
    assert_eq!(t.streams[0].bytes, 6000);
    assert_eq!(bed.running(), 0);
}

#[test]
fn a_malformed_or_stray_first_datagram_opens_no_test() {
    let bed = Bed::new(Limits::default());
    for (first, kind) in [(vec![1u8, 2, 3], "malformed"), (udp_datagram(-7, 100), "FIN")] {
        let (server, client) = udp_pair();
        let from = client.local_addr().unwrap();
        let (link, source) = DatagramLink::new(server.try_clone().unwrap(), from, Box::new(|_| true));
        let (session, admitted) = bed.serve_udp(link, from);
        source.hand(std::time::SystemTime::now(), &first);
        let error = session.join().unwrap();
        assert!(matches!(&error, Some(ServerSessionError::Protocol(_))), "{kind}: {error:?}");
        assert!(!admitted.load(Ordering::SeqCst));
    }
    assert!(bed.tests_logged().is_empty());
    assert_eq!(bed.shared().registry.admitted_total.load(Ordering::SeqCst), 0);
    let rejections = bed.rejections();
    assert_eq!(rejections.len(), 2, "{rejections:?}");
    assert!(rejections.iter().all(|r| r.starts_with("iperf2: ")), "{rejections:?}");
}

#[test]
fn a_busy_server_turns_a_udp_source_away_and_says_why_in_its_log() {
    let bed = Bed::new(Limits::default());
    // The one place is held by another address's test.
    let holder = TestSpec::tcp_default();
    let (route, _routed) = std::sync::mpsc::sync_channel(1);
    let other =
        Request { spec: &holder, companion: None, client_ip: "192.0.2.9".parse().unwrap(), session_key: None, route };
    bed.shared().registry.admit(other, &bed.shared().cfg.limits, Instant::now()).expect("the holder's place");
    let (server, client) = udp_pair();
    let from = client.local_addr().unwrap();
    let (link, source) = DatagramLink::new(server.try_clone().unwrap(), from, Box::new(|_| true));
    let (session, admitted) = bed.serve_udp(link, from);
    source.hand(std::time::SystemTime::now(), &udp_datagram(1, 1000));
    assert!(session.join().unwrap().is_none(), "a refusal is the session's end");
    assert!(!admitted.load(Ordering::SeqCst));
    let rejections = bed.rejections();
    assert!(rejections.iter().any(|r| r.starts_with("iperf2: turned away as busy")), "{rejections:?}");
    assert!(bed.tests_logged().is_empty());
    assert_eq!(bed.running(), 1, "only the holder runs");
}

// ---------------------------------------------------------------- netio

mod netio {
    use super::*;
    use crate::control_link::{ControlLink, LinkCut, MemoryLink};
    use crate::peers::netio_server::NetioSession;
    use netchar_wire::netio::{Cmd, Control};
    use std::time::Duration;

    /// Where the netio client appears to connect from.
    const PEER: &str = "127.0.0.1:40001";

    /// Serves one netio TCP test connection over `link` in a thread, as the listener does.
    fn serve(bed: &Bed, link: MemoryLink) -> JoinHandle<Option<ServerSessionError>> {
        let ctx = bed.ctx.clone();
        std::thread::spawn(move || {
            let peer = PEER.parse().unwrap();
            let session = NetioSession::new(Instant::now(), peer, ctx.clone(), None);
            let deadline = Instant::now() + ctx.limits().idle_timeout;
            SessionDriver::serve_over(Box::new(link), peer, Box::new(session), &ctx.shared, deadline)
        })
    }

    fn command(cmd: Cmd, data: u32) -> Vec<u8> {
        Control::new(cmd, data).encode().to_vec()
    }

    /// `n` blocks of `size` as a netio client sends them (byte 0 is 0), then the marker block.
    fn blocks(size: usize, n: usize) -> Vec<u8> {
        let mut b = vec![7u8; size * (n + 1)];
        for i in 0..=n {
            b[i * size] = u8::from(i == n);
        }
        b
    }

    fn flows(t: &TestLog) -> (u64, u64) {
        let of = |id| t.streams.iter().find(|s| s.id == id).map_or(0, |s| s.bytes);
        (of(1), of(2))
    }

    #[test]
    fn a_netio_clients_blocks_are_counted_as_they_come_on_the_control_connection() {
        let bed = Bed::new(Limits::default());
        let (mut client, server, _) = MemoryLink::pair(PEER.parse().unwrap());
        let session = serve(&bed, server);
        client.send_all(&command(Cmd::C2S, 1024)).unwrap();
        // Sent in pieces that cut blocks and the marker apart.
        for piece in blocks(1024, 100).chunks(1000) {
            client.send_all(piece).unwrap();
        }
        client.send_all(&command(Cmd::Quit, 0)).unwrap();
        assert!(session.join().unwrap().is_none());
        let t = &bed.tests_logged()[0];
        assert_eq!((t.protocol, t.concurrent_tests), ("netio", 1));
        assert!(t.error.is_none(), "{:?}", t.error);
        assert_eq!(flows(t), (101 * 1024, 0), "the blocks and the marker, nothing sent");
        assert_eq!(bed.running(), 0);
    }

    #[test]
    fn the_servers_blocks_are_its_own_output_ended_by_the_marker() {
        let bed = Bed::new(Limits::default());
        // A loopback connection: its buffers hold the server's writes back to the client's
        // reading, as a real client's would (an in-memory link has no such bound).
        let (mut client, server) = tcp_pair();
        let ctx = bed.ctx.clone();
        let session = std::thread::spawn(move || {
            let peer = server.peer_addr().unwrap();
            let session = NetioSession::new(Instant::now(), peer, ctx.clone(), None);
            let deadline = Instant::now() + ctx.limits().idle_timeout;
            SessionDriver::serve(server, peer, Box::new(session), &ctx.shared, deadline);
        });
        let size = 65_536usize;
        client.write_all(&command(Cmd::S2C, size as u32)).unwrap();
        // Read whole blocks until the one whose first byte is 1.
        let mut block = vec![0u8; size];
        let mut counted = 0u64;
        loop {
            client.read_exact(&mut block).expect("the server's blocks, then its marker");
            counted += size as u64;
            if block[0] == 1 {
                break;
            }
            assert_eq!(block[0], 0, "a block's first byte is 0 but the marker's");
        }
        client.write_all(&command(Cmd::Quit, 0)).unwrap();
        read_to_close(&mut client);
        session.join().unwrap();
        let t = &bed.tests_logged()[0];
        assert!(t.error.is_none(), "{:?}", t.error);
        assert_eq!(flows(t), (0, counted), "every block the client read, the marker included");
        assert!(counted > size as u64, "blocks before the marker");
    }

    #[test]
    fn an_unknown_command_ends_the_test_with_one_line_and_its_figures_kept() {
        let bed = Bed::new(Limits::default());
        let (mut client, server, _) = MemoryLink::pair(PEER.parse().unwrap());
        let session = serve(&bed, server);
        client.send_all(&command(Cmd::C2S, 2048)).unwrap();
        client.send_all(&blocks(2048, 10)).unwrap();
        client.send_all(&[0, 0, 0, 9, 0, 0, 0, 0]).unwrap();
        let error = session.join().unwrap();
        assert!(matches!(&error, Some(ServerSessionError::Protocol(_))), "{error:?}");
        let t = &bed.tests_logged()[0];
        assert_eq!(t.error.as_deref(), Some("netio: unknown command 9 (the stock server closes the connection on it)"));
        assert_eq!(flows(t), (11 * 2048, 0), "the phase before it was counted");
        assert_eq!(bed.running(), 0);
    }

    /// A netio UDP test's sockets: the server's UDP port (on 127.0.0.1) and the client's
    /// socket at the same port number on 127.0.0.2, where netio's server sends its S2C
    /// datagrams (the client's address at the server's UDP port).
    fn udp_sockets() -> (Arc<UdpSocket>, UdpSocket) {
        // Bound as the listener binds it: each S2C phase's socket shares its port.
        let server = Arc::new(crate::server_shared::bind_udp("127.0.0.1:0".parse().unwrap()).unwrap());
        let port = server.local_addr().unwrap().port();
        let client = UdpSocket::bind(("127.0.0.2", port)).unwrap();
        client.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        (server, client)
    }

    /// Serves one netio UDP test's control connection from 127.0.0.2 over `link`.
    fn serve_udp(bed: &Bed, link: MemoryLink, udp: Arc<UdpSocket>) -> JoinHandle<Option<ServerSessionError>> {
        let ctx = bed.ctx.clone();
        std::thread::spawn(move || {
            let peer = "127.0.0.2:40001".parse().unwrap();
            let side = crate::peers::netio_server::UdpSide::new(udp);
            let session = NetioSession::new(Instant::now(), peer, ctx.clone(), Some(side));
            let deadline = Instant::now() + ctx.limits().idle_timeout;
            SessionDriver::serve_over(Box::new(link), peer, Box::new(session), &ctx.shared, deadline)
        })
    }

    /// The datagrams waiting on `socket` now.
    fn drain_datagrams(socket: &UdpSocket) -> u64 {
        socket.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 2048];
        let mut n = 0;
        while socket.recv(&mut buf).is_ok() {
            n += 1;
        }
        n
    }

    /// The server's sending is paced (its --max-rate) so that a loopback socket's buffer
    /// holds what the test has not read yet.
    fn paced() -> Limits {
        Limits { max_rate: Some(4_000_000), ..Limits::default() }
    }

    /// A netio UDP test's client that asked for S2C with 1000-byte datagrams: its control
    /// connection, its UDP socket, the switch that kills it, and the server's session.
    fn s2c_started(bed: &Bed) -> (MemoryLink, UdpSocket, LinkCut, JoinHandle<Option<ServerSessionError>>) {
        let (udp, client_udp) = udp_sockets();
        let (mut client, server, cut) = MemoryLink::pair("127.0.0.2:40001".parse().unwrap());
        let session = serve_udp(bed, server, udp);
        client.send_all(&command(Cmd::S2C, 1000)).unwrap();
        (client, client_udp, cut, session)
    }

    #[test]
    fn a_udp_s2c_phase_runs_beside_the_control_connection_and_ends_with_its_count() {
        let bed = Bed::new(paced());
        let (mut client, client_udp, _, session) = s2c_started(&bed);
        // RES with the count comes once the interval's datagrams are out.
        let mut res = [0u8; 8];
        let mut got = 0;
        while got < res.len() {
            let mut buf = [0u8; 8];
            let n = client.read_within(&mut buf[..res.len() - got], Duration::from_secs(30)).expect("RES");
            assert!(n > 0, "the connection closed before RES: {:?}", bed.rejections());
            res[got..got + n].copy_from_slice(&buf[..n]);
            got += n;
        }
        let (res, _) = Control::decode(&res);
        assert_eq!(res.cmd, Cmd::Res as u32);
        let received = drain_datagrams(&client_udp);
        client.send_all(&command(Cmd::Quit, 0)).unwrap();
        assert!(session.join().unwrap().is_none());
        let t = &bed.tests_logged()[0];
        assert!(t.error.is_none(), "{:?}", t.error);
        let down = t.streams.iter().find(|s| s.id == 2).expect("the server's datagrams");
        let sent = down.udp_sent.as_ref().expect("UDP figures").packets;
        assert_eq!(u64::from(res.data), sent, "RES says what the server logged");
        assert_eq!(down.bytes, sent * 1000);
        assert!(received > 0 && received <= sent, "received {received} of {sent}");
        assert_eq!(bed.running(), 0);
    }

    #[test]
    fn a_client_that_dies_mid_s2c_ends_its_test_with_what_was_sent() {
        let bed = Bed::new(paced());
        let (_client, client_udp, cut, session) = s2c_started(&bed);
        // Datagrams flow: then the client is gone.
        let mut buf = [0u8; 2048];
        let mut received = 0u64;
        while received < 10 {
            client_udp.recv(&mut buf).expect("the server's datagrams");
            received += 1;
        }
        cut.cut();
        let error = session.join().unwrap();
        assert!(error.is_some(), "the test ended early");
        // Once the session is over, no datagram more is sent: what came is all there is.
        received += drain_datagrams(&client_udp);
        let t = &bed.tests_logged()[0];
        assert!(t.error.is_some(), "a test its client left says so");
        let down = t.streams.iter().find(|s| s.id == 2).expect("the datagrams sent before the end");
        let sent = down.udp_sent.as_ref().expect("UDP figures").packets;
        assert!(sent >= received, "sent {sent}, received {received}");
        assert_eq!(down.bytes, sent * 1000, "every datagram sent counted whole");
        assert_eq!(bed.running(), 0, "the place is free again");
    }

    #[test]
    fn a_client_that_dies_in_the_middle_of_a_block_ends_its_test_and_frees_the_place() {
        let bed = Bed::new(Limits::default());
        let (mut client, server, _cut) = MemoryLink::pair(PEER.parse().unwrap());
        let session = serve(&bed, server);
        client.send_all(&command(Cmd::C2S, 1024)).unwrap();
        client.send_all(&blocks(1024, 100)[..50 * 1024 + 17]).unwrap();
        // Once the test runs, the client goes: the server reads what it sent, then the end
        // of the connection, as a closed socket delivers them. (A cut link would drop what is
        // still unread: 50 whole blocks read when it came was the end of a block, no error.)
        while bed.running() == 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
        client.close_gently();
        let error = session.join().unwrap();
        assert!(error.is_some(), "the test ended early");
        let t = &bed.tests_logged()[0];
        let e = t.error.as_deref().unwrap_or_default();
        assert!(e.contains("in the middle of a block"), "{e}");
        assert_eq!(bed.running(), 0, "the place is free again");
    }
}

// ---------------------------------------------------------------- nc_test

mod nc_test {
    use super::*;
    use crate::admission::Request as AdmissionRequest;
    use crate::peers::nc_test::{spec_for, SlaveSession};
    use netchar_wire::nc_test::{self as wire, Kind, MasterTest, Pause, Reply, Request, Step};
    use std::time::Duration;

    /// The slave's side: its control socket (the session's answers go out from it) and its
    /// data port's sockets.
    struct Slave {
        ctrl: UdpSocket,
        udp: Arc<UdpSocket>,
        tcp: Arc<TcpListener>,
    }

    /// The master's side: its control socket (answers come to it) and its data socket.
    struct Master {
        ctrl: UdpSocket,
        data: UdpSocket,
    }

    fn sockets() -> (Slave, Master) {
        let slave = Slave {
            ctrl: UdpSocket::bind("127.0.0.1:0").unwrap(),
            udp: Arc::new(UdpSocket::bind("127.0.0.1:0").unwrap()),
            tcp: Arc::new(TcpListener::bind("127.0.0.1:0").unwrap()),
        };
        slave.tcp.set_nonblocking(true).unwrap();
        let master =
            Master { ctrl: UdpSocket::bind("127.0.0.1:0").unwrap(), data: UdpSocket::bind("127.0.0.1:0").unwrap() };
        master.ctrl.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        master.data.set_read_timeout(Some(wire::TEST_TIMEOUT)).unwrap();
        (slave, master)
    }

    /// Runs the session for `req` from `master` in a thread, as the listener does once the
    /// request is read.
    fn serve(bed: &Bed, slave: &Slave, master: &Master, req: Request) -> JoinHandle<Option<ServerSessionError>> {
        let (ctx, from) = (bed.ctx.clone(), master.ctrl.local_addr().unwrap());
        let kind = req.kind().unwrap();
        let spec = spec_for(kind, req.nbufs, req.buflen, Pause::default());
        let session =
            SlaveSession::new(req, Reply::ack(req.seq), spec, from, ctx.clone(), slave.udp.clone(), slave.tcp.clone());
        let answers = slave.ctrl.try_clone().unwrap();
        std::thread::spawn(move || {
            let (link, source) = DatagramLink::new(answers, from, Box::new(|_| true));
            let deadline = Instant::now() + ctx.limits().idle_timeout;
            let ended = SessionDriver::serve_over(Box::new(link), from, Box::new(session), &ctx.shared, deadline);
            drop(source);
            ended
        })
    }

    /// Serves `req`, its data to go to the master's data socket, as the listener serves an
    /// admitted request, and reads the slave's ACK.
    fn start(
        bed: &Bed,
        slave: &Slave,
        master: &Master,
        mut req: Request,
    ) -> (Request, JoinHandle<Option<ServerSessionError>>) {
        req.master_port = u32::from(master.data.local_addr().unwrap().port());
        let session = serve(bed, slave, master, req);
        assert!(answer(master).is_ack());
        (req, session)
    }

    /// The stock master's loop (netchar_wire::nc_test::MasterTest) for `req` against the slave's
    /// data port `to`.
    fn stock_master(master: &Master, to: SocketAddr, req: Request) -> wire::MasterReport {
        let kind = req.kind().unwrap();
        let mut test = MasterTest::new(kind, req.seq, req.nbufs, req.buflen, Pause::default());
        let mut buf = vec![0u8; 70_000];
        loop {
            match test.next_step(Instant::now()) {
                Step::Send(b) => {
                    master.data.send_to(&b, to).unwrap();
                }
                Step::Recv { len, .. } => {
                    let got = master.data.recv(&mut buf).ok().map(|n| buf[..n.min(len)].to_vec());
                    test.received(got.as_deref(), Instant::now());
                }
                Step::Pause(d) => std::thread::sleep(d),
                Step::Print(_) => {}
                Step::Done => break,
            }
        }
        test.into_report()
    }

    #[test]
    fn the_data_port_serves_test_after_test_with_every_buffer_counted() {
        let bed = Bed::new(Limits::default());
        let (slave, master) = sockets();
        let (nbufs, buflen) = (30, 64);
        // The exchange runs on a worker over the data port's one socket: what the worker did
        // to it must not touch the next test's.
        for seq in 1..=3 {
            let (req, session) = start(&bed, &slave, &master, Request::new(Kind::UdpEcho, seq, nbufs, buflen));
            let report = stock_master(&master, slave.udp.local_addr().unwrap(), req);
            assert!(session.join().unwrap().is_none());
            assert_eq!((report.sent, report.received, report.lost), (nbufs, nbufs, 0), "test {seq}: {report:?}");
        }
        let per = u64::from(buflen) + wire::DATA_HEADER_LEN as u64;
        for t in bed.tests_logged() {
            let bytes: Vec<u64> = t.streams.iter().map(|s| s.bytes).collect();
            assert_eq!(bytes, vec![u64::from(nbufs) * per; 2], "{:?}", t.error);
        }
        assert_eq!(bed.tests_logged().len(), 3);
    }

    fn answer(master: &Master) -> Reply {
        let mut buf = [0u8; 64];
        let n = master.ctrl.recv(&mut buf).expect("the slave's answer");
        Reply::decode(&buf[..n]).expect("a reply")
    }

    #[test]
    fn a_udp_echo_test_runs_in_lock_step_and_the_slaves_counts_are_logged() {
        let bed = Bed::new(Limits::default());
        let (slave, master) = sockets();
        let (nbufs, buflen) = (40, 200);
        let (req, session) = start(&bed, &slave, &master, Request::new(Kind::UdpEcho, 1, nbufs, buflen));
        let report = stock_master(&master, slave.udp.local_addr().unwrap(), req);
        assert!(session.join().unwrap().is_none());
        assert_eq!((report.sent, report.received, report.lost), (nbufs, nbufs, 0), "{report:?}");
        let t = &bed.tests_logged()[0];
        assert_eq!(t.protocol, "nc-test");
        assert!(t.error.is_none(), "{:?}", t.error);
        let per = u64::from(buflen) + wire::DATA_HEADER_LEN as u64;
        let bytes: Vec<u64> = t.streams.iter().map(|s| s.bytes).collect();
        assert_eq!(bytes, vec![u64::from(nbufs) * per; 2], "every buffer received and echoed");
        assert_eq!(t.data_paths, vec![(1, master.data.local_addr().unwrap())]);
        assert_eq!(bed.running(), 0);
    }

    #[test]
    fn a_busy_slave_naks_the_request_and_says_why_in_its_log() {
        let bed = Bed::new(Limits::default());
        let holder = TestSpec::tcp_default();
        let (route, _routed) = std::sync::mpsc::sync_channel(1);
        let other = AdmissionRequest {
            spec: &holder,
            companion: None,
            client_ip: "192.0.2.9".parse().unwrap(),
            session_key: None,
            route,
        };
        bed.shared().registry.admit(other, &bed.shared().cfg.limits, Instant::now()).expect("the holder's place");
        let (slave, master) = sockets();
        let session = serve(&bed, &slave, &master, Request::new(Kind::UdpRecv, 7, 10, 100));
        let reply = answer(&master);
        assert!(!reply.is_ack(), "{reply:?}");
        assert!(session.join().unwrap().is_none());
        let rejections = bed.rejections();
        assert!(rejections.iter().any(|r| r.starts_with("nc-test: turned away as busy")), "{rejections:?}");
        assert!(bed.tests_logged().is_empty());
        assert_eq!(bed.running(), 1, "only the holder runs");
    }

    #[test]
    fn a_master_that_dies_mid_test_ends_it_with_what_was_counted() {
        let bed = Bed::new(Limits::default());
        let (slave, master) = sockets();
        let (nbufs, buflen) = (100, 500);
        let session = serve(&bed, &slave, &master, Request::new(Kind::TcpRecv, 3, nbufs, buflen));
        assert!(answer(&master).is_ack());
        // The master connects, sends 10 of its 100 buffers, and is gone.
        let mut data = TcpStream::connect(slave.tcp.local_addr().unwrap()).unwrap();
        for seq in 0..10 {
            data.write_all(&wire::data_buffer(seq, buflen)).unwrap();
        }
        drop(data);
        assert!(session.join().unwrap().is_none());
        let t = &bed.tests_logged()[0];
        let per = u64::from(buflen) + wire::DATA_HEADER_LEN as u64;
        assert_eq!(t.streams[0].bytes, 10 * per, "the ten buffers that came");
        let error = t.error.as_deref().unwrap_or_default();
        assert!(error.starts_with("gave up after"), "{error}");
        assert_eq!(bed.running(), 0);
    }

    /// One echo round trip of the master's: `seq`'s buffer out, its echo back.
    fn echo_once(master: &Master, to: SocketAddr, seq: u32, buflen: u32) {
        master.data.send_to(&wire::data_buffer(seq, buflen), to).unwrap();
        let mut buf = vec![0u8; 70_000];
        let n = master.data.recv(&mut buf).expect("the slave's echo");
        assert_eq!(buf[..n], wire::data_buffer(seq, buflen)[..], "the echo of buffer {seq}");
    }

    #[test]
    fn a_stop_during_the_slaves_exchange_ends_it_with_what_was_counted() {
        let bed = Bed::new(Limits::default());
        let (slave, master) = sockets();
        let (nbufs, buflen) = (40, 100);
        let (_, session) = start(&bed, &slave, &master, Request::new(Kind::UdpEcho, 4, nbufs, buflen));
        // Five buffers echoed: the slave has counted each before its echo left. It then waits
        // for the sixth, which never comes: the server stops instead.
        let to = slave.udp.local_addr().unwrap();
        for seq in 0..5 {
            echo_once(&master, to, seq, buflen);
        }
        bed.shared().stop.raise();
        assert!(matches!(session.join().unwrap(), Some(ServerSessionError::ShuttingDown)));
        // The master gets the counts so far rather than waiting for a results record.
        let mut buf = [0u8; 64];
        let n = master.data.recv(&mut buf).expect("the results so far");
        let results = wire::Results::decode(&buf[..n]).expect("a results record");
        assert_eq!((results.seq, results.nsent, results.nrecvd), (4, 5, 5), "{results:?}");
        let t = &bed.tests_logged()[0];
        let per = u64::from(buflen) + wire::DATA_HEADER_LEN as u64;
        let bytes: Vec<u64> = t.streams.iter().map(|s| s.bytes).collect();
        assert_eq!(bytes, vec![5 * per; 2], "five buffers received and echoed");
        assert_eq!(t.error.as_deref(), Some("the server is shutting down"));
        assert_eq!(bed.running(), 0);
    }

    #[test]
    fn a_master_silent_mid_exchange_ends_it_with_what_came_from_it_alone() {
        let bed = Bed::new(Limits::default());
        let (slave, master) = sockets();
        let (nbufs, buflen) = (100, 300);
        let (_, session) = start(&bed, &slave, &master, Request::new(Kind::UdpRecv, 5, nbufs, buflen));
        let to = slave.udp.local_addr().unwrap();
        for seq in 0..10 {
            master.data.send_to(&wire::data_buffer(seq, buflen), to).unwrap();
        }
        // The next buffer, from an address that is not the master's: not the test's.
        let stranger = UdpSocket::bind("127.0.0.2:0").unwrap();
        stranger.send_to(&wire::data_buffer(10, buflen), to).unwrap();
        // The master is silent from here on (its socket stays open): the slave gives up after
        // its receive timeouts and sends what it counted.
        master.data.set_read_timeout(Some(wire::RESULTS_TIMEOUT * 2)).unwrap();
        let mut buf = [0u8; 64];
        let n = master.data.recv(&mut buf).expect("the results record");
        let results = wire::Results::decode(&buf[..n]).expect("a results record");
        assert_eq!((results.seq, results.nsent, results.nrecvd), (5, 0, 10), "{results:?}");
        assert!(session.join().unwrap().is_none());
        let t = &bed.tests_logged()[0];
        let per = u64::from(buflen) + wire::DATA_HEADER_LEN as u64;
        assert_eq!(t.streams.len(), 1, "{:?}", t.streams);
        assert_eq!(t.streams[0].bytes, 10 * per, "the master's ten buffers, not the stranger's");
        assert_eq!(t.refused_data, 1, "the stranger's datagram");
        let error = t.error.as_deref().unwrap_or_default();
        assert_eq!(error, format!("gave up after {} receive timeouts", wire::MAX_ERRORS + 1));
        assert_eq!(bed.running(), 0);
    }
}

/// irtt's connections on the driver, with no socket: the test plays the listener. It hands
/// the source's opens and closes to the session over an in-memory link (reading the open
/// replies from it) and answers data requests through the connection state the session
/// shares with the listener's loop, as the loop does, on a clock it controls.
mod irtt {
    use super::Bed;
    use crate::admission::{Limits, Request};
    use crate::control_link::{ControlLink, MemoryLink};
    use crate::error::ServerSessionError;
    use crate::peers::irtt::{Answered, Connection, IrttSession, ReplyPath};
    use crate::server_session::SessionDriver;
    use netchar_model::{Direction, Flow, TestSpec};
    use netchar_wire::irtt::{self, Params, ReceivedStats, Reply, Stamp, StampAt};
    use std::net::SocketAddr;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;
    use std::thread::JoinHandle;
    use std::time::{Duration, Instant};

    /// How long a test waits for what must come (a bound on a failure, not a measurement).
    const WAIT: Duration = Duration::from_secs(30);

    fn from() -> SocketAddr {
        "127.0.0.1:40000".parse().unwrap()
    }

    /// An irtt 0.9 client's open with `-d SECS -i 1s -l 60`: counts, window, both stamps.
    fn asked(secs: i64) -> Params {
        Params {
            protocol_version: 1,
            duration_ns: secs * 1_000_000_000,
            interval_ns: 1_000_000_000,
            length: 60,
            stats: ReceivedStats { count: true, window: true },
            stamp_at: StampAt::Both,
            wall: true,
            monotonic: true,
            ..Params::default()
        }
    }

    /// A source's session on the driver, as the listener starts it once `earlier` bytes of
    /// its opens came: the listener's end of its link, and the connection state.
    struct Source {
        link: MemoryLink,
        conn: Arc<Connection>,
        session: JoinHandle<Option<ServerSessionError>>,
    }

    impl Source {
        fn start(bed: &Bed, earlier: usize, key: Option<&[u8]>) -> Self {
            let (link, server_end, _) = MemoryLink::pair("127.0.0.1:2112".parse().unwrap());
            let conn = Arc::new(Connection::default());
            let ctx = bed.ctx.clone();
            let session = IrttSession::new(
                from(),
                earlier,
                key.map(<[u8]>::to_vec),
                ctx.limits().clone(),
                bed.tests.clone(),
                conn.clone(),
            );
            let session = std::thread::spawn(move || {
                let deadline = Instant::now() + ctx.limits().idle_timeout;
                SessionDriver::serve_over(Box::new(server_end), from(), Box::new(session), &ctx.shared, deadline)
            });
            Self { link, conn, session }
        }

        fn hand(&mut self, datagram: &[u8]) {
            self.link.send_all(datagram).unwrap();
        }

        /// The next datagram the session sent back.
        fn answer(&mut self) -> Vec<u8> {
            let mut buf = vec![0u8; 2048];
            let n = self.link.read_within(&mut buf, WAIT).expect("an answer");
            assert!(n > 0, "the session ended without answering");
            buf.truncate(n);
            buf
        }

        /// Every datagram the session still sent, until its end closed the link.
        fn rest(&mut self) -> Vec<Vec<u8>> {
            let mut got = Vec::new();
            let mut buf = vec![0u8; 2048];
            loop {
                match self.link.read_within(&mut buf, WAIT) {
                    Ok(0) => return got,
                    Ok(n) => got.push(buf[..n].to_vec()),
                    Err(e) => panic!("the session did not end: {e}"),
                }
            }
        }
    }

    /// The way out the listener's loop would send replies by: every reply kept, the guard
    /// always allowing, the send stamp fixed.
    #[derive(Default)]
    struct Kept(Vec<Vec<u8>>);

    impl ReplyPath for Kept {
        fn may_answer(&mut self, _bytes: usize) -> bool {
            true
        }
        fn stamp(&mut self) -> Stamp {
            Stamp { wall: 2_000, mono: 2 }
        }
        fn send(&mut self, reply: &[u8]) -> bool {
            self.0.push(reply.to_vec());
            true
        }
    }

    const RECEIVED: Stamp = Stamp { wall: 1_000, mono: 1 };

    /// A data request of `len` bytes, answered as the listener's loop answers it at `now`.
    fn request(
        conn: &Connection,
        token: [u8; 8],
        seq: u32,
        len: usize,
        now: Instant,
        key: Option<&[u8]>,
        out: &mut Kept,
    ) -> Answered {
        let mut packet = irtt::data_request(token, seq, len, key.is_some());
        packet.truncate(len);
        if let Some(k) = key {
            irtt::sign(&mut packet, k);
        }
        conn.answer(&mut packet, (token, seq), RECEIVED, now, key, out)
    }

    fn open_reply(bytes: &[u8], key: Option<&[u8]>) -> ([u8; 8], Params) {
        match irtt::parse_reply(bytes, &Params::default(), key) {
            Ok(Reply::Open(token, granted)) => (token, granted),
            other => panic!("not an open reply: {other:?}"),
        }
    }

    #[test]
    fn an_open_is_admitted_answered_and_its_requests_counted_exactly_to_its_close() {
        let bed = Bed::new(Limits::default());
        let open = irtt::open_request(&asked(10), None);
        // The listener counted one open before the one it hands: two cover the reply.
        let mut source = Source::start(&bed, open.len(), None);
        source.hand(&open);
        let reply = source.answer();
        assert_eq!(reply.len(), open.len() + irtt::TOKEN_LEN, "the open plus its token");
        let (token, granted) = open_reply(&reply, None);
        assert_eq!(granted, asked(10), "nothing to restrict");
        assert_eq!(bed.running(), 1, "admitted as a test");
        // Four requests at one instant: the burst answers them; a short one (40 bytes, its
        // reply needs 60) is dropped; the next finds the burst spent. Another token is nobody's.
        let (now, mut kept) = (Instant::now(), Kept::default());
        for seq in 0..4 {
            assert_eq!(request(&source.conn, token, seq, 60, now, None, &mut kept), Answered::Sent);
        }
        assert_eq!(request(&source.conn, token, 4, 40, now, None, &mut kept), Answered::Dropped);
        assert_eq!(request(&source.conn, token, 5, 60, now, None, &mut kept), Answered::Dropped);
        assert_eq!(request(&source.conn, [9; 8], 6, 60, now, None, &mut kept), Answered::NotOurs);
        assert!(kept.0.iter().all(|r| r.len() == 60), "a reply is its request's length");
        let Ok(Reply::Data { sequence: 3, fields }) = irtt::parse_reply(&kept.0[3], &granted, None) else {
            panic!("not the fourth request's reply")
        };
        assert_eq!((fields.received, fields.window), (4, 0b1111));
        assert_eq!((fields.received_at, fields.sent_at), (RECEIVED, Stamp { wall: 2_000, mono: 2 }));
        // A forged close ends nothing: the repeated open after it is answered (its bytes and
        // the two before cover two replies), and the connection still counts.
        source.hand(&irtt::close_request([9; 8], None));
        source.hand(&open);
        assert_eq!(open_reply(&source.answer(), None).0, token, "the same token again");
        assert_eq!(request(&source.conn, token, 7, 60, now, None, &mut kept), Answered::Dropped);
        // Opens are answered only while the replies stay within their bytes: 3 opens of 26
        // bytes cover two replies of 34, 4 cover three, 5 do not cover four.
        source.hand(&open);
        assert_eq!(source.answer().len(), reply.len());
        source.hand(&open);
        source.hand(&irtt::close_request(token, None));
        assert_eq!(source.rest(), Vec::<Vec<u8>>::new(), "the fifth open went unanswered");
        assert!(source.session.join().unwrap().is_none(), "the close ended it well");
        assert_eq!(request(&source.conn, token, 8, 60, now, None, &mut kept), Answered::NotOurs, "closed");
        let tests = bed.tests_logged();
        assert_eq!(tests.len(), 1, "{:?}", bed.rejections());
        let t = &tests[0];
        assert_eq!((t.protocol, t.spec.direction, t.concurrent_tests), ("irtt", Direction::Bidir, 1));
        let flow = |f: Flow| t.streams.iter().find(|s| s.flow == f).unwrap();
        let (up, down) = (flow(Flow::Up), flow(Flow::Down));
        assert_eq!((up.bytes, up.rr.as_ref().unwrap().transactions), (4 * 60 + 40 + 60 + 60, 7));
        let down_rr = down.rr.as_ref().unwrap();
        assert_eq!((down.bytes, down_rr.transactions, down_rr.lost), (4 * 60, 4, 3));
        assert!(t.error.as_deref().is_some_and(|e| e.starts_with("3 request(s) dropped")), "{:?}", t.error);
        assert_eq!(t.data_paths, vec![(1, from())]);
        assert_eq!(bed.running(), 0, "the place is free again");
    }

    #[test]
    fn an_open_on_a_busy_server_is_turned_away_unanswered_and_logged() {
        let bed = Bed::new(Limits { max_concurrent: 1, ..Limits::default() });
        // The one place is held by another address's test.
        let holder = TestSpec::tcp_default();
        let (route, _routed) = std::sync::mpsc::sync_channel(1);
        let other = Request {
            spec: &holder,
            companion: None,
            client_ip: "192.0.2.9".parse().unwrap(),
            session_key: None,
            route,
        };
        bed.shared().registry.admit(other, &bed.shared().cfg.limits, Instant::now()).expect("the holder's place");
        let open = irtt::open_request(&asked(10), None);
        let mut source = Source::start(&bed, open.len(), None);
        source.hand(&open);
        assert_eq!(source.rest(), Vec::<Vec<u8>>::new(), "nothing answers a turned-away open");
        assert!(source.session.join().unwrap().is_none(), "a refusal is the session's end");
        assert!(!source.conn.was_opened());
        let mut kept = Kept::default();
        assert_eq!(request(&source.conn, [0; 8], 0, 60, Instant::now(), None, &mut kept), Answered::NotOurs);
        assert!(bed.tests_logged().is_empty());
        let rejections = bed.rejections();
        assert_eq!(rejections.len(), 1, "{rejections:?}");
        assert!(rejections[0].starts_with("irtt: turned away as busy:"), "{rejections:?}");
        assert!(rejections[0].contains("--max-concurrent"), "{rejections:?}");
        assert_eq!(bed.shared().registry.admitted_total.load(Ordering::SeqCst), 1, "the holder's alone");
    }

    #[test]
    fn with_a_key_only_signed_packets_count_and_every_answer_is_signed() {
        let bed = Bed::new(Limits { max_duration: Some(Duration::from_secs(5)), ..Limits::default() });
        let key = irtt::hmac_key(b"sekrit").unwrap();
        let signed_open = irtt::open_request(&asked(7), Some(&key));
        let mut source = Source::start(&bed, signed_open.len(), Some(&key));
        // Unsigned, signed under another key, not irtt's: none is an open.
        source.hand(&irtt::open_request(&asked(3), None));
        source.hand(&irtt::open_request(&asked(4), Some(&irtt::hmac_key(b"another").unwrap())));
        source.hand(b"GET / HTTP/1.0\r\n\r\n");
        source.hand(&signed_open);
        let reply = source.answer();
        assert!(irtt::verify(&reply, &key), "the open reply is signed");
        let (token, granted) = open_reply(&reply, Some(&key));
        assert_eq!(granted.duration_ns, 5_000_000_000, "the signed open's 7 s, within --max-duration");
        // The listener reads requests under the key: an unsigned one is no request at all.
        let unsigned = irtt::data_request(token, 0, 76, false);
        assert!(irtt::parse_request_keyed(&unsigned, Some(&key)).is_err());
        let mut kept = Kept::default();
        assert_eq!(request(&source.conn, token, 0, 76, Instant::now(), Some(&key), &mut kept), Answered::Sent);
        assert!(irtt::verify(&kept.0[0], &key), "the data reply is signed");
        assert!(matches!(irtt::parse_reply(&kept.0[0], &granted, Some(&key)), Ok(Reply::Data { sequence: 0, .. })));
        // An unsigned close ends nothing: the signed open after it is answered (three signed
        // opens cover two replies) and the connection still answers; the signed close ends it.
        source.hand(&irtt::close_request(token, None));
        source.hand(&signed_open);
        assert_eq!(open_reply(&source.answer(), Some(&key)).0, token);
        assert_eq!(request(&source.conn, token, 1, 76, Instant::now(), Some(&key), &mut kept), Answered::Sent);
        source.hand(&irtt::close_request(token, Some(&key)));
        assert_eq!(source.rest(), Vec::<Vec<u8>>::new());
        assert!(source.session.join().unwrap().is_none());
        let t = &bed.tests_logged()[0];
        assert!(t.error.is_none(), "{:?}", t.error);
        let up = t.streams.iter().find(|s| s.flow == Flow::Up).unwrap();
        assert_eq!((up.bytes, up.rr.as_ref().unwrap().transactions), (2 * 76, 2));
    }

    #[test]
    fn a_connection_silent_past_the_idle_limit_ends_with_what_it_counted() {
        let bed = Bed::new(Limits { idle_timeout: Duration::from_secs(1), ..Limits::default() });
        let open = irtt::open_request(&asked(60), None);
        let mut source = Source::start(&bed, open.len(), None);
        source.hand(&open);
        let (token, _) = open_reply(&source.answer(), None);
        // Two requests, answered unless a stalled machine let the limit pass first: what was
        // answered is counted here, as the client would.
        let mut kept = Kept::default();
        for seq in 0..2 {
            let answered = request(&source.conn, token, seq, 60, Instant::now(), None, &mut kept);
            assert_ne!(answered, Answered::Dropped);
        }
        // No close comes: the session ends the connection itself, keeping its counts.
        assert_eq!(source.rest(), Vec::<Vec<u8>>::new());
        assert!(source.session.join().unwrap().is_none());
        assert_eq!(request(&source.conn, token, 2, 60, Instant::now(), None, &mut kept), Answered::NotOurs);
        let t = &bed.tests_logged()[0];
        assert_eq!(t.error.as_deref(), Some("no close from the client"));
        let (up, down) = (&t.streams[0], &t.streams[1]);
        assert_eq!((up.flow, down.flow), (Flow::Up, Flow::Down));
        let answered = kept.0.len() as u64;
        assert_eq!((up.bytes, up.rr.as_ref().unwrap().transactions), (answered * 60, answered));
        assert_eq!((down.bytes, down.rr.as_ref().unwrap().transactions), (answered * 60, answered));
        assert_eq!(bed.running(), 0);
    }
}
