//! netio's two roles replayed in memory against sessions captured from the real netio.
//!
//! The transcripts in `golden/netio/` come from netio 1.34 (Kai Uwe Rommel's netio.c, the
//! public repository kai-uwe-rommel/netio at 52e83b6, built locally with `make linux`; its code
//! is not part of netchar), run as `netio -s` and `netio -t|-u` on one machine:
//! - `tcp_stock.txt`: `netio -t` (the stock table 1k..32k) through a relay that recorded both
//!   byte streams of the TCP connection (paced to 400 kB/s so that the recording stays small);
//! - `udp_stock.txt`: `netio -u` in a network namespace whose loopback was shaped to 40 Mbit/s,
//!   recorded with tcpdump: the control connection byte for byte, the datagrams by length and
//!   first byte.
//!
//! `reduce.py` (beside them) made them from the raw recordings: CONTROL messages verbatim in
//! hex, data blocks as runs of (size, count, first byte), the only byte netio reads.
//! Each transcript is replayed against netchar's server machine (the client's bytes in, the
//! server's events and answers out, compared with what the real server sent) and against
//! netchar's client machine (the real server's bytes in, the client's writes compared with what
//! the real client sent).

use netchar_wire::netio::{Client, ClientStep, Control, Server, ServerEvent, INTERVAL};
use proptest::prelude::*;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, PartialEq)]
enum Line {
    Ctl { c2s: bool, bytes: [u8; 8] },
    Blocks { c2s: bool, size: u32, count: u64, first: u8 },
    Dgrams { c2s: bool, len: u32, count: u64 },
}

fn parse(text: &str) -> Vec<Line> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let c2s = w[0] == "c2s";
            match w[1] {
                "ctl" => {
                    let mut bytes = [0u8; 8];
                    for (i, b) in bytes.iter_mut().enumerate() {
                        *b = u8::from_str_radix(&w[2][2 * i..2 * i + 2], 16).unwrap();
                    }
                    Line::Ctl { c2s, bytes }
                }
                "blocks" => Line::Blocks {
                    c2s,
                    size: w[2].parse().unwrap(),
                    count: w[3].parse().unwrap(),
                    first: u8::from_str_radix(w[4], 16).unwrap(),
                },
                "dgrams" => Line::Dgrams { c2s, len: w[2].parse().unwrap(), count: w[3].parse().unwrap() },
                other => panic!("unknown transcript line {other}"),
            }
        })
        .collect()
}

/// The bytes of a run of blocks: byte 0 as captured, the rest filler (netio's rand()).
fn expand(size: u32, count: u64, first: u8) -> Vec<u8> {
    let mut v = Vec::with_capacity(size as usize * count as usize);
    for i in 0..count {
        let mut b: Vec<u8> = (0..size).map(|j| (i as u32).wrapping_mul(31).wrapping_add(j) as u8 | 0x80).collect();
        b[0] = first;
        v.extend(b);
    }
    v
}

fn tcp() -> Vec<Line> {
    parse(include_str!("golden/netio/tcp_stock.txt"))
}

fn udp() -> Vec<Line> {
    parse(include_str!("golden/netio/udp_stock.txt"))
}

/// Feeds `data` in pieces of the given sizes (cycled).
fn feed_in_pieces(server: &mut Server, data: &[u8], pieces: &[usize]) {
    let mut at = 0;
    let mut i = 0;
    while at < data.len() {
        let n = pieces[i % pieces.len()].max(1).min(data.len() - at);
        server.handle_input(&data[at..at + n]).unwrap();
        at += n;
        i += 1;
    }
}

