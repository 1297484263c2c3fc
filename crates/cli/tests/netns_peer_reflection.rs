//! The peer-protocol listeners under forged sources, across four hosts on one bridge, with
//! the victim's own firewall counting what reaches it.
//!
//! Hosts (namespaces on one Linux bridge): the attacker A, the server S, the victim V and a
//! second server S2. A's outgoing datagrams to S are rewritten by an nft `snat` rule so that
//! they leave with V's address (or S's or S2's own, for the loop cases), which is what a
//! forged source looks like on the wire. Ground truth is nft: A's output counter (what the
//! attacker sent, at the IP layer), V's input counter (UDP from S), and S's and S2's output
//! counters of datagrams sent from the service ports (a loop).
//!
//! The server runs every peer listener with the default policy plus `--allow-peers A/32`:
//! - a stock `iperf -c S -u -R` whose request claims V's address earns V nothing;
//! - five nc_test `UDP_SEND` requests claiming V's address earn V at most their five NAKs
//!   (24 bytes each for 28 sent), never data;
//! - a stock `iperf3 -c S -u -R` whose UDP hello claims V's address (its control connection is
//!   A's own, and the server takes data from V's network: `--allow-data-from`) earns V nothing;
//! - a datagram from S's own address at port 7 or 19 (or 9) to its echo or chargen port, and
//!   one from S2's echo port to S's, start no loop: nothing is sent from a service port, and the
//!   server's CPU stays idle;
//! - from A's own (allowed) address, the stock `iperf -u -R` and the netchar nc_test master's
//!   UDP_SEND run end to end as before;
//! - from V's own address (not allowed), a UDP echo test is answered within the budget.
//!
//! The same forged requests against the C responder on S (`netchar-responder` with its
//! nc_test and echo roles, `--allow-peers A/32`) earn V at most the NAKs and start no loop,
//! and the netchar nc_test master's UDP_SEND from A runs against it.
//!
//! The datagrams are sent by this test binary re-executed in A (`sender_role`, ignored in
//! normal runs). Needs root, `ip`, `nft`, iperf (2.x) and iperf3; without them it prints
//! "skipping ..." and passes, unless the CI switch requires it (support/netns.rs).

#[path = "support/netns.rs"]
mod netns;

use netchar_wire::nc_test::{Kind, Request};
use netns::*;
use std::net::{Ipv4Addr, UdpSocket};
use std::process::Command;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_netchar");
/// IPv4 + UDP headers, as nft counts bytes at the IP layer.
const IP_UDP: u64 = 28;

