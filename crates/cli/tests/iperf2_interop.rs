//! iperf2 (Debian's 2.1.8 in CI), both roles:
//! - netchar as the client of a real `iperf -s` / `iperf -s -u` on a free loopback port: TCP
//!   up, `-P 2`, `-R`, `-d`, `-r`, UDP paced and UDP `-R`. netchar's byte counts are checked
//!   against the iperf server's own `-y C` report; for UDP the far end of netchar's result is
//!   the server report iperf2 sends back after the FIN, checked against the same server's CSV
//!   line.
//! - real `iperf -c` against `netchar server --iperf2`: TCP (`-t`, `-n`, `-P 2`, `-R`, `-d`,
//!   `-r`) and UDP (`-u -b`, `-u -R`): the client's `-y C` bytes equal what netchar's server logged (`--json`), and the
//!   client's "Server Report" (the report netchar's server sent back) parses and agrees.
//!
//! Skips (with a line saying so) where iperf is not installed, or fails under
//! NETCHAR_REQUIRE_ALL=1 (CI, which installs it).

#[path = "support/loopback.rs"]
mod common;
#[path = "support/require.rs"]
mod require;

use common::*;
use serde_json::Value;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Whether iperf (2.x) runs here; when not, [`require::unavailable`] has said so.
fn iperf_installed() -> bool {
    require::tool("iperf2 interop test", "iperf", &["-v"], "apt-get install iperf")
}

use netchar_testkit::ports::free_tcp_port as free_port;

/// An `iperf -s [-u] -y C` on a free loopback port, its CSV lines in a file; killed on drop.
struct IperfServer {
    child: Child,
    port: u16,
    out: std::path::PathBuf,
}