fn replay_tcp_server(pieces: &[usize]) {
    let lines = tcp();
    let mut server = Server::new(false);
    let mut expected = Vec::new();
    let mut size = 0;
    for line in &lines {
        match *line {
            Line::Ctl { c2s: true, bytes } => {
                feed_in_pieces(&mut server, &bytes, pieces);
                let (c, little) = Control::decode(&bytes);
                assert!(!little, "netio 1.34 sends big-endian");
                size = c.data;
            }
            Line::Blocks { c2s: true, size: s, count, first } => {
                assert_eq!(s, size);
                feed_in_pieces(&mut server, &expand(s, count, first), pieces);
                if first != 0 {
                    let total = expected_bytes(&lines, s);
                    expected.push(ServerEvent::Receive { size: s });
                    expected.push(ServerEvent::Received { size: s, bytes: total });
                }
            }
            Line::Blocks { c2s: false, first, .. } => {
                // The real server sent this run; the machine asked for exactly this.
                if first != 0 {
                    expected.push(ServerEvent::Send { size });
                    let got: Vec<_> = std::iter::from_fn(|| server.poll_event()).collect();
                    assert_eq!(got, expected);
                    expected.clear();
                    server.sent().unwrap();
                }
            }
            _ => panic!("not a TCP transcript line: {line:?}"),
        }
    }
    expected.push(ServerEvent::Quit);
    assert_eq!(std::iter::from_fn(|| server.poll_event()).collect::<Vec<_>>(), expected);
    assert!(server.is_closed());
    let mut out = Vec::new();
    server.poll_output(&mut out);
    assert!(out.is_empty(), "a TCP test connection carries no answers from the server");
}

/// All c2s bytes of the blocks of one size (zero runs and the marker).
fn expected_bytes(lines: &[Line], size: u32) -> u64 {
    lines
        .iter()
        .filter_map(|l| match *l {
            Line::Blocks { c2s: true, size: s, count, .. } if s == size => Some(u64::from(s) * count),
            _ => None,
        })
        .sum()
}

#[test]
fn tcp_transcript_against_the_server() {
    replay_tcp_server(&[usize::MAX]);
    replay_tcp_server(&[1, 7, 8, 1000, 3]);
}

#[test]
fn tcp_transcript_against_the_client() {
    let lines = tcp();
    let sizes: Vec<u32> = lines
        .iter()
        .filter_map(|l| match *l {
            Line::Ctl { c2s: true, bytes } => {
                let c = Control::decode(&bytes).0;
                (c.cmd == 1).then_some(c.data)
            }
            _ => None,
        })
        .collect();
    assert_eq!(sizes, netchar_wire::netio::SIZES, "the stock table");
    let t0 = Instant::now();
    let mut client = Client::new(&sizes, false, false, INTERVAL);
    // What the real client sent, as the machine should write it: CONTROL bytes verbatim, and
    // for each size the number of blocks before the marker.
    let mut real_ctl: Vec<[u8; 8]> = Vec::new();
    let mut real_tx: Vec<u64> = Vec::new();
    let mut server_runs: Vec<Vec<u8>> = Vec::new();
    let mut current = Vec::new();
    for line in &lines {
        match *line {
            Line::Ctl { c2s: true, bytes } => real_ctl.push(bytes),
            Line::Blocks { c2s: true, count, first: 0, .. } => real_tx.push(count),
            Line::Blocks { c2s: false, size, count, first } => {
                current.extend(expand(size, count, first));
                if first != 0 {
                    server_runs.push(std::mem::take(&mut current));
                }
            }
            _ => {}
        }
    }
    let mut written_ctl: Vec<[u8; 8]> = Vec::new();
    let (mut tx_i, mut rx_i) = (0, 0);
    let mut now = t0;
    for _ in 0..10_000 {
        match client.step(now) {
            ClientStep::Write(b) => {
                // Markers are whole blocks with byte 0 = 1; everything else is CONTROL.
                if b.len() > 8 && b[0] == 1 {
                    let size = sizes[tx_i - 1] as usize;
                    assert_eq!(b.len(), size + 8, "the marker block, then S2C");
                    written_ctl.push(b[b.len() - 8..].try_into().unwrap());
                } else {
                    written_ctl.push(b[..8].try_into().unwrap());
                }
            }
            ClientStep::Transmit { until, .. } => {
                now = until;
                client.transmitted(now, real_tx[tx_i]);
                tx_i += 1;
            }
            ClientStep::Receive { .. } => {
                let data = &server_runs[rx_i];
                now += Duration::from_millis(6100);
                let used = client.handle_input(now, data).unwrap();
                assert_eq!(used, data.len(), "the marker ends the server's run exactly");
                rx_i += 1;
            }
            ClientStep::Done => break,
            ClientStep::AwaitControl => panic!("TCP has no awaited controls"),
        }
    }
    assert_eq!(written_ctl, real_ctl, "the client's CONTROL messages are the real client's");
    assert_eq!(client.results.len(), 6);
    for (r, (&tx, run)) in client.results.iter().zip(real_tx.iter().zip(&server_runs)) {
        assert_eq!(r.tx.unwrap().bytes, tx * u64::from(r.size));
        assert_eq!(r.rx.unwrap().bytes, run.len() as u64);
        assert!(r.line().starts_with(&format!("Packet size {} bytes: ", netchar_wire::netio::packet_size(r.size))));
    }
}

