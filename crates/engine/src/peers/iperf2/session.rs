//! iperf2's tests, server side, behind the server seam (crate::server_control) and run by the
//! one driver (crate::server_session). iperf2 has no control connection:
//! - a TCP test ([`TcpSession`]) is a connection whose first bytes are the client's header:
//!   the session reads the header as its request, then hands the connection to the workers
//!   as the test's data stream (ServerControlEvent::ControlIsData), counting the bytes it read
//!   itself as the client counts them. `-d`/`-r` make the server connect back to the client
//!   and send: that connection is the server's own, not a stream the client brings, so the
//!   session asks the driver for it (ServerControlEvent::OwnStream), which connects without
//!   blocking and runs it on a sender of its own under the same limits, beside the workers
//!   (`-d`) or after them (`-r`); the session places its record on the test's clock;
//! - a UDP test ([`UdpSession`]) is a source address whose first datagram carries the header:
//!   the listener hands that source's datagrams to the session (crate::server_session::
//!   DatagramLink), which counts them as iperf2's server does (the highest sequence number,
//!   the gaps lost, the late ones out of order, RFC 3550 jitter on the sender's stamps) and
//!   answers each FIN with its report. 2.1's UDP `-R` is a test the driver's workers send,
//!   from a socket on the listener's port connected to the client.
//!
//! A client's `-P` connections and UDP sources are one test under admission (the sessions of
//! one address share it: crate::server_control::TestsByAddress).

use crate::admission::{Limits, Refusal};
use crate::dataplane::{DatagramFormatKind, PeerDatagrams, UdpWorker};
use crate::peers::PeerContext;
use crate::server_control::{
    Admission, OwnStream, OwnTarget, Phase, ServerControl, ServerControlEvent, ServerRequest, SessionPhase,
    TestsByAddress,
};
use netchar_model::{
    Direction, EndCondition, Endpoint, Flow, Role, StreamRecord, TestSpec, UdpOptions, UdpRate, UdpReceived,
};
use netchar_wire::iperf2::{self as wire, Amount, ClientHeader, DialBack, Layout, ServerReport, UdpFormat, UdpHeader};
use netchar_wire::ProtocolError;
use std::collections::VecDeque;
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A TCP connection must send its header within this.
pub(super) const HEADER_WAIT: Duration = Duration::from_secs(5);
/// A UDP source's test ends after this much silence without a FIN.
pub(super) const UDP_IDLE: Duration = Duration::from_secs(5);
/// After the report, how long the source is kept to answer repeated FINs (iperf2 2.1: until
/// 250 ms pass in silence).
pub(super) const FIN_LINGER: Duration = Duration::from_millis(500);

/// The server's connection back to the client (`-d`/`-r`).
struct DialBackPlan {
    kind: DialBack,
    to: SocketAddr,
}

/// An iperf2 TCP test: the connection that carries its header and its data.
pub(crate) struct TcpSession {
    peer: SocketAddr,
    ctx: PeerContext,
    tests: TestsByAddress,
    /// A handle on the connection, to close it before a `-r` dial-back (iperf2 clients wait
    /// for the server's close of their connection first).
    conn: Option<TcpStream>,
    phase: SessionPhase,
    /// Every byte read before the workers took over: the header and any data after it.
    head: Vec<u8>,
    header: Option<ClientHeader>,
    spec: Option<TestSpec>,
    dial_back: Option<DialBackPlan>,
    /// When the dial-back was asked of the driver (ServerControlEvent::OwnStream).
    dial_back_asked: Option<Instant>,
    /// The dial-back's record, on the test's clock, and why it ended early.
    dialed_back: Option<(StreamRecord, Option<String>)>,
    /// When the workers started: the dial-back's record is placed on this clock.
    started: Option<Instant>,
    /// What the client asked for that did not run, or why a dial-back could not.
    caveat: Option<String>,
    events: VecDeque<ServerControlEvent>,
    header_deadline: Instant,
}

