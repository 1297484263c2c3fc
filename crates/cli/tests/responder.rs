//! The netchar client against the C responder (responder/, docs/embedded.md), built by `make`
//! under AddressSanitizer and UBSan: TCP up and down with sender bytes == receiver bytes, paced
//! UDP up and down with every datagram accounted for, rr over TCP and UDP, options it cannot
//! honour refused by name before any traffic, and hostile input (a garbage hello, an oversized
//! frame, truncated or invalid JSON, stray datagrams) dropping only that connection.
//!
//! Skips with a message when make or gcc is missing, or fails under NETCHAR_REQUIRE_ALL=1 (CI,
//! which has both).

#[path = "support/loopback.rs"]
mod common;
#[path = "support/ecos.rs"]
mod ecos;
#[path = "support/require.rs"]
mod require;

use common::*;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Mutex, OnceLock};
use std::time::Duration;

/// The responder's version as `accepted.server_version` says it (responder/nc_config.h).
const RESPONDER: &str = "netchar-responder 0.1";

/// The bytes netchar's echo client sends first on each TCP connection, before the test: its
/// hello, which an echo server returns and the client takes back off (peers/services.rs), so
/// an echo server counts them on top of the test's bytes.
const OPENING: u64 = netchar_wire::hello::HELLO_LEN as u64;

fn responder_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../responder")
}

/// Builds `make -C responder asan` once per test binary; None without make or a C compiler,
/// once [`require::unavailable`] has said so.
fn asan_binary() -> Option<PathBuf> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    make_binary(&BUILT, "asan", "build/netchar-responder-asan")
}

/// The task-per-connection build under ASan/UBSan (`make -C responder tasks`).
fn tasks_binary() -> Option<PathBuf> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    make_binary(&BUILT, "tasks", "build/netchar-responder-tasks-asan")
}

