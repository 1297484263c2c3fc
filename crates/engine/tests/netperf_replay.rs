//! The netperf adapter (crates/engine/src/peers/netperf.rs) replayed against the golden
//! transcripts of netperf 2.7.1 and netserver 2.7.1 (crates/wire/tests/fixtures/netperf/,
//! captured from the real programs): the real netserver's response and results drive netchar's
//! client adapter, whose records of the server's end must be what the stock netperf printed
//! from the same results (`-k` keyval); the real netperf's request drives the server adapter's
//! mapping to a netchar test.

use netchar_engine::control::{ClientControl, ControlEvent, Transport};
use netchar_engine::peers::netperf::{to_spec, NetperfControl};
use netchar_model::{Direction, EndCondition, Role, StreamRecord, StreamTotal, TestKind, TestSpec, UdpRate};
use netchar_wire::netperf::server::{Event, Server};
use netchar_wire::netperf::{Family, MESSAGE_LEN};
use std::collections::HashMap;
use std::time::Instant;

/// A keyval capture: the control messages (true: netperf sent it) and netperf's `KEY=value`
/// lines.
struct Capture {
    messages: Vec<(bool, Vec<u8>)>,
    printed: HashMap<String, String>,
}

fn unhex(s: &str) -> Vec<u8> {
    let (hex, zeros) = s.split_once("+0*").map_or((s, 0), |(h, z)| (h, z.parse::<usize>().unwrap()));
    let mut b: Vec<u8> = (0..hex.len() / 2).map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap()).collect();
    b.resize(b.len() + zeros, 0);
    b
}

