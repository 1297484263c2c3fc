//! The server: a listener that tells control from data connections by their hello, admits
//! tests up to `--max-concurrent`, and runs each test's server end in its own control thread.
//!
//! Safety as a long-running service: every connection has a deadline for its hello and every
//! session phase has a timeout, frames are capped before allocation, a malformed message ends
//! only its own session, and threads per connection are bounded.

use crate::dataplane::{DataPlane, DataPlaneConfig, DataSocket, DataStream};
use crate::measure::{host_info, CpuMeter};
use crate::tcp_setup::post_connect;
use crate::StopFlag;
use netchar_model::{Endpoint, Flow, Role, StreamRecord, TestSpec};
use netchar_wire::datagram::DatagramHeader;
use netchar_wire::hello::{identify_peer, Hello, Role as HelloRole, HELLO_LEN};
use netchar_wire::session::{ServerEvent, ServerSession, Timeouts};
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the idle counters calibrate before a test that asks for idle headroom.
const IDLE_CALIBRATION: Duration = Duration::from_millis(300);
/// Connections still in their hello or control session beyond which new ones are dropped.
const MAX_CONNECTION_THREADS: usize = 512;

/// How the server runs.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address to listen on; `[::]` takes IPv4 and IPv6.
    pub bind: SocketAddr,
    /// Exit after the first test.
    pub one_off: bool,
    /// Tests admitted at once.
    pub max_concurrent: u32,
    /// Control protocol timeouts.
    pub timeouts: Timeouts,
}

/// What the server did, for its log (one line each).
#[derive(Debug, Clone)]
pub enum ServerLog {
    /// A test ended (well or not).
    Test(Box<TestLog>),
    /// A connection was turned away before any test.
    Rejected {
        /// Who.
        peer: SocketAddr,
        /// Why.
        reason: String,
    },
}

/// One test as the server saw it.
#[derive(Debug, Clone)]
pub struct TestLog {
    /// The client.
    pub peer: SocketAddr,
    /// The test it ran.
    pub spec: TestSpec,
    /// The server's records of every stream.
    pub streams: Vec<StreamRecord>,
    /// Tests running at once, this one included.
    pub concurrent_tests: u32,
    /// Why it ended early, if it did.
    pub error: Option<String>,
}

type Logger = Arc<dyn Fn(ServerLog) + Send + Sync>;

/// Admission and the routing of data connections to their test by cookie.
/// A data stream arriving for a test.
enum DataConn {
    /// A TCP data connection for stream `id`.
    Tcp(u32, TcpStream),
    /// A UDP setup datagram for stream `id` from this address.
    Udp(u32, SocketAddr),
}

/// Where a test takes its data streams.
type DataRoute = mpsc::Sender<DataConn>;

#[derive(Default)]
struct Registry {
    tests: Mutex<HashMap<[u8; 16], DataRoute>>,
    running: AtomicUsize,
    admitted_total: AtomicUsize,
}

/// A bound server, ready to [`Server::run`].
pub struct Server {
    listener: TcpListener,
    cfg: ServerConfig,
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
        Ok(Self { listener: socket.into(), cfg })
    }

    /// The address actually bound (the port is known here when 0 was asked for).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `stop` is raised (running tests end cleanly, their clients get their
    /// figures) or, with `one_off`, until the first test ends.
    pub fn run(self, stop: &StopFlag, log: impl Fn(ServerLog) + Send + Sync + 'static) -> io::Result<()> {
        let log: Logger = Arc::new(log);
        let registry = Arc::new(Registry::default());
        let threads = Arc::new(AtomicUsize::new(0));
        let local = self.local_addr()?;
        let waker = spawn_waker(stop.clone(), local, self.cfg.one_off.then(|| registry.clone()));
        let udp = match bind_udp(local) {
            Ok(socket) => Some(spawn_udp_setup_listener(socket, registry.clone(), stop.clone())),
            Err(e) => {
                log(ServerLog::Rejected {
                    peer: local,
                    reason: format!("UDP tests unavailable: cannot bind UDP {local}: {e}"),
                });
                None
            }
        };
        for conn in self.listener.incoming() {
            if stop.is_raised() || (self.cfg.one_off && one_off_done(&registry)) {
                break;
            }
            let Ok(stream) = conn else { continue };
            if threads.load(Ordering::SeqCst) >= MAX_CONNECTION_THREADS {
                continue;
            }
            threads.fetch_add(1, Ordering::SeqCst);
            let (registry, log, stop, cfg, count) =
                (registry.clone(), log.clone(), stop.clone(), self.cfg.clone(), threads.clone());
            let spawned = std::thread::Builder::new().name("netchar-conn".into()).spawn(move || {
                handle_connection(stream, &registry, &cfg, &stop, &log);
                count.fetch_sub(1, Ordering::SeqCst);
            });
            if spawned.is_err() {
                threads.fetch_sub(1, Ordering::SeqCst);
            }
        }
        // Let running sessions see the flag, end their tests and report.
        stop.raise();
        while threads.load(Ordering::SeqCst) > 0 {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = waker.join();
        if let Some(u) = udp {
            let _ = u.join();
        }
        Ok(())
    }
}