impl TcpSession {
    /// A session for the connection from `peer` accepted at `now`; `conn` a handle on it.
    pub(crate) fn new(
        now: Instant,
        peer: SocketAddr,
        conn: Option<TcpStream>,
        ctx: PeerContext,
        tests: TestsByAddress,
    ) -> Self {
        Self {
            peer,
            ctx,
            tests,
            conn,
            phase: SessionPhase::default(),
            head: Vec::with_capacity(wire::MAX_HEADER_LEN),
            header: None,
            spec: None,
            dial_back: None,
            dial_back_asked: None,
            dialed_back: None,
            started: None,
            caveat: None,
            events: VecDeque::new(),
            header_deadline: now + HEADER_WAIT,
        }
    }

    /// The header read: the test it asks for, what runs and what is refused or left out.
    fn requested(&mut self, header: ClientHeader) {
        let mut spec = to_spec(&header, false, self.ctx.limits());
        let dial_back = header.dial_back();
        if dial_back.is_some() {
            spec.direction = Direction::Bidir;
        }
        // -d/-r: the server connects back to the client's own address only, at the port the
        // header names, and sends for the same time or bytes (as iperf2's server: no header
        // on that connection, as Debian's 2.1.8 sends none). Never to a service port (a
        // chargen or echo there would be fed, or feed us) or to a port of this server's.
        if let Some(kind) = dial_back {
            match u16::try_from(header.port).ok().filter(|&p| p != 0).map(|p| SocketAddr::new(self.peer.ip(), p)) {
                None => {
                    self.caveat = Some(format!(
                        "the client asked for -d/-r with port {}: nothing to connect back to",
                        header.port
                    ))
                }
                Some(to) => match self.ctx.guard().check_source(to) {
                    Err(why) => self.caveat = Some(format!("-d/-r: not connected back to {to}: {why}")),
                    Ok(()) => self.dial_back = Some(DialBackPlan { kind, to }),
                },
            }
        }
        if header.full_duplex() {
            self.caveat = Some("--full-duplex is not supported: only the client's sending ran".into());
        }
        let run = if spec.direction == Direction::Down {
            send_spec(&spec, 1, self.ctx.limits())
        } else {
            // The client's direction: read until it closes.
            let mut up = TestSpec::tcp_default();
            up.block_bytes = 128 * 1024;
            up
        };
        self.header = Some(header);
        self.spec = Some(spec.clone());
        self.phase.set(Phase::Asked);
        self.events.push_back(ServerControlEvent::Requested(Box::new(ServerRequest {
            spec,
            run: Some(run),
            companion: None,
            auth: None,
            peer_software: None,
            own_data_port: None,
        })));
    }

    /// Asks the driver for the dial-back stream now: a connection to the client's listener,
    /// tried without blocking the session until [`HEADER_WAIT`] has passed (an iperf2 client
    /// opens it for `-r` only once it has seen the server close the test's connection, just
    /// before this: a busy client can refuse the first tries), then the server's direction
    /// for the test's time or bytes, under the server's limits.
    fn dial_back(&mut self, now: Instant) {
        let (Some(plan), Some(spec)) = (&self.dial_back, &self.spec) else { return };
        if self.dial_back_asked.is_some() {
            return;
        }
        self.dial_back_asked = Some(now);
        self.events.push_back(ServerControlEvent::OwnStream(Box::new(OwnStream {
            id: 2,
            target: OwnTarget::Connect { to: plan.to, until: now + HEADER_WAIT },
            run: send_spec(spec, 2, self.ctx.limits()),
            datagrams: DatagramFormatKind::Native,
            purpose: "the -d/-r test",
            lock_step: None,
        })));
    }
}

