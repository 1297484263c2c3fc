//! Request/response workers: the requester (client) keeps `--inflight` transactions
//! outstanding and times each round trip; the responder (server) answers each request with a
//! response of the asked size.
//!
//! Every transaction's round trip goes into an HDR histogram (≤ 0.1% value error); the
//! requester closes its own intervals like the UDP workers. `--busy-poll` spins on
//! non-blocking receives: on a VM most of a blocking round trip between cores is the halted
//! vCPU waking up (reference/perf.md, technique 8).

use super::integrity::{DatagramCheck, StreamCheck, TestPayload, RESPONSE_KEY, RR_SLICE};
use super::udp::realtime_at;
use super::{send_deadline, Controls, DatagramFormatKind, StreamShared, POLL};
use crate::is_retry;
use netchar_model::{CdfPoint, LatencyUs, OneWayFigures, RrFigures, RrOptions, StreamInterval, TestSpec};
use netchar_stats::distribution::Distribution;
use netchar_sys::clock::{Stamp, Stopwatch};
use netchar_sys::{direct, udp};
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Longest blocking wait before the flags are checked again.
const WAIT: Duration = Duration::from_millis(10);

/// Converts a latency distribution (ns) into the reported microsecond figures.
pub(crate) fn latency_us(d: &Distribution) -> LatencyUs {
    let us = |ns: u64| ns as f64 / 1e3;
    LatencyUs {
        min: us(d.min()),
        mean: d.mean() / 1e3,
        stddev: d.stddev() / 1e3,
        p50: us(d.quantile(0.5)),
        p90: us(d.quantile(0.9)),
        p99: us(d.quantile(0.99)),
        p999: us(d.quantile(0.999)),
        max: us(d.max()),
    }
}

/// The CDF points of a latency distribution (ns) in microseconds.
pub(crate) fn latency_cdf(d: &Distribution) -> Vec<CdfPoint> {
    d.cdf_points().into_iter().map(|(quantile, ns)| CdfPoint { quantile, us: ns as f64 / 1e3 }).collect()
}

/// How many round trips the hot loops keep before recording them, at most ([`Ledger::settle_due`]).
const SETTLE_EVERY: usize = 256;
/// How long, at most, a read round trip waits to be recorded and counted.
const SETTLE_WITHIN: Duration = Duration::from_millis(5);

/// The requester's running figures and its intervals. Each round trip is recorded once, into
/// the current interval's histogram, which is added to the whole run's when the interval closes
/// (and at the end): one histogram update per transaction instead of two.
///
/// The rr loops hand their round trips over as they read them ([`Ledger::completed`]: one
/// write into a short list) and record them in batches ([`Ledger::settle_due`]). On one core
/// the other end's and the kernel's work runs between two transactions, so the histogram, the
/// interval bookkeeping and the shared counters are likely out of the nearest caches by the
/// next one (the likely reason; no PMU counted the misses); touched once per batch instead of
/// once per transaction, the same work cost 0.2-1.0% less CPU per TCP transaction
/// (bench/builds_pair.sh, both orders; bench/README.md).
struct Ledger {
    /// Every round trip of the intervals closed so far; all of them after `finish_all`.
    whole: Distribution,
    current: Distribution,
    /// Round trips (ns) read but not yet recorded, oldest first.
    pending: Vec<u64>,
    /// Something (a round trip, a late answer) came since the last settling.
    unsettled: bool,
    /// When the pending round trips are recorded at the latest: SETTLE_WITHIN after the last
    /// settling, or the current interval's end if sooner (None: at the first answer).
    settle_by: Option<Instant>,
    /// Round trips recorded (the pending ones are not yet counted).
    transactions: u64,
    lost: u64,
    late: u64,
    at_start: (u64, u64, u64),
    interval: f64,
    index: u64,
    closed: Vec<StreamInterval>,
    /// What a peer's answers said beyond the round trips (RrFraming::finish), for the totals.
    one_way: Option<OneWayFigures>,
}

impl Ledger {
    fn new(spec: &TestSpec) -> Self {
        Self {
            whole: Distribution::new(),
            current: Distribution::new(),
            pending: Vec::with_capacity(SETTLE_EVERY + spec.rr.as_ref().map_or(1, |o| o.inflight as usize)),
            unsettled: false,
            settle_by: None,
            transactions: 0,
            lost: 0,
            late: 0,
            at_start: (0, 0, 0),
            interval: spec.interval_seconds,
            index: 0,
            closed: Vec::new(),
            one_way: None,
        }
    }

    fn record(&mut self, rtt: Duration) {
        self.record_ns(rtt.as_nanos() as u64);
    }

    fn record_ns(&mut self, ns: u64) {
        self.current.record(ns);
        self.transactions += 1;
    }

    /// A round trip just read, recorded at the next settling.
    #[inline]
    fn completed(&mut self, ns: u64) {
        self.pending.push(ns);
        self.unsettled = true;
    }

    /// An answer that matched no outstanding request.
    fn late_answer(&mut self) {
        self.late += 1;
        self.unsettled = true;
    }

    /// Settles ([`Ledger::settle`]) when SETTLE_EVERY round trips wait, when they have waited
    /// long enough, or when the current interval ended. Settling at the first answer past an
    /// interval's end places every round trip in the interval it was read in, as recording each
    /// at once did.
    #[inline]
    fn settle_due(
        &mut self,
        end: Instant,
        started: Instant,
        shared: &StreamShared,
        interval_bytes: &mut u64,
        bytes: u64,
    ) {
        if !self.unsettled || (self.pending.len() < SETTLE_EVERY && self.settle_by.is_some_and(|by| end < by)) {
            return;
        }
        self.settle(end, started, shared, interval_bytes, bytes);
    }

    /// Records the pending round trips, closes the intervals ended by `end` (the last answer's
    /// time, or now when woken with nothing read) and publishes the requester's counts, `bytes`
    /// and the transactions recorded, which the collector, the report and the peer (the sender
    /// totals) read.
    #[cold]
    fn settle(&mut self, end: Instant, started: Instant, shared: &StreamShared, interval_bytes: &mut u64, bytes: u64) {
        self.record_pending();
        self.unsettled = false;
        self.close_due((end - started).as_secs_f64(), shared, interval_bytes);
        let soon = end + SETTLE_WITHIN;
        self.settle_by = Some(self.next_close(started).map_or(soon, |c| c.min(soon)));
        shared.bytes.store(bytes, Ordering::Release);
        shared.packets.store(self.transactions, Ordering::Release);
    }

    fn record_pending(&mut self) {
        for &ns in &self.pending {
            self.current.record(ns);
        }
        self.transactions += self.pending.len() as u64;
        self.pending.clear();
    }

    fn figures(&self, d: &Distribution, counts: (u64, u64, u64), seconds: f64) -> RrFigures {
        RrFigures {
            transactions: counts.0,
            transactions_per_second: if seconds > 0.0 { counts.0 as f64 / seconds } else { 0.0 },
            lost: counts.1,
            late: counts.2,
            latency_us: latency_us(d),
            connect_latency_us: None,
            receive_wakeup_us: None,
            latency_cdf: Vec::new(),
            one_way: None,
        }
    }

    fn sample(&self, start: f64, end: f64, bytes: u64) -> StreamInterval {
        let counts = (self.transactions - self.at_start.0, self.lost - self.at_start.1, self.late - self.at_start.2);
        StreamInterval {
            rr: Some(self.figures(&self.current, counts, end - start)),
            ..StreamInterval::bare(start, end, bytes, 0.0)
        }
    }

    /// When the current interval ends (None without intervals).
    fn next_close(&self, started: Instant) -> Option<Instant> {
        (self.interval > 0.0).then(|| started + Duration::from_secs_f64((self.index + 1) as f64 * self.interval))
    }

    /// Closes every interval that ended by `elapsed`.
    fn close_due(&mut self, elapsed: f64, shared: &StreamShared, bytes: &mut u64) {
        if self.interval <= 0.0 {
            return;
        }
        while (self.index + 1) as f64 * self.interval <= elapsed {
            let start = self.index as f64 * self.interval;
            let iv = self.sample(start, start + self.interval, *bytes);
            shared.push_interval(iv.clone());
            self.closed.push(iv);
            self.whole.merge(&self.current);
            self.current.reset();
            self.at_start = (self.transactions, self.lost, self.late);
            *bytes = 0;
            self.index += 1;
        }
    }

