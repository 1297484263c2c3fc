//! UDP workers: a paced (or unpaced) sender on an absolute schedule with GSO batches, and a
//! receiver that accounts for every sequence number with `recvmmsg`.
//!
//! UDP workers close their own intervals: the receiver assigns each datagram to an interval
//! by its kernel receive timestamp, and loss per interval is settled at the end, when the
//! sender's exact total is known. The collector only reads what they publish.

use super::integrity::{DatagramCheck, UdpPayload};
use super::pacing::{pause, Schedule};
use super::sender_figures::{GapMeter, SenderIntervals};
use super::{Controls, StreamShared, POLL};
use netchar_model::{StreamInterval, TestSpec, UdpReceived, UdpSent};
use netchar_stats::distribution::Distribution;
use netchar_stats::jitter::JitterMeter;
use netchar_stats::sequence::{Arrival, RangeLedger, SequenceTracker};
use netchar_sys::udp::{self, RecvBuffers, RecvMeta, SendFailure, BATCH, GRO_BUFFER, GSO_MESSAGES, MAX_GSO_SEGMENTS};
use netchar_wire::datagram::{DatagramFormat, Received};
use netchar_wire::payload::DatagramPayload;
use std::io;
use std::net::UdpSocket;
use std::os::fd::AsFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Receivers wake at least this often to close intervals and check for the end.
const RECV_POLL: Duration = Duration::from_millis(10);
/// How often, and how many times, a receiver re-sends its start request (iperf2's UDP -R).
const REQUEST_EVERY: Duration = Duration::from_millis(20);
const REQUEST_TRIES: u32 = 99;

/// A sender's buffer of back-to-back datagram slots, laid out for one datagram size: headers
/// emitted and, for a constant payload, the payload written once; per datagram only the
/// sequence number and timestamp change, and for a random payload one copy from the ring.
struct Slots {
    buf: Vec<u8>,
    slots: usize,
    /// The datagram size the slots are laid out for (0: not yet).
    size: usize,
}

impl Slots {
    fn new(max_size: usize, slots: usize) -> Self {
        Self { buf: vec![0u8; max_size * slots], slots, size: 0 }
    }

    /// Lays the slots out for datagrams of `size` bytes, unless they are already.
    fn lay_out<F: DatagramFormat>(
        &mut self,
        format: &F,
        id: u32,
        size: usize,
        payload: &UdpPayload,
        g: &DatagramPayload,
    ) {
        if self.size == size {
            return;
        }
        for i in 0..self.slots {
            let d = &mut self.buf[i * size..(i + 1) * size];
            g.fill(payload.key, 0, d, format.header_len());
            format.emit(d, id, 0, 0);
        }
        self.size = size;
    }

    /// Stamps datagrams `seq..seq + n` into the first `n` slots (and, for a payload that
    /// differs per datagram, writes each one's).
    fn stamp<F: DatagramFormat>(
        &mut self,
        format: &F,
        seq: u64,
        n: usize,
        stamp: u64,
        payload: &UdpPayload,
        g: &DatagramPayload,
    ) {
        let size = self.size;
        for i in 0..n {
            let d = &mut self.buf[i * size..(i + 1) * size];
            if !g.is_constant() {
                g.fill(payload.key, seq + i as u64, d, format.header_len());
            }
            format.stamp(d, seq + i as u64, stamp);
        }
    }
}

pub(super) fn send<F: DatagramFormat>(
    format: &F,
    shared: &StreamShared,
    controls: &Controls,
    spec: &TestSpec,
    started: Instant,
    socket: &UdpSocket,
    payload: &UdpPayload,
) -> io::Result<()> {
    if let Some(xdp) = spec.udp.as_ref().and_then(|u| u.xdp.as_ref()) {
        return super::xdp::send(format, shared, controls, spec, started, socket, payload, xdp);
    }
    socket.set_write_timeout(Some(POLL))?;
    let mut sender = KernelSender::new(format, shared, spec, started, socket, payload);
    let outcome = sender.run(controls);
    sender.finish(controls, outcome)
}

/// [`send`] over the kernel's socket: the stream's schedule and datagram buffers, and what it
/// has sent, been refused and owed so far.
struct KernelSender<'a, F> {
    format: &'a F,
    shared: &'a StreamShared,
    socket: &'a UdpSocket,
    payload: &'a UdpPayload,
    started: Instant,
    schedule: Schedule,
    /// `--pacing-quantum`: what falls due within it goes out now, as one batch.
    quantum: Duration,
    /// GSO super-datagrams a send call hands the kernel.
    messages: usize,
    generator: Arc<DatagramPayload>,
    slots: Slots,
    deadline: Option<Instant>,
    budget: Option<u64>,
    /// GSO asked for, supported, and not yet found unusable for these datagrams.
    gso_ok: bool,
    seq: u64,
    bytes: u64,
    errors: u64,
    /// Refused sends by errno, for the result: which cause (a full queue, a firewall, an
    /// unreachable destination) is worth a send error apart. Counted by number here, named once
    /// at the end: a sender refused at full rate allocates nothing per refusal.
    errnos: std::collections::BTreeMap<i32, u64>,
    sends: u64,
    gaps: GapMeter,
    intervals: SenderIntervals,
    end: Instant,
    /// Paced: slots the sender never filled because it ran behind (given up after a long stall,
    /// or still owed at the deadline).
    behind: u64,
    /// Paced: the longest a datagram went out after its slot (a stall, then catch-up).
    late_max: Duration,
}

