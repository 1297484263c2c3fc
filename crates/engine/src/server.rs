//! The server: a listener that tells control from data connections by their hello, admits
//! tests within its limits (crate::admission), and runs each test's server end in its own
//! control thread.
//!
//! Safety as a long-running service: every connection has an absolute deadline for its hello
//! and its request, connections per source address and in total are capped (a refusal is
//! answered, never a silent close), frames are capped before allocation, a malformed message
//! ends only its own session, and UDP test traffic goes only to an address that proved it
//! receives there (a return-routability check) and, unless the operator allows otherwise, that
//! is the control connection's own address.

use crate::admission::{
    canonical, ConnRefusal, DataConn, Limits, Registry, SourceCounts, SourceSlot, MAX_CHALLENGES_PER_STREAM,
};
use crate::control_link::ControlLink;
use crate::error::ServerSessionError;
use crate::peers::{PeerContext, PeerListener};
use crate::reflection::{GuardCounts, ReflectionGuard, RefusalKind};
use crate::server_control::NativeServer;
use crate::server_session::SessionDriver;
use crate::server_shared::{bind_udp, Logger, Shared};
/// The server's settings and log, defined below this module and the peers (crate::server_shared).
pub use crate::server_shared::{ServerConfig, ServerLog, TestLog};
use crate::StopFlag;
use netchar_wire::codec::encode_frame;
use netchar_wire::datagram::DatagramHeader;
use netchar_wire::hello::{
    identify_client, recognised_client, Hello, KnownProtocol, Role as HelloRole, HELLO_LEN, MAGIC,
};
use netchar_wire::message::ServerMessage;
use netchar_wire::session::ServerSession;
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Refused connections waiting to be closed gently (their answer read by the client); beyond
/// this many, a refused connection is closed at once.
const MAX_LINGERING_REFUSALS: usize = 1024;

/// A bound server, ready to [`Server::run`].
pub struct Server {
    listener: TcpListener,
    /// The UDP setup listener, bound with the TCP one so the server is whole once bound.
    /// Without it, TCP tests still run: the failure is logged once the server runs.
    udp: io::Result<UdpSocket>,
    cfg: ServerConfig,
    /// Peer-protocol servers run beside the native one (crate::peers).
    peers: Vec<Box<dyn PeerListener>>,
}

impl Server {
    /// Binds the listener. An unspecified IPv6 address also accepts IPv4 (v6only off).
    pub fn bind(cfg: ServerConfig) -> io::Result<Self> {
        use socket2::{Domain, Socket, Type};
        let socket = Socket::new(Domain::for_address(cfg.bind), Type::STREAM, None)?;
        socket.set_reuse_address(true)?;
        if cfg.bind.is_ipv6() {
            socket.set_only_v6(false)?;
        }
        socket.bind(&cfg.bind.into())?;
        socket.listen(1024)?;
        let listener: TcpListener = socket.into();
        let local = listener.local_addr()?;
        let udp = bind_udp(local);
        Ok(Self { listener, udp, cfg, peers: Vec::new() })
    }

    /// Runs a peer protocol's server beside the native one, under the same admission.
    pub fn with_peer(mut self, peer: Box<dyn PeerListener>) -> Self {
        self.peers.push(peer);
        self
    }