/// The built `file`, or None once [`require::unavailable`] has said why it cannot be built
/// (each test that asks says so, not only the first).
fn make_binary(cell: &'static OnceLock<Result<PathBuf, String>>, target: &str, file: &str) -> Option<PathBuf> {
    let built = cell.get_or_init(|| {
        for tool in ["make", "gcc"] {
            if let Err(e) = Command::new(tool).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status() {
                return Err(format!("`{tool}` cannot be run ({e}); they need make and gcc (apt-get install make gcc)"));
            }
        }
        let out = Command::new("make")
            .arg("-C")
            .arg(responder_dir())
            .arg(target)
            .output()
            .unwrap_or_else(|e| panic!("run make -C responder {target}: {e}"));
        assert!(
            out.status.success(),
            "make -C responder {target} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(responder_dir().join(file))
    });
    match built {
        Ok(bin) => Some(bin.clone()),
        Err(reason) => {
            require::unavailable("the C responder tests", reason);
            None
        }
    }
}

/// A responder on a free port, killed on drop; its log checked for sanitizer reports then.
struct Responder {
    child: Child,
    port: u16,
    log: mpsc::Receiver<String>,
    seen: Mutex<Vec<String>>,
}

impl Responder {
    /// The ASan build on a free port; None when it cannot be built here, once
    /// [`require::unavailable`] has said why (a failure under NETCHAR_REQUIRE_ALL=1).
    fn start() -> Option<Self> {
        Self::start_with(&[])
    }

    /// With the other roles given by `roles` (e.g. `["--echo-port", "0"]`) on as well.
    fn start_with(roles: &[&str]) -> Option<Self> {
        Some(Self::spawn(asan_binary()?, roles))
    }

    fn spawn(bin: PathBuf, roles: &[&str]) -> Self {
        let mut child = Command::new(bin)
            .args(["--port", "0"])
            .args(roles)
            // A report ends the process with a distinct code, and says where.
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
        let first = rx.recv_timeout(Duration::from_secs(10)).expect("the responder's start line");
        let port = first
            .rsplit(' ')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in the responder's start line {first:?}"));
        Self { child, port, log: rx, seen: Mutex::new(vec![first]) }
    }

    fn port(&self) -> String {
        self.port.to_string()
    }

    /// The first `n` log lines containing `needle`, waiting for them (10 s at most per line).
    fn log_lines(&self, needle: &str, n: usize) -> Vec<String> {
        let mut seen = self.seen.lock().unwrap();
        loop {
            let found: Vec<String> = seen.iter().filter(|l| l.contains(needle)).take(n).cloned().collect();
            if found.len() == n {
                return found;
            }
            let line = self.log.recv_timeout(Duration::from_secs(10)).unwrap_or_else(|_| {
                panic!("not {n} lines with {needle:?} in the responder's log:\n{}", seen.join("\n"))
            });
            seen.push(line);
        }
    }

    fn log_line(&self, needle: &str) -> String {
        self.log_lines(needle, 1).remove(0)
    }

    /// The counts in the first log line containing `needle`.
    fn log_numbers(&self, needle: &str) -> Vec<u64> {
        counts(&self.log_line(needle))
    }

    /// The port a role's start line names (the number after `after`).
    fn role_port(&self, line: &str, after: &str) -> String {
        let l = self.log_line(line);
        l.split(after).nth(1).and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next()).unwrap().to_string()
    }

    /// The responder is still running (no sanitizer report, no crash).
    fn assert_alive(&mut self) {
        if let Some(status) = self.child.try_wait().expect("wait") {
            let mut seen = self.seen.lock().unwrap();
            seen.extend(self.log.try_iter());
            panic!("the responder exited ({status}); its log:\n{}", seen.join("\n"));
        }
    }

    /// `netchar KIND 127.0.0.1 -p PORT --json EXTRA...`, which must succeed.
    fn run(&mut self, kind: &str, extra: &[&str]) -> Value {
        let port = self.port();
        let mut args = vec![kind, "127.0.0.1", "-p", &port, "--json"];
        args.extend_from_slice(extra);
        let run = netchar(&args);
        self.assert_alive();
        assert_eq!(run.code, 0, "netchar {args:?} failed: {}", run.stderr);
        let r: Value =
            serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("invalid JSON ({e}): {}", run.stdout));
        // `netchar echo` prints one result per pattern element, in an array.
        let r = match r {
            Value::Array(mut all) => {
                assert_eq!(all.len(), 1, "one result per pattern: {all:?}");
                all.remove(0)
            }
            one => one,
        };
        assert!(r["error"].is_null(), "error: {}", r["error"]);
        assert_eq!(r["test"]["peer_software"], RESPONDER, "results name the responder: {}", r["test"]);
        // The hosted build reports no target counters (NC_HAVE_TARGET_COUNTERS is the board's).
        assert!(r.get("target").is_none(), "a target section from the hosted responder: {}", r["target"]);
        r
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

fn udp_accounted(r: &Value, flow: &str) -> (u64, u64, u64) {
    let s = &r["summary"][flow];
    assert_eq!(s["packets_accounted"], true, "{s}");
    let (tx, rx) = (&s["sender"], &s["receiver"]);
    let (sent, got, lost) = (u(&tx["packets"]), u(&rx["packets"]), u(&rx["lost"]));
    assert_eq!(sent, got + lost, "sent = received + lost: {s}");
    assert!(sent > 0, "{s}");
    // The per-stream records of both ends say the same.
    for rec in r["streams"].as_array().unwrap().iter().filter(|x| x["flow"] == flow && x["role"] == "sender") {
        let rx_rec = r["streams"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["flow"] == flow && x["role"] == "receiver" && x["id"] == rec["id"])
            .unwrap();
        let sent = u(&rec["udp_sent"]["packets"]);
        let (got, lost) = (u(&rx_rec["udp_received"]["packets"]), u(&rx_rec["udp_received"]["lost"]));
        assert_eq!(sent, got + lost, "stream {}: {rec} vs {rx_rec}", rec["id"]);
        // Each datagram is -l bytes: the receiver's bytes are its datagrams (no duplicates here).
        if u(&rx_rec["udp_received"]["duplicates"]) == 0 {
            assert_eq!(u(&rx_rec["bytes"]), got * 1000, "{rx_rec}");
        }
    }
    (sent, got, lost)
}

/// Sender bytes == receiver bytes on `flow`, in the summary and in the per-stream records of both
/// ends (the responder reports no TCP_INFO figures: it has none on lwIP). Returns (sent, read).
fn check_tcp(r: &Value, flow: &str, streams: u64) -> (u64, u64) {
    let s = &r["summary"][flow];
    assert_eq!(s["bytes_match"], true, "{flow}: {s}");
    let (tx, rx) = (u(&s["sender"]["total_bytes"]), u(&s["receiver"]["total_bytes"]));
    assert_eq!(tx, rx, "{flow}: receiver bytes must equal sender bytes");
    let records: Vec<&Value> = r["streams"].as_array().unwrap().iter().filter(|x| x["flow"] == flow).collect();
    assert_eq!(records.len() as u64, 2 * streams, "one record per stream and end");
    for rec in records.iter().filter(|x| x["role"] == "sender") {
        let other = records.iter().find(|x| x["role"] == "receiver" && x["id"] == rec["id"]).unwrap();
        assert_eq!(u(&rec["bytes"]), u(&other["bytes"]), "stream {}", rec["id"]);
        assert_ne!(rec["measured_by"], other["measured_by"], "one record from each end");
    }
    (tx, rx)
}

#[test]
fn tcp_up_and_down_every_byte_arrives() {
    let Some(mut r) = Responder::start() else { return };
    for dir in [&[][..], &["-R"][..]] {
        let mut extra = vec!["-t", "2"];
        extra.extend_from_slice(dir);
        let res = r.run("tcp", &extra);
        let flow = if dir.is_empty() { "up" } else { "down" };
        let (tx, rx) = check_tcp(&res, flow, 1);
        assert_eq!(tx, rx);
        assert!(tx > 1_000_000, "{flow}: {tx} bytes in 2 s on loopback");
        let far = res["streams"].as_array().unwrap().iter().find(|s| s["measured_by"] == "server").unwrap();
        assert_eq!(far["role"], if dir.is_empty() { "receiver" } else { "sender" }, "{far}");
    }
    // -n is exact, split across streams; --bidir runs both flows.
    let res = r.run("tcp", &["-n", "10000001", "-P", "3"]);
    assert_eq!(check_tcp(&res, "up", 3), (10_000_001, 10_000_001));
    let res = r.run("tcp", &["-n", "3000000", "-R", "-P", "2"]);
    assert_eq!(check_tcp(&res, "down", 2), (3_000_000, 3_000_000));
    let res = r.run("tcp", &["-t", "1", "--bidir"]);
    check_tcp(&res, "up", 1);
    check_tcp(&res, "down", 1);
}

#[test]
fn udp_paced_up_and_down_account_for_every_datagram() {
    let Some(mut r) = Responder::start() else { return };
    // Up: the responder counts what arrived from the 24-byte headers; the client's exact total
    // settles the loss.
    let res = r.run("udp", &["-b", "8M", "-t", "2", "-l", "1000"]);
    let (sent, _, lost) = udp_accounted(&res, "up");
    assert!(sent > 100, "8 Mbit/s of 1000-byte datagrams for 2 s: {sent}");
    assert_eq!(lost, 0, "loopback at 8 Mbit/s loses nothing");
    // Down: the responder paces; the client accounts.
    let res = r.run("udp", &["-b", "8M", "-t", "2", "-l", "1000", "-R"]);
    let (sent, _, lost) = udp_accounted(&res, "down");
    assert!(sent > 100, "8 Mbit/s of 1000-byte datagrams for 2 s: {sent}");
    assert_eq!(lost, 0, "loopback at 8 Mbit/s loses nothing");
    // Two streams each way, -n exact.
    let res = r.run("udp", &["-b", "20M", "-n", "400000", "-l", "1000", "-P", "2", "-R"]);
    let (sent, _, _) = udp_accounted(&res, "down");
    assert_eq!(sent, 400);
    let res = r.run("udp", &["-b", "20M", "-n", "400000", "-l", "1000", "-P", "2"]);
    let (sent, _, _) = udp_accounted(&res, "up");
    assert_eq!(sent, 400);
}

#[test]
fn rr_and_echo_over_tcp_and_udp_answer_every_request() {
    let Some(mut r) = Responder::start() else { return };
    for extra in [&["-n", "1001", "-l", "32", "--response", "64"][..], &["--udp", "-n", "2000", "-l", "32"][..]] {
        let res = r.run("rr", extra);
        let rr = &res["summary"]["rr"];
        let want = if extra.contains(&"--udp") { 2000 } else { 1001 };
        assert_eq!(u(&rr["transactions"]), want, "{extra:?}: {rr}");
        assert_eq!(u(&rr["lost"]), 0, "{rr}");
        // The responder read every request: its byte count is the requests' bytes.
        let far = res["streams"].as_array().unwrap().iter().find(|s| s["measured_by"] == "server").unwrap();
        assert_eq!(u(&far["bytes"]), want * 32, "{extra:?}: {far}");
    }
    // The eCos nc_test echo pattern runs as rr with pauses: 64 buffers of 1024 bytes, 1 ms
    // after every 10.
    let res = r.run("echo", &["--pattern", "64x1024,10@1ms"]);
    assert_eq!(u(&res["summary"]["rr"]["transactions"]), 64, "{}", res["summary"]["rr"]);
    let far = res["streams"].as_array().unwrap().iter().find(|s| s["measured_by"] == "server").unwrap();
    assert_eq!(u(&far["bytes"]), 64 * 1024, "{far}");
    let res = r.run("rr", &["-t", "1", "-P", "2", "--inflight", "4"]);
    assert!(u(&res["summary"]["rr"]["transactions"]) > 100, "{}", res["summary"]["rr"]);
}

#[test]
fn options_it_cannot_honour_are_refused_by_name_before_any_traffic() {
    let Some(mut r) = Responder::start() else { return };
    let port = r.port();
    for (extra, flag) in [
        (&["tcp", "--zerocopy"][..], "--zerocopy"),
        (&["tcp", "--skip-rx-copy"][..], "--skip-rx-copy"),
        (&["tcp", "-w", "256K"][..], "-w"),
        (&["tcp", "-P", "9"][..], "-P 9"),
        (&["udp", "--pattern", "10x100"][..], "--pattern"),
        (&["crr"][..], "crr"),
        (&["tcp", "--server-load", "50", "--server-load-threads", "2"][..], "--server-load-threads"),
        (&["tcp", "-O", "0.5"][..], "-O"),
        (&["tcp", "--dscp", "ef"][..], "--dscp"),
        (&["udp", "--no-udp-checksum"][..], "--no-udp-checksum"),
        (&["tcp", "--verify"][..], "--verify"),
        (&["udp", "--payload", "zeros"][..], "--payload"),
    ] {
        let mut args = vec![extra[0], "127.0.0.1", "-p", &port, "-t", "1"];
        args.extend_from_slice(&extra[1..]);
        let run = netchar(&args);
        assert_ne!(run.code, 0, "{args:?} must fail: {}", run.stdout);
        assert!(run.stderr.contains("rejected") && run.stderr.contains(flag), "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains("netchar-responder"), "{args:?}: {}", run.stderr);
        r.assert_alive();
    }
    // And a test right after runs.
    let res = r.run("tcp", &["-t", "1"]);
    check_tcp(&res, "up", 1);
}

/// (idle, all) ticks of every CPU from /proc/stat, idle counting iowait as the responder does.
fn proc_stat_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let v: Vec<u64> = stat.lines().next().unwrap().split_whitespace().skip(1).map(|x| x.parse().unwrap()).collect();
    // user nice system idle iowait irq softirq steal (guest time is inside user and nice)
    (v[3] + v[4], v.iter().take(8).sum())
}

/// The POSIX platform's hooks behind the native protocol: `--server-load` runs a load thread
/// inside the responder, so the share it achieved is part of the responder's own CPU time;
/// `--idle` counts the kernel's idle ticks, which this test reads too, over a window that
/// contains the responder's.
#[test]
fn server_load_and_idle_figures_come_from_the_platform_hooks() {
    let Some(mut r) = Responder::start() else { return };
    let before = proc_stat_ticks();
    let res = r.run("udp", &["-t", "2", "-b", "1M", "--server-load", "40", "--idle"]);
    let after = proc_stat_ticks();
    let remote = &res["cpu"]["remote"];
    let f = |v: &Value| v.as_f64().unwrap_or_else(|| panic!("not a number: {v} in {remote}"));
    let load = f(&remote["background_load_pct"]);
    assert!(load > 0.0 && load <= 40.5, "achieved load {load}% for 40%: {remote}");
    assert!(f(&remote["total_pct"]) >= load * 0.98, "the load thread's time is the responder's: {remote}");
    let idle = f(&remote["idle_pct"]);
    let outer = 100.0 * (after.0 - before.0) as f64 / (after.1 - before.1).max(1) as f64;
    assert!((0.0..=100.0).contains(&idle), "{remote}");
    assert!((idle - outer).abs() <= 25.0, "responder idle {idle:.1}% vs /proc/stat {outer:.1}% over the run");
    // The load stops with the test: a second test without it reports none.
    let res = r.run("tcp", &["-t", "1"]);
    assert!(res["cpu"]["remote"].get("background_load_pct").is_none(), "{}", res["cpu"]["remote"]);
}

/// A control connection that has had its server hello.
fn control(port: u16) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut hello = [0u8; 40];
    hello[..8].copy_from_slice(b"netchar\0");
    hello[9] = 2;
    s.write_all(&hello).unwrap();
    let mut answer = [0u8; 40];
    s.read_exact(&mut answer).unwrap();
    assert_eq!(&answer[..8], b"netchar\0");
    assert_eq!(answer[10], 2, "a server hello");
    s
}