impl IperfServer {
    fn start(udp: bool) -> Self {
        let port = free_port();
        let out = std::env::temp_dir().join(format!("netchar-iperf2-{}-{port}.csv", std::process::id()));
        let file = std::fs::File::create(&out).unwrap();
        let mut args = vec!["-s", "-B", "127.0.0.1", "-y", "C"];
        if udp {
            args.push("-u");
        }
        let port_s = port.to_string();
        args.extend(["-p", &port_s]);
        let child = Command::new("iperf").args(&args).stdout(file).stderr(Stdio::null()).spawn().unwrap();
        // Wait for the port to be bound (a probe connection would be a test of its own).
        let (table, state) = if udp { ("/proc/net/udp", "07") } else { ("/proc/net/tcp", "0A") };
        let hex = format!(":{port:04X} ");
        for _ in 0..250 {
            let up = std::fs::read_to_string(table)
                .unwrap_or_default()
                .lines()
                .any(|l| l.contains(&hex) && l.split_whitespace().nth(3) == Some(state));
            if up {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Self { child, port, out }
    }

    /// The server's CSV lines once there are `n` (waits up to 10 s).
    fn lines(&self, n: usize) -> Vec<Vec<String>> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let text = std::fs::read_to_string(&self.out).unwrap_or_default();
            let lines: Vec<Vec<String>> = text
                .lines()
                .filter(|l| l.matches(',').count() >= 8)
                .map(|l| l.split(',').map(str::to_string).collect())
                .collect();
            if lines.len() >= n || Instant::now() > deadline {
                assert!(lines.len() >= n, "iperf -s wrote {} CSV lines, {n} expected: {text}", lines.len());
                return lines;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for IperfServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.out);
    }
}

fn run(kind: &str, port: u16, args: &[&str]) -> Value {
    let port = port.to_string();
    let mut all = vec![kind, "127.0.0.1", "-p", &port, "--proto", "iperf2", "--json", "-i", "0"];
    all.extend_from_slice(args);
    let r = netchar(&all);
    assert_eq!(r.code, 0, "netchar {all:?}: {}", r.stderr);
    serde_json::from_str(&r.stdout).unwrap()
}

fn csv_u64(line: &[String], i: usize) -> u64 {
    line[i].trim().parse().unwrap_or_else(|_| panic!("CSV field {i} of {line:?}"))
}

/// iperf2 servers count each TCP stream's settings header after its 4-byte flags word.
const HEADER_COUNTED: u64 = 20;

#[test]
fn tcp_up_with_two_streams_matches_the_iperf_servers_csv() {
    if !iperf_installed() {
        return;
    }
    let s = IperfServer::start(false);
    let v = run("tcp", s.port, &["-t", "1", "-P", "2"]);
    assert_eq!(v["test"]["protocol"], "iperf2");
    let sent = u(&v["summary"]["up"]["sender"]["total_bytes"]);
    let per_stream: Vec<u64> =
        v["streams"].as_array().unwrap().iter().filter(|r| r["role"] == "sender").map(|r| u(&r["bytes"])).collect();
    assert_eq!(per_stream.len(), 2);
    let lines = s.lines(2);
    let mut theirs: Vec<u64> = lines.iter().map(|l| csv_u64(l, 7)).collect();
    let mut ours: Vec<u64> = per_stream.iter().map(|b| b + HEADER_COUNTED).collect();
    theirs.sort_unstable();
    ours.sort_unstable();
    assert_eq!(ours, theirs, "each stream: netchar's bytes + the header = the iperf server's count");
    assert_eq!(sent + 2 * HEADER_COUNTED, theirs.iter().sum::<u64>());
}

#[test]
fn tcp_bytes_and_reverse_match_the_iperf_servers_csv() {
    if !iperf_installed() {
        return;
    }
    let s = IperfServer::start(false);
    let v = run("tcp", s.port, &["-n", "20M"]);
    assert_eq!(u(&v["summary"]["up"]["sender"]["total_bytes"]), 20_000_000);
    assert_eq!(csv_u64(&s.lines(1)[0], 7), 20_000_000 + HEADER_COUNTED);

    // -R: iperf 2.1's reverse header; the server sends on netchar's connection.
    let v = run("tcp", s.port, &["-t", "1", "-R"]);
    let received = u(&v["summary"]["down"]["receiver"]["total_bytes"]);
    assert!(received > 0);
    assert_eq!(csv_u64(&s.lines(2)[1], 7), received, "every byte the iperf server sent was read");
}

#[test]
fn udp_paced_carries_the_iperf_servers_report() {
    if !iperf_installed() {
        return;
    }
    let s = IperfServer::start(true);
    let v = run("udp", s.port, &["-t", "1", "-b", "5M"]);
    let up = &v["summary"]["up"];
    // The far end is the server report iperf2 sent back after the FIN.
    let line = &s.lines(1)[0];
    // CSV: ..., bytes (7), bit/s, jitter ms, lost (10), total datagrams (11), %, out of order.
    let (bytes, lost, total) = (csv_u64(line, 7), csv_u64(line, 10), csv_u64(line, 11));
    assert_eq!(u(&up["receiver"]["total_bytes"]), bytes, "the report's bytes are the server's CSV bytes");
    assert_eq!(u(&up["receiver"]["lost"]), lost);
    assert_eq!(u(&up["receiver"]["packets"]) + lost, total);
    // And netchar's own sender count is what the server counted plus what it lost (none on
    // an idle loopback; a starved iperf -s overflows its socket buffer on a loaded machine).
    assert_eq!(u(&up["sender"]["total_bytes"]), bytes + lost * 1470, "{line:?}");
    assert_eq!(u(&up["sender"]["packets"]), total, "the FIN counts as a datagram on both ends");
    assert_eq!(up["packets_accounted"], true);
}

/// With `-d`/`-r` netchar sends 2.0.5's 24-byte header with VERSION1, and iperf2 counts all of it.
const DIAL_BACK_HEADER_COUNTED: u64 = 24;

/// The CSV line of the server's receiving and of its dial-back: iperf2 puts the listening
/// side's port in field 4 (the server's `port` for the first, netchar's listener for the other).
fn split_dial_back(lines: &[Vec<String>], port: u16) -> (Vec<String>, Vec<String>) {
    let port = port.to_string();
    let forward = lines.iter().find(|l| l[4] == port).unwrap_or_else(|| panic!("{lines:?}")).clone();
    let back = lines.iter().find(|l| l[4] != port).unwrap_or_else(|| panic!("{lines:?}")).clone();
    (forward, back)
}

#[test]
fn dual_and_tradeoff_dial_backs_match_the_iperf_servers_csv() {
    if !iperf_installed() {
        return;
    }
    for flag in ["-d", "-r"] {
        // A server of its own for each. iperf 2.1.8 dials back for -r when its receiving
        // thread ends, which waits for the reporter thread to finish that test (EndJob); on
        // the server that had just served -d, a CI run on a loaded machine once saw no
        // dial-back for -r within netchar's 11 s.
        let s = IperfServer::start(false);
        let v = run("tcp", s.port, &["-t", "1", flag]);
        assert_eq!(v["test"]["protocol"], "iperf2");
        let sent = u(&v["summary"]["up"]["sender"]["total_bytes"]);
        let received = u(&v["summary"]["down"]["receiver"]["total_bytes"]);
        assert!(sent > 0 && received > 0, "{flag}: {v}");
        let lines = s.lines(2);
        let (forward, back) = split_dial_back(&lines, s.port);
        assert_eq!(csv_u64(&forward, 7), sent + DIAL_BACK_HEADER_COUNTED, "{flag}: the server's receive count");
        assert_eq!(csv_u64(&back, 7), received, "{flag}: every byte the server sent back was read");
        let down = v["streams"].as_array().unwrap().iter().find(|r| r["flow"] == "down").unwrap();
        let started = down["started_seconds"].as_f64().unwrap_or_else(|| panic!("{down}"));
        if flag == "-r" {
            // The server connects back only once netchar's stream is closed.
            let up = v["streams"].as_array().unwrap().iter().find(|r| r["flow"] == "up").unwrap();
            assert!(started >= up["seconds"].as_f64().unwrap(), "{v}");
        }
    }
}

/// A server that takes `-d`'s header but never connects back (a firewall, NAT): after the
/// server's time and a grace the down stream ends with a line saying so; the up figures stay.
#[test]
fn a_dial_back_that_never_comes_is_an_error_with_the_figures_kept() {
    let sink = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = sink.local_addr().unwrap().port();
    let reader = std::thread::spawn(move || {
        let (mut c, _) = sink.accept().unwrap();
        let _ = std::io::copy(&mut c, &mut std::io::sink());
    });
    let r = netchar(&["tcp", "127.0.0.1", "-p", &port.to_string(), "--proto", "iperf2", "-d", "-t", "0.2", "--json"]);
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("never connected back"), "{}", r.stderr);
    let v: Value = serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {}", r.stdout));
    assert!(u(&v["summary"]["up"]["sender"]["total_bytes"]) > 0, "{v}");
    assert_eq!(u(&v["summary"]["down"]["receiver"]["total_bytes"]), 0);
    reader.join().unwrap();
}

