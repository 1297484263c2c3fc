//! netio (netchar_wire::netio), both roles, over real sockets.
//!
//! Client ([`run_client`]): the stock sequence (or chosen sizes) against a netio server, TCP
//! on its port or UDP with the control connection on port+1 and datagrams between port+1 on
//! both ends (netio's fixed ports: the server sends to the client's address at port+1), with a
//! Tx-only mode and an Rx timeout for sink servers (lwIP's contrib netio never sends).
//!
//! Server ([`NetioListener`]): answers the stock netio client on the TCP port (18767) and the
//! UDP test's port+1 (18768), each connection admitted as a test through the shared admission;
//! UDP datagrams go only to the address of an established control connection.

use crate::dataplane::{DataSocket, DataStream, DatagramFormatKind, PeerDatagrams, StreamOptions, UdpWorker};
use crate::peers::{PeerContext, PeerListener};
use crate::server_shared::ServerLog;
use netchar_model::{Direction, EndCondition, Endpoint, Flow, Role, StreamRecord, TestSpec, UdpSent};
use netchar_wire::netio::{Client, ClientStep, Cmd, Control, Server, ServerEvent, SizeResult, CONTROL_LEN, INTERVAL};
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a blocked read or write waits before the stop flag is checked again.
const POLL: Duration = Duration::from_millis(100);
/// netio's socket buffers.
const SOCKET_BUFFER: usize = 131_072;

/// What the client runs.
#[derive(Debug, Clone)]
pub struct NetioClientConfig {
    /// The server's TCP test port address (UDP: its control is this port plus one).
    pub server: SocketAddr,
    /// The UDP test instead of TCP.
    pub udp: bool,
    /// Block sizes, in order.
    pub sizes: Vec<u32>,
    /// Tx only: never ask the server to send (a sink server).
    pub tx_only: bool,
    /// Rx: give up on a size after this long without data, and run the rest Tx only.
    pub rx_timeout: Duration,
    /// Each direction's length (netio: 6 s).
    pub interval: Duration,
    /// Limit for the TCP connect.
    pub connect_timeout: Duration,
}

fn tune(s: &TcpStream) {
    let sock = socket2::SockRef::from(s);
    let _ = sock.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = sock.set_send_buffer_size(SOCKET_BUFFER);
    let _ = s.set_nodelay(true);
}

