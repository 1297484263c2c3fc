//! `--verify` end to end: a data plane whose receivers compare what they read with the test's
//! payload counts exactly the bytes and datagrams changed on the way, and an rr requester
//! those of an echo's answers. These drive whole planes, so they live here, beside the
//! workers, rather than in integrity.rs: the planes stand on the datagram formats, and the
//! formats on the integrity checks.

use super::{DataPlane, DataPlaneConfig, DataSocket, DataStream, DatagramFormatKind, StreamOptions};
use netchar_model::{EndCondition, Endpoint, Flow, PayloadKind, PayloadSpec, Role, StreamRecord, TestSpec};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

fn plane(spec: &TestSpec, role: Role, socket: DataSocket, options: StreamOptions) -> DataPlane {
    let cfg = DataPlaneConfig {
        spec: spec.clone(),
        datagrams: DatagramFormatKind::Native,
        endpoint: if role == Role::Sender { Endpoint::Client } else { Endpoint::Server },
        cpu: None,
        interleave_senders: false,
    };
    DataPlane::start_with(cfg, vec![DataStream { id: 1, flow: Flow::Up, role, socket }], None, Instant::now(), options)
        .unwrap()
}

fn finished(p: DataPlane) -> StreamRecord {
    let t0 = Instant::now();
    while !p.all_done() {
        assert!(t0.elapsed() < Duration::from_secs(60), "the stream never ended");
        std::thread::sleep(Duration::from_millis(5));
    }
    p.join().remove(0)
}

fn random_verified(mut spec: TestSpec, end: EndCondition) -> TestSpec {
    spec.payload = Some(PayloadSpec { kind: PayloadKind::Random, seed: 99 });
    spec.verify = true;
    spec.end = end;
    spec.interval_seconds = 0.0;
    spec
}

/// A TCP stream through a relay that flips one byte at every 100,000th offset: the
/// receiver counts exactly those, and finds the first where it is.
#[test]
fn a_tcp_receiver_counts_exactly_the_bytes_changed_on_the_way() {
    let total: u64 = 3_000_000;
    let spec = random_verified(TestSpec::tcp_default(), EndCondition::Bytes(total));
    let (to_relay, to_receiver) =
        (TcpListener::bind("127.0.0.1:0").unwrap(), TcpListener::bind("127.0.0.1:0").unwrap());
    let sender_socket = TcpStream::connect(to_relay.local_addr().unwrap()).unwrap();
    let relay_out = TcpStream::connect(to_receiver.local_addr().unwrap()).unwrap();
    let (receiver_socket, _) = to_receiver.accept().unwrap();
    let (mut relay_in, _) = to_relay.accept().unwrap();
    let relay = std::thread::spawn(move || {
        let (mut out, mut buf, mut at, mut flipped) = (relay_out, vec![0u8; 65536], 0u64, 0u64);
        loop {
            let n = relay_in.read(&mut buf).unwrap();
            if n == 0 {
                return flipped;
            }
            for (i, b) in buf[..n].iter_mut().enumerate() {
                if (at + i as u64) % 100_000 == 77 {
                    *b ^= 0x5a;
                    flipped += 1;
                }
            }
            at += n as u64;
            out.write_all(&buf[..n]).unwrap();
        }
    });
    let receiver = plane(&spec, Role::Receiver, DataSocket::Tcp(receiver_socket), StreamOptions::default());
    let sender = plane(&spec, Role::Sender, DataSocket::Tcp(sender_socket), StreamOptions::default());
    assert_eq!(finished(sender).bytes, total);
    let flipped = relay.join().unwrap();
    let got = finished(receiver);
    let v = got.verify.expect("--verify record");
    assert_eq!(flipped, 30);
    assert_eq!((got.bytes, v.checked_bytes, v.corrupted_bytes), (total, total, flipped), "{v:?}");
    assert_eq!(v.first_bad_offset, Some(77));
    assert!(v.first_bad_seconds.is_some() && v.corrupted_datagrams.is_none());
}