impl ServerControl for TcpSession {
    fn protocol(&self) -> &'static str {
        "iperf2"
    }
    fn handle_input(&mut self, _now: Instant, bytes: &[u8]) -> Result<(), ProtocolError> {
        // Every byte before the workers take over is the client's, counted with theirs.
        self.head.extend_from_slice(bytes);
        if self.phase.get() != Phase::Request {
            return Ok(());
        }
        if let Some((header, _)) = ClientHeader::decode(&self.head)? {
            self.requested(header);
        }
        Ok(())
    }
    fn handle_eof(&mut self, _now: Instant) -> Result<(), ProtocolError> {
        match self.phase.get() {
            Phase::Request => Err(ProtocolError::Peer("closed before its iperf2 header".into())),
            _ => Ok(()),
        }
    }
    fn poll_output(&mut self, _out: &mut Vec<u8>) {
        // iperf2's server says nothing on a TCP test's connection (the data it sends on -R is
        // the workers').
    }
    fn poll_event(&mut self) -> Option<ServerControlEvent> {
        self.events.pop_front()
    }
    fn poll_timeout(&self) -> Option<Instant> {
        (self.phase.get() == Phase::Request).then_some(self.header_deadline)
    }
    fn handle_timeout(&mut self, now: Instant) -> Result<(), ProtocolError> {
        if self.phase.get() == Phase::Request && now >= self.header_deadline {
            return Err(ProtocolError::Timeout(format!("no iperf2 header within {} s", HEADER_WAIT.as_secs())));
        }
        Ok(())
    }
    fn admitted(&mut self, _now: Instant, _admission: &Admission<'_>) {
        self.phase.set(Phase::Running);
        self.events.push_back(ServerControlEvent::ControlIsData);
    }
    fn turned_away(&mut self, _now: Instant, _why: &Refusal) {
        // iperf2 has no word for a refusal: the connection closes (the log says why).
        self.phase.set(Phase::Done);
    }
    fn streams_connected(&mut self, now: Instant) {
        self.started = Some(now);
        self.events.push_back(ServerControlEvent::Start);
        if self.dial_back.as_ref().is_some_and(|plan| plan.kind == DialBack::Dual) {
            // -d: the server's direction runs beside the client's.
            self.dial_back(now);
        }
    }
    fn workers_done(&mut self, now: Instant) {
        if self.dial_back.as_ref().is_some_and(|plan| plan.kind == DialBack::Tradeoff) {
            // -r: the server's direction once the client's is over; iperf2 clients wait for
            // the server's close of their connection first.
            if let Some(conn) = self.conn.take() {
                let _ = conn.shutdown(std::net::Shutdown::Both);
            }
            self.dial_back(now);
        }
    }
    fn own_stream_done(&mut self, _now: Instant, mut record: StreamRecord, error: Option<String>) {
        // On the test's clock: from the workers' start to when the dial-back was asked for.
        let asked = self.dial_back_asked.unwrap_or_else(Instant::now);
        let at = asked.saturating_duration_since(self.started.unwrap_or(asked)).as_secs_f64();
        if record.bytes > 0 {
            record.seconds += at;
            for iv in &mut record.intervals {
                iv.start += at;
                iv.end += at;
            }
        }
        record.started_seconds = Some(at.max(1e-9));
        self.dialed_back = Some((record, error));
    }
    fn datagrams(&self) -> DatagramFormatKind {
        DatagramFormatKind::Native
    }
    fn phase(&self) -> Option<&SessionPhase> {
        Some(&self.phase)
    }
    fn tests_by_address(&self) -> Option<TestsByAddress> {
        Some(self.tests.clone())
    }
    fn complete_records(
        &mut self,
        _now: Instant,
        records: &mut Vec<StreamRecord>,
        data_paths: &mut Vec<(u32, SocketAddr)>,
    ) -> Option<String> {
        let (Some(header), Some(spec)) = (self.header, self.spec.clone()) else { return self.caveat.take() };
        let mut error = self.caveat.take();
        if spec.direction != Direction::Down {
            // The client's direction, counted as the client counts it: a 2.1+ client's
            // (EXTEND) header too, not a 2.0.5 client's (nor netchar's, nor lwiperf's first)
            // 24-byte header, written on its own. The bytes read before the workers took
            // over go in the first interval.
            let mut record = records
                .iter()
                .position(|r| r.id == 1)
                .map(|i| records.remove(i))
                .unwrap_or_else(|| StreamRecord::bare(1, Flow::Up, Role::Receiver, Endpoint::Server, 0, 0.0));
            let mut total = self.head.len() as u64 + record.bytes;
            if header.flags & wire::HEADER_EXTEND == 0 {
                total = total.saturating_sub(wire::V1_LEN as u64);
            }
            if let Some(first) = record.intervals.first_mut() {
                first.bytes = (first.bytes + total).saturating_sub(record.bytes);
                first.bits_per_second = netchar_model::bits_per_second(first.bytes, first.end - first.start);
            }
            record.bytes = total;
            records.insert(0, record);
        }
        if let Some((record, e)) = self.dialed_back.take() {
            records.push(record);
            error = error.or(e);
        }
        if let Some(plan) = &self.dial_back {
            data_paths.push((2, plan.to));
        }
        error
    }
}

