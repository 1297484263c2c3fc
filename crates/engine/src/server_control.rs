//! The seam between a control protocol's server side and the server's one driver
//! (crate::server_session's `SessionDriver`), the mirror of the client's (crate::control).
//!
//! A protocol's server session is sans-IO (bytes in, bytes out, events, timeouts) behind
//! [`ServerControl`]. Its events are protocol-neutral: "the client asks for this test", "start
//! the workers", "the client's senders are done with these totals", "stop this end's senders",
//! "the client says the test is over: settle and report". The driver runs any such session over
//! the control connection: it admits the test under the server's limits (crate::admission),
//! takes the test's data streams as they are routed to it, runs the workers (crate::dataplane)
//! with the protocol's datagram format, and hands the session this end's records to report.
//!
//! netchar's own protocol ([`NativeServer`]) is the first implementation, iperf3's
//! (crate::peers::iperf3) the second.
//!
//! Protocols without a control connection of their own stand on the same seam through a few
//! additive hooks (default methods, so a session with a control connection needs none):
//! - a session whose "control connection" is the test's own data stream (iperf2's TCP test,
//!   whose header opens the stream it is written on) reads its request from the first bytes,
//!   then hands the connection to the workers ([`ServerControlEvent::ControlIsData`]);
//! - a session opened by a first datagram (iperf2's UDP test), whose link carries that source's
//!   datagrams (crate::server_session::DatagramLink), counts them itself
//!   ([`ServerControl::measures_itself`]) and adds its record
//!   ([`ServerControl::complete_records`]);
//! - sessions of one client address that are one test under admission (iperf2's `-P`
//!   connections and UDP sources) share it through [`TestsByAddress`];
//! - a session that sends on a stream it opens itself (iperf2's `-d`/`-r` dial-back, netio's
//!   UDP S2C phase) asks the driver for it ([`ServerControlEvent::OwnStream`]): the driver
//!   runs it on a sender apart from the session's thread and gives its record back
//!   ([`ServerControl::own_stream_done`]); nc_test's slave runs its lock-step exchange so.
//!
//! The peers' sessions keep where they stand in a [`SessionPhase`], which the seam's provided
//! `finish`, `fail`, `is_running` and `is_done` read and end ([`ServerControl::phase`]).
//!
//! netio's sessions (crate::peers::netio_server) and nc_test's (crate::peers::nc_test) measure
//! themselves as well: netio's commands and TCP data alternate on one connection, nc_test's
//! buffers go in lock step on its data port.

use crate::admission::{Admitted, DataConn, Limits, Refusal, Registry, Request};
use crate::dataplane::{DatagramFormatKind, LockStepSlot};
use netchar_model::{CpuUsage, Evidence, HostIdentity, HostInfo, StreamRecord, StreamTotal, TestSpec};
use netchar_wire::session::{ServerEvent, ServerSession};
use netchar_wire::ProtocolError;
use std::cell::Cell;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Instant;

/// What a session asks of the driver.
pub enum ServerControlEvent {
    /// The client asks for this test: admit it ([`ServerControl::admitted`]) or turn it away
    /// ([`ServerControl::turned_away`]).
    Requested(Box<ServerRequest>),
    /// The client's request was refused by the protocol itself (the session has answered
    /// it); the reason is for the log.
    Refused(String),
    /// Start the workers: the clocks start.
    Start,
    /// The client's senders finished with these exact totals: the receivers settle on them.
    PeerSendersDone(Vec<StreamTotal>),
    /// Stop this end's senders now; with a reason, the client asked the test to stop early.
    StopSenders(Option<String>),
    /// The client says the test is over: settle the receivers on the totals given (if any),
    /// stop the workers and report ([`ServerControl::finish`]).
    Settle,
    /// The test ends now, on this end's own timer: every worker stops, keeping what it
    /// counted, and the session reports ([`ServerControl::finish`]).
    EndWorkers,
    /// The client ended the session; the reason is the test's error.
    Ended(String),
    /// The control connection is the test's data stream 1 from now on (iperf2's TCP test): the
    /// driver hands it to the workers and reads it no more. Only for a session served over a
    /// TCP connection (crate::server_session::SessionDriver::serve_data_connection).
    ControlIsData,
    /// Open a stream of this end's own and send on it, on a worker apart from the test's
    /// (iperf2's `-d`/`-r` dial-back, netio's UDP S2C phase): the session's thread keeps
    /// serving its peer meanwhile, and learns the stream's record at its end
    /// ([`ServerControl::own_stream_done`]). One at a time.
    OwnStream(Box<OwnStream>),
}

