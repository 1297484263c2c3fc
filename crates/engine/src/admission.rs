//! What the server lets in: its limits, the tests it runs, and the routing of data streams to
//! their test. One mutex guards every admission decision, so two requests cannot both take the
//! last slot, and a companion cannot slip past a limit between a check and its registration.
//!
//! The rules, each answered before any traffic:
//! - `--max-concurrent` tests at once; companions (latency under load: its other load flows and
//!   its latency probes) may run beside their own client's test, up to
//!   [`MAX_COMPANIONS_PER_TEST`] per test, and still count toward every other limit;
//! - a protocol that runs one test per control connection (netperf: each of flent's flows is a
//!   netperf process of its own) groups one client's tests into a job, which takes one place
//!   under `--max-concurrent` (see "Jobs" below);
//! - `--max-streams`, `--max-duration` and `--max-rate` (the sum of the running tests' rates);
//! - `--max-starts-per-minute` test starts per source address;
//! - `--max-per-source` connections open at once from one address (those still presenting
//!   their hello or running a control session; a routed data connection leaves the count);
//! - data streams only from the control connection's address or an allowed network, and, on
//!   an authenticated test, only with the stream's tag.
//!
//! # Jobs
//!
//! netperf has no parallel streams: `flent rrul` starts 11 netperf processes (8 TCP flows, 3
//! UDP_RR pings), each a test on its own control connection, and netperf's request carries
//! nothing that ties them together. netchar groups them by what it can see: a test of such a
//! protocol joins a running job of the same protocol when it comes from the job's source
//! address ([`source_key`]) and its planned end (now + its length) is no later than the job's
//! first test's planned end plus [`JOB_END_SLACK`]. Otherwise it opens a job of its own, which
//! needs a free place under `--max-concurrent` as any test does. flent's shape fits: its pings
//! start first and outlast the flows, which start `--delay` later and run `-l`; flows that
//! start together have the same length.
//!
//! What this lets a client do, and what bounds it:
//! - only its own address joins: a second client (another address) is turned away as busy, as
//!   before, for as long as any test of the job runs;
//! - a job cannot be stretched: the end a joining test must fit in is fixed when the job opens,
//!   so a chain of overlapping tests cannot hold the server past its first test's length
//!   (and `--max-duration` bounds that);
//! - a job holds at most [`MAX_TESTS_PER_JOB`] tests and, together, `--max-streams` streams:
//!   no more than one test of that many streams could;
//! - every other limit applies to each test as to any: `--max-duration`, `--max-rate` (summed
//!   over all running tests), `--max-starts-per-minute` (each joining test is a start),
//!   `--max-per-source` and `--max-connections` (each test is a control connection);
//! - a test ended by a count (netperf's `-l -N`) has no planned end: it neither joins a job
//!   nor lets another join its own.

use crate::error::NetworkError;
use netchar_model::{Direction, EndCondition, TestKind, TestSpec, UdpRate};
use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Companions one test may have at once: `rr --under-load` with its most load flows and
/// classes (crate::jobs::under_load::MAX_LOAD_FLOWS, MAX_PROBES) runs the first flow as the test
/// and the other 7 flows and 4 probes beside it.
pub const MAX_COMPANIONS_PER_TEST: u32 = 11;
/// Tests one job may hold at once (module docs, "Jobs"): flent's rrul opens 11 netperf tests,
/// tcp_12up 12 and rrul_be_nflows as many as asked for; 32 covers those, and at one stream
/// each, a job stays within what one test of --max-streams may hold.
pub const MAX_TESTS_PER_JOB: u32 = 32;
/// The protocols whose tests from one client group into jobs: those that run one test per
/// control connection, so that a client's parallel flows arrive as separate tests (netperf).
pub(crate) const JOB_PROTOCOLS: &[&str] = &["netperf"];
/// How much later than its job's first test a joining test may be planned to end: flent starts
/// the flows of one kind together, each a process of its own, which a loaded machine may start
/// a second or so apart.
pub const JOB_END_SLACK: Duration = Duration::from_secs(2);
/// Return-routability challenges the server sends for one test: setup datagrams are repeated
/// every 50 ms during the 10 s setup phase, so 200 per stream is generous, and the cap bounds
/// what a flood of setups for a known cookie can make the server send.
pub const MAX_CHALLENGES_PER_STREAM: u32 = 200;
/// Source addresses whose recent test starts are remembered; beyond it, the oldest go.
const MAX_TRACKED_SOURCES: usize = 4096;

/// The server's limits. `None` means no limit.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Tests admitted at once (companions aside).
    pub max_concurrent: u32,
    /// Longest test, in seconds of sending; `-n` tests are stopped when they reach it.
    pub max_duration: Option<Duration>,
    /// Sum of the rates of the running tests, bit/s. A test without a rate is refused.
    pub max_rate: Option<u64>,
    /// Data streams in one test (both directions together).
    pub max_streams: u32,
    /// Test starts per source address per minute.
    pub max_starts_per_minute: Option<u32>,
    /// Connections open at once from one address.
    pub max_per_source: usize,
    /// Connections being served at once (hello, control sessions): one thread each.
    pub max_connections: usize,
    /// From accept to a complete test request.
    pub idle_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_concurrent: 1,
            max_duration: None,
            max_rate: None,
            max_streams: 2 * netchar_model::spec::MAX_STREAMS,
            max_starts_per_minute: None,
            // Room for the data connections of a -P 128 test arriving faster than a busy
            // server reads their hellos; one address still holds at most a quarter of the total.
            max_per_source: 128,
            max_connections: 512,
            idle_timeout: Duration::from_secs(10),
        }
    }
}

/// Networks data streams may come from besides the control connection's own address.
#[derive(Debug, Clone, Default)]
pub struct DataPathPolicy {
    /// (network, prefix length) pairs.
    pub allowed: Vec<(IpAddr, u8)>,
}