    /// The address actually bound (the port is known here when 0 was asked for).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `stop` is raised (running tests end cleanly, their clients get their
    /// figures) or, with `one_off`, until the first test ends. Returns what the reflection
    /// guard refused meanwhile.
    pub fn run(self, stop: &StopFlag, log: impl Fn(ServerLog) + Send + Sync + 'static) -> io::Result<GuardCounts> {
        let limiter = LogLimiter { inner: Arc::new(log), by_source: Default::default() };
        let log: Logger = Arc::new(move |e| limiter.log(e));
        let mut own_ports: Vec<u16> = self.peers.iter().flat_map(|p| p.udp_ports()).collect();
        if let Ok(u) = &self.udp {
            own_ports.extend(u.local_addr().map(|a| a.port()));
        }
        let shared = Arc::new(Shared {
            registry: Registry::default(),
            cfg: self.cfg.clone(),
            log: log.clone(),
            stop: stop.clone(),
            guard: ReflectionGuard::new(self.cfg.peer_policy.clone(), own_ports),
        });
        let sources = Arc::new(SourceCounts::default());
        let local = self.local_addr()?;
        let waker = spawn_waker(stop.clone(), local, self.cfg.one_off.then(|| shared.clone()));
        let refusals = Refusals::spawn(stop.clone(), self.cfg.keys.is_some());
        let peers: Vec<_> = self
            .peers
            .into_iter()
            .map(|p| {
                let ctx = PeerContext { shared: shared.clone(), sources: sources.clone() };
                std::thread::Builder::new().name(format!("netchar-{}", p.name())).spawn(move || p.run(ctx))
            })
            .collect::<io::Result<_>>()?;
        let udp = match self.udp {
            Ok(socket) => Some(spawn_udp_setup_listener(socket, shared.clone())),
            Err(e) => {
                let reason = format!("UDP tests unavailable: cannot bind UDP {local}: {e}");
                log(ServerLog::Rejected { peer: local, reason });
                None
            }
        };
        for conn in self.listener.incoming() {
            if stop.is_raised() || (self.cfg.one_off && one_off_done(&shared.registry)) {
                break;
            }
            let Ok(stream) = conn else { continue };
            let Ok(peer) = stream.peer_addr() else { continue };
            let slot = match sources.take(peer.ip(), &self.cfg.limits) {
                Ok(slot) => slot,
                Err(why) => {
                    let reason = match why {
                        ConnRefusal::PerSource(n) => format!(
                            "too many connections from {} ({n} open, the server's --max-per-source); close some and retry",
                            canonical(peer.ip())
                        ),
                        ConnRefusal::Total(n) => {
                            format!("the server has {n} connections open, its limit (--max-connections); retry later")
                        }
                    };
                    log(ServerLog::Rejected { peer, reason: reason.clone() });
                    refusals.refuse(stream, &reason, &shared.registry, &self.cfg.limits);
                    continue;
                }
            };
            let shared = shared.clone();
            let _ = std::thread::Builder::new().name("netchar-conn".into()).spawn(move || {
                handle_connection(stream, peer, slot, &shared);
            });
        }
        // Let running sessions see the flag, end their tests and report.
        stop.raise();
        // Sessions end within a phase (their writes time out); a server asked to stop does not
        // wait longer than that for a stuck one.
        let give_up = Instant::now() + self.cfg.timeouts.phase + Duration::from_secs(5);
        while sources.total.load(Ordering::SeqCst) > 0 && Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = waker.join();
        if let Some(u) = udp {
            let _ = u.join();
        }
        refusals.join();
        for p in peers {
            let _ = p.join();
        }
        Ok(shared.guard.counts())
    }
}

/// Rejections logged per source and period: a few lines at once, then one line with the
/// count, so a flood of bad connections from one address cannot flood the log.
struct LogLimiter {
    inner: Logger,
    by_source: std::sync::Mutex<HashMap<IpAddr, (Instant, u32, u64)>>,
}

/// Rejection lines per source per [`REJECTION_LOG_PERIOD`] before they are only counted.
const REJECTION_LINES_PER_PERIOD: u32 = 5;
/// The period of [`LogLimiter`].
const REJECTION_LOG_PERIOD: Duration = Duration::from_secs(10);

impl LogLimiter {
    fn log(&self, entry: ServerLog) {
        let ServerLog::Rejected { peer, reason } = entry else {
            return (self.inner)(entry);
        };
        let now = Instant::now();
        let ip = canonical(peer.ip());
        let line = {
            let mut m = self.by_source.lock().unwrap_or_else(|p| p.into_inner());
            if m.len() >= 4096 && !m.contains_key(&ip) {
                m.retain(|_, (since, _, _)| now.saturating_duration_since(*since) < REJECTION_LOG_PERIOD);
                if m.len() >= 4096 {
                    // Rejections from more sources than the table holds within one period:
                    // the newcomers are counted on one shared entry, not logged one each.
                    let overflow = IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED);
                    let e = m.entry(overflow).or_insert((now, REJECTION_LINES_PER_PERIOD, 0));
                    e.2 += 1;
                    return;
                }
            }
            let (since, lines, suppressed) = m.entry(ip).or_insert((now, 0, 0));
            if now.saturating_duration_since(*since) >= REJECTION_LOG_PERIOD {
                *since = now;
                *lines = 0;
            }
            if *lines >= REJECTION_LINES_PER_PERIOD {
                *suppressed += 1;
                None
            } else {
                *lines += 1;
                let earlier = std::mem::take(suppressed);
                Some(if earlier > 0 {
                    format!("{reason} ({earlier} more rejections from {ip} were not logged)")
                } else {
                    reason
                })
            }
        };
        if let Some(reason) = line {
            (self.inner)(ServerLog::Rejected { peer, reason });
        }
    }
}