/// A sending stream a session opens itself ([`ServerControlEvent::OwnStream`]).
pub struct OwnStream {
    /// The stream's id in the test's records.
    pub id: u32,
    /// Where it goes.
    pub target: OwnTarget,
    /// What its sender runs (one stream, this end sending), under the server's limits.
    pub run: TestSpec,
    /// Its UDP datagrams' format.
    pub datagrams: DatagramFormatKind,
    /// What it is for, as its errors name it ("the -d/-r test").
    pub purpose: &'static str,
    /// A stream whose every buffer is a transaction of the protocol's machine (nc_test's
    /// slave): the sender runs that machine (crate::dataplane::LockStep), which bounds each of
    /// its waits itself, rather than `run`'s pace.
    pub lock_step: Option<LockStepSlot>,
}

/// Where an [`OwnStream`] goes.
pub enum OwnTarget {
    /// A TCP connection to `to`, made without blocking the session: a refusal (the client's
    /// listener not up yet) is tried again every 20 ms until `until`; any other error, or
    /// `until` passed, ends the stream with it.
    Connect {
        /// The client's listener.
        to: SocketAddr,
        /// The last moment to try.
        until: Instant,
    },
    /// This UDP socket, connected to the peer (or, for a lock-step stream whose machine names
    /// its peer, the unconnected socket it shares).
    Udp(std::net::UdpSocket),
    /// A connection the session already took (nc_test's master connects to the slave's data
    /// port, which the session polls for it).
    Tcp(std::net::TcpStream),
}

/// A test a client asks for.
pub struct ServerRequest {
    /// The test, as admitted and logged.
    pub spec: TestSpec,
    /// What the workers run, when it differs (iperf3's senders run until the client's
    /// TEST_END, not on a clock of their own).
    pub run: Option<TestSpec>,
    /// The cookie of a running test this one accompanies (latency under load).
    pub companion: Option<[u8; 16]>,
    /// The authenticated user and the key that tags the test's data streams.
    pub auth: Option<(String, [u8; 32])>,
    /// The client's software and version as it told them.
    pub peer_software: Option<String>,
    /// A test whose data streams come to a socket of their own, bound for the test on this
    /// port (0: any) rather than routed from the main port: a listener for TCP, a UDP socket
    /// that takes the first datagram from the client's address for UDP. Its port and
    /// buffers are in the [`Admission`].
    pub own_data_port: Option<u16>,
}

/// What admission granted, for the session to tell its client.
pub struct Admission<'a> {
    /// The test's cookie in the admission registry (netchar's data streams carry it).
    pub cookie: [u8; 16],
    /// Tests running, this one included.
    pub running: u32,
    /// The port of the test's own data socket: a connect-per-transaction test's listener, or
    /// the socket [`ServerRequest::own_data_port`] asked for.
    pub data_port: Option<u16>,
    /// That socket's buffers as the kernel set them (SO_SNDBUF, SO_RCVBUF), when it has one.
    pub data_buffers: Option<(u32, u32)>,
    /// Where the test's data streams must be sent, for a protocol whose listener routes them
    /// itself (iperf3's cookies); netchar's are routed by the admission registry.
    pub route: &'a mpsc::SyncSender<DataConn>,
}

