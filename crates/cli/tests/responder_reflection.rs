//! The C responder's reflection guard (responder/src/nc_guard.h, docs/embedded.md "Reflection
//! and loops") on loopback, against its ASan/UBSan build, with the test's own sockets as
//! ground truth:
//!
//! - a datagram from a service port (below 1024) to the echo port or the nc_test control port
//!   gets no answer, while the same datagram from an ephemeral port does; a datagram forged
//!   from one of the responder's own ports (a raw socket) is not answered to that port;
//! - with `--allow-peers 10.0.0.0/8` (loopback thereby outside), nc_test UDP_SEND requests
//!   from 127.0.0.1 are NAKed, no data follows, and the refusal is logged once; without the
//!   flag the same requests run;
//! - UDP echo to an address outside the allowed networks is held to the budget: bytes back
//!   at most the bytes sent and at most 1.25 MB/s × seconds + 64 KiB.
//!
//! The privileged-port and raw-socket checks need root: without it they say so and return,
//! or fail under NETCHAR_REQUIRE_ALL=1. Without make or gcc the tests say so likewise.

#[path = "support/require.rs"]
mod require;

use netchar_wire::nc_test::{Kind, Reply, Request, Results, NAK_BAD_REQUEST, REPLY_LEN, RESULTS_LEN};
use std::io::{BufRead, BufReader, ErrorKind, Read};
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The budget for answers outside the allowed networks (responder/nc_config.h): bytes per
/// second, and the bucket's size.
const ANSWER_RATE: f64 = 1_250_000.0;
const ANSWER_BURST: u64 = 65_536;

/// How long a datagram that must not be answered is waited for.
const NO_ANSWER_WAIT: Duration = Duration::from_millis(500);

/// `make -C responder asan`, once for this file's tests; None (after saying why) without make
/// or gcc.
fn asan_binary() -> Option<PathBuf> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        for tool in ["make", "gcc"] {
            if let Err(e) = Command::new(tool).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status() {
                return Err(format!("`{tool}` cannot be run ({e}); the C responder needs make and gcc"));
            }
        }
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../responder");
        let out = Command::new("make").arg("-C").arg(&dir).arg("asan").output().expect("run make -C responder asan");
        assert!(
            out.status.success(),
            "make -C responder asan failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(dir.join("build/netchar-responder-asan"))
    });
    match built {
        Ok(bin) => Some(bin.clone()),
        Err(reason) => {
            require::unavailable("the C responder's reflection tests", reason);
            None
        }
    }
}

/// A responder on free ports with `args`, killed on drop; its log checked for sanitizer
/// reports then.
struct Responder {
    child: Child,
    log: mpsc::Receiver<String>,
    seen: Mutex<Vec<String>>,
}

impl Responder {
    fn start(args: &[&str]) -> Option<Self> {
        let mut child = Command::new(asan_binary()?)
            .args(["--port", "0"])
            .args(args)
            .env("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0:exitcode=86")
            .env("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the responder");
        let (tx, rx) = mpsc::channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let r = Self { child, log: rx, seen: Mutex::new(Vec::new()) };
        // The last start-up line: which networks are allowed.
        r.log_line("UDP answers: unprompted test traffic");
        Some(r)
    }

    /// The first log line containing `needle`, waiting for it (10 s at most per line).
    fn log_line(&self, needle: &str) -> String {
        let mut seen = self.seen.lock().unwrap();
        loop {
            if let Some(l) = seen.iter().find(|l| l.contains(needle)) {
                return l.clone();
            }
            let line = self
                .log
                .recv_timeout(Duration::from_secs(10))
                .unwrap_or_else(|_| panic!("no line with {needle:?} in the responder's log:\n{}", seen.join("\n")));
            seen.push(line);
        }
    }

    /// Every log line so far containing `needle`, after waiting `settle` for more.
    fn lines_with(&self, needle: &str, settle: Duration) -> Vec<String> {
        std::thread::sleep(settle);
        let mut seen = self.seen.lock().unwrap();
        seen.extend(self.log.try_iter());
        seen.iter().filter(|l| l.contains(needle)).cloned().collect()
    }