/// Answers refused connections with our hello and a `busy` that says why, then closes each
/// gently (its bytes read until the client closes or a second passes): closing with unread
/// bytes would send a reset, and a reset makes the client's kernel drop the answer.
/// One thread for all of them, and a bounded number at a time.
struct Refusals {
    tx: mpsc::SyncSender<TcpStream>,
    thread: std::thread::JoinHandle<()>,
    auth_required: bool,
}

impl Refusals {
    fn spawn(stop: StopFlag, auth_required: bool) -> Self {
        let (tx, rx) = mpsc::sync_channel::<TcpStream>(MAX_LINGERING_REFUSALS);
        let thread = std::thread::spawn(move || {
            let mut lingering: Vec<(TcpStream, Instant)> = Vec::new();
            let mut buf = [0u8; 1024];
            loop {
                // Idle, it only has to notice the stop flag: wake every 20 ms only while a
                // refused connection lingers (an idle server woke 50 times a second before).
                let wait = if lingering.is_empty() { Duration::from_millis(250) } else { Duration::from_millis(20) };
                match rx.recv_timeout(wait) {
                    Ok(s) => {
                        if lingering.len() < MAX_LINGERING_REFUSALS {
                            lingering.push((s, Instant::now() + Duration::from_secs(1)));
                        }
                    }
                    Err(mpsc::RecvTimeoutError::Disconnected) => return,
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                }
                let now = Instant::now();
                lingering.retain_mut(|(s, deadline)| {
                    if now >= *deadline || stop.is_raised() {
                        return false;
                    }
                    // A few reads per tick: a refused client that streams data cannot hold
                    // this thread (its deadline still ends it).
                    for _ in 0..16 {
                        match s.read(&mut buf) {
                            Ok(0) => return false,
                            Ok(_) => {}
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                            Err(_) => return false,
                        }
                    }
                    true
                });
            }
        });
        Self { tx, thread, auth_required }
    }

    fn refuse(&self, stream: TcpStream, reason: &str, registry: &Registry, limits: &Limits) {
        let running = registry.running.load(Ordering::SeqCst) as u32;
        let mut out = Hello::server_with_nonce([0; 16], self.auth_required).encode().to_vec();
        let busy = ServerMessage::Busy { running, max: limits.max_concurrent, reason: Some(reason.to_string()) };
        encode_frame(&busy.encode(), &mut out);
        // A fresh connection's send buffer is empty: the answer fits without blocking.
        if stream.set_nonblocking(true).is_err() || (&stream).write_all(&out).is_err() {
            return;
        }
        let _ = stream.shutdown(std::net::Shutdown::Write);
        let _ = self.tx.try_send(stream);
    }

    fn join(self) {
        drop(self.tx);
        let _ = self.thread.join();
    }
}

/// Reads setup datagrams and admits UDP streams by return routability: a setup from an
/// allowed address is answered with a challenge to that address, and only a confirm echoing
/// the address's token (and, on an authenticated test, the stream's tag) is routed to the
/// test. The token is a keyed hash of (cookie, stream, address) under a key drawn at start,
/// so the listener keeps no state per claim.
fn spawn_udp_setup_listener(socket: UdpSocket, shared: Arc<Shared>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut key = [0u8; 32];
        if getrandom::getrandom(&mut key).is_err() {
            (shared.log)(ServerLog::Rejected {
                peer: socket.local_addr().unwrap_or(shared.cfg.bind),
                reason: "UDP tests unavailable: no randomness for the routability key".into(),
            });
            return;
        }
        // Five looks a second at the stop flag, as the waker's.
        let _ = socket.set_read_timeout(Some(Duration::from_millis(200)));
        let mut buf = [0u8; 2048];
        while !shared.stop.is_raised() {
            let Ok((n, from)) = socket.recv_from(&mut buf) else { continue };
            // A challenge is smaller than its setup, so only loops need stopping here.
            if let Err(dropped) = shared.guard.check_source(from) {
                if shared.guard.first_refusal(from.ip(), RefusalKind::Source, "netchar", Instant::now()) {
                    (shared.log)(ServerLog::Rejected {
                        peer: from,
                        reason: format!("UDP setup dropped unanswered: {dropped}"),
                    });
                }
                continue;
            }
            let Some(setup) = DatagramHeader::parse_setup(&buf[..n]) else {
                log_foreign_datagram(&shared, from, &buf[..n]);
                continue;
            };
            let mut st = shared.registry.lock();
            let Some(entry) = st.tests.get_mut(&setup.cookie) else { continue };
            if !shared.cfg.data_paths.allows(entry.client_ip, from.ip()) {
                entry.refused_data += 1;
                continue;
            }
            match setup.confirm {
                None => {
                    // Only the test's own stream ids earn a challenge.
                    if setup.stream_id == 0 || setup.stream_id > entry.streams {
                        entry.refused_data += 1;
                        continue;
                    }
                    let sent = entry.challenges.entry(setup.stream_id).or_insert(0);
                    if *sent >= MAX_CHALLENGES_PER_STREAM {
                        continue;
                    }
                    *sent += 1;
                    drop(st);
                    let token = netchar_wire::auth::routability_token(&key, &setup.cookie, setup.stream_id, &from);
                    let _ = socket.send_to(&DatagramHeader::challenge(setup.stream_id, &token), from);
                }
                Some((token, tag)) => {
                    let routable = netchar_wire::auth::verify_routability_token(
                        &key,
                        &setup.cookie,
                        setup.stream_id,
                        &from,
                        &token,
                    );
                    let tagged = entry.tag_ok(&setup.cookie, setup.stream_id, &tag);
                    if routable && tagged {
                        let _ = entry.route.try_send(DataConn::Udp(setup.stream_id, from));
                    } else {
                        entry.refused_data += 1;
                    }
                }
            }
        }
    })
}

