//! The server role: `netchar server --iperf2` ([`Iperf2Listener`]) answering iperf2 clients
//! over TCP and UDP, each test logged from netchar's own counters.

use crate::dataplane::{DataSocket, DataStream, DatagramFormatKind, PeerDatagrams, StreamOptions, UdpWorker};
use crate::peers::{AddressTests, Joined, PeerContext, PeerListener};
use crate::server_shared::{bind_udp, ServerLog, TestLog};
use netchar_model::{
    Direction, EndCondition, Endpoint, Flow, Role, StreamRecord, TestSpec, UdpOptions, UdpRate, UdpReceived,
};
use netchar_wire::iperf2::{self as wire, Amount, ClientHeader, DialBack, Layout, ServerReport, UdpFormat, UdpHeader};
use std::collections::HashMap;
use std::io::{self, Read};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

/// The longest wait before the stop flag is checked again.
const POLL: Duration = Duration::from_millis(100);
/// A TCP connection must send its header within this.
const HEADER_WAIT: Duration = Duration::from_secs(5);
/// A UDP source's test ends after this much silence without a FIN.
const UDP_IDLE: Duration = Duration::from_secs(5);
/// After the report, how long the source is kept to answer repeated FINs (iperf2 2.1: until
/// 250 ms pass in silence).
const FIN_LINGER: Duration = Duration::from_millis(500);
/// UDP sources served at once.
const MAX_UDP_SOURCES: usize = 64;

/// `netchar server --iperf2`: iperf2's TCP and UDP on one port.
pub struct Iperf2Listener {
    tcp: TcpListener,
    udp: UdpSocket,
}

impl Iperf2Listener {
    /// Binds TCP and UDP on `addr` (`[::]` also takes IPv4); a busy port fails here.
    pub fn bind(addr: SocketAddr) -> io::Result<Self> {
        let (tcp, udp) = crate::peers::bind_tcp_and_udp(addr, bind_udp)?;
        Ok(Self { tcp, udp })
    }
}

/// The registry's binder (crate::protocols::LISTENERS): `ports` is the iperf2 port.
pub(crate) fn bind_listener(ip: IpAddr, ports: &[u16]) -> io::Result<Box<dyn PeerListener>> {
    Ok(Box::new(Iperf2Listener::bind(SocketAddr::new(ip, ports[0]))?))
}

