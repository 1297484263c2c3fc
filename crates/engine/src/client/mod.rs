//! The client: connects, runs the control session, opens the data connections, runs this
//! end's workers and assembles the [`TestResult`] from both ends' records.
//!
//! One attempt (the `Driver`) goes through phases, each with its state and its file: opening
//! and setting up the data streams (`setup`), running this end's workers (`workers`), and
//! gathering both ends' figures into the result (`figures`). This file holds the loop that
//! drives them from the control session, the retries around an attempt, and its conclusion.

mod answers;
mod figures;
mod setup;
mod udp_control;
mod workers;

use crate::control::{ClientControl, ControlConnection, ControlEvent};
use crate::control_link::ControlLink;
/// Why a run failed, as kinds a caller matches (crate::error).
pub use crate::error::{ClientError, PortHint, SessionError};
use crate::evidence::EvidenceProbe;
use crate::protocols::{ClientRole, ProtoChoice, Protocol, SessionArgs};
/// The client's settings, defined below the adapters that read them (crate::registry).
pub use crate::registry::{ClientConfig, Family};
use crate::tcp_setup::{connect_control, ConnectFailure, LocalEnd};
use crate::StopFlag;
use figures::Figures;
use netchar_model::{IntervalRecord, TestKind, TestResult, TestSpec};
use setup::StreamSetup;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};
use workers::Workers;

/// The session of `protocol` for `spec`, or why it cannot run the test (before any
/// traffic): whether it runs as a session at all, takes netchar's authentication or iperf2's
/// dial-back is the registry's to say.
pub fn session(
    protocol: Protocol,
    now: Instant,
    spec: &TestSpec,
    cfg: &ClientConfig,
) -> Result<Box<dyn ClientControl>, SessionError> {
    let def = protocol.def();
    let ClientRole::Session(make) = def.client;
    if cfg.auth.is_some() && !def.authenticates {
        return Err(SessionError::OptionRefused {
            flag: "--psk-file",
            message: format!("--proto {}: --psk-file is netchar's authentication; {} has none", def.name, def.name),
        });
    }
    if cfg.dial_back.is_some() && !def.dial_back {
        return Err(SessionError::OptionRefused {
            flag: "-d/-r",
            message: format!("-d/-r: iperf2's dial-back test, not {}'s", def.name),
        });
    }
    crate::protocols::far_end_options(def, spec).refusal.map_or(Ok(()), Err)?;
    crate::protocols::payload_options(def, spec)?;
    make(&SessionArgs { now, spec, cfg })
}

/// The outcome of a run: the figures measured (also when it failed part way), and the error.
#[derive(Debug)]
pub struct ClientRun {
    /// None only when the test never started (no server, refused, busy, bad option).
    pub result: Option<TestResult>,
    /// Set when the run failed; the result's `error` field holds the same line.
    pub error: Option<ClientError>,
    /// The instant the test's clock counts from (the intervals' `start`, `end`): when the
    /// data plane started. None when it never did.
    pub clock_zero: Option<Instant>,
}

impl ClientRun {
    /// A run whose test never started.
    pub fn failed(error: ClientError) -> Self {
        Self { result: None, error: Some(error), clock_zero: None }
    }
}