/// UDP through a relay that changes one payload byte of every 7th datagram (and passes the
/// rest): the receiver's corrupted datagrams are exactly those, and so are its bytes.
#[test]
fn a_udp_receiver_counts_exactly_the_datagrams_changed_on_the_way() {
    let mut spec = random_verified(TestSpec::udp_default(), EndCondition::Bytes(1000 * 700));
    spec.block_bytes = 1000;
    spec.udp.as_mut().unwrap().rate = netchar_model::UdpRate::PacketsPerSecond(2_000);
    let bind = || UdpSocket::bind("127.0.0.1:0").unwrap();
    let (sender_socket, relay_in, relay_out, receiver_socket) = (bind(), bind(), bind(), bind());
    sender_socket.connect(relay_in.local_addr().unwrap()).unwrap();
    relay_out.connect(receiver_socket.local_addr().unwrap()).unwrap();
    receiver_socket.connect(relay_out.local_addr().unwrap()).unwrap();
    // On a busy machine the relay or the receiver can be off the CPU for longer than their
    // sockets' default buffers last at 2000 datagrams/s, and the kernel would drop what the
    // test means to count: both buffers hold the whole test (700 kB), and the relay ends on
    // the count it was sent, not on a pause.
    for s in [&relay_in, &receiver_socket] {
        socket2::SockRef::from(s).set_recv_buffer_size(2 << 20).unwrap();
    }
    relay_in.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let relay = std::thread::spawn(move || {
        let (mut buf, mut n_seen, mut changed) = (vec![0u8; 2048], 0u64, 0u64);
        while n_seen < 700 {
            let Ok(n) = relay_in.recv(&mut buf) else { break };
            n_seen += 1;
            if n_seen.is_multiple_of(7) {
                buf[500] = buf[500].wrapping_add(1);
                changed += 1;
            }
            relay_out.send(&buf[..n]).unwrap();
        }
        (n_seen, changed)
    });
    let receiver = plane(&spec, Role::Receiver, DataSocket::Udp(receiver_socket), StreamOptions::default());
    let sender = plane(&spec, Role::Sender, DataSocket::Udp(sender_socket), StreamOptions::default());
    let totals = {
        let t0 = Instant::now();
        loop {
            if let Some(t) = sender.senders_done() {
                break t;
            }
            assert!(t0.elapsed() < Duration::from_secs(30), "the sender never ended");
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    // Every datagram is in the receiver's buffer once the relay is done; the grace only
    // bounds a receiver that is off the CPU, it ends at the 700th datagram.
    let (relayed, changed) = relay.join().unwrap();
    assert_eq!(relayed, 700, "the relay got {relayed} of the 700 datagrams sent");
    receiver.peer_senders_done(&totals, Duration::from_secs(5));
    assert_eq!(finished(sender).udp_sent.unwrap().packets, 700);
    let got = finished(receiver);
    let (v, r) = (got.verify.expect("--verify record"), got.udp_received.unwrap());
    assert_eq!((r.packets, r.lost, changed), (700, 0, 100), "{r:?}");
    assert_eq!((v.checked_datagrams, v.corrupted_datagrams, v.corrupted_bytes), (Some(700), Some(100), 100));
    assert_eq!(v.checked_bytes, 700 * (1000 - 24));
    assert_eq!((v.first_bad_datagram, v.first_bad_offset), (Some(6), Some(500)), "{v:?}");
}

/// An echo peer that returns every 5th request changed: the requester compares what came
/// back with what it sent, and counts exactly those.
#[test]
fn an_rr_requester_compares_an_echoes_answers_with_its_requests() {
    let mut spec = random_verified(TestSpec::rr_default(), EndCondition::Bytes(200));
    spec.rr =
        Some(netchar_model::RrOptions { udp: true, request_bytes: 300, response_bytes: 300, ..Default::default() });
    let (client, echo) = (UdpSocket::bind("127.0.0.1:0").unwrap(), UdpSocket::bind("127.0.0.1:0").unwrap());
    client.connect(echo.local_addr().unwrap()).unwrap();
    echo.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    let echoing = std::thread::spawn(move || {
        let (mut buf, mut n_seen) = (vec![0u8; 2048], 0u64);
        while let Ok((n, from)) = echo.recv_from(&mut buf) {
            n_seen += 1;
            if n_seen.is_multiple_of(5) {
                buf[n - 1] ^= 1;
                buf[n - 2] ^= 1;
            }
            echo.send_to(&buf[..n], from).unwrap();
        }
    });
    let echoed = StreamOptions { echoed: true, ..StreamOptions::default() };
    let got = finished(plane(&spec, Role::Sender, DataSocket::Udp(client), echoed));
    echoing.join().unwrap();
    let v = got.verify.expect("--verify record");
    assert_eq!(got.rr.unwrap().transactions, 200);
    assert_eq!((v.checked_datagrams, v.corrupted_datagrams, v.corrupted_bytes), (Some(200), Some(40), 80), "{v:?}");
    assert_eq!((v.first_bad_datagram, v.first_bad_offset), (Some(4), Some(298)), "{v:?}");
}
