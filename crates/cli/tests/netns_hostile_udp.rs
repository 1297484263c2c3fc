//! Forged UDP datagrams against a running `netchar server`, sent from the client's own address
//! and port (a raw socket writes the UDP header itself), beside the genuine test stream.
//!
//! The attack: datagrams with the test's stream id and far-ahead sequence numbers, a few at a
//! time and close together (so they look like a sender that jumped ahead), plus 2^64 − 1. It
//! used to count most genuine datagrams as out of order and received more than was sent. The
//! genuine figures must stay exact, and the forged datagrams must be counted as foreign.
//!
//! Needs root (raw sockets); otherwise it prints "skipping netns test: <reason>" and passes,
//! unless NETCHAR_REQUIRE_ALL=1, in which case it fails.
//!
//! Run: `cargo test -p netchar --test netns_hostile_udp -- --nocapture`

#[path = "support/loopback.rs"]
mod common;
#[path = "support/netns.rs"]
mod netns;

use common::*;
use netchar_wire::datagram::DatagramHeader;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

/// Payload bytes of the genuine and the forged datagrams.
const PAYLOAD: usize = 1000;
/// Stream id of a one-stream upload.
const STREAM: u32 = 1;

/// The remote port of the socket in /proc/net/udp bound to 127.0.0.1:`local` and connected:
/// the server's stream socket, connected to the client's data socket.
fn connected_peer_port(local: u16) -> Option<u16> {
    let text = std::fs::read_to_string("/proc/net/udp").ok()?;
    let want = format!("0100007F:{local:04X}");
    text.lines().skip(1).find_map(|line| {
        let cols: Vec<&str> = line.split_whitespace().collect();
        let (local_addr, remote) = (*cols.get(1)?, *cols.get(2)?);
        let port = remote.strip_prefix("0100007F:")?;
        (local_addr == want).then(|| u16::from_str_radix(port, 16).ok()).flatten()
    })
}

/// A UDP datagram (header with checksum 0, "none", which IPv4 allows) from `src` to `dst`
/// carrying a netchar data header for `seq`.
fn forged(src: u16, dst: u16, seq: u64) -> Vec<u8> {
    let mut d = vec![0u8; 8 + PAYLOAD];
    d[0..2].copy_from_slice(&src.to_be_bytes());
    d[2..4].copy_from_slice(&dst.to_be_bytes());
    d[4..6].copy_from_slice(&((8 + PAYLOAD) as u16).to_be_bytes());
    DatagramHeader { flags: 0, stream_id: STREAM, sequence: seq, sent_ns: 0 }.emit(&mut d[8..]);
    d
}

#[test]
fn forged_far_ahead_datagrams_from_the_clients_address_leave_the_figures_exact() {
    let raw = match Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::UDP)) {
        Ok(s) => s,
        Err(e) => {
            netns::skip_or_fail(&format!("cannot open a raw socket (needs root): {e}"));
            return;
        }
    };
    let s = Server::start(&[]);
    let client = std::thread::spawn({
        let port = s.port.to_string();
        let len = PAYLOAD.to_string();
        move || netchar(&["udp", "127.0.0.1", "-p", &port, "-b", "40M", "-l", &len, "-t", "3", "-i", "0", "--json"])
    });
    let deadline = Instant::now() + Duration::from_secs(5);
    let client_port = loop {
        if let Some(p) = connected_peer_port(s.port) {
            break p;
        }
        assert!(Instant::now() < deadline, "the client's data stream never appeared in /proc/net/udp");
        std::thread::sleep(Duration::from_millis(5));
    };
    let server = SockAddr::from(SocketAddr::from((Ipv4Addr::LOCALHOST, s.port)));
    let mut forged_sent = 0u64;
    let until = Instant::now() + Duration::from_millis(2500);
    let mut round = 0u64;
    while Instant::now() < until {
        // Eight close together far ahead, like a sender that lost a billion datagrams; one
        // more far beyond; and the largest number, which used to wrap the high-water mark.
        let base = (1 << 40) + round * 8;
        for seq in (base..base + 8).chain([u64::MAX / 3 + round, u64::MAX]) {
            raw.send_to(&forged(client_port, s.port, seq), &server).expect("send a forged datagram");
            forged_sent += 1;
        }
        round += 1;
        std::thread::sleep(Duration::from_millis(2));
    }
    let run = client.join().unwrap();
    assert_eq!(run.code, 0, "the client failed beside the forged datagrams: {}", run.stderr);
    let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let up = &v["summary"]["up"];
    let (tx, rx) = (&up["sender"], &up["receiver"]);
    eprintln!("{forged_sent} forged datagrams from port {client_port}; {up}");
    assert_eq!(u(&tx["packets"]), u(&rx["packets"]) + u(&rx["lost"]), "sent = received + lost: {up}");
    assert!(u(&rx["packets"]) <= u(&tx["packets"]), "received more than was sent: {up}");
    assert_eq!(u(&rx["out_of_order"]), 0, "genuine datagrams counted as out of order: {up}");
    assert_eq!(u(&rx["duplicates"]), 0, "{up}");
    // Every forged datagram that reached the socket (its queue may drop some) is foreign.
    let reached = forged_sent.saturating_sub(u(&rx["kernel_drops"]));
    assert!(u(&rx["foreign"]) >= reached, "{} foreign of {forged_sent} forged: {up}", u(&rx["foreign"]));
}