/// Runs one test. `on_interval` sees this end's interval figures as they complete.
pub fn run(cfg: &ClientConfig, stop: &StopFlag, on_interval: &mut dyn FnMut(&IntervalRecord)) -> ClientRun {
    let addrs = match resolve(cfg) {
        Ok(a) => a,
        Err(e) => return ClientRun::failed(e),
    };
    let busy_until = Instant::now() + cfg.busy_wait;
    loop {
        let mut driver = match Driver::connect(cfg, &addrs) {
            Ok(d) => d,
            // Nothing takes TCP there: an eCos nc_test slave listens on UDP only.
            Err(e @ ClientError::Refused { .. }) if cfg.protocol == ProtoChoice::Auto => {
                let slave =
                    addrs.iter().find(|a| crate::peers::nc_test::slave_answers(**a, Duration::from_millis(600)));
                let e = match slave {
                    Some(a) => ClientError::Unsupported(format!(
                        "nothing takes TCP at {a}, but an eCos nc_test slave answered on UDP port {port}: run \
                         `netchar suite ecos {host} --proto nc-test{p}` for the master's sequence, or add \
                         --proto nc-test to tcp, udp or echo",
                        port = a.port(),
                        host = cfg.host,
                        p = if a.port() == netchar_wire::nc_test::SLAVE_PORT {
                            String::new()
                        } else {
                            format!(" -p {}", a.port())
                        }
                    )),
                    None => e,
                };
                return ClientRun::failed(e);
            }
            Err(e) => return ClientRun::failed(e),
        };
        match driver.run(stop, on_interval) {
            // `--proto auto`: the server speaks a peer protocol; run the test in it if it can.
            Err(ClientError::WrongPeer { protocol: Some(protocol), what })
                if cfg.protocol == ProtoChoice::Auto && !driver.workers.plane_started =>
            {
                let peer = Protocol::answering(protocol);
                let mut switched = ClientConfig { protocol: ProtoChoice::Only(peer), ..cfg.clone() };
                if let Some(block) = cfg.peer_block_bytes {
                    switched.spec.block_bytes = block;
                }
                if let Err(why) = session(peer, Instant::now(), &switched.spec, &switched) {
                    return ClientRun::failed(ClientError::PeerCannotRun { protocol, what, why });
                }
                // Close this connection first: the peer serves one test at a time, and it took
                // netchar's hello for the start of one. An iperf3 server then resets and
                // re-creates its listener, refusing or resetting connections meanwhile: a few
                // tries, apart.
                drop(driver);
                let mut tries = 0;
                loop {
                    std::thread::sleep(Duration::from_millis(250));
                    let run = run(&switched, stop, on_interval);
                    let retry = run.result.is_none()
                        && matches!(run.error, Some(ClientError::Control { .. } | ClientError::Refused { .. }));
                    tries += 1;
                    if !retry || tries == 4 || stop.is_raised() {
                        return run;
                    }
                }
            }
            // A silent peer on a port a peer protocol is known by: say which flag would fit.
            Err(ClientError::SilentPeer { waited, hint: None })
                if cfg.protocol == ProtoChoice::Auto && !driver.workers.plane_started =>
            {
                let hint = crate::protocols::PROTOCOLS.iter().filter(|p| p.default_port == cfg.port).find_map(|p| {
                    p.silent_hint.map(|h| PortHint {
                        port: cfg.port,
                        protocol: p.name,
                        how: h.replace("{host}", &cfg.host),
                    })
                });
                return ClientRun::failed(ClientError::SilentPeer { waited, hint });
            }
            Err(ClientError::Busy { .. }) if Instant::now() < busy_until && !stop.is_raised() => {
                std::thread::sleep(Duration::from_millis(500));
            }
            outcome => return driver.conclude(outcome),
        }
    }
}