    fn finish(self, shared: &StreamShared, end: f64, bytes: u64) {
        self.finish_with_connects(shared, end, bytes, None);
    }

    fn finish_with_connects(self, shared: &StreamShared, end: f64, bytes: u64, connects: Option<Distribution>) {
        self.finish_all(shared, end, bytes, connects, None);
    }

    fn finish_all(
        mut self,
        shared: &StreamShared,
        end: f64,
        bytes: u64,
        connects: Option<Distribution>,
        wakeups: Option<Distribution>,
    ) {
        debug_assert!(self.pending.is_empty(), "the requester settles its last round trips before finishing");
        if self.interval > 0.0 {
            let start = self.index as f64 * self.interval;
            let last = self.sample(start, end.max(start), bytes);
            super::close_last_interval(&mut self.closed, last, self.interval, shared);
        }
        self.whole.merge(&self.current);
        let mut totals = self.figures(&self.whole, (self.transactions, self.lost, self.late), end);
        totals.connect_latency_us = connects.as_ref().map(latency_us);
        totals.receive_wakeup_us = wakeups.as_ref().filter(|d| d.count() > 0).map(latency_us);
        totals.one_way = self.one_way.take();
        shared.set_rr_final(totals, self.closed, self.whole, connects, wakeups);
    }
}

/// What an rr worker's requests and responses are (`--payload`) and whether it compares what
/// it reads (`--verify`). Without a payload in the spec they are the constant bytes `q` and
/// `r`; with one, each direction of a connection is a stream of the generator (TCP: by byte
/// offset; UDP: by the request's sequence key), the responses under their own key
/// ([`RESPONSE_KEY`]) unless the peer echoes, when they are the requests.
#[derive(Clone, Copy)]
pub(super) struct RrBytes<'a> {
    pub(super) payload: &'a TestPayload,
    /// The peer returns each request as its response (the echo service).
    pub(super) echoed: bool,
}

impl<'a> RrBytes<'a> {
    fn requests_key(id: u32) -> u32 {
        id
    }

    fn responses_key(&self, id: u32) -> u32 {
        if self.echoed {
            id
        } else {
            id | RESPONSE_KEY
        }
    }

    /// The stream generator, when requests and responses are made by it (TCP).
    fn stream(&self) -> Option<&netchar_wire::payload::StreamPayload> {
        self.payload.stream.as_deref().filter(|_| self.payload.rr_generated)
    }

    /// The datagram generator, when requests and responses are made by it (UDP).
    fn datagrams(&self) -> Option<&'a netchar_wire::payload::DatagramPayload> {
        let payload: &'a TestPayload = self.payload;
        payload.datagrams.as_deref().filter(|_| self.payload.rr_generated)
    }

    /// A check of what comes in under `key` over TCP, with `--verify`.
    fn stream_check(&self, key: u32) -> Option<StreamCheck> {
        let p = self.payload.stream.clone().filter(|_| self.payload.verify && self.payload.rr_generated)?;
        Some(StreamCheck::new(p, key))
    }

    /// A check of what comes in under `key` over UDP, behind `width` bytes of sequence key.
    fn datagram_check(&self, key: u32, width: usize) -> Option<DatagramCheck> {
        let p = self.payload.datagrams.clone().filter(|_| self.payload.verify && self.payload.rr_generated)?;
        Some(DatagramCheck::new(p, key, width))
    }
}

/// Writes `len` bytes of stream `key` from `offset` of the generator, in slices.
fn write_generated(
    w: &mut &TcpStream,
    payload: &netchar_wire::payload::StreamPayload,
    key: u32,
    offset: u64,
    len: usize,
    controls: &Controls,
) -> io::Result<()> {
    let mut done = 0;
    while done < len {
        let piece = (len - done).min(payload.max_len());
        write_all_retrying(w, payload.slice(key, offset + done as u64, piece), controls)?;
        done += piece;
    }
    Ok(())
}

/// Requests and responses of one constant byte (no `--payload`), of any length up to
/// `-l`/`--response`'s 16 MiB, from a buffer of at most [`RR_SLICE`]: a responder holding whole
/// answers held 64 of them, so one `--response 16Mi` client made a server fill 1 GiB.
struct ConstantBytes(Vec<u8>);

impl ConstantBytes {
    /// Enough of `byte` to write `longest` bytes in one piece when that is at most RR_SLICE.
    fn new(byte: u8, longest: usize) -> Self {
        Self(vec![byte; longest.clamp(1, RR_SLICE)])
    }

    /// Writes `len` of the bytes with `write`, a piece of at most the buffer at a time (one
    /// call for the usual short request or batch of answers).
    fn write_with(&self, mut len: usize, mut write: impl FnMut(&[u8]) -> io::Result<()>) -> io::Result<()> {
        while len > 0 {
            let piece = len.min(self.0.len());
            write(&self.0[..piece])?;
            len -= piece;
        }
        Ok(())
    }
}

/// The echo pattern's pauses: after every `every` requests, wait `pause` before the next.
struct Pauses {
    every: Option<u64>,
    pause: Duration,
    last: u64,
}

impl Pauses {
    fn new(opts: &RrOptions) -> Self {
        Self { every: opts.pause_every, pause: Duration::from_secs_f64(opts.pause_seconds), last: 0 }
    }

    /// Sleeps if request number `issued` starts a new burst; true when it slept.
    fn before(&mut self, issued: u64) -> bool {
        if let Some(n) = self.every {
            if issued > 0 && issued.is_multiple_of(n) && self.last != issued {
                self.last = issued;
                std::thread::sleep(self.pause);
                return true;
            }
        }
        false
    }
}

/// When the requester must stop issuing requests.
struct Ending {
    deadline: Option<Instant>,
    budget: Option<u64>,
}

impl Ending {
    /// `-t` gives the senders' deadline; `-n` counts transactions for rr, split across
    /// connections like bytes (each is None for the other end condition).
    fn new(spec: &TestSpec, started: Instant, id: u32) -> Self {
        Self { deadline: send_deadline(spec, started), budget: spec.byte_budget(id) }
    }

    /// `now` is the caller's latest clock reading: the hot loops read the clock once per send
    /// and once per receive (both needed for the round trip) and reuse those readings here.
    fn reached(&self, controls: &Controls, issued: u64, now: Instant) -> bool {
        controls.stop_senders.load(Ordering::Relaxed)
            || self.deadline.is_some_and(|d| now >= d)
            || self.budget.is_some_and(|b| issued >= b)
    }
}

