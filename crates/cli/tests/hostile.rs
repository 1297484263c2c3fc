//! Hostile clients against a running `netchar server`, each beside a well-behaved client whose
//! figures must stay exact, with the server's open files and memory read before and after.
//!
//! Attackers use other loopback addresses (127.0.0.2, 127.0.0.3) than the good client
//! (127.0.0.1), as they would be other hosts: per-source limits must stop the attacker and
//! never the good client.

#[path = "support/loopback.rs"]
mod common;
#[path = "support/control.rs"]
mod control;

use common::*;
use control::*;
use netchar_model::TestSpec;
use netchar_wire::datagram::{DatagramHeader, CHALLENGE_LEN};
use netchar_wire::session::ClientEvent;
use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::time::{Duration, Instant};

/// A memory figure (KiB) of a process from /proc/PID/status: `VmRSS` (resident now) or
/// `VmHWM` (the most it has held); 0 for a process that is gone.
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Open file descriptors and resident memory (KiB) of a process.
fn fds_and_rss(pid: u32) -> (usize, u64) {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count()).unwrap_or(0);
    (fds, status_kib(pid, "VmRSS"))
}

/// The most resident memory (KiB) a process has held.
fn peak_rss(pid: u32) -> u64 {
    status_kib(pid, "VmHWM")
}

