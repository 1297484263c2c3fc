//! nc_test records: round trips for every field value, and arbitrary bytes into every decoder
//! and both roles' state machines (no panic; what they hold stays bounded).

use netchar_wire::nc_test::*;
use proptest::collection::vec;
use proptest::prelude::*;
use std::time::{Duration, Instant};

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn request_round_trips(v in any::<[u32; 7]>()) {
        let r = Request { code: v[0], seq: v[1], nbufs: v[2], buflen: v[3], slave_port: v[4], master_port: v[5], timeout: v[6] };
        prop_assert_eq!(Request::decode(&r.encode()), Ok(r));
    }

    #[test]
    fn reply_round_trips(v in any::<[u32; 6]>()) {
        let r = Reply { response: v[0], seq: v[1], reason: v[2], elapsed_ticks: v[3], count_hi: v[4], count_lo: v[5] };
        prop_assert_eq!(Reply::decode(&r.encode()), Ok(r));
        prop_assert_eq!(r.idle_count() >> 32, u64::from(v[4]));
    }

    #[test]
    fn data_and_results_round_trip(seq in any::<u32>(), len in any::<u32>(), a in any::<u32>(), b in any::<u32>(), buflen in 0u32..2048) {
        let h = DataHeader { seq, len };
        prop_assert_eq!(DataHeader::decode(&h.encode()), Ok(h));
        let r = Results { seq, nsent: a, nrecvd: b };
        prop_assert_eq!(Results::decode(&r.encode()), Ok(r));
        let buf = data_buffer(seq, buflen);
        prop_assert_eq!(buf.len(), buflen as usize + DATA_HEADER_LEN);
        prop_assert_eq!(DataHeader::decode(&buf), Ok(DataHeader { seq, len: buflen + 16 }));
    }

    #[test]
    fn decoders_take_arbitrary_bytes(b in vec(any::<u8>(), 0..64)) {
        let _ = Request::decode(&b);
        let _ = Reply::decode(&b);
        let _ = DataHeader::decode(&b);
        let _ = Results::decode(&b);
        let _ = Kind::from_code(b.len() as u32);
    }

    /// The slave answers any datagram without panicking; what it accepts is bounded, and a
    /// test it accepts runs to its end on arbitrary input.
    #[test]
    fn slave_takes_arbitrary_requests_and_data(req in vec(any::<u8>(), 0..40), data in vec(vec(any::<u8>(), 0..40), 0..20), timeouts in vec(any::<bool>(), 0..20)) {
        let slave = Slave { max_nbufs: 50, ..Slave::default() };
        if let Some(d) = slave.handle(&req) {
            prop_assert_eq!(d.reply.seq, Request::decode(&req).unwrap().seq);
            if let SlaveAction::Test(r) = d.action {
                prop_assert!(r.buflen <= MAX_BUFLEN && r.nbufs <= 50);
                let mut t = SlaveTest::new(r).unwrap();
                let mut inputs = data.iter().zip(timeouts.iter().cycle());
                let mut steps = 0;
                loop {
                    steps += 1;
                    prop_assert!(steps < 1000);
                    match t.next_step() {
                        Step::Recv { len, .. } => {
                            prop_assert!(len <= MAX_BUFLEN as usize + DATA_HEADER_LEN);
                            match inputs.next() {
                                Some((_, true)) | None => t.received(None),
                                Some((b, false)) => t.received(Some(b)),
                            }
                        }
                        Step::Send(b) => prop_assert!(b.len() <= MAX_BUFLEN as usize + DATA_HEADER_LEN),
                        Step::Done => break,
                        _ => {}
                    }
                }
            }
        }
    }

    /// The master's suite and test loops take arbitrary replies and data without panicking and
    /// always end.
    #[test]
    fn master_takes_arbitrary_replies_and_data(replies in vec(prop::option::of(vec(any::<u8>(), 0..48)), 0..60), data in vec(prop::option::of(vec(any::<u8>(), 0..40)), 0..60), nc6 in any::<bool>()) {
        let seq = if nc6 { Sequence::Nc6 { tcp: true, udp: true, slave_loads: true, master_loads: true } } else { Sequence::Nc };
        let mut suite = MasterSuite::new(seq);
        let mut replies = replies.into_iter();
        let mut data = data.into_iter().cycle();
        let mut now = Instant::now();
        let mut steps = 0u32;
        loop {
            steps += 1;
            prop_assert!(steps < 200);
            match suite.next_step() {
                SuiteStep::Done => break,
                SuiteStep::Request(_) => {
                    let r = replies.next().unwrap_or(None);
                    let (_, run) = suite.reply(r.as_deref());
                    if let Some(SuiteStep::RunTest(mut t)) = run {
                        let mut n = 0u32;
                        loop {
                            n += 1;
                            prop_assert!(n < 20_000);
                            now += Duration::from_millis(1);
                            match t.next_step(now) {
                                Step::Recv { .. } => {
                                    let d = data.next().unwrap_or(None);
                                    t.received(d.as_deref(), now);
                                }
                                Step::Done => break,
                                _ => {}
                            }
                        }
                        suite.test_done(Some((*t).into_report()));
                    }
                }
                _ => {}
            }
        }
    }
}

