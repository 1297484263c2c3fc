//! The one driver of every protocol's server session, netchar's and the peers' (iperf3's,
//! netperf's): from its control connection's thread it admits the test under the server's
//! limits, takes the test's data streams as they are routed to it, runs the workers and hands
//! the session (crate::server_control) this end's records to report.
//!
//! It is its own module, below crate::server and crate::peers, because both start sessions:
//! the listener for netchar's clients, a peer adapter for its protocol's. A peer adapter thus
//! stands on the driver of its sessions, never on the listener that started it.

use crate::admission::{DataConn, Refusal, Rejection, Request, JOB_PROTOCOLS};
use crate::control_link::ControlLink;
use crate::dataplane::{DataPlane, DataPlaneConfig, DataSocket, DataStream, PeerFilter};
use crate::error::ServerSessionError;
use crate::measure::CpuMeter;
use crate::server_control::{Admission, ServerControl, ServerControlEvent, ServerRequest};
use crate::server_shared::{bind_udp, ServerLog, Shared, TestLog};
use crate::tcp_setup::post_connect;
use crate::StopFlag;
use netchar_model::{Endpoint, Flow, Role, StreamRecord, StreamTotal, TestSpec};
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// Data streams queued for a test before its control thread takes them: a test has at most
/// 2 × MAX_STREAMS; more queued means a flood of copies, which are dropped.
const ROUTE_QUEUE: usize = 2 * netchar_model::spec::MAX_STREAMS as usize + 16;

/// One client's test, driven from its control connection's thread: the one driver of every
/// protocol's server session (crate::server_control), netchar's and iperf3's.
pub(crate) struct SessionDriver<'a> {
    /// The control connection.
    link: Box<dyn ControlLink + 'a>,
    peer: SocketAddr,
    session: Box<dyn ServerControl>,
    shared: &'a Shared,
    /// The test must have been asked for by then (`--idle-timeout`, from accept).
    request_deadline: Instant,
    spec: Option<TestSpec>,
    /// What the workers run (the spec, unless the protocol runs it otherwise).
    run: Option<TestSpec>,
    /// The client's software and version, as it told them.
    peer_software: Option<String>,
    user: Option<String>,
    data_paths: Vec<(u32, SocketAddr)>,
    refused_data: u64,
    cookie: Option<[u8; 16]>,
    data_rx: Option<mpsc::Receiver<DataConn>>,
    /// TCP data connections numbered by accept order (iperf3's), held until all are in.
    in_order: Vec<(u64, TcpStream)>,
    /// The test's own data socket (ServerRequest::own_data_port) until its streams are in.
    own: Option<OwnSocket>,
    streams: Vec<DataStream>,
    plane: Option<DataPlane>,
    meter: Option<CpuMeter>,
    concurrent: u32,
    senders_reported: bool,
    /// The client's senders' totals, and when they came.
    peer_totals: Option<(Instant, Vec<StreamTotal>)>,
    error: Option<String>,
    records_for_log: Vec<StreamRecord>,
    /// When every data stream was in: this end's clock for the test.
    ready_at: Option<Instant>,
    /// The session has been given this end's figures.
    finished: bool,
    /// `--server-load`: the running background load.
    load: Option<crate::load::BackgroundLoad>,
    /// This end's counters around the workers, for a session that reports them.
    evidence: Option<crate::evidence::EvidenceProbe>,
    /// `--idle`: the idle counters and the mark taken at the start.
    idle: Option<(crate::load::IdleMeter, Option<crate::load::IdleMark>)>,
    /// `--df`: this end's data sockets, for their path MTU after the test.
    mtu_probes: crate::tcp_setup::PathMtuProbes,
}

/// A test's own data socket (crate::server_control::ServerRequest::own_data_port).
enum OwnSocket {
    /// A listener (TCP tests; crr's, which its responder keeps).
    Tcp(TcpListener),
    /// A UDP socket waiting for the client's first datagram.
    Udp(UdpSocket),
}