/// UDP -R (iperf 2.1+): one request datagram, then the server sends and ends with a FIN that
/// carries its count. netchar's datagrams + its lost + the FIN are the server's CSV bytes.
#[test]
fn udp_reverse_settles_against_the_servers_fin() {
    if !iperf_installed() {
        return;
    }
    let s = IperfServer::start(true);
    let v = run("udp", s.port, &["-t", "1", "-b", "2M", "-l", "1000", "-R"]);
    let down = &v["summary"]["down"]["receiver"];
    let (received, lost) = (u(&down["packets"]), u(&down["lost"]));
    assert!(received > 0, "{v}");
    assert_eq!(u(&down["total_bytes"]), received * 1000);
    let line = s.lines(1).last().unwrap().clone();
    assert_eq!(csv_u64(&line, 7), (received + lost + 1) * 1000, "{line:?}: sent = received + lost + the FIN");
}

#[test]
fn refusals_come_before_any_traffic() {
    let r = netchar(&["rr", "127.0.0.1", "-p", "1", "--proto", "iperf2"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    let r = netchar(&["udp", "127.0.0.1", "-p", "1", "--proto", "lwiperf"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("--proto lwiperf: not with `udp`"), "{}", r.stderr);
    let r = netchar(&["tcp", "127.0.0.1", "-p", "1", "--proto", "lwiperf", "-R"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("dial-back"), "{}", r.stderr);
    let r = netchar(&["tcp", "127.0.0.1", "-p", "1", "--proto", "lwiperf", "-d"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("dialing back is iperf2's test") && r.stderr.contains("not lwiperf's"), "{}", r.stderr);
    // -d/-r run over TCP, one stream each way, for a time.
    for args in [&["udp", "-d"][..], &["tcp", "-r", "-P", "2"], &["tcp", "-d", "-n", "1M"]] {
        let mut all = vec![args[0], "127.0.0.1", "-p", "1", "--proto", "iperf2"];
        all.extend_from_slice(&args[1..]);
        let r = netchar(&all);
        assert_eq!(r.code, 2, "{all:?}: {}", r.stderr);
    }
    // They are iperf2's only.
    let r = netchar(&["tcp", "127.0.0.1", "-p", "1", "-d"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("--proto iperf2"), "{}", r.stderr);
}

// ---------------------------------------------------------------- netchar server --iperf2

/// A netchar server answering iperf2 on its own port, logging JSON lines.
fn server() -> (Server, u16) {
    server_with(&[])
}

/// [`server`] with more server flags.
fn server_with(extra: &[&str]) -> (Server, u16) {
    // Port 0: a port found free beforehand could be taken by a parallel test.
    let s = Server::start(&[&["--iperf2", "--iperf2-port", "0", "--json"], extra].concat());
    let lines = [s.startup.clone(), s.log_lines(Duration::from_secs(5))].concat();
    let port = announced_port(&lines, "answering iperf2 clients on ").unwrap_or_else(|| panic!("{lines:?}"));
    (s, port)
}

/// `iperf -c 127.0.0.1 -p port` with `args`: its stdout.
fn iperf(port: u16, args: &[&str]) -> String {
    let out = Command::new("iperf").args(["-c", "127.0.0.1", "-p", &port.to_string()]).args(args).output().unwrap();
    assert!(out.status.success(), "iperf -c {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The CSV lines of an `iperf -c -y C` run.
fn csv(text: &str) -> Vec<Vec<String>> {
    text.lines().filter(|l| l.matches(',').count() >= 8).map(|l| l.split(',').map(str::to_string).collect()).collect()
}

fn logged_bytes(log: &Value) -> u64 {
    assert_eq!(log["protocol"], "iperf2");
    log["flows"].as_array().unwrap().iter().map(|f| u(&f["bytes"])).sum()
}

#[test]
fn iperf_tcp_clients_bytes_equal_the_servers_count() {
    if !iperf_installed() {
        return;
    }
    let (s, port) = server();
    let line = &csv(&iperf(port, &["-t", "1", "-y", "C"]))[0];
    assert_eq!(csv_u64(line, 7), logged_bytes(&s.logged_tests(1)[0]));

    let line = &csv(&iperf(port, &["-n", "10M", "-y", "C"]))[0];
    assert_eq!(csv_u64(line, 7), 10 * 1024 * 1024);
    assert_eq!(logged_bytes(&s.logged_tests(1)[0]), 10 * 1024 * 1024);

    // -P 2: a line per stream on the client, a test log per connection on the server.
    let lines = csv(&iperf(port, &["-t", "1", "-P", "2", "-y", "C"]));
    let mut theirs: Vec<u64> = lines.iter().map(|l| csv_u64(l, 7)).collect();
    let mut ours: Vec<u64> = s.logged_tests(2).iter().map(logged_bytes).collect();
    theirs.sort_unstable();
    ours.sort_unstable();
    assert_eq!(theirs, ours);

    // -R (iperf 2.1): netchar's server sends on the client's connection.
    let line = &csv(&iperf(port, &["-t", "1", "-R", "-y", "C"]))[0];
    let log = &s.logged_tests(1)[0];
    assert_eq!(log["direction"], "down");
    assert_eq!(csv_u64(line, 7), logged_bytes(log));
}

#[test]
fn iperf_udp_clients_read_the_servers_report() {
    if !iperf_installed() {
        return;
    }
    let (s, port) = server();
    let line = &csv(&iperf(port, &["-u", "-b", "5M", "-t", "1", "-y", "C"]))[0];
    assert_eq!(csv_u64(line, 7), logged_bytes(&s.logged_tests(1)[0]));

    // The text output prints the report netchar's server sent back after the FIN.
    let text = iperf(port, &["-u", "-b", "5M", "-t", "1", "-l", "1000"]);
    let log = &s.logged_tests(1)[0];
    let report = text.lines().skip_while(|l| !l.contains("Server Report")).nth(2).unwrap_or_else(|| panic!("{text}"));
    // "[  1] 0.0000-1.0031 sec   645 KBytes  5.26 Mbits/sec   0.011 ms 0/448 (0%)"
    let counts = report.split_whitespace().find(|w| w.contains('/') && !w.contains("sec")).unwrap();
    let (lost, total) = counts.split_once('/').unwrap();
    let (lost, total): (u64, u64) = (lost.parse().unwrap(), total.parse().unwrap());
    assert_eq!(lost, 0, "{report}");
    assert_eq!(total * 1000, logged_bytes(log), "the report's datagrams (the FIN's included) are the logged bytes");
}

/// `iperf -c -d` and `-r` (2.1.8 still dials back, VERSION1 with or without RUN_NOW): netchar's
/// server connects back to the client's `-L` port and sends; both directions' bytes in the
/// client's CSV equal what netchar's server logged.
#[test]
fn iperf_dual_and_tradeoff_clients_are_dialed_back() {
    if !iperf_installed() {
        return;
    }
    let (s, port) = server();
    for flag in ["-d", "-r"] {
        // iperf's -L defaults to the server's port, which netchar's server holds here.
        let listen = free_port().to_string();
        let lines = csv(&iperf(port, &["-t", "1", flag, "-L", &listen, "-y", "C"]));
        assert_eq!(lines.len(), 2, "{flag}: {lines:?}");
        // Field 4 is the listening side's port: netchar's server, or the client's -L.
        let up = lines.iter().find(|l| l[4] == port.to_string()).unwrap();
        let down = lines.iter().find(|l| l[4] == listen).unwrap_or_else(|| panic!("{lines:?}"));
        let log = &s.logged_tests(1)[0];
        assert_eq!(log["direction"], "bidir", "{log}");
        assert!(log["error"].is_null(), "{log}");
        let flow = |name: &str| {
            let f = log["flows"].as_array().unwrap().iter().find(|f| f["flow"] == name).unwrap();
            u(&f["bytes"])
        };
        assert_eq!(csv_u64(up, 7), flow("up"), "{flag}: the client's bytes = netchar's server's count");
        assert_eq!(csv_u64(down, 7), flow("down"), "{flag}: netchar's server's bytes = the client's count");
        assert!(flow("down") > 0);
    }
}

/// `iperf -c -u -R` (2.1): netchar's server sends from its port, paced, and ends with a FIN;
/// the client's CSV (which counts the FIN as a datagram) agrees with what the server logged.
#[test]
fn iperf_udp_reverse_clients_get_the_servers_datagrams() {
    if !iperf_installed() {
        return;
    }
    let (s, port) = server();
    let line = &csv(&iperf(port, &["-u", "-R", "-b", "2M", "-t", "1", "-l", "1000", "-y", "C"]))[0];
    let log = &s.logged_tests(1)[0];
    assert_eq!(log["direction"], "down", "{log}");
    let (bytes, lost, total) = (csv_u64(line, 7), csv_u64(line, 10), csv_u64(line, 11));
    assert!(total > 1, "{line:?}");
    assert_eq!(total * 1000, logged_bytes(log), "{line:?}: every datagram sent, the FIN included, is counted");
    assert_eq!(bytes + lost * 1000, logged_bytes(log), "{line:?}");
}

/// lwIP lwiperf's client as lwiperf.c writes it (see crates/wire/tests/lwiperf_transcript.rs):
/// the 24-byte settings twice (flags, 1 thread, port 5001, 0, 0, amount −1000), then
/// "0123456789" from offset 48. netchar's server counts every byte but the first header (as
/// it counts an iperf 2.0.5 client's; lwiperf's own count takes in both headers: 24 more).
#[test]
fn an_lwiperf_client_transcript_replayed_against_the_server() {
    use std::io::Write;
    let (s, port) = server();
    // Port 0 in the header: a -r that names nothing to connect back to.
    for (flags, dial_back) in [(0u32, false), (0x8000_0000, true)] {
        let mut settings = Vec::new();
        for w in [flags, 1, if dial_back { 0 } else { 5001 }, 0, 0, (-1000i32) as u32] {
            settings.extend_from_slice(&w.to_be_bytes());
        }
        let mut transcript = [settings.clone(), settings].concat();
        transcript.extend((48..48 + 100_000).map(|i| b"0123456789"[i % 10]));
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.write_all(&transcript).unwrap();
        c.shutdown(std::net::Shutdown::Write).unwrap();
        // The server closes at once after EOF.
        let mut rest = Vec::new();
        let _ = std::io::Read::read_to_end(&mut c, &mut rest);
        let log = &s.logged_tests(1)[0];
        assert_eq!(logged_bytes(log), transcript.len() as u64 - 24);
        assert_eq!(log["error"].as_str().is_some_and(|e| e.contains("-d/-r with port 0")), dial_back, "{log}");
    }
}

/// Garbage on the iperf2 port (a header that claims more than 256 bytes, a silent connection,
/// short and foreign UDP datagrams, a FIN of no test) is refused or ignored, and the server
/// keeps serving.
#[test]
fn hostile_iperf2_input_leaves_the_server_serving() {
    use std::io::Write;
    let (s, port) = server();
    // LEN_BIT with the length bits all set: 0x1FE >> 1 = 255 bytes is within the cap; 0xFFFF
    // flags are not (a 2.1 permit-key length is masked off by iperf2 itself).
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.write_all(&[0x00, 0x01, 0x01, 0xFE, 1, 2, 3]).unwrap();
    drop(c);
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.connect(("127.0.0.1", port)).unwrap();
    for d in [&b"x"[..], &[0xFF; 16][..], &[0u8; 11][..]] {
        udp.send(d).unwrap();
    }
    // The server still answers a real test.
    let r = netchar(&["tcp", "127.0.0.1", "-p", &port.to_string(), "--proto", "iperf2", "-n", "1M", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let logs: Vec<Value> = (0..3)
        .flat_map(|_| s.log_lines(Duration::from_millis(500)))
        .filter_map(|l| serde_json::from_str(&l).ok())
        .collect();
    let test = logs.iter().find(|v| v["event"] == "test" && v["error"].is_null()).expect("the real test ran");
    // netchar's server counts as the client counts: netchar's client (as iperf 2.0.5's) does
    // not count its 24-byte header, written before the data.
    assert_eq!(logged_bytes(test), 1_000_000);
}

/// `iperf -c -u -R` under the server's `--max-rate`: the server's sending runs through the
/// data plane's pacer at the rate the client asked for, which the limit admits.
#[test]
fn iperf_udp_reverse_is_paced_under_max_rate() {
    if !iperf_installed() {
        return;
    }
    let (s, port) = server_with(&["--max-rate", "5M"]);
    let line = &csv(&iperf(port, &["-u", "-R", "-b", "4M", "-t", "2", "-l", "1000", "-y", "C"]))[0];
    let log = &s.logged_tests(1)[0];
    let flow = &log["flows"].as_array().unwrap()[0];
    let rate = flow["bits_per_second"].as_f64().unwrap();
    assert!((3.6e6..=4.4e6).contains(&rate), "the server sent at {rate} bit/s for -b 4M: {log}");
    assert_eq!(csv_u64(line, 11) * 1000, logged_bytes(log), "{line:?}");
}
