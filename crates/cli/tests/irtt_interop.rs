//! irtt (Debian's irtt 0.9, protocol version 1) against `netchar server --irtt`: an
//! unmodified `irtt client` runs its test, and its own JSON (`-o`) is the ground truth: the
//! requests it sent are the requests netchar's server logged as received, the replies it
//! received are the replies the server logged as sent. A hostile test: forged, malformed and
//! HMAC-signed packets get no answer, and a single open gets none either (its reply would be
//! longer than it), so no source gets more bytes back than it sent.
//!
//! Skips (with a line saying so) where irtt is not installed, or fails under
//! NETCHAR_REQUIRE_ALL=1 (CI, which installs it).

#[path = "support/loopback.rs"]
mod common;
#[path = "support/require.rs"]
mod require;

use common::*;
use serde_json::Value;
use std::net::UdpSocket;
use std::process::Command;
use std::time::Duration;

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

#[test]
fn irtt_client_counts_equal_what_netchars_server_logged() {
    if !have_irtt() {
        return;
    }
    let (s, port) = server(&[]);
    let len = 172u64;
    let v = irtt_client(port, &["-i", "20ms", "-d", "2s", "-l", &len.to_string()]);
    let stats = &v["stats"];
    let sent = u(&stats["packets_sent"]);
    let received = u(&stats["packets_received"]);
    // irtt's own view of the server: the count each reply carries.
    let server_received = u(&stats["server_packets_received"]);
    assert!(sent >= 90, "{stats}");
    assert_eq!(received, sent, "loopback loses nothing: {stats}");
    assert_eq!(server_received, sent, "{stats}");
    assert_eq!(u(&stats["bytes_sent"]), sent * len);
    // Every round trip has the server's receive and send stamps: one-way delays both ways.
    let rt = v["round_trips"].as_array().unwrap();
    assert_eq!(rt.len() as u64, sent);
    assert!(rt.iter().all(|r| r["lost"] == "false" && r["delay"]["send"].is_i64() && r["delay"]["receive"].is_i64()));
    let log = s.logged_tests(1).remove(0);
    assert_eq!(log["protocol"], "irtt");
    assert_eq!(log["error"], Value::Null, "{log}");
    assert_eq!(flow_bytes(&log, "up"), sent * len, "requests received = the client's sent: {log}");
    assert_eq!(flow_bytes(&log, "down"), received * len, "replies sent = the client's received: {log}");
}

#[test]
fn the_server_grants_no_more_than_its_max_duration() {
    if !have_irtt() {
        return;
    }
    let (s, port) = server(&["--max-duration", "1"]);
    // A stock client refuses restricted parameters; with --loose it runs what was granted.
    let out = Command::new("irtt")
        .args(["client", "-i", "50ms", "-d", "5s", "-Q", &format!("127.0.0.1:{port}")])
        .output()
        .unwrap();
    assert!(!out.status.success(), "a 5 s test on a 1 s server: {}", String::from_utf8_lossy(&out.stderr));
    let v = irtt_client(port, &["-i", "50ms", "-d", "5s", "--loose"]);
    let sent = u(&v["stats"]["packets_sent"]);
    assert!((15..=21).contains(&sent), "1 s at 50 ms: {sent} sent");
    // The refused client's open was granted and its test ended empty when it closed.
    let logs = s.logged_tests(2);
    assert_eq!(flow_bytes(&logs[0], "up"), 0, "{logs:?}");
    assert_eq!(flow_bytes(&logs[1], "up"), sent * 60, "{logs:?}");
    assert_eq!(flow_bytes(&logs[1], "down"), u(&v["stats"]["packets_received"]) * 60, "{logs:?}");
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
    // One open (26 bytes) would be answered with 34: not answered.
    silent(&open, "a first open");
    // A second open from the same source adds up to the reply: 34 bytes for 52 sent.
    sock.send(&open).unwrap();
    let n = sock.recv(&mut buf).expect("the repeated open is answered");
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
    let n = sock.recv(&mut buf).expect("a data request is answered");
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
