//! netio end to end: `netchar suite netio --proto netio` against `netchar server --netio`
//! (TCP on loopback; UDP through the namespace bed, since netio's UDP test uses the same port
//! on both ends), and against a sink server as lwIP's contrib netio is (Tx only, and the Rx
//! timeout). Byte counts are checked against the server's own log: what the client wrote
//! arrived (plus the end-marker block, which netio counts at the receiver only), and what the
//! server wrote is what the client read. The golden transcripts of the real netio are replayed
//! in crates/wire/tests/netio_golden.rs.

#[path = "support/netns.rs"]
mod netns;

use netns::{Link, Netns, Server};
use serde_json::Value;
use std::io::Read;
use std::process::Command;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_netchar");

fn run(ns: Option<&Netns>, args: &[&str]) -> (Option<i32>, String, String) {
    let mut cmd = match ns {
        Some(n) => n.command(BIN),
        None => Command::new(BIN),
    };
    cmd.args(args);
    let r = netns::run_with_timeout(cmd, Duration::from_secs(90)).expect("netchar runs");
    (r.status.and_then(|s| s.code()), r.stdout, r.stderr)
}

/// Two free consecutive ports (netio's port and port+1), TCP and UDP.
fn free_pair() -> u16 {
    loop {
        let p = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        if p < 65534
            && std::net::TcpListener::bind(("127.0.0.1", p + 1)).is_ok()
            && std::net::UdpSocket::bind(("127.0.0.1", p + 1)).is_ok()
        {
            return p;
        }
    }
}

fn server_test_log(server: &Server) -> Value {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(v) =
            server.stderr().lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).find(|v| v["event"] == "test")
        {
            return v;
        }
        assert!(Instant::now() < deadline, "no test logged:\n{}", server.stderr());
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn flow_bytes(log: &Value, flow: &str) -> u64 {
    log["flows"].as_array().unwrap().iter().find(|f| f["flow"] == flow).unwrap()["bytes"].as_u64().unwrap()
}

/// The bytes of the record of `flow`/`role` in a result, checking who measured it: this end's
/// legs are the client's, the peer's RES counts the server's.
fn record(r: &Value, flow: &str, role: &str) -> Option<u64> {
    r["streams"].as_array().unwrap().iter().find(|s| s["flow"] == flow && s["role"] == role).map(|s| {
        let by = if (flow == "up") == (role == "sender") { "client" } else { "server" };
        assert_eq!(s["measured_by"], by, "{flow} {role}");
        s["bytes"].as_u64().unwrap()
    })
}

fn start_server(ns: Option<&Netns>, port: u16) -> Server {
    let mut cmd = match ns {
        Some(n) => n.command(BIN),
        None => Command::new(BIN),
    };
    cmd.args(["server", "-p", "0", "--json", "--netio", "--netio-port", &port.to_string()]);
    Server::spawn(cmd, "netio: TCP test on", Duration::from_secs(10)).expect("netchar server --netio starts")
}