/// Reads until the responder closes; returns what came (an `error` frame, maybe).
fn read_to_close(mut s: TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => panic!("the responder kept a hostile connection open: {e}"),
        }
    }
}

fn frame(payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(payload);
    f
}

#[test]
fn hostile_input_drops_that_connection_and_the_next_test_runs() {
    let Some(mut r) = Responder::start() else { return };
    let port = r.port;
    // A garbage hello: closed without an answer.
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(&[b'x'; 40]).unwrap();
    let got = read_to_close(s);
    assert!(got.is_empty(), "garbage hello answered with {got:?}");
    // An oversized frame: the length alone ends the session.
    let mut s = control(port);
    s.write_all(&0x7fff_ffffu32.to_be_bytes()).unwrap();
    let got = read_to_close(s);
    assert!(String::from_utf8_lossy(&got).contains("larger"), "{:?}", String::from_utf8_lossy(&got));
    // Truncated JSON (the frame says more than comes, then the client closes).
    let mut s = control(port);
    let mut f = frame(br#"{"type":"request","spec":{"kind":"tcp","direction":"up","streams":1}}"#);
    f.truncate(30);
    s.write_all(&f).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    read_to_close(s);
    // Complete frames of malformed or hostile JSON: each gets an error and a close.
    let deep = "[".repeat(5000);
    let huge_number = format!(r#"{{"type":"sender_done","totals":[{{"id":1,"bytes":{}}}]}}"#, "9".repeat(900));
    let many_totals = format!(r#"{{"type":"sender_done","totals":[{}]}}"#, vec![r#"{"id":1}"#; 100].join(","));
    for bad in [
        &br#"{"type":"request","spec":{"kind":"tcp""#[..],
        br#"{"type":"launch"}"#,
        br#"{"type":"request","spec":{"kind":"tcp","direction":"up"}}"#,
        br#"{"type":"request","spec":{"kind":"tcp","direction":"up","streams":-1,"end":{"seconds":1},"block_bytes":1}}"#,
        br#"{"type":"start"}"#,
        br#"{"type":"start"} trailing"#,
        b"\"\\u12\"",
        b"\xff\xfe{}",
        deep.as_bytes(),
        huge_number.as_bytes(),
        many_totals.as_bytes(),
        b"",
    ] {
        let mut s = control(port);
        s.write_all(&frame(bad)).unwrap();
        let got = read_to_close(s);
        assert!(
            String::from_utf8_lossy(&got).contains("\"type\":\"error\""),
            "{:?} answered {:?}",
            String::from_utf8_lossy(bad),
            String::from_utf8_lossy(&got)
        );
        r.assert_alive();
    }
    // Stray datagrams on the UDP port: garbage, a truncated header, a setup for no test.
    let u = UdpSocket::bind("127.0.0.1:0").unwrap();
    for d in [&b"garbage"[..], &[0x4e, 0x43, 1, 1, 0, 0][..], &[0x4e, 0x43, 1, 1, 0, 0, 0, 1][..]] {
        u.send_to(d, ("127.0.0.1", port)).unwrap();
    }
    let mut setup = vec![0u8; 64];
    setup[..4].copy_from_slice(&[0x4e, 0x43, 1, 5]);
    setup[7] = 1;
    u.send_to(&setup, ("127.0.0.1", port)).unwrap();
    // More silent connections than the responder has slots (24 on a host): the oldest silent
    // ones give way to new connections, so the tests below still run, each exact.
    let _silent: Vec<TcpStream> = (0..40).map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap()).collect();
    r.assert_alive();
    let res = r.run("tcp", &["-t", "1"]);
    check_tcp(&res, "up", 1);
    let res = r.run("udp", &["-b", "8M", "-t", "1", "-l", "1000"]);
    udp_accounted(&res, "up");
}

#[test]
fn a_second_client_while_one_holds_the_responder_is_told_busy() {
    let Some(mut r) = Responder::start() else { return };
    let port = r.port();
    // A control connection that has had its hello holds the responder's one test slot.
    let held = control(r.port);
    let run = netchar(&["tcp", "127.0.0.1", "-p", &port, "-t", "1"]);
    assert_ne!(run.code, 0, "a second client must be turned away: {}", run.stdout);
    assert!(run.stderr.contains("busy"), "answered busy, not silence: {}", run.stderr);
    r.assert_alive();
    drop(held);
    // The slot is free again once the responder has seen the holder close.
    for _ in 0..100 {
        let probe = netchar(&["tcp", "127.0.0.1", "-p", &port, "-n", "1000"]);
        if probe.code == 0 {
            break;
        }
        assert!(probe.stderr.contains("busy"), "{}", probe.stderr);
        std::thread::sleep(Duration::from_millis(100));
    }
    let res = r.run("tcp", &["-t", "1"]);
    check_tcp(&res, "up", 1);
}

/// The numbers after the peer's address in a role's log line ("WHAT from A.B.C.D:PORT: COUNTS").
fn counts(line: &str) -> Vec<u64> {
    let tail = line.rsplit(": ").next().unwrap_or("");
    tail.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect()
}

/// `netchar ARGS --json` against the responder, which must succeed; the parsed result.
fn run_json(r: &mut Responder, args: &[&str]) -> Value {
    let mut v = args.to_vec();
    v.push("--json");
    let run = netchar(&v);
    r.assert_alive();
    assert_eq!(run.code, 0, "netchar {v:?} failed: {}", run.stderr);
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("invalid JSON ({e}): {}", run.stdout))
}

/// `suite ecos` over netchar's own protocol runs against the responder (no UDP `--pattern`,
/// which it refuses: counted bytes instead; its POSIX platform has the load and idle hooks)
/// and prints what `--proto nc6-test` prints for the same tests: nc_test's words, "send" the
/// responder sending (a down flow in the JSON), "recv" it receiving.
#[test]
fn native_ecos_suite_runs_against_the_responder_in_nc_tests_words() {
    let Some(mut r) = Responder::start() else { return };
    let port = r.port.to_string();
    let args = ["suite", "ecos", "127.0.0.1", "-p", &port, "--quick"];
    let text = netchar(&args);
    r.assert_alive();
    assert_eq!(text.code, 0, "{}\n{}", text.stderr, text.stdout);
    ecos::check_quick_text(&text.stdout, "native against the responder");
    let doc = run_json(&mut r, &args);
    assert_eq!(ecos::directions(&doc), ecos::quick_directions());
    assert!(doc.as_array().unwrap().iter().all(|t| t["error"].is_null()), "{doc}");
}

#[test]
fn nc_test_slave_role_answers_the_ecos_suite_and_each_test_kind() {
    let Some(mut r) = Responder::start_with(&["--nc-test-port", "0", "--nc-test-data-port", "0"]) else { return };
    let ctrl = r.role_port("nc-test slave on UDP port", "UDP port ");
    let data = r.role_port("nc-test slave on UDP port", "data on port ");
    let nc = ["--proto", "nc-test", "-p", &ctrl, "--nc-test-data-port", &data];
    // nc_test_master's sequence, short form: TCP echo 64 x 10240, then the slave-load section
    // (SET_LOAD through the POSIX load thread) and the master-load section (START/STOP_IDLE
    // through the kernel's idle ticks).
    let mut args = vec!["suite", "ecos", "127.0.0.1", "--quick"];
    args.extend_from_slice(&nc);
    let run = netchar(&args);
    r.assert_alive();
    assert_eq!(run.code, 0, "{}\n{}", run.stderr, run.stdout);
    assert!(run.stdout.contains("TCP echo - 128 bufs of 10240 bytes in "), "{}", run.stdout);
    assert!(run.stdout.contains("   slave sent 64, recvd 64"), "{}", run.stdout);
    assert!(run.stdout.contains(">>>>>>>>>>>> slave processing load at 50%"), "{}", run.stdout);
    assert!(run.stdout.contains("Testing IDLE for 1 seconds"), "{}", run.stdout);
    assert_eq!(run.stdout.matches("   slave sent 256, recvd 256").count(), 8, "{}", run.stdout);
    // Each IDLE line: the slave's 10 ms ticks (at least 1) and its idle count (microseconds
    // of idle time of every CPU: at most 10,000 per CPU per tick, plus a tick per CPU for
    // where the kernel's 10 ms ticks fell).
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    let idle: Vec<(u64, u64)> = run
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("IDLE - ticks: "))
        .map(|l| {
            // "IDLE - ticks: 26, count: 170000, 54% idle" (no share on the calibration line)
            let (t, c) = l.split_once(", count: ").unwrap();
            (t.parse().unwrap(), c.split(',').next().unwrap().parse().unwrap())
        })
        .collect();
    assert_eq!(idle.len(), 5, "the calibration and four tests: {}", run.stdout);
    assert!((95..=300).contains(&idle[0].0), "the 1 s calibration in 10 ms ticks: {idle:?}");
    for &(ticks, count) in &idle {
        assert!(
            ticks >= 1 && count <= (ticks + 1) * 10_000 * cpus,
            "idle count {count} in {ticks} ticks on {cpus} CPUs"
        );
    }
    // The slave's own count: 64 buffers of 10240 + 16 each way.
    let n = r.log_numbers("nc-test TCP echo");
    assert_eq!(n[..4], [64, 64, 64 * 10256, 64 * 10256], "{n:?}");
    r.log_line("the master disconnected");

    // UDP echo: every buffer answered, the slave's bytes are the master's.
    let mut args = vec!["echo", "127.0.0.1", "--udp", "--pattern", "300x1024"];
    args.extend_from_slice(&nc);
    let res = run_json(&mut r, &args);
    let rr = &res["streams"][0]["rr"];
    assert_eq!(u(&rr["transactions"]), 300, "{rr}");
    assert_eq!(u(&rr["lost"]), 0, "{rr}");
    assert_eq!(u(&res["streams"][0]["bytes"]), 300 * 1040);
    // (the suite's four UDP echo tests came first)
    let line = r.log_lines("nc-test UDP echo", 5).remove(4);
    assert_eq!(counts(&line)[..4], [300, 300, 300 * 1040, 300 * 1040], "{line}");
    // One way each: the slave's results record and its log say what the master sent or got.
    for (kind, rev, needle) in [
        ("tcp", false, "nc-test TCP recv"),
        ("tcp", true, "nc-test TCP send"),
        ("udp", false, "nc-test UDP recv"),
        ("udp", true, "nc-test UDP send"),
    ] {
        let mut args = vec![kind, "127.0.0.1"];
        // UDP: a burst the size of a default socket buffer (the master does not pace), so a
        // busy machine loses none of it.
        let (nbufs, td) = if kind == "tcp" {
            args.extend_from_slice(&["-l", "1024", "-n", "655360"]);
            (640, 1040)
        } else {
            args.extend_from_slice(&["--pattern", "200x512"]);
            (200, 528)
        };
        if rev {
            args.push("-R");
        }
        args.extend_from_slice(&nc);
        let res = run_json(&mut r, &args);
        assert!(res["error"].is_null(), "{args:?}: {}", res["error"]);
        let flow = if rev { "down" } else { "up" };
        let mine = res["streams"].as_array().unwrap().iter().find(|s| s["measured_by"] == "client").unwrap();
        assert_eq!(u(&mine["bytes"]), nbufs * td, "{args:?}: {mine}");
        assert_eq!(mine["flow"], flow);
        let n = r.log_numbers(needle);
        let (sent, got, bytes_in, bytes_out) = (n[0], n[1], n[2], n[3]);
        if rev {
            assert_eq!((sent, bytes_out, got), (nbufs, nbufs * td, 0), "{needle}: {n:?}");
        } else {
            assert_eq!((got, bytes_in, sent), (nbufs, nbufs * td, 0), "{needle}: {n:?}");
        }
    }
    // A short or unknown request: ignored or refused, and the slave keeps serving.
    let u_sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    u_sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    u_sock.send_to(b"short", ("127.0.0.1", ctrl.parse::<u16>().unwrap())).unwrap();
    let mut req = [0u8; 28];
    req[..4].copy_from_slice(&0x7777u32.to_be_bytes());
    req[4..8].copy_from_slice(&9u32.to_be_bytes());
    u_sock.send_to(&req, ("127.0.0.1", ctrl.parse::<u16>().unwrap())).unwrap();
    let mut reply = [0u8; 64];
    let (n, _) = u_sock.recv_from(&mut reply).unwrap();
    assert_eq!(n, 24, "the 32-bit reply layout");
    assert_eq!(&reply[..12], &[0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 1], "NAK, seq echoed, reason 1 (unknown)");
    r.assert_alive();
}

