//! The server role: `netchar server --iperf2` ([`Iperf2Listener`]) answering iperf2 clients
//! over TCP and UDP, each test logged from netchar's own counters. The listener accepts and
//! demultiplexes; each test is a session (session.rs) on the one driver (crate::server_session).

use super::session::{TcpSession, UdpSession, FIN_LINGER};
use crate::peers::{PeerContext, PeerListener};
use crate::server_control::TestsByAddress;
use crate::server_session::{DatagramLink, DatagramSource, SessionDriver};
use crate::server_shared::bind_udp;
use netchar_wire::iperf2::{ClientHeader, UdpHeader};
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The longest wait before the stop flag is checked again.
const POLL: Duration = Duration::from_millis(100);
/// UDP sources served at once.
const MAX_UDP_SOURCES: usize = 64;
/// How long a source whose test was turned away is not heard (its client keeps sending the
/// test's datagrams: each would ask again).
const REFUSED_HOLD: Duration = Duration::from_secs(1);

/// `netchar server --iperf2`: iperf2's TCP and UDP on one port.
pub struct Iperf2Listener {
    tcp: TcpListener,
    udp: UdpSocket,
}

impl Iperf2Listener {
    /// Binds TCP and UDP on `addr` (`[::]` also takes IPv4); a busy port fails here.
    pub fn bind(addr: SocketAddr) -> io::Result<Self> {
        let (tcp, udp) = crate::peers::bind_tcp_and_udp(addr, bind_udp)?;
        Ok(Self { tcp, udp })
    }
}

/// The registry's binder (crate::protocols::LISTENERS): `ports` is the iperf2 port.
pub(crate) fn bind_listener(ip: IpAddr, ports: &[u16]) -> io::Result<Box<dyn PeerListener>> {
    Ok(Box::new(Iperf2Listener::bind(SocketAddr::new(ip, ports[0]))?))
}

impl PeerListener for Iperf2Listener {
    fn name(&self) -> &'static str {
        "iperf2"
    }
    fn describe(&self) -> String {
        format!("answering iperf2 clients on {} (TCP and UDP), under the same limits", self.local_addr())
    }
    fn local_addr(&self) -> SocketAddr {
        self.tcp.local_addr().unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)))
    }
    fn udp_ports(&self) -> Vec<u16> {
        self.udp.local_addr().map(|a| a.port()).into_iter().collect()
    }
    fn run(self: Box<Self>, ctx: PeerContext) {
        let tests = TestsByAddress::default();
        let (c2, t2) = (ctx.clone(), tests.clone());
        let Self { tcp, udp } = *self;
        let udp_thread = std::thread::spawn(move || serve_udp(udp, c2, t2));
        serve_tcp(tcp, ctx, tests);
        let _ = udp_thread.join();
    }
}

fn serve_tcp(listener: TcpListener, ctx: PeerContext, tests: TestsByAddress) {
    super::super::serve_connections(listener, &ctx, "iperf2", move |stream, peer, _, ctx| {
        // The session's "control connection" is the test's own: its first bytes the header.
        let conn = stream.try_clone().ok();
        let session = TcpSession::new(Instant::now(), peer, conn, ctx.clone(), tests.clone());
        let deadline = Instant::now() + ctx.limits().idle_timeout;
        SessionDriver::serve_data_connection(stream, peer, Box::new(session), &ctx.shared, deadline);
    });
}

/// A UDP source served by a session of its own, on its own thread.
struct Source {
    link: DatagramSource,
    thread: std::thread::JoinHandle<()>,
    /// The session admitted its test (a refused source is held back longer).
    admitted: Arc<AtomicBool>,
}

/// Reads the shared UDP socket: every datagram passes the reflection guard's source rule,
/// then goes to its source's session; a new source's first datagram opens one (a test's
/// header: never a FIN or a stray datagram), on a thread of its own, at most
/// [`MAX_UDP_SOURCES`] at once. A source whose session ended is held back a while, so late
/// datagrams (repeated FINs, 2.1 `-R`'s re-sent requests) do not open a second test.
fn serve_udp(socket: UdpSocket, ctx: PeerContext, tests: TestsByAddress) {
    let _ = socket.set_read_timeout(Some(POLL));
    crate::tcp_setup::size_udp_buffers(&socket);
    let mut sources: HashMap<SocketAddr, Source> = HashMap::new();
    let mut held: HashMap<SocketAddr, Instant> = HashMap::new();
    let mut buf = vec![0u8; 65_536];
    while !ctx.stop().is_raised() {
        let now = Instant::now();
        let ended: Vec<SocketAddr> = sources.iter().filter(|(_, s)| s.thread.is_finished()).map(|(a, _)| *a).collect();
        for a in ended {
            if let Some(s) = sources.remove(&a) {
                let _ = s.thread.join();
                let hold = if s.admitted.load(Ordering::SeqCst) { FIN_LINGER } else { REFUSED_HOLD };
                held.insert(a, now + hold);
            }
        }
        held.retain(|_, until| now < *until);
        let (n, from) = match socket.recv_from(&mut buf) {
            Ok(x) => x,
            Err(_) => continue,
        };
        let at = std::time::SystemTime::now();
        if !ctx.inbound("iperf2", from, n) || held.contains_key(&from) {
            continue;
        }
        let d = &buf[..n];
        if let Some(s) = sources.get(&from) {
            // A full queue drops the datagram (the session counts it lost); an ended session
            // is reaped above.
            let _ = s.link.hand(at, d);
            continue;
        }
        let layout = UdpHeader::sniff_layout(d);
        let Some(h) = UdpHeader::parse(d, layout) else { continue };
        // A FIN of a test already over, or a stray datagram: nothing to answer.
        if h.seq < 0 || sources.len() >= MAX_UDP_SOURCES {
            continue;
        }
        let hl = layout.datagram_header_len();
        let header = ClientHeader::decode(&d[hl.min(d.len())..]).ok().flatten().map(|x| x.0).unwrap_or_default();
        // 2.1 `-R`: nothing proves that the request came from `from`: the test's datagrams go
        // only to an allowed network (the refusal is logged once per source).
        if header.reverse() && ctx.may_send_unprompted("iperf2", from).is_err() {
            continue;
        }
        let Ok(answers) = socket.try_clone() else { continue };
        let answer_ctx = ctx.clone();
        let (link, source) =
            DatagramLink::new(answers, from, Box::new(move |bytes| answer_ctx.may_answer("iperf2", from, bytes)));
        let admitted = Arc::new(AtomicBool::new(false));
        let session = UdpSession::new(from, ctx.limits().clone(), tests.clone(), link.arrivals(), admitted.clone());
        let _ = source.hand(at, d);
        let thread_ctx = ctx.clone();
        let spawned = std::thread::Builder::new().name("netchar-iperf2-udp".into()).spawn(move || {
            let deadline = Instant::now() + thread_ctx.limits().idle_timeout;
            SessionDriver::serve_over(Box::new(link), from, Box::new(session), &thread_ctx.shared, deadline);
        });
        if let Ok(thread) = spawned {
            sources.insert(from, Source { link: source, thread, admitted });
        }
    }
    // Stopping: each session sees the flag, reports what it counted and logs it.
    for (_, s) in sources {
        let _ = s.thread.join();
    }
}