/// Runs one test with a session the caller made (a job whose sessions carry what no
/// [`TestSpec`] says: nc_test's request with its sequence number and ports), to the first
/// address of `cfg`'s host; `cfg.spec` is the test as the result names it.
pub fn run_session(
    cfg: &ClientConfig,
    session: Box<dyn ClientControl>,
    stop: &StopFlag,
    on_interval: &mut dyn FnMut(&IntervalRecord),
) -> ClientRun {
    let addr = match resolve(cfg) {
        Ok(addrs) => addrs[0],
        Err(e) => return ClientRun::failed(e),
    };
    let local = LocalEnd::of(cfg.bind.as_ref(), None);
    let control = match session.connection() {
        ControlConnection::None => None,
        ControlConnection::Udp => match udp_control::UdpControl::connect(local.address, addr) {
            Ok(link) => Some(Box::new(link) as Box<dyn ControlLink>),
            Err(source) => {
                let context = format!("cannot open a UDP socket to {addr}");
                return ClientRun::failed(ClientError::Io { context, source });
            }
        },
        ControlConnection::Tcp => match connect_control(addr, cfg.connect_timeout, local) {
            Ok(control) => {
                let _ = control.set_nodelay(true);
                Some(Box::new(control) as Box<dyn ControlLink>)
            }
            Err(ConnectFailure::Option(o)) => {
                return ClientRun::failed(ClientError::SocketOption { flag: o.flag, message: o.message })
            }
            Err(ConnectFailure::Io(e)) => return ClientRun::failed(connect_error(addr, e, cfg.connect_timeout)),
        },
    };
    let mut driver = Driver::new(cfg, addr, cfg.spec.clone(), session, control, Vec::new());
    let outcome = driver.run(stop, on_interval);
    driver.conclude(outcome)
}

/// [`run_session`] over a control link of the caller's (an in-memory peer in the engine's
/// tests), its data streams to `addr`.
#[cfg(test)]
pub(crate) fn run_session_over(
    cfg: &ClientConfig,
    addr: SocketAddr,
    session: Box<dyn ClientControl>,
    link: Box<dyn ControlLink>,
    stop: &StopFlag,
) -> ClientRun {
    let mut driver = Driver::new(cfg, addr, cfg.spec.clone(), session, Some(link), Vec::new());
    let outcome = driver.run(stop, &mut |_| {});
    driver.conclude(outcome)
}

fn resolve(cfg: &ClientConfig) -> Result<Vec<SocketAddr>, ClientError> {
    let err = |message: String| ClientError::Resolve { host: cfg.host.clone(), message };
    let all: Vec<SocketAddr> =
        (cfg.host.as_str(), cfg.port).to_socket_addrs().map_err(|e| err(e.to_string()))?.collect();
    let wanted: Vec<SocketAddr> = all
        .into_iter()
        .filter(|a| match cfg.family {
            Some(Family::V4) => a.is_ipv4(),
            Some(Family::V6) => a.is_ipv6(),
            None => true,
        })
        .collect();
    if wanted.is_empty() {
        return Err(err(format!("no {} address", if cfg.family == Some(Family::V6) { "IPv6" } else { "IPv4" })));
    }
    Ok(wanted)
}

fn connect_error(addr: SocketAddr, e: io::Error, timeout: Duration) -> ClientError {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => ClientError::Refused { addr: addr.to_string(), peer: None },
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => ClientError::Unreachable {
            addr: addr.to_string(),
            secs: timeout.as_secs_f64(),
            hint: netchar_sys::proc_net::conntrack_full_hint().unwrap_or_default(),
        },
        _ => ClientError::Connect { addr: addr.to_string(), source: e },
    }
}

/// [`Driver::run_over`]: one test over `link`, its data streams to `addr`.
#[cfg(test)]
pub(crate) fn run_over(
    cfg: &ClientConfig,
    addr: SocketAddr,
    link: Box<dyn ControlLink>,
    stop: &StopFlag,
    on_interval: &mut dyn FnMut(&IntervalRecord),
) -> ClientRun {
    Driver::run_over(cfg, addr, link, stop, on_interval)
}

/// One attempt: a control connection and, once admitted, the test.
struct Driver<'a> {
    cfg: &'a ClientConfig,
    /// The spec as run: the configured one with defaults that depend on the path filled in.
    spec: TestSpec,
    addr: SocketAddr,
    /// The control connection; `None` for protocols without one (ControlConnection::None).
    control: Option<Box<dyn ControlLink>>,
    /// A session's further control connections (ClientControl::control_connections), numbered
    /// from 1, non-blocking; `None` once the peer closed one.
    more_controls: Vec<Option<TcpStream>>,
    /// The control protocol's sans-IO session (crate::control).
    session: Box<dyn ClientControl>,
    /// The data streams being opened and set up, until the test starts (client::setup).
    setup: StreamSetup,
    /// This end's workers and what is measured around them (client::workers).
    workers: Workers,
    /// Both ends' figures, gathered for the result (client::figures).
    figures: Figures,
    /// The first thing that went wrong once the test ran; the result keeps the figures.
    first_error: Option<ClientError>,
}

