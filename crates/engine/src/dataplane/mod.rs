//! The data plane: one worker thread per stream and one collector thread per test end.
//!
//! Workers own their socket and a buffer allocated once; per write or read they do the
//! syscall, add to a local total and publish it with one relaxed atomic store. Nothing else is
//! shared: no lock, allocation or log line on the hot path. The collector reads the counters
//! at every interval boundary (and at the warm-up boundary), reads `TCP_INFO` of the senders,
//! and builds the [`StreamRecord`]s the result model is made of.
//!
//! Ending: a sender stops at its deadline, at its byte budget or when asked, then shuts down
//! its write side, so the receiver reads every byte and then EOF. Receivers end only at EOF
//! (exact byte totals, unlike iperf3's cut-off, esnet/iperf#382) or when the test is aborted.

mod formats;
mod integrity;
mod lock_step;
mod pacing;
mod rr;
mod send_group;
mod sender_figures;
mod udp;
#[cfg(test)]
mod verify_tests;
mod wake_batching;
mod xdp;

pub use formats::{DatagramFormatKind, PeerDatagrams, UdpWorker};
pub use lock_step::{LockStep, LockStepAction, LockStepSlot};
pub(crate) use rr::{latency_cdf, latency_us};
pub use rr::{RrFraming, RrFramingSlot};
pub use udp::DatagramPacer;

use netchar_model::{
    bits_per_second, Endpoint, Flow, IntervalRecord, Role, RrFigures, StreamInterval, StreamRecord, StreamTotal,
    TestKind, TestResult, TestSpec, UdpReceived, UdpSent,
};
use netchar_stats::distribution::Distribution;
use netchar_sys::zerocopy::{choose_method, Measured, SendMethod, ZeroCopySender};
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a blocked read or write waits before re-checking the stop and abort flags.
const POLL: Duration = Duration::from_millis(100);
/// A final interval shorter than this share of the interval is merged into the one before,
/// so a 10 s test ends with ten intervals and no 0.3 ms stub, and interval sums stay exact.
const TAIL_MERGE_SHARE: f64 = 0.1;

/// How long a housekeeping thread (the collector, a control session) may sleep while a timed
/// test runs, when nothing but the test's end or a worker's error needs it: each wake-up costs
/// the machine a timer and two context switches, and one every 20-50 ms on each end was 0.2-0.45%
/// of a request/response test's CPU (bench/README.md, `housekeeping.sh`). Up to
/// [`QUIET_WAIT_MAX`], ending [`QUIET_END_MARGIN`] before the planned end, after which the
/// callers' short waits resume; `short` when the test has no planned end or is near it.
pub(crate) fn quiet_wait(planned_end: Option<Instant>, now: Instant, short: Duration) -> Duration {
    planned_end
        .map(|end| end.saturating_duration_since(now).saturating_sub(QUIET_END_MARGIN))
        .filter(|&left| left > short)
        .map_or(short, |left| left.min(QUIET_WAIT_MAX))
}

/// The longest [`quiet_wait`]: how late a worker's error in the middle of a test may be seen.
const QUIET_WAIT_MAX: Duration = Duration::from_millis(250);
/// Before the planned end the short waits resume, so the end is seen as soon as it was.
const QUIET_END_MARGIN: Duration = Duration::from_millis(50);

/// When senders stop on their own: `-t` after `started`; None for a byte count (`-n`).
fn send_deadline(spec: &TestSpec, started: Instant) -> Option<Instant> {
    match spec.end {
        netchar_model::EndCondition::Seconds(s) => Some(started + Duration::from_secs_f64(s)),
        netchar_model::EndCondition::Bytes(_) => None,
    }
}

/// A TCP stream's pacer: the next write may start once the bytes so far fit the rate since
/// the start (an absolute schedule: a stall is not caught up with a burst beyond one block).
/// The TCP senders' (`-b`), and the one a protocol's own loop uses for what it writes.
#[derive(Debug, Clone, Copy)]
pub struct BytePacer {
    started: Instant,
    rate_bps: u64,
}

impl BytePacer {
    /// A pacer of `rate_bps` from `started` (None for no rate or a zero one).
    pub fn new(rate_bps: Option<u64>, started: Instant) -> Option<Self> {
        rate_bps.filter(|&r| r > 0).map(|rate_bps| Self { started, rate_bps })
    }

    /// How long the next write must wait at `now` after `bytes` (None: it may go now).
    pub fn wait(&self, bytes: u64, now: Instant) -> Option<Duration> {
        let due = self.started + Duration::from_secs_f64(bytes as f64 * 8.0 / self.rate_bps as f64);
        (due > now).then(|| due - now)
    }
}

/// What a peer protocol's TCP sender writes instead of netchar's constant pattern.
#[derive(Clone, Copy)]
pub struct Payload {
    /// Fills a buffer with the pattern from its start.
    pub fill: fn(&mut [u8]),
    /// The pattern repeats every this many bytes: a sender continues it across partial
    /// writes, so the stream is the pattern unbroken (chargen's 95 lines of 74 bytes).
    pub period: usize,
}

impl std::fmt::Debug for Payload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Payload").field("period", &self.period).finish_non_exhaustive()
    }
}

/// What only some protocols' streams need (the defaults are netchar's own): the seam a peer
/// server's bulk data runs through the data plane by.
#[derive(Debug, Clone, Default)]
pub struct StreamOptions {
    /// What TCP senders write (None: netchar's constant pattern).
    pub payload: Option<Payload>,
    /// A TCP sender whose peer closes the connection has ended, not failed (chargen sends
    /// until its client closes).
    pub until_peer_closes: bool,
    /// TCP receivers read no faster than the test's rate (`spec.tcp.rate_bps_per_stream`),
    /// for a server held to `--max-rate` whose only part is to read (discard).
    pub pace_receivers: bool,
    /// The peer returns what this end sends (the echo service): with `--verify` a receiver
    /// compares what it reads with what its sender wrote (stream id − streams of a flow; an
    /// rr requester, its requests), not with a generator of the far end's.
    pub echoed: bool,
    /// A peer's own UDP rr requests (irtt's), for the requester to send in netchar's place.
    pub rr_framing: Option<RrFramingSlot>,
    /// A peer's lock-step exchange (nc_test's master), run on the stream in place of the
    /// workers' own (lock_step.rs).
    pub lock_step: Option<LockStepSlot>,
}

/// One connected data stream, ready to run.
#[derive(Debug)]
pub struct DataStream {
    /// Stream id from [`TestSpec::stream_ids`].
    pub id: u32,
    /// Which way its data flows.
    pub flow: Flow,
    /// Whether this end writes or reads.
    pub role: Role,
    /// The connected socket.
    pub socket: DataSocket,
}

/// A data stream's socket.
#[derive(Debug)]
pub enum DataSocket {
    /// A TCP connection.
    Tcp(TcpStream),
    /// A connected UDP socket.
    Udp(UdpSocket),
    /// crr requester: where to connect, once per transaction.
    CrrTarget(std::net::SocketAddr),
    /// crr responder: the test's own listener, and the addresses it takes connections from
    /// (the test's data-path policy: a port named in clear must not serve anyone else).
    CrrListener(std::net::TcpListener, PeerFilter),
    /// A receiver whose peer connects to this end (iperf2's `-d`/`-r` dial-back): a listener
    /// and the one address whose connection is taken; the stream's clock starts at the accept.
    DialBack(std::net::TcpListener, std::net::IpAddr),
}

/// Which peer addresses a listener of a test accepts.
#[derive(Clone)]
pub struct PeerFilter(pub std::sync::Arc<dyn Fn(std::net::IpAddr) -> bool + Send + Sync>);

impl std::fmt::Debug for PeerFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PeerFilter")
    }
}

impl PeerFilter {
    /// Accepts every address (the client's own listeners).
    pub fn any() -> Self {
        Self(std::sync::Arc::new(|_| true))
    }
}

/// What one end of a test runs with.
#[derive(Debug, Clone)]
pub struct DataPlaneConfig {
    /// The test.
    pub spec: TestSpec,
    /// How UDP datagrams carry sequence numbers and send times (the peer protocol's format).
    pub datagrams: DatagramFormatKind,
    /// Which end this is.
    pub endpoint: Endpoint,
    /// CPU to pin the workers and collector to.
    pub cpu: Option<usize>,
    /// Plain TCP senders that outnumber the CPUs share a thread per CPU, a block to each in
    /// turn (send_group.rs), for peers whose own client sends that way. Against netchar's
    /// threaded receivers a thread per stream is faster (-P 4 on 2 CPUs: 34.6 against 27.4
    /// Gbit/s).
    pub interleave_senders: bool,
}