/// The netchar test an iperf2 client header asks for.
pub fn to_spec(h: &ClientHeader, udp: bool, ctx_limits: &crate::admission::Limits) -> TestSpec {
    let mut spec = if udp { TestSpec::udp_default() } else { TestSpec::tcp_default() };
    spec.direction = if h.reverse() { Direction::Down } else { Direction::Up };
    spec.end = match h.amount() {
        Amount::Seconds(s) if s > 0.0 => EndCondition::Seconds(s),
        Amount::Bytes(b) if b > 0 => EndCondition::Bytes(b),
        // A header of the flags word alone (2.0.5 without -d/-r) says nothing: as long as the
        // client sends.
        _ => EndCondition::Seconds(ctx_limits.max_duration.map_or(10.0, |d| d.as_secs_f64())),
    };
    if h.buf_len > 0 {
        spec.block_bytes = h.buf_len as u64;
    } else if udp {
        spec.block_bytes = 1470;
    }
    if udp {
        let rate = h.ext.map(|e| e.rate()).filter(|&r| r > 0).or((h.win_band > 0).then_some(h.win_band as u64));
        spec.udp = Some(UdpOptions {
            rate: rate.map_or(UdpRate::Unlimited, UdpRate::BitsPerSecond),
            per_stream: true,
            ..UdpOptions::default()
        });
    }
    spec
}

/// The test a sending stream of `spec` runs (2.1 `-R`, and `-d`/`-r`'s dial-back, stream
/// `id`), under the server's limits.
fn send_spec(spec: &TestSpec, id: u32, limits: &Limits) -> TestSpec {
    let mut run = crate::peers::capped(spec, limits);
    run.block_bytes = run.block_bytes.clamp(1, 1 << 20);
    run.streams = 1;
    run.direction = Direction::Down;
    // The dial-back stream is the test's second: its byte budget is the first's.
    if let (2, EndCondition::Bytes(_)) = (id, run.end) {
        run.direction = Direction::Bidir;
    }
    run
}

/// The UDP source's counts: iperf2's receive accounting.
struct UdpCounts {
    layout: Layout,
    started: Instant,
    last: Instant,
    bytes: u64,
    /// Distinct datagrams counted (data; the FIN is added at the end as iperf2 counts it).
    packets: u64,
    /// Highest sequence number seen (iperf2's numbering).
    max_seq: i64,
    out_of_order: u64,
    jitter: netchar_stats::jitter::JitterMeter,
    /// The report, once a FIN came: re-sent to every further FIN.
    report: Option<ServerReport>,
    fin_at: Option<Instant>,
}