#[test]
fn stock_slave_nak_and_lp64_are_recognised() {
    let lp64 = [0u8; REPLY_LEN_LP64];
    assert_eq!(Reply::decode(&lp64), Err(NcError::Lp64));
    let host = Slave { load: false, idle: false, ..Slave::default() };
    let d = host.handle(&Request::new(Kind::SetLoad, 2, 10, 0).encode()).unwrap();
    assert!(!d.reply.is_ack());
    let d = Slave::default().handle(&Request::new(Kind::SetLoad, 2, 10, 0).encode()).unwrap();
    assert_eq!(d.action, SlaveAction::SetLoad(10));
    // A request for another data port is refused: the slave serves its own.
    let mut r = Request::new(Kind::UdpEcho, 3, 10, 1024);
    r.slave_port = 9999;
    assert_eq!(Slave::default().handle(&r.encode()).unwrap().reply.reason, NAK_BAD_REQUEST);
    // UDP_SEND is capped (a forged request must not buy megabytes towards a victim); the
    // stock master's 640x1024 is well inside, and echo (1:1) is not capped.
    let send = |n: u32, len: u32| Slave::default().handle(&Request::new(Kind::UdpSend, 4, n, len).encode()).unwrap();
    assert!(send(640, 1024).reply.is_ack());
    assert_eq!(send(100_000, 1024).reply.reason, NAK_BAD_REQUEST);
    let echo = Slave::default().handle(&Request::new(Kind::UdpEcho, 4, 100_000, 1024).encode()).unwrap();
    assert!(echo.reply.is_ack());
}

#[test]
fn result_line_matches_the_stock_format() {
    let l = result_line("UDP echo", 1280, 1024, Duration::from_millis(199), 0, 0);
    assert_eq!(l, "UDP echo - 1280 bufs of 1024 bytes in 0.19 seconds - 6736.84 KB/S - 55.1882 Mbit/S (M = 10^6)");
    let l = result_line("UDP send", 633, 1024, Duration::from_millis(95), 3, 2);
    assert_eq!(l, "UDP send - 633 bufs of 1024 bytes in 0.09 seconds - 7033.33 KB/S - 57.6171 Mbit/S (M = 10^6), 3 lost, 2 out of sequence");
}

fn drive(t: &mut MasterTest, mut answer: impl FnMut(usize) -> Option<Vec<u8>>) -> (u32, u32) {
    let mut now = Instant::now();
    let (mut sends, mut recvs) = (0, 0);
    loop {
        now += Duration::from_millis(1);
        match t.next_step(now) {
            Step::Send(_) => sends += 1,
            Step::Recv { len, .. } => {
                let a = answer(len);
                recvs += 1;
                t.received(a.as_deref(), now);
            }
            Step::Done => return (sends, recvs),
            _ => {}
        }
    }
}

/// A silent slave (nc6_test_slave's UDP over IPv6 sends to a mangled address): the master
/// gives up after MAX_ERRORS+1 timeouts in a row instead of waiting 3 s for each of 640.
#[test]
fn master_gives_up_on_a_silent_slave() {
    let mut t = MasterTest::new(Kind::UdpEcho, 2, 640, 1024, Pause::default());
    let (sends, recvs) = drive(&mut t, |_| None);
    assert_eq!(sends, MAX_ERRORS + 1);
    assert_eq!(recvs, MAX_ERRORS + 1 + 1, "the buffers, then the results wait");
    let r = t.into_report();
    assert_eq!(r.lost, 640);
    assert!(r.lines.iter().any(|l| l.starts_with(NOTE_PREFIX)));
}

/// The slave's results record in place of a buffer ends the loop: the rest count as lost.
#[test]
fn early_results_end_the_loop() {
    let mut t = MasterTest::new(Kind::UdpSend, 5, 100, 64, Pause::default());
    let mut n = 0u32;
    let (_, recvs) = drive(&mut t, |_| {
        n += 1;
        if n <= 40 {
            Some(data_buffer(n - 1, 64))
        } else {
            Some(Results { seq: 5, nsent: 100, nrecvd: 0 }.encode().to_vec())
        }
    });
    assert_eq!(recvs, 41, "no wait for a second results record");
    let r = t.into_report();
    assert_eq!((r.received, r.lost), (40, 60));
    assert_eq!(r.results, Some(Results { seq: 5, nsent: 100, nrecvd: 0 }));
    assert_eq!(r.lines.last().unwrap(), "   slave sent 100, recvd 0");
}