/// A UDP socket on the server's address and port that other sockets may share: the listener
/// for setup datagrams, and each test stream's socket connected to its client (the kernel
/// delivers to the connected socket first).
fn bind_udp(local: SocketAddr) -> io::Result<UdpSocket> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(local), Type::DGRAM, None)?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    if local.is_ipv6() {
        socket.set_only_v6(false)?;
    }
    socket.bind(&local.into())?;
    Ok(socket.into())
}

/// Reads setup datagrams (cookie + stream id) and routes them to their test.
fn spawn_udp_setup_listener(socket: UdpSocket, registry: Arc<Registry>, stop: StopFlag) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let _ = socket.set_read_timeout(Some(Duration::from_millis(100)));
        let mut buf = [0u8; 2048];
        while !stop.is_raised() {
            let Ok((n, peer)) = socket.recv_from(&mut buf) else { continue };
            let Some(cookie) = DatagramHeader::setup_cookie(&buf[..n]) else {
                continue;
            };
            let Ok(h) = DatagramHeader::parse(&buf[..n]) else { continue };
            let route = registry.tests.lock().ok().and_then(|t| t.get(&cookie).cloned());
            if let Some(tx) = route {
                let _ = tx.send(DataConn::Udp(h.stream_id, peer));
            }
        }
    })
}

fn one_off_done(registry: &Registry) -> bool {
    registry.admitted_total.load(Ordering::SeqCst) > 0 && registry.running.load(Ordering::SeqCst) == 0
}