/// Writes all of `data`, checking `stop` while blocked.
fn write_all(s: &mut &TcpStream, mut data: &[u8], stop: &crate::StopFlag) -> io::Result<()> {
    while !data.is_empty() {
        if stop.is_raised() {
            return Err(io::Error::new(io::ErrorKind::Interrupted, "interrupted"));
        }
        match s.write(data) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "the peer stopped reading")),
            Ok(n) => data = &data[n..],
            Err(e) if crate::is_retry(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A buffer of whole zero-led blocks of `size`, about 256 KiB long (at least one block).
fn block_buffer(size: u32) -> (Vec<u8>, u64) {
    let size = size as usize;
    let blocks = (262_144 / size).max(1);
    let mut b = vec![0u8; size * blocks];
    // Filler like netio's (it only ever reads byte 0 of a block).
    for (i, x) in b.iter_mut().enumerate() {
        if i % size != 0 {
            *x = (i as u32).wrapping_mul(2_654_435_761).to_be_bytes()[0] | 1;
        }
    }
    (b, blocks as u64)
}

/// Sends whole TCP blocks until `until`, paced at `rate` by the data plane's pacer; returns
/// the blocks written.
///
/// Not a data plane stream: the blocks share the connection with netio's control messages and
/// must end on a block boundary with the marker block, after which the connection goes on
/// (the data plane's senders end a stream by shutting its write side down).
fn send_blocks(s: &TcpStream, size: u32, until: Instant, stop: &crate::StopFlag, rate: Option<u64>) -> io::Result<u64> {
    let (buf, per) = block_buffer(size);
    let mut w = s;
    let pacer = crate::dataplane::BytePacer::new(rate, Instant::now());
    let mut blocks = 0u64;
    while Instant::now() < until && !stop.is_raised() {
        if let Some(wait) = pacer.and_then(|p| p.wait(blocks * u64::from(size), Instant::now())) {
            std::thread::sleep(wait.min(POLL));
            continue;
        }
        write_all(&mut w, &buf, stop)?;
        blocks += per;
    }
    Ok(blocks)
}

/// Runs the client; each finished size goes to `on_size` as it completes. On an error the
/// sizes finished so far are returned with it.
pub fn run_client(
    cfg: &NetioClientConfig,
    stop: &crate::StopFlag,
    on_size: &mut dyn FnMut(&SizeResult),
) -> (Vec<SizeResult>, Option<String>) {
    let mut client = Client::new(&cfg.sizes, cfg.udp, cfg.tx_only, cfg.interval);
    let err = drive(cfg, &mut client, stop, on_size).err();
    (client.results, err)
}

fn drive(
    cfg: &NetioClientConfig,
    client: &mut Client,
    stop: &crate::StopFlag,
    on_size: &mut dyn FnMut(&SizeResult),
) -> Result<(), String> {
    let control_addr = if cfg.udp { SocketAddr::new(cfg.server.ip(), cfg.server.port() + 1) } else { cfg.server };
    let conn = TcpStream::connect_timeout(&control_addr, cfg.connect_timeout).map_err(|e| {
        format!(
            "cannot connect to the netio server at {control_addr}: {e} (is `netio -s` running there{}?)",
            if cfg.udp { " with UDP" } else { "" }
        )
    })?;
    tune(&conn);
    conn.set_read_timeout(Some(POLL)).map_err(|e| e.to_string())?;
    conn.set_write_timeout(Some(POLL)).map_err(|e| e.to_string())?;
    let udp = if cfg.udp {
        // netio's server sends to this address at port+1: bind exactly there.
        let local = SocketAddr::new(conn.local_addr().map_err(|e| e.to_string())?.ip(), control_addr.port());
        let s = UdpSocket::bind(local).map_err(|e| {
            format!(
                "cannot bind UDP {local}: {e} (netio's server sends to port {} of this host; free it)",
                local.port()
            )
        })?;
        let sock = socket2::SockRef::from(&s);
        let _ = sock.set_recv_buffer_size(SOCKET_BUFFER);
        let _ = sock.set_send_buffer_size(SOCKET_BUFFER);
        s.connect(control_addr).map_err(|e| e.to_string())?;
        Some(Arc::new(s))
    } else {
        None
    };
    // UDP Rx: a thread counts every datagram that arrives (netio's receiver thread does too).
    let counts = Arc::new((AtomicU64::new(0), AtomicU64::new(0)));
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let counter = udp.clone().map(|s| {
        let (counts, done) = (counts.clone(), done.clone());
        std::thread::spawn(move || {
            let _ = s.set_read_timeout(Some(POLL));
            let mut buf = vec![0u8; 65_536];
            while !done.load(Ordering::Relaxed) {
                if let Ok(n) = s.recv(&mut buf) {
                    counts.0.fetch_add(1, Ordering::Relaxed);
                    counts.1.fetch_add(n as u64, Ordering::Relaxed);
                }
            }
        })
    });
    let outcome = (|| -> Result<(), String> {
        let mut r = &conn;
        let mut w = &conn;
        let mut buf = vec![0u8; 256 * 1024];
        let mut held: Vec<u8> = Vec::new();
        let mut rx_mark = (0u64, 0u64);
        let mut after_s2c = false;
        let mut reported = 0;
        loop {
            while reported < client.results.len() {
                on_size(&client.results[reported]);
                reported += 1;
            }
            if stop.is_raised() {
                return Err("interrupted; the sizes finished so far are reported".into());
            }
            match client.step(Instant::now()) {
                ClientStep::Write(b) => {
                    if b.len() >= CONTROL_LEN
                        && Control::decode(b[b.len() - 8..].try_into().unwrap()).0.cmd == Cmd::S2C as u32
                    {
                        rx_mark = (counts.0.load(Ordering::Relaxed), counts.1.load(Ordering::Relaxed));
                        after_s2c = udp.is_some();
                    }
                    write_all(&mut w, &b, stop).map_err(|e| format!("netio control connection: {e}"))?;
                }
                ClientStep::Transmit { size, until } => {
                    let n = match &udp {
                        None => send_blocks(&conn, size, until, stop, None).map_err(|e| format!("netio Tx: {e}"))?,
                        Some(s) => {
                            let (buf, _) = block_buffer(size);
                            let mut sent = 0u64;
                            while Instant::now() < until && !stop.is_raised() {
                                match s.send(&buf[..size as usize]) {
                                    Ok(_) => sent += 1,
                                    Err(e) if e.raw_os_error() == Some(105) || crate::is_retry(&e) => {}
                                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
                                    Err(e) => return Err(format!("netio UDP Tx: {e}")),
                                }
                            }
                            sent
                        }
                    };
                    client.transmitted(Instant::now(), n);
                }
                ClientStep::Receive { .. } | ClientStep::AwaitControl => {
                    let since = Instant::now();
                    loop {
                        if !held.is_empty() {
                            let used = client.handle_input(Instant::now(), &held).map_err(|e| e.to_string())?;
                            held.drain(..used);
                            break;
                        }
                        if stop.is_raised() {
                            return Err("interrupted; the sizes finished so far are reported".into());
                        }
                        match r.read(&mut buf) {
                            Ok(0) => return Err("the netio server closed the connection".into()),
                            Ok(n) => {
                                if after_s2c {
                                    after_s2c = false;
                                    // Datagrams still in the socket when RES arrived are the
                                    // server's too: a short grace before counting.
                                    std::thread::sleep(Duration::from_millis(200));
                                    let c = (counts.0.load(Ordering::Relaxed), counts.1.load(Ordering::Relaxed));
                                    client.udp_received(c.0 - rx_mark.0, c.1 - rx_mark.1);
                                }
                                held.extend_from_slice(&buf[..n]);
                            }
                            Err(e) if crate::is_retry(&e) => {
                                if since.elapsed() >= cfg.rx_timeout
                                    && matches!(client.step(Instant::now()), ClientStep::Receive { .. })
                                {
                                    client.receive_timed_out(Instant::now());
                                    break;
                                }
                            }
                            Err(e) => return Err(format!("netio control connection: {e}")),
                        }
                    }
                }
                ClientStep::Done => return Ok(()),
            }
        }
    })();
    done.store(true, Ordering::Relaxed);
    if let Some(t) = counter {
        let _ = t.join();
    }
    outcome
}

/// One size's test as netchar's result model describes it: `test.protocol` "netio", both ways
/// (`both_ways`) or Tx only, netio's line as the title once it ran.
pub fn test_info(
    cfg: &NetioClientConfig,
    size: u32,
    both_ways: bool,
    title: Option<String>,
) -> netchar_model::TestInfo {
    let mut spec = if cfg.udp { TestSpec::udp_default() } else { TestSpec::tcp_default() };
    spec.direction = if both_ways { Direction::Bidir } else { Direction::Up };
    spec.block_bytes = u64::from(size);
    spec.end = EndCondition::Seconds(cfg.interval.as_secs_f64());
    spec.interval_seconds = 0.0;
    netchar_model::TestInfo {
        spec,
        remote: cfg.server.to_string(),
        family: if cfg.server.is_ipv4() { "ipv4" } else { "ipv6" }.into(),
        title,
        client_cpu: None,
        concurrent_tests: 1,
        protocol: "netio".into(),
        // netio says nothing about itself.
        peer_software: None,
        far_end: Default::default(),
        caveats: Vec::new(),
    }
}

/// netio's results as netchar's result model: one [`netchar_model::TestResult`] per size,
/// `test.protocol` "netio"; this end's legs measured by the client, the UDP counts the server
/// reported (RES) as the server's records.
pub fn to_results(
    cfg: &NetioClientConfig,
    results: &[SizeResult],
    error: Option<&str>,
) -> Vec<netchar_model::TestResult> {
    use netchar_model::{CpuReport, ResultHeader, TestResult};
    results
        .iter()
        .map(|r| {
            let secs = |t: u64| t as f64 / 1024.0;
            let mut streams = Vec::new();
            if let Some(tx) = r.tx {
                let sent_bytes = tx.sent.map_or(tx.bytes, |s| s * u64::from(r.size));
                streams.push(StreamRecord::bare(
                    1,
                    Flow::Up,
                    Role::Sender,
                    Endpoint::Client,
                    sent_bytes,
                    secs(tx.t1024),
                ));
                if let Some(got) = tx.received {
                    streams.push(StreamRecord::bare(
                        1,
                        Flow::Up,
                        Role::Receiver,
                        Endpoint::Server,
                        got * u64::from(r.size),
                        secs(tx.t1024),
                    ));
                }
            }
            if let Some(rx) = r.rx {
                streams.push(StreamRecord::bare(
                    2,
                    Flow::Down,
                    Role::Receiver,
                    Endpoint::Client,
                    rx.bytes,
                    secs(rx.t1024),
                ));
                if let Some(sent) = rx.sent {
                    streams.push(StreamRecord::bare(
                        2,
                        Flow::Down,
                        Role::Sender,
                        Endpoint::Server,
                        sent * u64::from(r.size),
                        secs(rx.t1024),
                    ));
                }
            }
            let header = ResultHeader {
                test: test_info(cfg, r.size, r.rx.is_some(), Some(r.line())),
                started_at: crate::measure::now_rfc3339(),
                host: crate::measure::host_info(),
                remote_host: None,
            };
            let err = r.note.clone().or_else(|| error.map(str::to_string));
            TestResult::assemble(header, streams, CpuReport::default(), err)
        })
        .collect()
}

/// `netchar server --netio`: the TCP test port and the UDP test's port+1 (TCP control and UDP
/// data), bound.
pub struct NetioListener {
    tcp: TcpListener,
    udp_control: TcpListener,
    udp: UdpSocket,
}

impl NetioListener {
    /// Binds `ip`:`port` (TCP) and `ip`:`port+1` (TCP and UDP); a busy port fails here.
    pub fn bind(ip: IpAddr, port: u16) -> io::Result<Self> {
        use socket2::{Domain, Socket, Type};
        let aux = port.checked_add(1).ok_or_else(|| io::Error::other("the netio port must be below 65535"))?;
        let listen = |p: u16| -> io::Result<TcpListener> {
            let addr = SocketAddr::new(ip, p);
            let s = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
            s.set_reuse_address(true)?;
            if addr.is_ipv6() {
                s.set_only_v6(false)?;
            }
            s.bind(&addr.into())?;
            s.listen(2)?;
            Ok(s.into())
        };
        let tcp = listen(port)?;
        let udp_control = listen(aux)?;
        // Shared with each S2C phase's socket, connected to its client (crate::server_shared::bind_udp).
        let udp = crate::server_shared::bind_udp(SocketAddr::new(ip, aux))?;
        let s = socket2::SockRef::from(&udp);
        let _ = s.set_recv_buffer_size(SOCKET_BUFFER * 4);
        let _ = s.set_send_buffer_size(SOCKET_BUFFER);
        Ok(Self { tcp, udp_control, udp })
    }

    /// The TCP test port.
    pub fn port(&self) -> u16 {
        self.tcp.local_addr().map_or(0, |a| a.port())
    }
}

/// Datagrams received per source address since each UDP test's C2S.
type UdpCounts = Arc<Mutex<HashMap<IpAddr, (u64, u64)>>>;

/// The registry's binder (crate::protocols::LISTENERS): `ports` is the netio TCP port.
pub(crate) fn bind_listener(ip: IpAddr, ports: &[u16]) -> io::Result<Box<dyn PeerListener>> {
    Ok(Box::new(NetioListener::bind(ip, ports[0])?))
}

impl PeerListener for NetioListener {
    fn name(&self) -> &'static str {
        "netio"
    }
    fn describe(&self) -> String {
        format!("netio: TCP test on {}, UDP test on {} (TCP control and UDP)", self.port(), self.port() + 1)
    }
    fn local_addr(&self) -> SocketAddr {
        self.tcp.local_addr().expect("a bound listener has an address")
    }
    fn udp_ports(&self) -> Vec<u16> {
        self.udp.local_addr().map(|a| a.port()).into_iter().collect()
    }
    fn run(self: Box<Self>, ctx: PeerContext) {
        let counts: UdpCounts = Arc::default();
        let udp = Arc::new(self.udp);
        let mut threads = Vec::new();
        {
            let (udp, counts, ctx) = (udp.clone(), counts.clone(), ctx.clone());
            threads.push(std::thread::spawn(move || count_udp(&udp, &counts, &ctx)));
        }
        for (listener, is_udp) in [(self.tcp, false), (self.udp_control, true)] {
            let (ctx, udp, counts) = (ctx.clone(), udp.clone(), counts.clone());
            threads.push(std::thread::spawn(move || accept_loop(listener, is_udp, &ctx, &udp, &counts)));
        }
        for t in threads {
            let _ = t.join();
        }
    }
}