impl DataPathPolicy {
    /// Parses `ADDR/LEN` or a bare address.
    pub fn parse_net(s: &str) -> Result<(IpAddr, u8), NetworkError> {
        let (addr, len) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let ip: IpAddr = addr
            .trim_matches(|c| c == '[' || c == ']')
            .parse()
            .map_err(|_| NetworkError::NotAnAddress { given: s.to_string() })?;
        let max = if ip.is_ipv4() { 32 } else { 128 };
        let len = match len {
            Some(l) => l
                .parse::<u8>()
                .ok()
                .filter(|l| *l <= max)
                .ok_or_else(|| NetworkError::BadPrefix { given: s.to_string(), max })?,
            None => max,
        };
        Ok((ip, len))
    }

    /// True when `data` may carry a test whose control connection came from `control`.
    pub fn allows(&self, control: IpAddr, data: IpAddr) -> bool {
        let data = canonical(data);
        canonical(control) == data || self.allowed.iter().any(|&(net, len)| in_network(data, canonical(net), len))
    }
}

/// The key per-source limits count by: an IPv4 address, or an IPv6 /64 (one host commonly
/// holds a whole /64, and would otherwise get a limit per address).
pub fn source_key(ip: IpAddr) -> IpAddr {
    match canonical(ip) {
        IpAddr::V6(v6) => IpAddr::V6((u128::from(v6) & !((1u128 << 64) - 1)).into()),
        v4 => v4,
    }
}

/// IPv4-mapped IPv6 addresses as IPv4: a dual-stack listener sees IPv4 clients that way.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

pub(crate) fn in_network(ip: IpAddr, net: IpAddr, len: u8) -> bool {
    let (a, n, bits): (u128, u128, u32) = match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => (u32::from(a).into(), u32::from(n).into(), 32),
        (IpAddr::V6(a), IpAddr::V6(n)) => (u128::from(a), u128::from(n), 128),
        _ => return false,
    };
    let len = u32::from(len).min(bits);
    if len == 0 {
        return true;
    }
    let shift = bits - len;
    (a >> shift) == (n >> shift)
}

/// A data stream arriving for a test.
pub enum DataConn {
    /// A TCP data connection for stream `id` (netchar's data hello names it).
    Tcp(u32, TcpStream),
    /// A UDP stream `id` whose address proved it receives there.
    Udp(u32, SocketAddr),
    /// A TCP data connection numbered by its place in the listener's accept order, once all
    /// of the test's are in (iperf3's: the client numbers streams in connect order).
    TcpInOrder(u64, TcpStream),
    /// A UDP stream announced by this first datagram from this address, numbered as it comes
    /// (iperf3's 4-byte hello, answered by the protocol).
    UdpHello(SocketAddr, Vec<u8>),
}

/// One running test, as admission and data routing see it.
pub(crate) struct TestEntry {
    /// Where the test takes its data streams.
    pub(crate) route: mpsc::SyncSender<DataConn>,
    /// The control connection's address: data streams must come from it (or an allowed net).
    pub(crate) client_ip: IpAddr,
    /// Tags this test's data streams (authenticated tests).
    pub(crate) session_key: Option<[u8; 32]>,
    /// The test this one accompanies.
    pub(crate) companion_of: Option<[u8; 16]>,
    /// Companions running beside this test.
    pub(crate) companions: u32,
    /// The rate counted against `--max-rate`.
    pub(crate) rate: u64,
    /// Challenges sent per stream id (bounded by [`MAX_CHALLENGES_PER_STREAM`]).
    pub(crate) challenges: HashMap<u32, u32>,
    /// Data streams refused: from another address, with a bad tag, or an unechoed token.
    pub(crate) refused_data: u64,
    /// Stream ids the test has (1..=streams).
    pub(crate) streams: u32,
    /// The job the test belongs to (module docs, "Jobs").
    pub(crate) job: Option<u64>,
}

/// One client's tests that count as one toward `--max-concurrent` (module docs, "Jobs").
pub(crate) struct Job {
    /// The protocol whose tests it groups.
    group: &'static str,
    /// The client's [`source_key`].
    source: IpAddr,
    /// Tests running in it.
    tests: u32,
    /// Their data streams.
    streams: u32,
    /// A test joins only if it is planned to end by then: fixed when the job opens (its first
    /// test's planned end plus [`JOB_END_SLACK`]); `None` (a test by count): nothing joins.
    ends_by: Option<Instant>,
}

impl TestEntry {
    /// True when the test is not authenticated, or `tag` is its stream's tag.
    pub(crate) fn tag_ok(&self, cookie: &[u8; 16], stream_id: u32, tag: &[u8]) -> bool {
        match &self.session_key {
            None => true,
            Some(k) => netchar_wire::auth::verify_data_tag(k, cookie, stream_id, tag),
        }
    }
}

/// The admission state of the whole server.
#[derive(Default)]
pub(crate) struct AdmissionState {
    pub(crate) tests: HashMap<[u8; 16], TestEntry>,
    /// Tests running, companions included.
    pub(crate) running: u32,
    /// Of which companions.
    pub(crate) companions: u32,
    pub(crate) rate_in_use: u64,
    starts: HashMap<IpAddr, VecDeque<Instant>>,
    /// Running jobs, by id.
    jobs: HashMap<u64, Job>,
    next_job: u64,
    /// Tests running in a job beside its first (each job counts once toward
    /// `--max-concurrent`): the sum over jobs of their tests less one.
    joined: u32,
}