/// Unblocks `accept` once the server must stop, by connecting to itself.
fn spawn_waker(stop: StopFlag, local: SocketAddr, one_off: Option<Arc<Registry>>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        while !stop.is_raised() && !one_off.as_ref().is_some_and(|r| one_off_done(r)) {
            std::thread::sleep(Duration::from_millis(50));
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

fn handle_connection(
    mut stream: TcpStream,
    registry: &Arc<Registry>,
    cfg: &ServerConfig,
    stop: &StopFlag,
    log: &Logger,
) {
    let Ok(peer) = stream.peer_addr() else { return };
    let _ = stream.set_read_timeout(Some(cfg.timeouts.hello));
    let mut raw = [0u8; HELLO_LEN];
    let mut got = 0;
    while got < HELLO_LEN {
        match stream.read(&mut raw[got..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    if stop.is_raised() && got == 0 {
        return;
    }
    if got < HELLO_LEN {
        let reason = format!("no netchar hello ({})", describe_client_bytes(&raw[..got]));
        log(ServerLog::Rejected { peer, reason });
        return;
    }
    let hello = match Hello::decode(&raw) {
        Ok(h) => h,
        Err(_) => {
            let reason = format!("not a netchar client ({})", describe_client_bytes(&raw));
            log(ServerLog::Rejected { peer, reason });
            return;
        }
    };
    match hello.role {
        HelloRole::Data => {
            let sender = registry.tests.lock().ok().and_then(|t| t.get(&hello.cookie).cloned());
            match sender {
                Some(tx) => {
                    let _ = tx.send(DataConn::Tcp(hello.stream_id, stream));
                }
                None => {
                    log(ServerLog::Rejected { peer, reason: "data connection with an unknown session cookie".into() })
                }
            }
        }
        _ => ControlSession::serve(stream, peer, &hello, registry, cfg, stop, log),
    }
}

fn describe_client_bytes(b: &[u8]) -> String {
    if b.is_empty() {
        return "it sent nothing".into();
    }
    if b.len() >= 36 && b[..36].iter().all(|c| c.is_ascii_alphanumeric()) {
        return "it looks like an iperf3 client's cookie; this is a netchar server".into();
    }
    identify_peer(b).replace("answered", "sent")
}

/// One client's test, driven from the server's control thread.
struct ControlSession<'a> {
    stream: TcpStream,
    session: ServerSession,
    registry: &'a Arc<Registry>,
    cfg: &'a ServerConfig,
    spec: Option<TestSpec>,
    cookie: Option<[u8; 16]>,
    data_rx: Option<mpsc::Receiver<DataConn>>,
    streams: Vec<DataStream>,
    plane: Option<DataPlane>,
    meter: Option<CpuMeter>,
    concurrent: u32,
    senders_reported: bool,
    peer_done_at: Option<Instant>,
    error: Option<String>,
    records_for_log: Vec<StreamRecord>,
    /// When `ready` was sent: this end's clock for the test.
    ready_at: Option<Instant>,
    /// `--server-load`: the running background load.
    load: Option<crate::load::BackgroundLoad>,
    /// `--idle`: the idle counters and the mark taken at the start.
    idle: Option<(crate::load::IdleMeter, Option<(u64, Instant)>)>,
}

impl<'a> ControlSession<'a> {
    fn serve(
        stream: TcpStream,
        peer: SocketAddr,
        hello: &Hello,
        registry: &'a Arc<Registry>,
        cfg: &'a ServerConfig,
        stop: &StopFlag,
        log: &Logger,
    ) {
        let _ = stream.set_nodelay(true);
        let session = match ServerSession::new(Instant::now(), hello, cfg.timeouts) {
            Ok(s) => s,
            Err(rejected) => {
                let (mut s, e) = *rejected;
                let mut out = Vec::new();
                s.poll_output(&mut out);
                let _ = (&stream).write_all(&out);
                log(ServerLog::Rejected { peer, reason: e.to_string() });
                return;
            }
        };
        let mut me = ControlSession {
            stream,
            session,
            registry,
            cfg,
            spec: None,
            cookie: None,
            data_rx: None,
            streams: Vec::new(),
            plane: None,
            meter: None,
            concurrent: 0,
            senders_reported: false,
            peer_done_at: None,
            error: None,
            records_for_log: Vec::new(),
            ready_at: None,
            load: None,
            idle: None,
        };
        let outcome = me.pump(stop);
        me.finish(outcome.err());
        // Free the test's slot before the gentle close: a client that starts its next test
        // right away (--repeat) must not find the server busy with this one.
        if let Some(cookie) = me.cookie.take() {
            if let Ok(mut t) = registry.tests.lock() {
                t.remove(&cookie);
            }
            registry.running.fetch_sub(1, Ordering::SeqCst);
        }
        me.linger();
        match me.spec.take() {
            Some(spec) if me.meter.is_some() || me.error.is_some() => log(ServerLog::Test(Box::new(TestLog {
                peer,
                spec,
                streams: std::mem::take(&mut me.records_for_log),
                concurrent_tests: me.concurrent,
                error: me.error.clone(),
            }))),
            Some(_) => {}
            None => {
                if let Some(e) = me.error.clone() {
                    log(ServerLog::Rejected { peer, reason: e });
                }
            }
        }
    }

    fn pump(&mut self, stop: &StopFlag) -> Result<(), String> {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            self.flush()?;
            while let Some(ev) = self.session.poll_event() {
                self.on_event(ev)?;
            }
            self.flush()?;
            if self.session.is_done() {
                return Ok(());
            }
            self.collect_streams()?;
            if stop.is_raised() {
                return Err("the server is shutting down".into());
            }
            if let Some(plane) = &self.plane {
                if !self.senders_reported {
                    if let Some(totals) = plane.senders_done() {
                        self.senders_reported = true;
                        if !totals.is_empty() {
                            self.session.local_senders_done(Instant::now(), totals);
                        }
                    }
                }
                if let Some(e) = plane.first_error() {
                    return Err(e);
                }
                if plane.all_done() {
                    return Ok(());
                }
                if self.peer_done_at.is_some_and(|t| t.elapsed() > self.cfg.timeouts.phase + self.udp_grace()) {
                    return Err("the client finished sending but its data did not arrive in time".into());
                }
            }
            self.read_control(&mut buf)?;
            let now = Instant::now();
            if self.session.poll_timeout().is_some_and(|t| now >= t) {
                self.session.handle_timeout(now).map_err(|e| e.to_string())?;
            }
        }
    }

    fn udp_grace(&self) -> Duration {
        Duration::from_secs_f64(self.spec.as_ref().map_or(0.0, |s| s.receive_grace_seconds()))
    }

    fn flush(&mut self) -> Result<(), String> {
        let mut out = Vec::new();
        self.session.poll_output(&mut out);
        if out.is_empty() {
            return Ok(());
        }
        self.stream.write_all(&out).map_err(|e| format!("control connection failed: {e}"))
    }

    fn read_control(&mut self, buf: &mut [u8]) -> Result<(), String> {
        // While data connections are still arriving, look for them often: `ready` (and the
        // test's start) waits on this loop.
        let wait = if self.data_rx.is_some() { Duration::from_millis(2) } else { Duration::from_millis(50) };
        let _ = self.stream.set_read_timeout(Some(wait));
        match self.stream.read(buf) {
            Ok(0) => self.session.handle_eof(Instant::now()).map_err(|e| e.to_string()),
            Ok(n) => self.session.handle_input(Instant::now(), &buf[..n]).map_err(|e| e.to_string()),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(format!("control connection failed: {e}")),
        }
    }

    fn on_event(&mut self, ev: ServerEvent) -> Result<(), String> {
        let now = Instant::now();
        match ev {
            ServerEvent::Requested { spec, companion } => {
                let max = self.cfg.max_concurrent as usize;
                let running = self.registry.running.fetch_add(1, Ordering::SeqCst);
                // A companion (latency under load) joins a test of the same client that runs
                // now; it does not count against the limit.
                let accompanies =
                    companion.is_some_and(|c| self.registry.tests.lock().is_ok_and(|t| t.contains_key(&c)));
                if running >= max && !accompanies {
                    self.registry.running.fetch_sub(1, Ordering::SeqCst);
                    self.session.busy(now, running as u32, max as u32);
                    self.error = Some(format!("turned away: busy ({running} of {max} tests running)"));
                    return Ok(());
                }
                self.registry.admitted_total.fetch_add(1, Ordering::SeqCst);
                let mut cookie = [0u8; 16];
                getrandom::getrandom(&mut cookie).map_err(|e| format!("no randomness for the cookie: {e}"))?;
                let (tx, rx) = mpsc::channel();
                if let Ok(mut t) = self.registry.tests.lock() {
                    t.insert(cookie, tx);
                }
                self.cookie = Some(cookie);
                self.data_rx = Some(rx);
                self.concurrent = running as u32 + 1;
                if spec.measure_idle {
                    // Calibrated before the test: the machine is as idle as it gets here.
                    self.idle = Some((crate::load::IdleMeter::start(IDLE_CALIBRATION), None));
                }
                let crr = spec.rr.as_ref().is_some_and(|r| r.connect_per_transaction);
                self.spec = Some(*spec);
                if crr {
                    // crr connects once per transaction: to a listener of its own, not through
                    // the hello and cookie routing of the main port.
                    let local = self.stream.local_addr().map_err(|e| e.to_string())?;
                    let listener = TcpListener::bind(SocketAddr::new(local.ip(), 0))
                        .map_err(|e| format!("cannot open the crr listener: {e}"))?;
                    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
                    self.session.admit(now, &cookie, self.concurrent, host_info(), Some(port));
                    self.streams.push(DataStream {
                        id: 1,
                        flow: Flow::Up,
                        role: Role::Receiver,
                        socket: DataSocket::CrrListener(listener),
                    });
                    self.data_rx = None;
                    self.ready_at = Some(now);
                    self.session.streams_connected(now);
                } else {
                    self.session.admit(now, &cookie, self.concurrent, host_info(), None);
                }
            }
            ServerEvent::Start => {
                let spec = self.spec.clone().ok_or("start before a request")?;
                let cfg = DataPlaneConfig { spec: spec.clone(), endpoint: Endpoint::Server, cpu: spec.server_cpu };
                self.meter = Some(CpuMeter::start());
                if let Some((pct, threads)) = spec.server_load {
                    self.load = Some(crate::load::BackgroundLoad::start(pct, threads));
                }
                if let Some((meter, mark)) = self.idle.as_mut() {
                    *mark = Some(meter.mark());
                }
                let streams = std::mem::take(&mut self.streams);
                // The clock started when `ready` went out: the client cannot send before that,
                // so a late `start` here (a busy CPU) never shortens the receiver's time.
                let started = self.ready_at.unwrap_or(now);
                self.plane = Some(
                    DataPlane::start(cfg, streams, None, started).map_err(|e| format!("cannot start workers: {e}"))?,
                );
            }
            ServerEvent::PeerSenderDone(totals) => {
                if let Some(p) = &self.plane {
                    p.peer_senders_done(&totals, self.udp_grace());
                }
                self.peer_done_at = Some(now);
            }
            ServerEvent::StopRequested(reason) => {
                self.error.get_or_insert(format!("stopped by the client: {reason}"));
                match &self.plane {
                    Some(p) => p.stop_senders(),
                    None => return Err(format!("stopped by the client: {reason}")),
                }
            }
        }
        Ok(())
    }

    /// Takes data connections routed here by cookie; says `ready` when all have arrived.
    fn collect_streams(&mut self) -> Result<(), String> {
        let (Some(rx), Some(spec)) = (&self.data_rx, &self.spec) else {
            return Ok(());
        };
        let expected = spec.total_streams() as usize;
        let mut all_in = false;
        while let Ok(conn) = rx.try_recv() {
            let id = match &conn {
                DataConn::Tcp(id, _) | DataConn::Udp(id, _) => *id,
            };
            let flow = spec
                .flow_of(id)
                .ok_or_else(|| format!("data connection for stream {id}, which the test does not have"))?;
            let duplicate = self.streams.iter().any(|s| s.id == id);
            let role = if flow == Flow::Up { Role::Receiver } else { Role::Sender };
            let socket = match conn {
                // Setup datagrams are repeated until `ready`: extra copies are expected.
                DataConn::Udp(..) if duplicate => continue,
                DataConn::Tcp(..) if duplicate => return Err(format!("two data connections for stream {id}")),
                DataConn::Tcp(_, socket) => {
                    post_connect(&socket, spec, role).map_err(|e| format!("{}: {}", e.flag, e.message))?;
                    DataSocket::Tcp(socket)
                }
                DataConn::Udp(_, peer) => {
                    let local = self.stream.local_addr().map_err(|e| e.to_string())?;
                    let socket = bind_udp(SocketAddr::new(self.cfg.bind.ip(), local.port()))
                        .and_then(|s| s.connect(peer).map(|_| s))
                        .map_err(|e| format!("cannot open UDP stream {id} to {peer}: {e}"))?;
                    crate::tcp_setup::size_udp_buffers(&socket);
                    DataSocket::Udp(socket)
                }
            };
            self.streams.push(DataStream { id, flow, role, socket });
            if self.streams.len() == expected {
                let now = Instant::now();
                self.ready_at = Some(now);
                self.session.streams_connected(now);
                all_in = true;
            }
        }
        if all_in {
            // No more data streams for this test: late copies of UDP setup datagrams must not
            // open a second socket for a stream (it would take the stream's traffic).
            self.data_rx = None;
            // Out at once: this end's clock started with `ready`.
            self.flush()?;
        }
        Ok(())
    }

    /// Closes the control connection gently: our side first, then whatever the client still
    /// sends is read until it closes. Closing with unread bytes would send a reset, and a
    /// reset makes the client's kernel drop the results it has not read yet.
    fn linger(&mut self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Write);
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut buf = [0u8; 4096];
        let _ = self.stream.set_read_timeout(Some(Duration::from_millis(100)));
        while Instant::now() < deadline {
            match self.stream.read(&mut buf) {
                Ok(0) => return,
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
                    ) => {}
                Err(_) => return,
            }
        }
    }

    /// Sends the results (with the error, if any) unless the session already ended.
    fn finish(&mut self, error: Option<String>) {
        if let Some(e) = error {
            self.error.get_or_insert(e);
        }
        let now = Instant::now();
        match self.plane.take() {
            Some(plane) => {
                if self.error.is_some() {
                    plane.abort();
                }
                let records = plane.join();
                let mut cpu = self.meter.map(|m| m.finish()).unwrap_or_default();
                cpu.background_load_pct = self.load.take().map(|l| l.finish());
                cpu.idle_pct = self.idle.take().and_then(|(meter, mark)| mark.map(|m| meter.idle_since(m)));
                self.session.finish(now, records.clone(), cpu, self.error.clone());
                let _ = self.flush();
                self.records_for_log = records;
            }
            None => {
                if let Some(e) = &self.error {
                    self.session.error(now, e);
                }
                let _ = self.flush();
            }
        }
    }
}