fn count_udp(udp: &UdpSocket, counts: &UdpCounts, ctx: &PeerContext) {
    let _ = udp.set_read_timeout(Some(POLL));
    let mut buf = vec![0u8; 65_536];
    while !ctx.stop().is_raised() {
        if let Ok((n, from)) = udp.recv_from(&mut buf) {
            // Only counted, never answered, so no loop can start here: a datagram from a
            // service port is not a client's, but netio clients send from this very port
            // number (port+1 on both ends), so the own-port rule does not apply.
            if ctx.guard().check_service_port(from).is_err() {
                continue;
            }
            let ip = crate::admission::canonical(from.ip());
            if let Ok(mut m) = counts.lock() {
                // Only sources with a running UDP test are counted (and kept).
                if let Some(c) = m.get_mut(&ip) {
                    c.0 += 1;
                    c.1 += n as u64;
                }
            }
        }
    }
}

fn accept_loop(listener: TcpListener, is_udp: bool, ctx: &PeerContext, udp: &Arc<UdpSocket>, counts: &UdpCounts) {
    let (udp, counts) = (udp.clone(), counts.clone());
    super::serve_connections(listener, ctx, "netio", move |stream, peer, _, ctx| {
        let mut spec = if is_udp { TestSpec::udp_default() } else { TestSpec::tcp_default() };
        spec.direction = Direction::Bidir;
        spec.end = EndCondition::Seconds(INTERVAL.as_secs_f64());
        if let Some(r) = ctx.limits().max_rate {
            spec.tcp.rate_bps_per_stream = Some(r);
            if let Some(u) = spec.udp.as_mut() {
                u.rate = netchar_model::UdpRate::BitsPerSecond(r);
            }
        }
        let test = match ctx.admit(&spec, peer) {
            Ok(t) => t,
            Err(r) => {
                // netio has no way to say "busy": the connection is closed, and logged.
                ctx.log(ServerLog::Rejected { peer, reason: format!("netio: {}", r.reason) });
                return;
            }
        };
        let ip = crate::admission::canonical(peer.ip());
        if is_udp {
            if let Ok(mut m) = counts.lock() {
                m.insert(ip, (0, 0));
            }
        }
        let (received, sent, error, secs, udp_sent) = serve(&stream, peer, is_udp, ctx, &udp, &counts);
        if is_udp {
            if let Ok(mut m) = counts.lock() {
                m.remove(&ip);
            }
        }
        let mut down = StreamRecord::bare(2, Flow::Down, Role::Sender, Endpoint::Server, sent, secs.1);
        down.udp_sent = udp_sent;
        let streams = vec![StreamRecord::bare(1, Flow::Up, Role::Receiver, Endpoint::Server, received, secs.0), down];
        test.log(ctx, "netio", peer, spec, streams, error);
    });
}