impl<'a> Driver<'a> {
    fn connect(cfg: &'a ClientConfig, addrs: &[SocketAddr]) -> Result<Self, ClientError> {
        let mut last = None;
        for &addr in addrs {
            let (spec, session) = Self::prepare(cfg, addr)?;
            let local = LocalEnd::of(cfg.bind.as_ref(), None);
            let control = match session.connection() {
                // Without a control connection the first address is the one: nothing tells
                // whether it answers before the data streams try it.
                ControlConnection::None => None,
                // Nothing to connect: a peer that is not there is the session's silence.
                ControlConnection::Udp => match udp_control::UdpControl::connect(local.address, addr) {
                    Ok(link) => Some(Box::new(link) as Box<dyn ControlLink>),
                    Err(source) => {
                        return Err(ClientError::Io { context: format!("cannot open a UDP socket to {addr}"), source })
                    }
                },
                ControlConnection::Tcp => match connect_control(addr, cfg.connect_timeout, local) {
                    Ok(control) => {
                        let _ = control.set_nodelay(true);
                        // A peer that stops reading fails the write within the phase limit
                        // rather than holding the client (a session that writes data on its
                        // control connection writes for the whole test).
                        let _ = control.set_write_timeout(Some(cfg.timeouts.phase));
                        Some(Box::new(control) as Box<dyn ControlLink>)
                    }
                    Err(ConnectFailure::Option(o)) => {
                        return Err(ClientError::SocketOption { flag: o.flag, message: o.message })
                    }
                    Err(ConnectFailure::Io(e)) => {
                        last = Some(match connect_error(addr, e, cfg.connect_timeout) {
                            // The server asked for is a peer's: name it, not netchar's.
                            ClientError::Refused { addr, .. } if !cfg.protocol.protocol().is_native() => {
                                ClientError::Refused { addr, peer: Some(cfg.protocol.name()) }
                            }
                            other => other,
                        });
                        continue;
                    }
                },
            };
            let mut more_controls = Vec::new();
            if session.connection() == ControlConnection::Tcp {
                for _ in 1..session.control_connections() {
                    let c = connect_control(addr, cfg.connect_timeout, local)
                        .map_err(|f| match f {
                            ConnectFailure::Io(e) => connect_error(addr, e, cfg.connect_timeout),
                            ConnectFailure::Option(o) => ClientError::SocketOption { flag: o.flag, message: o.message },
                        })
                        .and_then(|c| {
                            c.set_nonblocking(true).map_err(|e| connect_error(addr, e, cfg.connect_timeout))?;
                            Ok(c)
                        })?;
                    let _ = c.set_nodelay(true);
                    more_controls.push(Some(c));
                }
            }
            return Ok(Self::new(cfg, addr, spec, session, control, more_controls));
        }
        Err(last.unwrap_or(ClientError::Resolve { host: cfg.host.clone(), message: "no address".into() }))
    }

    /// The spec as it will run at `addr` (the defaults that depend on the path filled in, the
    /// protocol's shape applied), and the protocol's session for it.
    fn prepare(cfg: &ClientConfig, addr: SocketAddr) -> Result<(TestSpec, Box<dyn ClientControl>), ClientError> {
        let protocol = cfg.protocol.protocol();
        let mut spec = cfg.spec.clone();
        if spec.kind == TestKind::Udp && spec.block_bytes == 0 {
            // The protocol's own default, or the largest payload that fits a 1500-byte
            // Ethernet frame.
            spec.block_bytes = protocol.def().udp_payload.unwrap_or(if addr.is_ipv4() { 1472 } else { 1452 });
        }
        if let Some(shape) = protocol.def().shape {
            spec = shape(&spec)?;
        }
        let session = session(protocol, Instant::now(), &spec, cfg)?;
        Ok((spec, session))
    }