fn one_off_done(registry: &Registry) -> bool {
    registry.admitted_total.load(Ordering::SeqCst) > 0 && registry.running.load(Ordering::SeqCst) == 0
}

/// Unblocks `accept` once the server must stop, by connecting to itself.
fn spawn_waker(stop: StopFlag, local: SocketAddr, one_off: Option<Arc<Shared>>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        // Five looks a second: how soon a stop (or a one-off server's end) is seen, against an
        // idle server's wake-ups.
        while !stop.is_raised() && !one_off.as_ref().is_some_and(|s| one_off_done(&s.registry)) {
            std::thread::sleep(Duration::from_millis(200));
        }
        let mut target = local;
        if target.ip().is_unspecified() {
            target.set_ip(match target {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        let _ = TcpStream::connect_timeout(&target, Duration::from_secs(1));
    })
}

/// Reads the 40-byte hello by an absolute deadline: a client that trickles bytes gets no more
/// time than one that sends nothing.
pub(crate) fn read_hello(stream: &mut dyn ControlLink, deadline: Instant, stop: &StopFlag) -> (usize, [u8; HELLO_LEN]) {
    let mut raw = [0u8; HELLO_LEN];
    let mut got = 0;
    while got < HELLO_LEN && !stop.is_raised() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        // Short waits, so a stopping server does not wait out a silent client.
        match stream.read_within(&mut raw[got..], left.min(Duration::from_millis(200))) {
            Ok(0) => break,
            Ok(n) => {
                got += n;
                // Another protocol's client (an iperf3 cookie is 37 bytes): no use waiting for
                // the rest of a hello that is not coming; its client hears the close at once.
                let seen = got.min(MAGIC.len());
                if raw[..seen] != MAGIC[..seen] && got >= 37 {
                    break;
                }
            }
            Err(e) if crate::is_retry(&e) => {}
            Err(_) => break,
        }
    }
    (got, raw)
}

pub(crate) fn handle_connection(mut stream: TcpStream, peer: SocketAddr, slot: SourceSlot, shared: &Shared) {
    let accepted = Instant::now();
    let limits = &shared.cfg.limits;
    let deadline = accepted + shared.cfg.timeouts.hello.min(limits.idle_timeout);
    let (got, raw) = read_hello(&mut stream, deadline, &shared.stop);
    if shared.stop.is_raised() && got == 0 {
        return;
    }
    if got < HELLO_LEN {
        let reason = format!("no netchar hello ({})", identify_client(&raw[..got]));
        (shared.log)(ServerLog::Rejected { peer, reason });
        answer_another_protocol(stream);
        return;
    }
    let hello = match Hello::decode(&raw) {
        Ok(h) => h,
        Err(_) => {
            let reason = format!("not a netchar client ({})", identify_client(&raw));
            (shared.log)(ServerLog::Rejected { peer, reason });
            answer_another_protocol(stream);
            return;
        }
    };
    match hello.role {
        HelloRole::Data => {
            // A routed data connection belongs to its test: it leaves the per-source count.
            drop(slot);
            route_data_connection(stream, peer, &hello, shared);
        }
        _ => serve_native(stream, peer, &hello, shared, accepted + limits.idle_timeout),
    }
}