    /// The number after `after` in a start-up line containing `line`.
    fn port(&self, line: &str, after: &str) -> u16 {
        let l = self.log_line(line);
        l.split(after)
            .nth(1)
            .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port after {after:?} in {l:?}"))
    }

    /// The guard's counters from its latest log line: service port, own port, unprompted
    /// refused, answers held back, their bytes.
    fn guard_counts(&self, settle: Duration) -> Vec<u64> {
        let lines = self.lines_with("reflection guard:", settle);
        let last = lines.last().unwrap_or_else(|| panic!("no reflection guard line in the log"));
        last.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect()
    }

    fn assert_alive(&mut self) {
        if let Some(status) = self.child.try_wait().expect("wait") {
            let mut seen = self.seen.lock().unwrap();
            seen.extend(self.log.try_iter());
            panic!("the responder exited ({status}); its log:\n{}", seen.join("\n"));
        }
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut seen = self.seen.lock().unwrap();
        seen.extend(self.log.try_iter());
        let report = seen.iter().any(|l| l.contains("AddressSanitizer") || l.contains("runtime error"));
        if report && !std::thread::panicking() {
            panic!("the responder's sanitizers reported:\n{}", seen.join("\n"));
        }
    }
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

/// A UDP socket on 127.0.0.1 and the first free port below 1024 from 999 down; None (after
/// saying why) when this process may not bind one.
fn service_port_socket(what: &str) -> Option<UdpSocket> {
    for port in (900..1000).rev() {
        match UdpSocket::bind(loopback(port)) {
            Ok(s) => return Some(s),
            Err(e) if e.kind() == ErrorKind::PermissionDenied => {
                require::unavailable(what, &format!("binding a port below 1024 needs root (127.0.0.1:{port}: {e})"));
                return None;
            }
            Err(_) => continue,
        }
    }
    panic!("no free UDP port from 900 to 999 on 127.0.0.1");
}

/// The datagram `sock` receives within `wait`, if any.
fn answer(sock: &UdpSocket, wait: Duration) -> Option<Vec<u8>> {
    let mut buf = [0u8; 2048];
    sock.set_read_timeout(Some(wait)).unwrap();
    match sock.recv_from(&mut buf) {
        Ok((n, _)) => Some(buf[..n].to_vec()),
        Err(_) => None,
    }
}

/// A UDP datagram from 127.0.0.1:`from` to 127.0.0.1:`to` (8-byte header, no checksum, which
/// IPv4 allows), for a raw socket to send.
fn udp_packet(from: u16, to: u16, payload: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(8 + payload.len());
    p.extend_from_slice(&from.to_be_bytes());
    p.extend_from_slice(&to.to_be_bytes());
    p.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    p.extend_from_slice(&[0, 0]);
    p.extend_from_slice(payload);
    p
}

/// A raw IPv4 UDP socket (root): it sends datagrams with any source port, and receives a copy
/// of every UDP datagram the host receives, loopback's included.
fn raw_udp_socket(what: &str) -> Option<socket2::Socket> {
    use socket2::{Domain, Protocol, Socket, Type};
    match Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::UDP)) {
        Ok(s) => {
            // Room for what the rest of the machine sends meanwhile.
            let _ = s.set_recv_buffer_size(8 << 20);
            Some(s)
        }
        Err(e) => {
            require::unavailable(what, &format!("a raw socket needs root ({e})"));
            None
        }
    }
}

/// How many UDP datagrams from port `from` to port `to` on loopback `raw` sees within `wait`.
fn datagrams_seen(raw: &mut socket2::Socket, from: u16, to: u16, wait: Duration) -> usize {
    let deadline = Instant::now() + wait;
    let mut buf = [0u8; 65_536];
    let mut seen = 0;
    while let Some(left) = deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()) {
        raw.set_read_timeout(Some(left)).unwrap();
        let Ok(n) = raw.read(&mut buf) else { break };
        // The IPv4 header (its length in the low nibble of byte 0, in words), then UDP's.
        let ihl = usize::from(buf[0] & 15) * 4;
        if n >= ihl + 8 {
            let (sport, dport) =
                (u16::from_be_bytes([buf[ihl], buf[ihl + 1]]), u16::from_be_bytes([buf[ihl + 2], buf[ihl + 3]]));
            if (sport, dport) == (from, to) {
                seen += 1;
            }
        }
    }
    seen
}

