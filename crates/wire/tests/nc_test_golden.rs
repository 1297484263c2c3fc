//! Golden transcripts of the stock eCos nc_test programs (`fixtures/nc_test/`, captured from
//! `nc_test_master`/`nc_test_slave` and the `nc6_` pair built for a 32-bit Linux host; each file
//! says how) replayed against netchar's master and slave state machines, in memory.
//!
//! Master role: netchar's [`MasterSuite`] must send exactly the bytes the stock master sent
//! (requests: every field the stock master sets; data buffers: every byte), and, fed what the
//! stock master received, print the lines it printed (timing figures aside) and count the same.
//! Slave role: netchar's [`Slave`] and [`SlaveTest`], fed what the stock slave received, must
//! reply and send exactly the bytes it sent (requests' ACK/NAK and seq, data buffers and
//! results records byte for byte).

use netchar_wire::nc_test::*;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, PartialEq)]
enum Ev {
    /// Master → slave.
    ToSlave(&'static str, Vec<u8>),
    /// Slave → master.
    ToMaster(&'static str, Vec<u8>),
    Other(String),
}

struct Transcript {
    events: VecDeque<Ev>,
    stdout: Vec<String>,
}

fn chan(s: &str) -> &'static str {
    match s {
        "ctrl" => "ctrl",
        "udp" => "udp",
        "tcp" => "tcp",
        other => panic!("unknown channel {other}"),
    }
}

fn unhex(s: &str) -> Vec<u8> {
    let (hex, zeros) = match s.split_once("+0*") {
        Some((h, z)) => (h, z.parse::<usize>().unwrap()),
        None => (s, 0),
    };
    let mut b: Vec<u8> = (0..hex.len() / 2).map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap()).collect();
    b.resize(b.len() + zeros, 0);
    b
}