impl<'a, F: DatagramFormat> KernelSender<'a, F> {
    fn new(
        format: &'a F,
        shared: &'a StreamShared,
        spec: &TestSpec,
        started: Instant,
        socket: &'a UdpSocket,
        payload: &'a UdpPayload,
    ) -> Self {
        let opts = spec.udp.clone().unwrap_or_default();
        let schedule = Schedule::new(spec, started);
        let quantum = Duration::from_secs_f64(
            opts.pacing_quantum_seconds.clamp(0.0, netchar_model::spec::MAX_PACING_QUANTUM_SECONDS),
        );
        if schedule.pps.is_some() || schedule.burst.is_some() {
            // Best effort: without it sleeps overshoot more and the sender spins more.
            let _ = netchar_sys::cpu::set_current_thread_timer_slack(1);
        }
        let max_size =
            schedule.sizes.iter().map(|&(_, s)| s as usize).max().unwrap_or(0).max(spec.block_bytes as usize);
        let gso = opts.gso && udp::gso_supported(socket.as_fd());
        // With GSO, an unpaced sender hands the kernel up to GSO_MESSAGES super-datagrams a call;
        // a paced one a single super-datagram, the bound its catch-up after a stall keeps.
        let messages = if schedule.pps.is_none() { GSO_MESSAGES } else { 1 };
        let slots = if gso { segments_per_message(max_size) * messages } else { BATCH };
        let generator = payload.generator(max_size);
        let slots = Slots::new(max_size, slots);
        let deadline = super::send_deadline(spec, started);
        let budget = spec.byte_budget(shared.id);
        Self {
            format,
            shared,
            socket,
            payload,
            started,
            schedule,
            quantum,
            messages,
            generator,
            slots,
            deadline,
            budget,
            gso_ok: gso,
            seq: 0,
            bytes: 0,
            errors: 0,
            errnos: std::collections::BTreeMap::new(),
            sends: 0,
            gaps: GapMeter::default(),
            intervals: SenderIntervals::new(spec),
            end: Instant::now(),
            behind: 0,
            late_max: Duration::ZERO,
        }
    }

    /// Sends on the schedule until the senders are stopped, the deadline or the byte budget is
    /// reached or the size list is done; an error is one no later send would escape.
    fn run(&mut self, controls: &Controls) -> io::Result<()> {
        loop {
            if controls.stop_senders.load(Ordering::Relaxed) {
                return Ok(());
            }
            let now = Instant::now();
            if let Some(d) = self.deadline.filter(|&d| now >= d) {
                // A paced sender's datagrams are the slots due in [0, deadline): its time is the
                // whole window, not up to its last send, or the rate would read one slot high.
                if self.schedule.pps.is_some() {
                    self.end = self.end.max(d);
                    self.behind += self.schedule.slots_before(self.seq, d);
                }
                return Ok(());
            }
            if self.budget.is_some_and(|b| self.bytes >= b) {
                return Ok(());
            }
            let Some(size) = self.schedule.size_of(self.seq) else { return Ok(()) };
            let due = self.schedule.due(self.seq);
            if due > now {
                let wait = due - now;
                pause(self.deadline.map_or(wait, |d| wait.min(d.saturating_duration_since(now))));
                continue;
            }
            if self.schedule.pps.is_some() {
                self.late_max = self.late_max.max(now.saturating_duration_since(self.schedule.slot(self.seq)));
            }
            self.behind += self.schedule.restart_if_behind(self.seq, due, now);
            let room = if self.gso_ok {
                (segments_per_message(size) * self.messages).min(self.slots.buf.len() / size)
            } else {
                BATCH
            };
            // With a pacing quantum, what falls due within it goes out now, as one batch (never a
            // datagram due at or after the deadline: a paced test's rate counts the slots before it).
            let horizon = match self.deadline {
                Some(d) if !self.quantum.is_zero() => (now + self.quantum).min(d - Duration::from_nanos(1)).max(now),
                _ => now + self.quantum,
            };
            let mut n = self.schedule.due_count(self.seq, horizon, room);
            if let Some(b) = self.budget {
                n = n.min(((b - self.bytes).div_ceil(size as u64)) as usize).max(1);
            }
            self.send_batch(now, size, n)?;
        }
    }

    /// Sends datagrams `seq..seq + n` of `size` bytes, due by `now`, in one call, and counts
    /// what the kernel took or refused; an error is one no later send would escape.
    fn send_batch(&mut self, now: Instant, size: usize, n: usize) -> io::Result<()> {
        let (seq, shared) = (self.seq, self.shared);
        // Close intervals that ended before this send, so it counts in the interval it is in.
        let elapsed = now.saturating_duration_since(self.started);
        self.intervals.close_due(elapsed.as_secs_f64(), (self.bytes, seq, self.errors), Some(shared));
        let stamp = elapsed.as_nanos() as u64;
        self.slots.lay_out(self.format, shared.id, size, self.payload, &self.generator);
        self.slots.stamp(self.format, seq, n, stamp, self.payload, &self.generator);
        let buf = &self.slots.buf;
        let fd = self.socket.as_fd();
        let segmented = self.gso_ok && n > 1;
        let result = if segmented {
            udp::send_segmented_batch(fd, &buf[..n * size], size as u16, segments_per_message(size))
                .map(|bytes| bytes / size)
        } else {
            udp::send_many(fd, &buf[..n * size], size, n)
        };
        match result {
            Ok(sent) => {
                self.seq += sent as u64;
                self.sends += 1;
                self.schedule.last = Some((self.seq, now));
                self.bytes += (sent * size) as u64;
                shared.bytes.store(self.bytes, Ordering::Release);
                shared.packets.store(self.seq, Ordering::Release);
                let sent_at = Instant::now();
                self.gaps.record(sent_at, sent);
                self.end = sent_at;
                if self.schedule.pps.is_some() {
                    // A batch sent ahead of time (--pacing-quantum) ends at its last datagram's
                    // slot, not when the syscall returned: the rate counts the schedule's time.
                    self.end = self.end.max(self.schedule.due(self.seq - 1));
                }
            }
            Err(e) => match udp::classify_send_error(&e, segmented) {
                SendFailure::Unsegmentable => self.gso_ok = false,
                SendFailure::Refused => {
                    // sendmmsg fails on its first datagram or its first GSO message (the rest
                    // were not tried), and a GSO message fails whole. Those are counted,
                    // never sent, and keep their sequence numbers for the next try.
                    let refused = if segmented { n.min(segments_per_message(size)) } else { 1 };
                    self.errors += refused as u64;
                    *self.errnos.entry(udp::send_error_code(&e)).or_default() += refused as u64;
                    shared.send_errors.store(self.errors, Ordering::Release);
                    self.schedule.refused(refused as u64);
                }
                SendFailure::Fatal => return Err(e),
            },
        }
        Ok(())
    }