impl OwnSocket {
    /// Binds `at` (a TCP listener, or a UDP socket with `udp`), non-blocking, with `window`
    /// as both buffers when given (accepted connections inherit them; UDP otherwise gets
    /// buffers sized for high rates). Returns the port and the buffers the kernel set
    /// (SO_SNDBUF, SO_RCVBUF).
    fn bind(at: SocketAddr, udp: bool, window: Option<u64>) -> io::Result<(Self, u16, (u32, u32))> {
        use socket2::{Domain, Socket, Type};
        let socket = Socket::new(Domain::for_address(at), if udp { Type::DGRAM } else { Type::STREAM }, None)?;
        if !udp {
            socket.set_reuse_address(true)?;
        }
        if at.is_ipv6() {
            socket.set_only_v6(false)?;
        }
        let size = window.map_or(if udp { 8 << 20 } else { 0 }, |w| w.min(i32::MAX as u64) as usize);
        if size > 0 {
            // Best effort, as for every other socket: the kernel caps at its maximum.
            let _ = socket.set_send_buffer_size(size);
            let _ = socket.set_recv_buffer_size(size);
        }
        socket.bind(&at.into())?;
        if !udp {
            socket.listen(128)?;
        }
        socket.set_nonblocking(true)?;
        let port = socket.local_addr()?.as_socket().map_or(0, |a| a.port());
        let buffers = (socket.send_buffer_size()? as u32, socket.recv_buffer_size()? as u32);
        let own = if udp { Self::Udp(socket.into()) } else { Self::Tcp(socket.into()) };
        Ok((own, port, buffers))
    }
}

/// After a client says its test is over, how long receivers may take to read what it says it
/// sent (iperf3's results come before the server's).
const SETTLE_WAIT: Duration = Duration::from_secs(3);

/// Whatever ends a session, a panic in its thread included, its test's slot is freed and its
/// workers are stopped: a slot held for ever would make the server busy for everyone.
impl Drop for SessionDriver<'_> {
    fn drop(&mut self) {
        if let Some(plane) = self.plane.take() {
            plane.abort();
        }
        self.release();
    }
}

impl<'a> SessionDriver<'a> {
    /// Serves one control connection with `session` until the session is over, then logs it.
    pub(crate) fn serve(
        stream: TcpStream,
        peer: SocketAddr,
        session: Box<dyn ServerControl>,
        shared: &'a Shared,
        request_deadline: Instant,
    ) {
        let _ = stream.set_nodelay(true);
        // A client that stops reading must not hold this thread (and its slots) in a write:
        // a write that cannot finish within a phase ends the session.
        let _ = stream.set_write_timeout(Some(shared.cfg.timeouts.phase));
        Self::serve_over(Box::new(stream), peer, session, shared, request_deadline);
    }

    /// [`Self::serve`] over any control link (the engine's tests use an in-memory one);
    /// returns why the session ended early, if it did (the log has it too).
    pub(crate) fn serve_over(
        link: Box<dyn ControlLink + 'a>,
        peer: SocketAddr,
        session: Box<dyn ServerControl>,
        shared: &'a Shared,
        request_deadline: Instant,
    ) -> Option<ServerSessionError> {
        let mut me = SessionDriver {
            link,
            peer,
            session,
            shared,
            request_deadline,
            spec: None,
            run: None,
            peer_software: None,
            user: None,
            data_paths: Vec::new(),
            refused_data: 0,
            cookie: None,
            data_rx: None,
            in_order: Vec::new(),
            own: None,
            streams: Vec::new(),
            plane: None,
            meter: None,
            concurrent: 0,
            senders_reported: false,
            peer_totals: None,
            error: None,
            records_for_log: Vec::new(),
            ready_at: None,
            finished: false,
            load: None,
            evidence: None,
            idle: None,
            mtu_probes: Default::default(),
        };
        let outcome = me.pump(&shared.stop).err();
        me.finish(outcome.as_ref().map(|e| e.to_string()));
        me.release();
        me.link.close_gently();
        let protocol = me.session.protocol();
        match me.spec.take() {
            Some(spec) if me.concurrent > 0 => (shared.log)(ServerLog::Test(Box::new(TestLog {
                protocol,
                peer_software: me.peer_software.clone(),
                peer,
                data_paths: std::mem::take(&mut me.data_paths),
                user: me.user.clone(),
                spec,
                streams: std::mem::take(&mut me.records_for_log),
                concurrent_tests: me.concurrent,
                refused_data: me.refused_data,
                error: me.error.clone(),
            }))),
            _ => {
                if let Some(e) = me.error.clone() {
                    let reason =
                        if protocol == netchar_model::NATIVE_PROTOCOL { e } else { format!("{protocol}: {e}") };
                    (shared.log)(ServerLog::Rejected { peer, reason });
                }
            }
        }
        outcome
    }