impl AdmissionState {
    /// Who holds the server's places, in words for a log: "a netperf job of 11 tests from
    /// 192.0.2.1", "a test from 192.0.2.7" (companions and joined tests are their parent's).
    pub(crate) fn holders(&self) -> String {
        let mut who: Vec<String> = self
            .jobs
            .values()
            .map(|j| format!("a {} job of {} test(s) from {}", j.group, j.tests, j.source))
            .chain(
                self.tests
                    .values()
                    .filter(|t| t.job.is_none() && t.companion_of.is_none())
                    .map(|t| format!("a test from {}", canonical(t.client_ip))),
            )
            .collect();
        who.sort();
        const LISTED: usize = 4;
        if who.len() > LISTED {
            let more = who.len() - LISTED;
            who.truncate(LISTED);
            who.push(format!("{more} more"));
        }
        if who.is_empty() {
            "nothing (the place was just given back)".into()
        } else {
            who.join(", ")
        }
    }
}

/// Shared by the listener, the UDP setup thread and every control session.
#[derive(Default)]
pub(crate) struct Registry {
    state: Mutex<AdmissionState>,
    /// Tests admitted since start (for `--one-off`).
    pub(crate) admitted_total: AtomicUsize,
    /// Tests running, readable without the lock (for `--one-off`).
    pub(crate) running: AtomicUsize,
}

/// Why a request is refused.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// Retry later: the server is at a limit that frees up.
    Busy {
        /// Tests running.
        running: u32,
        /// Tests admitted at once (`--max-concurrent`).
        max: u32,
        /// The limit reached, when it is not `--max-concurrent`.
        reason: Option<String>,
    },
    /// Never acceptable as asked; the reason names the limit and what to ask instead.
    Rejected(Rejection),
}

/// A request never acceptable as asked: the server limit it exceeds, when it is one, for a
/// caller to decide on (iperf3's server answers each with its own error code), and the line
/// that says why and what to ask instead, for the log and the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// The limit the test exceeds; `None` when the request is wrong otherwise (a companion of
    /// no running test, a data socket the server cannot open, ...).
    pub limit: Option<ServerLimit>,
    /// The whole line.
    pub reason: String,
}

impl Rejection {
    /// A test that exceeds `limit`, as `reason` says.
    pub fn over(limit: ServerLimit, reason: impl Into<String>) -> Self {
        Self { limit: Some(limit), reason: reason.into() }
    }

    /// A request wrong for another reason than a limit.
    pub fn other(reason: impl Into<String>) -> Self {
        Self { limit: None, reason: reason.into() }
    }
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

/// A limit of the server's that a test may exceed as asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServerLimit {
    /// `--max-streams`: data streams in one test.
    Streams,
    /// `--max-duration`: seconds of sending.
    Duration,
    /// `--max-rate`: the total rate, which a test must ask for.
    Rate,
}

impl ServerLimit {
    /// The server's flag that sets it.
    pub fn flag(self) -> &'static str {
        match self {
            Self::Streams => "--max-streams",
            Self::Duration => "--max-duration",
            Self::Rate => "--max-rate",
        }
    }
}

/// What admission granted.
pub(crate) struct Admitted {
    pub(crate) cookie: [u8; 16],
    pub(crate) running: u32,
}

/// A request as admission needs it.
pub(crate) struct Request<'a> {
    pub(crate) spec: &'a TestSpec,
    pub(crate) companion: Option<[u8; 16]>,
    pub(crate) client_ip: IpAddr,
    pub(crate) session_key: Option<[u8; 32]>,
    pub(crate) route: mpsc::SyncSender<DataConn>,
}

impl Registry {
    pub(crate) fn lock(&self) -> MutexGuard<'_, AdmissionState> {
        // A panic while holding the lock leaves plain counters behind: still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Admits `req` or says why not; on success the test is registered under a fresh cookie.
    pub(crate) fn admit(&self, req: Request<'_>, limits: &Limits, now: Instant) -> Result<Admitted, Refusal> {
        self.admit_in_job(req, None, limits, now)
    }

    /// [`Registry::admit`], for a protocol whose tests from one client group into jobs
    /// (`group`: its name; module docs, "Jobs"): the test joins a running job of its client
    /// that it fits in, or opens one.
    pub(crate) fn admit_in_job(
        &self,
        req: Request<'_>,
        group: Option<&'static str>,
        limits: &Limits,
        now: Instant,
    ) -> Result<Admitted, Refusal> {
        let spec = req.spec;
        let streams = spec.total_streams();
        refuse_what_never_fits(spec, req.companion.is_some(), limits)?;
        let rate = requested_rate(spec);
        let mut st = self.lock();
        let companion_of = st.accompanied_test(&req, limits)?;
        // A job of this client's that the test fits in (module docs, "Jobs").
        let planned_end = match spec.end {
            EndCondition::Seconds(s) => {
                Duration::try_from_secs_f64(s + spec.omit_seconds).ok().and_then(|d| now.checked_add(d))
            }
            _ => None,
        };
        let group = group.filter(|_| companion_of.is_none());
        let (joins, full) = match group {
            Some(group) => st.job_to_join(group, source_key(req.client_ip), planned_end, streams, limits),
            None => (None, None),
        };
        let ordinary = st.running.saturating_sub(st.companions).saturating_sub(st.joined);
        if companion_of.is_none() && joins.is_none() && ordinary >= limits.max_concurrent {
            return Err(Refusal::Busy { running: st.running, max: limits.max_concurrent, reason: full });
        }
        if let Some(max) = limits.max_rate {
            st.rate_fits(rate, max, limits)?;
        }
        if let Some(per_minute) = limits.max_starts_per_minute {
            st.count_start(source_key(req.client_ip), per_minute, now, limits)?;
        }
        let mut cookie = [0u8; 16];
        if getrandom::getrandom(&mut cookie).is_err() || st.tests.contains_key(&cookie) {
            return Err(Refusal::Rejected(Rejection::other("the server could not draw a session cookie")));
        }
        if let Some(parent) = companion_of.and_then(|c| st.tests.get_mut(&c)) {
            parent.companions += 1;
        }
        let job = match (joins, group) {
            (Some(id), _) => {
                if let Some(j) = st.jobs.get_mut(&id) {
                    j.tests += 1;
                    j.streams += streams;
                }
                st.joined += 1;
                Some(id)
            }
            (None, Some(group)) => {
                let id = st.next_job;
                st.next_job += 1;
                let ends_by = planned_end.and_then(|e| e.checked_add(JOB_END_SLACK));
                let job = Job { group, source: source_key(req.client_ip), tests: 1, streams, ends_by };
                st.jobs.insert(id, job);
                Some(id)
            }
            (None, None) => None,
        };
        st.tests.insert(
            cookie,
            TestEntry {
                route: req.route,
                client_ip: req.client_ip,
                session_key: req.session_key,
                companion_of,
                companions: 0,
                rate: rate.unwrap_or(0),
                challenges: HashMap::new(),
                refused_data: 0,
                streams,
                job,
            },
        );
        st.running += 1;
        if companion_of.is_some() {
            st.companions += 1;
        }
        st.rate_in_use += rate.unwrap_or(0);
        self.running.store(st.running as usize, Ordering::SeqCst);
        self.admitted_total.fetch_add(1, Ordering::SeqCst);
        Ok(Admitted { cookie, running: st.running })
    }

