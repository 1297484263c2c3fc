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

use netchar_model::{Direction, EndCondition, Endpoint, Flow, Role, StreamRecord, TestSpec};
use netchar_wire::netio::{Client, ClientStep, Cmd, Control, SizeResult, CONTROL_LEN};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
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

pub(crate) use super::netio_server::bind_listener;
/// `netchar server --netio`: the TCP test port and the UDP test's port+1 (TCP control and UDP
/// data), bound.
// The listener half (`NetioListener` and its sessions) lives in peers/netio_server.rs, on the
// one server driver; its paths stay these.
pub use super::netio_server::NetioListener;
