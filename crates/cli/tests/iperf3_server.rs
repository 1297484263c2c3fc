//! Real iperf3 clients (Debian's 3.12 in CI) against `netchar server --iperf3`: TCP and UDP, up,
//! `-R`, `--bidir`, `-P`, `-n`, `--get-server-output`. What iperf3 reports (`-J`) is checked
//! against what netchar's server logged of the same test (`--json`), byte for byte, and the
//! server's one-test-at-a-time rule is checked across both protocols. Skips (with a line saying
//! so) where iperf3 is not installed, or fails under NETCHAR_REQUIRE_ALL=1 (CI, which installs
//! it).

#[path = "support/loopback.rs"]
mod common;
#[path = "support/require.rs"]
mod require;

use common::*;
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

/// Whether iperf3 runs here; when not, [`require::unavailable`] has said so.
fn iperf3_installed() -> bool {
    require::tool("iperf3 server test", "iperf3", &["--version"], "apt-get install iperf3")
}

/// A netchar server answering iperf3 on its own port, logging JSON lines.
fn server() -> (Server, u16) {
    // Port 0: a port found free beforehand could be taken by a parallel test.
    let s = Server::start(&["--iperf3", "--iperf3-port", "0", "--json"]);
    let lines = [s.startup.clone(), s.log_lines(Duration::from_secs(5))].concat();
    let port = announced_port(&lines, "answering iperf3 clients on ").unwrap_or_else(|| panic!("{lines:?}"));
    (s, port)
}