/// A control protocol's server side, sans-IO.
pub trait ServerControl: Send {
    /// The protocol, as the log and results name it.
    fn protocol(&self) -> &'static str;
    /// Feeds bytes read from the control connection.
    fn handle_input(&mut self, now: Instant, bytes: &[u8]) -> Result<(), ProtocolError>;
    /// The client closed the control connection.
    fn handle_eof(&mut self, now: Instant) -> Result<(), ProtocolError>;
    /// Moves queued bytes for the control connection into `out`.
    fn poll_output(&mut self, out: &mut Vec<u8>);
    /// The next thing the driver must do.
    fn poll_event(&mut self) -> Option<ServerControlEvent>;
    /// When [`Self::handle_timeout`] must be called next, if ever.
    fn poll_timeout(&self) -> Option<Instant>;
    /// Keepalives, silence, phase deadlines.
    fn handle_timeout(&mut self, now: Instant) -> Result<(), ProtocolError>;
    /// The test asked for was admitted.
    fn admitted(&mut self, now: Instant, admission: &Admission<'_>);
    /// The test asked for was turned away.
    fn turned_away(&mut self, now: Instant, why: &Refusal);
    /// Every data stream of the test is in.
    fn streams_connected(&mut self, now: Instant);
    /// The answer to a UDP stream's first datagram, if the protocol has one (iperf3's).
    fn udp_answer(&self, _hello: &[u8]) -> Option<Vec<u8>> {
        None
    }
    /// The test's UDP datagram format.
    fn datagrams(&self) -> DatagramFormatKind;
    /// This end's senders finished with these exact totals (a session that measures itself,
    /// or whose client never asks for them, has nothing to do with them).
    fn local_senders_done(&mut self, _now: Instant, _totals: Vec<StreamTotal>) {}
    /// This end's own stream ([`ServerControlEvent::OwnStream`]) is over: its record, timed
    /// from its sender's start, and why it ended early or never ran. Comes before
    /// [`Self::complete_records`] when the test ends while it runs.
    fn own_stream_done(&mut self, _now: Instant, _record: StreamRecord, _error: Option<String>) {}
    /// Every worker of the test is done (for a test that ends with its workers): a session
    /// with a stream of its own to run after them (iperf2's `-r`) asks for it now, and the
    /// test ends with that stream.
    fn workers_done(&mut self, _now: Instant) {}
    /// Whether the test ends when this end's workers all end (netchar's) rather than when
    /// the client says so ([`ServerControlEvent::Settle`], iperf3's).
    fn ends_with_workers(&self) -> bool {
        true
    }
    /// Whether the session sends this end's counters and settings with its figures (netchar's
    /// own; a peer protocol has nowhere to put them): the driver then takes them around the
    /// workers and gives them to [`Self::evidence`] before [`Self::finish`].
    fn reports_evidence(&self) -> bool {
        false
    }
    /// This end's counters over the test and its settings, for the report that follows.
    fn evidence(&mut self, _evidence: Evidence, _identity: HostIdentity) {}
    /// Where the session stands, for a session that keeps a [`SessionPhase`] (the peers'
    /// sessions without a control connection of their own, which have no figures to send
    /// anywhere): the provided [`Self::finish`], [`Self::fail`], [`Self::is_running`] and
    /// [`Self::is_done`] read and end it. A session without one implements those four.
    fn phase(&self) -> Option<&SessionPhase> {
        None
    }
    /// This end's figures: the session reports them (with the error, if the test failed).
    fn finish(&mut self, _now: Instant, _records: &[StreamRecord], _cpu: CpuUsage, _error: Option<String>) {
        if let Some(phase) = self.phase() {
            phase.set(Phase::Done);
        }
    }
    /// The server stops the test now (it is shutting down, or the test reached its limit);
    /// [`Self::finish`] or [`Self::fail`] follows with the reason.
    fn stopping(&mut self, _now: Instant) {}
    /// The session ends with this error, with no figures to report.
    fn fail(&mut self, _now: Instant, _message: &str) {
        if let Some(phase) = self.phase() {
            phase.set(Phase::Done);
        }
    }
    /// True while the test runs (data flows).
    fn is_running(&self) -> bool {
        self.phase().is_some_and(|p| p.get() == Phase::Running)
    }
    /// True once the session is over.
    fn is_done(&self) -> bool {
        self.phase().is_some_and(|p| p.get() == Phase::Done)
    }
    /// Sessions of this protocol from one client address that are one test under admission
    /// (iperf2's `-P` connections and UDP sources, which no control connection groups): the
    /// driver admits the session into its address's running test, or admits one for it.
    fn tests_by_address(&self) -> Option<TestsByAddress> {
        None
    }
    /// Whether the session counts the test's data itself, from its own input (iperf2's UDP
    /// datagrams, handed to it as its control input): the driver then reports and logs what
    /// [`Self::complete_records`] gives without ever starting workers.
    fn measures_itself(&self) -> bool {
        false
    }
    /// Completes this end's records before they are reported and logged: bytes the session
    /// read itself before the workers took over (a header), streams it counted itself or ran
    /// beside the driver's workers (iperf2's dial-back), with their data paths. Returns why a
    /// stream of its own ended early, if one did.
    fn complete_records(
        &mut self,
        _now: Instant,
        _records: &mut Vec<StreamRecord>,
        _data_paths: &mut Vec<(u32, SocketAddr)>,
    ) -> Option<String> {
        None
    }
    /// Data the session itself turned away for its test (datagrams and connections from
    /// addresses not the test's), for the log beside what the driver's routing refused.
    fn refused_data(&self) -> u64 {
        0
    }
}

/// Where a session stands ([`SessionPhase`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Phase {
    /// Waiting for the request (iperf2's header or first datagram).
    #[default]
    Request,
    /// Asked for admission.
    Asked,
    /// Admitted: the test runs.
    Running,
    /// Over: nothing more to do or say.
    Done,
}