    /// After the loop's `outcome`: the format's end (an end exchange, end marks) when the
    /// sender ended well, then the stream's final figures and intervals.
    fn finish(mut self, controls: &Controls, outcome: io::Result<()>) -> io::Result<()> {
        let (format, shared, socket, started) = (self.format, self.shared, self.socket, self.started);
        if outcome.is_ok() {
            // Formats with an end exchange (iperf2's FIN and server report): the first end
            // datagram carries data as the peer counts it, so it counts as sent here too.
            let size = self.schedule.default_size.min(self.slots.buf.len());
            let buf = &mut self.slots.buf[..size];
            if let Some((fin_bytes, reply)) = end_exchange(format, controls, socket, buf, self.seq, started) {
                self.seq += 1;
                self.bytes += fin_bytes;
                shared.bytes.store(self.bytes, Ordering::Release);
                shared.packets.store(self.seq, Ordering::Release);
                if let Ok(mut slot) = shared.end_reply.lock() {
                    *slot = reply;
                }
            }
            // Formats whose streams end with empty datagrams nobody answers: not data, not counted.
            for _ in 0..format.end_marks() {
                let _ = socket.send(&[]);
            }
        }
        let end_s = self.end.saturating_duration_since(started);
        shared.end_ns.store(end_s.as_nanos() as u64, Ordering::Release);
        let paced = self.schedule.pps.is_some();
        let (seq, bytes, errors) = (self.seq, self.bytes, self.errors);
        let total = UdpSent {
            packets: seq,
            send_errors: errors,
            send_errors_by_errno: self.errnos.into_iter().map(|(code, n)| (udp::errno_name(code), n)).collect(),
            gap_mean_us: self.gaps.mean_us(seq),
            gap_p99_us: self.gaps.p99_us(),
            gso: self.gso_ok,
            sends: self.sends,
            behind_schedule: paced.then_some(self.behind),
            late_max_ms: paced.then_some(self.late_max.as_secs_f64() * 1e3),
        };
        let intervals = self.intervals.finish(end_s.as_secs_f64(), (bytes, seq, errors), shared);
        shared.set_udp_final(Some(total), None, Some(intervals));
        outcome
    }
}

/// Datagrams of `size` bytes in one GSO super-datagram: as many as fit in 65,000 bytes, at
/// most the kernel's segment limit.
fn segments_per_message(size: usize) -> usize {
    (65_000 / size.max(1)).clamp(1, MAX_GSO_SEGMENTS)
}

/// The UDP senders' pacer for a protocol that sends its datagrams one at a time from a loop
/// of its own (a lock-step exchange, crate::peers::nc_test): the workers' schedule, catch-up
/// and stall rules, and their count of refused sends and given-up slots, one datagram at a
/// time.
pub struct DatagramPacer {
    schedule: Schedule,
    /// Datagrams sent or refused: the next one's slot.
    seq: u64,
    sent: u64,
    refused: u64,
    behind: u64,
    late_max: Duration,
}

impl DatagramPacer {
    /// A pacer of `pps` datagrams a second from `started` (None: unpaced, counting only).
    pub fn new(pps: Option<f64>, started: Instant) -> Self {
        let mut spec = TestSpec::udp_default();
        if let Some(u) = spec.udp.as_mut() {
            u.rate = netchar_model::UdpRate::Unlimited;
        }
        let mut schedule = Schedule::new(&spec, started);
        schedule.pps = pps.filter(|&p| p > 0.0);
        Self { schedule, seq: 0, sent: 0, refused: 0, behind: 0, late_max: Duration::ZERO }
    }

    /// Waits until the next datagram is due, returning early when `stop` says so.
    pub fn wait(&mut self, stop: impl Fn() -> bool) {
        loop {
            let now = Instant::now();
            let due = self.schedule.due(self.seq);
            if due <= now {
                if self.schedule.pps.is_some() {
                    self.late_max = self.late_max.max(now.saturating_duration_since(self.schedule.slot(self.seq)));
                }
                self.behind += self.schedule.restart_if_behind(self.seq, due, now);
                return;
            }
            if stop() {
                return;
            }
            pause(due - now);
        }
    }

    /// Counts one send's outcome as the workers count theirs: sent, or refused (its slot
    /// used); an error that every later send would share is handed back.
    pub fn record(&mut self, outcome: io::Result<usize>) -> io::Result<()> {
        let now = Instant::now();
        match outcome {
            Ok(_) => {
                self.sent += 1;
                self.seq += 1;
                self.schedule.last = Some((self.seq, now));
                Ok(())
            }
            Err(e) => match udp::classify_send_error(&e, false) {
                SendFailure::Refused | SendFailure::Unsegmentable => {
                    self.refused += 1;
                    self.seq += 1;
                    self.schedule.refused(1);
                    Ok(())
                }
                SendFailure::Fatal => Err(e),
            },
        }
    }

    /// The sender's figures so far (`behind_schedule` only when paced).
    pub fn figures(&self) -> UdpSent {
        UdpSent {
            packets: self.sent,
            send_errors: self.refused,
            behind_schedule: self.schedule.pps.is_some().then_some(self.behind),
            late_max_ms: self.schedule.pps.is_some().then_some(self.late_max.as_secs_f64() * 1e3),
            ..UdpSent::default()
        }
    }
}