/// What one connection's test came to: bytes received, bytes sent, why it ended early, the
/// seconds spent receiving (C2S to the end marker, or to RES for UDP) and sending, and (UDP)
/// the S2C phases' datagram counts summed.
type Served = (u64, u64, Option<String>, (f64, f64), Option<UdpSent>);

/// Serves one connection.
fn serve(
    stream: &TcpStream,
    peer: SocketAddr,
    is_udp: bool,
    ctx: &PeerContext,
    udp: &UdpSocket,
    counts: &UdpCounts,
) -> Served {
    tune(stream);
    let (mut recv_secs, mut send_secs) = (0.0f64, 0.0f64);
    let mut receiving_since: Option<Instant> = None;
    let _ = stream.set_read_timeout(Some(POLL));
    let _ = stream.set_write_timeout(Some(POLL));
    let stop = ctx.stop();
    let idle = ctx.limits().idle_timeout;
    let rate = ctx.limits().max_rate;
    let mut server = Server::new(is_udp);
    let (mut received, mut sent) = (0u64, 0u64);
    let mut udp_sent: Option<UdpSent> = None;
    let mut buf = vec![0u8; 256 * 1024];
    let mut last = Instant::now();
    let mut out = Vec::new();
    let (mut r, mut w) = (stream, stream);
    let ip = crate::admission::canonical(peer.ip());
    let error = loop {
        if stop.is_raised() {
            break Some("the server is stopping".to_string());
        }
        server.poll_output(&mut out);
        if !out.is_empty() {
            if let Err(e) = write_all(&mut w, &out, stop) {
                break Some(e.to_string());
            }
            out.clear();
        }
        let mut failed = None;
        while let Some(ev) = server.poll_event() {
            match ev {
                ServerEvent::Receive { .. } if is_udp => {
                    receiving_since = Some(Instant::now());
                    if let Ok(mut m) = counts.lock() {
                        m.insert(ip, (0, 0));
                    }
                }
                ServerEvent::Receive { .. } => receiving_since = Some(Instant::now()),
                ServerEvent::Received { bytes, .. } => {
                    received += bytes;
                    recv_secs += receiving_since.take().map_or(0.0, |t| t.elapsed().as_secs_f64());
                }
                ServerEvent::CountRequested => {
                    recv_secs += receiving_since.take().map_or(0.0, |t| t.elapsed().as_secs_f64());
                    let (n, b) = counts.lock().ok().and_then(|m| m.get(&ip).copied()).unwrap_or((0, 0));
                    received += b;
                    if let Err(e) = server.udp_count(n.min(u64::from(u32::MAX)) as u32) {
                        failed = Some(e.to_string());
                    }
                }
                ServerEvent::Send { size } if is_udp => {
                    // To the control connection's address at port+1, as netio's server does:
                    // the TCP handshake proved that address, so this cannot be aimed elsewhere.
                    let to = SocketAddr::new(peer.ip(), udp.local_addr().map_or(0, |a| a.port()));
                    let (record, error) = send_datagrams(udp, to, size, ctx);
                    send_secs += record.seconds;
                    sent += record.bytes;
                    let n = record.udp_sent.as_ref().map_or(0, |u| u.packets);
                    if let Some(u) = record.udp_sent {
                        let total = udp_sent.get_or_insert_with(UdpSent::default);
                        total.packets += u.packets;
                        total.send_errors += u.send_errors;
                        total.sends += u.sends;
                    }
                    if let Err(e) = server.udp_sent(n.min(u64::from(u32::MAX)) as u32) {
                        failed = Some(e.to_string());
                    }
                    if error.is_some() {
                        failed = error;
                    }
                }
                ServerEvent::Send { size } => {
                    let t = Instant::now();
                    let until = t + INTERVAL;
                    match send_blocks(stream, size, until, stop, rate)
                        .and_then(|n| write_all(&mut w, &Server::marker(size), stop).map(|_| n))
                    {
                        Ok(n) => {
                            send_secs += t.elapsed().as_secs_f64();
                            sent += (n + 1) * u64::from(size);
                            if let Err(e) = server.sent() {
                                failed = Some(e.to_string());
                            }
                        }
                        Err(e) => failed = Some(format!("sending: {e}")),
                    }
                    last = Instant::now();
                }
                ServerEvent::Quit => {}
            }
        }
        if failed.is_some() {
            break failed;
        }
        if server.is_closed() {
            break None;
        }
        // The stock client sends for 6 s; a phase far longer is not netio's (or a client that
        // holds the test slot): closed, as a longer test than the server allows would be.
        let longest = ctx.limits().max_duration.map_or(INTERVAL * 3, |d| d.max(INTERVAL) + INTERVAL);
        if receiving_since.is_some_and(|t| t.elapsed() > longest) {
            break Some(format!("the client sent for more than {:.0} s in one phase", longest.as_secs_f64()));
        }
        if last.elapsed() >= idle {
            break Some(format!("idle for {:.0} s (the server's --idle-timeout)", idle.as_secs_f64()));
        }
        match r.read(&mut buf) {
            Ok(0) => break server.handle_eof().err().map(|e| e.to_string()),
            Ok(n) => {
                last = Instant::now();
                if let Err(e) = server.handle_input(&buf[..n]) {
                    break Some(e.to_string());
                }
            }
            Err(e) if crate::is_retry(&e) => {}
            Err(e) => break Some(e.to_string()),
        }
    };
    (received, sent, error, (recv_secs, send_secs), udp_sent)
}