/// A session's [`Phase`], where the seam's provided methods read and end it
/// ([`ServerControl::phase`]). A cell, so that the one accessor serves both the driver's
/// questions (`&self`) and the ends it gives the session (`finish`, `fail`); a session moves it
/// itself where its protocol decides (admitted, turned away, its own end).
#[derive(Debug, Default)]
pub struct SessionPhase(Cell<Phase>);

impl SessionPhase {
    /// A session at `phase`.
    pub fn new(phase: Phase) -> Self {
        Self(Cell::new(phase))
    }

    /// Where the session is.
    pub fn get(&self) -> Phase {
        self.0.get()
    }

    /// Moves the session to `phase`.
    pub fn set(&self, phase: Phase) {
        self.0.set(phase);
    }
}

/// The tests of sessions that share one client address's test under admission
/// ([`ServerControl::tests_by_address`]): the first session of an address admits the test, the
/// others join it, the last one out frees it. One table per listener.
#[derive(Clone, Default)]
pub struct TestsByAddress(Arc<Mutex<HashMap<IpAddr, AddressTest>>>);

/// An address's admitted test and how many sessions share it.
struct AddressTest {
    admitted: Admitted,
    sessions: usize,
}

impl TestsByAddress {
    /// Joins the running test of the request's address, or admits the request as that
    /// address's test.
    pub(crate) fn join(
        &self,
        registry: &Registry,
        request: Request<'_>,
        limits: &Limits,
        now: Instant,
    ) -> Result<Admitted, Refusal> {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let ip = request.client_ip;
        if let Some(test) = map.get_mut(&ip) {
            test.sessions += 1;
            return Ok(Admitted { cookie: test.admitted.cookie, running: test.admitted.running });
        }
        let admitted = registry.admit(request, limits, now)?;
        map.insert(
            ip,
            AddressTest { admitted: Admitted { cookie: admitted.cookie, running: admitted.running }, sessions: 1 },
        );
        Ok(admitted)
    }