    /// One test over a control link of the caller's (the engine's tests use an in-memory
    /// one), its data streams to `addr`: the attempt [`run`] makes, without its retries.
    #[cfg(test)]
    fn run_over(
        cfg: &ClientConfig,
        addr: SocketAddr,
        link: Box<dyn ControlLink>,
        stop: &StopFlag,
        on_interval: &mut dyn FnMut(&IntervalRecord),
    ) -> ClientRun {
        let (spec, session) = match Driver::prepare(cfg, addr) {
            Ok(prepared) => prepared,
            Err(e) => return ClientRun::failed(e),
        };
        let mut driver = Driver::new(cfg, addr, spec, session, Some(link), Vec::new());
        let outcome = driver.run(stop, on_interval);
        driver.conclude(outcome)
    }

    /// The run's outcome: what was measured (also when the test failed once its data plane
    /// had started) and the error.
    fn conclude(mut self, outcome: Result<(), ClientError>) -> ClientRun {
        match outcome {
            Err(e) if self.workers.plane_started => {
                let result = self.assemble(Some(e.to_string()));
                ClientRun { result: Some(result), error: Some(e), clock_zero: self.workers.clock_zero }
            }
            Err(e) => ClientRun::failed(e),
            Ok(()) => {
                let error = self.first_error.take();
                let result = self.assemble(error.as_ref().map(|e| e.to_string()));
                ClientRun { result: Some(result), error, clock_zero: self.workers.clock_zero }
            }
        }
    }

    /// A driver for `session` at `addr`, its control connections open, nothing yet sent.
    fn new(
        cfg: &'a ClientConfig,
        addr: SocketAddr,
        spec: TestSpec,
        session: Box<dyn ClientControl>,
        control: Option<Box<dyn ControlLink>>,
        more_controls: Vec<Option<TcpStream>>,
    ) -> Self {
        Self {
            cfg,
            addr,
            control,
            more_controls,
            session,
            spec,
            setup: StreamSetup::default(),
            // Started before connecting: the counting threads are running when the test is.
            workers: Workers::new(cfg.spec.measure_idle),
            figures: Figures::new(),
            first_error: None,
        }
    }

    fn run(&mut self, stop: &StopFlag, on_interval: &mut dyn FnMut(&IntervalRecord)) -> Result<(), ClientError> {
        let outcome = self.pump(stop, on_interval);
        if let Some(plane) = self.workers.plane.take() {
            plane.abort();
            let joined = plane.join_all();
            self.figures.local_records = joined.records;
            self.figures.latency = joined.latency;
            self.figures.connect_latency = joined.connect_latency;
            self.figures.wakeups = joined.wakeups;
        }
        if let (Some(m), None) = (self.workers.meter, &self.workers.local_cpu) {
            self.workers.local_cpu = Some(m.finish());
        }
        if let Some(p) = &mut self.workers.evidence {
            p.stop();
        }
        while let Ok(iv) = self.workers.live_rx.try_recv() {
            on_interval(&iv);
        }
        match self.unread_answers() {
            Err(wrong_peer) if !matches!(outcome, Err(ClientError::Interrupted)) => Err(wrong_peer.into()),
            _ => outcome,
        }
    }

