//! echo / discard / chargen (RFC 862/863/864), both roles, against ground truth:
//!
//! * `against_netchars_own_services`: `netchar server --services` on free high ports; TCP
//!   echo gives back exactly the bytes sent (1 and 2 streams), the server's log counts exactly
//!   what the discard client sent (TCP and UDP), chargen delivers what the server's log says it
//!   sent (less what was in flight when the client closed), UDP echo accounts for every
//!   datagram, rr and echo tests run their transactions.
//! * `udp_echo_loss_equals_nft_drops`: through the namespace bed, an nft rule in the server's
//!   namespace drops ≈2% of the echo requests; the client's `lost` equals that rule's count
//!   exactly, with netchar's own server.
//! * `xinetd_services`: the same client against a second implementation, Debian's xinetd with
//!   its internal services (on the well-known ports inside a network namespace, as xinetd
//!   takes the ports of internal services from /etc/services), including the nft loss check.
//!
//! The namespace tests need root, `ip` and `nft` (and xinetd for the last); they skip with a
//! line saying why, or fail under NETCHAR_REQUIRE_ALL=1 as in CI.

#[path = "support/netns.rs"]
mod netns;

use netns::{Link, Netns, Server};
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_netchar");
/// UDP payload of the echo tests (a 1500-byte MTU).
const PAYLOAD: u64 = 1472;
/// IPv4 + UDP headers counted once per skb by nft.
const IP_UDP_HEADERS: u64 = 28;