impl PeerListener for Iperf2Listener {
    fn name(&self) -> &'static str {
        "iperf2"
    }
    fn describe(&self) -> String {
        format!("answering iperf2 clients on {} (TCP and UDP), under the same limits", self.local_addr())
    }
    fn local_addr(&self) -> SocketAddr {
        self.tcp.local_addr().unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)))
    }
    fn udp_ports(&self) -> Vec<u16> {
        self.udp.local_addr().map(|a| a.port()).into_iter().collect()
    }
    fn run(self: Box<Self>, ctx: PeerContext) {
        let tests = AddressTests::default();
        let (c2, t2) = (ctx.clone(), tests.clone());
        let Self { tcp, udp } = *self;
        let udp_thread = std::thread::spawn(move || serve_udp(udp, c2, t2));
        serve_tcp(tcp, ctx, tests);
        let _ = udp_thread.join();
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

fn serve_tcp(listener: TcpListener, ctx: PeerContext, tests: AddressTests) {
    super::super::serve_connections(listener, &ctx, "iperf2", move |stream, peer, _, ctx| {
        tcp_connection(stream, peer, ctx, &tests);
    });
}

/// Reads the client header: every byte read (the header and any data after it in the same
/// reads) and the header, or why not.
fn read_header(stream: &mut TcpStream, ctx: &PeerContext) -> Result<(Vec<u8>, ClientHeader), String> {
    let _ = stream.set_read_timeout(Some(POLL));
    let deadline = Instant::now() + HEADER_WAIT;
    let mut head = Vec::with_capacity(wire::MAX_HEADER_LEN);
    let mut buf = [0u8; wire::MAX_HEADER_LEN];
    loop {
        match ClientHeader::decode(&head) {
            Ok(Some((h, _))) => return Ok((head, h)),
            Ok(None) => {}
            Err(e) => return Err(e.to_string()),
        }
        if Instant::now() >= deadline || ctx.stop().is_raised() {
            return Err("no iperf2 header within 5 s".into());
        }
        // Never more than the longest header: the rest stays for the data loop.
        let want = (wire::MAX_HEADER_LEN - head.len()).max(1);
        match stream.read(&mut buf[..want]) {
            Ok(0) => return Err("closed before its iperf2 header".into()),
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(e) if crate::is_retry(&e) => {}
            Err(e) => return Err(e.to_string()),
        }
    }
}

fn tcp_connection(mut stream: TcpStream, peer: SocketAddr, ctx: &PeerContext, tests: &AddressTests) {
    let (head, header) = match read_header(&mut stream, ctx) {
        Ok(x) => x,
        Err(reason) => {
            ctx.log(ServerLog::Rejected { peer, reason: format!("iperf2: {reason}") });
            return;
        }
    };
    let mut spec = to_spec(&header, false, ctx.limits());
    let dial_back = header.dial_back();
    if dial_back.is_some() {
        spec.direction = Direction::Bidir;
    }
    let joined = match tests.join(ctx, &spec, peer) {
        Ok(j) => j,
        Err(reason) => {
            ctx.log(ServerLog::Rejected { peer, reason: format!("iperf2: {reason}") });
            return;
        }
    };
    // -d/-r: the server connects back to the client's own address only, at the port the
    // header names, and sends for the same time or bytes (as iperf2's server: no header on
    // that connection, as Debian's 2.1.8 sends none).
    // Never to a service port (a chargen or echo there would be fed, or feed us) or to a
    // port of this server's.
    let back_to = dial_back
        .and_then(|_| u16::try_from(header.port).ok().filter(|&p| p != 0))
        .map(|p| SocketAddr::new(peer.ip(), p));
    let mut error = None;
    if dial_back.is_some() && back_to.is_none() {
        error = Some(format!("the client asked for -d/-r with port {}: nothing to connect back to", header.port));
    }
    let back_to = match back_to.map(|to| (to, ctx.guard().check_source(to))) {
        Some((to, Err(why))) => {
            error = Some(format!("-d/-r: not connected back to {to}: {why}"));
            None
        }
        other => other.map(|(to, _)| to),
    };
    if header.full_duplex() {
        error = Some("--full-duplex is not supported: only the client's sending ran".into());
    }
    let started = Instant::now();
    // The dial-back stream runs on its own clock from its connection (its -t is its own), and
    // its record is placed on the test's.
    let send_back = |spec: &TestSpec| -> (StreamRecord, Option<String>) {
        let at = started.elapsed().as_secs_f64();
        let (mut r, e) = match back_to {
            Some(to) => match TcpStream::connect_timeout(&to, HEADER_WAIT) {
                Ok(s) => tcp_send(s, 2, spec, ctx, Instant::now()),
                Err(e) => (
                    StreamRecord::bare(2, Flow::Down, Role::Sender, Endpoint::Server, 0, 0.0),
                    Some(format!("cannot connect back to {to} for the -d/-r test: {e}")),
                ),
            },
            None => (StreamRecord::bare(2, Flow::Down, Role::Sender, Endpoint::Server, 0, 0.0), None),
        };
        if r.bytes > 0 {
            r.seconds += at;
            for iv in &mut r.intervals {
                iv.start += at;
                iv.end += at;
            }
        }
        r.started_seconds = Some(at.max(1e-9));
        (r, e)
    };
    let mut records = Vec::new();
    if spec.direction == Direction::Down {
        let (r, e) = match stream.try_clone() {
            Ok(s) => tcp_send(s, 1, &spec, ctx, started),
            Err(e) => (StreamRecord::bare(1, Flow::Down, Role::Sender, Endpoint::Server, 0, 0.0), Some(e.to_string())),
        };
        records.push(r);
        error = error.or(e);
    } else {
        // -d: the server's direction runs beside the client's.
        let dual = (dial_back == Some(DialBack::Dual)).then(|| {
            let send_back = &send_back;
            let spec = &spec;
            std::thread::scope(|scope| {
                let back = scope.spawn(move || send_back(spec));
                let up = receive_up(&stream, &head, &header, ctx, started);
                (
                    up,
                    back.join().unwrap_or_else(|_| {
                        (
                            StreamRecord::bare(2, Flow::Down, Role::Sender, Endpoint::Server, 0, 0.0),
                            Some("the dial-back sender failed".into()),
                        )
                    }),
                )
            })
        });
        let ((up, e), back) = match dual {
            Some((up, back)) => (up, Some(back)),
            None => (receive_up(&stream, &head, &header, ctx, started), None),
        };
        error = error.or(e);
        records.push(up);
        // -r: the server's direction once the client's is over; iperf2 clients wait for the
        // server's close of their connection first.
        let back = back.or_else(|| {
            (dial_back == Some(DialBack::Tradeoff)).then(|| {
                let _ = stream.shutdown(std::net::Shutdown::Both);
                send_back(&spec)
            })
        });
        if let Some((r, e)) = back {
            records.push(r);
            error = error.or(e);
        }
    }
    // Closed at once (iperf2 clients wait for the server's close after their shutdown).
    drop(stream);
    spec.streams = 1;
    let mut data_paths = vec![(1, peer)];
    if let Some(to) = back_to {
        data_paths.push((2, to));
    }
    ctx.log(ServerLog::Test(Box::new(TestLog {
        peer_software: None,
        protocol: "iperf2",
        peer,
        data_paths,
        user: None,
        spec,
        streams: records,
        concurrent_tests: joined.test.concurrent_tests(),
        refused_data: 0,
        error,
    })));
}

/// The client's direction: its bytes counted as the client counts them (a 2.1+ client,
/// EXTEND, its header too; a 2.0.5 client (and netchar's, and lwiperf's flags) not its
/// 24-byte header, written on its own).
fn receive_up(
    stream: &TcpStream,
    head: &[u8],
    header: &ClientHeader,
    ctx: &PeerContext,
    started: Instant,
) -> (StreamRecord, Option<String>) {
    let mut spec = TestSpec::tcp_default();
    spec.block_bytes = 128 * 1024;
    let (mut record, error) = match stream.try_clone() {
        Ok(s) => run_tcp(
            ctx,
            &spec,
            DataStream { id: 1, flow: Flow::Up, role: Role::Receiver, socket: DataSocket::Tcp(s) },
            started,
        ),
        Err(e) => (StreamRecord::bare(1, Flow::Up, Role::Receiver, Endpoint::Server, 0, 0.0), Some(e.to_string())),
    };
    // The header's bytes as the client counts them, in the first interval.
    let mut total = head.len() as u64 + record.bytes;
    if header.flags & wire::HEADER_EXTEND == 0 {
        total = total.saturating_sub(wire::V1_LEN as u64);
    }
    if let Some(first) = record.intervals.first_mut() {
        first.bytes = (first.bytes + total).saturating_sub(record.bytes);
        first.bits_per_second = netchar_model::bits_per_second(first.bytes, first.end - first.start);
    }
    record.bytes = total;
    (record, error)
}

/// Sends on `stream` for the test's time or bytes (2.1 `-R`, and `-d`/`-r`'s dial-back),
/// through the data plane under the server's limits: the stream's record and why it ended
/// early.
fn tcp_send(
    stream: TcpStream,
    id: u32,
    spec: &TestSpec,
    ctx: &PeerContext,
    started: Instant,
) -> (StreamRecord, Option<String>) {
    let mut run = crate::peers::capped(spec, ctx.limits());
    run.block_bytes = run.block_bytes.clamp(1, 1 << 20);
    run.streams = 1;
    run.direction = Direction::Down;
    // The dial-back stream is the test's second: its byte budget is the first's.
    if let (2, EndCondition::Bytes(_)) = (id, run.end) {
        run.direction = Direction::Bidir;
    }
    run_tcp(
        ctx,
        &run,
        DataStream { id, flow: Flow::Down, role: Role::Sender, socket: DataSocket::Tcp(stream) },
        started,
    )
}

/// One TCP stream of an iperf2 test through the data plane ([`crate::peers::run_streams`]).
fn run_tcp(ctx: &PeerContext, spec: &TestSpec, stream: DataStream, started: Instant) -> (StreamRecord, Option<String>) {
    let (id, flow, role) = (stream.id, stream.flow, stream.role);
    let (records, error) = crate::peers::run_streams(
        ctx,
        spec.clone(),
        DatagramFormatKind::Native,
        StreamOptions::default(),
        vec![stream],
        started,
    );
    let record =
        records.into_iter().next().unwrap_or_else(|| StreamRecord::bare(id, flow, role, Endpoint::Server, 0, 0.0));
    (record, error)
}

/// One UDP source's test: iperf2's receive accounting (the highest sequence number, lost as
/// the gaps, out of order as the late ones, RFC 3550 jitter on the sender's stamps).
struct UdpSource {
    joined: Joined,
    spec: TestSpec,
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
    /// What the client asked for that this server does not run (UDP `-d`/`-r`).
    unserved: Option<String>,
}

impl UdpSource {
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
}

fn serve_udp(socket: UdpSocket, ctx: PeerContext, tests: AddressTests) {
    let _ = socket.set_read_timeout(Some(POLL));
    crate::tcp_setup::size_udp_buffers(&socket);
    let mut sources: HashMap<SocketAddr, UdpSource> = HashMap::new();
    let mut buf = vec![0u8; 65_536];
    let mut refused: HashMap<IpAddr, Instant> = HashMap::new();
    let epoch = std::time::SystemTime::now();
    // Sources this server is sending to (UDP -R), each on its own thread.
    let sending: std::sync::Arc<std::sync::Mutex<std::collections::HashSet<SocketAddr>>> = Default::default();
    loop {
        let now = Instant::now();
        let stopping = ctx.stop().is_raised();
        let over: Vec<SocketAddr> = sources
            .iter()
            .filter(|(_, s)| {
                stopping
                    || s.fin_at
                        .map_or(now - s.last >= UDP_IDLE, |f| now - f >= FIN_LINGER && now - s.last >= FIN_LINGER)
            })
            .map(|(a, _)| *a)
            .collect();
        for a in over {
            if let Some(s) = sources.remove(&a) {
                let error = s.unserved.clone().or_else(|| {
                    s.report.is_none().then(|| "no FIN came: the client stopped without ending".to_string())
                });
                s.joined.test.log(&ctx, "iperf2", a, s.spec.clone(), vec![s.record()], error);
            }
        }
        if stopping {
            return;
        }
        refused.retain(|_, t| now - *t < Duration::from_secs(10));
        let (n, from) = match socket.recv_from(&mut buf) {
            Ok(x) => x,
            Err(_) => continue,
        };
        if !ctx.inbound("iperf2", from, n) {
            continue;
        }
        let now = Instant::now();
        let d = &buf[..n];
        if !sources.contains_key(&from) {
            let layout = UdpHeader::sniff_layout(d);
            let Some(h) = UdpHeader::parse(d, layout) else { continue };
            // A FIN of a test already over, or a stray datagram: nothing to answer.
            if h.seq < 0 || sources.len() >= MAX_UDP_SOURCES {
                continue;
            }
            let hl = layout.datagram_header_len();
            let header = ClientHeader::decode(&d[hl.min(d.len())..]).ok().flatten().map(|x| x.0).unwrap_or_default();
            let spec = to_spec(&header, true, ctx.limits());
            if spec.direction == Direction::Down {
                // 2.1 `-R`: the client re-sends its request until data comes; one test per
                // source at a time, the sending on its own thread from this socket's port.
                let busy = sending.lock().map(|m| m.contains(&from)).unwrap_or(true);
                if busy || sending.lock().map_or(0, |m| m.len()) >= MAX_UDP_SOURCES {
                    continue;
                }
                // Nothing proves that the request came from `from`: the test's datagrams go
                // only to an allowed network (the refusal is logged once per source).
                if ctx.may_send_unprompted("iperf2", from).is_err() {
                    continue;
                }
                match (tests.join(&ctx, &spec, from), socket.local_addr()) {
                    (Ok(joined), Ok(local)) => {
                        if let Ok(mut m) = sending.lock() {
                            m.insert(from);
                        }
                        let (ctx, sending) = (ctx.clone(), sending.clone());
                        let _ = std::thread::Builder::new().name("netchar-iperf2-udp".into()).spawn(move || {
                            udp_reverse(local, from, spec, joined, &ctx);
                            // The client's late re-sent requests must not start a second test.
                            std::thread::sleep(FIN_LINGER);
                            if let Ok(mut m) = sending.lock() {
                                m.remove(&from);
                            }
                        });
                    }
                    (Err(reason), _) => {
                        if refused.insert(from.ip(), now).is_none() {
                            ctx.log(ServerLog::Rejected { peer: from, reason: format!("iperf2 (UDP): {reason}") });
                        }
                    }
                    (_, Err(_)) => {}
                }
                continue;
            }
            match tests.join(&ctx, &spec, from) {
                Ok(joined) => {
                    let source = UdpSource {
                        joined,
                        spec,
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
                        // The server would dial back over UDP: not done here (TCP only).
                        unserved: header.dial_back().map(|_| {
                            "the client asked for UDP -d/-r (the server dialing back): not supported, only its own \
                             direction ran"
                                .to_string()
                        }),
                    };
                    sources.insert(from, source);
                }
                Err(reason) => {
                    if refused.insert(from.ip(), now).is_none() {
                        ctx.log(ServerLog::Rejected { peer: from, reason: format!("iperf2 (UDP): {reason}") });
                    }
                    continue;
                }
            }
        }
        let Some(s) = sources.get_mut(&from) else { continue };
        let Some(h) = UdpHeader::parse(d, s.layout) else { continue };
        s.last = now;
        if h.seq < 0 {
            if s.report.is_none() {
                // The FIN, counted as each generation's server counts it: 2.1+ as a datagram
                // with data whose number is −seq; 2.0.5 not at all (−seq is the number of
                // data datagrams, numbered from 0).
                if s.layout == Layout::V205 {
                    s.max_seq = s.max_seq.max(h.seq.saturating_neg() - 1);
                } else {
                    s.bytes += n as u64;
                    s.packets += 1;
                    s.max_seq = s.max_seq.max(h.seq.saturating_neg());
                }
                s.report = Some(s.report_now(now));
                s.fin_at = Some(now);
            }
            if let Some(r) = s.report {
                let reply = r.reply(s.layout, d);
                if ctx.may_answer("iperf2", from, reply.len()) {
                    let _ = socket.send_to(&reply, from);
                }
            }
            continue;
        }
        if s.report.is_some() {
            continue;
        }
        if ctx.limits().max_duration.is_some_and(|m| now - s.started > m + Duration::from_secs(2)) {
            continue;
        }
        s.bytes += n as u64;
        s.packets += 1;
        if h.seq < s.max_seq {
            s.out_of_order += 1;
        } else {
            s.max_seq = h.seq;
        }
        let sent_ns = u64::from(h.sec) * 1_000_000_000 + u64::from(h.usec) * 1000;
        let at_ns = epoch.elapsed().unwrap_or_default().as_nanos() as u64
            + epoch.duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos() as u64;
        s.jitter.record(sent_ns, at_ns);
    }
}

/// iperf 2.1's UDP `-R`, the server's side: the data plane's sender on a socket of the
/// listener's port connected to the client (the kernel gives it that client's datagrams
/// first, and the client's late requests are read by nobody), over iperf2's datagrams
/// ([`reverse_datagrams`]), paced at the header's rate (iperf2's 1 Mbit/s without one) under
/// the server's limits, for the header's time. The client counts the FIN as a datagram with
/// data; so does the log.
fn udp_reverse(local: SocketAddr, to: SocketAddr, spec: TestSpec, joined: Joined, ctx: &PeerContext) {
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
    let run = crate::peers::capped(&run, ctx.limits());
    let started = Instant::now();
    let (streams, error) = match bind_udp(local).and_then(|s| s.connect(to).map(|_| s)) {
        Ok(socket) => {
            crate::tcp_setup::size_udp_buffers(&socket);
            let stream = DataStream { id: 1, flow: Flow::Down, role: Role::Sender, socket: DataSocket::Udp(socket) };
            crate::peers::run_streams(ctx, run, reverse_datagrams(), StreamOptions::default(), vec![stream], started)
        }
        Err(e) => (Vec::new(), Some(format!("cannot open a UDP socket to {to}: {e}"))),
    };
    joined.test.log(ctx, "iperf2", to, spec, streams, error);
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