#[test]
fn netio_role_counts_every_block_both_ways() {
    let Some(mut r) = Responder::start_with(&["--netio-port", "0"]) else { return };
    let port = r.role_port("netio server on TCP port", "TCP port ");
    let res = run_json(
        &mut r,
        &["suite", "netio", "127.0.0.1", "--proto", "netio", "-p", &port, "-b", "4k", "--netio-interval", "1"],
    );
    let res = &res.as_array().unwrap()[0];
    assert_eq!(res["test"]["protocol"], "netio");
    assert!(res["error"].is_null(), "{}", res["error"]);
    let rec = |flow: &str, role: &str| {
        let s = res["streams"].as_array().unwrap().iter().find(|s| s["flow"] == flow && s["role"] == role).unwrap();
        u(&s["bytes"])
    };
    let (tx, rx) = (rec("up", "sender"), rec("down", "receiver"));
    assert!(tx > 0 && rx > 0 && tx % 4096 == 0 && rx % 4096 == 0, "{tx} {rx}");
    // The responder read every block the client wrote, and its end marker (which netio
    // counts at the receiver only); the client read every block the responder wrote.
    assert_eq!(r.log_numbers("netio tcp")[..2], [tx + 4096, 4096]);
    assert_eq!(r.log_numbers("sent ")[..2], [rx, 4096]);
    // Not netio: the connection is closed and the server keeps serving.
    let mut s = TcpStream::connect(("127.0.0.1", port.parse::<u16>().unwrap())).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(&[0xff; 8]).unwrap();
    assert!(read_to_close(s).is_empty());
    let mut s = TcpStream::connect(("127.0.0.1", port.parse::<u16>().unwrap())).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(&[0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff]).unwrap();
    assert!(read_to_close(s).is_empty(), "an oversized block closes the connection");
    r.assert_alive();
}