/// `iperf3 -c` with `args`, its `-J` report.
fn iperf3(port: u16, args: &[&str]) -> Value {
    let out =
        Command::new("iperf3").args(["-c", "127.0.0.1", "-p", &port.to_string(), "-J"]).args(args).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("iperf3 -J output ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    assert!(v.get("error").is_none(), "iperf3 {args:?} failed: {}", v["error"]);
    v
}

/// The server's log line of the one test just run.
fn logged_test(s: &Server) -> Value {
    for _ in 0..50 {
        for line in s.log_lines(Duration::from_millis(200)) {
            let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
            if v["event"] == "test" {
                return v;
            }
        }
    }
    panic!("no test logged");
}

/// Bytes the server logged for one flow ("up": it received, "down": it sent).
fn server_bytes(log: &Value, flow: &str) -> u64 {
    log["flows"].as_array().unwrap().iter().find(|f| f["flow"] == flow).map(|f| u(&f["bytes"])).unwrap()
}

#[test]
fn tcp_up_down_bidir_and_parallel_match_the_servers_count() {
    if !iperf3_installed() {
        return;
    }
    let (s, port) = server();

    // Up, two streams: iperf3's receiver figure is the server's, and equals what the client sent.
    let v = iperf3(port, &["-t", "1", "-P", "2"]);
    let log = logged_test(&s);
    assert_eq!((log["protocol"].as_str(), log["kind"].as_str(), u(&log["streams"])), (Some("iperf3"), Some("tcp"), 2));
    // The client told its version in its parameters.
    assert!(log["peer_software"].as_str().is_some_and(|s| s.starts_with("iperf3 3.")), "{}", log["peer_software"]);
    let (sent, received) = (u(&v["end"]["sum_sent"]["bytes"]), u(&v["end"]["sum_received"]["bytes"]));
    assert_eq!(received, server_bytes(&log, "up"));
    assert_eq!(sent, received, "the server settles on the client's total: nothing in flight is lost");
    assert!(sent > 0);

    // -n: exactly the bytes asked for.
    let v = iperf3(port, &["-n", "10M"]);
    let log = logged_test(&s);
    assert_eq!(u(&v["end"]["sum_received"]["bytes"]), 10 * 1024 * 1024);
    assert_eq!(server_bytes(&log, "up"), 10 * 1024 * 1024);

    // -R: the server sends; iperf3's sender figure is the server's count.
    let v = iperf3(port, &["-t", "1", "-R"]);
    let log = logged_test(&s);
    assert_eq!(log["direction"], "down");
    assert_eq!(u(&v["end"]["sum_sent"]["bytes"]), server_bytes(&log, "down"));
    assert!(u(&v["end"]["sum_received"]["bytes"]) <= server_bytes(&log, "down"));

    // --bidir -P 2: four streams, iperf3's ids 1, 3 up and 4, 5 down.
    let v = iperf3(port, &["-t", "1", "--bidir", "-P", "2"]);
    let log = logged_test(&s);
    assert_eq!(log["data_paths"].as_array().unwrap().len(), 4);
    assert_eq!(u(&v["end"]["sum_received"]["bytes"]), server_bytes(&log, "up"));
    assert_eq!(u(&v["end"]["sum_sent_bidir_reverse"]["bytes"]), server_bytes(&log, "down"));
    assert_eq!(v["end"]["streams"].as_array().unwrap().len(), 4);
}

#[test]
fn udp_loss_jitter_and_counts_are_the_servers() {
    if !iperf3_installed() {
        return;
    }
    let (s, port) = server();

    // Paced UDP up: the server's datagram count is iperf3's receiver line; nothing lost on loopback
    // at 20 Mbit/s, and the loss is settled on the client's own datagram count.
    let v = iperf3(port, &["-u", "-b", "20M", "-t", "1", "-l", "1200", "--get-server-output"]);
    let log = logged_test(&s);
    let sum = &v["end"]["sum"];
    assert_eq!(u(&sum["bytes"]), server_bytes(&log, "up"));
    assert_eq!(u(&sum["bytes"]) % 1200, 0);
    // Every datagram is received or lost (a busy machine may overflow a socket buffer), and
    // the loss is settled on the client's own count.
    assert_eq!(u(&sum["packets"]), u(&sum["bytes"]) / 1200 + u(&sum["lost_packets"]));
    assert!(f(&sum["jitter_ms"]) >= 0.0);
    let text = v["server_output_text"].as_str().expect("--get-server-output: the server's text");
    assert!(text.contains(&format!("received {} bytes", u(&sum["bytes"]))), "{text}");

    // -R: the server sends; iperf3 counts every datagram the server logged as sent.
    let v = iperf3(port, &["-u", "-b", "20M", "-t", "1", "-l", "1200", "-R"]);
    let log = logged_test(&s);
    assert_eq!(u(&v["end"]["sum"]["bytes"]), server_bytes(&log, "down"));

    // 64-bit counters (-P 2 --bidir with --udp-counters-64bit).
    let v = iperf3(port, &["-u", "-b", "10M", "-t", "1", "-P", "2", "--bidir", "--udp-counters-64bit"]);
    let log = logged_test(&s);
    assert_eq!(log["data_paths"].as_array().unwrap().len(), 4);
    let sum = &v["end"]["sum"];
    assert!(u(&sum["lost_packets"]) <= u(&sum["packets"]));
    assert!(server_bytes(&log, "up") > 0 && server_bytes(&log, "down") > 0);
}

#[test]
fn netchar_client_and_server_both_speaking_iperf3_agree_exactly() {
    let (_s, port) = server();
    let p = port.to_string();
    for (kind, extra) in [("tcp", vec!["-t", "1", "-P", "2", "--bidir"]), ("udp", vec!["-b", "20M", "-t", "1", "-R"])] {
        let mut args = vec![kind, "127.0.0.1", "-p", &p, "--proto", "iperf3", "--json", "-i", "0"];
        args.extend(extra);
        let r = netchar(&args);
        assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
        let v: Value = serde_json::from_str(&r.stdout).unwrap();
        for flow in ["up", "down"] {
            let Some(fl) = v["summary"].get(flow) else { continue };
            assert_eq!(
                u(&fl["sender"]["total_bytes"]),
                u(&fl["receiver"]["total_bytes"]),
                "{kind} {flow}: sender != receiver"
            );
        }
    }
}

#[test]
fn one_test_at_a_time_across_protocols_and_limits_apply() {
    if !iperf3_installed() {
        return;
    }
    let s = Server::start(&["--iperf3", "--iperf3-port", "0", "--json", "--max-duration", "5"]);
    let lines = [s.startup.clone(), s.log_lines(Duration::from_secs(5))].concat();
    let port = announced_port(&lines, "answering iperf3 clients on ").unwrap_or_else(|| panic!("{lines:?}"));
    // A native test holds the one slot: an iperf3 client is told the server is busy.
    let native = std::process::Command::new(BIN)
        .args(["tcp", "127.0.0.1", "-p", &s.port.to_string(), "-t", "3", "-b", "10M"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    let out =
        Command::new("iperf3").args(["-c", "127.0.0.1", "-p", &port.to_string(), "-t", "1", "-J"]).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["error"].as_str().unwrap_or_default().contains("busy"), "{}", v["error"]);
    let _ = native.wait_with_output();
    // --max-duration applies to iperf3 tests as to native ones.
    let out =
        Command::new("iperf3").args(["-c", "127.0.0.1", "-p", &port.to_string(), "-t", "30", "-J"]).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v.get("error").is_some(), "a 30 s test ran under --max-duration 5");
    let mut lines = String::new();
    for _ in 0..25 {
        lines.push_str(&s.log_lines(Duration::from_millis(200)).join("\n"));
        if lines.contains("--max-duration") {
            break;
        }
    }
    assert!(lines.contains("--max-duration"), "{lines}");
}

/// A request netchar's iperf3 server cannot run is refused with iperf3's own "not implemented"
/// (IEUNIMP), which the client prints as such, not as another error's text.
#[test]
fn an_unsupported_request_is_refused_as_not_implemented() {
    if !iperf3_installed() {
        return;
    }
    let (_s, port) = server();
    let out = Command::new("iperf3")
        .args(["-c", "127.0.0.1", "-p", &port.to_string(), "-t", "1", "--fq-rate", "1M", "-J"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let error = v["error"].as_str().unwrap_or_default();
    assert!(error.contains("not implemented"), "{error}");
}

#[test]
fn hostile_iperf3_clients_are_named_and_the_server_keeps_serving() {
    use std::io::{Read, Write};
    let (s, port) = server();
    let send = |bytes: &[u8]| {
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.write_all(bytes).unwrap();
        let mut out = Vec::new();
        let _ = c.read_to_end(&mut out);
        out
    };
    let frame = |json: &[u8]| {
        let mut v = b"x".repeat(37);
        v.extend_from_slice(&(json.len() as u32).to_be_bytes());
        v.extend_from_slice(json);
        v
    };
    // An oversized parameters frame, not JSON, not an object, too many streams.
    let mut huge = b"x".repeat(37);
    huge.extend_from_slice(&u32::MAX.to_be_bytes());
    for (bytes, why) in [
        (huge, "exceeds the 8192-byte limit"),
        (frame(b"{not json}"), "params JSON"),
        (frame(b"[1, 2]"), "not an object"),
        (frame(br#"{"tcp":true,"time":1,"parallel":100000}"#), "refused"),
    ] {
        let answer = send(&bytes);
        // PARAM_EXCHANGE, then nothing but possibly an error byte: never a test.
        assert_eq!(answer.first(), Some(&9u8), "{why}");
        let mut logged = String::new();
        for _ in 0..25 {
            logged.push_str(&s.log_lines(Duration::from_millis(200)).join("\n"));
            if logged.contains(why) {
                break;
            }
        }
        assert!(logged.contains(why), "expected {why:?} in the log: {logged}");
    }
    // Garbage datagrams on the UDP port are ignored.
    let junk = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    for n in 0..64usize {
        let _ = junk.send_to(&vec![0xA5; n * 23], ("127.0.0.1", port));
    }
    // And a real client still gets its test.
    if iperf3_installed() {
        let v = iperf3(port, &["-t", "1"]);
        assert!(u(&v["end"]["sum_received"]["bytes"]) > 0);
    }
}