fn run_json(ns: Option<&Netns>, args: &[&str]) -> Value {
    let mut cmd = match ns {
        Some(n) => n.command(BIN),
        None => Command::new(BIN),
    };
    cmd.args(args).arg("--json");
    let run = netns::run_with_timeout(cmd, Duration::from_secs(60)).expect("netchar runs");
    assert!(run.status.is_some(), "netchar {args:?} did not end within 60 s; stderr:\n{}", run.stderr);
    serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("netchar {args:?}: no JSON ({e}); stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr))
}

fn int(v: &Value, path: &str) -> u64 {
    path.split('.')
        .fold(v, |v, k| &v[k])
        .as_u64()
        .unwrap_or_else(|| panic!(".{path} missing or not an integer in {}", serde_json::to_string_pretty(v).unwrap()))
}

/// The services' ports, as the server's start-up line printed them.
fn ports_of(server: &Server) -> (u16, u16, u16) {
    // The server prints it after "listening on", which is what the spawn waits for: the reader
    // thread may not have it yet.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let log = loop {
        let log = server.stderr();
        if log.lines().any(|l| l.starts_with("services: ")) || std::time::Instant::now() > deadline {
            break log;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let line = log.lines().find(|l| l.starts_with("services: ")).expect("the start-up line names the ports");
    let nums: Vec<u16> = line.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect();
    (nums[0], nums[1], nums[2])
}

/// The server's JSON log line of the `n`th test (from 0) of this kind and direction, waiting
/// for it to appear (UDP tests are logged when their source goes quiet, so not in order).
fn nth_test_log(server: &Server, kind: &str, direction: &str, n: usize) -> Value {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let tests: Vec<Value> = server
            .stderr()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["event"] == "test" && v["kind"] == kind && v["direction"] == direction)
            .collect();
        if let Some(t) = tests.get(n) {
            return t.clone();
        }
        assert!(Instant::now() < deadline, "no log line for test {n}; server stderr:\n{}", server.stderr());
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn flow_bytes(log: &Value, flow: &str) -> u64 {
    log["flows"]
        .as_array()
        .and_then(|f| f.iter().find(|x| x["flow"] == flow))
        .and_then(|x| x["bytes"].as_u64())
        .unwrap_or_else(|| panic!("no {flow} flow in the server's log line {log}"))
}

use netchar_testkit::ports::free_tcp_and_udp_port as free_port;

/// Checks a UDP echo result: every datagram sent came back or is counted lost, and the bytes
/// back are whole datagrams. Returns (sent, back, lost).
fn udp_echo_accounting(r: &Value) -> (u64, u64, u64) {
    assert_eq!(r["test"]["protocol"], "echo");
    let sent = int(r, "summary.up.sender.packets");
    let back = int(r, "summary.down.receiver.packets");
    let lost = int(r, "summary.down.receiver.lost");
    assert_eq!(sent, back + lost, "sent = back + lost");
    assert_eq!(int(r, "summary.down.receiver.total_bytes"), back * PAYLOAD);
    assert_eq!(int(r, "summary.up.sender.total_bytes"), sent * PAYLOAD);
    assert_eq!(int(r, "summary.down.receiver.duplicates"), 0);
    (sent, back, lost)
}

fn tcp_echo_exact(ns: Option<&Netns>, host: &str, port: u16, streams: &str) {
    let r =
        run_json(ns, &["tcp", host, "--proto", "echo", "-p", &port.to_string(), "-t", "1", "-i", "0", "-P", streams]);
    let sent = int(&r, "summary.up.sender.total_bytes");
    assert!(sent > 0, "{r}");
    assert_eq!(int(&r, "summary.down.receiver.total_bytes"), sent, "every byte sent comes back");
    assert!(r["error"].is_null(), "{}", r["error"]);
}

#[test]
fn against_netchars_own_services() {
    // A port found free can be taken by a parallel test before the server binds it: then the
    // server refuses to start (as it should) and three fresh ports are tried.
    let mut last_error = String::new();
    let (server, (e, d, c)) = (0..5)
        .find_map(|_| {
            let ports = (free_port(), free_port(), free_port());
            let (e, d, c) = ports;
            if e == d || d == c || e == c {
                return None;
            }
            let mut cmd = Command::new(BIN);
            cmd.args(["server", "-B", "127.0.0.1", "-p", "0", "--json", "--services"]);
            cmd.args(["--echo-port", &e.to_string(), "--discard-port", &d.to_string()]);
            cmd.args(["--chargen-port", &c.to_string()]);
            Server::spawn(cmd, "services:", Duration::from_secs(10))
                .map_err(|err| last_error = err)
                .ok()
                .map(|s| (s, ports))
        })
        .unwrap_or_else(|| panic!("netchar server --services starts: {last_error}"));
    assert_eq!(ports_of(&server), (e, d, c));
    let host = "127.0.0.1";

    // TCP echo: bytes back == bytes sent, one stream and two (one test of two connections).
    tcp_echo_exact(None, host, e, "1");
    let log = nth_test_log(&server, "tcp", "bidir", 0);
    assert_eq!(flow_bytes(&log, "up"), flow_bytes(&log, "down"), "the server echoed what it read");
    tcp_echo_exact(None, host, e, "2");

    // TCP discard: the server counted exactly what the client wrote.
    let r = run_json(None, &["tcp", host, "--proto", "discard", "-p", &d.to_string(), "-t", "1", "-i", "0"]);
    let sent = int(&r, "summary.up.sender.total_bytes");
    assert!(sent > 0);
    assert_eq!(flow_bytes(&nth_test_log(&server, "tcp", "up", 0), "up"), sent, "discard server's count == sent");

    // UDP discard, paced low enough for loopback to lose nothing: the server's count == sent.
    let r =
        run_json(None, &["udp", host, "--proto", "discard", "-p", &d.to_string(), "-t", "1", "-i", "0", "-b", "5M"]);
    let sent = int(&r, "summary.up.sender.total_bytes");
    assert!(sent > 0);
    assert_eq!(flow_bytes(&nth_test_log(&server, "udp", "up", 0), "up"), sent, "UDP discard server's count == sent");

    // TCP chargen: what arrived is at most what the server sent, and the server's log says
    // what it sent.
    let r = run_json(None, &["tcp", host, "--proto", "chargen", "-p", &c.to_string(), "-t", "1", "-i", "0"]);
    let got = int(&r, "summary.down.receiver.total_bytes");
    let sent = flow_bytes(&nth_test_log(&server, "tcp", "down", 0), "down");
    assert!(got > 0 && got <= sent, "chargen: received {got}, server sent {sent}");

    // UDP echo: every datagram accounted for.
    let r = run_json(None, &["udp", host, "--proto", "echo", "-p", &e.to_string(), "-t", "1", "-i", "0", "-b", "5M"]);
    let (sent, back, _) = udp_echo_accounting(&r);
    assert!(sent > 0 && back > 0);
    let log = nth_test_log(&server, "udp", "bidir", 0);
    assert_eq!(flow_bytes(&log, "down"), flow_bytes(&log, "up"), "the UDP echo server returned what it read");

    // rr over TCP and UDP, and the eCos-style echo pattern.
    let r = run_json(None, &["rr", host, "--proto", "echo", "-p", &e.to_string(), "-t", "1", "-i", "0", "-l", "64"]);
    assert!(int(&r, "summary.rr.transactions") > 0, "{r}");
    let r = run_json(None, &["rr", host, "--udp", "--proto", "echo", "-p", &e.to_string(), "-t", "1", "-i", "0"]);
    assert!(int(&r, "summary.rr.transactions") > 0, "{r}");
    // netchar echo: exactly the pattern's buffers, each echoed.
    let r = run_json(None, &["echo", host, "--proto", "echo", "-p", &e.to_string(), "--pattern", "100x512,10@1ms"]);
    assert_eq!(int(&r[0], "summary.rr.transactions"), 100, "{r}");

    // What a service cannot run is refused before any traffic.
    let out = Command::new(BIN)
        .args(["udp", host, "--proto", "chargen", "-p", &c.to_string(), "-t", "1"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--proto chargen: not with `udp`"));
}

/// Adds `inet svc in` (input hook) with one rule `udp dport PORT <extra>` in `ns`, and
/// `inet svc out` (output hook) counting the server's answers (`udp sport PORT`).
fn add_rule(ns: &Netns, port: u16, extra: &[&str]) {
    ns.nft(&["add", "table", "inet", "svc"]).unwrap();
    ns.nft(&["add", "chain", "inet", "svc", "in", "{ type filter hook input priority 0; }"]).unwrap();
    ns.nft(&["add", "chain", "inet", "svc", "out", "{ type filter hook output priority 0; }"]).unwrap();
    let p = port.to_string();
    let mut rule = vec!["add", "rule", "inet", "svc", "in", "udp", "dport", &p];
    rule.extend_from_slice(extra);
    ns.nft(&rule).unwrap();
    ns.nft(&["add", "rule", "inet", "svc", "out", "udp", "sport", &p, "counter"]).unwrap();
}

/// Datagrams the counter of `chain` counted (whole PAYLOAD-byte datagrams, GSO or not).
fn rule_datagrams(ns: &Netns, chain: &str) -> u64 {
    let counters = ns.nft_counters("inet", "svc", chain).unwrap();
    let &[(skbs, bytes)] = counters.as_slice() else { panic!("one counter expected: {counters:?}") };
    let payload = bytes - IP_UDP_HEADERS * skbs;
    assert_eq!(payload % PAYLOAD, 0, "nft counted {skbs} skbs / {bytes} bytes: not whole datagrams");
    payload / PAYLOAD
}

/// UDP datagrams a namespace's sockets dropped for want of buffer space (`RcvbufErrors` in
/// /proc/net/snmp): on a busy machine a responder that is not scheduled in time loses
/// datagrams there, and the kernel counts each.
fn rcvbuf_errors(ns: &Netns) -> u64 {
    let out = ns.command("cat").arg("/proc/net/snmp").output().expect("cat runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let udp: Vec<&str> = text.lines().filter(|l| l.starts_with("Udp: ")).collect();
    let names: Vec<&str> = udp[0].split_whitespace().collect();
    let values: Vec<&str> = udp[1].split_whitespace().collect();
    let i = names.iter().position(|n| *n == "RcvbufErrors").expect("RcvbufErrors in /proc/net/snmp");
    values[i].parse().unwrap()
}

/// Runs a UDP echo test from namespace b through a 2% nft drop in namespace a, and checks
/// `lost` against the kernel's counts: what came back is exactly what the server sent (nft
/// output counter), and with `exact` (netchar's own server) the loss is exactly the rule's
/// drops plus what the kernel counted as dropped at either end's sockets (zero on a quiet
/// machine). A server that loses requests itself (xinetd does, now and then) shows as the
/// difference, printed.
fn udp_echo_through_drops(link: &Link, port: u16, rate: &str, exact: bool) {
    add_rule(&link.a, port, &["numgen", "random", "mod", "1000", "<", "20", "counter", "drop"]);
    let before = (rcvbuf_errors(&link.a), rcvbuf_errors(&link.b));
    let host = link.a_ip.to_string();
    let r = run_json(
        Some(&link.b),
        &["udp", &host, "--proto", "echo", "-p", &port.to_string(), "-t", "3", "-i", "0", "-b", rate, "-l", "1472"],
    );
    let (sent, back, lost) = udp_echo_accounting(&r);
    let dropped = rule_datagrams(&link.a, "in");
    let answered = rule_datagrams(&link.a, "out");
    let (overflow_a, overflow_b) = (rcvbuf_errors(&link.a) - before.0, rcvbuf_errors(&link.b) - before.1);
    let overflowed = overflow_a + overflow_b;
    eprintln!(
        "UDP echo via {port}: sent {sent}, back {back}, lost {lost}, nft dropped {dropped}, server answered {answered}, socket buffers overflowed {overflowed}"
    );
    assert!(dropped > 0, "the rule dropped nothing: the test shows nothing");
    assert_eq!(back + overflow_b, answered, "every answer the server sent came back (or overflowed this end's socket)");
    assert!(lost >= dropped, "every datagram the rule dropped is lost");
    if exact {
        assert_eq!(lost, dropped + overflowed, "lost == nft drop counter (+ kernel socket-buffer drops)");
    }
}

#[test]
fn udp_echo_loss_equals_nft_drops() {
    let Ok(link) = Link::create().map_err(|e| netns::skip_or_fail(&e)) else { return };
    let mut cmd = link.a.command(BIN);
    cmd.args(["server", "-p", "0", "--services", "--echo-port", "7007", "--discard-port", "7009"]);
    // The client's network is the operator's: its echoes are not held to the budget for
    // addresses that did not prove themselves (crate netchar_engine::reflection).
    cmd.args(["--chargen-port", "7019", "--allow-peers", &format!("{}/32", link.b_ip)]);
    let _server = Server::spawn(cmd, "services:", Duration::from_secs(10)).expect("netchar server starts");
    udp_echo_through_drops(&link, 7007, "20M", true);
}

#[test]
fn xinetd_services() {
    if Command::new("xinetd").arg("-version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_err() {
        netns::skip_or_fail("xinetd is not installed (apt-get install xinetd)");
        return;
    }
    let Ok(link) = Link::create().map_err(|e| netns::skip_or_fail(&e)) else { return };
    let dir = std::env::temp_dir().join(format!("netchar-xinetd-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut conf = String::from("defaults\n{\n\tinstances = UNLIMITED\n\tcps = 1000000 1\n}\n");
    for (svc, kind) in [("echo", "stream"), ("echo", "dgram"), ("discard", "stream"), ("discard", "dgram")]
        .into_iter()
        .chain([("chargen", "stream"), ("chargen", "dgram")])
    {
        let (proto, wait) = if kind == "stream" { ("tcp", "no") } else { ("udp", "yes") };
        conf.push_str(&format!(
            "service {svc}\n{{\n\ttype = INTERNAL\n\tid = {svc}-{kind}\n\tsocket_type = {kind}\n\tprotocol = {proto}\n\tuser = root\n\twait = {wait}\n}}\n"
        ));
    }
    let conf_path = dir.join("xinetd.conf");
    let log_path = dir.join("xinetd.log");
    std::fs::write(&conf_path, conf).unwrap();
    let child = link
        .a
        .command("xinetd")
        .args(["-dontfork", "-filelog"])
        .arg(&log_path)
        .arg("-f")
        .arg(&conf_path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("xinetd starts");
    let _xinetd = netns::ChildGuard::new(child);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(&log_path).unwrap_or_default().contains("Started working") {
        assert!(Instant::now() < deadline, "xinetd did not start: {:?}", std::fs::read_to_string(&log_path));
        std::thread::sleep(Duration::from_millis(50));
    }
    let host = link.a_ip.to_string();
    let b = Some(&link.b);

    tcp_echo_exact(b, &host, 7, "1");
    let r = run_json(b, &["tcp", &host, "--proto", "discard", "-t", "1", "-i", "0"]);
    assert!(int(&r, "summary.up.sender.total_bytes") > 0);
    let r = run_json(b, &["tcp", &host, "--proto", "chargen", "-t", "1", "-i", "0"]);
    assert!(int(&r, "summary.down.receiver.total_bytes") > 0);
    let r = run_json(b, &["rr", &host, "--proto", "echo", "-t", "1", "-i", "0", "-l", "100"]);
    assert!(int(&r, "summary.rr.transactions") > 0);
    // xinetd answers each datagram from its one loop: paced gently so that its own socket
    // loses nothing and the nft rule is the only loss.
    udp_echo_through_drops(&link, 7, "2M", false);
    let _ = std::fs::remove_dir_all(&dir);
}