#[test]
fn echo_and_discard_roles_return_or_count_exactly_what_was_sent() {
    let Some(mut r) = Responder::start_with(&["--echo-port", "0", "--discard-port", "0"]) else { return };
    let echo = r.role_port("echo on TCP and UDP port", "port ");
    let discard = r.role_port("discard on TCP and UDP port", "port ");
    // TCP echo, two connections: every byte back, and the responder's per-connection counts
    // add up to what the client sent.
    let res = run_json(&mut r, &["tcp", "127.0.0.1", "--proto", "echo", "-p", &echo, "-t", "1", "-i", "0", "-P", "2"]);
    let sent = u(&res["summary"]["up"]["sender"]["total_bytes"]);
    assert!(sent > 0);
    assert_eq!(u(&res["summary"]["down"]["receiver"]["total_bytes"]), sent, "every byte came back");
    let lines = r.log_lines("echo tcp", 2);
    let (a, b) = (counts(&lines[0]), counts(&lines[1]));
    assert_eq!(a[0] + b[0], sent + 2 * OPENING, "the responder read what the client sent: {a:?} {b:?}");
    assert_eq!(a[1] + b[1], sent + 2 * OPENING, "and wrote it back");
    // TCP discard: the responder counted exactly what the client wrote.
    let res = run_json(&mut r, &["tcp", "127.0.0.1", "--proto", "discard", "-p", &discard, "-t", "1", "-i", "0"]);
    let sent = u(&res["summary"]["up"]["sender"]["total_bytes"]);
    assert!(sent > 0);
    assert_eq!(r.log_numbers("discard tcp"), [sent]);
    // UDP discard, paced for loopback to lose nothing: datagrams and bytes as sent.
    let res =
        run_json(&mut r, &["udp", "127.0.0.1", "--proto", "discard", "-p", &discard, "-t", "1", "-i", "0", "-b", "5M"]);
    let (pk, by) = (u(&res["summary"]["up"]["sender"]["packets"]), u(&res["summary"]["up"]["sender"]["total_bytes"]));
    assert!(pk > 0);
    assert_eq!(r.log_numbers("discard udp"), [pk, by]);
    // UDP echo: one datagram back per datagram, never more; the responder's counts agree.
    let res = run_json(&mut r, &["udp", "127.0.0.1", "--proto", "echo", "-p", &echo, "-t", "1", "-i", "0", "-b", "5M"]);
    let s = &res["summary"];
    let (sent, back) = (u(&s["up"]["sender"]["packets"]), u(&s["down"]["receiver"]["packets"]));
    assert_eq!(sent, back + u(&s["down"]["receiver"]["lost"]));
    assert_eq!(u(&s["down"]["receiver"]["duplicates"]), 0);
    let n = r.log_numbers("echo udp");
    assert_eq!((n[0], n[1]), (sent, u(&s["up"]["sender"]["total_bytes"])), "{n:?}");
    assert_eq!(n[2], n[1], "bytes out == bytes in: no amplification");
    // More silent connections than the responder has slots (8 on a host): once they have been
    // quiet for 2 s, the quietest gives way to each new connection, so a test still runs exact.
    let _silent: Vec<TcpStream> =
        (0..12).map(|_| TcpStream::connect(("127.0.0.1", echo.parse::<u16>().unwrap())).unwrap()).collect();
    r.log_line("refused: all NC_SVC_CONNS connections in use");
    std::thread::sleep(Duration::from_millis(2100));
    let res = run_json(&mut r, &["tcp", "127.0.0.1", "--proto", "echo", "-p", &echo, "-n", "1000000", "-i", "0"]);
    assert_eq!(u(&res["summary"]["up"]["sender"]["total_bytes"]), 1_000_000);
    assert_eq!(u(&res["summary"]["down"]["receiver"]["total_bytes"]), 1_000_000);
    r.log_line("closed, quiet while all NC_SVC_CONNS connections were in use");
    r.assert_alive();
}