    /// A session of `ip` leaves its address's test; the last one frees it. Returns the data
    /// refused for the test, as [`Registry::release`] does.
    pub(crate) fn leave(&self, registry: &Registry, ip: IpAddr) -> u64 {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let Some(test) = map.get_mut(&ip) else { return 0 };
        test.sessions -= 1;
        if test.sessions > 0 {
            return 0;
        }
        let cookie = test.admitted.cookie;
        map.remove(&ip);
        registry.release(&cookie)
    }
}

/// netchar's own protocol, server side (netchar_wire::session::ServerSession).
pub struct NativeServer {
    session: ServerSession,
}

impl NativeServer {
    /// Wraps a session that read the client's hello.
    pub fn new(session: ServerSession) -> Self {
        Self { session }
    }
}

impl ServerControl for NativeServer {
    fn protocol(&self) -> &'static str {
        netchar_model::NATIVE_PROTOCOL
    }
    fn handle_input(&mut self, now: Instant, bytes: &[u8]) -> Result<(), ProtocolError> {
        self.session.handle_input(now, bytes)
    }
    fn handle_eof(&mut self, now: Instant) -> Result<(), ProtocolError> {
        self.session.handle_eof(now)
    }
    fn poll_output(&mut self, out: &mut Vec<u8>) {
        self.session.poll_output(out);
    }
    fn poll_event(&mut self) -> Option<ServerControlEvent> {
        Some(match self.session.poll_event()? {
            ServerEvent::Requested { spec, companion, auth, client_version } => {
                ServerControlEvent::Requested(Box::new(ServerRequest {
                    spec: *spec,
                    run: None,
                    companion,
                    auth,
                    peer_software: Some(format!("netchar {client_version}")),
                    own_data_port: None,
                }))
            }
            ServerEvent::Start => ServerControlEvent::Start,
            ServerEvent::PeerSenderDone(totals) => ServerControlEvent::PeerSendersDone(totals),
            ServerEvent::StopRequested(reason) => ServerControlEvent::StopSenders(Some(reason)),
        })
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.session.poll_timeout()
    }
    fn handle_timeout(&mut self, now: Instant) -> Result<(), ProtocolError> {
        self.session.handle_timeout(now)
    }
    fn admitted(&mut self, now: Instant, a: &Admission<'_>) {
        self.session.admit(now, &a.cookie, a.running, host_info(), a.data_port);
    }
    fn turned_away(&mut self, now: Instant, why: &Refusal) {
        match why {
            Refusal::Busy { running, max, reason } => self.session.refuse_busy(now, *running, *max, reason.clone()),
            Refusal::Rejected(rejection) => self.session.reject(now, &rejection.reason),
        }
    }
    fn streams_connected(&mut self, now: Instant) {
        self.session.streams_connected(now);
    }
    fn datagrams(&self) -> DatagramFormatKind {
        DatagramFormatKind::Native
    }
    fn local_senders_done(&mut self, now: Instant, totals: Vec<StreamTotal>) {
        self.session.local_senders_done(now, totals);
    }
    fn reports_evidence(&self) -> bool {
        true
    }
    fn evidence(&mut self, evidence: Evidence, identity: HostIdentity) {
        self.session.set_evidence(Some(evidence), Some(identity));
    }
    fn finish(&mut self, now: Instant, records: &[StreamRecord], cpu: CpuUsage, error: Option<String>) {
        self.session.finish(now, records.to_vec(), cpu, error);
    }
    fn fail(&mut self, now: Instant, message: &str) {
        self.session.error(now, message);
    }
    fn is_running(&self) -> bool {
        // The native session runs from admission to its results.
        !self.session.is_done()
    }
    fn is_done(&self) -> bool {
        self.session.is_done()
    }
}

fn host_info() -> HostInfo {
    crate::measure::host_info()
}