#[test]
fn tcp_client_against_netchars_netio_server() {
    let port = free_pair();
    let server = start_server(None, port);
    let (code, out, err) = run(
        None,
        &[
            "suite",
            "netio",
            "127.0.0.1",
            "--proto",
            "netio",
            "-p",
            &port.to_string(),
            "-b",
            "4k",
            "--netio-interval",
            "1",
            "--json",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let results: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let r = &results.as_array().unwrap()[0];
    assert_eq!(r["test"]["protocol"], "netio");
    assert!(r["test"]["title"].as_str().unwrap().starts_with("Packet size  4k bytes: "), "{}", r["test"]["title"]);
    let tx = record(r, "up", "sender").unwrap();
    let rx = record(r, "down", "receiver").unwrap();
    assert!(tx > 0 && rx > 0 && tx.is_multiple_of(4096) && rx.is_multiple_of(4096));
    let log = server_test_log(&server);
    assert_eq!(log["protocol"].as_str().unwrap_or("netio"), "netio");
    // The server counted every block the client wrote, plus the end marker.
    assert_eq!(flow_bytes(&log, "up"), tx + 4096, "server received == client sent + marker");
    // The client read every block the server wrote, its marker included.
    assert_eq!(flow_bytes(&log, "down"), rx, "client received == server sent");

    // The text output is netio's.
    let (code, out, err) = run(
        None,
        &[
            "suite",
            "netio",
            "127.0.0.1",
            "--proto",
            "netio",
            "-p",
            &port.to_string(),
            "-b",
            "1k",
            "--netio-interval",
            "1",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let line = out.lines().find(|l| l.starts_with("Packet size")).unwrap_or_else(|| panic!("{out}"));
    assert!(
        line.starts_with("Packet size  1k bytes:  ") && line.contains("Byte/s Tx,  ") && line.ends_with("Byte/s Rx."),
        "{line}"
    );
    assert!(out.lines().any(|l| l == "Done."), "{out}");
}

/// A sink like lwIP's contrib netio: accepts and discards, never sends.
fn sink() -> (u16, std::thread::JoinHandle<u64>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let t = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut buf = vec![0u8; 65536];
        let mut n = 0u64;
        while let Ok(k) = s.read(&mut buf) {
            if k == 0 {
                break;
            }
            n += k as u64;
        }
        n
    });
    (port, t)
}

#[test]
fn tx_only_and_rx_timeout_against_a_sink() {
    let (port, t) = sink();
    let (code, out, err) = run(
        None,
        &[
            "suite",
            "netio",
            "127.0.0.1",
            "--proto",
            "netio",
            "-p",
            &port.to_string(),
            "-b",
            "2k",
            "--netio-interval",
            "1",
            "--tx-only",
            "--json",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let results: Value = serde_json::from_str(&out).unwrap();
    let r = &results[0];
    let tx = record(r, "up", "sender").unwrap();
    assert!(record(r, "down", "receiver").is_none());
    // The sink got the C2S, the blocks, the marker and QUIT: nothing else.
    assert_eq!(t.join().unwrap(), 8 + tx + 2048 + 8);

    // Without --tx-only, Rx gives up after --rx-timeout and says so.
    let (port, t) = sink();
    let (code, out, err) = run(
        None,
        &[
            "suite",
            "netio",
            "127.0.0.1",
            "--proto",
            "netio",
            "-p",
            &port.to_string(),
            "-b",
            "2k",
            "--netio-interval",
            "1",
            "--rx-timeout",
            "1",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("Rx skipped"), "{out}");
    drop(t);
}

#[test]
fn udp_client_against_netchars_netio_server() {
    let Ok(link) = Link::create().map_err(|e| netns::skip_or_fail(&e)) else { return };
    let server = start_server(Some(&link.a), 18767);
    let host = link.a_ip.to_string();
    let (code, out, err) = run(
        Some(&link.b),
        &["suite", "netio", &host, "--proto", "netio", "-u", "-b", "1k", "--netio-interval", "1", "--json"],
    );
    assert_eq!(code, Some(0), "{err}");
    let results: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let r = &results[0];
    let sent = record(r, "up", "sender").unwrap();
    let got_by_server = record(r, "up", "receiver").expect("the server's RES count");
    let rx = record(r, "down", "receiver").unwrap();
    let server_sent = record(r, "down", "sender").expect("the server's RES count of what it sent");
    // The server counted what reached it (its clients send from the same port number as its
    // own UDP port: a rule against datagrams from our own ports must not drop them).
    assert!(got_by_server <= sent && got_by_server > 0 && rx <= server_sent && rx > 0, "{r}");
    let log = server_test_log(&server);
    assert_eq!(flow_bytes(&log, "up"), got_by_server, "the server's log == the count it sent in RES");
    assert_eq!(flow_bytes(&log, "down"), server_sent);
}

/// The server's UDP S2C phase runs through the data plane's sender: sends a firewall refuses
/// (an nft rule dropping the server's outgoing datagrams, so each send fails with EPERM) are
/// counted as `send_errors` in the server's log, never as datagrams sent, and RES says none
/// went out.
#[test]
fn refused_udp_sends_are_logged_as_send_errors() {
    let Ok(link) = Link::create().map_err(|e| netns::skip_or_fail(&e)) else { return };
    let a = &link.a;
    a.nft(&["add", "table", "inet", "netio_refuse"]).expect("nft table");
    a.nft(&["add", "chain", "inet", "netio_refuse", "out", "{ type filter hook output priority 0; }"]).expect("chain");
    a.nft(&["add", "rule", "inet", "netio_refuse", "out", "udp", "dport", "18768", "counter", "drop"]).expect("rule");
    let server = start_server(Some(a), 18767);
    let host = link.a_ip.to_string();
    let (_, out, err) = run(
        Some(&link.b),
        &["suite", "netio", &host, "--proto", "netio", "-u", "-b", "1k", "--netio-interval", "1", "--json"],
    );
    let results: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
    let r = &results[0];
    assert_eq!(record(r, "down", "sender"), Some(0), "RES counts no datagram sent: {r}");
    assert_eq!(record(r, "down", "receiver").unwrap_or(0), 0, "{r}");
    let log = server_test_log(&server);
    let down = log["flows"].as_array().unwrap().iter().find(|f| f["flow"] == "down").unwrap();
    assert_eq!(down["bytes"].as_u64(), Some(0), "{log}");
    let refused = down["send_errors"].as_u64().unwrap_or(0);
    let dropped = a.nft_counters("inet", "netio_refuse", "out").expect("counters")[0].0;
    assert!(refused > 0 && dropped > 0, "refused {refused}, nft dropped {dropped}: {log}");
}