#[test]
fn ipv6_clients_are_served_on_the_same_dual_stack_ports() {
    if !require::ipv6_loopback("ipv6_clients_are_served_on_the_same_dual_stack_ports") {
        return;
    }
    let Some(mut r) = Responder::start_with(&["--nc-test-port", "0", "--nc-test-data-port", "0", "--echo-port", "0"])
    else {
        return;
    };
    let port = r.port();
    // The native protocol: TCP exact, UDP every datagram accounted for (the setup tokens are
    // bound to the 16-byte address).
    let res = run_json(&mut r, &["tcp", "::1", "-p", &port, "-n", "3000000"]);
    assert_eq!(res["test"]["family"], "ipv6", "{}", res["test"]);
    assert_eq!(check_tcp(&res, "up", 1), (3_000_000, 3_000_000));
    let res = run_json(&mut r, &["udp", "::1", "-p", &port, "-b", "8M", "-t", "1", "-l", "1000", "-R"]);
    udp_accounted(&res, "down");
    let res = run_json(&mut r, &["udp", "::1", "-p", &port, "-b", "8M", "-t", "1", "-l", "1000"]);
    udp_accounted(&res, "up");
    // nc_test (nc6_test_master's family) and echo on the same sockets as their IPv4 clients.
    let ctrl = r.role_port("nc-test slave on UDP port", "UDP port ");
    let data = r.role_port("nc-test slave on UDP port", "data on port ");
    let res = run_json(
        &mut r,
        &[
            "echo",
            "::1",
            "--udp",
            "--pattern",
            "100x1024",
            "--proto",
            "nc-test",
            "-p",
            &ctrl,
            "--nc-test-data-port",
            &data,
        ],
    );
    assert_eq!(u(&res["streams"][0]["rr"]["transactions"]), 100, "{}", res["streams"][0]);
    assert_eq!(r.log_numbers("nc-test UDP echo from [")[..4], [100, 100, 100 * 1040, 100 * 1040]);
    let echo = r.role_port("echo on TCP and UDP port", "port ");
    let res = run_json(&mut r, &["tcp", "::1", "--proto", "echo", "-p", &echo, "-t", "1", "-i", "0"]);
    let sent = u(&res["summary"]["up"]["sender"]["total_bytes"]);
    assert_eq!(u(&res["summary"]["down"]["receiver"]["total_bytes"]), sent);
    assert_eq!(r.log_numbers("echo tcp from ["), [sent + OPENING, sent + OPENING]);
}