/// The TCP requester: requests and responses are in order, so the send times form a queue.
pub(super) fn tcp_requester(
    shared: &StreamShared,
    controls: &Controls,
    spec: &TestSpec,
    started: Instant,
    socket: &TcpStream,
    made: RrBytes<'_>,
) -> io::Result<()> {
    let opts = spec.rr.clone().unwrap_or_default();
    socket.set_nodelay(true)?;
    set_waiting(socket, opts.busy_poll)?;
    let (req, resp) = (opts.request_bytes as usize, opts.response_bytes as usize);
    let request = ConstantBytes::new(b'q', req);
    let mut buf = vec![0u8; (resp * opts.inflight as usize).max(resp).min(1 << 20)];
    let ending = Ending::new(spec, started, shared.id);
    let mut ledger = Ledger::new(spec);
    let mut sent_at: VecDeque<Stamp> = VecDeque::with_capacity(opts.inflight as usize);
    let mut pauses = Pauses::new(&opts);
    let (mut issued, mut partial, mut bytes, mut interval_bytes) = (0u64, 0usize, 0u64, 0u64);
    let mut writer = socket;
    let mut end = started;
    // One clock reading per transaction: the moment a response is read ends its round trip and
    // starts the next request's, which is sent before any bookkeeping. `fresh`: no request was
    // stamped with `now` yet (a second request of a burst reads the clock again). The readings
    // are the CPU's counter where the kernel keeps time with it (netchar_sys::clock).
    let mut watch = Stopwatch::new();
    let mut now = watch.stamp();
    let mut fresh = true;
    let generated = made.stream();
    let mut check = made.stream_check(made.responses_key(shared.id));
    let outcome = loop {
        let stopping = ending.reached(controls, issued, now.at);
        while !stopping && sent_at.len() < opts.inflight as usize && !ending.reached(controls, issued, now.at) {
            if pauses.before(issued) || !fresh {
                now = watch.stamp();
            }
            fresh = false;
            sent_at.push_back(now);
            match generated {
                Some(g) => {
                    let key = RrBytes::requests_key(shared.id);
                    write_generated(&mut writer, g, key, issued * req as u64, req, controls)?
                }
                None => request.write_with(req, |b| write_all_retrying(&mut writer, b, controls))?,
            }
            issued += 1;
        }
        // With the next request on its way, record the answers read so far when due: no round
        // trip includes this work.
        ledger.settle_due(end, started, shared, &mut interval_bytes, bytes);
        if sent_at.is_empty() {
            break Ok(());
        }
        if controls.abort.load(Ordering::Relaxed) {
            break Ok(());
        }
        match direct::recv(socket.as_fd(), &mut buf) {
            Ok(0) if controls.abort.load(Ordering::Relaxed) => break Ok(()),
            Ok(0) => break Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the responder closed the connection")),
            Ok(n) => {
                now = watch.stamp();
                fresh = true;
                if let Some(c) = check.as_mut() {
                    c.check(bytes, &buf[..n], || (now.at - started).as_secs_f64());
                }
                partial += n;
                bytes += n as u64;
                interval_bytes += n as u64;
                while partial >= resp {
                    partial -= resp;
                    if let Some(t) = sent_at.pop_front() {
                        ledger.completed(watch.nanos(t, now));
                    }
                }
                end = now.at;
            }
            Err(e) if is_retry(&e) => {
                now = watch.stamp();
                fresh = true;
            }
            Err(e) => break Err(e),
        }
    };
    let _ = socket.shutdown(std::net::Shutdown::Write);
    // The round trips read last, and the final counts.
    ledger.settle(end, started, shared, &mut interval_bytes, bytes);
    let end_s = end.saturating_duration_since(started);
    shared.end_ns.store(end_s.as_nanos() as u64, Ordering::Release);
    ledger.finish(shared, end_s.as_secs_f64(), interval_bytes);
    if let Some(c) = check {
        shared.set_integrity(c.finish());
    }
    outcome
}

/// Writes all of `data`, by the system call itself (netchar_sys::direct: no cancellation
/// wrapper around each send).
fn write_all_retrying(w: &mut &TcpStream, mut data: &[u8], controls: &Controls) -> io::Result<()> {
    while !data.is_empty() {
        match direct::send(w.as_fd(), data) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "the socket accepted no data")),
            Ok(n) => data = &data[n..],
            Err(e) if is_retry(&e) => {
                if controls.abort.load(Ordering::Relaxed) {
                    return Err(io::Error::new(io::ErrorKind::Interrupted, "aborted"));
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads block with no timeout: a receive timeout arms and cancels a kernel timer on every read
/// that waits, once per transaction on each end, which sockperf does not pay. The responses (or
/// the requester's EOF) always come, and [`super::DataPlane::abort`] shuts the read side down to
/// wake a worker whose peer went quiet. Writes keep a timeout: they wait only when the peer stops
/// reading, and then the abort flag must be seen.
fn set_waiting(socket: &TcpStream, busy_poll: bool) -> io::Result<()> {
    if busy_poll {
        socket.set_nonblocking(true)
    } else {
        socket.set_read_timeout(None)?;
        socket.set_write_timeout(Some(POLL))
    }
}

/// The TCP responder: answers every whole request with one response, several at once when
/// requests arrive pipelined.
pub(super) fn tcp_responder(
    shared: &StreamShared,
    controls: &Controls,
    spec: &TestSpec,
    socket: &TcpStream,
    made: RrBytes<'_>,
) -> io::Result<()> {
    let opts = spec.rr.clone().unwrap_or_default();
    socket.set_nodelay(true)?;
    set_waiting(socket, opts.busy_poll)?;
    let (req, resp) = (opts.request_bytes as usize, opts.response_bytes as usize);
    let batch = 64usize;
    let responses = ConstantBytes::new(b'r', resp * batch);
    let mut buf = vec![0u8; (req * batch).clamp(4096, 1 << 20)];
    let (mut partial, mut answered, mut bytes) = (0usize, 0u64, 0u64);
    let mut writer = socket;
    let generated = made.stream();
    let mut check = made.stream_check(RrBytes::requests_key(shared.id));
    let outcome = 'serve: loop {
        if controls.abort.load(Ordering::Relaxed) {
            break Ok(false);
        }
        match direct::recv(socket.as_fd(), &mut buf) {
            Ok(0) => break Ok(true),
            Ok(n) => {
                if let Some(c) = check.as_mut() {
                    c.check(bytes, &buf[..n], || shared.started.elapsed().as_secs_f64());
                }
                partial += n;
                bytes += n as u64;
                let mut due = partial / req;
                partial %= req;
                while due > 0 {
                    let k = due.min(batch);
                    let written = match generated {
                        Some(g) => {
                            let key = made.responses_key(shared.id);
                            write_generated(&mut writer, g, key, answered * resp as u64, k * resp, controls)
                        }
                        None => responses.write_with(k * resp, |b| write_all_retrying(&mut writer, b, controls)),
                    };
                    if let Err(e) = written {
                        break 'serve Err(e);
                    }
                    due -= k;
                    answered += k as u64;
                }
                shared.bytes.store(bytes, Ordering::Release);
                shared.packets.store(answered, Ordering::Release);
            }
            Err(e) if is_retry(&e) => {}
            Err(e) => break Err(e),
        }
    };
    if let Some(c) = check {
        shared.set_integrity(c.finish());
    }
    // (An aborted responder leaves its time unset, as the requester's EOF never came.)
    if outcome? {
        shared.end_ns.store(shared.started.elapsed().as_nanos() as u64, Ordering::Release);
    }
    Ok(())
}

/// Low bytes of the sequence number, as many as the payloads carry (up to 8, little-endian).
fn key_width(opts: &RrOptions) -> usize {
    (opts.request_bytes.min(opts.response_bytes) as usize).clamp(1, 8)
}

fn key_of(bytes: &[u8], width: usize) -> u64 {
    let mut k = [0u8; 8];
    k[..width].copy_from_slice(&bytes[..width]);
    u64::from_le_bytes(k)
}

/// A peer protocol's own UDP rr requests (irtt's), for the requester to send in place of
/// netchar's: the protocol's header around the sequence key, its schedule, its signature, and
/// what its answers say beyond the round trip. Given to the data plane through
/// [`super::StreamOptions::rr_framing`] once the protocol's setup has run (its token known).
pub trait RrFraming: Send {
    /// A request as it goes out but for its sequence key: the protocol's header, at the
    /// request's length.
    fn template(&self) -> Vec<u8>;
    /// Where requests carry the sequence key and answers return it, and its width (bytes,
    /// little-endian).
    fn key_at(&self) -> (usize, usize);
    /// One request per interval on a fixed schedule (the n-th due at the start plus n
    /// intervals), whatever the answers; None: as many as `--inflight` keeps outstanding.
    fn interval(&self) -> Option<Duration>;
    /// Finishes a request once its key is in (irtt: signs it).
    fn seal(&mut self, _request: &mut [u8]) {}
    /// Whether a datagram read is the peer's answer (irtt: its signature and token); one that is
    /// not is ignored, as a stray datagram on the socket.
    fn accepts(&mut self, _answer: &[u8]) -> bool {
        true
    }
    /// The answer to request `sequence`, sent and read at these realtime nanoseconds.
    fn answered(&mut self, sequence: u64, sent_real_ns: u64, read_real_ns: u64, answer: &[u8]);
    /// After the last answer, of `requests` sent: the datagrams that end the peer's session
    /// (irtt's close), and the one-way figures its answers gave.
    fn finish(&mut self, requests: u64) -> (Vec<Vec<u8>>, Option<OneWayFigures>);
}

/// A framing handed to the data plane for its one requester, taken by it when it starts.
#[derive(Clone)]
pub struct RrFramingSlot(Arc<Mutex<Option<Box<dyn RrFraming>>>>);

impl RrFramingSlot {
    /// A slot holding `framing`.
    pub fn new(framing: Box<dyn RrFraming>) -> Self {
        Self(Arc::new(Mutex::new(Some(framing))))
    }

    pub(super) fn take(&self) -> Option<Box<dyn RrFraming>> {
        self.0.lock().ok().and_then(|mut f| f.take())
    }
}

impl std::fmt::Debug for RrFramingSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RrFramingSlot")
    }
}