fn route_data_connection(stream: TcpStream, peer: SocketAddr, hello: &Hello, shared: &Shared) {
    let mut st = shared.registry.lock();
    let reason = match st.tests.get_mut(&hello.cookie) {
        None => "data connection with an unknown session cookie",
        Some(entry) if !shared.cfg.data_paths.allows(entry.client_ip, peer.ip()) => {
            entry.refused_data += 1;
            "data connection from another address than its test's control connection (see --allow-data-from)"
        }
        Some(entry) if !entry.tag_ok(&hello.cookie, hello.stream_id, &hello.tag) => {
            entry.refused_data += 1;
            "data connection without its authenticated test's tag"
        }
        Some(entry) => {
            let _ = entry.route.try_send(DataConn::Tcp(hello.stream_id, stream));
            return;
        }
    };
    drop(st);
    (shared.log)(ServerLog::Rejected { peer, reason: reason.into() });
}

/// An irtt client pointed at netchar's UDP port: its open request is logged by name, once in a
/// while per address, and never answered. Only irtt's, whose magic cannot be a netchar
/// datagram's; other bytes are dropped unlogged, as before.
fn log_foreign_datagram(shared: &Shared, from: SocketAddr, bytes: &[u8]) {
    if recognised_client(bytes) == Some(KnownProtocol::Irtt)
        && shared.guard.first_refusal(from.ip(), RefusalKind::Foreign, "netchar", Instant::now())
    {
        let reason = format!("not a netchar datagram ({})", identify_client(bytes));
        (shared.log)(ServerLog::Rejected { peer: from, reason });
    }
}

/// Answers another protocol's client with netchar's hello, so that netchar's own client of
/// that protocol (`--proto netperf` pointed at this port) names what answered
/// (netchar_wire::hello::identify_peer) instead of a reset; 40 bytes for at least the bytes
/// read, on a connection whose handshake proved its address. Then closes gently, as refusals
/// do: what the client still sends is read for at most a second, since closing with unread
/// bytes would send a reset that makes its kernel drop the answer.
fn answer_another_protocol(mut stream: TcpStream) {
    if stream.write_all(&Hello::server().encode()).is_err() {
        return;
    }
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let until = Instant::now() + Duration::from_secs(1);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(100)));
    let (mut buf, mut drained) = ([0u8; 4096], 0usize);
    while Instant::now() < until && drained < 1 << 20 {
        match stream.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => drained += n,
            Err(e) if crate::is_retry(&e) => {}
            Err(_) => return,
        }
    }
}

/// Opens a netchar control session for a client whose hello was read, and drives it.
fn serve_native(stream: TcpStream, peer: SocketAddr, hello: &Hello, shared: &Shared, request_deadline: Instant) {
    let _ = stream.set_nodelay(true);
    // A client that stops reading must not hold this thread (and its slots) in a write: a
    // write that cannot finish within a phase ends the session.
    let _ = stream.set_write_timeout(Some(shared.cfg.timeouts.phase));
    serve_native_over(Box::new(stream), peer, hello, shared, request_deadline);
}

/// [`serve_native`] over any control link (the engine's tests use an in-memory one); returns
/// why the session ended early, if it did (the log has it too).
pub(crate) fn serve_native_over<'a>(
    mut link: Box<dyn ControlLink + 'a>,
    peer: SocketAddr,
    hello: &Hello,
    shared: &'a Shared,
    request_deadline: Instant,
) -> Option<ServerSessionError> {
    let mut nonce = [0u8; 16];
    if getrandom::getrandom(&mut nonce).is_err() {
        (shared.log)(ServerLog::Rejected { peer, reason: "no randomness for the session nonce".into() });
        return Some(ServerSessionError::Io {
            context: "no randomness for the session nonce".into(),
            source: io::ErrorKind::Other.into(),
        });
    }
    let session = ServerSession::with_auth(Instant::now(), hello, shared.cfg.timeouts, nonce, shared.cfg.keys.clone());
    match session {
        Ok(s) => SessionDriver::serve_over(link, peer, Box::new(NativeServer::new(s)), shared, request_deadline),
        Err(rejected) => {
            let (mut s, e) = *rejected;
            let mut out = Vec::new();
            s.poll_output(&mut out);
            let _ = link.send_all(&out);
            (shared.log)(ServerLog::Rejected { peer, reason: e.to_string() });
            Some(ServerSessionError::Protocol(e))
        }
    }
}
