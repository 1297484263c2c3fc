//! irtt (Debian's irtt 0.9, protocol version 1), both roles.
//!
//! netchar's server (`netchar server --irtt`) against an unmodified `irtt client`: its own
//! JSON (`-o`) is the ground truth: the requests it sent are the requests netchar's server
//! logged as received, the replies it received are the replies the server logged as sent; with
//! `--psk-file` (its `irtt` line the key) a client with that `--hmac` runs, one without or
//! with another gets nothing. A hostile test: forged, malformed and HMAC-signed packets get no
//! answer (no key), and a single open
//! gets none either (its reply would be longer than it), so no source gets more bytes back
//! than it sent.
//!
//! netchar's client (`netchar rr --udp --proto irtt`) against an unmodified `irtt server`: on
//! loopback every request is answered and the server's count equals it, and the two one-way
//! halves of a round trip add up to no more than it; with an HMAC key (`--psk-file`) against
//! `irtt server --hmac`, and a wrong key refused in one line; a server's `-d` refused in one
//! line and its `-i` kept to. In a namespace pair, nft rules drop 2% of the requests and 2% of
//! the replies at random and count them: netchar's loss up and down equal the two counters
//! exactly, and so do the figures of irtt's own client through the same rules.
//!
//! Skips (with a line saying so) where irtt is not installed, or, for the namespace test,
//! without root, ip and nft; fails instead under NETCHAR_REQUIRE_ALL=1 (CI, which installs
//! them).

#[path = "support/loopback.rs"]
mod common;
#[path = "support/netns.rs"]
mod netns;
#[path = "support/require.rs"]
mod require;

use common::*;
use serde_json::Value;
use std::net::UdpSocket;
use std::process::Command;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_netchar");

fn have_irtt() -> bool {
    require::tool("irtt interop", "irtt", &["version"], "apt-get install irtt")
}

/// `netchar server --irtt` on a free port, logging JSON lines; its irtt port.
fn server(extra: &[&str]) -> (Server, u16) {
    let s = Server::start(&[&["--irtt", "--irtt-port", "0", "--json"], extra].concat());
    let lines = [s.startup.clone(), s.log_lines(Duration::from_secs(5))].concat();
    let port = announced_port(&lines, "answering irtt clients on ").unwrap_or_else(|| panic!("{lines:?}"));
    (s, port)
}

fn flow_bytes(log: &Value, flow: &str) -> u64 {
    let f = log["flows"].as_array().unwrap().iter().find(|f| f["flow"] == flow).unwrap_or_else(|| panic!("{log}"));
    u(&f["bytes"])
}