/// What the UDP requester sends: netchar's request (the sequence key in front, `--payload`'s
/// bytes after it) or a peer's framing of it.
struct Requests<'a> {
    request: Vec<u8>,
    key_at: usize,
    width: usize,
    mask: u64,
    generated: Option<&'a netchar_wire::payload::DatagramPayload>,
    varies: bool,
    framing: Option<Box<dyn RrFraming>>,
}

impl<'a> Requests<'a> {
    fn new(opts: &RrOptions, made: RrBytes<'a>, id: u32, framing: Option<Box<dyn RrFraming>>) -> Self {
        let (mut request, key_at, width, generated) = match &framing {
            Some(f) => {
                let (at, width) = f.key_at();
                (f.template(), at, width.clamp(1, 8), None)
            }
            None => (vec![b'q'; opts.request_bytes as usize], 0, key_width(opts), made.datagrams()),
        };
        if let Some(g) = generated {
            g.fill(RrBytes::requests_key(id), 0, &mut request, width);
        }
        let mask = if width == 8 { u64::MAX } else { (1u64 << (8 * width)) - 1 };
        let varies = generated.is_some_and(|g| !g.is_constant());
        Self { request, key_at, width, mask, generated, varies, framing }
    }

    /// Request `seq`, ready to send.
    #[inline]
    fn build(&mut self, id: u32, seq: u64) -> &[u8] {
        self.request[self.key_at..self.key_at + self.width].copy_from_slice(&seq.to_le_bytes()[..self.width]);
        if let (true, Some(g)) = (self.varies, self.generated) {
            // A random payload's bytes are the request's: one copy from the ring.
            g.fill(RrBytes::requests_key(id), seq & self.mask, &mut self.request, self.width);
        }
        if let Some(f) = self.framing.as_mut() {
            f.seal(&mut self.request);
        }
        &self.request
    }

    /// The sequence key an answer returns, if it is long enough to carry one.
    #[inline]
    fn key_in(&self, answer: &[u8]) -> Option<u64> {
        (answer.len() >= self.key_at + self.width).then(|| key_of(&answer[self.key_at..], self.width))
    }
}

/// The UDP requester: requests carry the low bytes of their sequence number; a request with
/// no response after `--timeout` is lost, a response that comes later is late. A peer that
/// echoes no key (`datagrams`, DatagramFormatKind::echoes_rr_keys) has each answer taken for
/// the oldest request outstanding, and a format with end marks gets them after the last. A
/// peer's own requests (`framing`: irtt's) carry its header, go out on its schedule, and its
/// answers are read for what they say beyond the round trip.
#[allow(clippy::too_many_arguments)]
pub(super) fn udp_requester(
    shared: &StreamShared,
    controls: &Controls,
    spec: &TestSpec,
    started: Instant,
    socket: &UdpSocket,
    datagrams: DatagramFormatKind,
    made: RrBytes<'_>,
    framing: Option<Box<dyn RrFraming>>,
) -> io::Result<()> {
    let opts = spec.rr.clone().unwrap_or_default();
    let requests = Requests::new(&opts, made, shared.id, framing);
    let paced = requests.framing.as_ref().and_then(|f| f.interval());
    // Receives block with no timeout: a receive timeout arms and cancels a kernel timer on
    // every receive that waits (0.46-0.72 per transaction, bench/rr_counts.sh; netperf 0.001).
    // The requester says instead by when it must be woken (its oldest request's --timeout, its
    // interval's end) and the collector wakes it then (StreamShared::become_waiter); the
    // abort shuts the socket's read side. Where that cannot be set up, the timeout it was; a
    // requester on a schedule sets its timeout to its next request's time (a few a second,
    // not one per transaction of a closed loop).
    let waiter = if opts.busy_poll {
        socket.set_nonblocking(true)?;
        None
    } else {
        let waiter = if paced.is_some() { None } else { shared.become_waiter().ok() };
        let poll = WAIT.min(Duration::from_secs_f64(opts.timeout_seconds));
        socket.set_read_timeout(if waiter.is_some() { None } else { Some(poll) })?;
        waiter
    };
    let mut r = UdpRequester::new(shared, controls, spec, started, socket, datagrams, made, requests, &opts);
    let outcome = loop {
        let stopping = r.ending.reached(controls, r.seq, r.now.at);
        if !stopping {
            if let Err(e) = r.send_due(paced) {
                break Err(e);
            }
        }
        // With the next request on its way, record the answers read so far when due: no round
        // trip includes this work.
        r.ledger.settle_due(r.end, started, shared, &mut r.interval_bytes, r.bytes);
        r.expire();
        if (stopping && r.outstanding.is_empty()) || controls.abort.load(Ordering::Relaxed) {
            break Ok(());
        }
        let expiry = r.outstanding.front().map_or(r.now.at + WAIT, |&(_, t)| t.at + r.timeout);
        if let Some(w) = &waiter {
            // (Nothing outstanding: a send was refused, try again soon.)
            w.wake_by(r.ledger.next_close(started).map_or(expiry, |c| c.min(expiry)));
        } else if let (Some(iv), false) = (paced, opts.busy_poll) {
            let due = if stopping { expiry } else { expiry.min(r.next_due(iv)) };
            let wait = due.saturating_duration_since(r.now.at).clamp(Duration::from_micros(100), WAIT);
            socket.set_read_timeout(Some(wait))?;
        }
        if let Err(e) = r.receive() {
            break Err(e);
        }
    };
    // No wake from here on: it would only interrupt the end marks.
    drop(waiter);
    r.finish(outcome)
}

/// One UDP requester's state over its run (see [`udp_requester`]).
struct UdpRequester<'a> {
    shared: &'a StreamShared,
    controls: &'a Controls,
    started: Instant,
    socket: &'a UdpSocket,
    datagrams: DatagramFormatKind,
    requests: Requests<'a>,
    inflight: usize,
    keyed: bool,
    timeout: Duration,
    check: Option<DatagramCheck>,
    buf: Vec<u8>,
    ending: Ending,
    ledger: Ledger,
    /// (sequence, sent at), oldest first.
    outstanding: VecDeque<(u64, Stamp)>,
    pauses: Pauses,
    stamps: bool,
    wakeups: Distribution,
    seq: u64,
    /// On a schedule: the slot of the next request (slots missed while late are skipped).
    slot: u64,
    bytes: u64,
    interval_bytes: u64,
    end: Instant,
    started_real: u64,
    watch: Stopwatch,
    now: Stamp,
    fresh: bool,
}

