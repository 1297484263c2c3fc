//! netperf's control protocol replayed against captures of the real programs.
//!
//! `fixtures/netperf/` holds one transcript per run of netperf 2.7.1 against netserver 2.7.1
//! (HewlettPackard/netperf at afc51ff, 2.7.1-dev after the netperf-2.7.0 tag, default
//! configure: OMNI tests, classic names migrated to them), captured on loopback with strace by
//! `capture.sh` and `reduce.py` beside them; each file's header gives the two command lines and
//! what netperf printed. Every test was run twice: with netperf's classic table (`NAME.txt`)
//! and with `-k` keyval output of the figures netperf takes from netserver (`NAME_keyval.txt`).
//!
//! Server role: the real netperf's requests drive netchar's server, with the real netserver's
//! data port and socket buffer sizes as the driver's setup and its counts as the driver's
//! figures; netchar's response and results must be the real netserver's bytes, all 656 of each,
//! including the words netserver leaves from its previous message.
//!
//! Client role: netchar's request for the same options must be the real netperf's but for the
//! ring widths and netperf's own data address (documented in `TestParams::request`); the real
//! netserver's answers drive netchar's client, and the figures it decodes must be what the
//! stock netperf printed from them.

use netchar_wire::netperf::client::{Client, Event as ClientEvent, TestParams};
use netchar_wire::netperf::figures::{cpu_method_letter, CpuFigures, ServerCounts, ServerFigures};
use netchar_wire::netperf::omni::{field_text, OmniRequest, OmniResponse, OmniResults};
use netchar_wire::netperf::server::{DataSetup, Event, Server};
use netchar_wire::netperf::{Message, TestEnd, TestKind, MESSAGE_LEN, PAD_TIME};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// One capture: the control messages in order (true: netperf → netserver) and what netperf
/// printed.
struct Transcript {
    messages: Vec<(bool, Vec<u8>)>,
    stdout: Vec<String>,
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
    let path = format!("{}/tests/fixtures/netperf/{name}.txt", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut t = Transcript { messages: Vec::new(), stdout: Vec::new() };
    for line in text.lines() {
        if let Some(out) = line.strip_prefix("#| ") {
            t.stdout.push(out.to_string());
        } else if let Some(h) = line.strip_prefix("> ") {
            t.messages.push((true, unhex(h)));
        } else if let Some(h) = line.strip_prefix("< ") {
            t.messages.push((false, unhex(h)));
        }
    }
    // One message per call in every capture: netperf writes 656 bytes at once, and loopback
    // delivered each of netserver's answers in one read.
    assert!(t.messages.iter().all(|(_, m)| m.len() == MESSAGE_LEN), "{name}: a control call of another size");
    t
}

fn message(bytes: &[u8]) -> Message {
    Message::decode(bytes).unwrap()
}

/// What netserver counted, read back from its results as the driver would have counted it.
fn counts_of(results: &OmniResults, cpu_measured: bool) -> ServerCounts {
    let mut c = ServerFigures::from_results(results, cpu_measured).counts;
    // netserver reports −1 for UDP and TCP_CRR whatever the socket says; the driver's own
    // count must not matter there.
    c.retransmits = c.retransmits.or(Some(5));
    c
}

/// The tests whose server side ends by netserver's own timer.
fn ends_by_server_timer(kind: TestKind) -> bool {
    matches!(kind, TestKind::TcpMaerts | TestKind::TcpCrr)
}

/// Replays every test of a capture against netchar's server; returns the tests' kinds.
fn replay_server(name: &str) -> Vec<TestKind> {
    let t = load(name);
    let start = Instant::now();
    let mut now = start;
    let mut s = Server::new(now);
    let mut kinds = Vec::new();
    let mut msgs = t.messages.iter();
    while let Some((true, req)) = msgs.next() {
        // Split the request where a slow link might.
        let cut = 1 + req.len() % 7 + kinds.len() * 100;
        s.handle_input(now, &req[..cut]).unwrap();
        assert_eq!(s.poll_event(), None, "{name}: an event before the whole request");
        s.handle_input(now, &req[cut..]).unwrap();
        let Some(Event::Test(test)) = s.poll_event() else { panic!("{name}: no test") };
        kinds.push(test.kind);
        let (false, response) = msgs.next().unwrap() else { panic!("{name}: no response") };
        let rsp = OmniResponse::decode(&message(response));
        let setup = DataSetup {
            port: rsp.data_port as u16,
            send_buf_size: rsp.send_buf_size,
            recv_buf_size: rsp.recv_buf_size,
            cpu_rate: rsp.cpu_measured().then_some(rsp.cpu_rate),
        };
        assert_eq!(test.port(), OmniRequest::decode(&message(req)).data_port as u16);
        s.listening(now, setup);
        let mut out = Vec::new();
        s.poll_output(&mut out);
        assert_eq!(message(&out), message(response), "{name}: response to {:?}", test.kind);
        assert_eq!(out, *response);

        let (false, results) = msgs.next().unwrap() else { panic!("{name}: no results") };
        let r = OmniResults::decode(&message(results));
        let begun = now;
        let mut end = Duration::from_secs_f64(f64::from(r.elapsed_time));
        if ends_by_server_timer(test.kind) {
            let timer = s.poll_timeout().expect("a timed test has the server's timer");
            let padded = test.kind != TestKind::TcpMaerts;
            assert_eq!(timer - begun, Duration::from_secs(1) + if padded { PAD_TIME } else { Duration::ZERO });
            s.handle_timeout(timer).unwrap();
            assert_eq!(s.poll_event(), Some(Event::TimeUp), "{name}");
            if padded {
                end += PAD_TIME;
            }
            assert!(begun + end >= timer, "{name}: netserver ended before its timer");
        } else {
            assert_eq!(s.poll_event(), None);
        }
        now = begun + end;
        s.finished(now, &counts_of(&r, rsp.cpu_measured()));
        out.clear();
        s.poll_output(&mut out);
        assert_eq!(message(&out), message(results), "{name}: results of {:?}", test.kind);
        assert_eq!(out, *results);
    }
    assert!(msgs.next().is_none(), "{name}: messages left");
    s.handle_eof(now).unwrap();
    assert!(s.is_done());
    kinds
}

#[test]
fn the_server_answers_each_stock_test_as_netserver_did() {
    for (name, kind) in [
        ("tcp_stream", TestKind::TcpStream),
        ("tcp_stream_keyval", TestKind::TcpStream),
        ("tcp_maerts", TestKind::TcpMaerts),
        ("tcp_maerts_keyval", TestKind::TcpMaerts),
        ("udp_stream", TestKind::UdpStream),
        ("udp_stream_keyval", TestKind::UdpStream),
        ("tcp_rr", TestKind::TcpRr),
        ("tcp_rr_keyval", TestKind::TcpRr),
        ("udp_rr", TestKind::UdpRr),
        ("udp_rr_keyval", TestKind::UdpRr),
        ("tcp_crr", TestKind::TcpCrr),
        ("tcp_crr_keyval", TestKind::TcpCrr),
        ("tcp_rr_remote_cpu", TestKind::TcpRr),
    ] {
        assert_eq!(replay_server(name), vec![kind], "{name}");
    }
}

/// `-i 2,2` (netperf runs at least three): three tests on one control connection. netserver's
/// second response carries in its flags word the first results' send count, converted twice;
/// netchar's image does the same.
#[test]
fn the_server_runs_netperfs_iterations_on_one_connection() {
    assert_eq!(replay_server("tcp_rr_iterations"), vec![TestKind::TcpRr; 3]);
    let t = load("tcp_rr_iterations");
    let first = OmniResults::decode(&message(&t.messages[2].1));
    let second = OmniResponse::decode(&message(&t.messages[4].1));
    assert_eq!(second.flags, first.send_calls.swap_bytes(), "the first results' send_calls, byte-swapped");
}

/// The options of each capture's netperf command line, as netchar's client takes them.
fn params_of(name: &str) -> TestParams {
    let base = name.trim_end_matches("_keyval");
    let p = |kind| TestParams::new(kind, TestEnd::Seconds(1));
    match base {
        "tcp_stream" => {
            TestParams { remote_send_buffer: Some(65536), remote_recv_buffer: Some(65536), ..p(TestKind::TcpStream) }
        }
        "tcp_maerts" => TestParams { remote_send_size: Some(1024), ..p(TestKind::TcpMaerts) },
        "udp_stream" => {
            TestParams { remote_send_buffer: Some(65536), remote_recv_buffer: Some(65536), ..p(TestKind::UdpStream) }
        }
        "tcp_rr" => TestParams { request_size: 64, response_size: 128, ..p(TestKind::TcpRr) },
        "udp_rr" => TestParams {
            request_size: 32,
            response_size: 64,
            remote_send_buffer: Some(32768),
            remote_recv_buffer: Some(32768),
            ..p(TestKind::UdpRr)
        },
        "tcp_crr" => TestParams { request_size: 16, response_size: 32, ..p(TestKind::TcpCrr) },
        "tcp_rr_remote_cpu" => TestParams {
            request_size: 64,
            response_size: 128,
            remote_cpu: true,
            remote_nodelay: true,
            ..p(TestKind::TcpRr)
        },
        other => panic!("no options for {other}"),
    }
}

/// The request words in which netchar's request may differ from netperf's: the ring widths and
/// netperf's own data port (UDP, and TCP_CRR's first local port) and address.
const MAY_DIFFER: [usize; 7] = [4, 10, 25, 28, 29, 30, 31];

struct ClientRun {
    response: OmniResponse,
    figures: ServerFigures,
    differing: Vec<usize>,
}

fn replay_client(name: &str) -> (ClientRun, Transcript) {
    let t = load(name);
    let now = Instant::now();
    let mut c = Client::new(now, params_of(name)).unwrap();
    let mut ours = Vec::new();
    c.poll_output(&mut ours);
    let theirs = message(&t.messages[0].1);
    let ours = message(&ours);
    assert_eq!((ours.kind, ours.status), (theirs.kind, theirs.status), "{name}: request header");
    let differing: Vec<usize> = (0..162).filter(|&i| ours.word(i) != theirs.word(i)).collect();
    assert!(differing.iter().all(|i| MAY_DIFFER.contains(i)), "{name}: request words {differing:?} differ");

    let response = &t.messages[1].1;
    c.handle_input(now, &response[..3]).unwrap();
    c.handle_input(now, &response[3..]).unwrap();
    let Some(ClientEvent::Connect { port, response }) = c.poll_event() else { panic!("{name}: no connect") };
    assert_eq!(u32::from(port), OmniResponse::decode(&message(&t.messages[1].1)).data_port);
    let end = c.poll_timeout().expect("a timed test");
    assert_eq!(end, now + Duration::from_secs(1));
    c.handle_timeout(end).unwrap();
    assert_eq!(c.poll_event(), Some(ClientEvent::TimeUp));
    c.handle_input(end, &t.messages[2].1).unwrap();
    let Some(ClientEvent::Results(figures)) = c.poll_event() else { panic!("{name}: no results") };
    assert!(c.is_done());
    (ClientRun { response: *response, figures: *figures, differing }, t)
}

fn keyval(t: &Transcript) -> HashMap<String, String> {
    t.stdout.iter().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn close(a: f64, b: f64, tolerance: f64) -> bool {
    (a - b).abs() <= tolerance * b.abs().max(1e-9)
}

/// What `netperf -k` printed from netserver's messages equals what netchar's client decoded.
#[test]
fn the_client_decodes_what_netperf_printed_with_keyval_output() {
    for name in [
        "tcp_stream_keyval",
        "tcp_maerts_keyval",
        "udp_stream_keyval",
        "tcp_rr_keyval",
        "udp_rr_keyval",
        "tcp_crr_keyval",
    ] {
        let (run, t) = replay_client(name);
        let kv = keyval(&t);
        let (r, f) = (&run.response, &run.figures.counts);
        let cpu = f.cpu.map_or(-1.0, |c| c.util);
        let retrans = f.retransmits.map_or(-1, i64::from);
        let expect: [(&str, String); 19] = [
            ("RSS_SIZE", r.send_buf_size.to_string()),
            ("RSR_SIZE", r.recv_buf_size.to_string()),
            ("RSS_SIZE_END", f.send_buf_size.to_string()),
            ("RSR_SIZE_END", f.recv_buf_size.to_string()),
            ("REMOTE_SEND_SIZE", r.send_size.to_string()),
            ("REMOTE_RECV_SIZE", r.receive_size.to_string()),
            ("REMOTE_SEND_CALLS", f.send_calls.to_string()),
            ("REMOTE_RECV_CALLS", f.recv_calls.to_string()),
            ("REMOTE_BYTES_SENT", f.bytes_sent.to_string()),
            ("REMOTE_BYTES_RECVD", f.bytes_received.to_string()),
            ("REMOTE_SEND_WIDTH", r.send_width.to_string()),
            ("REMOTE_RECV_WIDTH", r.recv_width.to_string()),
            ("REMOTE_NODELAY", u8::from(r.nodelay()).to_string()),
            ("REMOTE_CPU_UTIL", format!("{cpu:.2}")),
            ("REMOTE_CPU_METHOD", cpu_method_letter(f.cpu_method).to_string()),
            ("REMOTE_CPU_COUNT", f.cpus.to_string()),
            ("REMOTE_TRANSPORT_RETRANS", retrans.to_string()),
            ("REMOTE_SOCKET_PRIO", r.socket_prio.to_string()),
            ("REMOTE_SOCKET_TOS", format!("{:#x}", r.socket_tos as u32)),
        ];
        for (key, ours) in expect {
            assert_eq!(kv.get(key), Some(&ours), "{name}: {key}");
        }
        // The rates netperf prints divide netserver's counts (streams) or its own (transactions)
        // by its own elapsed time, printed to 1/100 s: netchar's figures agree to that.
        let elapsed: f64 = kv["ELAPSED_TIME"].parse().unwrap();
        let kind = params_of(name).kind;
        match kind {
            TestKind::TcpStream | TestKind::UdpStream => {
                let thr: f64 = kv["THROUGHPUT"].parse().unwrap();
                let ours = f.bytes_received as f64 * 8.0 / 1e6 / elapsed;
                assert!(close(ours, thr, 0.01), "{name}: {ours} vs {thr} Mbit/s");
            }
            // netperf stops reading at its own timer: what was still in flight is not counted.
            TestKind::TcpMaerts => {
                let local: u64 = kv["LOCAL_BYTES_RECVD"].parse().unwrap();
                assert!(local <= f.bytes_sent && close(local as f64, f.bytes_sent as f64, 0.01), "{name}");
            }
            _ => {
                let rate: f64 = kv["TRANSACTION_RATE"].parse().unwrap();
                let ours = f64::from(f.transactions) / elapsed;
                assert!(close(ours, rate, 0.01), "{name}: {ours} vs {rate} trans/s");
            }
        }
        // Where netchar's request differs from netperf's.
        let expected: &[usize] = match kind {
            TestKind::TcpStream => &[4],
            TestKind::TcpMaerts => &[10],
            TestKind::UdpStream => &[4, 25],
            TestKind::UdpRr | TestKind::TcpCrr => &[25],
            _ => &[],
        };
        assert_eq!(run.differing, expected, "{name}");
    }
}

/// The data row of netperf's classic table, as numbers.
fn row(t: &Transcript, index_from_end: usize) -> Vec<String> {
    let rows: Vec<&String> = t.stdout.iter().filter(|l| l.starts_with(|c: char| c.is_ascii_digit())).collect();
    rows[rows.len() - 1 - index_from_end].split_whitespace().map(str::to_string).collect()
}

/// netperf's classic tables: the columns it fills from netserver's messages.
#[test]
fn the_client_decodes_what_netperf_printed_in_its_tables() {
    for name in ["tcp_stream", "tcp_maerts", "udp_stream", "tcp_rr", "udp_rr", "tcp_crr", "tcp_rr_remote_cpu"] {
        let (run, t) = replay_client(name);
        let (r, f) = (&run.response, &run.figures.counts);
        let num = |s: &str| s.parse::<f64>().unwrap();
        match params_of(name).kind {
            // Recv socket (netserver's), send socket, send size, elapsed, Mbit/s from its bytes.
            TestKind::TcpStream => {
                let v = row(&t, 0);
                assert_eq!(v[0], r.recv_buf_size.to_string(), "{name}");
                let ours = f.bytes_received as f64 * 8.0 / 1e6 / num(&v[3]);
                assert!(close(ours, num(&v[4]), 0.01), "{name}: {ours} vs {}", v[4]);
            }
            // Recv socket (netperf's), send socket and send size (netserver's).
            TestKind::TcpMaerts => {
                let v = row(&t, 0);
                assert_eq!(
                    (v[1].clone(), v[2].clone()),
                    (r.send_buf_size.to_string(), r.send_size.to_string()),
                    "{name}"
                );
            }
            // Second line: netserver's recv socket, elapsed, datagrams it received, its rate.
            TestKind::UdpStream => {
                let v = row(&t, 0);
                assert_eq!(
                    (v[0].clone(), v[2].clone()),
                    (r.recv_buf_size.to_string(), f.recv_calls.to_string()),
                    "{name}"
                );
                let ours = f.bytes_received as f64 * 8.0 / 1e6 / num(&v[1]);
                assert!(close(ours, num(&v[3]), 0.01), "{name}: {ours} vs {}", v[3]);
            }
            // Second line: netserver's send and recv sockets; the rate is netperf's count.
            _ => {
                let v = row(&t, 0);
                assert_eq!(v, [r.send_buf_size.to_string(), r.recv_buf_size.to_string()], "{name}");
                let first = row(&t, 1);
                let ours = f64::from(f.transactions) / num(&first[4]);
                assert!(close(ours, num(&first[5]), 0.03), "{name}: {ours} vs {} trans/s", first[5]);
            }
        }
    }
}

/// `-C`: netserver measured its CPU (flag in the response, rate 100 from /proc/stat); netperf
/// printed its utilisation and method from the results.
#[test]
fn the_client_reads_the_servers_cpu_figures() {
    let (run, t) = replay_client("tcp_rr_remote_cpu");
    assert!(run.response.cpu_measured() && run.response.nodelay());
    assert_eq!(run.response.cpu_rate, 100.0);
    let f = &run.figures.counts;
    let cpu: CpuFigures = f.cpu.expect("measured");
    let v = row(&t, 1);
    assert_eq!(v[7], format!("{:.2}", cpu.util));
    assert!(t.stdout.iter().any(|l| l.contains(&format!("% U    % {}", cpu_method_letter(f.cpu_method)))));
    assert_eq!((f.cpu_method, f.cpus), (8, 2));
    assert!(cpu.user + cpu.system + cpu.softirq <= cpu.util + 0.1);
}

/// What netperf's messages carry, beyond what it printed: the congestion control netserver
/// reports for TCP (asked by the routing flag's bit), and the type its results carry.
#[test]
fn the_results_carry_the_congestion_control_and_a_little_endian_type() {
    let t = load("tcp_stream");
    let results = message(&t.messages[2].1);
    assert_eq!(results.kind, 0x6200_0000);
    let r = OmniResults::decode(&results);
    let (run, _) = replay_client("tcp_stream");
    assert_eq!(run.figures.counts.congestion_control, Some(field_text(&r.cong_control)).filter(|s| !s.is_empty()));
    assert!(run.figures.counts.congestion_control.is_some(), "TCP results name the algorithm");
    let (udp, _) = replay_client("udp_rr");
    assert_eq!((udp.figures.counts.congestion_control, udp.figures.counts.retransmits), (None, None));
}

/// A netperf built with `--disable-omni` sends the classic requests, which the real netserver
/// answered with their own layouts (type + 1); netchar's server answers each as netserver
/// answers a test it does not know, errno 998, and stays up for another request.
#[test]
fn classic_requests_get_the_unknown_test_answer() {
    let now = Instant::now();
    for (name, code) in [
        ("classic_tcp_stream", 10),
        ("classic_tcp_maerts", 94),
        ("classic_udp_stream", 16),
        ("classic_tcp_rr", 13),
        ("classic_udp_rr", 19),
        ("classic_tcp_crr", 34),
    ] {
        let t = load(name);
        let req = &t.messages[0].1;
        assert_eq!(message(req).kind, code, "{name}");
        assert_eq!(message(&t.messages[1].1).kind, code + 1, "{name}: netserver's classic response");
        let mut s = Server::new(now);
        s.handle_input(now, req).unwrap();
        assert_eq!(s.poll_event(), Some(Event::Unknown(code)), "{name}");
        let mut out = Vec::new();
        s.poll_output(&mut out);
        let answer = message(&out);
        assert_eq!((answer.kind, answer.status), (0, 998), "{name}");
        assert!(!s.is_done(), "{name}");
    }
}