/// `irtt client` against `port` with `args`; its JSON's stats.
fn irtt_client(port: u16, args: &[&str]) -> Value {
    let dir = std::env::temp_dir().join(format!("netchar-irtt-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out_file = dir.join("out.json");
    let out = Command::new("irtt")
        .arg("client")
        .args(args)
        .args(["-Q", "-o"])
        .arg(&out_file)
        .arg(format!("127.0.0.1:{port}"))
        .output()
        .unwrap();
    assert!(out.status.success(), "irtt client {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&out_file).unwrap()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    v
}

/// netchar's server in namespace `a` of a veth pair, irtt's client in `b`, and nft counting
/// what crossed: the data requests into `a` (irtt's flags byte, its 4th after a 3-byte magic,
/// is 0) and the data replies into `b` (flags 2). irtt's own count of its sends can fall one
/// short of the wire's on a busy machine (seen once: 19 sent, 20 received and answered), so the
/// server's log is held to the wire's counts, not to irtt's.
struct WireBed {
    link: netns::Link,
    server: netns::Server,
    host: String,
}

const WIRE_PORT: &str = "2112";

impl WireBed {
    /// The bed with `netchar server --irtt EXTRA...`, or None once it said why it cannot be.
    fn start(extra: &[&str]) -> Option<Self> {
        let link = match netns::Link::create() {
            Ok(l) => l,
            Err(reason) => {
                netns::skip_or_fail(&reason);
                return None;
            }
        };
        let rules = [(&link.a, "irttreq", "dport", "0"), (&link.b, "irttreply", "sport", "2")].iter().try_for_each(
            |(ns, table, which, flags)| {
                ns.input_chain(table, "input")?;
                let rule =
                    ["add", "rule", "inet", table, "input", "udp", which, WIRE_PORT, "@th,88,8", flags, "counter"];
                ns.nft(&rule).map(|_| ())
            },
        );
        if let Err(e) = rules {
            netns::skip_or_fail(&format!("cannot install the nftables counters: {e}"));
            return None;
        }
        let a_ip = link.a_ip.to_string();
        let mut cmd = link.a.command(BIN);
        cmd.args(["server", "-B", &a_ip, "-p", "0", "--irtt", "--irtt-port", WIRE_PORT, "--json"]).args(extra);
        let server = netns::Server::spawn(cmd, "answering irtt clients on", Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("{e}"));
        Some(Self { host: format!("{a_ip}:{WIRE_PORT}"), link, server })
    }

    /// `irtt client ARGS... -Q HOST` in `b`: its exit status and stderr.
    fn irtt(&self, args: &[&str]) -> std::process::Output {
        self.link.b.command("irtt").arg("client").args(args).args(["-Q", &self.host]).output().unwrap()
    }

    /// `irtt client ARGS... -o FILE` in `b`, which must succeed; its JSON.
    fn irtt_json(&self, args: &[&str]) -> Value {
        let out_file = std::env::temp_dir().join(format!("netchar-irtt-wire-{}.json", std::process::id()));
        let out = self.irtt(&[args, &["-o", out_file.to_str().unwrap()]].concat());
        assert!(out.status.success(), "irtt client {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        let v = serde_json::from_str(&std::fs::read_to_string(&out_file).unwrap()).unwrap();
        let _ = std::fs::remove_file(&out_file);
        v
    }

    /// (requests, replies) nft counted so far, each checked to be one `len`-byte datagram per
    /// packet the hook saw (irtt sends no GSO batches; 28 bytes of IP and UDP headers).
    fn crossed(&self, len: u64) -> (u64, u64) {
        let count = |ns: &netns::Netns, table: &str| {
            let (packets, bytes) = ns.nft_counters("inet", table, "input").unwrap()[0];
            assert_eq!(
                bytes,
                packets * (len + 28),
                "{table}: {packets} packets, {bytes} bytes: not {len}-byte datagrams"
            );
            packets
        };
        (count(&self.link.a, "irttreq"), count(&self.link.b, "irttreply"))
    }

    /// The server's first `n` logged tests, waiting up to 30 s for them.
    fn logged_tests(&self, n: usize) -> Vec<Value> {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let logs: Vec<Value> = self
                .server
                .stderr()
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter(|e| e["event"] == "test")
                .collect();
            if logs.len() >= n || std::time::Instant::now() >= deadline {
                assert_eq!(logs.len(), n, "{n} tests logged within 30 s: {}", self.server.stderr());
                return logs;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

#[test]
fn irtt_client_counts_equal_what_netchars_server_logged() {
    if !have_irtt() {
        return;
    }
    let Some(bed) = WireBed::start(&[]) else { return };
    let len = 172u64;
    let v = bed.irtt_json(&["-i", "20ms", "-d", "2s", "-l", &len.to_string()]);
    let (requests, replies) = bed.crossed(len);
    let stats = &v["stats"];
    let received = u(&stats["packets_received"]);
    eprintln!(
        "irtt sent {} and received {received}; nft counted {requests} requests and {replies} replies",
        stats["packets_sent"]
    );
    // (100 slots of 20 ms; a busy machine makes irtt skip some, so no count is promised.)
    assert!(requests > 0, "{stats}");
    // A veth pair loses nothing: the server answered every request that crossed. irtt counts
    // a reply only if it came within its wait after the last send (three times the longest
    // round trip), which a busy machine's tail can outlast: at most every reply.
    assert_eq!(replies, requests, "{stats}");
    assert!(received <= replies, "irtt received more replies than crossed: {stats}");
    // The server's count in the last reply irtt received: every request up to that one.
    assert!(u(&stats["server_packets_received"]) <= requests, "{stats}");
    // Every round trip irtt completed has the server's receive and send stamps: one-way
    // delays both ways.
    let rt = v["round_trips"].as_array().unwrap();
    let completed: Vec<&Value> = rt.iter().filter(|r| r["lost"] == "false").collect();
    assert_eq!(completed.len() as u64, received, "{stats}");
    assert!(completed.iter().all(|r| r["delay"]["send"].is_i64() && r["delay"]["receive"].is_i64()));
    let log = bed.logged_tests(1).remove(0);
    assert_eq!(log["protocol"], "irtt");
    assert_eq!(log["error"], Value::Null, "{log}");
    assert_eq!(flow_bytes(&log, "up"), requests * len, "requests received = nft's count: {log}");
    assert_eq!(flow_bytes(&log, "down"), replies * len, "replies sent = nft's count: {log}");
}

#[test]
fn the_server_grants_no_more_than_its_max_duration() {
    if !have_irtt() {
        return;
    }
    let Some(bed) = WireBed::start(&["--max-duration", "1"]) else { return };
    // A stock client refuses restricted parameters; with --loose it runs what was granted.
    let out = bed.irtt(&["-i", "50ms", "-d", "5s"]);
    assert!(!out.status.success(), "a 5 s test on a 1 s server: {}", String::from_utf8_lossy(&out.stderr));
    let v = bed.irtt_json(&["-i", "50ms", "-d", "5s", "--loose"]);
    let (requests, replies) = bed.crossed(60);
    let stats = &v["stats"];
    eprintln!(
        "irtt sent {} and received {}; nft counted {requests} requests and {replies} replies",
        stats["packets_sent"], stats["packets_received"]
    );
    // The grant bounds what the client may send: a request every 50 ms for 1 s, the first at
    // 0. How many of them a busy machine let it send on time is its own business.
    assert!((1..=21).contains(&requests), "1 s at 50 ms: {requests} requests crossed");
    // The refused client's open was granted and its test ended empty; the second's counts are
    // the wire's.
    let logs = bed.logged_tests(2);
    assert_eq!(flow_bytes(&logs[0], "up"), 0, "{logs:?}");
    assert_eq!(flow_bytes(&logs[1], "up"), requests * 60, "requests received = nft's count: {logs:?}");
    assert_eq!(flow_bytes(&logs[1], "down"), replies * 60, "replies sent = nft's count: {logs:?}");
}

#[test]
fn forged_malformed_and_signed_packets_get_no_answer_and_nothing_outgrows_what_came() {
    if !have_irtt() {
        return;
    }
    let (_s, port) = server(&[]);
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.connect(("127.0.0.1", port)).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    let mut buf = [0u8; 2048];
    let silent = |bytes: &[u8], what: &str| {
        sock.send(bytes).unwrap();
        assert!(sock.recv(&mut [0u8; 2048]).is_err(), "{what} was answered");
    };
    // A captured open of a 1 s test at 200 ms intervals, 60-byte packets (irtt 0.9).
    let open: [u8; 26] = [
        0x14, 0xa7, 0x5b, 0x01, 0x01, 0x02, 0x02, 0x80, 0xa8, 0xd6, 0xb9, 0x07, 0x03, 0x80, 0x88, 0xde, 0xbe, 0x01,
        0x04, 0x78, 0x05, 0x06, 0x06, 0x06, 0x07, 0x06,
    ];
    let mut signed = open;
    signed[3] |= 8;
    silent(&signed, "an HMAC-signed open (no key)");
    silent(&[0x14, 0xa7, 0x5b, 0x01, 0x63, 0x02], "an open with an unknown parameter");
    silent(&[0x14, 0xa7, 0x5b, 0x01, 0x02, 0xff, 0xff], "an open whose varint runs out");
    silent(&[0x14, 0xa7, 0x5b, 0x00, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0], "data of a token nobody was given");
    silent(b"GET / HTTP/1.0\r\n\r\n", "foreign bytes");
    // What must be answered is waited for (the open's reply comes from the session the
    // second open starts, on a thread of its own); only silence is looked for for 300 ms.
    let answered = |buf: &mut [u8], what: &str| {
        sock.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let n = sock.recv(buf).unwrap_or_else(|e| panic!("{what}: {e}"));
        sock.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
        n
    };
    // One open (26 bytes) would be answered with 34: not answered.
    silent(&open, "a first open");
    // A second open from the same source adds up to the reply: 34 bytes for 52 sent.
    sock.send(&open).unwrap();
    let n = answered(&mut buf, "the repeated open is answered");
    assert_eq!(n, 34);
    assert!(n <= 2 * open.len());
    assert_eq!(&buf[..4], &[0x14, 0xa7, 0x5b, 0x03]);
    let token: [u8; 8] = buf[4..12].try_into().unwrap();
    // A request shorter than its reply (60 bytes asked for) gets none.
    let mut short = vec![0u8; 40];
    short[..3].copy_from_slice(&[0x14, 0xa7, 0x5b]);
    short[4..12].copy_from_slice(&token);
    silent(&short, "a data request too short for its reply");
    let mut request = vec![0u8; 60];
    request[..3].copy_from_slice(&[0x14, 0xa7, 0x5b]);
    request[4..12].copy_from_slice(&token);
    request[12] = 1;
    sock.send(&request).unwrap();
    let n = answered(&mut buf, "a data request is answered");
    assert_eq!(n, request.len(), "a reply is its request's length");
    assert_eq!(buf[3], 2);
    // From another port the token is nobody's.
    let other = UdpSocket::bind("127.0.0.1:0").unwrap();
    other.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    other.send_to(&request, ("127.0.0.1", port)).unwrap();
    assert!(other.recv(&mut buf).is_err(), "a token from another address was answered");
    // A burst far beyond the interval: at most irtt's burst of 5 more answers.
    for _ in 0..20 {
        sock.send(&request).unwrap();
    }
    let mut answered = 0;
    while sock.recv(&mut buf).is_ok() {
        answered += 1;
    }
    assert!(answered <= 5, "{answered} answers to a burst of 20 at a 200 ms interval");
}

#[test]
fn netchars_server_takes_the_irtt_line_of_its_psk_file_as_the_hmac_key() {
    if !have_irtt() {
        return;
    }
    let secret = "0123456789abcdef-server";
    let (keys, _g) = key_file("server", secret);
    let (s, port) = server(&["--psk-file", keys.to_str().unwrap()]);
    let v = irtt_client(port, &["-i", "20ms", "-d", "1s", &format!("--hmac={secret}")]);
    let stats = &v["stats"];
    let sent = u(&stats["packets_sent"]);
    assert!(sent > 0 && u(&stats["packets_received"]) == sent && u(&stats["server_packets_received"]) == sent);
    // Every packet signed: 76 bytes each (60 and the HMAC), as the server logged them.
    assert_eq!(u(&stats["bytes_sent"]), sent * 76);
    let log = s.logged_tests(1).remove(0);
    assert_eq!(flow_bytes(&log, "up"), sent * 76, "{log}");
    // Without the key, or with another, nothing is answered: the stock client gives up.
    for hmac in [None, Some("--hmac=another-key-entirely")] {
        let mut cmd = Command::new("irtt");
        cmd.args(["client", "-i", "20ms", "-d", "1s", "-Q", "--timeouts=500ms,500ms"]).args(hmac);
        let out = cmd.arg(format!("127.0.0.1:{port}")).output().unwrap();
        assert!(!out.status.success(), "{hmac:?} was answered");
    }
}

use netchar_testkit::ports::free_udp_port;

/// `irtt server -b ADDR EXTRA...` started by `cmd` (a namespace's, or the host's), running
/// once its listener line is out; its output is kept (its [CloseConn] lines tell that a
/// client closed).
fn irtt_server(mut cmd: Command, addr: &str, extra: &[&str]) -> netns::Server {
    let script = format!("exec irtt server -b {addr} {} 1>&2", extra.join(" "));
    cmd.args(["-c", &script]);
    netns::Server::spawn(cmd, "[ListenerStart]", Duration::from_secs(10)).unwrap_or_else(|e| panic!("{e}"))
}

fn local_irtt_server(extra: &[&str]) -> (netns::Server, u16) {
    let port = free_udp_port();
    (irtt_server(Command::new("sh"), &format!("127.0.0.1:{port}"), extra), port)
}

/// A key file with `secret` for `--psk-file`, removed with the returned guard's directory.
fn key_file(name: &str, secret: &str) -> (std::path::PathBuf, TempDir) {
    let dir = TempDir(std::env::temp_dir().join(format!("netchar-irtt-key-{}-{name}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let path = dir.0.join("keys");
    std::fs::write(&path, format!("irtt:{secret}\n")).unwrap();
    (path, dir)
}

struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `netchar rr --udp --proto irtt HOST:PORT --json -i 0 EXTRA...` on this host; its run.
fn netchar_rr(port: u16, extra: &[&str]) -> Run {
    let host = format!("127.0.0.1:{port}");
    netchar(&[&["rr", "--udp", "--proto", "irtt", &host, "--json", "-i", "0"], extra].concat())
}

fn parsed(run: &Run) -> Value {
    assert_eq!(run.code, 0, "netchar failed: {}", run.stderr);
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", run.stdout))
}

/// The requests sent, the round trips and the one-way figures of a result.
fn irtt_figures(v: &Value) -> (u64, &Value, &Value) {
    let rr = &v["summary"]["rr"];
    let one_way = &rr["one_way"];
    assert!(one_way.is_object(), "no one-way figures: {rr}");
    (u(&rr["transactions"]) + u(&rr["lost"]), rr, one_way)
}

#[test]
fn netchars_client_against_irtt_server_counts_every_request_the_server_counted() {
    if !have_irtt() {
        return;
    }
    // `-i 0`: no minimum interval, so the server drops nothing it reads late in a batch (a
    // busy machine can keep it off the CPU; beyond its burst of 5 it would drop what came
    // faster than its -i while it was away).
    let (server, port) = local_irtt_server(&["-i", "0"]);
    let v = parsed(&netchar_rr(port, &["-t", "2", "-l", "100"]));
    let (sent, rr, one_way) = irtt_figures(&v);
    assert_eq!(v["test"]["protocol"], "irtt");
    assert!(sent >= 50, "2 s at irtt's 10 ms: {rr}");
    // Loopback loses nothing: every request answered, and the server's own count (in its last
    // reply) is every request.
    assert_eq!((u(&rr["transactions"]), u(&rr["lost"]), u(&rr["late"])), (sent, 0, 0), "{rr}");
    assert_eq!(u(&one_way["peer_received"]), sent, "{one_way}");
    assert_eq!(u(&v["streams"][0]["bytes"]), sent * 100, "every answer at the request's length");
    // The two halves of a round trip are the server's stamps on the one clock of this host:
    // the shortest of each add up to no more than the shortest round trip (the server's own
    // time is in the round trip, not in either half; 2 µs for the placing of this end's
    // clock on the wall clock).
    let (send, receive) = (&one_way["send_delay_us"], &one_way["receive_delay_us"]);
    assert!(f(&send["min"]) + f(&receive["min"]) <= f(&rr["latency_us"]["min"]) + 2.0, "{rr}");
    assert!(f(&send["min"]) > -2.0 && f(&receive["min"]) > -2.0, "{one_way}");
    // netchar closed the connection (the server logs a close, not a timeout).
    let closed = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        server.stderr().contains("[CloseConn]")
    });
    assert!(closed, "{}", server.stderr());
}

#[test]
fn an_hmac_key_signs_every_packet_and_a_wrong_one_is_refused_in_one_line() {
    if !have_irtt() {
        return;
    }
    let secret = "0123456789abcdef-irtt";
    let (_server, port) = local_irtt_server(&[&format!("--hmac={secret}"), "-i", "0"]);
    let (good, _g) = key_file("good", secret);
    let v = parsed(&netchar_rr(port, &["-t", "1", "--psk-file", good.to_str().unwrap()]));
    let (sent, rr, one_way) = irtt_figures(&v);
    assert!(sent > 0 && u(&rr["lost"]) == 0 && u(&one_way["peer_received"]) == sent, "{rr}");
    for (name, extra) in [("wrong", Some("wrong-key-wrong-key")), ("none", None)] {
        let (file, _g) = key_file(name, extra.unwrap_or_default());
        let path = file.to_str().unwrap().to_string();
        let args: Vec<&str> = match extra {
            Some(_) => vec!["-t", "1", "--psk-file", &path],
            None => vec!["-t", "1"],
        };
        let run = netchar_rr(port, &args);
        assert_ne!(run.code, 0, "{name} key: {}", run.stdout);
        let lines: Vec<&str> = run.stderr.lines().filter(|l| l.starts_with("netchar: ")).collect();
        assert_eq!(lines.len(), 1, "{name} key: {}", run.stderr);
        assert!(lines[0].contains("no answer from the irtt server") && lines[0].contains("HMAC key"), "{lines:?}");
    }
}

#[test]
fn an_irtt_servers_duration_and_interval_limits_are_kept() {
    if !have_irtt() {
        return;
    }
    let (_server, port) = local_irtt_server(&["-d", "1s", "-i", "50ms"]);
    let run = netchar_rr(port, &["-t", "3"]);
    assert_ne!(run.code, 0, "a 3 s test on a 1 s server ran: {}", run.stdout);
    let lines: Vec<&str> = run.stderr.lines().filter(|l| l.starts_with("netchar: ")).collect();
    assert_eq!(lines.len(), 1, "{}", run.stderr);
    assert!(lines[0].contains("at most 1.000 s") && lines[0].ends_with("run with -t 1"), "{lines:?}");
    // Within its -d, at its -i: request n is due at n × 50 ms at the earliest, so at most 20
    // in 1 s (at 10 ms, netchar's own interval, there would be 100).
    let v = parsed(&netchar_rr(port, &["-t", "1"]));
    let (sent, rr, one_way) = irtt_figures(&v);
    assert!((1..=20).contains(&sent), "{sent} requests in 1 s at 50 ms");
    assert!(u(&rr["transactions"]) > 0 && u(&one_way["peer_received"]) <= sent, "{rr}");
    let split = ["lost_up", "lost_down", "lost_unknown"].iter().map(|k| u(&one_way[*k])).sum::<u64>();
    assert_eq!(split, u(&rr["lost"]), "{rr}");
}

/// The irtt server in namespace a, netchar (and then irtt's own client) in b; nft rules drop
/// 2% of the data requests (in a's input) and 2% of the replies (in b's input) at random and
/// count them. The rules match data packets only (UDP length 108: `-l 100`) and sequence
/// numbers below 256 (bytes 13-15 of the payload zero), so the open, its reply and the close
/// pass, and the last requests of a 5 s test at 10 ms (about 500; fewer when a busy machine
/// makes the sender skip slots) always have later replies whose windows say which way each
/// lost one was lost.
#[test]
fn loss_up_and_down_equal_the_nft_drop_counters_exactly() {
    if !have_irtt() {
        return;
    }
    let link = match netns::Link::create() {
        Ok(l) => l,
        Err(reason) => return netns::skip_or_fail(&reason),
    };
    let port = 2112u16.to_string();
    let first_256 = ["@th,168,24", "0"];
    let up = [&["udp", "dport", &port, "udp", "length", "108"][..], &first_256].concat();
    let down = [&["udp", "sport", &port, "udp", "length", "108"][..], &first_256].concat();
    let rules =
        link.a.drop_at_random("irttup", "input", &up).and_then(|_| link.b.drop_at_random("irttdown", "input", &down));
    if let Err(e) = rules {
        return netns::skip_or_fail(&format!("cannot install the nftables drop rules: {e}"));
    }
    // `-i 0`: the server drops nothing for coming faster than an interval (see the loopback
    // test), so every loss is the rules'.
    let server = irtt_server(link.a.command("sh"), &format!("{}:{port}", link.a_ip), &["-i", "0"]);
    let counters = || {
        let a = link.a.nft_counters("inet", "irttup", "input").unwrap()[0].0;
        (a, link.b.nft_counters("inet", "irttdown", "input").unwrap()[0].0)
    };
    let mut cmd = link.b.command(BIN);
    let host = format!("{}:{port}", link.a_ip);
    cmd.args(["rr", "--udp", "--proto", "irtt", &host, "--json", "-i", "0", "-t", "5", "-l", "100"]);
    let shown = format!("{cmd:?}");
    let run = netns::run_with_timeout(cmd, Duration::from_secs(40)).unwrap();
    let context = netns::failure_context(&shown, &run, &server, &link);
    assert!(run.status.is_some_and(|s| s.success()), "{context}");
    let v: Value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("not JSON ({e})\n{context}"));
    let (dropped_up, dropped_down) = counters();
    let (sent, rr, one_way) = irtt_figures(&v);
    eprintln!("irtt netns: netchar sent {sent}; nft dropped {dropped_up} up, {dropped_down} down; {one_way}");
    // Requests 256 and on are never dropped: one answered after the last that may be is enough.
    assert!(sent > 256, "too few requests for the windows to cover the drops: {rr}");
    assert!(dropped_up + dropped_down > 0, "the drop rules matched nothing: the test proves nothing");
    assert_eq!(u(&rr["lost"]), dropped_up + dropped_down, "{rr}");
    assert_eq!(
        (u(&one_way["lost_up"]), u(&one_way["lost_down"]), u(&one_way["lost_unknown"])),
        (dropped_up, dropped_down, 0),
        "{one_way}"
    );
    assert_eq!(u(&one_way["peer_received"]), sent - dropped_up, "the server's count: {one_way}");

    // irtt's own client through the same rules: its round trips' loss, by direction, equals the
    // counters' growth over its run too.
    let out_file = std::env::temp_dir().join(format!("netchar-irtt-netns-{}.json", std::process::id()));
    let out_file = out_file.to_str().unwrap().to_string();
    let mut cmd = link.b.command("irtt");
    cmd.args(["client", "-i", "10ms", "-d", "5s", "-l", "100", "-Q", "-o", &out_file, &host]);
    let run = netns::run_with_timeout(cmd, Duration::from_secs(40)).unwrap();
    assert!(run.status.is_some_and(|s| s.success()), "irtt client: {}", run.stderr);
    let theirs: Value = serde_json::from_str(&std::fs::read_to_string(&out_file).unwrap()).unwrap();
    let _ = std::fs::remove_file(&out_file);
    let (after_up, after_down) = counters();
    // (irtt's client also marks "true", lost without a direction, the last replies that come
    // after its own end wait, three times the longest round trip: a busy machine's tail, not
    // the rules'.)
    let trips = theirs["round_trips"].as_array().unwrap();
    let lost = |how: &str| trips.iter().filter(|r| r["lost"] == how).count() as u64;
    assert_eq!(
        (lost("true_up"), lost("true_down")),
        (after_up - dropped_up, after_down - dropped_down),
        "irtt's own client through the same rules: {}",
        theirs["stats"]
    );
}