/// Per-stream state shared between a worker and the collector.
#[derive(Debug)]
struct StreamShared {
    id: u32,
    flow: Flow,
    role: Role,
    bytes: AtomicU64,
    /// Nanoseconds from the start to the last byte written or read; valid once `done`.
    end_ns: AtomicU64,
    /// Nanoseconds from the start to the stream's connection, for a stream that began late
    /// (a dial-back); 0: at the start.
    start_ns: AtomicU64,
    done: AtomicBool,
    error: Mutex<Option<String>>,
    /// UDP: datagrams sent (sender) or distinct datagrams received (receiver).
    packets: AtomicU64,
    /// UDP sender: sends the kernel refused.
    send_errors: AtomicU64,
    /// UDP sender: the peer's reply to the format's end datagram (iperf2's server report).
    end_reply: Mutex<Option<Vec<u8>>>,
    /// UDP receiver: the sender's exact datagram total, u64::MAX until known.
    peer_packets: AtomicU64,
    /// UDP receiver: stop receiving at this many ns after the start (u64::MAX: not yet).
    receive_until_ns: AtomicU64,
    started: Instant,
    /// UDP: intervals the worker closed and has not yet handed to the collector.
    fresh_intervals: Mutex<Vec<StreamInterval>>,
    /// The CPU the worker last ran on, plus one (0: unknown).
    cpu: AtomicU64,
    /// `--zerocopy` TCP sender: how it actually sent.
    zerocopy: Mutex<Option<netchar_model::ZeroCopyReport>>,
    /// UDP and rr: the worker's final counts and intervals.
    udp_final: Mutex<Option<WorkerFinal>>,
    /// TCP receiver: how the payload left the socket (`read` or `msg_trunc`).
    receive_method: Mutex<Option<&'static str>>,
    /// The largest SO_RCVLOWAT the TCP reader set (0: none).
    receive_low_water: AtomicU64,
    /// `--verify`: what the receiver (or rr requester) found in the bytes it read.
    integrity: Mutex<Option<netchar_model::Integrity>>,
    /// UDP rr requester: ns after the start by which it wants to be woken from a receive that
    /// waits (its oldest request's `--timeout`, its interval's end); u64::MAX: never.
    wake_by_ns: AtomicU64,
    /// UDP rr requester: its thread id while it may block waiting for that (None once it
    /// returned): the collector wakes it under this lock, so never a thread that ended.
    waiter: Mutex<Option<i32>>,
}

/// The final figures of a worker that keeps its own intervals (UDP, rr).
#[derive(Debug)]
struct WorkerFinal {
    sent: Option<UdpSent>,
    received: Option<UdpReceived>,
    rr: Option<RrFigures>,
    /// rr: every round trip, to merge across connections.
    latency: Option<Distribution>,
    /// crr: every connect.
    connect_latency: Option<Distribution>,
    /// UDP rr: kernel receive stamp to the requester, per answer.
    wakeups: Option<Distribution>,
    intervals: Vec<StreamInterval>,
}

impl StreamShared {
    fn new(id: u32, flow: Flow, role: Role, started: Instant) -> Self {
        Self {
            id,
            flow,
            role,
            bytes: AtomicU64::new(0),
            end_ns: AtomicU64::new(0),
            start_ns: AtomicU64::new(0),
            done: AtomicBool::new(false),
            error: Mutex::new(None),
            packets: AtomicU64::new(0),
            send_errors: AtomicU64::new(0),
            end_reply: Mutex::new(None),
            peer_packets: AtomicU64::new(u64::MAX),
            receive_until_ns: AtomicU64::new(u64::MAX),
            started,
            cpu: AtomicU64::new(0),
            zerocopy: Mutex::new(None),
            fresh_intervals: Mutex::new(Vec::new()),
            udp_final: Mutex::new(None),
            receive_method: Mutex::new(None),
            receive_low_water: AtomicU64::new(0),
            integrity: Mutex::new(None),
            wake_by_ns: AtomicU64::new(u64::MAX),
            waiter: Mutex::new(None),
        }
    }

    /// Keeps a `--verify` tally for the stream's record.
    fn set_integrity(&self, found: netchar_model::Integrity) {
        if let Ok(mut slot) = self.integrity.lock() {
            *slot = Some(found);
        }
    }

    /// Records how this stream's worker ended (where it last ran, its error) and marks it done.
    fn worker_done(&self, result: io::Result<()>, cpu: Option<usize>) {
        if let Some(c) = cpu {
            self.cpu.store(c as u64 + 1, Ordering::Release);
        }
        if let (Err(e), Ok(mut slot)) = (result, self.error.lock()) {
            *slot = Some(e.to_string());
        }
        self.done.store(true, Ordering::Release);
    }

    /// Hands a closed interval to the collector (once per interval, not per packet).
    fn push_interval(&self, iv: StreamInterval) {
        if let Ok(mut v) = self.fresh_intervals.lock() {
            v.push(iv);
        }
    }

    fn set_udp_final(
        &self,
        sent: Option<UdpSent>,
        received: Option<UdpReceived>,
        intervals: Option<Vec<StreamInterval>>,
    ) {
        if let Ok(mut slot) = self.udp_final.lock() {
            *slot = Some(WorkerFinal {
                sent,
                received,
                rr: None,
                latency: None,
                connect_latency: None,
                wakeups: None,
                intervals: intervals.unwrap_or_default(),
            });
        }
    }

    fn set_rr_final(
        &self,
        figures: RrFigures,
        intervals: Vec<StreamInterval>,
        latency: Distribution,
        connect_latency: Option<Distribution>,
        wakeups: Option<Distribution>,
    ) {
        if let Ok(mut slot) = self.udp_final.lock() {
            *slot = Some(WorkerFinal {
                sent: None,
                received: None,
                rr: Some(figures),
                latency: Some(latency),
                connect_latency,
                wakeups,
                intervals,
            });
        }
    }

    /// When a UDP receiver must stop, once the sender's total is known.
    fn receive_deadline(&self) -> Option<Instant> {
        let ns = self.receive_until_ns.load(Ordering::Acquire);
        (ns != u64::MAX).then(|| self.started + Duration::from_nanos(ns))
    }

    /// The calling thread becomes this stream's waiter: it may block with no timeout, and the
    /// collector wakes it at `wake_by_ns` (netchar_sys::wake). Dropping the guard ends that.
    fn become_waiter(&self) -> io::Result<Waiter<'_>> {
        netchar_sys::wake::prepare()?;
        if let Ok(mut w) = self.waiter.lock() {
            *w = Some(netchar_sys::wake::current_thread());
        }
        Ok(Waiter(self))
    }

    /// Wakes the waiting thread, if one is still waiting.
    fn wake_waiter(&self) {
        if let Ok(w) = self.waiter.lock() {
            if let Some(tid) = *w {
                let _ = netchar_sys::wake::wake(tid);
            }
        }
    }
}

/// A stream's waiting thread, registered until dropped (see [`StreamShared::become_waiter`]).
struct Waiter<'a>(&'a StreamShared);

impl Waiter<'_> {
    /// Wake me at `at` if I am still blocked then.
    fn wake_by(&self, at: Instant) {
        let ns = at.saturating_duration_since(self.0.started).as_nanos() as u64;
        self.0.wake_by_ns.store(ns, Ordering::Relaxed);
    }
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        self.0.wake_by_ns.store(u64::MAX, Ordering::Relaxed);
        if let Ok(mut w) = self.0.waiter.lock() {
            *w = None;
        }
    }
}

/// Merges a final interval shorter than a tenth of the interval length into the one before;
/// true when it did.
fn merge_short_tail(intervals: &mut Vec<StreamInterval>, interval_seconds: f64) -> bool {
    if intervals.len() < 2 || interval_seconds <= 0.0 {
        return false;
    }
    let last = intervals.last().expect("len >= 2");
    if last.end - last.start >= TAIL_MERGE_SHARE * interval_seconds {
        return false;
    }
    let tail = intervals.pop().expect("len >= 2");
    let prev = intervals.last_mut().expect("len >= 1");
    prev.bytes += tail.bytes;
    prev.end = tail.end;
    prev.bits_per_second = bits_per_second(prev.bytes, prev.end - prev.start);
    if let Some(r) = tail.retransmits {
        *prev.retransmits.get_or_insert(0) += r;
    }
    if let (Some(p), Some(t)) = (prev.udp_sent.as_mut(), tail.udp_sent) {
        p.packets += t.packets;
        p.send_errors += t.send_errors;
    }
    if let (Some(p), Some(t)) = (prev.rr.as_mut(), tail.rr) {
        // Counts add up; the percentiles stay the longer interval's (the tail is < 10% of it).
        p.transactions += t.transactions;
        p.lost += t.lost;
        p.late += t.late;
        let secs = prev.end - prev.start;
        p.transactions_per_second = if secs > 0.0 { p.transactions as f64 / secs } else { 0.0 };
    }
    if let (Some(p), Some(t)) = (prev.udp_received.as_mut(), tail.udp_received) {
        p.packets += t.packets;
        p.out_of_order += t.out_of_order;
        p.duplicates += t.duplicates;
        p.kernel_drops += t.kernel_drops;
        p.reorder_extent_max = p.reorder_extent_max.max(t.reorder_extent_max);
        p.jitter_ms = t.jitter_ms;
        p.jitter_p50_ms = p.jitter_p50_ms.max(t.jitter_p50_ms);
        p.jitter_p99_ms = p.jitter_p99_ms.max(t.jitter_p99_ms);
        let lost = p.lost + t.lost;
        p.set_lost(lost);
    }
    true
}

/// Closes a worker's last interval: appended to `closed` (merged into the one before when
/// short) and, when it stands on its own, published live like the others, so the text shows
/// the last second of a UDP or rr test as it shows TCP's.
fn close_last_interval(
    closed: &mut Vec<StreamInterval>,
    last: StreamInterval,
    interval_seconds: f64,
    shared: &StreamShared,
) {
    closed.push(last);
    if !merge_short_tail(closed, interval_seconds) {
        if let Some(iv) = closed.last() {
            shared.push_interval(iv.clone());
        }
    }
}

/// Flags every worker of a test end checks.
#[derive(Debug, Default)]
struct Controls {
    stop_senders: AtomicBool,
    abort: AtomicBool,
}