    /// What the peer sent back on the streams this end only wrote to (protocols without a
    /// control connection): the session names the peer when it was not the protocol's.
    fn unread_answers(&mut self) -> Result<(), netchar_wire::ProtocolError> {
        let failed = matches!(self.first_error, Some(ClientError::Stream(_)));
        for (id, socket) in std::mem::take(&mut self.setup.unread) {
            let (bytes, end) = answers::unread(&socket);
            self.session.unread_answer(id, crate::control::PeerAnswer { bytes: &bytes, end }, failed)?;
        }
        if self.control.is_none() && self.spec.uses_udp() && self.workers.plane_started {
            let outcome = answers::udp_outcome(&self.figures.local_records, self.addr.port());
            if let Some(complaint) = self.session.udp_unanswered(&outcome) {
                let tcp = answers::tcp_identity(self.addr, self.cfg.connect_timeout, self.cfg.timeouts.hello);
                return Err(netchar_wire::ProtocolError::Peer(format!("{complaint}; {tcp}")));
            }
        }
        Ok(())
    }

    fn pump(&mut self, stop: &StopFlag, on_interval: &mut dyn FnMut(&IntervalRecord)) -> Result<(), ClientError> {
        let mut buf = vec![0u8; 64 * 1024];
        let mut interrupted_at: Option<Instant> = None;
        loop {
            self.flush()?;
            while let Some(ev) = self.session.poll_event() {
                self.on_event(ev)?;
            }
            self.flush()?;
            while let Ok(iv) = self.workers.live_rx.try_recv() {
                on_interval(&iv);
            }
            if stop.is_raised() && interrupted_at.is_none() {
                interrupted_at = Some(Instant::now());
                self.first_error.get_or_insert(ClientError::Interrupted);
                if let Some(p) = &self.workers.plane {
                    p.stop_senders();
                }
                self.session.stop(Instant::now(), "interrupted by the user");
                if !self.workers.plane_started {
                    return Err(ClientError::Interrupted);
                }
            }
            if let Some(at) = interrupted_at {
                // Wait for the server's figures briefly; do not let a dead server hold Ctrl-C.
                if at.elapsed() > Duration::from_secs(3) {
                    return Err(ClientError::Interrupted);
                }
            }
            if self.check_plane()? {
                return Ok(());
            }
            // What finished senders made the session say (iperf3's TEST_END, netchar's
            // sender-done) goes out now, not after the next wait for the peer.
            self.flush()?;
            // This end's workers are done (their CPU is measured): the counters after them,
            // once the peer has what they said.
            if let (Some(p), Some(_)) = (&mut self.workers.evidence, &self.workers.local_cpu) {
                p.stop();
            }
            self.send_udp_setup();
            self.read_control(&mut buf)?;
            let now = Instant::now();
            if self.session.poll_timeout().is_some_and(|t| now >= t) {
                self.session.handle_timeout(now)?;
            }
        }
    }

    fn udp_grace(&self) -> Duration {
        Duration::from_secs_f64(self.spec.receive_grace_seconds())
    }

    fn flush(&mut self) -> Result<(), ClientError> {
        let mut out = Vec::new();
        let since = Instant::now();
        loop {
            out.clear();
            self.session.poll_output_on(0, &mut out);
            if let (false, Some(control)) = (out.is_empty(), &mut self.control) {
                control
                    .send_all(&out)
                    .map_err(|source| ClientError::Control { addr: self.addr.to_string(), source })?;
            }
            // A session writing data (ClientControl::writes_data) is written to until its next
            // timeout is due, coming back to the loop every 20 ms for the stop flag.
            let due = self.session.poll_timeout().is_some_and(|t| Instant::now() >= t);
            if out.is_empty() || !self.session.writes_data() || due || since.elapsed() > Duration::from_millis(20) {
                break;
            }
        }
        for (i, control) in self.more_controls.iter_mut().enumerate() {
            out.clear();
            self.session.poll_output_on(i + 1, &mut out);
            if let (false, Some(control)) = (out.is_empty(), control) {
                // Non-blocking: a control message is small, but the socket may still be full.
                write_all_polling(control, &out, self.cfg.timeouts.phase)
                    .map_err(|source| ClientError::Control { addr: self.addr.to_string(), source })?;
            }
        }
        Ok(())
    }

