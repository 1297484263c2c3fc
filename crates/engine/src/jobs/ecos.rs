//! `netchar suite ecos` as a job: the eCos nc_test master's sequence, in two modes.
//!
//! - As the master of an eCos `nc_test_slave` ([`run_master`]): nc_test_master's or
//!   nc6_test_master's sequence (the wire's `MasterSuite`), each request of it one client
//!   session (crate::peers::nc_test::NcTestControl, run by the client driver), the stock
//!   master's lines as they come, a result per test.
//! - Over netchar's own protocol ([`run_native`], a `netchar server` or the C responder): the
//!   same shape (netchar_wire::nc_test::SuiteShape), each test of it one netchar test, built
//!   here as a typed [`TestSpec`] ([`EcosTest::spec`]) and run by the caller's runner (the
//!   client driver with the caller's console and step commands). A server that refuses what a
//!   section adds (`--server-load`, `--idle`) has that section skipped with one line, as an
//!   nc_test slave's NAK skips it.
//!
//! The words are nc_test's, named from the slave's (the server's) side: in "send" the server
//! sends (`-R`), in "recv" it receives. Either mode hands its lines, each test's figures and
//! its results to an [`EcosSink`]; the caller prints through its reporters.

use crate::client::{ClientConfig, ClientError, ClientRun, Family};
use crate::peers::nc_test::{master_result, spec_for, MasterConfig, MasterPlan, NcTestControl};
use crate::StopFlag;
use netchar_model::{Direction, EndCondition, RrOptions, TestResult, TestSpec, UdpRate};
use netchar_wire::nc_test::{
    self as wire, Kind, MasterReport, MasterSuite, Pause, Request, Sequence, SuiteShape, SuiteStep, NOTE_PREFIX,
};
use std::io;
use std::time::{Duration, Instant};

/// One test of the sequence, as nc_test names it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EcosTest {
    /// The test, named from the slave's side.
    pub kind: Kind,
    /// Buffers.
    pub nbufs: u32,
    /// Bytes per buffer.
    pub buflen: u32,
    /// The master's pause after a number of buffers (echo tests).
    pub pause: Pause,
}

/// The section a test is in: what the server runs besides it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Section {
    /// No load, master at 100%.
    Plain,
    /// The slave's compute load: the server's background load, in percent (`--server-load`).
    SlaveCompute(u32),
    /// The master loads (pauses): both ends' idle shares (`--idle`).
    MasterIdle,
}

impl EcosTest {
    /// The stock master's line that starts the test (`Start UDP send [640,1024] - no delays`).
    pub fn start_line(&self) -> String {
        wire::start_line(self.kind, self.nbufs, self.buflen, self.pause)
    }

    /// The netchar test of this one in `section`: echo as request/response of the buffer's
    /// size (the pattern's pauses as the rr pauses), one-way tests as `nbufs × buflen` bytes
    /// unpaced, the server sending in "send" (`-R`); the server's load or idle measurement as
    /// the section asks. No interval lines for the one-way tests (a short test would print
    /// nothing but a partial interval).
    pub fn spec(&self, section: Section) -> TestSpec {
        let (n, len) = (u64::from(self.nbufs), u64::from(self.buflen));
        let mut spec = match self.kind {
            Kind::UdpEcho | Kind::TcpEcho => {
                let mut spec = TestSpec::rr_default();
                spec.block_bytes = len;
                spec.rr = Some(RrOptions {
                    udp: self.kind == Kind::UdpEcho,
                    request_bytes: len,
                    response_bytes: len,
                    inflight: 1,
                    timeout_seconds: ECHO_TIMEOUT_SECONDS,
                    busy_poll: false,
                    wakeup_stamps: false,
                    connect_per_transaction: false,
                    pause_every: (self.pause.ticks > 0).then_some(u64::from(self.pause.threshold)),
                    pause_seconds: f64::from(self.pause.ticks) * wire::TICK.as_secs_f64(),
                });
                spec.end = EndCondition::Bytes(n);
                spec
            }
            kind => {
                let mut spec = if kind.is_udp() { TestSpec::udp_default() } else { TestSpec::tcp_default() };
                spec.block_bytes = len;
                spec.end = EndCondition::Bytes(n * len);
                spec.interval_seconds = 0.0;
                if let Some(u) = spec.udp.as_mut() {
                    u.rate = UdpRate::Unlimited;
                }
                spec.direction = if kind.slave_sends() { Direction::Down } else { Direction::Up };
                spec
            }
        };
        match section {
            Section::Plain => {}
            Section::SlaveCompute(pct) => spec.server_load = Some((f64::from(pct), 1)),
            Section::MasterIdle => spec.measure_idle = true,
        }
        spec
    }
}