/// How often an end datagram is repeated until its reply arrives, and for how long (iperf2
/// 2.1 clients: every 10 ms for up to 2 s).
const END_RETRY: Duration = Duration::from_millis(10);
const END_WAIT: Duration = Duration::from_secs(2);

/// The format's end exchange on the data socket, if it has one: the end datagram (`buf`, a
/// data datagram as sent) repeated until a reply ends it or [`END_WAIT`] passes, or sent once
/// when the format has no second try (an end nobody answers: iperf2's FIN from a server's
/// `-R`). Returns the bytes of the first end datagram sent and the reply, or None for formats
/// without one.
fn end_exchange<F: DatagramFormat>(
    format: &F,
    controls: &Controls,
    socket: &UdpSocket,
    buf: &mut [u8],
    sent: u64,
    started: Instant,
) -> Option<(u64, Option<Vec<u8>>)> {
    let stamp = |at: Instant| at.saturating_duration_since(started).as_nanos() as u64;
    if !format.end_datagram(buf, sent, 0, stamp(Instant::now())) {
        return None;
    }
    let _ = socket.set_read_timeout(Some(END_RETRY));
    let first = Instant::now();
    let mut counted = None;
    let mut reply = vec![0u8; 2048];
    let mut attempt = 0u32;
    while first.elapsed() < END_WAIT && !controls.abort.load(Ordering::Relaxed) {
        if attempt > 0 {
            format.end_datagram(buf, sent, attempt, stamp(Instant::now()));
        }
        if socket.send(buf).is_ok() && counted.is_none() {
            counted = Some(buf.len() as u64);
        }
        attempt += 1;
        // (Asked again, with its own stamp, just before it goes out.)
        if !format.end_datagram(buf, sent, attempt, stamp(Instant::now())) {
            break;
        }
        let until = Instant::now() + END_RETRY;
        while Instant::now() < until {
            match socket.recv(&mut reply) {
                Ok(n) if format.is_end_reply(&reply[..n]) => {
                    return Some((counted.unwrap_or(0), Some(reply[..n].to_vec())))
                }
                Ok(_) => {}
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => break,
                // The peer is gone for now (ICMP port unreachable): try again at the next slot.
                Err(_) => {
                    std::thread::sleep(until.saturating_duration_since(Instant::now()));
                    break;
                }
            }
        }
    }
    Some((counted.unwrap_or(0), None))
}

/// Realtime now in ns, the clock of SO_TIMESTAMPNS.
pub(super) fn realtime_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// The realtime clock's reading (ns) at monotonic instant `at`, to place kernel timestamps on
/// a worker's timeline with one offset instead of a realtime read per datagram. The realtime
/// read is bracketed by two monotonic reads and retried when the thread was preempted between
/// them, so the offset is good to about a microsecond.
pub(super) fn realtime_at(at: Instant) -> u64 {
    let mut best = None;
    for _ in 0..16 {
        let before = Instant::now();
        let real = realtime_ns();
        let after = Instant::now();
        let span = after - before;
        let mid = before + span / 2;
        let real_at = real.saturating_sub(mid.saturating_duration_since(at).as_nanos() as u64);
        if best.is_none_or(|(s, _)| span < s) {
            best = Some((span, real_at));
        }
        if span < Duration::from_micros(1) {
            break;
        }
    }
    best.map_or(0, |(_, r)| r)
}