fn load(name: &str) -> Transcript {
    let path = format!("{}/tests/fixtures/nc_test/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut events = VecDeque::new();
    let mut stdout = Vec::new();
    for line in text.lines() {
        if let Some(out) = line.strip_prefix("#| ") {
            stdout.push(out.to_string());
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let parts: Vec<&str> = line.split(' ').collect();
        match (parts[0], parts.get(2)) {
            (">", Some(h)) => events.push_back(Ev::ToSlave(chan(parts[1]), unhex(h))),
            ("<", Some(&"eof")) => events.push_back(Ev::Other(line.to_string())),
            ("<", Some(h)) => events.push_back(Ev::ToMaster(chan(parts[1]), unhex(h))),
            _ => events.push_back(Ev::Other(line.to_string())),
        }
    }
    Transcript { events, stdout }
}

/// The stock result line without its timing figures (which depend on the run).
fn untimed(line: &str) -> String {
    match (line.find(" bytes in "), line.find("(M = 10^6)")) {
        (Some(a), Some(b)) => format!("{} bytes in T{}", &line[..a], &line[b + "(M = 10^6)".len()..]),
        _ => line.to_string(),
    }
}

fn skip_other(t: &mut Transcript) {
    while let Some(Ev::Other(_)) = t.events.front() {
        t.events.pop_front();
    }
}

/// Takes `len` bytes the slave sent on `ch` (TCP: gathered over reads; UDP: one datagram,
/// truncated); `None` when the transcript has no such bytes next (the stock program timed out).
fn take_to_master(t: &mut Transcript, ch: &str, len: usize) -> Option<Vec<u8>> {
    skip_other(t);
    let mut got = Vec::new();
    while got.len() < len {
        match t.events.front() {
            Some(Ev::ToMaster(c, b)) if *c == ch => {
                let b = b.clone();
                t.events.pop_front();
                if ch == "udp" {
                    return Some(b[..b.len().min(len)].to_vec());
                }
                got.extend_from_slice(&b);
            }
            _ => break,
        }
    }
    assert!(got.len() <= len, "a TCP read in the transcript crosses a buffer boundary");
    (got.len() == len).then_some(got)
}

fn take_to_slave(t: &mut Transcript, ch: &str, len: usize) -> Option<Vec<u8>> {
    skip_other(t);
    let mut got = Vec::new();
    while got.len() < len {
        match t.events.front() {
            Some(Ev::ToSlave(c, b)) if *c == ch => {
                let b = b.clone();
                t.events.pop_front();
                if ch == "udp" {
                    return Some(b[..b.len().min(len)].to_vec());
                }
                got.extend_from_slice(&b);
            }
            _ => break,
        }
    }
    (got.len() == len).then_some(got)
}

fn expect_to_slave(t: &mut Transcript, ch: &str, len: usize) -> Vec<u8> {
    take_to_slave(t, ch, len)
        .unwrap_or_else(|| panic!("the stock master sent no {len}-byte {ch} message here: {:?}", t.events.front()))
}

/// Requests: every field the stock master sets must match; the rest is its stack garbage.
fn same_request(ours: &Request, theirs: &Request) {
    assert_eq!((ours.code, ours.seq), (theirs.code, theirs.seq), "request type/seq");
    let kind = ours.kind().unwrap();
    if kind.is_test() {
        assert_eq!(ours, &Request { timeout: 0, ..*theirs }, "test request");
    } else if kind == Kind::SetLoad {
        assert_eq!(ours.nbufs, theirs.nbufs, "SET_LOAD level");
    }
}

struct MasterRun {
    lines: Vec<String>,
    reports: Vec<MasterReport>,
}

fn replay_master(name: &str, sequence: Sequence) -> (MasterRun, Transcript) {
    let mut t = load(name);
    let mut suite = MasterSuite::new(sequence);
    let mut lines = Vec::new();
    let mut now = Instant::now();
    loop {
        match suite.next_step() {
            SuiteStep::Print(l) => lines.extend(l.split('\n').map(str::to_string)),
            SuiteStep::Sleep(_) => {}
            SuiteStep::Done => break,
            SuiteStep::Request(req) => {
                let theirs = Request::decode(&expect_to_slave(&mut t, "ctrl", REQUEST_LEN)).unwrap();
                same_request(&req, &theirs);
                assert_eq!(req.encode().len(), REQUEST_LEN);
                let reply = take_to_master(&mut t, "ctrl", REPLY_LEN);
                let (printed, run) = suite.reply(reply.as_deref());
                lines.extend(printed);
                if let Some(SuiteStep::RunTest(mut test)) = run {
                    let ch = if test.report().kind.is_udp() { "udp" } else { "tcp" };
                    loop {
                        now += Duration::from_micros(100);
                        match test.next_step(now) {
                            Step::Send(bytes) => {
                                let theirs = expect_to_slave(&mut t, ch, bytes.len());
                                assert_eq!(bytes, theirs, "data buffer sent");
                            }
                            Step::Recv { len, .. } => {
                                let got = take_to_master(&mut t, ch, len);
                                test.received(got.as_deref(), now);
                            }
                            Step::Print(l) => lines.push(l),
                            Step::Pause(_) => {}
                            Step::Done => break,
                        }
                    }
                    suite.test_done(Some((*test).into_report()));
                }
            }
            SuiteStep::RunTest(_) => unreachable!("tests come from reply()"),
        }
    }
    let reports = suite.reports().to_vec();
    (MasterRun { lines, reports }, t)
}

fn stock_lines(t: &Transcript) -> Vec<String> {
    t.stdout
        .iter()
        .filter(|l| !l.starts_with("Start Network Characterization") && *l != "... Done")
        .map(|l| untimed(l))
        .collect()
}

fn our_lines(run: &MasterRun) -> Vec<String> {
    run.lines.iter().filter(|l| !l.starts_with(NOTE_PREFIX)).map(|l| untimed(l)).collect()
}

fn no_events_left(t: &Transcript) {
    let left: Vec<&Ev> = t.events.iter().filter(|e| !matches!(e, Ev::Other(_))).collect();
    assert!(left.is_empty(), "transcript not consumed: {:?}", &left[..left.len().min(3)]);
}

#[test]
fn master_replays_nc_test_master_against_a_host_slave() {
    let (run, t) = replay_master("nc_test_v4.txt", Sequence::Nc);
    assert_eq!(our_lines(&run), stock_lines(&t));
    no_events_left(&t);
    // The host slave refused SET_LOAD and START_IDLE: both sections skipped, with notes.
    assert!(run.lines.iter().any(|l| l.starts_with(NOTE_PREFIX) && l.contains("SET_LOAD")));
    assert!(run.lines.iter().any(|l| l.starts_with(NOTE_PREFIX) && l.contains("START_IDLE")));
    assert_eq!(run.reports.len(), 1);
    let r = &run.reports[0];
    assert_eq!((r.kind, r.seq, r.total_packets, r.lost, r.seq_errors), (Kind::TcpEcho, 2, 128, 0, 0));
    assert_eq!(r.results, Some(Results { seq: 2, nsent: 64, nrecvd: 64 }));
    assert_eq!(r.bytes(), 128 * 10240);
    assert_eq!(r.rtts.len(), 64);
}

#[test]
fn master_replays_nc6_test_master_ipv4_with_real_losses() {
    let seq = Sequence::Nc6 { tcp: true, udp: true, slave_loads: true, master_loads: true };
    let (run, t) = replay_master("nc6_test_v4.txt", seq);
    assert_eq!(our_lines(&run), stock_lines(&t));
    no_events_left(&t);
    type Row = (Kind, u32, u32, u32, Option<(u32, u32)>);
    let got: Vec<Row> = run
        .reports
        .iter()
        .map(|r| (r.kind, r.total_packets, r.lost, r.seq_errors, r.results.map(|x| (x.nsent, x.nrecvd))))
        .collect();
    assert_eq!(
        got,
        vec![
            (Kind::UdpEcho, 1280, 0, 0, Some((640, 640))),
            // The stock master lost 7 of the slave's 640 and resynchronised twice.
            (Kind::UdpSend, 633, 0, 2, Some((640, 0))),
            // The stock slave took 329 of the master's 640.
            (Kind::UdpRecv, 640, 0, 0, Some((0, 329))),
            (Kind::TcpEcho, 1280, 0, 0, Some((640, 640))),
            (Kind::TcpSend, 640, 0, 0, Some((640, 0))),
            (Kind::TcpRecv, 640, 0, 0, Some((0, 640))),
            (Kind::TcpEcho, 128, 0, 0, Some((64, 64))),
        ]
    );
    let seqs: Vec<u32> = run.reports.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, vec![2, 3, 4, 5, 6, 7, 8]);
}

#[test]
fn master_replays_nc6_test_master_over_ipv6() {
    let seq = Sequence::Nc6 { tcp: true, udp: false, slave_loads: true, master_loads: true };
    let (run, t) = replay_master("nc6_test_v6_tcp.txt", seq);
    assert_eq!(our_lines(&run), stock_lines(&t));
    no_events_left(&t);
    assert_eq!(run.reports.len(), 4);
    assert!(run.reports.iter().all(|r| r.results.is_some() && r.lost == 0));
}

/// Replays the slave's side: requests in, replies out; data in, data and results out.
fn replay_slave(name: &str) -> Vec<Results> {
    let mut t = load(name);
    // A host-built stock slave: no load, no idle.
    let slave = Slave { load: false, idle: false, ..Slave::default() };
    let mut results = Vec::new();
    loop {
        skip_other(&mut t);
        let Some(req) = take_to_slave(&mut t, "ctrl", REQUEST_LEN) else { break };
        let d = slave.handle(&req).expect("a request");
        let theirs =
            Reply::decode(&take_to_master(&mut t, "ctrl", REPLY_LEN).expect("the stock slave replied")).unwrap();
        assert_eq!(
            (d.reply.response, d.reply.seq),
            (theirs.response, theirs.seq),
            "reply to {:?}",
            Request::decode(&req)
        );
        if !theirs.is_ack() {
            assert_ne!(d.reply.reason, 0);
        }
        if let SlaveAction::Test(req) = d.action {
            let ch = if req.kind().unwrap().is_udp() { "udp" } else { "tcp" };
            let mut test = SlaveTest::new(req).unwrap();
            loop {
                match test.next_step() {
                    Step::Recv { len, .. } => {
                        let got = take_to_slave(&mut t, ch, len);
                        test.received(got.as_deref());
                    }
                    Step::Send(bytes) => {
                        let theirs = take_to_master(&mut t, ch, bytes.len()).expect("the stock slave sent this");
                        assert_eq!(bytes, theirs, "slave's buffer");
                    }
                    Step::Done => break,
                    Step::Print(_) | Step::Pause(_) => {}
                }
            }
            results.push(test.results());
        }
    }
    no_events_left(&t);
    results
}

#[test]
fn slave_replays_the_stock_slave_side_with_its_losses() {
    let r = replay_slave("nc6_test_v4.slave.txt");
    let got: Vec<(u32, u32, u32)> = r.iter().map(|r| (r.seq, r.nsent, r.nrecvd)).collect();
    assert_eq!(
        got,
        vec![(2, 640, 640), (3, 640, 0), (4, 0, 329), (5, 640, 640), (6, 640, 0), (7, 0, 640), (8, 64, 64)]
    );
}

#[test]
fn slave_replays_against_the_stock_masters_bytes() {
    // Lossless captures: the master's view is also what the slave saw.
    assert_eq!(replay_slave("nc_test_v4.txt"), vec![Results { seq: 2, nsent: 64, nrecvd: 64 }]);
    let r = replay_slave("nc6_test_v6_tcp.txt");
    assert_eq!(
        r.iter().map(|r| (r.nsent, r.nrecvd)).collect::<Vec<_>>(),
        vec![(640, 640), (640, 0), (0, 640), (64, 64)]
    );
}

/// The stock `nc_test_master`'s whole sequence against a slave that ACKs SET_LOAD and the
/// idle requests (netchar's; no eCos board was at hand), control and results only: netchar's
/// master must send the stock master's requests in the same order (seq, load levels, idle
/// starts and stops) and print the same lines, the IDLE figures included (they follow from the
/// replies alone). Data buffers are answered in memory.
#[test]
fn master_replays_the_load_and_idle_sections_of_nc_test_master() {
    let mut t = load("nc_test_v4_load_idle.ctrl.txt");
    let mut suite = MasterSuite::new(Sequence::Nc);
    let mut lines = Vec::new();
    let mut now = Instant::now();
    let mut set_loads = Vec::new();
    loop {
        match suite.next_step() {
            SuiteStep::Print(l) => lines.extend(l.split('\n').map(str::to_string)),
            SuiteStep::Sleep(_) => {}
            SuiteStep::Done => break,
            SuiteStep::RunTest(_) => unreachable!(),
            SuiteStep::Request(req) => {
                let theirs = Request::decode(&expect_to_slave(&mut t, "ctrl", REQUEST_LEN)).unwrap();
                same_request(&req, &theirs);
                if req.kind() == Some(Kind::SetLoad) {
                    set_loads.push(req.nbufs);
                }
                let reply = take_to_master(&mut t, "ctrl", REPLY_LEN);
                let (printed, run) = suite.reply(reply.as_deref());
                lines.extend(printed);
                if let Some(SuiteStep::RunTest(mut test)) = run {
                    let ch = if test.report().kind.is_udp() { "udp" } else { "tcp" };
                    let mut k = 0;
                    loop {
                        now += Duration::from_micros(100);
                        match test.next_step(now) {
                            Step::Recv { len, .. } if len == RESULTS_LEN => {
                                let got = take_to_master(&mut t, ch, len);
                                test.received(got.as_deref(), now);
                            }
                            Step::Recv { len, .. } => {
                                let b = data_buffer(k, (len - DATA_HEADER_LEN) as u32);
                                k += 1;
                                test.received(Some(&b), now);
                            }
                            Step::Print(l) => lines.push(l),
                            Step::Done => break,
                            Step::Send(_) | Step::Pause(_) => {}
                        }
                    }
                    suite.test_done(Some((*test).into_report()));
                }
            }
        }
    }
    assert_eq!(our_lines(&MasterRun { lines, reports: Vec::new() }), stock_lines(&t));
    no_events_left(&t);
    assert_eq!(set_loads, vec![0, 0, 10, 20, 30, 40, 50]);
    assert!(suite.disconnected());
    assert_eq!(suite.reports().len(), 1 + 12 + 10);
    assert_eq!(suite.idle_lines().len(), 11);
}