/// Waits until the server's open files are back to `baseline` (closes may lag the attack by
/// the refusal linger of a second); returns the last count.
fn fds_settle(pid: u32, baseline: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (fds, _) = fds_and_rss(pid);
        if fds <= baseline || Instant::now() > deadline {
            return fds;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The attack that gave ~71,000× amplification: a control connection from one host asks for
/// `udp -R`, and a setup datagram claiming another host's address points the server's sender
/// at the victim. The victim must receive nothing (default policy) or only challenges no
/// larger than the setups that caused them (when the operator allows the victim's network),
/// and never test traffic; a good client's UDP test beside it stays exact.
#[test]
fn spoofed_udp_setup_reflects_nothing_to_the_victim() {
    for allow_victim in [false, true] {
        let extra: &[&str] = if allow_victim {
            &["--max-concurrent", "2", "--allow-data-from", "127.0.0.0/8"]
        } else {
            &["--max-concurrent", "2"]
        };
        let s = Server::start(extra);
        let pid = s.child.id();
        let before = fds_and_rss(pid);
        let mut attacker = Control::open("127.0.0.2", s.port, udp_reverse(200_000_000), None);
        let cookie = match attacker.next_event() {
            Ok(ClientEvent::Accepted { cookie, .. }) => cookie,
            other => panic!("attacker's test not admitted: {other:?}"),
        };
        // The victim: another host whose address the setup claims. It never answers.
        let victim = UdpSocket::bind("127.0.0.3:0").unwrap();
        victim.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        let good = std::thread::spawn({
            let port = s.port.to_string();
            move || netchar(&["udp", "127.0.0.1", "-p", &port, "-b", "20M", "-t", "2", "--json", "--busy-wait", "5"])
        });
        let (mut sent, mut received, mut datagrams) = (0usize, 0usize, 0usize);
        let mut biggest = 0;
        let setup = DatagramHeader::setup(1, &cookie);
        let mut buf = [0u8; 65536];
        let until = Instant::now() + Duration::from_secs(3);
        while Instant::now() < until {
            sent += victim.send_to(&setup, ("127.0.0.1", s.port)).unwrap();
            while let Ok((n, _)) = victim.recv_from(&mut buf) {
                received += n;
                datagrams += 1;
                biggest = biggest.max(n);
            }
        }
        let run = good.join().unwrap();
        assert_eq!(run.code, 0, "the good client failed beside the attack: {}", run.stderr);
        let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        let up = &v["summary"]["up"];
        assert_eq!(u(&up["sender"]["packets"]), u(&up["receiver"]["packets"]) + u(&up["receiver"]["lost"]), "{up}");
        if allow_victim {
            assert!(received <= sent, "amplification: {received} bytes received for {sent} sent");
            assert!(biggest <= CHALLENGE_LEN, "the victim got a {biggest}-byte datagram, not only challenges");
        } else {
            assert_eq!(
                received, 0,
                "{datagrams} datagrams ({received} bytes) reached the victim for {sent} bytes sent"
            );
        }
        drop(attacker);
        let fds = fds_settle(pid, before.0);
        assert!(fds <= before.0, "server fds {} before, {fds} after", before.0);
        let lines = s.log_lines(Duration::from_millis(500));
        eprintln!(
            "allow_victim={allow_victim}: sent {sent} B, victim got {received} B in {datagrams} datagrams; {lines:?}"
        );
    }
}

/// Slowloris: connections that trickle their hello one byte at a time, or send nothing, must
/// not keep the server: the hello has an absolute deadline and one address gets at most
/// --max-per-source connections; the rest are answered "busy: too many connections" rather
/// than dropped. A good client from another address runs a test throughout, exactly.
#[test]
fn slowloris_connections_are_capped_and_closed_by_their_deadline() {
    let s = Server::start(&["--idle-timeout", "2", "--max-per-source", "16"]);
    let pid = s.child.id();
    let before = fds_and_rss(pid);
    let hello = netchar_wire::hello::Hello::control().encode();
    let started = Instant::now();
    let mut trickling: Vec<(TcpStream, Option<Instant>)> =
        (0..40).map(|_| (connect_from("127.0.0.2", s.port), None)).collect();
    let idle: Vec<TcpStream> = (0..20).map(|_| connect_from("127.0.0.2", s.port)).collect();
    let good = std::thread::spawn({
        let port = s.port.to_string();
        move || netchar(&["tcp", "127.0.0.1", "-p", &port, "-n", "20M", "-i", "0", "--json"])
    });
    // One byte per 300 ms: 40 bytes would take 12 s, far past the 2 s deadline.
    let mut refused = 0;
    for step in 0..15 {
        for (c, closed) in trickling.iter_mut().filter(|(_, closed)| closed.is_none()) {
            let mut buf = [0u8; 256];
            c.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
            match c.read(&mut buf) {
                Ok(0) => *closed = Some(Instant::now()),
                Ok(n) => {
                    let text = String::from_utf8_lossy(&buf[..n]);
                    if text.contains("too many connections") {
                        refused += 1;
                    }
                    *closed = Some(Instant::now());
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if c.write_all(&hello[step..step + 1]).is_err() {
                        *closed = Some(Instant::now());
                    }
                }
                Err(_) => *closed = Some(Instant::now()),
            }
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    let run = good.join().unwrap();
    assert_eq!(run.code, 0, "the good client failed beside the slowloris: {}", run.stderr);
    let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let (sent, got) = check_flow(&v, "up", 1);
    assert_eq!(sent, got);
    // 16 were let in; of the 60 connections the others were refused with a reason.
    assert!(refused >= 40 - 16 - 1, "only {refused} trickling connections were told why they were refused");
    let still_open = trickling.iter().filter(|(_, c)| c.is_none()).count();
    assert_eq!(still_open, 0, "{still_open} trickling connections outlived their hello deadline (trickled for 4.5 s)");
    let latest = trickling.iter().filter_map(|(_, c)| *c).max().unwrap();
    eprintln!(
        "slowloris: {refused} refused with a reason, the last trickler closed {:.1} s after the start",
        (latest - started).as_secs_f64()
    );
    drop(idle);
    drop(trickling);
    let fds = fds_settle(pid, before.0);
    let after = fds_and_rss(pid);
    assert!(fds <= before.0, "server fds {} before, {fds} after", before.0);
    eprintln!("server fds {} -> {fds}, RSS {} -> {} KiB", before.0, before.1, after.1);
    let lines = s.log_lines(Duration::from_millis(500));
    assert!(lines.iter().any(|l| l.contains("too many connections from 127.0.0.2")), "{lines:?}");
    // Rejections are logged a few per source and period, then counted, not one line each.
    let from_attacker = lines.iter().filter(|l| l.starts_with("rejected 127.0.0.2")).count();
    assert!(from_attacker <= 5, "{from_attacker} rejection lines from the attacker: {lines:?}");
}

/// One client ran 31 tests against --max-concurrent 1 by naming its own running test as the
/// companion of each. Companions now belong to a test of the same address, a bounded number
/// per test (MAX_COMPANIONS_PER_TEST: the load flows and probes of `rr --under-load rrul`).
#[test]
fn companions_cannot_get_past_max_concurrent() {
    let s = Server::start(&[]);
    let spec = TestSpec::rr_default();
    let mut first = Control::open("127.0.0.2", s.port, spec.clone(), None);
    let cookie = match first.next_event() {
        Ok(ClientEvent::Accepted { cookie, .. }) => cookie,
        other => panic!("{other:?}"),
    };
    let mut admitted = 0;
    let mut refused = Vec::new();
    let mut held = Vec::new();
    for _ in 0..20 {
        let mut c = Control::open("127.0.0.2", s.port, spec.clone(), Some(cookie));
        match c.next_event() {
            Ok(ClientEvent::Accepted { .. }) => admitted += 1,
            Ok(ClientEvent::Busy { reason, .. }) => refused.push(reason.unwrap_or_default()),
            other => panic!("{other:?}"),
        }
        held.push(c);
    }
    let cap = netchar_engine::admission::MAX_COMPANIONS_PER_TEST;
    assert_eq!(admitted, cap, "companions admitted beside one test: {admitted} (refusals: {refused:?})");
    assert!(refused.iter().all(|r| r.contains("companion")), "{refused:?}");
    // From another address, the cookie is worth nothing.
    let mut other = Control::open("127.0.0.3", s.port, spec, Some(cookie));
    let err = other.next_event().unwrap_err();
    assert!(err.contains("no running test of this client"), "{err}");
}

/// Deeply nested and invalid JSON, out-of-state messages, an oversize length prefix: each ends
/// only its own session; the server answers the next client at once.
#[test]
fn malformed_control_messages_end_only_their_own_session() {
    let s = Server::start(&[]);
    let pid = s.child.id();
    let before = fds_and_rss(pid);
    let hello = netchar_wire::hello::Hello::control().encode();
    let nested = vec![b'['; 60_000];
    let frame = |payload: &[u8]| {
        let mut b = hello.to_vec();
        b.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        b.extend_from_slice(payload);
        b
    };
    let mut oversize = hello.to_vec();
    oversize.extend_from_slice(&(64 * 1024 * 1024u32).to_be_bytes());
    let cases = [
        frame(&nested),
        frame(br#"{"type":"request","spec":{"kind":"tcp"}}"#),
        frame(br#"{"type":"start"}"#),
        frame(br#"{"type":"sender_done","totals":[]}"#),
        frame(&[0xff; 100]),
        oversize,
    ];
    for bytes in &cases {
        let mut c = connect_from("127.0.0.2", s.port);
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.write_all(bytes).unwrap();
        // The server answers (its hello, then an error) and closes: never hangs.
        let mut answer = Vec::new();
        let _ = c.read_to_end(&mut answer);
        assert!(answer.len() >= 40, "no answer to {:?}...", &bytes[40..bytes.len().min(60)]);
    }
    let r = tcp_json(&s, "127.0.0.1", &["-n", "10M", "-i", "0"]);
    let (sent, got) = check_flow(&r, "up", 1);
    assert_eq!(sent, got);
    let fds = fds_settle(pid, before.0);
    assert!(fds <= before.0, "server fds {} before, {fds} after", before.0);
}

/// Back to back tests from one client against --max-concurrent 1, with no --busy-wait: the
/// server frees a test's slot before the client has its results, so the next is never busy.
#[test]
fn back_to_back_tests_are_never_refused_as_busy() {
    let s = Server::start(&[]);
    let port = s.port.to_string();
    for i in 0..15 {
        let run = netchar(&["tcp", "127.0.0.1", "-p", &port, "-n", "100k", "-i", "0", "--json"]);
        assert_eq!(run.code, 0, "test {i}: {}", run.stderr);
    }
}

/// A client killed mid-test (TCP and UDP, both directions): the server notices, logs the test
/// with its error, closes everything it opened for it, and serves the next test at once.
#[test]
fn a_client_killed_mid_test_costs_the_server_nothing() {
    let s = Server::start(&[]);
    let pid = s.child.id();
    let _ = tcp_json(&s, "127.0.0.1", &["-n", "1M", "-i", "0"]);
    let (baseline, _) = fds_and_rss(pid);
    let port = s.port.to_string();
    for args in [["tcp", "-R"], ["tcp", "--bidir"], ["udp", "-R"], ["udp", "--bidir"]] {
        let mut child = std::process::Command::new(BIN)
            .args([args[0], "127.0.0.1", "-p", &port, "-t", "30", "-b", "50M", args[1]])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(1200));
        child.kill().unwrap();
        let _ = child.wait();
        // The next test is admitted: the killed one's slot was freed (--busy-wait covers the
        // server noticing the dead client: its control connection's reset or silence).
        let r = client_json("tcp", &s, "127.0.0.1", &["-n", "5M", "-i", "0", "--busy-wait", "15"]);
        let (sent, got) = check_flow(&r, "up", 1);
        assert_eq!(sent, got, "after killing {args:?}");
    }
    let fds = fds_settle(pid, baseline);
    assert!(fds <= baseline, "server fds {baseline} before, {fds} after four killed clients");
    let lines = s.log_lines(Duration::from_millis(500));
    assert!(lines.iter().filter(|l| l.contains("error")).count() >= 4, "{lines:?}");
}

/// A client asking for the largest blocks (`-l 16Mi`) on several streams: a read takes what
/// the socket has queued, up to its receive buffer (tens of MiB), so a server reading into one
/// block per stream held ~100 MB for these 8 streams and 440-590 MB for 128. Reads are capped
/// at 1 MiB, and an end that only receives (no `--verify`) builds no payload generator: the
/// server grows by the 8 read buffers and what any test costs, and the bytes still match.
#[test]
fn the_largest_blocks_cost_a_receiving_server_one_capped_read_per_stream() {
    let s = Server::start(&[]);
    let pid = s.child.id();
    let (_, before) = fds_and_rss(pid);
    let r = tcp_json(&s, "127.0.0.1", &["-P", "8", "-l", "16Mi", "-t", "1", "-i", "0"]);
    check_flow(&r, "up", 8);
    let grown = peak_rss(pid).saturating_sub(before);
    // 8 reads of 1 MiB, and 8 MiB for the rest (threads' stacks, records, allocator slack).
    let bound = 8 * 1024 + 8 * 1024;
    assert!(grown <= bound, "the server grew by {grown} KiB for 8 streams of -l 16Mi (bound {bound} KiB)");
}

/// Request/response with the largest sizes (`-l` and `--response` 16 MiB): the responder held
/// 64 whole answers per connection, so `rr -P 4 --response 16Mi` made a server fill 4 GiB (and
/// answer once in a second); answers now come from a buffer of at most 1 MiB, rr's and crr's.
/// Every stream still completes transactions, and the server grows by its reads and answers.
#[test]
fn the_largest_rr_answers_cost_the_server_one_capped_buffer_per_stream() {
    let s = Server::start(&[]);
    let pid = s.child.id();
    let (_, before) = fds_and_rss(pid);
    for (kind, streams) in [("rr", 4u64), ("crr", 2)] {
        let p = streams.to_string();
        let r =
            client_json(kind, &s, "127.0.0.1", &["-P", &p, "-l", "16Mi", "--response", "16Mi", "-t", "1", "-i", "0"]);
        assert!(r["error"].is_null(), "{kind}: {}", r["error"]);
        let per_stream: Vec<u64> = r["streams"]
            .as_array()
            .unwrap_or_else(|| panic!("{kind}: no streams in {r}"))
            .iter()
            .filter(|st| st["role"] == "sender")
            .map(|st| st["rr"]["transactions"].as_u64().unwrap_or(0))
            .collect();
        assert_eq!(per_stream.len() as u64, streams, "{kind}: {r}");
        assert!(per_stream.iter().all(|&t| t > 0), "{kind}: a stream completed no transaction: {per_stream:?}");
    }
    let grown = peak_rss(pid).saturating_sub(before);
    // 4 connections × (a read of 1 MiB + answers of 1 MiB), and 8 MiB for the rest.
    let bound = 4 * 2 * 1024 + 8 * 1024;
    assert!(grown <= bound, "the server grew by {grown} KiB answering 16 MiB requests (bound {bound} KiB)");
}

/// Each thread's name and how many times the scheduler has run it so far (the third field of
/// /proc/PID/task/TID/schedstat: one per wake-up of a thread that sleeps between short jobs).
fn thread_runs(pid: u32) -> Vec<(String, String, u64)> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    tasks
        .filter_map(|t| {
            let t = t.ok()?.path();
            let name = std::fs::read_to_string(t.join("comm")).ok()?.trim().to_string();
            let runs = std::fs::read_to_string(t.join("schedstat")).ok()?.split_whitespace().nth(2)?.parse().ok()?;
            Some((t.file_name()?.to_string_lossy().into_owned(), name, runs))
        })
        .collect()
}

/// The runs of the threads present at both readings that are not data-plane workers.
fn housekeeping_runs(before: &[(String, String, u64)], after: &[(String, String, u64)]) -> u64 {
    let worker = |name: &str| name.starts_with("netchar-receive") || name.starts_with("netchar-sender");
    after
        .iter()
        .filter(|(_, name, _)| !worker(name))
        .filter_map(|(tid, _, runs)| before.iter().find(|(t, _, _)| t == tid).map(|(_, _, r)| runs.saturating_sub(*r)))
        .sum()
}

/// A server left running costs the machine a few wake-ups a second, idle and beside a test:
/// its housekeeping threads (the stop watcher, the UDP and refusal listeners, a session's
/// control thread, the collector) look at their flags a few times a second, not every 20-50 ms
/// (they woke ~33 times a second idle and ~100 times a second beside a request/response test,
/// 0.4% of its CPU). Counted by the scheduler; a busy machine only delays wake-ups.
#[test]
fn a_server_wakes_a_few_times_a_second_idle_and_beside_a_running_test() {
    let s = Server::start(&[]);
    let pid = s.child.id();
    let before = thread_runs(pid);
    std::thread::sleep(Duration::from_secs(3));
    let idle = housekeeping_runs(&before, &thread_runs(pid));
    // Stop watcher 5/s, UDP listener 5/s, refusals 4/s: 42 in 3 s.
    assert!(idle <= 66, "an idle server's threads ran {idle} times in 3 s: {:?}", thread_runs(pid));
    let port = s.port.to_string();
    let client = std::thread::spawn(move || netchar(&["rr", "127.0.0.1", "-p", &port, "-t", "4", "-i", "0", "--json"]));
    std::thread::sleep(Duration::from_millis(800));
    let before = thread_runs(pid);
    std::thread::sleep(Duration::from_secs(2));
    let after = thread_runs(pid);
    let run = client.join().unwrap();
    assert_eq!(run.code, 0, "{}", run.stderr);
    let r: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert!(f(&r["summary"]["rr"]["transactions_per_second"]) > 0.0, "{r}");
    assert!(after.iter().any(|(_, name, _)| name == "netchar-conn"), "the session's thread is not running: {after:?}");
    let busy = housekeeping_runs(&before, &after);
    // The idle threads, the control connection's thread 4/s and the collector 4/s: 44 in 2 s.
    assert!(busy <= 70, "beside a running test the server's housekeeping ran {busy} times in 2 s: {after:?}");
}