impl<'a> UdpRequester<'a> {
    #[allow(clippy::too_many_arguments)]
    fn new(
        shared: &'a StreamShared,
        controls: &'a Controls,
        spec: &TestSpec,
        started: Instant,
        socket: &'a UdpSocket,
        datagrams: DatagramFormatKind,
        made: RrBytes<'a>,
        requests: Requests<'a>,
        opts: &RrOptions,
    ) -> Self {
        let check = if requests.framing.is_some() {
            None
        } else {
            made.datagram_check(made.responses_key(shared.id), requests.width)
        };
        // Kernel receive stamps (--wakeup-stamps) show how much of each round trip was the wait
        // to be woken. Off by default: the kernel then stamps every packet it receives and each
        // answer needs recvmsg with a control message: on one core, 10 alternated rounds gave
        // 56.1k/s with them and 58.5k/s without (~4%), another 10 gave 58.8k/s by recvmsg and
        // 60.3k/s by recv.
        let stamps = opts.wakeup_stamps && udp::enable_rx_timestamps(socket.as_fd()).is_ok();
        let mut watch = Stopwatch::new();
        let now = watch.stamp();
        Self {
            shared,
            controls,
            started,
            socket,
            datagrams,
            // A schedule sends whatever is outstanding; --timeout bounds what is.
            inflight: if requests.framing.as_ref().is_some_and(|f| f.interval().is_some()) {
                usize::MAX
            } else {
                opts.inflight as usize
            },
            keyed: datagrams.echoes_rr_keys(),
            timeout: Duration::from_secs_f64(opts.timeout_seconds),
            check,
            buf: vec![0u8; (opts.response_bytes as usize).max(requests.request.len()).max(64) + 1],
            requests,
            ending: Ending::new(spec, started, shared.id),
            ledger: Ledger::new(spec),
            outstanding: VecDeque::new(),
            pauses: Pauses::new(opts),
            stamps,
            wakeups: Distribution::new(),
            seq: 0,
            slot: 0,
            bytes: 0,
            interval_bytes: 0,
            end: started,
            // Kernel stamps and a peer's are on the realtime clock: this end's monotonic
            // timeline is placed on it once, rather than a second clock read with every reply.
            started_real: realtime_at(started),
            // One clock reading per transaction, as in the TCP requester: the moment an answer
            // is read ends its round trip and starts the next request's, which is sent before
            // any bookkeeping. `fresh`: no request was stamped with `now` yet (a second request
            // of a burst, or one after a pause, reads the clock again). On one core the answer
            // can arrive (and the responder run) inside the send itself, so the reading must
            // come before the send, which it does.
            watch,
            now,
            fresh: true,
        }
    }