    /// Ends a test's admission: its slot, rate and routes are free from here on. Returns how
    /// many data streams were refused for it.
    pub(crate) fn release(&self, cookie: &[u8; 16]) -> u64 {
        let mut st = self.lock();
        let Some(entry) = st.tests.remove(cookie) else { return 0 };
        st.running = st.running.saturating_sub(1);
        // Companions that outlive their test become ordinary tests: they count toward
        // --max-concurrent from here on, so a chain of short parents cannot stack them up.
        let mut orphans = 0;
        for t in st.tests.values_mut().filter(|t| t.companion_of == Some(*cookie)) {
            t.companion_of = None;
            orphans += 1;
        }
        st.companions = st.companions.saturating_sub(orphans);
        st.rate_in_use = st.rate_in_use.saturating_sub(entry.rate);
        if let Some(id) = entry.job {
            // The job keeps its one place while any of its tests runs.
            let left = st.jobs.get_mut(&id).map(|j| {
                j.tests = j.tests.saturating_sub(1);
                j.streams = j.streams.saturating_sub(entry.streams);
                j.tests
            });
            match left {
                Some(0) => {
                    st.jobs.remove(&id);
                }
                Some(_) => st.joined = st.joined.saturating_sub(1),
                None => {}
            }
        }
        if let Some(parent) = entry.companion_of {
            st.companions = st.companions.saturating_sub(1);
            if let Some(p) = st.tests.get_mut(&parent) {
                p.companions = p.companions.saturating_sub(1);
            }
        }
        self.running.store(st.running as usize, Ordering::SeqCst);
        entry.refused_data
    }
}

/// Refuses a test no state of the server could admit as asked: more data streams than
/// `--max-streams`, more time than `--max-duration`, or (a `companion`) one that is neither an
/// rr test nor a one-stream load flow.
fn refuse_what_never_fits(spec: &TestSpec, companion: bool, limits: &Limits) -> Result<(), Refusal> {
    let streams = spec.total_streams();
    if streams > limits.max_streams {
        return Err(Refusal::Rejected(Rejection::over(
            ServerLimit::Streams,
            format!(
                "{streams} data streams exceed this server's limit of {} (--max-streams); use fewer -P",
                limits.max_streams
            ),
        )));
    }
    if let (Some(max), EndCondition::Seconds(s)) = (limits.max_duration, spec.end) {
        let total = s + spec.omit_seconds;
        if total > max.as_secs_f64() + 1e-9 {
            let room = max.as_secs_f64() - spec.omit_seconds;
            return Err(Refusal::Rejected(Rejection::over(
                ServerLimit::Duration,
                if room > 0.0 {
                    format!(
                    "{total} s of sending exceeds this server's limit of {} s (--max-duration); ask for -t {room} or less",
                    max.as_secs_f64()
                )
                } else {
                    format!(
                        "-O {} alone reaches this server's limit of {} s (--max-duration); ask for a shorter -O",
                        spec.omit_seconds,
                        max.as_secs_f64()
                    )
                },
            )));
        }
    }
    if companion && (spec.server_load.is_some() || (spec.kind != TestKind::Rr && spec.streams != 1)) {
        // Latency under load runs rr probes and single-stream load flows beside its first
        // flow; nothing else needs a place beside --max-concurrent, and one stream each
        // keeps the companions of a test within a few times one test's streams.
        return Err(Refusal::Rejected(Rejection::other(
            "a companion test must be an rr test or a one-stream load flow, without --server-load",
        )));
    }
    Ok(())
}

/// The steps of [`Registry::admit_in_job`] that read or count the running tests, under the lock.
impl AdmissionState {
    /// The running test that `req` accompanies, when it is a companion: one of its client's
    /// address, itself no companion, with room for one more.
    fn accompanied_test(&self, req: &Request<'_>, limits: &Limits) -> Result<Option<[u8; 16]>, Refusal> {
        let Some(c) = req.companion else { return Ok(None) };
        match self.tests.get(&c) {
            Some(parent)
                if parent.companion_of.is_none() && canonical(parent.client_ip) == canonical(req.client_ip) =>
            {
                if parent.companions >= MAX_COMPANIONS_PER_TEST {
                    return Err(Refusal::Busy {
                        running: self.running,
                        max: limits.max_concurrent,
                        reason: Some(format!(
                            "the test this one accompanies already has {MAX_COMPANIONS_PER_TEST} companion(s), the limit"
                        )),
                    });
                }
                Ok(Some(c))
            }
            _ => Err(Refusal::Rejected(Rejection::other(
                "the companion cookie names no running test of this client's address",
            ))),
        }
    }