#[test]
fn task_per_connection_build_serves_each_echo_and_discard_connection_exactly() {
    let Some(bin) = tasks_binary() else { return };
    let mut r = Responder::spawn(bin, &["--echo-port", "0", "--discard-port", "0"]);
    let echo = r.role_port("echo on TCP and UDP port", "port ");
    let discard = r.role_port("discard on TCP and UDP port", "port ");
    // Four echo connections at once, each on a task of its own: every byte back, and the
    // tasks' counts add up to what the client sent.
    let res = run_json(&mut r, &["tcp", "127.0.0.1", "--proto", "echo", "-p", &echo, "-t", "1", "-i", "0", "-P", "4"]);
    let sent = u(&res["summary"]["up"]["sender"]["total_bytes"]);
    assert!(sent > 0);
    assert_eq!(u(&res["summary"]["down"]["receiver"]["total_bytes"]), sent);
    let lines = r.log_lines("echo tcp", 4);
    let (read, wrote) = lines.iter().map(|l| counts(l)).fold((0, 0), |(a, b), n| (a + n[0], b + n[1]));
    assert_eq!((read, wrote), (sent + 4 * OPENING, sent + 4 * OPENING), "{lines:?}");
    let res =
        run_json(&mut r, &["tcp", "127.0.0.1", "--proto", "discard", "-p", &discard, "-t", "1", "-i", "0", "-P", "2"]);
    let sent = u(&res["summary"]["up"]["sender"]["total_bytes"]);
    let lines = r.log_lines("discard tcp", 2);
    assert_eq!(lines.iter().map(|l| counts(l)[0]).sum::<u64>(), sent, "{lines:?}");
    // The loop still serves the native protocol beside the tasks.
    let res = r.run("tcp", &["-n", "1000000"]);
    check_tcp(&res, "up", 1);
}