/// The running data plane of one test end.
#[derive(Debug)]
pub struct DataPlane {
    shared: Vec<Arc<StreamShared>>,
    controls: Arc<Controls>,
    workers: Vec<JoinHandle<()>>,
    collector: JoinHandle<Joined>,
    started: Instant,
    /// rr sockets (TCP and UDP), whose workers block in reads with no timeout:
    /// [`Self::abort`] shuts their read side to wake them.
    wake_on_abort: Vec<socket2::Socket>,
    /// When this end's senders stop on their own (None: no senders here, or `-n`).
    senders_deadline: Option<Instant>,
    /// When the test ends by its duration (None: `-n`).
    planned_end: Option<Instant>,
}

/// What a finished test end produced.
#[derive(Debug, Default)]
pub struct Joined {
    /// One record per stream of this end.
    pub records: Vec<StreamRecord>,
    /// rr: every round trip of every connection of this end.
    pub latency: Option<Distribution>,
    /// crr: every connect of this end.
    pub connect_latency: Option<Distribution>,
    /// UDP rr: every answer's kernel-stamp-to-requester time.
    pub wakeups: Option<Distribution>,
}

impl DataPlane {
    /// Starts the workers and the collector now. Every time of this end counts from
    /// `started`, which must not be later than the moment the peer could start sending: a
    /// clock that starts after data began to arrive would overstate the receive rate.
    /// Interval records of this end are sent to `live` as they complete.
    pub fn start(
        cfg: DataPlaneConfig,
        streams: Vec<DataStream>,
        live: Option<mpsc::Sender<IntervalRecord>>,
        started: Instant,
    ) -> io::Result<Self> {
        Self::start_with(cfg, streams, live, started, StreamOptions::default())
    }

    /// [`Self::start`] with a peer protocol's [`StreamOptions`].
    pub fn start_with(
        cfg: DataPlaneConfig,
        streams: Vec<DataStream>,
        live: Option<mpsc::Sender<IntervalRecord>>,
        started: Instant,
        options: StreamOptions,
    ) -> io::Result<Self> {
        let mut cfg = cfg;
        if cfg.endpoint == Endpoint::Server {
            // --xdp names the client's own interface: a client's spec never makes a server
            // open an AF_XDP socket.
            if let Some(u) = cfg.spec.udp.as_mut() {
                u.xdp = None;
            }
        }
        let options = Arc::new(options);
        let sends = streams.iter().any(|s| s.role == Role::Sender);
        let payload = Arc::new(integrity::TestPayload::for_spec(&cfg.spec, sends));
        let controls = Arc::new(Controls::default());
        // A lock-step stream runs its machine (lock_step.rs), not an rr worker, whatever its
        // spec: none of an rr worker's socket handling (its own descriptor table, the wake-ups,
        // the read side shut at the end) is its, and its socket may be one it shares (nc_test's
        // slave runs on the data port's only UDP socket).
        let rr = cfg.spec.kind == TestKind::Rr && options.lock_step.is_none();
        // More plain TCP senders than CPUs to run them on, for a peer that reads them best
        // interleaved: one thread per CPU sends for several (send_group.rs). Zero-copy and
        // rate-capped senders keep a thread each.
        let allowed_cpus = netchar_sys::cpu::allowed_cpus() as usize;
        let cpus = if cfg.cpu.is_some() { 1 } else { allowed_cpus };
        let groupable = |s: &DataStream| {
            let t = &cfg.spec.tcp;
            cfg.spec.kind == TestKind::Tcp
                && s.role == Role::Sender
                && matches!(s.socket, DataSocket::Tcp(_))
                && !t.zerocopy
                && t.rate_bps_per_stream.filter(|&r| r > 0).is_none()
                && options.payload.is_none()
                && !options.until_peer_closes
        };
        let grouped = cfg.interleave_senders && streams.iter().filter(|s| groupable(s)).count() > cpus;
        let mut groups: Vec<Vec<send_group::Member>> =
            (0..if grouped { cpus } else { 0 }).map(|_| Vec::new()).collect();
        let mut next_group = 0;
        // Receive wake-up batching (wake_batching.rs) saves waking an idle CPU. When this end's
        // streams alone can keep every CPU it may use busy, there is none to wake and the
        // batches only delay the reads: loopback on 2 CPUs, 4 rounds alternated, one stream
        // +25% with batching, -P 2 -11%, -P 4 -18%, -P 4 -R -11%. One stream on an end held
        // to one CPU of several (taskset, a cpuset) still has its CPU to itself while the
        // sender runs elsewhere: iperf3 -c on CPU 0 into `server --iperf3` on CPU 1, 5 rounds
        // alternated, +9% (14.07 against 12.89 Gbit/s), and -P 4 there -14%, so only one.
        // (Both ends of one stream on one CPU lose ~9% with it: --rx-wake-per-segment.)
        let tcp_streams = streams.iter().filter(|s| matches!(s.socket, DataSocket::Tcp(_))).count();
        let own_cpu = tcp_streams == 1 && netchar_sys::cpu::online_cpus() > 1;
        let batch_wakeups = !rr && (tcp_streams < allowed_cpus || own_cpu);
        let mut launch = Launch::new(&cfg, options.clone(), payload, controls, started, rr, batch_wakeups);
        for s in streams {
            if grouped && groupable(&s) {
                groups[next_group % cpus].push(launch.group_member(s));
                next_group += 1;
                continue;
            }
            launch.spawn_worker(s)?;
        }
        for (g, members) in groups.into_iter().enumerate() {
            launch.spawn_sender_group(g, members)?;
        }
        launch.start_collector(live)
    }

    /// When this end's clock started.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// When this end's senders stop on their own, for a test that ends after a time and has
    /// senders here (None otherwise).
    pub fn senders_deadline(&self) -> Option<Instant> {
        self.senders_deadline
    }

    /// When the test ends by its duration, on this end's clock (None: `-n`).
    pub fn planned_end(&self) -> Option<Instant> {
        self.planned_end
    }

    /// Asks every sender to stop now; they still shut down cleanly so receivers get EOF.
    pub fn stop_senders(&self) {
        self.controls.stop_senders.store(true, Ordering::SeqCst);
    }

    /// Ends everything now, receivers included, without waiting for EOF.
    pub fn abort(&self) {
        self.stop_senders();
        self.controls.abort.store(true, Ordering::SeqCst);
        // A blocked read returns 0 once its socket's read side is shut down.
        for s in &self.wake_on_abort {
            let _ = s.shutdown(Shutdown::Read);
        }
    }

    /// The exact totals of this end's senders once all of them finished (None before; an
    /// empty list when this end sends nothing).
    pub fn senders_done(&self) -> Option<Vec<StreamTotal>> {
        let senders = self.shared.iter().filter(|s| s.role == Role::Sender);
        let mut totals = Vec::new();
        for s in senders {
            if !s.done.load(Ordering::Acquire) {
                return None;
            }
            let (bytes, packets) = (s.bytes.load(Ordering::Acquire), s.packets.load(Ordering::Acquire));
            totals.push(StreamTotal { id: s.id, bytes, packets });
        }
        Some(totals)
    }

    /// The peers' replies to this end's UDP senders' end datagrams (iperf2's server reports),
    /// by stream id, taken once.
    pub fn end_replies(&self) -> Vec<(u32, Vec<u8>)> {
        self.shared
            .iter()
            .filter_map(|s| s.end_reply.lock().ok().and_then(|mut r| r.take()).map(|r| (s.id, r)))
            .collect()
    }

    /// The peer's senders finished with these totals: UDP receivers keep listening for `grace`
    /// (or until every datagram is in), then settle their loss against these exact counts.
    pub fn peer_senders_done(&self, totals: &[StreamTotal], grace: Duration) {
        for s in self.shared.iter().filter(|s| s.role == Role::Receiver) {
            if let Some(t) = totals.iter().find(|t| t.id == s.id) {
                s.peer_packets.store(t.packets, Ordering::Release);
                let until = (s.started.elapsed() + grace).as_nanos() as u64;
                s.receive_until_ns.store(until, Ordering::Release);
            }
        }
    }

    /// Bytes written or read so far by all of this end's streams.
    pub fn bytes_moved(&self) -> u64 {
        self.shared.iter().map(|s| s.bytes.load(Ordering::Acquire)).sum()
    }

    /// Bytes received so far per receiving stream id.
    pub fn received(&self) -> Vec<(u32, u64)> {
        self.shared
            .iter()
            .filter(|s| s.role == Role::Receiver)
            .map(|s| (s.id, s.bytes.load(Ordering::Acquire)))
            .collect()
    }

    /// True once every worker finished.
    pub fn all_done(&self) -> bool {
        self.shared.iter().all(|s| s.done.load(Ordering::Acquire))
    }

    /// The first stream error, as one line naming the stream.
    pub fn first_error(&self) -> Option<String> {
        self.shared.iter().find_map(|s| {
            let e = s.error.lock().map(|g| g.clone()).unwrap_or(None);
            e.map(|e| format!("stream {} ({} {}): {e}", s.id, s.flow.name(), role_name(s.role)))
        })
    }

    /// Waits for every thread and returns this end's records. Call after [`Self::all_done`]
    /// or [`Self::abort`].
    pub fn join(self) -> Vec<StreamRecord> {
        self.join_all().records
    }

    /// Like [`Self::join`], with the merged latency distribution of rr tests.
    pub fn join_all(self) -> Joined {
        for w in self.workers {
            let _ = w.join();
        }
        self.collector.join().unwrap_or_default()
    }
}