    /// Reads what the further control connections have (without waiting), and their ends.
    fn read_more_controls(&mut self, buf: &mut [u8]) -> Result<(), ClientError> {
        for i in 0..self.more_controls.len() {
            let Some(control) = &mut self.more_controls[i] else { continue };
            let conn = i + 1;
            match control.read(buf) {
                Ok(0) => {
                    self.more_controls[i] = None;
                    self.session.handle_eof_on(conn, Instant::now())?;
                }
                Ok(n) => self.session.handle_input_on(conn, Instant::now(), &buf[..n])?,
                Err(e) if crate::is_retry(&e) || self.session.is_done() => {}
                Err(source) => return Err(ClientError::Control { addr: self.addr.to_string(), source }),
            }
        }
        Ok(())
    }

    fn read_control(&mut self, buf: &mut [u8]) -> Result<(), ClientError> {
        let wait = self
            .session
            .poll_timeout()
            .map_or(Duration::from_millis(50), |t| t.saturating_duration_since(Instant::now()))
            .clamp(Duration::from_millis(1), Duration::from_millis(50));
        // Senders that stop at a time are reported as soon as they do (within a millisecond,
        // not a 50 ms wait later): an iperf3 server times the test until the client's
        // TEST_END, so a late one lowered the rate it reported for this client by 1-3%.
        let wait = match self
            .workers
            .plane
            .as_ref()
            .and_then(|p| p.senders_deadline())
            .filter(|_| !self.workers.senders_reported)
        {
            Some(deadline) => {
                wait.min(deadline.saturating_duration_since(Instant::now())).max(Duration::from_millis(1))
            }
            None => wait,
        };
        self.read_more_controls(buf)?;
        // With further connections the first waits less, so theirs are read soon too.
        let wait = if self.more_controls.is_empty() { wait } else { wait.min(Duration::from_millis(5)) };
        let Some(control) = &mut self.control else {
            // No control connection: wait for the workers or the session's next timeout.
            std::thread::sleep(wait);
            return Ok(());
        };
        if self.session.writes_data() {
            // The peer is reading what the session writes: nothing to wait for.
            return Ok(());
        }
        let read = match control.read_within(buf, wait) {
            // A peer that closes with netchar's hello unread (a netio server: a command it does
            // not know) makes the kernel answer with a reset, not a close, whenever the hello
            // is still in its buffer: before the test, either is a peer that closed without
            // answering, and the session names what did so.
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset && !self.workers.plane_started => Ok(0),
            read => read,
        };
        match read {
            Ok(0) => {
                let plane_started = self.workers.plane_started;
                self.session.handle_eof_on(0, Instant::now()).map_err(|e| {
                    // The protocol minded the close: during the test, the server is gone.
                    if plane_started {
                        ClientError::PeerGone { addr: self.addr.to_string() }
                    } else {
                        e.into()
                    }
                })?;
                Ok(())
            }
            Ok(n) => Ok(self.session.handle_input_on(0, Instant::now(), &buf[..n])?),
            Err(e) if crate::is_retry(&e) => Ok(()),
            Err(e) if self.session.is_done() => {
                let _ = e;
                Ok(())
            }
            Err(source) => Err(ClientError::Control { addr: self.addr.to_string(), source }),
        }
    }