    /// The running job of `group` from `source` that a test of `streams` streams planned to end
    /// at `planned_end` joins, if one has room; and, when one it would fit in time is full,
    /// why it cannot join, for the refusal when no place is free either.
    fn job_to_join(
        &self,
        group: &'static str,
        source: IpAddr,
        planned_end: Option<Instant>,
        streams: u32,
        limits: &Limits,
    ) -> (Option<u64>, Option<String>) {
        let mut full = None;
        let fitting = self.jobs.iter().filter(|(_, j)| {
            j.group == group
                && j.source == source
                && matches!((planned_end, j.ends_by), (Some(end), Some(by)) if end <= by)
        });
        for (&id, j) in fitting {
            if j.tests < MAX_TESTS_PER_JOB && j.streams + streams <= limits.max_streams {
                return (Some(id), full);
            }
            full = Some(format!(
                "the {group} job of {} test(s) from {source} this test would join holds the most a job may: \
                 {MAX_TESTS_PER_JOB} tests and {} streams (--max-streams) together",
                j.tests, limits.max_streams
            ));
        }
        (None, full)
    }

    /// Under `--max-rate` (`max`): the test must ask for a rate, no more than `max`, and no
    /// more than the running tests leave free.
    fn rate_fits(&self, rate: Option<u64>, max: u64, limits: &Limits) -> Result<(), Refusal> {
        let Some(rate) = rate else {
            return Err(Refusal::Rejected(Rejection::over(
                ServerLimit::Rate,
                format!(
                "this server admits at most {} in total (--max-rate) and the test asks for no rate; give one with -b",
                netchar_model::units::format_si(max as f64, "bit/s")
            ),
            )));
        };
        if rate > max {
            return Err(Refusal::Rejected(Rejection::over(
                ServerLimit::Rate,
                format!(
                    "{} exceeds this server's limit of {} in total (--max-rate); ask for less with -b",
                    netchar_model::units::format_si(rate as f64, "bit/s"),
                    netchar_model::units::format_si(max as f64, "bit/s")
                ),
            )));
        }
        if self.rate_in_use + rate > max {
            return Err(Refusal::Busy {
                running: self.running,
                max: limits.max_concurrent,
                reason: Some(format!(
                    "{} of the server's {} (--max-rate) are in use by running tests",
                    netchar_model::units::format_si(self.rate_in_use as f64, "bit/s"),
                    netchar_model::units::format_si(max as f64, "bit/s")
                )),
            });
        }
        Ok(())
    }

    /// Counts a test start from `ip` at `now`, or refuses it when `ip` already started
    /// `per_minute` in the last minute (`--max-starts-per-minute`). At most
    /// [`MAX_TRACKED_SOURCES`] sources are tracked.
    fn count_start(&mut self, ip: IpAddr, per_minute: u32, now: Instant, limits: &Limits) -> Result<(), Refusal> {
        if self.starts.len() >= MAX_TRACKED_SOURCES && !self.starts.contains_key(&ip) {
            self.starts
                .retain(|_, q| q.back().is_some_and(|t| now.saturating_duration_since(*t) < Duration::from_secs(60)));
            if self.starts.len() >= MAX_TRACKED_SOURCES {
                // Every tracked source started a test within the minute: forget one.
                if let Some(k) = self.starts.keys().next().copied() {
                    self.starts.remove(&k);
                }
            }
        }
        let running = self.running;
        let q = self.starts.entry(ip).or_default();
        while q.front().is_some_and(|t| now.saturating_duration_since(*t) >= Duration::from_secs(60)) {
            q.pop_front();
        }
        if q.len() >= per_minute as usize {
            let wait = q.front().map_or(60.0, |t| 60.0 - now.saturating_duration_since(*t).as_secs_f64());
            return Err(Refusal::Busy {
                running,
                max: limits.max_concurrent,
                reason: Some(format!(
                    "{per_minute} test starts from {ip} in the last minute, the server's limit (--max-starts-per-minute); retry in {wait:.0} s"
                )),
            });
        }
        q.push_back(now);
        Ok(())
    }
}

/// Requests and responses up to this size count as no rate: rr, crr and echo move one
/// transaction at a time per slot. Larger ones could move bulk data uncounted, so under
/// `--max-rate` they are refused (no rate stated).
const SMALL_TRANSACTION: u64 = 64 * 1024;

/// The bit rate a test asks of the path (both directions), `None` when it asks for no limit.
pub fn requested_rate(spec: &TestSpec) -> Option<u64> {
    let flows = u64::from(spec.direction == Direction::Bidir) + 1;
    let streams = u64::from(spec.streams);
    let per_flow = match spec.kind {
        TestKind::Rr => {
            let r = spec.rr.as_ref()?;
            return (r.request_bytes.max(r.response_bytes) <= SMALL_TRANSACTION).then_some(0);
        }
        TestKind::Udp => {
            let u = spec.udp.as_ref()?;
            let share = if u.per_stream { streams } else { 1 };
            let rate = match u.rate {
                UdpRate::Unlimited => return None,
                UdpRate::BitsPerSecond(b) => b.saturating_mul(share),
                UdpRate::PacketsPerSecond(p) => {
                    p.saturating_mul(spec.block_bytes).saturating_mul(8).saturating_mul(share)
                }
            };
            // Pacing counts datagrams of -l bytes; a --pattern's datagrams may be larger.
            let largest = u.pattern.as_ref().and_then(|p| p.sizes.iter().map(|&(_, s)| s).max()).unwrap_or(0);
            if largest > spec.block_bytes {
                rate.saturating_mul(largest).div_ceil(spec.block_bytes.max(1))
            } else {
                rate
            }
        }
        _ => spec.tcp.rate_bps_per_stream?.saturating_mul(streams),
    };
    Some(per_flow.saturating_mul(flows))
}