/// A data plane as [`DataPlane::start_with`] starts it, stream by stream: each stream's shared
/// figures, the threads started so far, and the sockets the collector and an abort need.
struct Launch<'a> {
    cfg: &'a DataPlaneConfig,
    options: Arc<StreamOptions>,
    payload: Arc<integrity::TestPayload>,
    controls: Arc<Controls>,
    started: Instant,
    /// The streams are rr workers' (lock-step ones are not).
    rr: bool,
    /// TCP readers batch their wake-ups (wake_batching.rs).
    batch_wakeups: bool,
    shared: Vec<Arc<StreamShared>>,
    workers: Vec<JoinHandle<()>>,
    info_sockets: Vec<Option<TcpStream>>,
    wake_on_abort: Vec<socket2::Socket>,
    wake_at_grace_end: Vec<(usize, socket2::Socket)>,
    wake_when_due: Vec<WakeWhenDue>,
}

impl<'a> Launch<'a> {
    fn new(
        cfg: &'a DataPlaneConfig,
        options: Arc<StreamOptions>,
        payload: Arc<integrity::TestPayload>,
        controls: Arc<Controls>,
        started: Instant,
        rr: bool,
        batch_wakeups: bool,
    ) -> Self {
        Self {
            cfg,
            options,
            payload,
            controls,
            started,
            rr,
            batch_wakeups,
            shared: Vec::new(),
            workers: Vec::new(),
            info_sockets: Vec::new(),
            wake_on_abort: Vec::new(),
            wake_at_grace_end: Vec::new(),
            wake_when_due: Vec::new(),
        }
    }

    /// A TCP sender that a sender group's thread runs (send_group.rs): its shared figures,
    /// and the collector's copy of its socket.
    fn group_member(&mut self, s: DataStream) -> send_group::Member {
        let DataSocket::Tcp(socket) = s.socket else { unreachable!("groupable streams are TCP") };
        let sh = Arc::new(StreamShared::new(s.id, s.flow, s.role, self.started));
        self.info_sockets.push(socket.try_clone().ok());
        self.shared.push(sh.clone());
        send_group::Member { shared: sh, socket }
    }

    /// Starts the worker thread of stream `s`, with the copies of its socket that wake it.
    fn spawn_worker(&mut self, s: DataStream) -> io::Result<()> {
        let rr = self.rr;
        // An rr worker, TCP or UDP, moves its socket into a descriptor table of its own (a
        // socket call in a process whose threads share one table pays for a file
        // reference, fdget's atomic and fput's, which a single-threaded peer does not) and
        // hands back the copy this table keeps.
        let mut moved_copy = None;
        if let (true, DataSocket::Tcp(t)) = (rr, &s.socket) {
            self.wake_on_abort.push(t.try_clone()?.into());
            moved_copy = Some(mpsc::channel());
        }
        if let (true, DataSocket::Udp(_)) = (rr, &s.socket) {
            moved_copy = Some(mpsc::channel());
        }
        // A UDP rr responder blocks in its receives with no timeout (rr::udp_responder): the
        // abort and the end of its grace after the requester's last request wake it.
        if let (true, Role::Receiver, DataSocket::Udp(u)) = (rr, s.role, &s.socket) {
            self.wake_on_abort.push(u.try_clone()?.into());
            self.wake_at_grace_end.push((self.shared.len(), u.try_clone()?.into()));
        }
        // So does a UDP rr requester (rr::udp_requester): the collector wakes it when a
        // request's --timeout or an interval's end passes while it waits.
        if let (true, Role::Sender, DataSocket::Udp(u)) = (rr, s.role, &s.socket) {
            self.wake_on_abort.push(u.try_clone()?.into());
            self.wake_when_due.push(WakeWhenDue { stream: self.shared.len(), woken: None });
        }
        let sh = Arc::new(StreamShared::new(s.id, s.flow, s.role, self.started));
        // The collector reads TCP_INFO through its own descriptor of the sender's socket.
        self.info_sockets.push(match (&s.socket, s.role) {
            (DataSocket::Tcp(t), Role::Sender) => t.try_clone().ok(),
            _ => None,
        });
        let (copy_tx, copy_rx) = moved_copy.unzip();
        let worker = Worker {
            shared: sh.clone(),
            controls: self.controls.clone(),
            cfg: self.cfg.clone(),
            started: self.started,
            copy_tx,
            batch_wakeups: self.batch_wakeups,
            options: self.options.clone(),
            payload: self.payload.clone(),
        };
        let name = format!("netchar-{}-{}", role_name(s.role), s.id);
        self.workers.push(std::thread::Builder::new().name(name).spawn(move || worker.run(s.socket))?);
        if let Some(Ok(Some(copy))) = copy_rx.map(|rx| rx.recv()) {
            copy.close();
        }
        self.shared.push(sh);
        Ok(())
    }

    /// Starts the thread of sender group `g` (send_group.rs), which sends for `members`.
    fn spawn_sender_group(&mut self, g: usize, members: Vec<send_group::Member>) -> io::Result<()> {
        let (controls, spec, cpu) = (self.controls.clone(), self.cfg.spec.clone(), self.cfg.cpu);
        let started = self.started;
        let source = self.payload.stream.clone().unwrap_or_else(|| {
            Arc::new(netchar_wire::payload::StreamPayload::new(Default::default(), spec.block_bytes as usize, 1))
        });
        let name = format!("netchar-senders-{}", g + 1);
        self.workers.push(std::thread::Builder::new().name(name).spawn(move || {
            if let Some(c) = cpu {
                let _ = netchar_sys::cpu::pin_current_thread(c);
            }
            leave_rseq();
            let outcomes = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                send_group::send(&members, &controls, &spec, &source, started)
            }))
            .unwrap_or_else(|_| {
                (0..members.len()).map(|_| Err(io::Error::other("a sender group failed: internal error"))).collect()
            });
            let cpu_now = netchar_sys::cpu::current_cpu();
            for (m, outcome) in members.iter().zip(outcomes) {
                m.shared.worker_done(outcome, cpu_now);
            }
        })?);
        Ok(())
    }

    /// Starts the collector over every stream started, sending interval records to `live`:
    /// the running data plane.
    fn start_collector(self, live: Option<mpsc::Sender<IntervalRecord>>) -> io::Result<DataPlane> {
        let (cfg, started) = (self.cfg, self.started);
        let collector = Collector {
            shared: self.shared.clone(),
            info_sockets: self.info_sockets,
            spec: cfg.spec.clone(),
            endpoint: cfg.endpoint,
            started,
            live,
            udp: cfg.spec.kind != TestKind::Tcp,
            wake_at_grace_end: self.wake_at_grace_end,
            wake_when_due: self.wake_when_due,
        };
        let cpu = cfg.cpu;
        let collector = std::thread::Builder::new().name("netchar-collector".into()).spawn(move || {
            if let Some(c) = cpu {
                let _ = netchar_sys::cpu::pin_current_thread(c);
            }
            collector.run()
        })?;
        let planned_end = send_deadline(&cfg.spec, started);
        let shared = self.shared;
        let senders_deadline = planned_end.filter(|_| shared.iter().any(|s| s.role == Role::Sender));
        Ok(DataPlane {
            shared,
            controls: self.controls,
            workers: self.workers,
            collector,
            started,
            wake_on_abort: self.wake_on_abort,
            senders_deadline,
            planned_end,
        })
    }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::Sender => "sender",
        Role::Receiver => "receiver",
    }
}

struct Worker {
    shared: Arc<StreamShared>,
    controls: Arc<Controls>,
    cfg: DataPlaneConfig,
    started: Instant,
    /// TCP and UDP rr: where to send the process table's copy of the socket once this worker moved it
    /// into a table of its own (None: it stayed).
    copy_tx: Option<mpsc::Sender<Option<netchar_sys::fdtable::SharedCopy>>>,
    /// A TCP reader batches its wake-ups (wake_batching.rs) unless `--rx-wake-per-segment`.
    batch_wakeups: bool,
    options: Arc<StreamOptions>,
    /// What the test's senders write and its receivers compare with.
    payload: Arc<integrity::TestPayload>,
}

/// A data-plane worker leaves the rseq area glibc registered for its thread: the kernel would
/// otherwise update it after every switch back to the thread, once per transaction for a
/// request/response worker sharing a core with its peer (netchar_sys::rseq; 2% of a TCP and
/// 3.5% of a UDP transaction's CPU there: bench/README.md, "Without the kernel's rseq update").
/// `NETCHAR_KEEP_RSEQ=1` keeps it, for comparisons.
fn leave_rseq() {
    if std::env::var_os("NETCHAR_KEEP_RSEQ").is_none() {
        let _ = netchar_sys::rseq::leave_current_thread();
    }
}