/// How long an echo waits for each buffer to come back (`netchar echo`'s default `--timeout`).
const ECHO_TIMEOUT_SECONDS: f64 = 1.0;

/// Where an eCos job's output goes as it runs.
pub trait EcosSink {
    /// The test now running, in nc_test's words (`UDP send [640,1024] - no delays`), for a
    /// progress line.
    fn running(&mut self, what: &str);
    /// A line of the sequence: a section heading, a note, a stock master's line.
    fn line(&mut self, line: &str) -> io::Result<()>;
    /// The nc_test master finished a test: its counts, for netchar's figures under its lines.
    fn master_test(&mut self, report: &MasterReport) -> io::Result<()>;
    /// A test over netchar's own protocol ended: the stock master's lines and figures of it
    /// are made from its result ([`Section`] says what the server ran besides).
    fn native_test(&mut self, test: &EcosTest, section: Section, result: &TestResult) -> io::Result<()>;
}

/// Why a native eCos job stopped.
#[derive(Debug, thiserror::Error)]
pub enum EcosError {
    /// The user stopped it.
    #[error("interrupted")]
    Interrupted,
    /// A test failed.
    #[error("{kind}: {error}")]
    Test {
        /// The test, in nc_test's words (`UDP send`).
        kind: &'static str,
        /// Why.
        error: ClientError,
    },
    /// A test ended with neither a result nor an error.
    #[error("{0}: no result")]
    NoResult(&'static str),
    /// The caller's runner could not run a test (its console, its step command).
    #[error("{0}")]
    Runner(Box<dyn std::error::Error + Send + Sync>),
    /// The sink could not write.
    #[error(transparent)]
    Sink(#[from] io::Error),
}

/// What a native eCos job came to: the results of the tests that ran (also after a failed
/// one), and the error that stopped it.
#[derive(Debug, Default)]
pub struct NativeRun {
    /// Every test's result, in order.
    pub results: Vec<TestResult>,
    /// Why the sequence stopped early, if it did.
    pub error: Option<EcosError>,
}

/// Runs one netchar test of the sequence: the caller's client (its host, console, steps).
pub type RunTest<'a> = dyn FnMut(TestSpec) -> Result<ClientRun, Box<dyn std::error::Error + Send + Sync>> + 'a;

/// Over netchar's own protocol: the sections of nc6_test_master in `shape`, each test by
/// `run_test`, its lines and figures to `sink` as it ends.
pub fn run_native(
    shape: &SuiteShape,
    stop: &StopFlag,
    sink: &mut dyn EcosSink,
    run_test: &mut RunTest<'_>,
) -> NativeRun {
    let mut job = NativeJob { sink, run_test, stop, results: Vec::new(), pending: Vec::new() };
    let error = job.sequence(shape).err();
    NativeRun { results: job.results, error }
}

/// The native job as it runs: the results so far, and the section lines held back until the
/// section's first test shows whether the server runs it.
struct NativeJob<'a, 'b> {
    sink: &'a mut dyn EcosSink,
    run_test: &'a mut RunTest<'b>,
    stop: &'a StopFlag,
    results: Vec<TestResult>,
    pending: Vec<String>,
}

/// A test's outcome: it ran, or the server refused what its section asks (the section is
/// skipped, as after a slave's NAK).
enum Ran {
    Done,
    Refused,
}

impl NativeJob<'_, '_> {
    fn sequence(&mut self, shape: &SuiteShape) -> Result<(), EcosError> {
        if shape.quick {
            self.line(&shape.quick_note())?;
        }
        self.line(wire::NO_LOAD_HEADING)?;
        let all = Sequence::Nc6 { tcp: true, udp: true, slave_loads: true, master_loads: true };
        for (kind, nbufs, buflen) in SuiteShape::no_load_tests(all) {
            self.test(EcosTest { kind, nbufs, buflen, pause: Pause::default() }, Section::Plain)?;
        }
        self.pending.push(wire::SLAVE_LOADS_HEADING.into());
        'loads: for &load in shape.loads {
            self.pending.push(wire::slave_load_line(load));
            for kind in [Kind::UdpEcho, Kind::TcpEcho] {
                let t = EcosTest { kind, nbufs: shape.load_bufs, buflen: 1024, pause: Pause::default() };
                if let Ran::Refused = self.test(t, Section::SlaveCompute(load))? {
                    self.skipped("--server-load", "the slave compute load section is skipped")?;
                    break 'loads;
                }
            }
        }
        self.pending.push(wire::MASTER_LOADS_HEADING.into());
        for &pause in shape.pauses {
            for kind in [Kind::UdpEcho, Kind::TcpEcho] {
                let t = EcosTest { kind, nbufs: shape.load_bufs, buflen: 1024, pause };
                if let Ran::Refused = self.test(t, Section::MasterIdle)? {
                    return self.skipped("--idle", "the master load (idle) section is skipped");
                }
            }
        }
        Ok(())
    }

    /// A line now, after the lines held back.
    fn line(&mut self, line: &str) -> Result<(), EcosError> {
        for l in std::mem::take(&mut self.pending) {
            self.sink.line(&l)?;
        }
        Ok(self.sink.line(line)?)
    }

    /// The section's lines held back are dropped: one line says it was skipped.
    fn skipped(&mut self, flag: &str, what: &str) -> Result<(), EcosError> {
        self.pending.clear();
        self.line(&format!("{NOTE_PREFIX}the server refused {flag}: {what}"))
    }

    /// Runs `t`, then hands its result to the sink.
    fn test(&mut self, t: EcosTest, section: Section) -> Result<Ran, EcosError> {
        if self.stop.is_raised() {
            return Err(EcosError::Interrupted);
        }
        let label = t.start_line();
        self.sink.running(label.trim_start_matches("Start "));
        let run = (self.run_test)(t.spec(section)).map_err(EcosError::Runner)?;
        if let (None, Some(e)) = (&run.result, &run.error) {
            if refused_section(e, section) {
                return Ok(Ran::Refused);
            }
        }
        if let Some(error) = run.error {
            return Err(EcosError::Test { kind: t.kind.name(), error });
        }
        let r = run.result.ok_or(EcosError::NoResult(t.kind.name()))?;
        self.line(&label)?;
        self.sink.native_test(&t, section, &r)?;
        self.results.push(r);
        Ok(Ran::Done)
    }
}

/// The server rejected the test for the flag its section adds (the C responder without the
/// platform's load or idle hook names it in its reason, the only place the protocol has for it).
fn refused_section(e: &ClientError, section: Section) -> bool {
    let flag = match section {
        Section::SlaveCompute(_) => "--server-load",
        Section::MasterIdle => "--idle",
        Section::Plain => return false,
    };
    matches!(e, ClientError::Rejected { reason } if reason.contains(flag))
}

/// What a job as nc_test's master came to.
#[derive(Debug, Default)]
pub struct MasterJob {
    /// A result per test the master ran (denied ones included); the last carries the error
    /// that stopped the run, if one did.
    pub results: Vec<TestResult>,
    /// Why the run stopped early, if it did.
    pub error: Option<String>,
}

/// As the master of an eCos nc_test slave: `cfg`'s plan (the stock sequence or one test), the
/// stock master's lines and each test's counts to `sink` as they come. The sequence is the
/// wire's [`MasterSuite`]; each request of it is one client session
/// ([`NcTestControl`], run by the client driver), whose reply and test report go back to the
/// sequence. A sink that cannot write does not stop the test: its first error is returned
/// once the run is over.
pub fn run_master(cfg: &MasterConfig, stop: &StopFlag, sink: &mut dyn EcosSink) -> io::Result<MasterJob> {
    let started_at = crate::measure::now_rfc3339();
    let mut job = MasterLoop { sink, failed: None };
    let mut suite = match &cfg.plan {
        MasterPlan::Suite(seq) => MasterSuite::new(*seq),
        MasterPlan::QuickSuite(seq) => MasterSuite::quick(*seq),
        MasterPlan::Single { kind, nbufs, buflen, pause } => MasterSuite::single(*kind, *nbufs, *buflen, *pause),
    };
    let mut error = None;
    let mut replied_once = false;
    while !stop.is_raised() {
        let mut req = match suite.next_step() {
            SuiteStep::Done => break,
            SuiteStep::Print(l) => {
                job.line(&l);
                continue;
            }
            SuiteStep::Sleep(d) => {
                sleep_unless_stopped(d, stop);
                continue;
            }
            SuiteStep::RunTest(_) => continue,
            SuiteStep::Request(req) => req,
        };
        let kind = req.kind();
        if kind.is_some_and(Kind::is_test) {
            req.slave_port = u32::from(cfg.slave_data_port);
            req.master_port = u32::from(cfg.master_data_port);
        }
        let (session, outcome) = NcTestControl::new(Instant::now(), req, suite.pending_pause(), cfg.slave);
        let run = crate::client::run_session(
            &session_config(cfg, &req, suite.pending_pause()),
            Box::new(session),
            stop,
            &mut |_| {},
        );
        let outcome = std::mem::take(&mut *outcome.lock().unwrap_or_else(|p| p.into_inner()));
        if stop.is_raised() {
            break;
        }
        if let (None, Some(ClientError::Io { .. } | ClientError::SocketOption { .. })) = (&outcome.reply, &run.error) {
            // This end could not ask (no UDP socket): nothing the slave did.
            error = run.error.map(|e| e.to_string());
            break;
        }
        if outcome.reply.is_none() && !replied_once {
            // Nothing answers there: the rest of a sequence would wait 10 s per request.
            for l in suite.reply(None).0 {
                job.line(&l);
            }
            error = Some(run.error.map_or_else(|| "no nc_test slave answered".into(), |e| e.to_string()));
            break;
        }
        replied_once |= outcome.reply.is_some();
        let (lines, step) = suite.reply(outcome.reply.as_deref());
        for l in &lines {
            job.line(l);
        }
        let Some(SuiteStep::RunTest(test)) = step else { continue };
        let report = outcome.report.map(|mut report| {
            // The test's own lines as the stock master prints them after its start line.
            for l in &report.lines {
                job.line(l);
            }
            let mut all = test.report().lines.clone();
            all.append(&mut report.lines);
            report.lines = all;
            job.master_test(&report);
            report
        });
        if report.is_none() {
            // The data channel did not open (a TCP connect refused): the stock master's line.
            let why = run.error.map_or_else(|| "no data channel".into(), |e| e.to_string());
            job.line(&format!("Can't connect to slave: {why}"));
        }
        suite.test_done(report);
    }
    if stop.is_raised() && error.is_none() {
        error = Some("interrupted".into());
    }
    if let Some(e) = job.failed {
        return Err(e);
    }
    let mut results: Vec<TestResult> =
        suite.reports().iter().map(|r| master_result(cfg, r, &started_at, None)).collect();
    if let (Some(e), Some(last)) = (&error, results.last_mut()) {
        // The reason the run stopped is the better account of its last test ("no slave
        // answered" rather than "the slave denied").
        last.error = Some(e.clone());
    }
    Ok(MasterJob { results, error })
}

/// The master's sequence a `--proto` runs: nc_test_master's for `nc-test`, nc6_test_master's
/// for `nc6-test`; none for any other protocol (its tests run as netchar's own or the
/// peer's sessions).
pub fn master_sequence(protocol: crate::protocols::Protocol) -> Option<Sequence> {
    match protocol.def().name {
        "nc-test" => Some(Sequence::Nc),
        "nc6-test" => Some(Sequence::Nc6 { tcp: true, udp: true, slave_loads: true, master_loads: true }),
        _ => None,
    }
}

/// The master job's sink, keeping its first write error.
struct MasterLoop<'a> {
    sink: &'a mut dyn EcosSink,
    failed: Option<io::Error>,
}