    /// Sends the requests due: up to `--inflight` outstanding, or those a schedule of one per
    /// `paced` has reached.
    #[inline]
    fn send_due(&mut self, paced: Option<Duration>) -> io::Result<()> {
        while self.outstanding.len() < self.inflight && !self.ending.reached(self.controls, self.seq, self.now.at) {
            if self.pauses.before(self.seq) || !self.fresh {
                self.now = self.watch.stamp();
            }
            if let Some(iv) = paced {
                if self.now.at < self.next_due(iv) {
                    return Ok(());
                }
            }
            self.fresh = false;
            let request = self.requests.build(self.shared.id, self.seq);
            match direct::send(self.socket.as_fd(), request) {
                Ok(_) => {
                    self.outstanding.push_back((self.seq, self.now));
                    self.seq += 1;
                    if let Some(iv) = paced {
                        // A request sent late takes the slot it was due in and skips those it
                        // missed, as irtt's client does: no catch-up burst, which a server
                        // enforcing its interval would drop.
                        let elapsed = (self.now.at - self.started).as_nanos() / iv.as_nanos().max(1);
                        self.slot = (self.slot + 1).max(elapsed as u64 + 1);
                    }
                }
                Err(e) if is_retry(&e) || e.raw_os_error() == Some(105) => break,
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => break,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// When the next request of a schedule of one per `interval` is due.
    fn next_due(&self, interval: Duration) -> Instant {
        self.started + Duration::from_nanos((interval.as_nanos() as u64).saturating_mul(self.slot))
    }

    /// Counts the requests unanswered after `--timeout` as lost.
    fn expire(&mut self) {
        while self.outstanding.front().is_some_and(|&(_, t)| self.now.at - t.at >= self.timeout) {
            self.outstanding.pop_front();
            self.ledger.lost += 1;
        }
    }

    /// Reads (or waits for) one answer and matches it to its request.
    #[inline]
    fn receive(&mut self) -> io::Result<()> {
        let received = if self.stamps {
            udp::recv_timestamped(self.socket.as_fd(), &mut self.buf)
        } else {
            direct::recv(self.socket.as_fd(), &mut self.buf).map(|n| (n, None))
        };
        match received {
            // A challenge still in flight when the test started (docs/protocol.md): not an answer.
            Ok((n, _)) if netchar_wire::datagram::DatagramHeader::is_challenge(&self.buf[..n]) => {}
            Ok((n, stamp)) if self.requests.key_in(&self.buf[..n]).is_some() => self.answer(n, stamp),
            Ok(_) => {
                self.now = self.watch.stamp();
                self.fresh = true;
            }
            Err(e) if is_retry(&e) || e.kind() == io::ErrorKind::ConnectionRefused => {
                self.now = self.watch.stamp();
                self.fresh = true;
                // Woken with nothing read (a timeout, an interval's end): the intervals that
                // ended close now, with the round trips still waiting in them.
                self.ledger.settle(self.now.at, self.started, self.shared, &mut self.interval_bytes, self.bytes);
            }
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// An answer of `n` bytes (kernel-stamped at `stamp`, realtime ns) just read.
    #[inline]
    fn answer(&mut self, n: usize, stamp: Option<u64>) {
        self.now = self.watch.stamp();
        let at = self.now.at;
        self.fresh = true;
        let answer = &self.buf[..n];
        if let Some(f) = self.requests.framing.as_mut() {
            if !f.accepts(answer) {
                return;
            }
        }
        if let Some(k) = stamp {
            let at_real = self.started_real + (at - self.started).as_nanos() as u64;
            self.wakeups.record(at_real.saturating_sub(k));
        }
        self.bytes += n as u64;
        self.interval_bytes += n as u64;
        let key = self.requests.key_in(answer).expect("the caller checked the length");
        if let Some(c) = self.check.as_mut() {
            c.check(key, answer, || (at - self.started).as_secs_f64());
        }
        let answered = if self.keyed {
            let mask = self.requests.mask;
            self.outstanding.iter().position(|&(s, _)| s & mask == key)
        } else {
            (!self.outstanding.is_empty()).then_some(0)
        };
        match answered {
            Some(i) => {
                let (seq, t) = self.outstanding.remove(i).expect("index from position");
                self.ledger.completed(self.watch.nanos(t, self.now));
                if let Some(f) = self.requests.framing.as_mut() {
                    let real =
                        |i: Instant| self.started_real + i.saturating_duration_since(self.started).as_nanos() as u64;
                    f.answered(seq, real(t.at), real(at), answer);
                }
            }
            None => self.ledger.late_answer(),
        }
        self.end = at;
    }

    /// The last round trips, the end marks or the peer's closing datagrams, the final figures.
    fn finish(mut self, outcome: io::Result<()>) -> io::Result<()> {
        let (shared, started) = (self.shared, self.started);
        self.ledger.settle(self.end, started, shared, &mut self.interval_bytes, self.bytes);
        let end_s = self.end.saturating_duration_since(started);
        shared.end_ns.store(end_s.as_nanos() as u64, Ordering::Release);
        // netchar's UDP rr sends no end marker (its responder stops after the client's
        // sender_done); a format with end marks sends them (again if a wake sent just before the
        // waiter left interrupted one), a peer's framing its closing datagrams.
        let (closing, one_way) = match self.requests.framing.as_mut() {
            Some(f) => f.finish(self.seq),
            None => (vec![Vec::new(); self.datagrams.end_marks().unwrap_or(0) as usize], None),
        };
        for datagram in &closing {
            while let Err(e) = self.socket.send(datagram) {
                if e.kind() != io::ErrorKind::Interrupted {
                    break;
                }
            }
        }
        shared.packets.store(self.seq, Ordering::Release);
        self.ledger.one_way = one_way;
        self.ledger.finish_all(shared, end_s.as_secs_f64(), self.interval_bytes, None, Some(self.wakeups));
        if let Some(c) = self.check {
            shared.set_integrity(c.finish());
        }
        outcome
    }
}

/// The UDP responder: one response per request, echoing the request's leading bytes (the
/// sequence key). Ends when the requester has finished (netchar's has no grace after it:
/// TestSpec::receive_grace_seconds), or, for a format whose streams end with empty datagrams,
/// at the first one.
pub(super) fn udp_responder(
    shared: &StreamShared,
    controls: &Controls,
    spec: &TestSpec,
    socket: &UdpSocket,
    datagrams: DatagramFormatKind,
    made: RrBytes<'_>,
) -> io::Result<()> {
    let ends_on_empty = datagrams.end_marks().is_some();
    let opts = spec.rr.clone().unwrap_or_default();
    let resp = opts.response_bytes as usize;
    let width = key_width(&opts);
    // Receives block with no timeout: a receive timeout arms and cancels a kernel timer on every
    // receive that waits, once per transaction (perf stat on one CPU: 1.01 timers per
    // transaction here against 0.00 for netperf's and sockperf's responders). The abort and the
    // end of the grace shut the socket's read side to wake it (DataPlane::abort, the collector).
    if opts.busy_poll {
        socket.set_nonblocking(true)?;
    } else {
        socket.set_read_timeout(None)?;
    }
    let mut buf = vec![0u8; 65_536];
    let mut response = vec![b'r'; resp];
    let generated = made.datagrams();
    let varies = generated.is_some_and(|g| !g.is_constant());
    if let Some(g) = generated {
        g.fill(made.responses_key(shared.id), 0, &mut response, width);
    }
    let mut check = made.datagram_check(RrBytes::requests_key(shared.id), width);
    let (mut answered, mut bytes) = (0u64, 0u64);
    // The stream's time ends at its last answer, not at the grace or timer that ended it.
    let mut last_answer = None;
    let mut watch = Stopwatch::new();
    loop {
        if controls.abort.load(Ordering::Relaxed) || shared.receive_deadline().is_some_and(|d| Instant::now() >= d) {
            break;
        }
        match direct::recv(socket.as_fd(), &mut buf) {
            Ok(n) if n >= width => {
                // Setup datagrams only come before the first request; after it, a request that
                // happens to look like one is still a request.
                if answered == 0 && netchar_wire::datagram::DatagramHeader::setup_cookie(&buf[..n]).is_some() {
                    continue;
                }
                response[..width].copy_from_slice(&buf[..width]);
                let key = key_of(&buf, width);
                if let (true, Some(g)) = (varies, generated) {
                    g.fill(made.responses_key(shared.id), key, &mut response, width);
                }
                let _ = direct::send(socket.as_fd(), &response);
                if let Some(c) = check.as_mut() {
                    c.check(key, &buf[..n], || shared.started.elapsed().as_secs_f64());
                }
                answered += 1;
                last_answer = Some(watch.stamp().at);
                bytes += n as u64;
                shared.bytes.store(bytes, Ordering::Release);
                shared.packets.store(answered, Ordering::Release);
            }
            Ok(0) if ends_on_empty => break,
            Ok(_) => {}
            Err(e) if is_retry(&e) || e.kind() == io::ErrorKind::ConnectionRefused => {}
            Err(e) => return Err(e),
        }
    }
    store_end(shared, last_answer);
    if let Some(c) = check {
        shared.set_integrity(c.finish());
    }
    Ok(())
}

/// The crr requester: a new TCP connection per transaction (connect, request, response,
/// close), as netperf's TCP_CRR. The server closes first, so the TIME_WAIT state stays on the
/// server and this end does not run out of local ports; if it does anyway, it says so.
pub(super) fn crr_requester(
    shared: &StreamShared,
    controls: &Controls,
    spec: &TestSpec,
    started: Instant,
    target: std::net::SocketAddr,
) -> io::Result<()> {
    let opts = spec.rr.clone().unwrap_or_default();
    let request = ConstantBytes::new(b'q', opts.request_bytes as usize);
    let mut buf = vec![0u8; (opts.response_bytes as usize).clamp(64, 1 << 20)];
    let ending = Ending::new(spec, started, shared.id);
    let mut ledger = Ledger::new(spec);
    let mut connects = Distribution::new();
    let (mut issued, mut interval_bytes, mut bytes) = (0u64, 0u64, 0u64);
    let mut end = started;
    let outcome = loop {
        if ending.reached(controls, issued, Instant::now()) || controls.abort.load(Ordering::Relaxed) {
            break Ok(());
        }
        let t0 = Instant::now();
        let stream = match crr_connect(target, opts.request_bytes) {
            Ok(s) => s,
            Err(e) if e.raw_os_error() == Some(EADDRNOTAVAIL) => {
                break Err(io::Error::new(
                    e.kind(),
                    format!(
                        "out of local ports after {issued} connections (net.ipv4.ip_local_port_range is used up); \
                         shorten the test or widen the range"
                    ),
                ))
            }
            Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                let hint = netchar_sys::proc_net::conntrack_full_hint().unwrap_or_default();
                break Err(io::Error::new(e.kind(), format!("{e}{hint}")));
            }
            Err(e) => break Err(e),
        };
        connects.record((Instant::now() - t0).as_nanos() as u64);
        issued += 1;
        if let Err(e) = request.write_with(opts.request_bytes as usize, |b| (&stream).write_all(b)) {
            break Err(e);
        }
        // The response, then the server's close.
        let mut got = 0usize;
        let done = loop {
            match (&stream).read(&mut buf) {
                Ok(0) => break Ok(()),
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        let now = Instant::now();
        if let Err(e) = done {
            break Err(e);
        }
        if got as u64 != opts.response_bytes {
            break Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a response of {got} bytes, not {}", opts.response_bytes),
            ));
        }
        ledger.record(now - t0);
        bytes += got as u64;
        interval_bytes += got as u64;
        end = now;
        ledger.close_due((now - started).as_secs_f64(), shared, &mut interval_bytes);
        shared.bytes.store(bytes, Ordering::Release);
        shared.packets.store(ledger.transactions, Ordering::Release);
    };
    let end_s = end.saturating_duration_since(started);
    shared.end_ns.store(end_s.as_nanos() as u64, Ordering::Release);
    ledger.finish_with_connects(shared, end_s.as_secs_f64(), interval_bytes, Some(connects));
    outcome
}

const EADDRNOTAVAIL: i32 = 99;
const EINPROGRESS: i32 = 115;
/// How long a crr connection may take to connect, to write its request or to read its answer.
const CRR_TIMEOUT: Duration = Duration::from_secs(5);

/// One crr connection, in as few system calls as a connection allows: the socket's timeouts
/// bound a blocking connect (socket(7): SO_SNDTIMEO applies to connect) and its reads, where
/// `TcpStream::connect_timeout` makes the socket non-blocking, polls, and makes it blocking
/// again (strace per connection: 7 calls before the request, 4 or 5 now; netperf's TCP_CRR
/// makes 6 with its bind and getsockopts). Nagle can hold back only the last segment of a
/// request longer than one segment, behind an earlier one not yet acknowledged; a request
/// within the least MSS (536 bytes) goes out at once without TCP_NODELAY.
fn crr_connect(target: std::net::SocketAddr, request_bytes: u64) -> io::Result<TcpStream> {
    let socket = socket2::Socket::new(socket2::Domain::for_address(target), socket2::Type::STREAM, None)?;
    socket.set_write_timeout(Some(CRR_TIMEOUT))?;
    socket.set_read_timeout(Some(CRR_TIMEOUT))?;
    if request_bytes > 536 {
        socket.set_nodelay(true)?;
    }
    match socket.connect(&target.into()) {
        Ok(()) => Ok(socket.into()),
        // The send timeout ran out while the handshake was under way.
        Err(e) if e.raw_os_error() == Some(EINPROGRESS) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("no connection to {target} within {} s", CRR_TIMEOUT.as_secs()),
        )),
        Err(e) => Err(e),
    }
}

/// The crr responder: accepts each connection on the test's listener, answers its request and
/// closes it. One at a time, as netserver does.
pub(super) fn crr_responder(
    shared: &StreamShared,
    controls: &Controls,
    spec: &TestSpec,
    listener: &std::net::TcpListener,
    allow: &super::PeerFilter,
) -> io::Result<()> {
    let opts = spec.rr.clone().unwrap_or_default();
    let response = ConstantBytes::new(b'r', opts.response_bytes as usize);
    let mut buf = vec![0u8; (opts.request_bytes as usize).clamp(64, 1 << 20)];
    // accept() honours the receive timeout: wake up to check the end. An accepted socket
    // inherits the listener's options (Linux copies the listening socket): this timeout, the
    // send timeout that keeps a client that never reads from holding the responder, and
    // TCP_NODELAY, so each connection costs no setsockopt: accept4, one read, one write and
    // close, as netserver's.
    let listening = socket2::SockRef::from(listener);
    listening.set_read_timeout(Some(WAIT))?;
    listening.set_write_timeout(Some(CRR_TIMEOUT))?;
    listening.set_nodelay(true)?;
    let (mut answered, mut bytes) = (0u64, 0u64);
    let mut last_answer = None;
    loop {
        if controls.abort.load(Ordering::Relaxed) || shared.receive_deadline().is_some_and(|d| Instant::now() >= d) {
            break;
        }
        let (stream, from) = match listener.accept() {
            Ok(c) => c,
            Err(e) if is_retry(&e) => continue,
            Err(e) => return Err(e),
        };
        if !(allow.0)(from.ip()) {
            // Not the test's client: closed unanswered, and no transaction of the test.
            continue;
        }
        // The request, within CRR_TIMEOUT of the accept: the inherited WAIT timeout ends a
        // read that found nothing, not the connection.
        let accepted = Instant::now();
        let mut got = 0usize;
        while got < opts.request_bytes as usize {
            match (&stream).read(&mut buf) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e)
                    if is_retry(&e) && accepted.elapsed() < CRR_TIMEOUT && !controls.abort.load(Ordering::Relaxed) => {}
                Err(_) => break,
            }
        }
        // The answer goes out with the close: sent with MSG_MORE it waits in the socket, and
        // close() puts the FIN on its last segment (tcp_send_fin), so the client reads the
        // answer and the end of the connection from one segment.
        let answer = |b: &[u8]| send_all_more(&stream, b);
        if got as u64 == opts.request_bytes && response.write_with(opts.response_bytes as usize, answer).is_ok() {
            answered += 1;
            last_answer = Some(Instant::now());
            bytes += got as u64;
        }
        drop(stream);
        shared.bytes.store(bytes, Ordering::Release);
        shared.packets.store(answered, Ordering::Release);
    }
    store_end(shared, last_answer);
    Ok(())
}