/// One S2C phase of the UDP test: datagrams of `size` to `to` for the interval (netio's
/// blocks, netchar_wire::netio::BlockDatagrams), as fast as the socket takes them or at the
/// server's `--max-rate`, through the data plane's sender on a socket of netio's UDP port
/// connected to `to`; refused sends are counted (`send_errors`), never retried as data.
/// Returns the sender's record and why it failed, if it did.
fn send_datagrams(udp: &UdpSocket, to: SocketAddr, size: u32, ctx: &PeerContext) -> (StreamRecord, Option<String>) {
    let mut spec = TestSpec::udp_default();
    spec.direction = Direction::Down;
    spec.block_bytes = u64::from(size.max(1));
    spec.end = EndCondition::Seconds(INTERVAL.as_secs_f64());
    if let Some(u) = spec.udp.as_mut() {
        u.rate = netchar_model::UdpRate::Unlimited;
        u.per_stream = true;
    }
    let spec = crate::peers::capped(&spec, ctx.limits());
    let empty = StreamRecord::bare(2, Flow::Down, Role::Sender, Endpoint::Server, 0, 0.0);
    let local = match udp.local_addr() {
        Ok(a) => a,
        Err(e) => return (empty, Some(format!("netio UDP: {e}"))),
    };
    let socket = match crate::server_shared::bind_udp(local).and_then(|s| s.connect(to).map(|_| s)) {
        Ok(s) => s,
        Err(e) => return (empty, Some(format!("netio UDP: cannot open a socket to {to}: {e}"))),
    };
    let _ = socket2::SockRef::from(&socket).set_send_buffer_size(SOCKET_BUFFER);
    let datagrams = DatagramFormatKind::Peer(PeerDatagrams { protocol: "netio", variant: 0, run: block_sender });
    let stream = DataStream { id: 2, flow: Flow::Down, role: Role::Sender, socket: DataSocket::Udp(socket) };
    let (records, error) =
        crate::peers::run_streams(ctx, spec, datagrams, StreamOptions::default(), vec![stream], Instant::now());
    (records.into_iter().next().unwrap_or(empty), error)
}

/// One worker of netio's UDP datagrams ([`send_datagrams`]).
fn block_sender(worker: UdpWorker<'_>) -> io::Result<()> {
    worker.run(&netchar_wire::netio::BlockDatagrams::default())
}