    fn on_event(&mut self, ev: ControlEvent) -> Result<(), ClientError> {
        match ev {
            ControlEvent::Admitted { streams, peer, cookie } => {
                if let (Some(tx), Some(cookie)) = (&self.cfg.cookie_tx, cookie) {
                    let _ = tx.send(cookie);
                }
                self.figures.concurrent_tests = peer.concurrent_tests;
                self.figures.remote_host = peer.host;
                self.figures.peer_software = peer.software;
                // The counters before the test: now, before any data stream exists, so that
                // the snapshot delays no clock (the server's starts when its streams are in).
                let mut probe = EvidenceProbe::open(self.addr.ip());
                probe.start();
                self.workers.evidence = Some(probe);
                self.open_streams(streams)
            }
            ControlEvent::Busy { running, max, reason } => {
                Err(ClientError::Busy { addr: self.addr.to_string(), running, max, reason })
            }
            ControlEvent::Start => {
                for s in self.setup.udp_setup.drain(..) {
                    s.socket
                        .set_nonblocking(false)
                        .map_err(|source| ClientError::Io { context: format!("UDP stream {}", s.id), source })?;
                }
                self.start_plane()
            }
            ControlEvent::PeerSenderDone(totals) => {
                if let Some(p) = &self.workers.plane {
                    p.peer_senders_done(&totals, self.udp_grace());
                }
                self.workers.peer_totals = Some((Instant::now(), totals));
                Ok(())
            }
            ControlEvent::PeerTarget(figures) => {
                self.figures.target = Some(figures);
                Ok(())
            }
            ControlEvent::PeerEvidence { evidence, identity } => {
                self.figures.remote_evidence = Some((evidence.map(|e| *e), identity.map(|i| *i)));
                Ok(())
            }
            ControlEvent::PeerReport { streams, cpu, error } => {
                if let Some(e) = &error {
                    // The server's reason is the cause; a reset on a data stream just before it
                    // (the server closing its sockets) is only the symptom.
                    if matches!(self.first_error, None | Some(ClientError::Stream(_))) {
                        self.first_error = Some(ClientError::Server(e.clone()));
                    }
                    if let Some(p) = &self.workers.plane {
                        p.abort();
                    }
                }
                self.figures.remote = Some((streams, cpu, error));
                Ok(())
            }
            ControlEvent::Measured { streams, note } => {
                // This end's CPU over the session's own transfer, which the workers did not run.
                if let Some(meter) = self.workers.meter {
                    self.workers.local_cpu = Some(meter.finish());
                }
                self.figures.session_records.extend(streams);
                self.figures.note = note;
                Ok(())
            }
            ControlEvent::EndReceivers => {
                if let Some(p) = &self.workers.plane {
                    p.abort();
                }
                Ok(())
            }
            ControlEvent::Listen => {
                // Every address of this host, in the server's family: the server connects to
                // the address it sees this client at.
                let any: SocketAddr =
                    if self.addr.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse().expect("literal addresses parse");
                // With -B, where this client sends from.
                let at = LocalEnd::of(self.cfg.bind.as_ref(), None).address.unwrap_or(any);
                let listener =
                    std::net::TcpListener::bind(at).and_then(|l| l.local_addr().map(|a| (l, a.port()))).map_err(
                        |source| ClientError::Io { context: "cannot open a listener for the dial-back".into(), source },
                    )?;
                self.session.listening(Instant::now(), listener.1);
                self.setup.dial_back = Some(listener.0);
                Ok(())
            }
            ControlEvent::BindUdp { port } => {
                let socket = setup::bind_udp_port(self.addr, self.cfg.bind.as_ref(), port)?;
                let bound = socket
                    .local_addr()
                    .map_err(|source| ClientError::Io { context: "the bound UDP port".into(), source })?;
                self.session.udp_bound(Instant::now(), bound.port());
                self.setup.bound_udp = Some(socket);
                Ok(())
            }
        }
    }
}

/// Writes all of `bytes` to a non-blocking socket, waiting for room up to `limit`.
fn write_all_polling(socket: &mut TcpStream, mut bytes: &[u8], limit: Duration) -> io::Result<()> {
    let until = Instant::now() + limit;
    while !bytes.is_empty() {
        match socket.write(bytes) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "the connection took no bytes")),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if crate::is_retry(&e) && Instant::now() < until => std::thread::sleep(Duration::from_millis(1)),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