/// Connections open per source address, each held by a [`SourceSlot`].
#[derive(Default)]
pub(crate) struct SourceCounts {
    counts: Mutex<HashMap<IpAddr, usize>>,
    pub(crate) total: AtomicUsize,
}

/// One connection's place in [`SourceCounts`]; gives it back when dropped.
pub(crate) struct SourceSlot {
    counts: Arc<SourceCounts>,
    ip: IpAddr,
}

/// Why a connection was turned away at accept.
pub(crate) enum ConnRefusal {
    PerSource(usize),
    Total(usize),
}

impl SourceCounts {
    /// Takes a slot for a connection from `ip`, unless it or the server is at its limit.
    pub(crate) fn take(self: &Arc<Self>, ip: IpAddr, limits: &Limits) -> Result<SourceSlot, ConnRefusal> {
        let ip = source_key(ip);
        let mut m = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        if self.total.load(Ordering::SeqCst) >= limits.max_connections {
            return Err(ConnRefusal::Total(limits.max_connections));
        }
        let n = m.entry(ip).or_insert(0);
        if *n >= limits.max_per_source {
            return Err(ConnRefusal::PerSource(limits.max_per_source));
        }
        *n += 1;
        self.total.fetch_add(1, Ordering::SeqCst);
        Ok(SourceSlot { counts: self.clone(), ip })
    }
}