fn capture(name: &str) -> Capture {
    let path = format!("{}/../wire/tests/fixtures/netperf/{name}_keyval.txt", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut c = Capture { messages: Vec::new(), printed: HashMap::new() };
    for line in text.lines() {
        if let Some((k, v)) = line.strip_prefix("#| ").and_then(|l| l.split_once('=')) {
            c.printed.insert(k.to_string(), v.to_string());
        } else if let Some(h) = line.strip_prefix("> ") {
            c.messages.push((true, unhex(h)));
        } else if let Some(h) = line.strip_prefix("< ") {
            c.messages.push((false, unhex(h)));
        }
    }
    assert!(c.messages.iter().all(|(_, m)| m.len() == MESSAGE_LEN), "{name}");
    c
}

impl Capture {
    fn number(&self, key: &str) -> i64 {
        self.printed[key].parse().unwrap_or_else(|_| panic!("{key}={}", self.printed[key]))
    }
}

/// netchar's test for each capture's netperf command line.
fn spec_for(name: &str) -> TestSpec {
    let mut spec = match name {
        "udp_stream" => TestSpec::udp_default(),
        "tcp_rr" | "udp_rr" | "tcp_crr" => TestSpec::rr_default(),
        _ => TestSpec::tcp_default(),
    };
    spec.end = EndCondition::Seconds(1.0);
    match name {
        "tcp_maerts" => spec.direction = Direction::Down,
        "udp_stream" => spec.block_bytes = 1024,
        "udp_rr" => spec.rr.as_mut().unwrap().udp = true,
        "tcp_crr" => spec.rr.as_mut().unwrap().connect_per_transaction = true,
        _ => {}
    }
    spec
}

/// Replays netserver's answers through the client adapter: the data port it admits the test
/// with, and the server's records it reports.
fn replay_client(name: &str, c: &Capture) -> (Transport, Vec<StreamRecord>) {
    let now = Instant::now();
    let spec = spec_for(name);
    let mut control = NetperfControl::new(now, &spec, Family::V4).unwrap();
    let mut out = Vec::new();
    control.poll_output_on(0, &mut out);
    assert_eq!(out.len(), MESSAGE_LEN, "{name}: one request");
    let (mut transport, mut records) = (None, None);
    for (_, m) in c.messages.iter().filter(|(from_netperf, _)| !from_netperf) {
        control.handle_input_on(0, now, m).unwrap();
        if transport.is_some() && records.is_none() {
            // This end's sender finished (the UDP loss is settled on its count).
            let packets = if name == "udp_stream" { c.number("LOCAL_BYTES_SENT") as u64 / 1024 } else { 0 };
            control.local_senders_done(now, vec![StreamTotal { id: 1, bytes: 0, packets }]);
        }
        while let Some(ev) = control.poll_event() {
            match ev {
                ControlEvent::Admitted { mut streams, .. } => transport = Some(streams.remove(0).transport),
                ControlEvent::PeerReport { streams, .. } => records = Some(streams),
                _ => {}
            }
        }
    }
    assert!(control.is_done(), "{name}");
    (
        transport.unwrap_or_else(|| panic!("{name}: not admitted")),
        records.unwrap_or_else(|| panic!("{name}: no report")),
    )
}

#[test]
fn netservers_results_become_the_records_netperf_printed_them_as() {
    for name in ["tcp_stream", "tcp_maerts", "udp_stream", "tcp_rr", "udp_rr", "tcp_crr"] {
        let c = capture(name);
        let (transport, records) = replay_client(name, &c);
        match (name, transport) {
            ("tcp_crr", Transport::PerTransaction { .. })
            | ("udp_stream" | "udp_rr", Transport::UdpToPort { .. })
            | ("tcp_stream" | "tcp_maerts" | "tcp_rr", Transport::TcpToPort { .. }) => {}
            (name, _) => panic!("{name}: the stream's transport"),
        }
        let r = &records[0];
        let (sent, received) = (c.number("REMOTE_BYTES_SENT") as u64, c.number("REMOTE_BYTES_RECVD") as u64);
        if name == "tcp_maerts" {
            assert_eq!((r.role, r.bytes), (Role::Sender, sent), "{name}");
        } else {
            assert_eq!((r.role, r.bytes), (Role::Receiver, received), "{name}");
        }
        let retrans = c.number("REMOTE_TRANSPORT_RETRANS");
        assert_eq!(r.retransmits, u64::try_from(retrans).ok(), "{name}");
        let calls = c.number("REMOTE_RECV_CALLS") as u64;
        match name {
            "udp_stream" => {
                let u = r.udp_received.as_ref().unwrap();
                let sent_datagrams = c.number("LOCAL_BYTES_SENT") as u64 / 1024;
                assert_eq!((u.packets, u.lost), (calls, sent_datagrams - calls), "{name}");
            }
            // One request read per transaction: netserver's receive calls are its transactions.
            "tcp_rr" | "udp_rr" | "tcp_crr" => assert_eq!(r.rr.as_ref().unwrap().transactions, calls, "{name}"),
            _ => {}
        }
    }
}

#[test]
fn netperfs_requests_map_to_the_tests_it_asked_for() {
    let now = Instant::now();
    for (name, kind, direction) in [
        ("tcp_stream", TestKind::Tcp, Direction::Up),
        ("tcp_maerts", TestKind::Tcp, Direction::Down),
        ("udp_stream", TestKind::Udp, Direction::Up),
        ("tcp_rr", TestKind::Rr, Direction::Up),
        ("udp_rr", TestKind::Rr, Direction::Up),
        ("tcp_crr", TestKind::Rr, Direction::Up),
    ] {
        let c = capture(name);
        let mut server = Server::new(now);
        server.handle_input(now, &c.messages[0].1).unwrap();
        let Some(Event::Test(req)) = server.poll_event() else { panic!("{name}: no test") };
        let spec = to_spec(&req).unwrap();
        assert_eq!((spec.kind, spec.direction, spec.end), (kind, direction, EndCondition::Seconds(1.0)), "{name}");
        let rr = spec.rr.as_ref();
        match name {
            // `-S 65536`: netserver's buffers.
            "tcp_stream" => assert_eq!(spec.tcp.window_bytes, Some(65536)),
            // `-m ,1024`: netserver sends 1024 bytes at a time.
            "tcp_maerts" => assert_eq!(spec.block_bytes, 1024),
            "udp_stream" => assert_eq!(spec.udp.as_ref().unwrap().rate, UdpRate::Unlimited),
            "udp_rr" => assert_eq!(rr.map(|r| (r.udp, r.request_bytes, r.response_bytes)), Some((true, 32, 64))),
            "tcp_crr" => {
                assert_eq!(
                    rr.map(|r| (r.connect_per_transaction, r.request_bytes, r.response_bytes)),
                    Some((true, 16, 32))
                )
            }
            _ => assert_eq!(rr.map(|r| (r.udp, r.connect_per_transaction)), Some((false, false))),
        }
    }
}