#[test]
fn datagrams_from_service_ports_and_its_own_ports_are_never_answered() {
    let what = "the service-port and own-port checks of the C responder";
    let Some(mut r) = Responder::start(&["--echo-port", "0", "--discard-port", "0", "--nc-test-port", "0"]) else {
        return;
    };
    let echo = r.port("echo on TCP and UDP port", "port ");
    let discard = r.port("discard on TCP and UDP port", "port ");
    let nc_test = r.port("nc-test slave on UDP port", "UDP port ");
    let Some(privileged) = service_port_socket(what) else { return };
    let ephemeral = UdpSocket::bind(loopback(0)).unwrap();
    let ping = b"are you a loop?";
    let request = Request::new(Kind::Disconnect, 7, 0, 0).encode();

    // From a service port: nothing comes back, from the echo or the nc_test port.
    privileged.send_to(ping, loopback(echo)).unwrap();
    assert_eq!(answer(&privileged, NO_ANSWER_WAIT), None, "echo answered a datagram from a service port");
    privileged.send_to(&request, loopback(nc_test)).unwrap();
    assert_eq!(answer(&privileged, NO_ANSWER_WAIT), None, "nc_test answered a request from a service port");
    // The same from an ephemeral port: answered.
    ephemeral.send_to(ping, loopback(echo)).unwrap();
    assert_eq!(answer(&ephemeral, Duration::from_secs(5)).as_deref(), Some(&ping[..]), "echo answers a client");
    ephemeral.send_to(&request, loopback(nc_test)).unwrap();
    let reply = answer(&ephemeral, Duration::from_secs(5)).expect("nc_test answers a client");
    assert_eq!(reply.len(), REPLY_LEN);
    assert!(Reply::decode(&reply).unwrap().is_ack(), "DISCONNECT is ACKed: {reply:?}");

    // Forged from the responder's own discard port to its echo port: echo must not answer
    // (its answer would go to the discard port; between two echo services, for ever). The raw
    // socket sees every datagram on loopback, so its count is the ground truth; the same
    // datagram from a port of the test's is answered, which shows the forged ones arrive.
    let Some(mut raw) = raw_udp_socket(what) else { return };
    for _ in 0..3 {
        raw.send_to(&udp_packet(discard, echo, ping), &loopback(0).into()).unwrap();
    }
    assert_eq!(datagrams_seen(&mut raw, echo, discard, NO_ANSWER_WAIT), 0, "echo answered its own discard port");
    let mine = ephemeral.local_addr().unwrap().port();
    raw.send_to(&udp_packet(mine, echo, ping), &loopback(0).into()).unwrap();
    assert_eq!(answer(&ephemeral, Duration::from_secs(5)).as_deref(), Some(&ping[..]), "a raw datagram is answered");

    // The responder counted each refusal: 2 from a service port, 3 from its own port.
    let mut counts = r.guard_counts(Duration::ZERO);
    let deadline = Instant::now() + Duration::from_secs(15);
    while counts[..2] != [2, 3] && Instant::now() < deadline {
        counts = r.guard_counts(Duration::from_millis(500));
    }
    assert_eq!(counts, [2, 3, 0, 0, 0], "service port, own port, unprompted, held back, bytes");
    r.assert_alive();
}