impl Drop for SourceSlot {
    fn drop(&mut self) {
        let mut m = self.counts.counts.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = m.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.ip);
            }
        }
        self.counts.total.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req<'a>(spec: &'a TestSpec, ip: &str, companion: Option<[u8; 16]>) -> Request<'a> {
        Request { spec, companion, client_ip: ip.parse().unwrap(), session_key: None, route: mpsc::sync_channel(1).0 }
    }

    #[test]
    fn companions_must_accompany_a_test_of_the_same_client_and_are_capped() {
        let reg = Registry::default();
        let limits = Limits::default();
        let spec = TestSpec::tcp_default();
        let rr = TestSpec::rr_default();
        let now = Instant::now();
        let parent = reg.admit(req(&spec, "192.0.2.1", None), &limits, now).ok().unwrap().cookie;
        // Another client cannot use the parent's cookie to get past --max-concurrent.
        let other = reg.admit(req(&rr, "192.0.2.9", Some(parent)), &limits, now).err().unwrap();
        assert!(
            matches!(other, Refusal::Rejected(Rejection { limit: None, ref reason }) if reason.contains("no running test of this client"))
        );
        // rr probes and one-stream load flows accompany (latency under load); a throughput
        // companion of several streams is refused.
        let mut wide = spec.clone();
        wide.streams = 2;
        assert!(matches!(reg.admit(req(&wide, "192.0.2.1", Some(parent)), &limits, now), Err(Refusal::Rejected(_))));
        let first = reg.admit(req(&rr, "192.0.2.1", Some(parent)), &limits, now).ok().unwrap();
        assert_eq!(first.running, 2);
        let flow = reg.admit(req(&spec, "192.0.2.1", Some(parent)), &limits, now).ok().unwrap();
        // The same client gets MAX_COMPANIONS_PER_TEST companions; the next is refused.
        let more: Vec<_> = (2..MAX_COMPANIONS_PER_TEST)
            .map(|_| reg.admit(req(&rr, "192.0.2.1", Some(parent)), &limits, now).ok().unwrap().cookie)
            .collect();
        assert!(matches!(reg.admit(req(&rr, "192.0.2.1", Some(parent)), &limits, now), Err(Refusal::Busy { .. })));
        for c in more.iter().chain([&flow.cookie]) {
            reg.release(c);
        }
        // A companion cannot be the parent of another companion.
        let chained = reg.admit(req(&rr, "192.0.2.1", Some(first.cookie)), &limits, now).err().unwrap();
        assert!(matches!(chained, Refusal::Rejected(_)));
        // Nor admit an ordinary test past the limit.
        assert!(matches!(
            reg.admit(req(&spec, "192.0.2.1", None), &limits, now),
            Err(Refusal::Busy { reason: None, .. })
        ));
        // A companion that outlives its parent becomes an ordinary test: it holds the slot.
        reg.release(&parent);
        assert!(matches!(
            reg.admit(req(&spec, "192.0.2.5", None), &limits, now),
            Err(Refusal::Busy { reason: None, .. })
        ));
        reg.release(&first.cookie);
        let (running, companions) = {
            let st = reg.lock();
            (st.running, st.companions)
        };
        assert_eq!((running, companions), (0, 0));
        assert!(reg.admit(req(&spec, "192.0.2.1", None), &limits, now).is_ok());
    }

    /// A netperf test of `secs` (one stream; UDP_RR is an rr test), as flent runs them.
    fn netperf(kind: TestKind, secs: f64) -> TestSpec {
        let mut spec = if kind == TestKind::Rr { TestSpec::rr_default() } else { TestSpec::tcp_default() };
        spec.end = EndCondition::Seconds(secs);
        spec
    }

    fn in_job(reg: &Registry, spec: &TestSpec, ip: &str, limits: &Limits, now: Instant) -> Result<Admitted, Refusal> {
        reg.admit_in_job(req(spec, ip, None), Some("netperf"), limits, now)
    }

    #[test]
    fn a_clients_netperf_tests_are_one_job_and_a_second_client_is_still_busy() {
        let reg = Registry::default();
        let limits = Limits::default();
        let t0 = Instant::now();
        // flent rrul -l 5: three UDP_RR pings of 15 s, then 5 s later 8 TCP flows of 5 s.
        let ping = netperf(TestKind::Rr, 15.0);
        let pings: Vec<_> =
            (0..3).map(|_| in_job(&reg, &ping, "192.0.2.1", &limits, t0).ok().unwrap().cookie).collect();
        let t5 = t0 + Duration::from_secs(5);
        let flow = netperf(TestKind::Tcp, 5.0);
        let flows: Vec<_> =
            (0..8).map(|_| in_job(&reg, &flow, "192.0.2.1", &limits, t5).ok().unwrap().cookie).collect();
        assert_eq!(reg.lock().running, 11);
        // Another client is turned away as busy, as before, and told who holds the server.
        let other = in_job(&reg, &flow, "192.0.2.2", &limits, t5).err().unwrap();
        assert!(matches!(other, Refusal::Busy { reason: None, running: 11, max: 1 }), "{other:?}");
        assert_eq!(reg.lock().holders(), "a netperf job of 11 test(s) from 192.0.2.1");
        // So is a native test of the same address (its protocol does not group), and a test of
        // the same address that would end after the job's first test (plus the slack), or has
        // no planned end (a count).
        assert!(matches!(reg.admit(req(&flow, "192.0.2.1", None), &limits, t5), Err(Refusal::Busy { .. })));
        let longer = netperf(TestKind::Tcp, 10.0 + JOB_END_SLACK.as_secs_f64() + 0.5);
        assert!(matches!(in_job(&reg, &longer, "192.0.2.1", &limits, t5), Err(Refusal::Busy { reason: None, .. })));
        let mut counted = netperf(TestKind::Tcp, 1.0);
        counted.end = EndCondition::Bytes(1000);
        assert!(matches!(in_job(&reg, &counted, "192.0.2.1", &limits, t5), Err(Refusal::Busy { .. })));
        // The job keeps its place while any of its tests runs, whichever ended first; its end
        // stays where its first test put it.
        for c in pings.iter().chain(&flows[1..]) {
            reg.release(c);
        }
        assert!(matches!(in_job(&reg, &flow, "192.0.2.2", &limits, t5), Err(Refusal::Busy { .. })));
        assert!(matches!(in_job(&reg, &longer, "192.0.2.1", &limits, t5), Err(Refusal::Busy { .. })));
        let late = in_job(&reg, &flow, "192.0.2.1", &limits, t5 + Duration::from_secs(5)).ok().unwrap();
        reg.release(&flows[0]);
        reg.release(&late.cookie);
        let st = reg.lock();
        assert_eq!((st.running, st.joined, st.jobs.len(), st.tests.len()), (0, 0, 0, 0));
        drop(st);
        assert!(in_job(&reg, &longer, "192.0.2.2", &limits, t5).is_ok(), "the server is free again");
    }

    #[test]
    fn a_job_is_bounded_and_every_other_limit_applies_to_its_tests() {
        let reg = Registry::default();
        let limits = Limits { max_concurrent: 1, ..Limits::default() };
        let now = Instant::now();
        let spec = netperf(TestKind::Tcp, 10.0);
        let held: Vec<_> = (0..MAX_TESTS_PER_JOB)
            .map(|_| in_job(&reg, &spec, "192.0.2.1", &limits, now).ok().unwrap().cookie)
            .collect();
        let over = in_job(&reg, &spec, "192.0.2.1", &limits, now).err().unwrap();
        assert!(
            matches!(over, Refusal::Busy { reason: Some(ref r), .. } if r.contains(&format!("{MAX_TESTS_PER_JOB} tests"))),
            "{over:?}"
        );
        // With a second place, the client's next test opens a job of its own.
        let two = Limits { max_concurrent: 2, ..Limits::default() };
        let second = in_job(&reg, &spec, "192.0.2.1", &two, now).ok().unwrap();
        for c in held.iter().chain([&second.cookie]) {
            reg.release(c);
        }
        // A job's streams together stay within --max-streams.
        let narrow = Limits { max_streams: 3, ..Limits::default() };
        let three: Vec<_> =
            (0..3).map(|_| in_job(&reg, &spec, "192.0.2.1", &narrow, now).ok().unwrap().cookie).collect();
        assert!(matches!(
            in_job(&reg, &spec, "192.0.2.1", &narrow, now),
            Err(Refusal::Busy { reason: Some(ref r), .. }) if r.contains("--max-streams")
        ));
        for c in &three {
            reg.release(c);
        }
        // Each joining test is a start (--max-starts-per-minute), and --max-duration applies.
        let strict =
            Limits { max_starts_per_minute: Some(2), max_duration: Some(Duration::from_secs(10)), ..Limits::default() };
        let a = in_job(&reg, &spec, "192.0.2.1", &strict, now).ok().unwrap();
        let b = in_job(&reg, &spec, "192.0.2.1", &strict, now).ok().unwrap();
        let third = in_job(&reg, &spec, "192.0.2.1", &strict, now).err().unwrap();
        assert!(matches!(third, Refusal::Busy { reason: Some(ref r), .. } if r.contains("--max-starts-per-minute")));
        let long = netperf(TestKind::Tcp, 11.0);
        assert!(matches!(
            in_job(&reg, &long, "192.0.2.3", &strict, now),
            Err(Refusal::Rejected(Rejection { limit: Some(ServerLimit::Duration), .. }))
        ));
        reg.release(&a.cookie);
        reg.release(&b.cookie);
        assert_eq!(reg.lock().running, 0);
    }

    #[test]
    fn patterns_and_large_transactions_count_against_max_rate() {
        // -l 16 --pattern 100000000x65507 -b 1M paces 16-byte slots but sends 65507-byte datagrams.
        let mut udp = TestSpec::udp_default();
        udp.block_bytes = 16;
        let u = udp.udp.as_mut().unwrap();
        u.rate = UdpRate::BitsPerSecond(1_000_000);
        u.pattern =
            Some(netchar_model::spec::Pattern { sizes: vec![(100_000_000, 65_507)], burst: None, gap_seconds: 0.0 });
        assert_eq!(requested_rate(&udp), Some((1_000_000u64 * 65_507).div_ceil(16)));
        let mut rr = TestSpec::rr_default();
        assert_eq!(requested_rate(&rr), Some(0));
        rr.rr.as_mut().unwrap().response_bytes = 16 << 20;
        assert_eq!(requested_rate(&rr), None, "bulk data over rr states no rate");
    }

    #[test]
    fn one_ipv6_host_is_one_source() {
        let a: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(source_key(a), source_key(b));
        assert_ne!(source_key(a), source_key(c));
        assert_eq!(source_key("::ffff:192.0.2.1".parse().unwrap()), "192.0.2.1".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn rates_add_up_against_max_rate_and_an_unlimited_test_is_refused() {
        let reg = Registry::default();
        let limits = Limits { max_concurrent: 10, max_rate: Some(100_000_000), ..Limits::default() };
        let now = Instant::now();
        let mut spec = TestSpec::udp_default();
        spec.udp.as_mut().unwrap().rate = UdpRate::BitsPerSecond(60_000_000);
        let a = reg.admit(req(&spec, "192.0.2.1", None), &limits, now).ok().unwrap();
        let busy = reg.admit(req(&spec, "192.0.2.2", None), &limits, now).err().unwrap();
        assert!(matches!(busy, Refusal::Busy { reason: Some(ref r), .. } if r.contains("--max-rate")), "{busy:?}");
        reg.release(&a.cookie);
        assert!(reg.admit(req(&spec, "192.0.2.2", None), &limits, now).is_ok());
        let tcp = TestSpec::tcp_default();
        assert!(
            matches!(reg.admit(req(&tcp, "192.0.2.3", None), &limits, now), Err(Refusal::Rejected(Rejection { limit: Some(ServerLimit::Rate), ref reason })) if reason.contains("-b"))
        );
        let mut bidir = TestSpec::tcp_default();
        bidir.direction = Direction::Bidir;
        bidir.streams = 2;
        bidir.tcp.rate_bps_per_stream = Some(10);
        assert_eq!(requested_rate(&bidir), Some(40));
    }

    #[test]
    fn durations_streams_and_starts_per_minute_are_limited() {
        let reg = Registry::default();
        let limits = Limits {
            max_concurrent: 10,
            max_duration: Some(Duration::from_secs(30)),
            max_streams: 4,
            max_starts_per_minute: Some(2),
            ..Limits::default()
        };
        let now = Instant::now();
        let mut long = TestSpec::tcp_default();
        long.end = EndCondition::Seconds(31.0);
        assert!(
            matches!(reg.admit(req(&long, "192.0.2.1", None), &limits, now), Err(Refusal::Rejected(Rejection { limit: Some(ServerLimit::Duration), ref reason })) if reason.contains("-t 30"))
        );
        let mut wide = TestSpec::tcp_default();
        wide.streams = 3;
        wide.direction = Direction::Bidir;
        assert!(matches!(
            reg.admit(req(&wide, "192.0.2.1", None), &limits, now),
            Err(Refusal::Rejected(Rejection { limit: Some(ServerLimit::Streams), .. }))
        ));
        let ok = TestSpec::tcp_default();
        for _ in 0..2 {
            let a = reg.admit(req(&ok, "192.0.2.1", None), &limits, now).ok().unwrap();
            reg.release(&a.cookie);
        }
        let third = reg.admit(req(&ok, "192.0.2.1", None), &limits, now).err().unwrap();
        assert!(matches!(third, Refusal::Busy { reason: Some(ref r), .. } if r.contains("--max-starts-per-minute")));
        assert!(reg.admit(req(&ok, "192.0.2.2", None), &limits, now).is_ok(), "other sources are not affected");
        assert!(reg.admit(req(&ok, "192.0.2.1", None), &limits, now + Duration::from_secs(61)).is_ok());
    }

    #[test]
    fn data_paths_come_from_the_control_address_or_an_allowed_network() {
        let p = DataPathPolicy { allowed: vec![DataPathPolicy::parse_net("198.51.100.0/24").unwrap()] };
        let ctl: IpAddr = "192.0.2.1".parse().unwrap();
        assert!(p.allows(ctl, "::ffff:192.0.2.1".parse().unwrap()));
        assert!(p.allows(ctl, "198.51.100.77".parse().unwrap()));
        assert!(!p.allows(ctl, "192.0.2.2".parse().unwrap()));
        assert!(!DataPathPolicy::default().allows(ctl, "198.51.100.77".parse().unwrap()));
        assert_eq!(
            DataPathPolicy::parse_net("10.0.0.0/33"),
            Err(NetworkError::BadPrefix { given: "10.0.0.0/33".into(), max: 32 })
        );
        assert!(matches!(DataPathPolicy::parse_net("bogus"), Err(NetworkError::NotAnAddress { .. })));
        assert_eq!(DataPathPolicy::parse_net("2001:db8::/32").unwrap().1, 32);
    }

    #[test]
    fn connections_per_source_are_capped_and_given_back() {
        let counts = Arc::new(SourceCounts::default());
        let limits = Limits { max_per_source: 2, max_connections: 3, ..Limits::default() };
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        let s1 = counts.take(a, &limits).ok().unwrap();
        let _s2 = counts.take(a, &limits).ok().unwrap();
        assert!(matches!(counts.take(a, &limits), Err(ConnRefusal::PerSource(2))));
        let _s3 = counts.take(b, &limits).ok().unwrap();
        assert!(matches!(counts.take(b, &limits), Err(ConnRefusal::Total(3))));
        drop(s1);
        assert!(counts.take(a, &limits).is_ok());
    }
}