    fn pump(&mut self, stop: &StopFlag) -> Result<(), ServerSessionError> {
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
                self.session.stopping(Instant::now());
                return Err(ServerSessionError::ShuttingDown);
            }
            if self.spec.is_none() && Instant::now() >= self.request_deadline {
                let limit = self.shared.cfg.limits.idle_timeout;
                let secs = limit.as_secs_f64();
                self.session.fail(Instant::now(), &format!("no test request within {secs:.0} s of connecting"));
                self.flush()?;
                return Err(ServerSessionError::NoRequest { limit });
            }
            if let (Some(max), Some(at)) = (self.shared.cfg.limits.max_duration, self.ready_at) {
                // -n tests have no duration to check at admission, and a client that ends
                // the test itself may not: they stop at the limit. Timed tests end on their
                // own well before it; the margin covers the UDP grace and a slow start.
                if self.plane.is_some() && at.elapsed() > max + self.udp_grace() + Duration::from_secs(2) {
                    self.session.stopping(Instant::now());
                    return Err(ServerSessionError::MaxDuration { limit: max });
                }
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
                // A data connection that fails while the test runs: the client is gone.
                if let Some(e) = plane.first_error().filter(|_| self.session.is_running()) {
                    return Err(ServerSessionError::Data(e));
                }
                if plane.all_done() && self.session.ends_with_workers() {
                    return Ok(());
                }
                let phase = self.shared.cfg.timeouts.phase + self.udp_grace();
                if self.peer_totals.as_ref().is_some_and(|(t, _)| t.elapsed() > phase)
                    && self.session.ends_with_workers()
                {
                    return Err(ServerSessionError::Data(
                        "the client finished sending but its data did not arrive in time".into(),
                    ));
                }
            }
            self.read_control(&mut buf)?;
            let now = Instant::now();
            if self.session.poll_timeout().is_some_and(|t| now >= t) {
                self.session.handle_timeout(now)?;
            }
        }
    }

    fn udp_grace(&self) -> Duration {
        Duration::from_secs_f64(self.spec.as_ref().map_or(0.0, |s| s.receive_grace_seconds()))
    }

    fn flush(&mut self) -> Result<(), ServerSessionError> {
        let mut out = Vec::new();
        self.session.poll_output(&mut out);
        if out.is_empty() {
            return Ok(());
        }
        self.link.send_all(&out).map_err(ServerSessionError::Control)
    }

    fn read_control(&mut self, buf: &mut [u8]) -> Result<(), ServerSessionError> {
        // While data connections are still arriving, look for them often: `ready` (and the
        // test's start) waits on this loop. While the test runs, a message from the client
        // ends the wait at once and only the data plane's state needs looking at: rarely until
        // near the planned end (quiet_wait), then every 20 ms to see the end soon.
        let wait = if self.data_rx.is_some() {
            Duration::from_millis(2)
        } else {
            let (short, now) = (Duration::from_millis(20), Instant::now());
            match self.plane.as_ref().filter(|_| self.session.is_running()) {
                Some(plane) => {
                    let quiet = crate::dataplane::quiet_wait(plane.planned_end(), now, short);
                    // (The session's own timer, if it has one, is not waited past by more
                    // than the short wait, as before.)
                    let timer = self.session.poll_timeout().map(|t| t.saturating_duration_since(now).max(short));
                    timer.map_or(quiet, |t| quiet.min(t))
                }
                None => short,
            }
        };
        match self.link.read_within(buf, wait) {
            Ok(0) => {
                let running = self.plane.is_some();
                // The protocol minded the close: during the test, the client is gone.
                self.session.handle_eof(Instant::now()).map_err(|e| {
                    if running {
                        ServerSessionError::ClientGone
                    } else {
                        e.into()
                    }
                })
            }
            Ok(n) => Ok(self.session.handle_input(Instant::now(), &buf[..n])?),
            Err(e) if crate::is_retry(&e) => Ok(()),
            Err(e) => Err(ServerSessionError::Control(e)),
        }
    }

    fn on_event(&mut self, ev: ServerControlEvent) -> Result<(), ServerSessionError> {
        let now = Instant::now();
        match ev {
            ServerControlEvent::Requested(req) => self.admit(*req, now)?,
            ServerControlEvent::Refused(reason) => self.error = Some(reason),
            ServerControlEvent::Start => {
                let spec = self
                    .run
                    .clone()
                    .or_else(|| self.spec.clone())
                    .ok_or_else(|| ServerSessionError::Streams("start before a request".into()))?;
                let cfg = DataPlaneConfig {
                    spec: spec.clone(),
                    datagrams: self.session.datagrams(),
                    endpoint: Endpoint::Server,
                    cpu: spec.server_cpu,
                    interleave_senders: false,
                };
                self.meter = Some(CpuMeter::start());
                if let Some((pct, threads)) = spec.server_load {
                    self.load = Some(crate::load::BackgroundLoad::start(pct, threads));
                }
                if let Some((meter, mark)) = self.idle.as_mut() {
                    *mark = Some(meter.mark());
                }
                // Taken when the streams were in, or now (crr, whose clock starts at admission).
                if let Some(p) = &mut self.evidence {
                    p.start();
                }
                let streams = std::mem::take(&mut self.streams);
                self.mtu_probes = crate::tcp_setup::PathMtuProbes::of(&streams, &spec);
                // The clock started when every stream was in: the client cannot send before
                // that, so a late `start` here (a busy CPU) never shortens the receiver's time.
                let started = self.ready_at.unwrap_or(now);
                self.plane = Some(
                    DataPlane::start(cfg, streams, None, started)
                        .map_err(ServerSessionError::io("cannot start workers"))?,
                );
            }
            ServerControlEvent::PeerSendersDone(totals) => {
                if let Some(p) = &self.plane {
                    p.peer_senders_done(&totals, self.udp_grace());
                }
                self.peer_totals = Some((now, totals));
            }
            ServerControlEvent::StopSenders(reason) => {
                if let Some(reason) = reason {
                    self.error.get_or_insert(format!("stopped by the client: {reason}"));
                    if self.plane.is_none() {
                        return Err(ServerSessionError::StoppedByClient(reason));
                    }
                }
                if let Some(p) = &self.plane {
                    p.stop_senders();
                }
            }
            ServerControlEvent::Settle => self.settle(),
            ServerControlEvent::EndWorkers => {
                if let Some(plane) = self.plane.take() {
                    plane.abort();
                    self.report(plane.join());
                }
            }
            ServerControlEvent::Ended(reason) => return Err(ServerSessionError::Ended(reason)),
        }
        Ok(())
    }

    /// Admits the request under the server's limits, or says why not.
    fn admit(&mut self, req: ServerRequest, now: Instant) -> Result<(), ServerSessionError> {
        self.peer_software = req.peer_software;
        let (tx, rx) = mpsc::sync_channel(ROUTE_QUEUE);
        let request = Request {
            spec: &req.spec,
            companion: req.companion,
            client_ip: self.peer.ip(),
            session_key: req.auth.as_ref().map(|a| a.1),
            route: tx.clone(),
        };
        self.user = req.auth.map(|a| a.0);
        // netperf's tests from one client are one job (crate::admission, "Jobs").
        let protocol = self.session.protocol();
        let group = JOB_PROTOCOLS.iter().copied().find(|p| *p == protocol);
        let admitted = match self.shared.registry.admit_in_job(request, group, &self.shared.cfg.limits, now) {
            Ok(a) => a,
            Err(refusal) => {
                self.error = Some(match &refusal {
                    Refusal::Busy { reason: Some(reason), .. } => format!("turned away as busy: {reason}"),
                    Refusal::Busy { running, max, reason: None } => {
                        // Who holds the places, so that the log says why in words (a netperf
                        // client only prints "remote error 16").
                        let holders = self.shared.registry.lock().holders();
                        let joining = if group.is_some() {
                            format!(
                                "; a {protocol} test joins a running job only from the job's address and when \
                                 planned to end by the end of the job's first test"
                            )
                        } else {
                            String::new()
                        };
                        format!(
                            "turned away as busy: the server's {max} place(s) (--max-concurrent) are held by \
                             {holders} ({running} test(s) running){joining}; retry when they end"
                        )
                    }
                    Refusal::Rejected(reason) => format!("refused: {reason}"),
                });
                self.session.turned_away(now, &refusal);
                return Ok(());
            }
        };
        let spec = req.spec;
        self.cookie = Some(admitted.cookie);
        self.data_rx = Some(rx);
        self.concurrent = admitted.running;
        if spec.measure_idle {
            self.idle = Some((crate::load::IdleMeter::start(), None));
        }
        let crr = spec.rr.as_ref().is_some_and(|r| r.connect_per_transaction);
        let (udp, window) = (spec.uses_udp(), spec.tcp.window_bytes);
        self.spec = Some(spec);
        self.run = req.run;
        let (mut data_port, mut data_buffers) = (None, None);
        if crr || req.own_data_port.is_some() {
            // crr connects once per transaction, and some protocols name a data port of the
            // test's own: a socket of its own, not the routing of the main port.
            let local = self.link.local_addr().map_err(ServerSessionError::io("the control connection's address"))?;
            let at = SocketAddr::new(local.ip(), req.own_data_port.unwrap_or(0));
            let (own, port, buffers) = match OwnSocket::bind(at, udp && !crr, window) {
                Ok(bound) => bound,
                Err(e) => {
                    let why = format!("cannot open the test's data socket on {at}: {e}");
                    self.release();
                    self.error = Some(why.clone());
                    self.session.turned_away(now, &Refusal::Rejected(Rejection::other(why)));
                    return Ok(());
                }
            };
            (data_port, data_buffers) = (Some(port), Some(buffers));
            match own {
                // crr's responder waits in accept() itself.
                OwnSocket::Tcp(listener) if crr => {
                    listener.set_nonblocking(false).map_err(ServerSessionError::io("the crr listener"))?;
                    self.streams.push(DataStream {
                        id: 1,
                        flow: Flow::Up,
                        role: Role::Receiver,
                        socket: DataSocket::CrrListener(listener, {
                            let (policy, client) = (self.shared.cfg.data_paths.clone(), self.peer.ip());
                            PeerFilter(Arc::new(move |ip| policy.allows(client, ip)))
                        }),
                    })
                }
                own => self.own = Some(own),
            }
        }
        if self.session.reports_evidence() {
            self.evidence = Some(crate::evidence::EvidenceProbe::open(self.peer.ip()));
        }
        let admission =
            Admission { cookie: admitted.cookie, running: admitted.running, data_port, data_buffers, route: &tx };
        self.session.admitted(now, &admission);
        if crr {
            self.data_rx = None;
            self.ready_at = Some(now);
            self.session.streams_connected(now);
        }
        Ok(())
    }

    /// The client says the test is over (iperf3's results came): the receivers get until
    /// [`SETTLE_WAIT`] to read what the client says it sent, then the workers stop and the
    /// session reports this end's figures.
    fn settle(&mut self) {
        let Some(plane) = self.plane.take() else { return };
        let tcp = self.spec.as_ref().is_some_and(|s| s.kind == netchar_model::TestKind::Tcp);
        let totals = self.peer_totals.as_ref().map(|(_, t)| t.clone());
        let deadline = Instant::now() + SETTLE_WAIT;
        while Instant::now() < deadline {
            let received = plane.received();
            let tcp_in = tcp
                && totals.as_ref().is_some_and(|totals| {
                    totals.iter().all(|t| received.iter().any(|&(id, b)| id == t.id && b >= t.bytes))
                });
            // Without the client's exact totals a TCP receiver has nothing to wait for.
            if plane.all_done() || tcp_in || (tcp && totals.is_none()) {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        plane.abort();
        self.report(plane.join());
    }

    /// Hands the session this end's records and CPU, once.
    fn report(&mut self, mut records: Vec<StreamRecord>) {
        self.mtu_probes.fill(&mut records, Endpoint::Server);
        let mut cpu = self.meter.take().map(|m| m.finish()).unwrap_or_default();
        cpu.background_load_pct = self.load.take().map(|l| l.finish());
        cpu.idle_pct = self.idle.take().and_then(|(meter, mark)| mark.and_then(|m| meter.idle_since(&m)));
        if let Some(probe) = self.evidence.take() {
            let (evidence, identity) = probe.finish(&records, Endpoint::Server);
            self.session.evidence(evidence, identity);
        }
        // The slot goes back before the results: a client that starts its next test as soon
        // as it has them (--repeat, suites, echo patterns) must never find this one counted.
        self.release();
        self.session.finish(Instant::now(), &records, cpu, self.error.clone());
        self.records_for_log = records;
        self.finished = true;
    }

    /// Takes the streams that come to the test's own data socket: connections from the
    /// client's address (others are closed and counted) or, for UDP, the first datagram from
    /// it, only looked at (it is the test's first datagram), to whose sender the socket is then
    /// connected. A datagram from anywhere else is read and dropped; the reflection guard's
    /// source rule applies to it first (crate::reflection).
    fn collect_own(&mut self, spec: &TestSpec, expected: usize) -> Result<(), ServerSessionError> {
        let Some(own) = self.own.take() else { return Ok(()) };
        let (client, policy) = (self.peer.ip(), self.shared.cfg.data_paths.clone());
        match own {
            OwnSocket::Tcp(listener) => {
                while self.streams.len() < expected {
                    match listener.accept() {
                        Ok((socket, from)) if policy.allows(client, from.ip()) => {
                            socket.set_nonblocking(false).map_err(ServerSessionError::io("a data connection"))?;
                            let id = self.streams.len() as u32 + 1;
                            self.add_tcp(id, socket, spec)?;
                        }
                        Ok(_) => self.refused_data += 1,
                        Err(e) if crate::is_retry(&e) => break,
                        Err(e) => return Err(ServerSessionError::io("the test's data listener failed")(e)),
                    }
                }
                if self.streams.len() < expected {
                    self.own = Some(OwnSocket::Tcp(listener));
                }
            }
            OwnSocket::Udp(socket) => {
                let mut first = [0u8; 1];
                loop {
                    let from = match socket.peek_from(&mut first) {
                        Ok((_, from)) => from,
                        Err(e) if crate::is_retry(&e) => {
                            self.own = Some(OwnSocket::Udp(socket));
                            return Ok(());
                        }
                        // ICMP errors of earlier sends surface here: nothing to take.
                        Err(_) => {
                            let _ = socket.recv_from(&mut first);
                            continue;
                        }
                    };
                    if self.shared.guard.check_source(from).is_ok() && policy.allows(client, from.ip()) {
                        let id = self.streams.len() as u32 + 1;
                        let flow = spec.flow_of(id).ok_or_else(|| {
                            ServerSessionError::Streams(format!("UDP stream {id}, which the test does not have"))
                        })?;
                        let role = if flow == Flow::Up { Role::Receiver } else { Role::Sender };
                        crate::tcp_setup::connect_udp(&socket, from, spec)
                            .map_err(|f| f.to_string())
                            .and_then(|_| socket.set_nonblocking(false).map_err(|e| e.to_string()))
                            .map_err(|e| ServerSessionError::Data(format!("UDP stream {id} from {from}: {e}")))?;
                        self.data_paths.push((id, from));
                        self.streams.push(DataStream { id, flow, role, socket: DataSocket::Udp(socket) });
                        return Ok(());
                    }
                    let _ = socket.recv_from(&mut first);
                    self.refused_data += 1;
                }
            }
        }
        Ok(())
    }

    /// Takes the data streams routed here; says so when all have arrived.
    fn collect_streams(&mut self) -> Result<(), ServerSessionError> {
        let (Some(rx), Some(spec)) = (&self.data_rx, self.spec.clone()) else {
            return Ok(());
        };
        let expected = spec.total_streams() as usize;
        let mut arrived = Vec::new();
        while let Ok(conn) = rx.try_recv() {
            arrived.push(conn);
        }
        for conn in arrived {
            let (id, socket) = match conn {
                DataConn::Tcp(id, socket) => {
                    if self.streams.iter().any(|s| s.id == id) {
                        return Err(ServerSessionError::Streams(format!("two data connections for stream {id}")));
                    }
                    (id, socket)
                }
                DataConn::TcpInOrder(order, socket) => {
                    if self.in_order.len() + self.streams.len() >= expected {
                        return Err(ServerSessionError::Streams("more data connections than the test has".into()));
                    }
                    self.in_order.push((order, socket));
                    continue;
                }
                DataConn::Udp(id, from) => {
                    // Setup datagrams are repeated until the test starts: extra copies are
                    // expected.
                    if self.streams.iter().any(|s| s.id == id) {
                        continue;
                    }
                    self.add_udp(id, from, None, &spec)?;
                    continue;
                }
                DataConn::UdpHello(from, hello) => {
                    // Repeated hellos from a stream already in: not a new stream.
                    if self.data_paths.iter().any(|(_, a)| *a == from) {
                        continue;
                    }
                    let id = self.streams.len() as u32 + 1;
                    self.add_udp(id, from, self.session.udp_answer(&hello), &spec)?;
                    continue;
                }
            };
            self.add_tcp(id, socket, &spec)?;
        }
        self.collect_own(&spec, expected)?;
        if !self.in_order.is_empty() && self.in_order.len() + self.streams.len() == expected {
            // Numbered by the listener's accept order, as the client connected them.
            self.in_order.sort_by_key(|(order, _)| *order);
            for (_, socket) in std::mem::take(&mut self.in_order) {
                let id = self.streams.len() as u32 + 1;
                self.add_tcp(id, socket, &spec)?;
            }
        }
        if self.streams.len() == expected {
            // Before this end's clock starts: the snapshot takes a few tenths of a millisecond.
            if let Some(p) = &mut self.evidence {
                p.start();
            }
            let now = Instant::now();
            self.ready_at = Some(now);
            // No more data streams for this test: late copies of UDP setup datagrams must not
            // open a second socket for a stream (it would take the stream's traffic).
            self.data_rx = None;
            self.own = None;
            self.session.streams_connected(now);
            // Out at once: this end's clock started now.
            self.flush()?;
        }
        Ok(())
    }

    fn add_tcp(&mut self, id: u32, socket: TcpStream, spec: &TestSpec) -> Result<(), ServerSessionError> {
        let flow = spec.flow_of(id).ok_or_else(|| {
            ServerSessionError::Streams(format!("data connection for stream {id}, which the test does not have"))
        })?;
        let role = if flow == Flow::Up { Role::Receiver } else { Role::Sender };
        post_connect(&socket, spec, role)
            .map_err(|e| ServerSessionError::Data(format!("stream {id}: {}: {}", e.flag, e.message)))?;
        if let Ok(from) = socket.peer_addr() {
            self.data_paths.push((id, from));
        }
        self.streams.push(DataStream { id, flow, role, socket: DataSocket::Tcp(socket) });
        Ok(())
    }

    /// A UDP socket on the control connection's port connected to `peer` (the kernel gives it
    /// the stream's datagrams before the listener), answering the stream's hello if the
    /// protocol does.
    fn add_udp(
        &mut self,
        id: u32,
        peer: SocketAddr,
        answer: Option<Vec<u8>>,
        spec: &TestSpec,
    ) -> Result<(), ServerSessionError> {
        let flow = spec
            .flow_of(id)
            .ok_or_else(|| ServerSessionError::Streams(format!("UDP stream {id}, which the test does not have")))?;
        let role = if flow == Flow::Up { Role::Receiver } else { Role::Sender };
        let local = self.link.local_addr().map_err(ServerSessionError::io("the control connection's address"))?;
        let socket = bind_udp(SocketAddr::new(self.shared.cfg.bind.ip(), local.port()))
            .map_err(crate::tcp_setup::ConnectFailure::Io)
            .and_then(|s| crate::tcp_setup::connect_udp(&s, peer, spec).map(|_| s))
            .map_err(|e| ServerSessionError::Data(format!("cannot open UDP stream {id} to {peer}: {e}")))?;
        crate::tcp_setup::size_udp_buffers(&socket);
        if let Some(answer) = answer {
            socket.send(&answer).map_err(ServerSessionError::io(format!("UDP stream {id}")))?;
        }
        self.data_paths.push((id, peer));
        self.streams.push(DataStream { id, flow, role, socket: DataSocket::Udp(socket) });
        Ok(())
    }

    /// Frees the test's slot, rate and routes. Called before the results go out: a client
    /// that starts its next test as soon as it has them (--repeat, suites, echo patterns)
    /// must never find the server still busy with this one.
    fn release(&mut self) {
        if let Some(cookie) = self.cookie.take() {
            self.refused_data += self.shared.registry.release(&cookie);
        }
    }

    /// Ends the test: this end's figures to the session (with the error, if any), unless it
    /// has them already.
    fn finish(&mut self, error: Option<String>) {
        if let Some(e) = error {
            self.error.get_or_insert(e);
        }
        if self.finished {
            return;
        }
        match self.plane.take() {
            Some(plane) => {
                if self.error.is_some() || !self.session.ends_with_workers() {
                    plane.abort();
                }
                let records = plane.join();
                self.report(records);
            }
            None => {
                self.release();
                if let Some(e) = self.error.clone() {
                    self.session.fail(Instant::now(), &e);
                }
            }
        }
        let _ = self.flush();
    }
}