/// Sends five UDP_SEND requests of `nbufs` × 1024 bytes from `ctrl` (to the slave's control
/// port) naming `data`'s port as the master's; returns (bytes sent, bytes received on both
/// sockets, the replies, the data datagrams).
fn five_udp_sends(ctrl: &UdpSocket, data: &UdpSocket, nc_test: u16, data_port: u16, nbufs: u32) -> Run5 {
    let mut run = Run5::default();
    let master_port = u32::from(data.local_addr().unwrap().port());
    for seq in 2..7 {
        let mut req = Request::new(Kind::UdpSend, seq, nbufs, 1024);
        req.slave_port = u32::from(data_port);
        req.master_port = master_port;
        let bytes = req.encode();
        ctrl.send_to(&bytes, loopback(nc_test)).unwrap();
        run.sent += bytes.len() as u64;
        let reply = answer(ctrl, Duration::from_secs(5)).expect("a reply to each request");
        run.received += reply.len() as u64;
        let reply = Reply::decode(&reply).unwrap();
        assert_eq!(reply.seq, seq);
        run.replies.push(reply);
        // The test's datagrams, until the results record (or 1 s of silence).
        while let Some(d) = answer(data, Duration::from_secs(1)) {
            run.received += d.len() as u64;
            if d.len() == RESULTS_LEN && Results::decode(&d).is_ok() {
                break;
            }
            run.data += 1;
        }
    }
    run
}

#[derive(Default)]
struct Run5 {
    sent: u64,
    received: u64,
    replies: Vec<Reply>,
    data: u64,
}

#[test]
fn nc_test_udp_send_runs_only_for_allowed_networks() {
    // 10.0.0.0/8 replaces the default (loopback): 127.0.0.1 is outside.
    let args = ["--nc-test-port", "0", "--nc-test-data-port", "0"];
    let Some(mut r) = Responder::start(&[&args[..], &["--allow-peers", "10.0.0.0/8"]].concat()) else { return };
    assert!(r.log_line("UDP answers:").contains("only to --allow-peers (10.0.0.0/8)"));
    let nc_test = r.port("nc-test slave on UDP port", "UDP port ");
    let data_port = r.port("nc-test slave on UDP port", "data on port ");
    let (ctrl, data) = (UdpSocket::bind(loopback(0)).unwrap(), UdpSocket::bind(loopback(0)).unwrap());
    let run = five_udp_sends(&ctrl, &data, nc_test, data_port, 100);
    for reply in &run.replies {
        assert!(!reply.is_ack() && reply.reason == NAK_BAD_REQUEST, "a NAK, reason 2: {reply:?}");
    }
    assert_eq!(run.data, 0, "no test datagram follows a NAK");
    assert!(run.received <= run.sent, "received {} bytes for {} sent", run.received, run.sent);
    assert_eq!(run.received, 5 * REPLY_LEN as u64);
    // Logged once, with the flag that would allow it; counted five times.
    let refusals = r.lines_with("UDP_SEND to 127.0.0.1 refused", Duration::from_millis(200));
    assert_eq!(
        refusals,
        ["netchar-responder: nc_test UDP_SEND to 127.0.0.1 refused: not in --allow-peers (add --allow-peers \
          127.0.0.1/32)"],
        "one line for five refusals"
    );
    let mut counts = r.guard_counts(Duration::ZERO);
    let deadline = Instant::now() + Duration::from_secs(15);
    while counts[2] != 5 && Instant::now() < deadline {
        counts = r.guard_counts(Duration::from_millis(500));
    }
    assert_eq!(counts[..3], [0, 0, 5], "{counts:?}");
    r.assert_alive();
    drop(r);

    // The default (loopback allowed): the same requests run, every datagram arrives.
    let Some(mut r) = Responder::start(&args) else { return };
    assert!(r.log_line("UDP answers:").contains("only to --allow-peers (127.0.0.0/8, ::1/128)"));
    let nc_test = r.port("nc-test slave on UDP port", "UDP port ");
    let data_port = r.port("nc-test slave on UDP port", "data on port ");
    let run = five_udp_sends(&ctrl, &data, nc_test, data_port, 100);
    assert!(run.replies.iter().all(Reply::is_ack), "{:?}", run.replies);
    assert_eq!(run.data, 5 * 100, "every test datagram arrived");
    assert_eq!(run.received, 5 * (REPLY_LEN as u64 + 100 * 1040 + RESULTS_LEN as u64));
    assert!(r.lines_with("refused", Duration::ZERO).is_empty());
    r.assert_alive();
}