pub(super) fn receive<F: DatagramFormat>(
    format: &F,
    shared: &StreamShared,
    controls: &Controls,
    spec: &TestSpec,
    started: Instant,
    socket: &UdpSocket,
    payload: &UdpPayload,
) -> io::Result<()> {
    let opts = spec.udp.clone().unwrap_or_default();
    socket.set_read_timeout(Some(RECV_POLL))?;
    let fd = socket.as_fd();
    let _ = udp::enable_rx_timestamps(fd);
    let gro = opts.gro && udp::enable_gro(fd).is_ok();
    // The realtime instant of `started`, to place kernel timestamps on this end's timeline.
    let started_real = realtime_at(started);
    // Slots sized for the largest datagram the test sends (plus room to spare), not 64 KiB
    // each: a batch of 64 small datagrams then stays within a few cache-friendly pages.
    let largest = opts.pattern.as_ref().and_then(|p| p.sizes.iter().map(|&(_, s)| s).max()).unwrap_or(0);
    let slot =
        if gro { GRO_BUFFER } else { (largest.max(spec.block_bytes) as usize + 1024).next_multiple_of(64).min(65_536) };
    let mut bufs = RecvBuffers::new(slot);
    let mut meta = [RecvMeta::default(); BATCH];
    let mut rx = ReceiverState::new(spec, gro, started_real);
    if payload.verify {
        let g = payload.generator(super::integrity::largest_datagram(spec));
        rx.verify = Some(DatagramCheck::new(g, payload.key, format.header_len()));
    }
    // A receiver that must ask for its data (iperf2's UDP -R) asks every 20 ms, at most 99
    // times, until the first datagram comes, as iperf 2.1's client does.
    let mut request = format.start_request().map(|r| (r, 0u32, None::<Instant>));
    let outcome = loop {
        if controls.abort.load(Ordering::Relaxed) {
            break Ok(());
        }
        if let Some((bytes, tries, last)) = request.as_mut() {
            if rx.bytes > 0 || shared.peer_packets.load(Ordering::Acquire) != u64::MAX || *tries >= REQUEST_TRIES {
                request = None;
            } else if last.is_none_or(|t| t.elapsed() >= REQUEST_EVERY) {
                let _ = socket.send(bytes);
                *tries += 1;
                *last = Some(Instant::now());
            }
        }
        if let Some(deadline) = shared.receive_deadline() {
            let sent = shared.peer_packets.load(Ordering::Acquire);
            // Settled as soon as the total is known: forged numbers at or above it leave the
            // count now (so it is all the sender's when it reaches the total), and those that
            // arrive in the grace period are foreign on arrival.
            if rx.tracker.total().is_none() {
                rx.settle(sent);
            }
            if rx.tracker.unique() >= sent || Instant::now() >= deadline {
                break Ok(());
            }
        }
        match udp::recv_many(fd, &mut bufs, &mut meta) {
            Ok(n) => {
                let now_real = realtime_ns();
                for (i, m) in meta.iter().enumerate().take(n) {
                    let at = m.kernel_ns.unwrap_or(now_real);
                    let offset = at.saturating_sub(started_real);
                    rx.close_ended_intervals(offset, fd, shared, spec);
                    let data = &bufs.slot(i)[..m.len];
                    let stride = m.stride.max(1);
                    // An empty datagram is no segment of data, but may be the sender's end.
                    for seg in data.chunks(stride).chain(data.is_empty().then_some(data)) {
                        if let Some(total) = format.end_of_stream(seg) {
                            // The sender's own end with its total (iperf2's FIN): settle as
                            // when a control connection brings the total, once.
                            if shared.peer_packets.load(Ordering::Acquire) == u64::MAX {
                                shared.peer_packets.store(total, Ordering::Release);
                                let until = started.elapsed() + Duration::from_secs_f64(spec.receive_grace_seconds());
                                shared.receive_until_ns.store(until.as_nanos() as u64, Ordering::Release);
                            }
                            continue;
                        }
                        rx.on_datagram(format, shared.id, seg, at);
                    }
                }
                shared.bytes.store(rx.bytes, Ordering::Release);
                shared.packets.store(rx.tracker.unique(), Ordering::Release);
            }
            Err(e) if crate::is_retry(&e) => {
                rx.close_ended_intervals(realtime_ns().saturating_sub(started_real), fd, shared, spec);
            }
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
            Err(e) => break Err(e),
        }
    };
    // Drops after the last datagram are not reported with any datagram: read the counter.
    rx.drops.read(fd);
    let end_offset = rx.last_offset_ns;
    shared.end_ns.store(end_offset, Ordering::Release);
    rx.finish(shared, spec, end_offset);
    outcome
}

/// The receiving socket's drop counter, read when an interval closes and at the end.
///
/// The kernel's counter is 32 bits; the deltas between readings are summed into 64 so a long,
/// heavily dropping test does not wrap. A reading is taken when the receiver gets to the first
/// datagram past an interval's end, so drops that happened while the queue was backed up are
/// credited to the interval being closed: per interval `kernel_drops` can exceed that interval's
/// `lost` (which is counted by sequence numbers); the totals are exact.
#[derive(Default)]
struct DropCounter {
    last: u32,
    total: u64,
}

impl DropCounter {
    fn read(&mut self, fd: std::os::fd::BorrowedFd<'_>) {
        if let Some(now) = udp::socket_drops(fd) {
            self.update(now as u32);
        }
    }

    fn update(&mut self, now: u32) {
        self.total += u64::from(now.wrapping_sub(self.last));
        self.last = now;
    }
}

/// The fields of a data datagram's header that the receiver uses.
struct DataHeader {
    sequence: u64,
    sent_ns: u64,
}

/// A receiving stream's running accounting.
struct ReceiverState {
    tracker: SequenceTracker,
    jitter: JitterMeter,
    /// |D| of every closed interval, merged once per interval (not recorded twice per datagram).
    whole_variation: Distribution,
    bytes: u64,
    drops: DropCounter,
    foreign: u64,
    gro: bool,
    interval_ns: u64,
    /// Index of the interval being filled, and the counters at its start.
    current: u64,
    at_start: Snapshot,
    /// Closed intervals with the high-water mark at their end (for loss settled later).
    closed: Vec<StreamInterval>,
    /// Distinct arrivals per interval's range of sequence numbers, for exact interval loss.
    ledger: RangeLedger,
    /// Arrival of the last datagram, ns since the start.
    last_offset_ns: u64,
    /// The start on the realtime clock of kernel timestamps.
    started_real_ns: u64,
    /// `--verify`: every datagram of the stream's numbers is compared on arrival (duplicates
    /// too; a datagram of another stream or a number past the sender's total is foreign).
    verify: Option<DatagramCheck>,
}

#[derive(Clone, Copy, Default)]
struct Snapshot {
    bytes: u64,
    unique: u64,
    late: u64,
    duplicates: u64,
    drops: u64,
    high_water: u64,
}

impl ReceiverState {
    fn new(spec: &TestSpec, gro: bool, started_real_ns: u64) -> Self {
        Self {
            tracker: SequenceTracker::new(),
            jitter: JitterMeter::new(),
            whole_variation: Distribution::new(),
            bytes: 0,
            drops: DropCounter::default(),
            foreign: 0,
            gro,
            interval_ns: (spec.interval_seconds * 1e9) as u64,
            current: 0,
            at_start: Snapshot::default(),
            closed: Vec::new(),
            ledger: {
                let mut l = RangeLedger::default();
                l.open(0);
                l
            },
            last_offset_ns: 0,
            started_real_ns,
            verify: None,
        }
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot {
            bytes: self.bytes,
            unique: self.tracker.unique(),
            late: self.tracker.late(),
            duplicates: self.tracker.duplicates(),
            drops: self.drops.total,
            high_water: self.tracker.high_water(),
        }
    }