impl MasterLoop<'_> {
    fn keep(&mut self, r: io::Result<()>) {
        if let Err(e) = r {
            self.failed.get_or_insert(e);
        }
    }
    fn line(&mut self, l: &str) {
        if let Some(test) = l.strip_prefix("Start ") {
            self.sink.running(test);
        }
        let r = self.sink.line(l);
        self.keep(r);
    }
    fn master_test(&mut self, report: &MasterReport) {
        let r = self.sink.master_test(report);
        self.keep(r);
    }
}

/// The client settings of one request's session: the slave's control address, the test as
/// netchar names it (a control request's is a bare UDP test: nothing of it runs).
fn session_config(cfg: &MasterConfig, req: &Request, pause: Pause) -> ClientConfig {
    let spec = match req.kind().filter(|k| k.is_test()) {
        Some(kind) => spec_for(kind, req.nbufs, req.buflen, pause),
        None => TestSpec::udp_default(),
    };
    let protocol = crate::protocols::Protocol::find("nc-test").expect("nc_test's registry entry");
    ClientConfig {
        family: Some(if cfg.slave.is_ipv6() { Family::V6 } else { Family::V4 }),
        ..ClientConfig::to_server(cfg.slave, spec, crate::protocols::ProtoChoice::Only(protocol))
    }
}