#[test]
fn udp_echo_outside_the_allowed_networks_is_held_to_the_budget() {
    let Some(mut r) = Responder::start(&["--echo-port", "0", "--allow-peers", "10.0.0.0/8"]) else { return };
    let echo = r.port("echo on TCP and UDP port", "port ");
    let sock = UdpSocket::bind(loopback(0)).unwrap();
    sock.connect(loopback(echo)).unwrap();
    let reader = sock.try_clone().unwrap();
    // Read every answer while the sender sends: 1000-byte datagrams at 10 MB/s for 2 s, eight
    // times the budget.
    let back = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let mut bytes = 0u64;
        reader.set_read_timeout(Some(Duration::from_millis(700))).unwrap();
        while let Ok(n) = reader.recv(&mut buf) {
            bytes += n as u64;
        }
        (bytes, Instant::now())
    });
    let (datagram, rate, secs) = ([0x5au8; 1000], 10_000_000.0, 2.0);
    let start = Instant::now();
    let mut sent = 0u64;
    while start.elapsed().as_secs_f64() < secs {
        let due = start + Duration::from_secs_f64(sent as f64 / rate);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        if sock.send(&datagram).is_ok() {
            sent += datagram.len() as u64;
        }
    }
    let (got, last) = back.join().unwrap();
    // The reader stops 700 ms after the last answer: the answers came within `window`.
    let window = last.duration_since(start).as_secs_f64() - 0.7;
    let budget = ANSWER_RATE * window + ANSWER_BURST as f64;
    eprintln!("echo outside --allow-peers: sent {sent} bytes in {secs} s, {got} came back (budget {budget:.0})");
    assert!(got <= sent, "more bytes back ({got}) than sent ({sent})");
    assert!(got as f64 <= budget, "{got} bytes back in {window:.2} s exceed the budget ({budget:.0})");
    assert!(got >= ANSWER_BURST - 1000, "the budget's burst at least came back: {got}");
    // Held back, counted (the counters' latest line: they only grow) and logged once for the
    // address.
    let held = r.lines_with("echo: answers to 127.0.0.1 held back", Duration::ZERO);
    assert_eq!(held.len(), 1, "{held:?}");
    assert!(held[0].ends_with("(add --allow-peers 127.0.0.1/32)"), "{}", held[0]);
    let counts = r.guard_counts(Duration::ZERO);
    assert!(counts[3] > 0 && counts[4] == counts[3] * 1000, "held back: {counts:?}");
    assert!(counts[4] + got <= sent, "every byte held back or answered at most once: {counts:?}, {got} of {sent}");
    r.assert_alive();
}

#[test]
fn allow_peers_values_are_checked_before_anything_listens() {
    let Some(bin) = asan_binary() else { return };
    for (value, says) in [
        ("10.0.0.0/33", "--allow-peers 10.0.0.0/33: not an address or network"),
        ("10.0.0.0/8,fe80::1::2", "--allow-peers fe80::1::2: not an address or network"),
        ("1.2.3", "--allow-peers 1.2.3: not an address or network"),
        ("1.1.1.1,2.2.2.2,3.3.3.3,4.4.4.4,5.5.5.5,6.6.6.6,7.7.7.7,8.8.8.8,9.9.9.9", "at most 8 networks"),
        ("none,10.0.0.0/8", "--allow-peers none: takes no networks beside it"),
    ] {
        let out = Command::new(&bin).args(["--port", "0", "--allow-peers", value]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "--allow-peers {value}: {err}");
        assert!(err.contains(says), "--allow-peers {value}: {err}");
    }
    // Repeated and comma-separated, IPv6 with its prefix, bare addresses as hosts.
    let Some(r) = Responder::start(&["--allow-peers", "192.0.2.0/24,2001:db8::/32", "--allow-peers", "[::1]"]) else {
        return;
    };
    let line = r.log_line("UDP answers:");
    assert!(line.contains("only to --allow-peers (192.0.2.0/24, 2001:db8::/32, ::1/128)"), "{line}");
}