    fn on_datagram<F: DatagramFormat>(&mut self, format: &F, stream_id: u32, seg: &[u8], at_ns: u64) {
        let h = match format.classify(seg) {
            Received::Data { stream_id: id, sequence, sent_ns } if id == stream_id || !F::STREAM_IDS => {
                DataHeader { sequence, sent_ns }
            }
            Received::Control => return,
            Received::Data { .. } | Received::Foreign => {
                self.foreign += 1;
                return;
            }
        };
        // A segment is at most 64 KiB.
        let len = seg.len() as u32;
        let arrival = self.tracker.record_at(h.sequence, at_ns, len);
        if let (Some(v), false) = (self.verify.as_mut(), matches!(arrival, Arrival::Foreign)) {
            let since_start = at_ns.saturating_sub(self.started_real_ns) as f64 / 1e9;
            v.check(h.sequence, seg, || since_start);
        }
        match arrival {
            Arrival::Duplicate => {}
            // Held until the sender's total says whether it was sent, or not the sender's:
            // neither its bytes nor its timing count (its send stamp is as forged as its number).
            Arrival::Held | Arrival::Foreign => return,
            Arrival::InOrder | Arrival::Late { .. } => self.ledger.credit(h.sequence),
        }
        if F::SEND_TIMES {
            self.jitter.record(h.sent_ns, at_ns);
        }
        self.bytes += u64::from(len);
        self.last_offset_ns = self.last_offset_ns.max(at_ns.saturating_sub(self.started_real_ns));
    }

    /// Settles with the sender's exact total, once: held numbers below it join the count and
    /// their ranges, numbers at or above it leave them with their bytes.
    fn settle(&mut self, sent: u64) {
        let settled = self.tracker.settle(sent);
        for (seq, len) in settled.counted {
            self.ledger.credit(seq);
            self.bytes += u64::from(len);
        }
        for seq in settled.removed {
            self.ledger.uncredit(seq);
        }
        self.bytes = self.bytes.saturating_sub(settled.removed_bytes);
    }

    /// Whether the interval being filled ends at or before `offset_ns` (ns since the start).
    #[inline]
    fn interval_ends_before(&self, offset_ns: u64) -> bool {
        self.interval_ns > 0 && (self.current + 1) * self.interval_ns <= offset_ns
    }

    /// At `offset_ns` (ns since the start), once the interval being filled has ended: reads the
    /// socket's drop counter (read when an interval closes, not per datagram) and closes every
    /// interval ended by then. Checked per datagram, so the check alone is inline.
    #[inline]
    fn close_ended_intervals(
        &mut self,
        offset_ns: u64,
        fd: std::os::fd::BorrowedFd<'_>,
        shared: &StreamShared,
        spec: &TestSpec,
    ) {
        if self.interval_ends_before(offset_ns) {
            self.drops.read(fd);
            self.close_intervals_before(offset_ns, shared, spec);
        }
    }

    /// Closes every interval that ends at or before `offset_ns` (ns since the start).
    fn close_intervals_before(&mut self, offset_ns: u64, shared: &StreamShared, spec: &TestSpec) {
        if self.interval_ns == 0 {
            return;
        }
        while (self.current + 1) * self.interval_ns <= offset_ns {
            let start = self.current as f64 * spec.interval_seconds;
            let end = start + spec.interval_seconds;
            let iv = self.interval_since(start, end, spec);
            shared.push_interval(iv.clone());
            self.closed.push(iv);
            self.ledger.open(self.tracker.high_water());
            self.at_start = self.snapshot();
            self.whole_variation.merge(self.jitter.variation());
            self.jitter.reset_variation();
            self.current += 1;
        }
    }

    fn interval_since(&self, start: f64, end: f64, spec: &TestSpec) -> StreamInterval {
        let now = self.snapshot();
        // Settling takes forged arrivals back from the counts, and they may have come in an
        // interval already closed: the interval that settles shows what it took back.
        let bytes = now.bytes.saturating_sub(self.at_start.bytes);
        let mut r = UdpReceived {
            packets: now.unique.saturating_sub(self.at_start.unique),
            out_of_order: now.late.saturating_sub(self.at_start.late),
            duplicates: now.duplicates.saturating_sub(self.at_start.duplicates),
            reorder_extent_max: self.tracker.reorder_extent_max(),
            jitter_ms: self.jitter.jitter_ns() / 1e6,
            jitter_p50_ms: self.jitter.variation_quantile_ns(0.5) as f64 / 1e6,
            jitter_p99_ms: self.jitter.variation_quantile_ns(0.99) as f64 / 1e6,
            kernel_drops: now.drops - self.at_start.drops,
            coalesced: self.gro,
            ..UdpReceived::default()
        };
        // Provisional: numbers skipped so far; settled when the sender's total is known.
        r.set_lost(self.ledger.lost(self.ledger.len() - 1, now.high_water));
        StreamInterval { udp_received: Some(r), ..StreamInterval::bare(start, end, bytes, spec.omit_seconds) }
    }