fn sleep_unless_stopped(d: Duration, stop: &StopFlag) {
    let end = Instant::now() + d;
    while !stop.is_raised() {
        let Some(left) = end.checked_duration_since(Instant::now()).filter(|l| !l.is_zero()) else { return };
        std::thread::sleep(left.min(Duration::from_millis(200)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(kind: Kind) -> EcosTest {
        EcosTest { kind, nbufs: 640, buflen: 1024, pause: Pause::default() }
    }

    /// nc_test's words: "send" is the server sending, "recv" the server receiving; the one-way
    /// tests are counted bytes, unpaced; echo is request/response of the buffer, paused as the
    /// pattern says.
    #[test]
    fn each_kind_is_the_netchar_test_of_the_same_direction() {
        let send = t(Kind::UdpSend).spec(Section::Plain);
        assert_eq!((send.direction, send.end, send.block_bytes), (Direction::Down, EndCondition::Bytes(655_360), 1024));
        assert_eq!(send.udp.unwrap().rate, UdpRate::Unlimited);
        assert_eq!(t(Kind::TcpRecv).spec(Section::Plain).direction, Direction::Up);
        let paused = EcosTest { pause: Pause { ticks: 5, threshold: 10 }, ..t(Kind::TcpEcho) };
        let echo = paused.spec(Section::MasterIdle);
        let rr = echo.rr.clone().unwrap();
        assert_eq!((rr.udp, rr.pause_every, rr.request_bytes), (false, Some(10), 1024));
        assert!((rr.pause_seconds - 0.05).abs() < 1e-9, "{}", rr.pause_seconds);
        assert!(echo.measure_idle && echo.end == EndCondition::Bytes(640));
        assert_eq!(t(Kind::UdpEcho).spec(Section::SlaveCompute(20)).server_load, Some((20.0, 1)));
    }

    /// A server without the load or idle hook (the C responder on such a platform) rejects
    /// the test naming the flag: that section is skipped; any other failure is an error.
    #[test]
    fn only_the_sections_flag_refused_skips_the_section() {
        let rejected = |why: &str| ClientError::Rejected { reason: why.into() };
        let no_load =
            rejected("--server-load is not supported by this netchar-responder build (no background-load hook)");
        assert!(refused_section(&no_load, Section::SlaveCompute(10)));
        assert!(!refused_section(&no_load, Section::MasterIdle));
        assert!(refused_section(&rejected("--idle is not supported by this build"), Section::MasterIdle));
        assert!(!refused_section(&rejected("too many streams"), Section::SlaveCompute(0)));
        assert!(!refused_section(&ClientError::Stream("--idle".into()), Section::MasterIdle));
        // The server's own error during a test is no rejection, whatever its words.
        let ended = ClientError::Server("the server rejected the test: --idle".into());
        assert!(!refused_section(&ended, Section::MasterIdle));
    }

    /// A result of `spec` with no streams: what the job needs of a test that ran.
    fn ran(spec: TestSpec) -> ClientRun {
        let info = netchar_model::TestInfo {
            spec,
            remote: "192.0.2.1:5300".into(),
            family: "ipv4".into(),
            title: None,
            client_cpu: None,
            concurrent_tests: 1,
            protocol: netchar_model::NATIVE_PROTOCOL.into(),
            peer_software: None,
            far_end: Default::default(),
            caveats: Vec::new(),
        };
        let header = netchar_model::ResultHeader {
            test: info,
            started_at: String::new(),
            host: Default::default(),
            remote_host: None,
        };
        let result = TestResult::assemble(header, Vec::new(), Default::default(), None);
        ClientRun { result: Some(result), error: None, clock_zero: None }
    }

    #[derive(Default)]
    struct Lines(Vec<String>, usize);

    impl EcosSink for Lines {
        fn running(&mut self, _: &str) {}
        fn line(&mut self, line: &str) -> io::Result<()> {
            self.0.push(line.to_string());
            Ok(())
        }
        fn master_test(&mut self, _: &MasterReport) -> io::Result<()> {
            Ok(())
        }
        fn native_test(&mut self, _: &EcosTest, _: Section, _: &TestResult) -> io::Result<()> {
            self.1 += 1;
            Ok(())
        }
    }

    /// A section whose first test the server refuses is skipped with one line, its held-back
    /// headings dropped; the sequence goes on with the next section.
    #[test]
    fn a_refused_section_is_one_line_and_the_sequence_goes_on() {
        let shape = SuiteShape::new(true);
        let mut sink = Lines::default();
        let mut loads = 0;
        let run = run_native(&shape, &StopFlag::new(), &mut sink, &mut |spec| {
            if spec.server_load.is_some() {
                loads += 1;
                return Ok(ClientRun::failed(ClientError::Rejected { reason: "--server-load: no hook".into() }));
            }
            Ok(ran(spec))
        });
        assert!(run.error.is_none(), "{:?}", run.error);
        let plain =
            SuiteShape::no_load_tests(Sequence::Nc6 { tcp: true, udp: true, slave_loads: true, master_loads: true });
        // The plain tests and the master-load section ran; the slave-load section's first test was refused.
        assert_eq!(loads, 1);
        assert_eq!(run.results.len(), plain.len() + 2 * shape.pauses.len());
        assert_eq!(sink.1, run.results.len());
        let skipped =
            format!("{NOTE_PREFIX}the server refused --server-load: the slave compute load section is skipped");
        assert_eq!(sink.0.iter().filter(|l| **l == skipped).count(), 1);
        assert!(!sink.0.iter().any(|l| l.as_str() == wire::SLAVE_LOADS_HEADING), "its heading is dropped");
        assert!(sink.0.iter().any(|l| l.as_str() == wire::MASTER_LOADS_HEADING));
    }

    /// A failed plain test ends the job with its error, the results so far kept.
    #[test]
    fn a_failed_test_ends_the_job_with_its_error() {
        let mut sink = Lines::default();
        let mut n = 0;
        let run = run_native(&SuiteShape::new(true), &StopFlag::new(), &mut sink, &mut |spec| {
            n += 1;
            if n == 2 {
                return Ok(ClientRun::failed(ClientError::Rejected { reason: "--server-load: no hook".into() }));
            }
            Ok(ran(spec))
        });
        assert!(matches!(run.error, Some(EcosError::Test { kind: "UDP send", .. })), "{:?}", run.error);
        assert_eq!(run.results.len(), 1);
    }

    /// The master job against netchar's own nc_test slave on loopback: the sink sees the
    /// stock master's start line and the test's counts, and the result carries every buffer
    /// the slave logged receiving (its own record is the ground truth).
    #[test]
    fn the_master_job_yields_the_slaves_exact_counts() {
        use crate::peers::nc_test::{MasterPlan, NcTestListener};
        use crate::server::{Server, ServerConfig, ServerLog};
        use netchar_model::{Endpoint, Flow, Role};
        use std::net::SocketAddr;
        #[derive(Default)]
        struct Seen(Vec<String>, Vec<MasterReport>);
        impl EcosSink for Seen {
            fn running(&mut self, _: &str) {}
            fn line(&mut self, line: &str) -> io::Result<()> {
                self.0.push(line.to_string());
                Ok(())
            }
            fn master_test(&mut self, report: &MasterReport) -> io::Result<()> {
                self.1.push(report.clone());
                Ok(())
            }
            fn native_test(&mut self, _: &EcosTest, _: Section, _: &TestResult) -> io::Result<()> {
                Ok(())
            }
        }
        let loopback: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let slave = NcTestListener::bind(loopback, 0).unwrap();
        let (control, data_port) = (crate::peers::PeerListener::local_addr(&slave), slave.data_port());
        let server = Server::bind(ServerConfig::new(loopback)).unwrap().with_peer(Box::new(slave));
        let (stop, logs) = (StopFlag::new(), std::sync::mpsc::channel());
        let serving = {
            let (stop, tx) = (stop.clone(), std::sync::Mutex::new(logs.0));
            std::thread::spawn(move || {
                server.run(&stop, move |e| {
                    let _ = tx.lock().unwrap().send(e);
                })
            })
        };
        let (nbufs, buflen) = (64u32, 1024u32);
        let cfg = MasterConfig {
            slave: control,
            slave_data_port: data_port,
            // Carried in the request only: the slave receives on its own data port in this test.
            master_data_port: wire::DATA_MASTER_PORT,
            plan: MasterPlan::Single { kind: Kind::TcpRecv, nbufs, buflen, pause: Pause::default() },
        };
        let mut seen = Seen::default();
        let job = run_master(&cfg, &StopFlag::new(), &mut seen).unwrap();
        // The slave's first entry: its record of the test (a refusal is logged too, so this
        // never waits for nothing).
        let logged = logs.1.recv().unwrap();
        stop.raise();
        let _ = serving.join();
        assert!(job.error.is_none(), "{:?}", job.error);
        assert!(seen.0.iter().any(|l| l.starts_with("Start TCP recv [64,1024]")), "{:?}", seen.0);
        let [report] = &seen.1[..] else { panic!("one test: {:?}", seen.1) };
        assert_eq!((report.sent, report.results.map(|r| r.nrecvd)), (nbufs, Some(nbufs)));
        let ServerLog::Test(logged) = logged else { panic!("the slave logged {logged:?}") };
        let slave_got: u64 = logged
            .streams
            .iter()
            .filter(|s| s.role == Role::Receiver && s.measured_by == Endpoint::Server)
            .map(|s| s.bytes)
            .sum();
        // Each buffer goes with nc_test's header.
        assert_eq!(slave_got, u64::from(nbufs) * (u64::from(buflen) + wire::DATA_HEADER_LEN as u64));
        let [result] = &job.results[..] else { panic!("one result") };
        let bytes = |by, role| {
            result
                .streams
                .iter()
                .filter(|s| s.flow == Flow::Up && s.measured_by == by && s.role == role)
                .map(|s| s.bytes)
                .sum::<u64>()
        };
        assert_eq!(bytes(Endpoint::Client, Role::Sender), slave_got);
        assert_eq!(bytes(Endpoint::Server, Role::Receiver), slave_got);
    }
}