#[test]
fn udp_transcript_against_the_server() {
    let lines = udp();
    let mut server = Server::new(true);
    let mut out = Vec::new();
    let mut pending: Option<ServerEvent> = None;
    for line in &lines {
        match *line {
            Line::Ctl { c2s: true, bytes } => {
                server.handle_input(&bytes).unwrap();
                pending = server.poll_event();
                if let Some(ServerEvent::Receive { .. }) = pending {
                    server.poll_output(&mut out);
                }
            }
            Line::Ctl { c2s: false, bytes } => {
                let c = Control::decode(&bytes).0;
                match pending.take() {
                    Some(ServerEvent::CountRequested) => server.udp_count(c.data).unwrap(),
                    Some(ServerEvent::Send { .. }) => server.udp_sent(c.data).unwrap(),
                    Some(ServerEvent::Receive { .. }) => {}
                    other => panic!("the real server answered {c:?} to {other:?}"),
                }
                server.poll_output(&mut out);
                assert_eq!(out, bytes, "the server's answer is the real server's");
                out.clear();
            }
            Line::Dgrams { .. } => {}
            Line::Blocks { .. } => panic!("no blocks in a UDP transcript"),
        }
    }
    assert_eq!(pending, Some(ServerEvent::Quit));
}

#[test]
fn udp_transcript_against_the_client() {
    let lines = udp();
    let real_c2s: Vec<[u8; 8]> = lines
        .iter()
        .filter_map(|l| match *l {
            Line::Ctl { c2s: true, bytes } => Some(bytes),
            _ => None,
        })
        .collect();
    let mut from_server = lines.iter().filter_map(|l| match *l {
        Line::Ctl { c2s: false, bytes } => Some(bytes),
        _ => None,
    });
    // The datagrams each way, in order: (client sent, server received as RES says).
    let runs: Vec<(bool, u64, u32)> = lines
        .iter()
        .filter_map(|l| match *l {
            Line::Dgrams { c2s, len, count } => Some((c2s, count, len)),
            _ => None,
        })
        .collect();
    let sizes = netchar_wire::netio::SIZES;
    let mut client = Client::new(&sizes, true, false, INTERVAL);
    let mut written = Vec::new();
    let mut now = Instant::now();
    let mut index = 0;
    for _ in 0..1000 {
        match client.step(now) {
            ClientStep::Write(b) => written.push(<[u8; 8]>::try_from(&b[..]).unwrap()),
            ClientStep::Transmit { until, size } => {
                let sent: u64 = runs.iter().filter(|r| r.0 && r.2 == size).map(|r| r.1).sum();
                now = until;
                client.transmitted(now, sent);
            }
            ClientStep::AwaitControl => {
                let bytes = from_server.next().expect("the real server answered");
                let size = sizes[index.min(5)];
                let c = Control::decode(&bytes).0;
                if c.cmd == 3 && written.last().map(|w| Control::decode(w).0.cmd) == Some(2) {
                    let got: u64 = runs.iter().filter(|r| !r.0 && r.2 == size).map(|r| r.1).sum();
                    client.udp_received(got, got * u64::from(size));
                    index += 1;
                }
                now += Duration::from_millis(10);
                assert_eq!(client.handle_input(now, &bytes).unwrap(), 8);
            }
            ClientStep::Done => break,
            ClientStep::Receive { .. } => panic!("UDP does not read blocks"),
        }
    }
    assert_eq!(written, real_c2s, "the client's CONTROL messages are the real client's, RES's stale data included");
    assert_eq!(client.results.len(), 6);
    for r in &client.results {
        let tx = r.tx.unwrap();
        assert!(tx.sent.is_some() && tx.received.is_some());
        assert!(r.line().contains("%) Tx, ") && r.line().ends_with("%) Rx."), "{}", r.line());
    }
}