    /// Closes the last interval and settles loss with the sender's exact total.
    fn finish(mut self, shared: &StreamShared, spec: &TestSpec, end_ns: u64) {
        // The open interval's variation (with -i 0, the whole test's) joins the closed ones'.
        self.whole_variation.merge(self.jitter.variation());
        let sent = shared.peer_packets.load(Ordering::Acquire);
        // Without the sender's total (an aborted test) the high-water mark stands in for it.
        let sent = if sent == u64::MAX { self.tracker.high_water() } else { sent };
        self.settle(sent);
        let sent = self.tracker.total().unwrap_or(sent);
        if self.interval_ns > 0 {
            let start = self.current as f64 * spec.interval_seconds;
            let end = (end_ns as f64 / 1e9).max(start);
            let iv = self.interval_since(start, end, spec);
            self.closed.push(iv);
        }
        // Loss per interval: the numbers of its range (the high-water advance during it) that
        // never arrived, whenever; the last interval also owns the tail the sender sent after
        // the last arrival.
        let count = self.closed.len();
        let mut intervals: Vec<StreamInterval> = Vec::with_capacity(count);
        for (k, mut iv) in self.closed.into_iter().enumerate() {
            // Ranges end at the sender's total: numbers beyond it were never sent.
            let end = if k + 1 < count { self.ledger.start(k + 1).min(sent) } else { sent };
            if let Some(r) = iv.udp_received.as_mut() {
                r.set_lost(self.ledger.lost(k, end));
            }
            intervals.push(iv);
        }
        let _ = super::merge_short_tail(&mut intervals, spec.interval_seconds);
        let mut total = UdpReceived {
            packets: self.tracker.unique(),
            out_of_order: self.tracker.late(),
            duplicates: self.tracker.duplicates(),
            reorder_extent_max: self.tracker.reorder_extent_max(),
            jitter_ms: self.jitter.jitter_ns() / 1e6,
            jitter_p50_ms: self.whole_variation.quantile(0.5) as f64 / 1e6,
            jitter_p99_ms: self.whole_variation.quantile(0.99) as f64 / 1e6,
            kernel_drops: self.drops.total,
            coalesced: self.gro,
            foreign: self.foreign + self.tracker.foreign(),
            ..UdpReceived::default()
        };
        total.set_lost(self.tracker.lost(sent));
        shared.set_udp_final(None, Some(total), Some(intervals));
        if let Some(v) = self.verify.take() {
            shared.set_integrity(v.finish());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netchar_wire::datagram::{DatagramHeader, NativeFormat};

    #[test]
    fn the_drop_counter_sums_across_the_kernels_32_bit_wrap() {
        let mut d = DropCounter::default();
        d.update(10);
        d.update(u32::MAX - 5);
        assert_eq!(d.total, u64::from(u32::MAX) - 5);
        d.update(4); // wrapped: 10 more drops
        assert_eq!(d.total, u64::from(u32::MAX) + 5);
        d.update(4);
        assert_eq!(d.total, u64::from(u32::MAX) + 5, "no new drops, no change");
    }

    fn datagram(id: u32, seq: u64, len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        DatagramHeader { flags: 0, stream_id: id, sequence: seq, sent_ns: seq * 1000 }.emit(&mut b);
        b
    }

    #[test]
    fn forged_far_ahead_datagrams_count_neither_bytes_nor_lateness() {
        let spec = TestSpec::udp_default();
        let mut rx = ReceiverState::new(&spec, false, 0);
        for s in 0..5000u64 {
            if s % 100 == 0 {
                rx.on_datagram(&NativeFormat, 1, &datagram(1, (1 << 50) + s, 100), s * 1000);
            }
            rx.on_datagram(&NativeFormat, 1, &datagram(1, s, 100), s * 1000 + 10);
        }
        // A challenge that arrived late is no datagram of the test.
        rx.on_datagram(&NativeFormat, 1, &DatagramHeader::challenge(1, &[7; 16]), 6_000_000);
        assert_eq!((rx.tracker.unique(), rx.tracker.late(), rx.bytes), (5000, 0, 500_000));
        let settled = rx.tracker.settle(5000);
        assert!(settled.counted.is_empty());
        assert_eq!((rx.tracker.unique(), rx.tracker.foreign(), rx.tracker.lost(5000)), (5000, 50, 0));
    }

    /// A peer format without sequence numbers: the receiver counts what came in arrival order
    /// and ends at the sender's first empty datagram, with no jitter from send times it lacks.
    #[test]
    fn an_unsequenced_stream_is_counted_and_ends_at_the_senders_empty_datagram() {
        use netchar_model::{EndCondition, Flow, Role};
        use netchar_wire::datagram::UnsequencedFormat;
        let (rx_sock, tx_sock) = (UdpSocket::bind("127.0.0.1:0").unwrap(), UdpSocket::bind("127.0.0.1:0").unwrap());
        tx_sock.connect(rx_sock.local_addr().unwrap()).unwrap();
        rx_sock.connect(tx_sock.local_addr().unwrap()).unwrap();
        let mut spec = TestSpec::udp_default();
        spec.block_bytes = 200;
        spec.interval_seconds = 0.0;
        spec.end = EndCondition::Bytes(200 * 100);
        let started = Instant::now();
        let (tx, rx) = (
            StreamShared::new(1, Flow::Up, Role::Sender, started),
            StreamShared::new(1, Flow::Up, Role::Receiver, started),
        );
        let controls = Controls::default();
        let none = UdpPayload::default();
        std::thread::scope(|s| {
            let receiver =
                s.spawn(|| receive(&UnsequencedFormat::new(0), &rx, &controls, &spec, started, &rx_sock, &none));
            send(&UnsequencedFormat::new(3), &tx, &controls, &spec, started, &tx_sock, &none).unwrap();
            receiver.join().unwrap().unwrap();
        });
        let sent = tx.udp_final.lock().unwrap().take().unwrap().sent.unwrap();
        let got = rx.udp_final.lock().unwrap().take().unwrap().received.unwrap();
        assert_eq!((sent.packets, tx.bytes.load(Ordering::Acquire)), (100, 20_000));
        assert_eq!((got.packets, got.lost, rx.bytes.load(Ordering::Acquire)), (100, 0, 20_000));
        assert_eq!(got.jitter_ms, 0.0);
    }

    /// The receiver's final figures for stream 1 after `feed`, with the sender's total `sent`.
    fn received_after(spec: &TestSpec, sent: u64, feed: impl FnOnce(&mut ReceiverState, &StreamShared)) -> UdpReceived {
        let shared = StreamShared::new(1, netchar_model::Flow::Up, netchar_model::Role::Receiver, Instant::now());
        shared.peer_packets.store(sent, Ordering::Release);
        let mut rx = ReceiverState::new(spec, false, 0);
        feed(&mut rx, &shared);
        let end_ns = rx.last_offset_ns;
        rx.finish(&shared, spec, end_ns);
        let done = shared.udp_final.lock().unwrap().take().expect("final figures");
        done.received.expect("receiver figures")
    }

    #[test]
    fn forged_datagrams_from_the_senders_address_leave_the_genuine_figures_exact() {
        // The attack on `netchar server`: 50,000 genuine datagrams at 50k/s, and forged ones
        // with far-ahead numbers, a few at a time, close together. 39,491 genuine datagrams
        // counted as out of order, and received exceeded sent.
        let mut spec = TestSpec::udp_default();
        spec.interval_seconds = 0.0;
        let r = received_after(&spec, 50_000, |rx, _| {
            for s in 0..50_000u64 {
                let at = s * 20_000;
                if s % 500 == 0 {
                    for k in 0..8 {
                        rx.on_datagram(&NativeFormat, 1, &datagram(1, (1 << 40) + s + k, 100), at);
                    }
                }
                rx.on_datagram(&NativeFormat, 1, &datagram(1, s, 100), at + 10);
            }
        });
        assert_eq!((r.packets, r.lost, r.out_of_order, r.duplicates), (50_000, 0, 0, 0), "{r:?}");
        assert_eq!(r.foreign, 800, "{r:?}");
    }

    #[test]
    fn forged_numbers_taken_back_at_the_end_never_underflow_an_interval() {
        // Forged numbers just above the sender's total counted in the first interval, taken
        // back when the total is known, in a last interval that received nothing itself.
        let mut spec = TestSpec::udp_default();
        spec.interval_seconds = 1.0;
        let r = received_after(&spec, 100, |rx, shared| {
            for s in 0..100u64 {
                rx.on_datagram(&NativeFormat, 1, &datagram(1, s, 100), s * 1_000_000);
            }
            for s in 100..110u64 {
                rx.on_datagram(&NativeFormat, 1, &datagram(1, s + 5, 100), 200_000_000 + s);
            }
            rx.close_intervals_before(1_000_000_000, shared, &spec);
        });
        assert_eq!((r.packets, r.lost, r.out_of_order, r.duplicates, r.foreign), (100, 0, 0, 0, 10), "{r:?}");
    }

    #[test]
    fn a_sender_counts_sends_refused_after_icmp_port_unreachable_and_goes_on() {
        // Each datagram to a closed port brings an ICMP port unreachable, and the next send on
        // the connected socket fails with ECONNREFUSED: a refusal of that send, not of the test.
        let closed = UdpSocket::bind("127.0.0.1:0").unwrap();
        let target = closed.local_addr().unwrap();
        drop(closed);
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket.connect(target).unwrap();
        let mut spec = TestSpec::udp_default();
        spec.block_bytes = 100;
        spec.end = netchar_model::EndCondition::Seconds(0.3);
        spec.udp.as_mut().unwrap().rate = netchar_model::UdpRate::PacketsPerSecond(1000);
        let started = Instant::now();
        let shared = StreamShared::new(1, netchar_model::Flow::Up, netchar_model::Role::Sender, started);
        let outcome =
            send(&NativeFormat, &shared, &Controls::default(), &spec, started, &socket, &UdpPayload::default());
        assert!(outcome.is_ok(), "{outcome:?}");
        assert!(started.elapsed() >= Duration::from_millis(300), "the sender stopped early");
        let (sent, refused) = (shared.packets.load(Ordering::Acquire), shared.send_errors.load(Ordering::Acquire));
        assert!(sent > 0 && refused > 0, "sent {sent}, refused {refused}");
        // Paced at 1000/s for 0.3 s: about 300 slots, each used by a send or a refusal.
        assert!(sent + refused <= 320, "sent {sent} + refused {refused}: refusals spun past the schedule");
    }

    /// A protocol's own loop paced by the workers' schedule: each datagram on its slot, a
    /// refused send counted and using its slot, an error every send would share handed back.
    #[test]
    fn a_datagram_pacer_keeps_the_schedule_and_counts_refusals() {
        let started = Instant::now();
        let mut pacer = DatagramPacer::new(Some(1000.0), started);
        for i in 0..50 {
            pacer.wait(|| false);
            // EPERM: a firewall's refusal.
            let outcome = if i % 5 == 0 { Err(io::Error::from_raw_os_error(1)) } else { Ok(100) };
            pacer.record(outcome).unwrap();
        }
        assert!(started.elapsed() >= Duration::from_millis(49), "50 slots at 1000/s: {:?}", started.elapsed());
        let f = pacer.figures();
        assert_eq!((f.packets, f.send_errors), (40, 10));
        assert!(f.behind_schedule.is_some());
        // EBADF: no later send would go either.
        assert!(pacer.record(Err(io::Error::from_raw_os_error(9))).is_err());
        assert_eq!(DatagramPacer::new(None, started).figures().behind_schedule, None, "unpaced");
    }

    #[test]
    fn realtime_at_places_an_instant_on_the_realtime_clock() {
        // The realtime reading at `start` plus the time since is now, to within the clocks'
        // reads. The time since is bracketed by two monotonic reads around the realtime one,
        // and the best of ten tries is taken: a thread preempted between two reads (a busy
        // machine) widens one try, not the function's error.
        let misses = (0..10).map(|_| {
            let start = Instant::now();
            let at_start = realtime_at(start);
            let before = at_start + start.elapsed().as_nanos() as u64;
            let now = realtime_ns();
            let after = at_start + start.elapsed().as_nanos() as u64;
            (before.saturating_sub(now) + now.saturating_sub(after), now, before, after)
        });
        let (miss, now, before, after) = misses.min().unwrap();
        assert!(miss < 1_000_000, "realtime {now} outside [{before}, {after}] by {miss} ns");
    }
}