/// All of `b` on `stream` with MSG_MORE: held until more data, or the FIN, fills the segment.
fn send_all_more(stream: &TcpStream, mut b: &[u8]) -> io::Result<()> {
    let socket = socket2::SockRef::from(stream);
    while !b.is_empty() {
        match socket.send_with_flags(b, libc::MSG_MORE) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => b = &b[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A responder's time: to its last answer (the requester's end, not the grace period or the
/// timer after it), or to now if it answered nothing.
fn store_end(shared: &StreamShared, last_answer: Option<Instant>) {
    let end = last_answer.unwrap_or_else(Instant::now).saturating_duration_since(shared.started);
    shared.end_ns.store(end.as_nanos() as u64, Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::super::{Controls, StreamShared};
    use super::*;
    use netchar_model::{Flow, Role};

    /// A responder that answers every request twice: with one request in flight, each second
    /// copy arrives while the next request is outstanding, so it is out of sequence (late),
    /// never mistaken for that request's answer.
    #[test]
    fn echo_counts_out_of_sequence_replies_from_a_reordering_responder() {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client.connect(server.local_addr().unwrap()).unwrap();
        let responder = std::thread::spawn(move || {
            server.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
            let mut buf = [0u8; 2048];
            let mut answered = 0;
            while let Ok((n, peer)) = server.recv_from(&mut buf) {
                server.send_to(&buf[..n], peer).unwrap();
                server.send_to(&buf[..n], peer).unwrap();
                answered += 1;
            }
            answered
        });
        let mut spec = TestSpec::rr_default();
        spec.rr = Some(RrOptions { udp: true, request_bytes: 64, response_bytes: 64, ..RrOptions::default() });
        spec.end = netchar_model::EndCondition::Bytes(50);
        spec.interval_seconds = 0.0;
        let started = Instant::now();
        let shared = StreamShared::new(1, Flow::Up, Role::Sender, started);
        let payload = TestPayload::for_spec(&spec, true);
        let made = RrBytes { payload: &payload, echoed: false };
        udp_requester(&shared, &Controls::default(), &spec, started, &client, DatagramFormatKind::Native, made, None)
            .unwrap();
        let f = shared.udp_final.lock().unwrap().take().unwrap();
        let rr = f.rr.unwrap();
        assert_eq!(rr.transactions, 50);
        assert_eq!(rr.lost, 0);
        // 49 duplicates came back while a later request was outstanding (the last one may come
        // after the requester stopped listening).
        assert!((48..=50).contains(&rr.late), "out of sequence: {}", rr.late);
        drop(client);
        assert_eq!(responder.join().unwrap(), 50);
    }

    /// A peer that echoes no sequence key: each answer is the oldest request's, and the
    /// requester's end marks (empty datagrams) end the responder.
    #[test]
    fn unkeyed_answers_are_taken_in_order_and_end_marks_end_the_responder() {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client.connect(server.local_addr().unwrap()).unwrap();
        server.connect(client.local_addr().unwrap()).unwrap();
        let mut spec = TestSpec::rr_default();
        spec.rr = Some(RrOptions { udp: true, request_bytes: 30, response_bytes: 200, ..RrOptions::default() });
        spec.end = netchar_model::EndCondition::Bytes(40);
        spec.interval_seconds = 0.0;
        let started = Instant::now();
        let kind = DatagramFormatKind::Unsequenced { end_marks: 3 };
        let requester = StreamShared::new(1, Flow::Up, Role::Sender, started);
        let responder = StreamShared::new(1, Flow::Up, Role::Receiver, started);
        let controls = Controls::default();
        let payload = TestPayload::for_spec(&spec, true);
        let made = RrBytes { payload: &payload, echoed: false };
        std::thread::scope(|s| {
            let answering = s.spawn(|| udp_responder(&responder, &controls, &spec, &server, kind, made));
            udp_requester(&requester, &controls, &spec, started, &client, kind, made, None).unwrap();
            answering.join().unwrap().unwrap();
        });
        let rr = requester.udp_final.lock().unwrap().take().unwrap().rr.unwrap();
        assert_eq!((rr.transactions, rr.lost, rr.late), (40, 0, 0));
        assert_eq!(responder.packets.load(Ordering::Acquire), 40);
        assert_eq!(responder.bytes.load(Ordering::Acquire), 40 * 30);
    }

    /// A peer's framing (RrFraming): requests are its template with the sequence key at its
    /// offset, sealed, sent on its schedule; only the answers it accepts count, each handed
    /// back with its request's number; its closing datagram goes out after the last.
    #[test]
    fn a_framing_shapes_the_requests_and_reads_the_answers_it_accepts() {
        struct Framed {
            seen: Arc<Mutex<Vec<u64>>>,
        }
        impl RrFraming for Framed {
            fn template(&self) -> Vec<u8> {
                b"HDR:....tail".to_vec()
            }
            fn key_at(&self) -> (usize, usize) {
                (4, 4)
            }
            fn interval(&self) -> Option<Duration> {
                Some(Duration::from_millis(2))
            }
            fn seal(&mut self, request: &mut [u8]) {
                request[11] = request[4] ^ 0x5a;
            }
            fn accepts(&mut self, answer: &[u8]) -> bool {
                answer.starts_with(b"ANS:")
            }
            fn answered(&mut self, sequence: u64, sent: u64, read: u64, answer: &[u8]) {
                assert!(read >= sent && answer.len() == 12);
                self.seen.lock().unwrap().push(sequence);
            }
            fn finish(&mut self, requests: u64) -> (Vec<Vec<u8>>, Option<OneWayFigures>) {
                let one_way = OneWayFigures { peer_received: requests, ..OneWayFigures::default() };
                (vec![b"BYE".to_vec()], Some(one_way))
            }
        }
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client.connect(server.local_addr().unwrap()).unwrap();
        let mut spec = TestSpec::rr_default();
        spec.rr = Some(RrOptions { udp: true, request_bytes: 1, response_bytes: 1, ..RrOptions::default() });
        spec.end = netchar_model::EndCondition::Seconds(0.1);
        spec.interval_seconds = 0.0;
        let responder = std::thread::spawn(move || {
            server.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut buf = [0u8; 64];
            let mut requests = Vec::new();
            loop {
                let (n, peer) = server.recv_from(&mut buf).unwrap();
                if &buf[..n] == b"BYE" {
                    return requests;
                }
                assert_eq!((n, &buf[..4], &buf[8..11]), (12, &b"HDR:"[..], &b"tai"[..]));
                assert_eq!(buf[11], buf[4] ^ 0x5a, "sealed after the key was written");
                requests.push(u32::from_le_bytes(buf[4..8].try_into().unwrap()));
                // A stray datagram first, then the answer: only the answer counts.
                server.send_to(b"junk-junk-ju", peer).unwrap();
                buf[..4].copy_from_slice(b"ANS:");
                server.send_to(&buf[..n], peer).unwrap();
            }
        });
        let seen = Arc::new(Mutex::new(Vec::new()));
        let started = Instant::now();
        let shared = StreamShared::new(1, Flow::Up, Role::Sender, started);
        let payload = TestPayload::for_spec(&spec, true);
        let made = RrBytes { payload: &payload, echoed: false };
        let framing: Box<dyn RrFraming> = Box::new(Framed { seen: Arc::clone(&seen) });
        let kind = DatagramFormatKind::Native;
        udp_requester(&shared, &Controls::default(), &spec, started, &client, kind, made, Some(framing)).unwrap();
        let requests = responder.join().unwrap();
        let rr = shared.udp_final.lock().unwrap().take().unwrap().rr.unwrap();
        assert!(requests.len() >= 2, "{requests:?}");
        assert_eq!(requests, (0..requests.len() as u32).collect::<Vec<_>>(), "numbered from 0, in order");
        assert_eq!(*seen.lock().unwrap(), (0..requests.len() as u64).collect::<Vec<_>>());
        assert_eq!((rr.transactions, rr.lost, rr.late), (requests.len() as u64, 0, 0));
        assert_eq!(rr.one_way.unwrap().peer_received, requests.len() as u64);
    }

    /// The crr responder's connections inherit its listener's 10 ms timeout (no setsockopt per
    /// connection): a request that comes several of those after the connect is still answered,
    /// and the requester's own connections (a request above one segment) read every answer.
    #[test]
    fn crr_answers_a_request_that_comes_after_many_accept_timeouts() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let target = listener.local_addr().unwrap();
        let mut spec = TestSpec::rr_default();
        spec.rr = Some(RrOptions { request_bytes: 600, response_bytes: 3000, ..RrOptions::default() });
        spec.end = netchar_model::EndCondition::Bytes(5); // transactions, for rr
        spec.interval_seconds = 0.0;
        let started = Instant::now();
        let responder = StreamShared::new(1, Flow::Up, Role::Receiver, started);
        let requester = StreamShared::new(1, Flow::Up, Role::Sender, started);
        let controls = Controls::default();
        std::thread::scope(|s| {
            let answering =
                s.spawn(|| crr_responder(&responder, &controls, &spec, &listener, &super::super::PeerFilter::any()));
            // A slow client: its request 50 ms (five of the responder's waits) after connecting.
            let slow = TcpStream::connect(target).unwrap();
            std::thread::sleep(Duration::from_millis(50));
            (&slow).write_all(&[b'q'; 600]).unwrap();
            let mut answer = Vec::new();
            (&slow).read_to_end(&mut answer).unwrap();
            assert_eq!(answer.len(), 3000);
            crr_requester(&requester, &controls, &spec, started, target).unwrap();
            controls.abort.store(true, Ordering::Release);
            answering.join().unwrap().unwrap();
        });
        assert_eq!(requester.packets.load(Ordering::Acquire), 5);
        assert_eq!(responder.packets.load(Ordering::Acquire), 6);
        assert_eq!(responder.bytes.load(Ordering::Acquire), 6 * 600);
    }

    /// Round trips recorded in batches land in the same intervals, with the same totals and
    /// the same whole-run histogram, as recording each one as it is read and closing the
    /// intervals it ends; the last answers, still pending when the loop ends, are counted.
    #[test]
    fn settled_batches_fill_the_intervals_as_recording_each_at_once_does() {
        let mut spec = TestSpec::rr_default();
        spec.interval_seconds = 0.25;
        let started = Instant::now();
        let batched_end = StreamShared::new(1, Flow::Up, Role::Sender, started);
        let direct_end = StreamShared::new(1, Flow::Up, Role::Sender, started);
        let (mut batched, mut direct) = (Ledger::new(&spec), Ledger::new(&spec));
        let (mut batched_bytes, mut direct_bytes) = (0u64, 0u64);
        // Answers every 37 µs with a burst every 500th (an interval's end falls inside bursts
        // and inside batches), then a quiet second and three last answers.
        let mut at = Duration::ZERO;
        let mut ends = Vec::new();
        for i in 0..40_000u64 {
            at += Duration::from_nanos(if i % 500 < 400 { 37_000 } else { 900 });
            ends.push(at);
        }
        at += Duration::from_secs(1);
        ends.extend([at, at + Duration::from_micros(40), at + Duration::from_micros(80)]);
        for (i, &e) in ends.iter().enumerate() {
            let ns = 20_000 + (i as u64 * 7_919) % 400_000;
            batched.completed(ns);
            batched_bytes += 1;
            batched.settle_due(started + e, started, &batched_end, &mut batched_bytes, i as u64 + 1);
            direct.record_ns(ns);
            direct_bytes += 1;
            direct.close_due(e.as_secs_f64(), &direct_end, &mut direct_bytes);
        }
        assert!(!batched.pending.is_empty(), "the run must end with answers still pending");
        let last = *ends.last().unwrap();
        batched.settle(started + last, started, &batched_end, &mut batched_bytes, ends.len() as u64);
        assert_eq!(batched_end.packets.load(Ordering::Acquire), ends.len() as u64);
        let end = last.as_secs_f64();
        batched.finish(&batched_end, end, batched_bytes);
        direct.finish(&direct_end, end, direct_bytes);
        let b = batched_end.udp_final.lock().unwrap().take().unwrap();
        let d = direct_end.udp_final.lock().unwrap().take().unwrap();
        let counts = |f: &super::super::WorkerFinal| -> Vec<(u64, u64)> {
            f.intervals.iter().map(|iv| (iv.rr.as_ref().unwrap().transactions, iv.bytes)).collect()
        };
        assert!(counts(&d).len() >= 8, "{:?}", counts(&d));
        assert_eq!(counts(&b), counts(&d));
        assert_eq!(b.rr.as_ref().unwrap().transactions, ends.len() as u64);
        assert_eq!(b.rr.unwrap().latency_us, d.rr.unwrap().latency_us);
        assert_eq!(b.latency.unwrap().quantile(0.99), d.latency.unwrap().quantile(0.99));
    }

    /// The whole run's histogram, built by adding each closed interval's, reports exactly what
    /// recording every round trip into it directly would.
    #[test]
    fn whole_run_latency_adds_up_the_intervals_exactly() {
        let mut spec = TestSpec::rr_default();
        spec.interval_seconds = 1.0;
        let shared = StreamShared::new(1, Flow::Up, Role::Sender, Instant::now());
        let mut ledger = Ledger::new(&spec);
        let mut direct = Distribution::new();
        let (mut bytes, mut second) = (0u64, 0.0);
        for i in 0..30_000u64 {
            let ns = 1_000 + (i * 7_919 + i * i * 13) % 9_000_000;
            ledger.record_ns(ns);
            direct.record(ns);
            if i % 7_000 == 6_999 {
                second += 1.0;
                ledger.close_due(second, &shared, &mut bytes);
            }
        }
        ledger.finish(&shared, second + 0.5, 0);
        let f = shared.udp_final.lock().unwrap().take().unwrap();
        assert_eq!(f.intervals.len(), 5);
        let whole = f.latency.unwrap();
        assert_eq!(whole.count(), 30_000);
        assert_eq!(f.rr.unwrap().latency_us, latency_us(&direct));
        for q in [0.0, 0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(whole.quantile(q), direct.quantile(q), "q{q}");
        }
        let per_interval: u64 = f.intervals.iter().map(|iv| iv.rr.as_ref().unwrap().transactions).sum();
        assert_eq!(per_interval, 30_000);
    }
}