impl UdpCounts {
    fn new(layout: Layout, now: Instant) -> Self {
        Self {
            layout,
            started: now,
            last: now,
            bytes: 0,
            packets: 0,
            max_seq: if layout == Layout::V205 { -1 } else { 0 },
            out_of_order: 0,
            jitter: netchar_stats::jitter::JitterMeter::new(),
            report: None,
            fin_at: None,
        }
    }

    /// The report as of `at`: datagrams counted up to the highest number (the FIN's included
    /// once it came), lost = that minus the distinct datagrams received.
    fn report_now(&self, at: Instant) -> ServerReport {
        let first = if self.layout == Layout::V205 { 0 } else { 1 };
        let datagrams = (self.max_seq + 1 - first).max(0) as u64;
        let d = at.saturating_duration_since(self.started);
        let jitter = self.jitter.jitter_ns().max(0.0) as u64;
        ServerReport {
            flags: wire::HEADER_VERSION1,
            bytes: self.bytes,
            stop_sec: d.as_secs() as u32,
            stop_usec: d.subsec_micros(),
            lost: datagrams.saturating_sub(self.packets),
            out_of_order: self.out_of_order,
            datagrams,
            jitter_sec: (jitter / 1_000_000_000) as u32,
            jitter_usec: ((jitter % 1_000_000_000) / 1000) as u32,
        }
    }

    fn record(&self) -> StreamRecord {
        let r = self.report.unwrap_or_else(|| self.report_now(self.last));
        let mut rec = StreamRecord::bare(1, Flow::Up, Role::Receiver, Endpoint::Server, r.bytes, r.seconds());
        let mut u = UdpReceived {
            packets: r.datagrams - r.lost,
            out_of_order: r.out_of_order,
            jitter_ms: r.jitter_seconds() * 1000.0,
            ..UdpReceived::default()
        };
        u.set_lost(r.lost);
        rec.udp_received = Some(u);
        rec
    }
}

/// An iperf2 UDP test: one client source's datagrams, the first carrying its header.
pub(crate) struct UdpSession {
    from: SocketAddr,
    limits: Limits,
    tests: TestsByAddress,
    /// The listener's receive time of the datagram being handled (ns since the Unix epoch).
    arrived_ns: Arc<AtomicU64>,
    /// Set once admitted: the listener holds a refused source's datagrams back a while.
    admitted: Arc<AtomicBool>,
    phase: SessionPhase,
    spec: Option<TestSpec>,
    /// 2.1 `-R`: the server sends; the workers run it.
    reverse: bool,
    counts: Option<UdpCounts>,
    /// What the client asked for that this server does not run (UDP `-d`/`-r`).
    unserved: Option<String>,
    /// The answer to the FIN just read.
    reply: Option<Vec<u8>>,
    events: VecDeque<ServerControlEvent>,
}

impl UdpSession {
    /// A session for `from`'s datagrams; `arrived_ns` is the link's (DatagramLink::arrivals).
    pub(crate) fn new(
        from: SocketAddr,
        limits: Limits,
        tests: TestsByAddress,
        arrived_ns: Arc<AtomicU64>,
        admitted: Arc<AtomicBool>,
    ) -> Self {
        Self {
            from,
            limits,
            tests,
            arrived_ns,
            admitted,
            phase: SessionPhase::default(),
            spec: None,
            reverse: false,
            counts: None,
            unserved: None,
            reply: None,
            events: VecDeque::new(),
        }
    }