proptest! {
    #[test]
    fn control_round_trips(cmd in 0u32..4, data in any::<u32>(), little in any::<bool>()) {
        let c = Control { cmd, data };
        let bytes = c.encode_in(little);
        prop_assert_eq!(Control::decode_in(&bytes, little), c);
        let (d, l) = Control::decode(&bytes);
        // Little-endian is recognised when the big-endian command is not one of the four:
        // always but for QUIT (0 either way; a server keeps the order it saw first).
        prop_assert_eq!(l, little && cmd != 0);
        if !l && little {
            prop_assert_eq!(d.cmd, 0);
        } else {
            prop_assert_eq!(d, c);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_a_server(udp in any::<bool>(), chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 0..30)) {
        let mut s = Server::new(udp);
        for c in &chunks {
            if s.handle_input(c).is_err() {
                break;
            }
            while let Some(e) = s.poll_event() {
                let _ = match e {
                    ServerEvent::Send { .. } if udp => s.udp_sent(1),
                    ServerEvent::Send { .. } => s.sent(),
                    ServerEvent::CountRequested => s.udp_count(2),
                    _ => Ok(()),
                };
            }
            let mut out = Vec::new();
            s.poll_output(&mut out);
            prop_assert!(out.len() <= 8 * 200, "answers are bounded by the input");
        }
        let _ = s.handle_eof();
    }

    #[test]
    fn arbitrary_bytes_never_panic_a_client(udp in any::<bool>(), data in proptest::collection::vec(any::<u8>(), 0..3000)) {
        let mut c = Client::new(&[100, 1000], udp, false, INTERVAL);
        let now = Instant::now();
        let mut at = 0;
        for _ in 0..100 {
            match c.step(now) {
                ClientStep::Transmit { until, .. } => c.transmitted(until, 3),
                ClientStep::Receive { .. } | ClientStep::AwaitControl => {
                    if at >= data.len() { break; }
                    match c.handle_input(now, &data[at..]) {
                        Ok(n) => at += n.max(1),
                        Err(_) => break,
                    }
                }
                ClientStep::Write(_) => {}
                ClientStep::Done => break,
            }
        }
    }

    #[test]
    fn the_block_reader_does_not_depend_on_how_the_stream_is_cut(size in 1u32..3000, zeros in 0u64..20, cuts in proptest::collection::vec(1usize..5000, 1..20)) {
        let data = expand(size, zeros, 0).into_iter().chain(expand(size, 1, 1)).chain([7u8; 5]).collect::<Vec<_>>();
        let mut r = netchar_wire::netio::BlockReader::new(size);
        let mut at = 0;
        let mut i = 0;
        while at < data.len() && !r.done() {
            let n = cuts[i % cuts.len()].min(data.len() - at);
            at += r.feed(&data[at..at + n]);
            i += 1;
        }
        prop_assert!(r.done());
        prop_assert_eq!(r.bytes, u64::from(size) * (zeros + 1));
        prop_assert_eq!(at as u64, r.bytes);
    }
}