/// Runs in A when the test starts it: sends `NETCHAR_SEND_COUNT` datagrams of the hex bytes
/// `NETCHAR_SEND_HEX` from UDP port `NETCHAR_SEND_SPORT` (0: any) to `NETCHAR_SEND_TO`,
/// `NETCHAR_SEND_GAP_MS` apart.
#[test]
#[ignore = "a role of netns_peer_reflection, started by it inside a namespace"]
fn sender_role() {
    let Ok(to) = std::env::var("NETCHAR_SEND_TO") else { return };
    let var = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k} is not set"));
    let sport: u16 = var("NETCHAR_SEND_SPORT").parse().unwrap();
    let count: u32 = var("NETCHAR_SEND_COUNT").parse().unwrap();
    let gap = Duration::from_millis(var("NETCHAR_SEND_GAP_MS").parse().unwrap());
    let hex = var("NETCHAR_SEND_HEX");
    let payload: Vec<u8> = (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
    let socket = UdpSocket::bind(("0.0.0.0", sport)).unwrap();
    for _ in 0..count {
        socket.send_to(&payload, &to).unwrap();
        std::thread::sleep(gap);
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The four hosts and their counters.
struct Bed {
    seg: Bridged,
}

const A: usize = 0;
const S: usize = 1;
const V: usize = 2;
const S2: usize = 3;

impl Bed {
    fn create() -> Result<Self, String> {
        preflight()?;
        for (tool, arg) in [("nft", "--version"), ("iperf", "-v"), ("iperf3", "-v")] {
            Command::new(tool).arg(arg).output().map_err(|e| format!("`{tool}` is not usable: {e}"))?;
        }
        let seg = Bridged::create(4)?;
        let bed = Self { seg };
        let s = bed.ip(S);
        // S delivers a datagram that claims S's own address (the loop case), as a host that
        // accepts local sources from the wire would; strict reverse-path filtering would drop
        // it before the server saw it, which would prove nothing about the server.
        for host in [S, S2] {
            for key in ["net/ipv4/conf/all/accept_local", &format!("net/ipv4/conf/{NODE_DEV}/accept_local")] {
                bed.node(host).sysctl(key, "1")?;
            }
            for key in ["net/ipv4/conf/all/rp_filter", &format!("net/ipv4/conf/{NODE_DEV}/rp_filter")] {
                bed.node(host).sysctl(key, "0")?;
            }
        }
        let a = bed.node(A);
        a.nft(&["add", "table", "inet", "count"])?;
        a.nft(&["add", "chain", "inet", "count", "out", "{ type filter hook output priority 0; }"])?;
        a.nft(&["add", "rule", "inet", "count", "out", "ip", "daddr", &s, "meta", "l4proto", "udp", "counter"])?;
        a.nft(&["add", "table", "ip", "spoof"])?;
        a.nft(&["add", "chain", "ip", "spoof", "post", "{ type nat hook postrouting priority 100; }"])?;
        // A UDP flow keeps the address its first datagram was given for as long as its
        // conntrack entry lives (30 s): short-lived entries let the next case's rule apply
        // to the same ports.
        a.sysctl("net/netfilter/nf_conntrack_udp_timeout", "1")?;
        let vn = bed.node(V);
        vn.nft(&["add", "table", "inet", "victim"])?;
        vn.nft(&["add", "chain", "inet", "victim", "input", "{ type filter hook input priority 0; }"])?;
        vn.nft(&["add", "rule", "inet", "victim", "input", "ip", "saddr", &s, "meta", "l4proto", "udp", "counter"])?;
        for host in [S, S2] {
            let n = bed.node(host);
            n.nft(&["add", "table", "inet", "loop"])?;
            n.nft(&["add", "chain", "inet", "loop", "out", "{ type filter hook output priority 0; }"])?;
            n.nft(&["add", "rule", "inet", "loop", "out", "udp", "sport", "{ 7, 9, 19 }", "counter"])?;
        }
        Ok(bed)
    }

    fn node(&self, i: usize) -> &Netns {
        &self.seg.nodes[i]
    }

    fn ip(&self, i: usize) -> String {
        self.seg.ips[i].to_string()
    }

    /// From now on, A's UDP datagrams to S that match `what` (nft words) leave with `as_ip`'s
    /// address; nothing else is rewritten.
    fn forge(&self, what: &[&str], as_ip: &str) {
        // Earlier flows' conntrack entries (and their addresses) expire first.
        std::thread::sleep(Duration::from_millis(1500));
        let a = self.node(A);
        a.nft(&["flush", "chain", "ip", "spoof", "post"]).unwrap();
        let s = self.ip(S);
        let mut rule = vec!["add", "rule", "ip", "spoof", "post", "ip", "daddr", &s];
        rule.extend_from_slice(what);
        rule.extend_from_slice(&["snat", "to", as_ip]);
        a.nft(&rule).unwrap();
    }

    fn stop_forging(&self) {
        self.node(A).nft(&["flush", "chain", "ip", "spoof", "post"]).unwrap();
    }

    fn counter(&self, host: usize, family: &str, table: &str, chain: &str) -> (u64, u64) {
        let c = self.node(host).nft_counters(family, table, chain).unwrap();
        assert_eq!(c.len(), 1, "one counter in {table} {chain}: {c:?}");
        c[0]
    }

    /// (attacker's datagrams to S, their bytes), (UDP the victim got from S, its bytes).
    fn sent_and_reflected(&self) -> ((u64, u64), (u64, u64)) {
        (self.counter(A, "inet", "count", "out"), self.counter(V, "inet", "victim", "input"))
    }

    /// Datagrams S and S2 sent from a service port so far.
    fn loop_counts(&self) -> (u64, u64) {
        (self.counter(S, "inet", "loop", "out").0, self.counter(S2, "inet", "loop", "out").0)
    }

    /// Sends datagrams from A with this test binary (`sender_role`).
    fn send(&self, to: &str, sport: u16, payload: &[u8], count: u32, gap_ms: u64) {
        let mut cmd = self.node(A).command(std::env::current_exe().unwrap());
        cmd.args(["--ignored", "--exact", "sender_role", "--test-threads", "1"])
            .env("NETCHAR_SEND_TO", to)
            .env("NETCHAR_SEND_SPORT", sport.to_string())
            .env("NETCHAR_SEND_COUNT", count.to_string())
            .env("NETCHAR_SEND_GAP_MS", gap_ms.to_string())
            .env("NETCHAR_SEND_HEX", hex(payload));
        let run = run_with_timeout(cmd, Duration::from_secs(30)).unwrap();
        assert_eq!(run.status.map(|s| s.success()), Some(true), "sender failed: {}\n{}", run.stdout, run.stderr);
    }

    /// Runs `args` in A and returns its stdout, killed after `secs`.
    fn run_in_a(&self, program: &str, args: &[&str], secs: u64) -> Finished {
        let mut cmd = self.node(A).command(program);
        cmd.args(args);
        run_with_timeout(cmd, Duration::from_secs(secs)).unwrap()
    }
}

/// CPU seconds (user + system) the process `pid` has used.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the parenthesised name: state is 3rd, utime 14th and stime 15th overall.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    ticks / 100.0
}

/// The reflection and loop cases against whatever serves on S (the netchar server, or the C
/// responder with `nc_test_port` and `echo_port`); the iperf cases only for the server.
fn forged_requests_reflect_nothing(bed: &Bed, server: &Server, server_pid: u32, nc_test_port: u16, echo_port: u16) {
    let (s, v) = (bed.ip(S), bed.ip(V));
    let iperfs = nc_test_port == 7777 && echo_port == 7 && server.stderr().contains("iperf2");

    if iperfs {
        // 1. A stock iperf2 UDP -R request claiming V's address.
        bed.forge(&["udp", "dport", "5001"], &v);
        let before = bed.sent_and_reflected();
        let run = bed.run_in_a("iperf", &["-c", &s, "-p", "5001", "-u", "-R", "-b", "100M", "-t", "3"], 30);
        std::thread::sleep(Duration::from_millis(500));
        let after = bed.sent_and_reflected();
        let sent = (after.0 .0 - before.0 .0, after.0 .1 - before.0 .1);
        let got = (after.1 .0 - before.1 .0, after.1 .1 - before.1 .1);
        eprintln!("iperf -u -R as V: attacker sent {} datagrams ({} B), V got {} ({} B)", sent.0, sent.1, got.0, got.1);
        assert!(sent.0 >= 1, "the iperf client sent nothing: {}\n{}", run.stdout, run.stderr);
        assert_eq!(got, (0, 0), "iperf2 -R reflected onto the victim\nserver:\n{}", server.stderr());

        // 2. A stock iperf3 UDP -R whose hello claims V's address (its control is A's own).
        bed.forge(&["udp", "dport", "5201"], &v);
        let before = bed.sent_and_reflected();
        let run =
            bed.run_in_a("iperf3", &["-c", &s, "-u", "-R", "-b", "100M", "-t", "2", "--connect-timeout", "3000"], 30);
        std::thread::sleep(Duration::from_millis(500));
        let after = bed.sent_and_reflected();
        let sent = (after.0 .0 - before.0 .0, after.0 .1 - before.0 .1);
        let got = (after.1 .0 - before.1 .0, after.1 .1 - before.1 .1);
        eprintln!("iperf3 -u -R, hello as V: attacker sent {} ({} B), V got {} ({} B)", sent.0, sent.1, got.0, got.1);
        assert!(sent.0 >= 1, "the iperf3 client sent no hello: {}\n{}", run.stdout, run.stderr);
        assert_eq!(got, (0, 0), "iperf3 -R reflected onto the victim\nserver:\n{}", server.stderr());
    }

    // 3. Five nc_test UDP_SEND requests (500 x 8192: inside the slave's own per-request cap).
    bed.forge(&["udp", "dport", &nc_test_port.to_string()], &v);
    let before = bed.sent_and_reflected();
    let requests: Vec<[u8; 28]> = (1..=5).map(|seq| Request::new(Kind::UdpSend, seq, 500, 8192).encode()).collect();
    for r in &requests {
        bed.send(&format!("{s}:{nc_test_port}"), 0, r, 1, 0);
    }
    std::thread::sleep(Duration::from_secs(2));
    let after = bed.sent_and_reflected();
    let sent = (after.0 .0 - before.0 .0, after.0 .1 - before.0 .1);
    let got = (after.1 .0 - before.1 .0, after.1 .1 - before.1 .1);
    eprintln!("nc_test UDP_SEND x5 as V: attacker sent {} ({} B), V got {} ({} B)", sent.0, sent.1, got.0, got.1);
    assert_eq!(sent, (5, 5 * (28 + IP_UDP)));
    assert!(got.0 <= sent.0 && got.1 <= sent.1, "amplification: {got:?} for {sent:?}\nserver:\n{}", server.stderr());
    assert!(got.1 <= got.0 * (24 + IP_UDP), "more than NAKs reached the victim: {got:?}");

    // 4. Loops: from S's own address at a service port to its echo port (and 19 -> 7, 7 -> 19,
    // 9 -> 7 where S offers chargen), then from S2's echo port: nothing is answered.
    let cpu0 = cpu_seconds(server_pid);
    let loops0 = bed.loop_counts();
    let probe = [0x5au8; 48];
    let mut pairs = vec![(echo_port, 7u16), (echo_port, 19), (echo_port, 9)];
    if iperfs {
        pairs.push((19, 7));
    }
    bed.forge(&["udp", "dport", "{ 7, 19 }"], &s);
    for (dport, sport) in &pairs {
        bed.send(&format!("{s}:{dport}"), *sport, &probe, 1, 0);
    }
    bed.forge(&["udp", "dport", "{ 7, 19 }"], &bed.ip(S2));
    bed.send(&format!("{s}:{echo_port}"), 7, &probe, 1, 0);
    bed.stop_forging();
    let settled = Instant::now();
    std::thread::sleep(Duration::from_millis(1500));
    let cpu = cpu_seconds(server_pid) - cpu0;
    let loops = bed.loop_counts();
    eprintln!(
        "loops: S sent {} and S2 {} datagrams from service ports; the server used {cpu:.2} CPU s in {:.1} s",
        loops.0 - loops0.0,
        loops.1 - loops0.1,
        settled.elapsed().as_secs_f64()
    );
    assert_eq!(loops, loops0, "a service answered a service port\nserver:\n{}", server.stderr());
    // A loop keeps a CPU busy (the issue measured ~600,000 datagrams/s); an idle server uses
    // a few milliseconds.
    assert!(cpu < 0.5, "the server used {cpu:.2} CPU seconds after the loop datagrams");
}

#[test]
fn forged_peer_requests_earn_the_victim_nothing_and_start_no_loop() {
    let bed = match Bed::create() {
        Ok(b) => b,
        Err(reason) => {
            skip_or_fail(&reason);
            return;
        }
    };
    let (a, s) = (bed.ip(A), bed.ip(S));
    let net = format!("{}/24", Ipv4Addr::from(u32::from(bed.seg.ips[0]) & 0xffff_ff00));
    let mut cmd = bed.node(S).command(BIN);
    cmd.args(["server", "-B", "0.0.0.0", "--max-concurrent", "4"])
        .args(["--iperf2", "--iperf3", "--nc-test", "--services", "--netio"])
        .args(["--allow-peers", &format!("{a}/32"), "--allow-data-from", &net]);
    let server = Server::spawn(cmd, "UDP answers:", Duration::from_secs(10)).unwrap();
    assert!(server.stderr().contains(&format!("--allow-peers ({a}/32)")), "start-up line:\n{}", server.stderr());
    // A second server on S2, so that a forged datagram from its echo port could start a loop.
    let mut cmd2 = bed.node(S2).command(BIN);
    cmd2.args(["server", "-B", "0.0.0.0", "--services"]);
    let _server2 = Server::spawn(cmd2, "UDP answers:", Duration::from_secs(10)).unwrap();

    forged_requests_reflect_nothing(&bed, &server, server.child.id(), 7777, 7);

    // From A's own address, allowed: the stock iperf2 client's UDP -R runs as before.
    let before = bed.sent_and_reflected();
    let run = bed.run_in_a("iperf", &["-c", &s, "-p", "5001", "-u", "-R", "-b", "10M", "-t", "2", "-e"], 30);
    let line = run.stdout.lines().find(|l| l.contains("/sec") && l.contains('%')).unwrap_or_else(|| {
        panic!("no report from iperf -u -R:\n{}\n{}\nserver:\n{}", run.stdout, run.stderr, server.stderr())
    });
    let datagrams: u64 =
        line.split_whitespace().find_map(|w| w.split_once('/').and_then(|(_, t)| t.parse().ok())).unwrap_or(0);
    eprintln!("iperf -u -R from A (allowed): {line}");
    assert!(datagrams > 1000, "iperf -u -R from an allowed network got {datagrams} datagrams: {line}");
    // The netchar nc_test master, UDP_SEND (`-R`), from the allowed address.
    udp_send_from_a_runs(&bed, &server);
    let after = bed.sent_and_reflected();
    assert_eq!(after.1, before.1, "the allowed runs sent the victim something");

    // From V's own address, not allowed: a UDP echo test at 40 Mbit/s gets its echoes, held to
    // the budget for addresses that did not prove themselves (1.25 MB/s + a 64 KiB burst).
    let before = bed.counter(V, "inet", "victim", "input");
    let started = Instant::now();
    let mut echo = bed.node(V).command(BIN);
    echo.args(["udp", &s, "--proto", "echo", "-p", "7", "-b", "40M", "-l", "1000", "-t", "2", "--json"]);
    let run = run_with_timeout(echo, Duration::from_secs(30)).unwrap();
    let elapsed = started.elapsed().as_secs_f64();
    let after = bed.counter(V, "inet", "victim", "input");
    let (packets, bytes) = (after.0 - before.0, after.1 - before.1);
    let payload = bytes - IP_UDP * packets;
    let most = 1_250_000.0 * elapsed + 65_536.0;
    eprintln!("echo from V at 40 Mbit/s: {packets} echoes, {payload} B in {elapsed:.2} s (budget {most:.0} B)");
    assert!(
        packets >= 100,
        "the budget answered nothing: {}
{}",
        run.stderr,
        server.stderr()
    );
    assert!((payload as f64) <= most, "{payload} B of echoes in {elapsed:.2} s: over the budget");
    let log = server.stderr();
    for expected in
        ["iperf2 (UDP): not sent to", "nc-test (UDP): not sent to", "iperf3 (UDP): not sent to", "dropped unanswered"]
    {
        assert!(log.contains(expected), "the server log lacks {expected:?}:\n{log}");
    }
}

/// netchar's nc_test master asks S for UDP_SEND (1,000 buffers of 1 KiB) from A's own, allowed
/// address: every buffer is received or counted lost.
fn udp_send_from_a_runs(bed: &Bed, server: &Server) {
    let s = bed.ip(S);
    let run = bed.run_in_a(BIN, &["udp", &s, "--proto", "nc-test", "-R", "-l", "1024", "-n", "1024000", "--json"], 60);
    let code = run.status.and_then(|s| s.code());
    assert_eq!(code, Some(0), "nc_test UDP_SEND from A: {}\n{}", run.stderr, server.stderr());
    let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let got = v["summary"]["down"]["receiver"]["packets"].as_u64().unwrap_or(0);
    let lost = v["summary"]["down"]["receiver"]["lost"].as_u64().unwrap_or(0);
    assert_eq!(got + lost, 1000, "{}", v["summary"]);
}

/// The C responder's build (`make -C responder`), or why it cannot be made here.
fn responder_binary() -> Result<std::path::PathBuf, String> {
    for tool in ["make", "gcc"] {
        Command::new(tool).arg("--version").output().map_err(|e| format!("`{tool}` cannot be run ({e})"))?;
    }
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../responder");
    let out = Command::new("make").arg("-C").arg(&dir).arg("all").output().map_err(|e| e.to_string())?;
    assert!(out.status.success(), "make -C responder failed:\n{}", String::from_utf8_lossy(&out.stderr));
    Ok(dir.join("build/netchar-responder"))
}

#[test]
fn forged_requests_to_the_c_responder_earn_the_victim_nothing_and_start_no_loop() {
    let bin = match responder_binary() {
        Ok(b) => b,
        Err(reason) => {
            skip_or_fail(&reason);
            return;
        }
    };
    let bed = match Bed::create() {
        Ok(b) => b,
        Err(reason) => {
            skip_or_fail(&reason);
            return;
        }
    };
    let a = bed.ip(A);
    let mut cmd = bed.node(S).command(&bin);
    cmd.args(["--nc-test-port", "7777", "--nc-test-data-port", "8770", "--echo-port", "7", "--discard-port", "9"])
        .args(["--allow-peers", &format!("{a}/32")]);
    let responder = Server::spawn(cmd, "UDP answers:", Duration::from_secs(10)).unwrap();
    let mut cmd2 = bed.node(S2).command(BIN);
    cmd2.args(["server", "-B", "0.0.0.0", "--services"]);
    let _server2 = Server::spawn(cmd2, "UDP answers:", Duration::from_secs(10)).unwrap();

    forged_requests_reflect_nothing(&bed, &responder, responder.child.id(), 7777, 7);

    udp_send_from_a_runs(&bed, &responder);
    assert!(responder.stderr().contains("refused: not in --allow-peers"), "{}", responder.stderr());
}