    /// The first datagram: the test its header asks for.
    fn first(&mut self, now: Instant, d: &[u8]) -> Result<(), ProtocolError> {
        let layout = UdpHeader::sniff_layout(d);
        let Some(h) = UdpHeader::parse(d, layout) else {
            return Err(ProtocolError::Malformed("a first datagram shorter than iperf2's header".into()));
        };
        if h.seq < 0 {
            return Err(ProtocolError::Unexpected { message: "FIN", state: "no iperf2 UDP test was running" });
        }
        let hl = layout.datagram_header_len();
        let header = ClientHeader::decode(&d[hl.min(d.len())..]).ok().flatten().map(|x| x.0).unwrap_or_default();
        let spec = to_spec(&header, true, &self.limits);
        self.reverse = spec.direction == Direction::Down;
        let run = if self.reverse {
            reverse_spec(&spec, &self.limits)
        } else {
            // The session counts the datagrams itself: no workers' streams.
            self.counts = Some(UdpCounts::new(layout, now));
            // The server would dial back over UDP: not done here (TCP only).
            self.unserved = header.dial_back().map(|_| {
                "the client asked for UDP -d/-r (the server dialing back): not supported, only its own direction ran"
                    .to_string()
            });
            TestSpec { streams: 0, ..spec.clone() }
        };
        self.spec = Some(spec.clone());
        self.phase.set(Phase::Asked);
        self.events.push_back(ServerControlEvent::Requested(Box::new(ServerRequest {
            spec,
            run: Some(run),
            companion: None,
            auth: None,
            peer_software: None,
            own_data_port: None,
        })));
        // The first datagram is the test's first too.
        self.count(now, d);
        Ok(())
    }

    /// Counts one datagram of a forward test; answers a FIN with the report.
    fn count(&mut self, now: Instant, d: &[u8]) {
        let arrived_ns = self.arrived_ns.load(Ordering::Relaxed);
        let max_duration = self.limits.max_duration;
        let Some(s) = self.counts.as_mut() else { return };
        let Some(h) = UdpHeader::parse(d, s.layout) else { return };
        let n = d.len() as u64;
        s.last = now;
        if h.seq < 0 {
            if s.report.is_none() {
                // The FIN, counted as each generation's server counts it: 2.1+ as a datagram
                // with data whose number is −seq; 2.0.5 not at all (−seq is the number of
                // data datagrams, numbered from 0).
                if s.layout == Layout::V205 {
                    s.max_seq = s.max_seq.max(h.seq.saturating_neg() - 1);
                } else {
                    s.bytes += n;
                    s.packets += 1;
                    s.max_seq = s.max_seq.max(h.seq.saturating_neg());
                }
                s.report = Some(s.report_now(now));
                s.fin_at = Some(now);
            }
            self.reply = s.report.map(|r| r.reply(s.layout, d));
            return;
        }
        if s.report.is_some() || max_duration.is_some_and(|m| now - s.started > m + Duration::from_secs(2)) {
            return;
        }
        s.bytes += n;
        s.packets += 1;
        if h.seq < s.max_seq {
            s.out_of_order += 1;
        } else {
            s.max_seq = h.seq;
        }
        let sent_ns = u64::from(h.sec) * 1_000_000_000 + u64::from(h.usec) * 1000;
        s.jitter.record(sent_ns, arrived_ns);
    }
}

/// The test 2.1's UDP `-R` runs: iperf2's datagrams at the header's rate (iperf2's 1 Mbit/s
/// without one), for the header's time, under the server's limits.
fn reverse_spec(spec: &TestSpec, limits: &Limits) -> TestSpec {
    const DEFAULT_RATE: u64 = 1 << 20;
    let mut run = spec.clone();
    run.block_bytes = run.block_bytes.clamp(Layout::V21.datagram_header_len() as u64, 65_507);
    if !matches!(run.end, EndCondition::Seconds(_)) {
        run.end = EndCondition::Seconds(10.0);
    }
    if let Some(u) = run.udp.as_mut() {
        if !matches!(u.rate, UdpRate::BitsPerSecond(r) if r > 0) {
            u.rate = UdpRate::BitsPerSecond(DEFAULT_RATE);
        }
        u.per_stream = true;
    }
    crate::peers::capped(&run, limits)
}