impl Worker {
    fn run(self, socket: DataSocket) {
        if let Some(c) = self.cfg.cpu {
            let _ = netchar_sys::cpu::pin_current_thread(c);
        }
        leave_rseq();
        if let Some(tx) = &self.copy_tx {
            let fd = match &socket {
                DataSocket::Tcp(s) => Some(s.as_fd()),
                DataSocket::Udp(s) => Some(s.as_fd()),
                _ => None,
            };
            let _ = tx.send(fd.and_then(|fd| netchar_sys::fdtable::move_to_own_table(fd).ok()));
        }
        let (sh, ctl, spec, t0) = (&*self.shared, &*self.controls, &self.cfg.spec, self.started);
        let rr = spec.kind == TestKind::Rr;
        let made = rr::RrBytes { payload: &self.payload, echoed: self.options.echoed };
        let key = self.sender_key();
        // A panic in a worker must not leave its stream "running" forever: the collector, and
        // with it the test's slot on the server, wait for every worker to be done.
        let lock_step = self.options.lock_step.as_ref().and_then(LockStepSlot::take);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match (self.shared.role, &socket) {
            _ if lock_step.is_some() => lock_step::run(sh, ctl, &socket, lock_step.expect("checked")),
            (Role::Sender, DataSocket::Tcp(s)) if rr => rr::tcp_requester(sh, ctl, spec, t0, s, made),
            (Role::Receiver, DataSocket::Tcp(s)) if rr => rr::tcp_responder(sh, ctl, spec, s, made),
            (Role::Sender, DataSocket::Udp(s)) if rr => {
                let framing = self.options.rr_framing.as_ref().and_then(RrFramingSlot::take);
                rr::udp_requester(sh, ctl, spec, t0, s, self.cfg.datagrams, made, framing)
            }
            (Role::Receiver, DataSocket::Udp(s)) if rr => rr::udp_responder(sh, ctl, spec, s, self.cfg.datagrams, made),
            (Role::Sender, DataSocket::CrrTarget(a)) => rr::crr_requester(sh, ctl, spec, t0, *a),
            (Role::Receiver, DataSocket::CrrListener(l, allow)) => rr::crr_responder(sh, ctl, spec, l, allow),
            (_, DataSocket::CrrTarget(_) | DataSocket::CrrListener(..)) => Ok(()),
            (Role::Receiver, DataSocket::DialBack(l, from)) => {
                self.accept_dial_back(l, *from).and_then(|stream| self.receive(&stream))
            }
            (Role::Sender, DataSocket::DialBack(..)) => Ok(()),
            (Role::Sender, DataSocket::Tcp(s)) => self.send(s),
            (Role::Receiver, DataSocket::Tcp(s)) => self.receive(s),
            (_, DataSocket::Udp(s)) => {
                let payload = integrity::UdpPayload::of(&self.payload, key);
                UdpWorker { shared: sh, controls: ctl, spec, started: t0, socket: s, variant: 0, payload }
                    .run_kind(self.cfg.datagrams)
            }
        }))
        .unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Err(io::Error::other(format!("stream {} failed: internal error ({what})", sh.id)))
        });
        self.shared.worker_done(result, netchar_sys::cpu::current_cpu());
    }

    fn send(&self, socket: &TcpStream) -> io::Result<()> {
        let spec = &self.cfg.spec;
        socket.set_write_timeout(Some(POLL))?;
        let block = spec.block_bytes as usize;
        let source = SendSource::new(self.options.payload, self.payload.stream.as_deref(), self.shared.id, block);
        let deadline = send_deadline(spec, self.started);
        let budget = spec.byte_budget(self.shared.id);
        let pacer = BytePacer::new(spec.tcp.rate_bps_per_stream, self.started);
        // Zero-copy sends use the sender's own page-aligned copy of `buf`, never changed; where
        // SO_ZEROCOPY is unsupported this stays None and the plain path below runs. Which way
        // it sends is chosen by measurement: a short probe of plain sends, MSG_ZEROCOPY and
        // splicing at the start, then the fastest ([`MethodProbe`]), so `--zerocopy` is never
        // knowingly slower than plain sends (the kernel copies MSG_ZEROCOPY data on loopback
        // and veth, and splicing is slower than copying on some machines).
        let mut zerocopy = if spec.tcp.zerocopy {
            let buf = source.bytes(0, block);
            ZeroCopySender::new(socket.as_fd(), buf, netchar_sys::zerocopy::OnCopy::KeepZeroCopy).ok()
        } else {
            None
        };
        let mut probe = zerocopy.as_mut().map(|zc| MethodProbe::start(zc, spec, Instant::now()));
        let mut sent: u64 = 0;
        let mut end = Instant::now();
        // One clock reading per block: the one taken after a write is both that write's end
        // and the next block's "now" (a read of the clock per block saved, perf record showed
        // clock_gettime at a third of the sender's own user time).
        let mut now = end;
        let mut writer = socket;
        let outcome = loop {
            if self.controls.stop_senders.load(Ordering::Relaxed) {
                break Ok(());
            }
            if deadline.is_some_and(|d| now >= d) {
                break Ok(());
            }
            let len = match budget {
                Some(b) if sent >= b => break Ok(()),
                Some(b) => block.min((b - sent) as usize),
                None => block,
            };
            if let Some(wait) = pacer.and_then(|p| p.wait(sent, now)) {
                let wait = deadline.map_or(wait, |d| wait.min(d.saturating_duration_since(now)));
                std::thread::sleep(wait.min(POLL));
                now = Instant::now();
                continue;
            }
            let written = match zerocopy.as_mut() {
                Some(zc) => zc.send(socket.as_fd(), len),
                None => writer.write(source.bytes(sent, len)),
            };
            match written {
                Ok(0) if self.options.until_peer_closes => break Ok(()),
                Ok(0) => break Err(io::Error::new(io::ErrorKind::WriteZero, "the socket accepted no data")),
                Ok(n) => {
                    sent += n as u64;
                    self.shared.bytes.store(sent, Ordering::Release);
                    end = Instant::now();
                    now = end;
                    if let (Some(p), Some(zc)) = (probe.as_mut(), zerocopy.as_mut()) {
                        p.sent(n as u64, end, zc);
                    }
                }
                Err(e) if crate::is_retry(&e) => now = Instant::now(),
                Err(e) if self.options.until_peer_closes && peer_closed(&e) => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        // The final zero-copy counters (None without --zerocopy or where it is unsupported).
        let stats = zerocopy
            .as_mut()
            .map(|zc| zc.finish(socket.as_fd(), Duration::from_secs(5)).unwrap_or_else(|_| zc.stats()));
        if let (Some(st), Ok(mut slot)) = (stats, self.shared.zerocopy.lock()) {
            *slot = Some(netchar_model::ZeroCopyReport {
                method: method_name(st.method).to_string(),
                zerocopy_sends: st.sends,
                completed: st.completed,
                copied: st.copied,
                splice_sends: st.splice_sends,
                copy_sends: st.copy_sends,
                tried: probe.as_ref().map(MethodProbe::report).unwrap_or_default(),
            });
        }
        self.shared.end_ns.store(end.saturating_duration_since(self.started).as_nanos() as u64, Ordering::Release);
        let _ = socket.shutdown(Shutdown::Write);
        outcome
    }

    /// Waits for the peer's connection from `from` (others are closed at once) until the test
    /// is aborted.
    fn accept_dial_back(&self, listener: &std::net::TcpListener, from: std::net::IpAddr) -> io::Result<TcpStream> {
        listener.set_nonblocking(true)?;
        loop {
            match listener.accept() {
                Ok((stream, peer)) if peer.ip() == from => {
                    stream.set_nonblocking(false)?;
                    let at = self.started.elapsed().as_nanos() as u64;
                    self.shared.start_ns.store(at.max(1), Ordering::Release);
                    return Ok(stream);
                }
                Ok(_) => {}
                Err(e) if crate::is_retry(&e) => {
                    if self.controls.abort.load(Ordering::Relaxed) {
                        let port = listener.local_addr().map_or(0, |a| a.port());
                        return Err(io::Error::other(format!(
                            "the peer never connected back to port {port} (a firewall or NAT between the two? \
                             a dial-back test needs the server to reach this host)"
                        )));
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn receive(&self, socket: &TcpStream) -> io::Result<()> {
        socket.set_read_timeout(Some(POLL))?;
        let tcp = &self.cfg.spec.tcp;
        let block = self.cfg.spec.block_bytes as usize;
        // --skip-rx-copy: MSG_TRUNC discards the payload in the kernel; where a kernel refuses
        // the flag on its first use, reads copy as usual and the record says so. A discard
        // touches no memory, so it asks for up to 1 MiB at once (the buffer is never written:
        // its pages stay unmapped); a copy reads one block, up to MAX_COPY_READ.
        let mut discard = tcp.skip_rx_copy;
        let copy_read = block.min(MAX_COPY_READ);
        let mut buf = vec![0u8; if discard { block.max(DISCARD_READ) } else { copy_read }];
        // Wake-up batching (wake_batching.rs): at most one read's length (half a discard's, so
        // one read takes all a wake-up found), a quarter of a fixed -w window.
        let mut cap = if discard { buf.len() / 2 } else { buf.len() };
        if let Some(w) = tcp.window_bytes {
            cap = cap.min(w as usize / 4);
        }
        let mut batching = (self.batch_wakeups && !tcp.wake_per_segment)
            .then(|| wake_batching::WakeBatching::new(cap, Instant::now()));
        // Counts a read (0: one that timed out) and moves the socket's mark when due; a kernel
        // without SO_RCVLOWAT on TCP wakes per segment, as before.
        let rebatch = |batching: &mut Option<wake_batching::WakeBatching>, bytes: usize, at: Instant| {
            if let Some(mark) = batching.as_mut().and_then(|b| b.on_read(bytes, at)) {
                let _ = netchar_sys::tcp::set_receive_low_water(socket.as_fd(), mark);
            }
        };
        let mut received: u64 = 0;
        let mut last = self.started + Duration::from_nanos(self.shared.start_ns.load(Ordering::Acquire));
        let mut reader = socket;
        let mut discarded_once = false;
        let pacer =
            if self.options.pace_receivers { BytePacer::new(tcp.rate_bps_per_stream, self.started) } else { None };
        // --verify: every read is compared with the sender's generator at its stream offset.
        let mut check = self
            .payload
            .stream
            .clone()
            .filter(|_| self.payload.verify)
            .map(|p| integrity::StreamCheck::new(p, self.sender_key()));
        let outcome = loop {
            if let Some(wait) = pacer.and_then(|p| p.wait(received, Instant::now())) {
                if self.controls.abort.load(Ordering::Relaxed) {
                    break Ok(());
                }
                std::thread::sleep(wait.min(POLL));
                continue;
            }
            let got = if discard {
                match netchar_sys::tcp::recv_discard(socket.as_fd(), &mut buf) {
                    Err(e) if !discarded_once && e.kind() == io::ErrorKind::Unsupported => {
                        discard = false;
                        buf.truncate(copy_read);
                        continue;
                    }
                    r => {
                        discarded_once |= r.is_ok();
                        r
                    }
                }
            } else {
                reader.read(&mut buf)
            };
            match got {
                Ok(0) => break Ok(()),
                Ok(n) => {
                    if let Some(c) = check.as_mut() {
                        c.check(received, &buf[..n], || self.started.elapsed().as_secs_f64());
                    }
                    received += n as u64;
                    self.shared.bytes.store(received, Ordering::Release);
                    last = Instant::now();
                    rebatch(&mut batching, n, last);
                    // Checked on every read too: a busy stream never times out.
                    if self.controls.abort.load(Ordering::Relaxed) {
                        break Ok(());
                    }
                }
                Err(e) if crate::is_retry(&e) => {
                    rebatch(&mut batching, 0, Instant::now());
                    if self.controls.abort.load(Ordering::Relaxed) {
                        break Ok(());
                    }
                }
                Err(e) => break Err(e),
            }
        };
        if let Ok(mut slot) = self.shared.receive_method.lock() {
            *slot = Some(if discard { "msg_trunc" } else { "read" });
        }
        if let Some(c) = check {
            self.shared.set_integrity(c.finish());
        }
        self.shared
            .receive_low_water
            .store(batching.as_ref().and_then(|b| b.largest()).unwrap_or(0), Ordering::Release);
        self.shared.end_ns.store(last.saturating_duration_since(self.started).as_nanos() as u64, Ordering::Release);
        outcome
    }
}

impl Worker {
    /// The generator key of the bytes this receiver reads: its own stream's, or, when the
    /// peer echoes, the stream whose sender wrote them (a flow's streams below it).
    fn sender_key(&self) -> u32 {
        let spec = &self.cfg.spec;
        match self.shared.flow {
            Flow::Down if self.options.echoed && spec.direction == netchar_model::Direction::Bidir => {
                self.shared.id.saturating_sub(spec.streams)
            }
            _ => self.shared.id,
        }
    }
}

/// Where a TCP sender's bytes come from: slices of the test's generator (the stream's bytes at
/// each offset: no copy, and for the constant kinds the same few bytes over and over), or of a
/// peer's pattern laid out one period longer than a block, so a write can start anywhere in
/// its period.
enum SendSource<'a> {
    Generator { payload: &'a netchar_wire::payload::StreamPayload, key: u32 },
    Peer { buf: Vec<u8>, period: u64 },
}

impl<'a> SendSource<'a> {
    fn new(
        peer: Option<Payload>,
        generator: Option<&'a netchar_wire::payload::StreamPayload>,
        key: u32,
        block: usize,
    ) -> Self {
        match (peer, generator) {
            (None, Some(payload)) => Self::Generator { payload, key },
            (peer, _) => {
                let p = peer.unwrap_or(Payload { fill: fill_pattern, period: 10 });
                let mut buf = vec![0u8; block + p.period];
                (p.fill)(&mut buf);
                Self::Peer { buf, period: p.period.max(1) as u64 }
            }
        }
    }

    /// The `len` bytes the stream carries from offset `sent`.
    fn bytes(&self, sent: u64, len: usize) -> &[u8] {
        match self {
            Self::Generator { payload, key } => payload.slice(*key, sent, len),
            Self::Peer { buf, period } => {
                let at = (sent % period) as usize;
                &buf[at..at + len]
            }
        }
    }
}

/// netchar's constant pattern, for a sender without a generator.
fn fill_pattern(buf: &mut [u8]) {
    buf.iter_mut().enumerate().for_each(|(i, b)| *b = b"0123456789"[i % 10]);
}

/// Whether a write failed because the peer closed the connection.
fn peer_closed(e: &io::Error) -> bool {
    use io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset};
    matches!(e.kind(), ConnectionReset | BrokenPipe | ConnectionAborted)
}

/// The length of one `--skip-rx-copy` read (at least one block).
const DISCARD_READ: usize = 1 << 20;

/// The longest copying TCP read, whatever the block (`-l` up to 16 MiB). The pages a read
/// fills stay in the process, so a server receiving 128 streams of `-l 16Mi` held 547 MB
/// (a read takes what the socket has queued, up to its receive buffer); at this cap, 141 MB.
/// A read of 1 MiB costs one system call per MiB, nothing beside the copy.
const MAX_COPY_READ: usize = 1 << 20;

/// The `--zerocopy` sender's choice of method: after a warm-up of plain sends (slow start must
/// not count against the first method measured), each candidate sends for one phase and the
/// fastest, by bytes the socket took over the phase's time, sends for the rest of the test
/// (netchar_sys::zerocopy::choose_method). Costs one comparison per send once over.
struct MethodProbe {
    /// Methods still to measure, next last.
    queue: Vec<SendMethod>,
    /// The phase running now; None once the choice is made.
    current: Option<Phase>,
    phase_len: Duration,
    tried: Vec<(Measured, u64, f64)>,
}

struct Phase {
    /// None: the warm-up, not measured.
    method: Option<SendMethod>,
    started: Instant,
    bytes: u64,
    at_start: netchar_sys::zerocopy::ZeroCopyStats,
}

/// Longest probe phase; four phases (warm-up and three methods) take 0.2 s of a long test.
const PROBE_PHASE: Duration = Duration::from_millis(50);

impl MethodProbe {
    fn start(zc: &mut ZeroCopySender, spec: &TestSpec, now: Instant) -> Self {
        // A short test gets short phases: the probe takes at most a tenth of it.
        let phase_len = match spec.end {
            netchar_model::EndCondition::Seconds(s) => PROBE_PHASE.min(Duration::from_secs_f64(s / 40.0)),
            netchar_model::EndCondition::Bytes(_) => PROBE_PHASE,
        };
        zc.set_method(SendMethod::Copy);
        Self {
            queue: vec![SendMethod::Splice, SendMethod::ZeroCopy, SendMethod::Copy],
            current: Some(Phase { method: None, started: now, bytes: 0, at_start: zc.stats() }),
            phase_len,
            tried: Vec::new(),
        }
    }

    /// Counts `n` bytes the socket took at `now`; at the end of a phase records it and moves on.
    fn sent(&mut self, n: u64, now: Instant, zc: &mut ZeroCopySender) {
        let Some(phase) = self.current.as_mut() else { return };
        phase.bytes += n;
        let seconds = now.saturating_duration_since(phase.started);
        if seconds < self.phase_len {
            return;
        }
        let seconds = seconds.as_secs_f64();
        let stats = zc.stats();
        if let Some(method) = phase.method {
            let completed = stats.completed - phase.at_start.completed;
            let copied = stats.copied - phase.at_start.copied;
            // A phase whose splice failed ran plain sends: it counts as what really ran.
            let ran = stats.method;
            let measured = Measured {
                method: ran,
                bits_per_second: bits_per_second(phase.bytes, seconds),
                copied_share: (method == SendMethod::ZeroCopy && completed > 0)
                    .then(|| copied as f64 / completed as f64),
            };
            self.tried.push((measured, phase.bytes, seconds));
        }
        match self.queue.pop() {
            Some(next) => {
                zc.set_method(next);
                self.current = Some(Phase { method: Some(next), started: now, bytes: 0, at_start: zc.stats() });
            }
            None => {
                let measured: Vec<Measured> = self.tried.iter().map(|t| t.0).collect();
                zc.set_method(choose_method(&measured).unwrap_or(SendMethod::Copy));
                self.current = None;
            }
        }
    }

    fn report(&self) -> Vec<netchar_model::MethodRate> {
        self.tried
            .iter()
            .map(|(m, bytes, seconds)| netchar_model::MethodRate {
                method: method_name(m.method).to_string(),
                bytes: *bytes,
                seconds: *seconds,
                bits_per_second: m.bits_per_second,
                copied_share: m.copied_share,
            })
            .collect()
    }
}

fn method_name(m: SendMethod) -> &'static str {
    match m {
        SendMethod::ZeroCopy => "zerocopy",
        SendMethod::Splice => "splice",
        SendMethod::Copy => "copy",
    }
}

/// Builds the records of one test end from the shared counters.
struct Collector {
    shared: Vec<Arc<StreamShared>>,
    info_sockets: Vec<Option<TcpStream>>,
    spec: TestSpec,
    endpoint: Endpoint,
    started: Instant,
    live: Option<mpsc::Sender<IntervalRecord>>,
    /// UDP and rr streams: the workers keep the intervals.
    udp: bool,
    /// UDP rr responders (index in `shared`, a descriptor of the socket), which block in their
    /// receives with no timeout: once a responder's grace after the requester's last request
    /// has passed, the collector shuts the socket's read side so that its receive returns.
    wake_at_grace_end: Vec<(usize, socket2::Socket)>,
    /// UDP rr requesters, which block in their receives with no timeout and say by when they
    /// want to be woken (`StreamShared::wake_by_ns`).
    wake_when_due: Vec<WakeWhenDue>,
}

/// A waiting stream the collector wakes when its time has come.
struct WakeWhenDue {
    /// Index in `shared`.
    stream: usize,
    /// The last wake: for which `wake_by_ns`, and when (s after the start).
    woken: Option<(u64, f64)>,
}

/// How long after a requester's wake-by time the collector wakes it: between two transactions
/// its time may have passed for a moment (an interval just ended) with no need of a wake.
const WAKE_SLACK: f64 = 0.002;
/// A requester woken for a time it has not moved on from (the wake came between two receives)
/// is woken again this much later.
const WAKE_AGAIN: f64 = 0.01;

impl WakeWhenDue {
    /// When this stream is next due a wake (s after the start; None: not waiting), for its
    /// wake-by time `ns`.
    fn due(&self, ns: u64) -> Option<f64> {
        if ns == u64::MAX {
            return None;
        }
        match self.woken {
            Some((for_ns, at)) if for_ns == ns => Some(at + WAKE_AGAIN),
            _ => Some(ns as f64 * 1e-9 + WAKE_SLACK),
        }
    }
}

/// How far apart the clock readings around a read of the counters may be (s) before the read
/// is taken again, and how many times it is.
const COUNTER_READ_SPAN: f64 = 100e-6;
const COUNTER_READ_TRIES: u32 = 8;

/// The byte counts of every stream, read together, and when (s after the start).
struct CounterReading {
    at: f64,
    bytes: Vec<u64>,
}

/// The collector's running view of one stream.
struct Track {
    record: StreamRecord,
    last_bytes: u64,
    last_retrans: u64,
    omit_taken: bool,
}

impl Collector {
    fn run(mut self) -> Joined {
        let interval = self.spec.interval_seconds;
        let omit = self.spec.omit_seconds;
        let mut tracks: Vec<Track> = self
            .shared
            .iter()
            .map(|s| Track {
                record: StreamRecord::bare(s.id, s.flow, s.role, self.endpoint, 0, 0.0),
                last_bytes: 0,
                last_retrans: 0,
                omit_taken: omit <= 0.0,
            })
            .collect();
        let mut tick = 1u64;
        let mut last_tick_at = 0.0;
        let planned_end = send_deadline(&self.spec, self.started);
        loop {
            let next_tick = (interval > 0.0).then_some(tick as f64 * interval);
            let omit_pending = tracks.iter().any(|t| !t.omit_taken);
            // Waiting streams (UDP rr) move their times without telling this thread, so it
            // looks every 50 ms; otherwise only the test's end needs it (quiet_wait).
            let short = Duration::from_millis(50);
            let pause = if self.wake_when_due.is_empty() && self.wake_at_grace_end.is_empty() {
                quiet_wait(planned_end, Instant::now(), short)
            } else {
                short
            };
            let mut wake = self.elapsed() + pause.as_secs_f64();
            if let Some(t) = next_tick {
                wake = wake.min(t);
            }
            if omit_pending {
                wake = wake.min(omit);
            }
            for w in &self.wake_when_due {
                if let Some(due) = w.due(self.shared[w.stream].wake_by_ns.load(Ordering::Relaxed)) {
                    wake = wake.min(due);
                }
            }
            let now = self.elapsed();
            if wake > now {
                std::thread::sleep(Duration::from_secs_f64(wake - now));
            }
            self.wake_responders_past_grace();
            self.wake_requesters_due();
            let now = self.elapsed();
            let omit_due = omit_pending && now >= omit;
            let tick_due = next_tick.filter(|&t| now >= t);
            // One reading of the counters serves both the warm-up's end and the interval the
            // tick closes, so the intervals after the warm-up add up to the summary's bytes.
            let reading = (omit_due || tick_due.is_some()).then(|| self.read_counters());
            if let (true, Some(r)) = (omit_due, &reading) {
                for (t, i) in tracks.iter_mut().zip(0..) {
                    if !t.omit_taken {
                        t.record.omitted_bytes = r.bytes[i];
                        t.record.omitted_retransmits = self.tcp_info(i).map(|x| x.total_retransmits);
                        // When the count was really taken (the thread may wake late): the
                        // summary's time after the warm-up starts here, not at -O.
                        t.record.omitted_seconds = Some(r.at);
                        t.omit_taken = true;
                    }
                }
            }
            let all_done = self.shared.iter().all(|s| s.done.load(Ordering::Acquire));
            if all_done {
                let (latency, connect_latency, wakeups) = self.finish(&mut tracks, last_tick_at, interval);
                let records = tracks.into_iter().map(|t| t.record).collect();
                return Joined { records, latency, connect_latency, wakeups };
            }
            if let (Some(t), Some(r)) = (tick_due, &reading) {
                // The counters were read after the tick when this thread woke late (a busy
                // machine): the interval ends when they were read, as iperf3's do, or the
                // bytes of the delay would count at the nominal interval's rate. The next
                // tick stays on the nominal schedule.
                self.close_interval(&mut tracks, last_tick_at, r, t, None);
                last_tick_at = r.at;
                tick += 1;
            }
        }
    }

    fn elapsed(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// Every stream's byte count, with the time they were read. The loads are bracketed by
    /// two clock readings and taken again when the thread was preempted between them: a
    /// count read at one instant and timed at another (a busy machine once put 4 ms between
    /// them) gives a rate, and a warm-up end, that no interval agrees with.
    fn read_counters(&self) -> CounterReading {
        let mut tries = 0;
        loop {
            let before = self.elapsed();
            let bytes: Vec<u64> = self.shared.iter().map(|s| s.bytes.load(Ordering::Acquire)).collect();
            let after = self.elapsed();
            tries += 1;
            if after - before <= COUNTER_READ_SPAN || tries == COUNTER_READ_TRIES {
                return CounterReading { at: (before + after) / 2.0, bytes };
            }
        }
    }

    /// Shuts the read side of every UDP rr responder whose grace has passed (at most one wake-up
    /// of this thread, 50 ms, after it), so its blocking receive returns and it ends.
    fn wake_responders_past_grace(&mut self) {
        let Self { shared, wake_at_grace_end, .. } = self;
        wake_at_grace_end.retain(|(i, socket)| {
            let due = shared[*i].receive_deadline().is_some_and(|d| Instant::now() >= d);
            if due {
                let _ = socket.shutdown(Shutdown::Read);
            }
            !due
        });
    }

    /// Wakes every UDP rr requester whose wake-by time has passed.
    fn wake_requesters_due(&mut self) {
        let now = self.elapsed();
        let Self { shared, wake_when_due, .. } = self;
        for w in wake_when_due.iter_mut() {
            let stream = &shared[w.stream];
            let ns = stream.wake_by_ns.load(Ordering::Relaxed);
            if w.due(ns).is_some_and(|due| now >= due) {
                stream.wake_waiter();
                w.woken = Some((ns, now));
            }
        }
    }

    fn tcp_info(&self, i: usize) -> Option<netchar_sys::tcp::TcpInfo> {
        self.info_sockets[i].as_ref().and_then(|s| netchar_sys::tcp::tcp_info(s.as_fd()).ok())
    }

    /// Records one interval, from `start` to the reading's time, for every stream still running
    /// at `start`, and sends it live. With `final_ends`, each stream's interval ends at its own
    /// last byte instead. `nominal_end` is the tick the interval closes for: whether
    /// the interval lies inside the `--omit` warm-up is judged on the schedule.
    fn close_interval(
        &self,
        tracks: &mut [Track],
        start: f64,
        reading: &CounterReading,
        nominal_end: f64,
        final_ends: Option<&[f64]>,
    ) {
        let end = reading.at;
        let mut live = IntervalRecord { start, end, omitted: false, streams: Vec::new(), sum: Vec::new() };
        for (i, t) in tracks.iter_mut().enumerate() {
            if self.udp {
                // UDP workers close their own intervals; pass on what they published.
                let fresh =
                    self.shared[i].fresh_intervals.lock().map(|mut v| std::mem::take(&mut *v)).unwrap_or_default();
                // (Each interval's `omitted` is taken from its own samples when it is sent.)
                for sample in fresh {
                    live.streams.push(netchar_model::IntervalStream {
                        id: t.record.id,
                        flow: t.record.flow,
                        role: t.record.role,
                        sample,
                    });
                }
                continue;
            }
            let stream_end = final_ends.map_or(end, |e| e[i].max(start));
            let bytes_now = reading.bytes[i];
            let info = self.tcp_info(i);
            let bytes = bytes_now - t.last_bytes;
            let retransmits = info.map(|x| {
                let r = x.total_retransmits.saturating_sub(t.last_retrans);
                t.last_retrans = x.total_retransmits;
                r
            });
            let sample = StreamInterval {
                start,
                end: stream_end,
                bytes,
                bits_per_second: bits_per_second(bytes, stream_end - start),
                omitted: nominal_end.min(stream_end) <= self.spec.omit_seconds + 1e-9 && self.spec.omit_seconds > 0.0,
                retransmits,
                cwnd_bytes: info.map(|x| x.cwnd_bytes),
                rtt_us: info.map(|x| x.rtt_us),
                rttvar_us: info.map(|x| x.rttvar_us),
                udp_sent: None,
                udp_received: None,
                rr: None,
            };
            t.last_bytes = bytes_now;
            let merge = final_ends.is_some()
                && self.spec.interval_seconds > 0.0
                && (stream_end - start) < TAIL_MERGE_SHARE * self.spec.interval_seconds
                && !t.record.intervals.is_empty();
            if merge {
                let prev = t.record.intervals.last_mut().expect("checked non-empty");
                prev.bytes += sample.bytes;
                prev.end = sample.end;
                prev.bits_per_second = bits_per_second(prev.bytes, prev.end - prev.start);
                if let Some(r) = sample.retransmits {
                    *prev.retransmits.get_or_insert(0) += r;
                }
                continue;
            }
            if final_ends.is_some() && bytes == 0 && stream_end - start <= 0.0 {
                continue;
            }
            live.omitted |= sample.omitted;
            live.streams.push(netchar_model::IntervalStream {
                id: t.record.id,
                flow: t.record.flow,
                role: t.record.role,
                sample: sample.clone(),
            });
            t.record.intervals.push(sample);
        }
        let Some(tx) = &self.live else { return };
        if live.streams.is_empty() {
            return;
        }
        if !self.udp {
            live.sum = TestResult::sum_streams(&live.streams, live.end - live.start);
            let _ = tx.send(live);
            return;
        }
        // UDP and rr workers publish when they cross a boundary, which may be after this tick
        // (a worker that was waiting): one record per interval the samples name, in order,
        // never two of a stream's intervals summed under one tick.
        let mut samples = live.streams;
        samples.sort_by(|a, b| a.sample.start.total_cmp(&b.sample.start));
        for group in samples.chunk_by(|a, b| a.sample.start == b.sample.start) {
            let start = group[0].sample.start;
            let end = group.iter().map(|s| s.sample.end).fold(start, f64::max);
            let mut record = IntervalRecord {
                start,
                end,
                omitted: group.iter().any(|s| s.sample.omitted),
                streams: group.to_vec(),
                sum: Vec::new(),
            };
            record.sum = TestResult::sum_streams(&record.streams, end - start);
            let _ = tx.send(record);
        }
    }

    fn finish(
        &self,
        tracks: &mut [Track],
        last_tick_at: f64,
        interval: f64,
    ) -> (Option<Distribution>, Option<Distribution>, Option<Distribution>) {
        let mut latency: Option<Distribution> = None;
        let mut connects: Option<Distribution> = None;
        let mut wakeups: Option<Distribution> = None;
        let ends: Vec<f64> = self.shared.iter().map(|s| s.end_ns.load(Ordering::Acquire) as f64 * 1e-9).collect();
        let latest = ends.iter().copied().fold(last_tick_at, f64::max);
        if interval > 0.0 {
            // The workers are done: their counts are final, read at the last byte.
            let last = CounterReading { at: latest, ..self.read_counters() };
            self.close_interval(tracks, last_tick_at, &last, latest, Some(&ends));
        }
        for (i, t) in tracks.iter_mut().enumerate() {
            t.record.bytes = self.shared[i].bytes.load(Ordering::Acquire);
            t.record.seconds = ends[i];
            let start_ns = self.shared[i].start_ns.load(Ordering::Acquire);
            t.record.started_seconds = (start_ns > 0).then_some(start_ns as f64 * 1e-9);
            t.record.retransmits = self.tcp_info(i).map(|x| x.total_retransmits);
            t.record.cpu = self.shared[i].cpu.load(Ordering::Acquire).checked_sub(1).map(|c| c as usize);
            t.record.zerocopy = self.shared[i].zerocopy.lock().ok().and_then(|mut z| z.take());
            t.record.receive_method =
                self.shared[i].receive_method.lock().ok().and_then(|mut m| m.take()).map(str::to_string);
            t.record.receive_low_water =
                Some(self.shared[i].receive_low_water.load(Ordering::Acquire)).filter(|&b| b > 0);
            t.record.verify = self.shared[i].integrity.lock().ok().and_then(|mut v| v.take());
            if let Some(f) = self.shared[i].udp_final.lock().ok().and_then(|mut g| g.take()) {
                t.record.udp_sent = f.sent;
                t.record.udp_received = f.received;
                t.record.rr = f.rr;
                t.record.intervals = f.intervals;
                if let Some(d) = f.latency {
                    latency.get_or_insert_with(Distribution::new).merge(&d);
                }
                if let Some(d) = f.connect_latency {
                    connects.get_or_insert_with(Distribution::new).merge(&d);
                }
                if let Some(d) = f.wakeups {
                    wakeups.get_or_insert_with(Distribution::new).merge(&d);
                }
            }
            if !t.omit_taken {
                t.record.omitted_bytes = t.record.bytes;
                t.record.omitted_retransmits = t.record.retransmits;
            }
        }
        (latency, connects, wakeups)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netchar_model::TestKind;
    use std::net::TcpListener;

    #[test]
    fn quiet_waits_are_long_in_the_middle_of_a_timed_test_and_short_near_its_end_or_without_one() {
        let (now, short) = (Instant::now(), Duration::from_millis(20));
        let ms = Duration::from_millis;
        assert_eq!(quiet_wait(Some(now + Duration::from_secs(10)), now, short), QUIET_WAIT_MAX);
        // It ends the margin before the planned end ...
        assert_eq!(quiet_wait(Some(now + ms(150)), now, short), ms(100));
        // ... and within it, or past the end, or with no planned end (-n), the short wait.
        assert_eq!(quiet_wait(Some(now + ms(60)), now, short), short);
        assert_eq!(quiet_wait(Some(now), now + ms(5), short), short);
        assert_eq!(quiet_wait(None, now, short), short);
    }

    /// Aborts each plane in turn on a thread of its own and sends each one's first error once
    /// all its workers are done and joined (a plane that never wakes sends nothing).
    fn abort_in_turn(planes: Vec<DataPlane>) -> mpsc::Receiver<Option<String>> {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for plane in planes {
                plane.abort();
                while !plane.all_done() {
                    std::thread::sleep(Duration::from_millis(5));
                }
                let error = plane.first_error();
                plane.join();
                tx.send(error).unwrap();
            }
        });
        rx
    }

    /// TCP rr workers block in reads with no timeout: an abort must still end them when the
    /// peer neither answers nor closes (a stopped client, a hung server).
    #[test]
    fn abort_wakes_tcp_rr_workers_whose_peer_went_quiet() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut spec = TestSpec::rr_default();
        assert_eq!(spec.kind, TestKind::Rr);
        spec.end = netchar_model::EndCondition::Seconds(600.0);
        spec.interval_seconds = 0.0;
        let plane = |role, endpoint, socket| {
            let cfg = DataPlaneConfig {
                spec: spec.clone(),
                datagrams: DatagramFormatKind::Native,
                endpoint,
                cpu: None,
                interleave_senders: false,
            };
            let stream = DataStream { id: 1, flow: Flow::Up, role, socket: DataSocket::Tcp(socket) };
            DataPlane::start(cfg, vec![stream], None, Instant::now()).unwrap()
        };
        // A requester whose responder never answers, and a responder whose requester never asks:
        // the test holds the other end of each connection open and silent.
        let requester_socket = TcpStream::connect(addr).unwrap();
        let (_silent_responder, _) = listener.accept().unwrap();
        let _silent_requester = TcpStream::connect(addr).unwrap();
        let (responder_socket, _) = listener.accept().unwrap();
        let requester = plane(Role::Sender, Endpoint::Client, requester_socket);
        let responder = plane(Role::Receiver, Endpoint::Server, responder_socket);
        std::thread::sleep(Duration::from_millis(100));
        assert!(!requester.all_done() && !responder.all_done(), "both wait for their silent peer");
        let rx = abort_in_turn(vec![requester, responder]);
        // A generous bound only so that a regression fails instead of hanging the suite.
        for end in ["requester", "responder"] {
            let error = rx.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|_| panic!("the {end} never woke"));
            assert_eq!(error, None, "an aborted {end} reports no error");
        }
    }

    /// The UDP rr requester waits with no timer either: with its one request unanswered and
    /// its --timeout far off, only the abort can end its receive, and it does.
    #[test]
    fn abort_wakes_a_udp_rr_requester_whose_peer_went_quiet() {
        let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket.connect(silent.local_addr().unwrap()).unwrap();
        let mut spec = TestSpec::rr_default();
        spec.end = netchar_model::EndCondition::Seconds(600.0);
        spec.interval_seconds = 0.0;
        let rr = spec.rr.as_mut().unwrap();
        (rr.udp, rr.timeout_seconds) = (true, 60.0);
        let cfg = DataPlaneConfig {
            spec,
            datagrams: DatagramFormatKind::Native,
            endpoint: Endpoint::Client,
            cpu: None,
            interleave_senders: false,
        };
        let stream = DataStream { id: 1, flow: Flow::Up, role: Role::Sender, socket: DataSocket::Udp(socket) };
        let plane = DataPlane::start(cfg, vec![stream], None, Instant::now()).unwrap();
        let mut request = [0u8; 64];
        silent.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        assert!(silent.recv(&mut request).is_ok(), "the requester sent its request");
        std::thread::sleep(Duration::from_millis(100));
        assert!(!plane.all_done(), "it waits for the answer");
        let rx = abort_in_turn(vec![plane]);
        let error = rx.recv_timeout(Duration::from_secs(30)).expect("the requester never woke");
        assert_eq!(error, None, "an aborted requester reports no error");
    }
}