/// iperf 2.1's datagrams as a server sends them for `-R` (netchar_wire::iperf2::UdpFormat):
/// the 16-byte header alone, numbered from 1 with the wall clock stamp, then one FIN,
/// −(last + 1), as Debian's 2.1.8 ends, with no report awaited.
fn reverse_datagrams() -> DatagramFormatKind {
    DatagramFormatKind::Peer(PeerDatagrams { protocol: "iperf2", variant: 1, run: reverse_sender })
}

/// One worker of [`reverse_datagrams`].
fn reverse_sender(worker: UdpWorker<'_>) -> io::Result<()> {
    let format = UdpFormat::new(Layout::V21, worker.realtime_start_ns(), Vec::new()).with_fin_once();
    worker.run(&format)
}

impl ServerControl for UdpSession {
    fn protocol(&self) -> &'static str {
        "iperf2"
    }
    fn handle_input(&mut self, now: Instant, d: &[u8]) -> Result<(), ProtocolError> {
        match self.phase.get() {
            Phase::Request => self.first(now, d),
            // 2.1 `-R`: the client re-sends its request until data comes: nothing to count.
            _ if self.reverse => Ok(()),
            Phase::Done => Ok(()),
            _ => {
                self.count(now, d);
                Ok(())
            }
        }
    }
    fn handle_eof(&mut self, _now: Instant) -> Result<(), ProtocolError> {
        // The listener let the source go: it is stopping.
        if self.phase.get() != Phase::Done && !self.reverse {
            self.phase.set(Phase::Done);
        }
        Ok(())
    }
    fn poll_output(&mut self, out: &mut Vec<u8>) {
        // One datagram per flush: the driver sends what it is given as one.
        if let Some(reply) = self.reply.take() {
            out.extend_from_slice(&reply);
        }
    }
    fn poll_event(&mut self) -> Option<ServerControlEvent> {
        self.events.pop_front()
    }
    fn poll_timeout(&self) -> Option<Instant> {
        let s = self.counts.as_ref().filter(|_| self.phase.get() == Phase::Running)?;
        Some(match s.fin_at {
            Some(fin) => fin.max(s.last) + FIN_LINGER,
            None => s.last + UDP_IDLE,
        })
    }
    fn handle_timeout(&mut self, now: Instant) -> Result<(), ProtocolError> {
        if self.poll_timeout().is_some_and(|t| now >= t) {
            // Over: the driver reports what was counted (ServerControl::complete_records).
            self.phase.set(Phase::Done);
        }
        Ok(())
    }
    fn admitted(&mut self, _now: Instant, admission: &Admission<'_>) {
        self.phase.set(Phase::Running);
        self.admitted.store(true, Ordering::SeqCst);
        if self.reverse {
            // The workers' stream: a socket on the listener's port connected to the client
            // (whose sending the listener checked: crate::reflection's unprompted rule).
            let _ = admission.route.try_send(crate::admission::DataConn::Udp(1, self.from));
        }
    }
    fn turned_away(&mut self, _now: Instant, _why: &Refusal) {
        // Nothing to answer: the log says why.
        self.phase.set(Phase::Done);
    }
    fn streams_connected(&mut self, _now: Instant) {
        if self.reverse {
            self.events.push_back(ServerControlEvent::Start);
        }
    }
    fn datagrams(&self) -> DatagramFormatKind {
        reverse_datagrams()
    }
    fn phase(&self) -> Option<&SessionPhase> {
        Some(&self.phase)
    }
    fn tests_by_address(&self) -> Option<TestsByAddress> {
        Some(self.tests.clone())
    }
    fn measures_itself(&self) -> bool {
        !self.reverse
    }
    fn complete_records(
        &mut self,
        _now: Instant,
        records: &mut Vec<StreamRecord>,
        data_paths: &mut Vec<(u32, SocketAddr)>,
    ) -> Option<String> {
        let s = self.counts.as_ref()?;
        records.push(s.record());
        data_paths.push((1, self.from));
        self.unserved
            .clone()
            .or_else(|| s.report.is_none().then(|| "no FIN came: the client stopped without ending".into()))
    }
}
