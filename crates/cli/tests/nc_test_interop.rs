//! eCos nc_test end to end on loopback: netchar as the master (`--proto nc-test`) against
//! netchar as the slave (`netchar server --nc-test`), over IPv4 and IPv6, with exact buffer
//! and byte counts checked on both ends (the master's own counts, the slave's results record,
//! and the slave's log). The stock eCos programs are checked in memory by the golden
//! transcripts of crates/wire/tests/nc_test_golden.rs (they need a 32-bit build of the eCos
//! sources, which CI does not fetch).

#[path = "support/loopback.rs"]
mod common;
#[path = "support/require.rs"]
mod require;

use common::*;
use netchar_wire::nc_test::{Kind, Reply, Request, REPLY_LEN};
use serde_json::Value;
use std::net::UdpSocket;
use std::time::Duration;

/// A netchar server answering nc_test on ephemeral ports: (server, control port, data port).
fn slave(bind: &str) -> (Server, u16, u16) {
    slave_with(bind, &[])
}

/// As [`slave`], with more server flags (`--json`: the log in JSON lines).
fn slave_with(bind: &str, extra: &[&str]) -> (Server, u16, u16) {
    let mut args = vec!["--nc-test", "--nc-test-port", "0", "--nc-test-data-port", "0"];
    args.extend_from_slice(extra);
    let server = Server::start_on(bind, &args);
    // Peer listeners announce themselves with the server's start-up lines, before its banner.
    let announced = |l: &String| l.starts_with("answering eCos nc_test masters");
    let line = match server.startup.iter().find(|l| announced(l)) {
        Some(l) => l.clone(),
        None => std::iter::from_fn(|| server.stderr.recv_timeout(Duration::from_secs(10)).ok())
            .find(announced)
            .expect("the nc_test start-up line"),
    };
    // "answering eCos nc_test masters on UDP [::]:PORT (data on port N), ..."
    let ctrl = line
        .split(" (data")
        .next()
        .and_then(|a| a.rsplit(':').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no control port in {line:?}"));
    let data = line
        .split("data on port ")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no data port in {line:?}"));
    (server, ctrl, data)
}

fn master(host: &str, ctrl: u16, data: u16, args: &[&str]) -> Run {
    let (c, d) = (ctrl.to_string(), data.to_string());
    let mut v = vec![args[0], host, "--proto", "nc-test", "-p", &c, "--nc-test-data-port", &d];
    v.extend_from_slice(&args[1..]);
    netchar(&v)
}

fn json(run: &Run) -> Value {
    assert_eq!(run.code, 0, "netchar failed: {}\n{}", run.stderr, run.stdout);
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("invalid JSON ({e}): {}", run.stdout))
}

/// The slave's log line for the test that just ended (other lines, such as the start-up
/// lines after the one `slave` waited for, are passed over).
fn slave_log(server: &Server) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let wait = deadline.saturating_duration_since(std::time::Instant::now());
        let lines = server.log_lines(wait);
        if let Some(l) = lines.into_iter().find(|l| l.starts_with("nc-test test")) {
            return l;
        }
        assert!(!wait.is_zero(), "the slave logged no test within 10 s");
    }
}

#[test]
fn udp_echo_counts_every_buffer_both_ways() {
    let (server, ctrl, data) = slave("127.0.0.1");
    let run = master("127.0.0.1", ctrl, data, &["echo", "--udp", "--pattern", "300x1024"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // The stock master's lines, then netchar's figures.
    assert!(run.stdout.contains("Start UDP echo [300,1024] - no delays"), "{}", run.stdout);
    assert!(run.stdout.contains("UDP echo - 600 bufs of 1024 bytes in "), "{}", run.stdout);
    assert!(run.stdout.contains("   slave sent 300, recvd 300"), "{}", run.stdout);
    assert!(run.stdout.contains("netchar: rtt us min"), "{}", run.stdout);
    let log = slave_log(&server);
    assert!(log.contains(&format!("received {} bytes", 300 * 1040)), "{log}");

    let r = json(&master("127.0.0.1", ctrl, data, &["echo", "--udp", "--pattern", "300x1024", "--json"]));
    assert_eq!(r["test"]["protocol"], "nc-test");
    let rr = &r["streams"][0]["rr"];
    assert_eq!(u(&rr["transactions"]), 300);
    assert_eq!(u(&rr["lost"]), 0);
    assert!(f(&rr["latency_us"]["p99"]) >= f(&rr["latency_us"]["p50"]));
    assert_eq!(u(&r["streams"][0]["bytes"]), 300 * 1040);
    assert_eq!(r["summary"]["rr"], *rr, "the summary carries the echo figures");
    assert!(r["error"].is_null(), "{}", r["error"]);
}

#[test]
fn tcp_send_and_recv_match_the_slaves_results_exactly() {
    let (server, ctrl, data) = slave("127.0.0.1");
    // TCP recv: netchar (the master) sends 100 buffers of 1024 (+16 header).
    let r = json(&master("127.0.0.1", ctrl, data, &["tcp", "-l", "1024", "-n", "102400", "--json"]));
    let up = &r["summary"]["up"];
    assert_eq!(u(&up["sender"]["bytes"]), 100 * 1040);
    assert_eq!(u(&up["receiver"]["bytes"]), 100 * 1040, "the slave's results record");
    assert_eq!(up["bytes_match"], true);
    assert!(slave_log(&server).contains(&format!("received {} bytes", 100 * 1040)));
    // TCP send (-R): the slave sends.
    let r = json(&master("127.0.0.1", ctrl, data, &["tcp", "-l", "1024", "-n", "102400", "-R", "--json"]));
    let down = &r["summary"]["down"];
    assert_eq!(u(&down["sender"]["bytes"]), 100 * 1040, "the slave's results record");
    assert_eq!(u(&down["receiver"]["bytes"]), 100 * 1040);
    assert!(slave_log(&server).contains(&format!("sent {} bytes", 100 * 1040)));
}

#[test]
fn udp_send_and_recv_over_ipv6_account_for_every_datagram() {
    if !require::ipv6_loopback("the IPv6 nc_test test") {
        return;
    }
    let (server, ctrl, data) = slave("::1");
    for (extra, flow) in [(None, "up"), (Some("-R"), "down")] {
        let mut args = vec!["udp", "--pattern", "200x512", "--json"];
        args.extend(extra);
        let r = json(&master("::1", ctrl, data, &args));
        assert_eq!(r["test"]["family"], "ipv6");
        let s = &r["summary"][flow];
        let sent = u(&s["sender"]["packets"]);
        let received = u(&s["receiver"]["packets"]);
        assert_eq!(sent, 200, "{flow}");
        // nc_test's UDP senders do not wait for the receiver (the stock master blasts, the
        // slave is paced): a loopback may drop some. Every datagram is accounted for, on the
        // counts of both ends: the receiver's count, the loss, and the slave's own log.
        assert!(received > 0 && received <= 200, "{flow}: {s}");
        assert_eq!(u(&s["receiver"]["lost"]), sent - received, "{flow}: {s}");
        let log = slave_log(&server);
        let (word, n) = if flow == "up" { ("received", received) } else { ("sent", sent) };
        assert!(log.contains(&format!("{word} {} bytes", n * 528)), "{flow}: {log}");
    }
}

/// SET_LOAD and START_IDLE/STOP_IDLE as a stock master sends them (seq reused, other fields
/// garbage): ACKed, and STOP_IDLE carries elapsed ticks and a count.
#[test]
fn set_load_and_idle_are_acked_with_figures() {
    let (_server, ctrl, _data) = slave("127.0.0.1");
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let ask = |kind: Kind, nbufs: u32| -> Reply {
        let mut req = Request::new(kind, 7, nbufs, 0xdead_beef);
        req.timeout = 0x1234_5678;
        sock.send_to(&req.encode(), ("127.0.0.1", ctrl)).unwrap();
        let mut b = [0u8; 64];
        let (n, _) = sock.recv_from(&mut b).expect("a reply");
        assert_eq!(n, REPLY_LEN);
        Reply::decode(&b[..n]).unwrap()
    };
    let r = ask(Kind::SetLoad, 20);
    assert!(r.is_ack() && r.seq == 7, "{r:?}");
    let r = ask(Kind::StartIdle, 0);
    assert!(r.is_ack(), "{r:?}");
    std::thread::sleep(Duration::from_millis(300));
    let r = ask(Kind::StopIdle, 0);
    assert!(r.is_ack(), "{r:?}");
    assert!((25..=200).contains(&r.elapsed_ticks), "{} ticks for 300 ms", r.elapsed_ticks);
    // The count is what idle-priority threads got: on a machine kept busy by other work (a
    // spinner beside CI) that is truly 0, so only its presence in the reply is checked here;
    // the counters themselves are tested in the engine (load::idle_meter_*).
    let _ = r.idle_count();
    assert!(ask(Kind::SetLoad, 0).is_ack());
    // An unknown request is refused with reason 1, as stock slaves do.
    let mut req = Request::new(Kind::SetLoad, 8, 0, 0);
    req.code = 0x4242;
    sock.send_to(&req.encode(), ("127.0.0.1", ctrl)).unwrap();
    let mut b = [0u8; 64];
    let (n, _) = sock.recv_from(&mut b).unwrap();
    let r = Reply::decode(&b[..n]).unwrap();
    assert_eq!((r.response, r.reason), (0, 1));
}

#[test]
fn no_slave_is_one_line_and_a_nonzero_exit() {
    // A port nobody answers on: the master says so after its 10 s reply wait.
    let free = UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let run = master("127.0.0.1", free, 8770, &["echo", "--udp", "--pattern", "10x64", "--json"]);
    assert_ne!(run.code, 0);
    assert!(run.stderr.contains("no nc_test slave answered"), "{}", run.stderr);
    // --json: still one document, the test that could not run with the reason.
    let r: Value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("invalid JSON ({e}): {}", run.stdout));
    assert!(r["error"].as_str().unwrap_or_default().contains("no nc_test slave answered"), "{}", r["error"]);
}

#[test]
fn flags_nc_test_cannot_honour_are_refused_before_any_traffic() {
    for args in [
        vec!["udp", "127.0.0.1", "--proto", "nc-test", "-b", "10M"],
        vec!["tcp", "127.0.0.1", "--proto", "nc-test", "-t", "5"],
        vec!["echo", "127.0.0.1", "--proto", "nc-test", "--pattern", "10x64,20x128"],
        vec!["echo", "127.0.0.1", "--proto", "nc-test", "--pattern", "10x64", "--nft-counter", "inet t c"],
        // A gate on a figure the test will not have is refused before it runs.
        vec!["echo", "127.0.0.1", "--proto", "nc-test", "--pattern", "10x64", "--expect", "up.receiver.bytes >= 1"],
        // bwsweep has no --proto at all: clap's one line.
        vec!["suite", "bwsweep", "127.0.0.1", "--proto", "nc-test"],
    ] {
        let run = netchar(&args);
        assert_ne!(run.code, 0, "{args:?}");
        assert!(run.stderr.contains("nc") || run.stderr.contains("'--proto'"), "{args:?}: {}", run.stderr);
        assert_eq!(run.stderr.trim().lines().count(), 1, "{args:?}: one line: {}", run.stderr);
    }
}

/// A single test runs as any test does through the engine's repeat job: a warm-up run, then
/// counted runs each headed and saved as it ends with the slave's exact counts, the target's
/// console read around each, the statistics over the counted runs, and the gates judged on
/// them (exit 1 on a miss).
#[test]
fn a_single_test_repeats_saves_reads_the_console_and_is_judged() {
    let (server, ctrl, data) = slave("127.0.0.1");
    let dir = std::env::temp_dir().join(format!("netchar-nc-test-repeat-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let save = dir.to_str().unwrap();
    let console = "echo board up; sleep 30";
    let args = ["echo", "--udp", "--pattern", "120x256", "--warmup", "1", "--repeat", "2", "--save", save];
    let gates = ["--expect", "rr.transactions_per_second >= 1", "--console-cmd", console];
    let run = master("127.0.0.1", ctrl, data, &[&args[..], &gates[..]].concat());
    assert_eq!(run.code, 0, "{}\n{}", run.stderr, run.stdout);
    let headings: Vec<&str> = run.stdout.lines().filter(|l| l.starts_with("=== ")).collect();
    assert_eq!(headings.len(), 4, "three runs and the statistics: {}", run.stdout);
    assert!(headings[0].contains("warm-up"), "{headings:?}");
    assert_eq!(run.stdout.matches("   slave sent 120, recvd 120").count(), 3, "{}", run.stdout);
    assert!(run.stdout.contains("rr.transactions_per_second: "), "{}", run.stdout);
    // Every run reached the slave, whose log counts each buffer both ways.
    let mut logged = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while logged.len() < 3 && std::time::Instant::now() < deadline {
        logged
            .extend(server.log_lines(Duration::from_millis(200)).into_iter().filter(|l| l.starts_with("nc-test test")));
    }
    assert_eq!(logged.len(), 3, "{logged:?}");
    assert!(logged.iter().all(|l| l.contains(&format!("received {} bytes", 120 * (256 + 16)))), "{logged:?}");
    // The counted runs only, each with the slave's record and the console's line.
    let mut saved: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    saved.sort();
    assert_eq!(saved.len(), 2, "{saved:?}");
    for path in &saved {
        let r: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(r["test"]["protocol"], "nc-test");
        assert_eq!(u(&r["streams"][0]["rr"]["transactions"]), 120, "{}", path.display());
        assert_eq!(u(&r["streams"][0]["bytes"]), 120 * 272);
        let lines = r["console"]["lines"].as_array().expect("the console's lines");
        assert!(lines.iter().any(|l| l["text"] == "board up"), "{}", r["console"]);
    }
    // A gate no loopback can meet: the runs are reported, then one line and exit 1.
    let miss = master(
        "127.0.0.1",
        ctrl,
        data,
        &["echo", "--udp", "--pattern", "20x64", "--repeat", "2", "--json", "--expect", "rr.latency_us.p50 <= 0.001"],
    );
    assert_eq!(miss.code, 1, "{}", miss.stderr);
    assert!(miss.stderr.contains("expectation not met: rr.latency_us.p50 <= 0.001 (measured "), "{}", miss.stderr);
    let runs: Value = serde_json::from_str(&miss.stdout).unwrap_or_else(|e| panic!("{e}: {}", miss.stdout));
    let runs = runs.as_array().expect("--repeat with --json: one array");
    assert_eq!(runs.len(), 2);
    assert!(runs.iter().all(|r| u(&r["streams"][0]["rr"]["transactions"]) == 20), "{runs:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// One test of the suite's text output: the stock master's lines from its `Start` line on.
struct TextTest {
    /// "UDP echo", "TCP send", ...
    name: String,
    buflen: u64,
    /// The slave's results record: (buffers it sent, buffers it received).
    slave: (u64, u64),
    /// netchar's figures line.
    figures: String,
}

fn text_tests(stdout: &str) -> Vec<TextTest> {
    let mut tests: Vec<TextTest> = Vec::new();
    for line in stdout.lines() {
        if let Some(rest) = line.strip_prefix("Start ") {
            // "Start UDP echo [640,1024] - no delays"
            let (name, counts) = rest.split_once(" [").unwrap();
            let buflen = counts.split([',', ']']).nth(1).unwrap().parse().unwrap();
            tests.push(TextTest { name: name.into(), buflen, slave: (u64::MAX, u64::MAX), figures: String::new() });
        } else if let Some(rest) = line.strip_prefix("   slave sent ") {
            let (sent, recvd) = rest.split_once(", recvd ").unwrap();
            tests.last_mut().unwrap().slave = (sent.parse().unwrap(), recvd.parse().unwrap());
        } else if line.starts_with("    netchar: ") {
            tests.last_mut().unwrap().figures = line.to_string();
        }
    }
    tests
}

/// The number after `word ` in `text`.
fn number_after(text: &str, word: &str) -> u64 {
    let rest = text.split(&format!("{word} ")).nth(1).unwrap_or_else(|| panic!("no {word:?} in {text}"));
    rest.split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
}

/// `suite ecos --proto nc-test --quick --json` is one JSON document (an array, a result per
/// test) whose counts are the slave's own: each result's slave-side figures equal what the
/// slave logged for that test, and the text run of the same sequence shows the same tests with
/// the same buffer counts. The text and JSON runs go side by side, each against its own slave.
#[test]
fn suite_json_is_one_document_with_the_figures_the_slave_logged_and_the_text_shows() {
    let (text_slave, text_ctrl, text_data) = slave("127.0.0.1");
    let (json_slave, json_ctrl, json_data) = slave_with("127.0.0.1", &["--json"]);
    let suite = ["suite", "ecos", "--quick"];
    let text_run = std::thread::spawn(move || {
        let mut args = suite.to_vec();
        args.extend(["127.0.0.1", "--proto", "nc-test"]);
        let (c, d) = (text_ctrl.to_string(), text_data.to_string());
        args.extend(["-p", &c, "--nc-test-data-port", &d]);
        netchar(&args)
    });
    let (c, d) = (json_ctrl.to_string(), json_data.to_string());
    // The plots and the HTML report of the same run, as for any suite.
    let out = std::env::temp_dir().join(format!("netchar-nc-test-suite-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let (plots, report) = (out.join("plots"), out.join("report.html"));
    let (plots_arg, report_arg) = (plots.display().to_string(), report.display().to_string());
    let mut args = suite.to_vec();
    args.extend(["127.0.0.1", "--proto", "nc-test", "-p", &c, "--nc-test-data-port", &d, "--json"]);
    args.extend(["--plot", &plots_arg, "--report", &report_arg]);
    let doc = json(&netchar(&args));
    let text = text_run.join().unwrap();
    assert_eq!(text.code, 0, "{}\n{}", text.stderr, text.stdout);
    let html = std::fs::read_to_string(&report).expect("--report wrote the HTML report");
    assert!(html.contains("nc-test"), "the report embeds the results");
    let svgs = std::fs::read_dir(&plots).expect("--plot wrote its directory").count();
    assert!(svgs > 0, "--plot wrote no plots");
    let _ = std::fs::remove_dir_all(&out);

    let results = doc.as_array().expect("one JSON array");
    let tests = text_tests(&text.stdout);
    // nc_test_master's sequence, short: TCP echo 64x10240, UDP and TCP echo at 2 slave loads
    // and under 2 pause patterns.
    assert_eq!(tests.len(), 9, "{}", text.stdout);
    assert_eq!(results.len(), tests.len(), "a result per test the text shows");

    // The JSON run's slave logged one JSON line per test, in order.
    let mut logged: Vec<Value> = Vec::new();
    while logged.len() < results.len() {
        let lines = json_slave.log_lines(Duration::from_secs(10));
        assert!(!lines.is_empty(), "the slave logged {} of {} tests", logged.len(), results.len());
        logged.extend(lines.iter().filter_map(|l| serde_json::from_str::<Value>(l).ok()));
    }
    let text_logged: Vec<String> = {
        let mut v = Vec::new();
        while v.len() < tests.len() {
            let lines = text_slave.log_lines(Duration::from_secs(10));
            assert!(!lines.is_empty(), "the text run's slave logged {} of {} tests", v.len(), tests.len());
            v.extend(lines.into_iter().filter(|l| l.starts_with("nc-test test")));
        }
        v
    };

    for (i, ((r, log), t)) in results.iter().zip(&logged).zip(&tests).enumerate() {
        let what = format!("test {} ({})", i + 1, t.name);
        assert_eq!(r["test"]["protocol"], "nc-test", "{what}");
        assert!(r["error"].is_null(), "{what}: {}", r["error"]);
        assert_eq!(log["event"], "test", "{what}: {log}");
        assert_eq!(log["kind"], r["test"]["kind"], "{what}");
        let td = t.buflen + 16;
        assert_eq!(u(&r["test"]["block_bytes"]), if t.name.ends_with("echo") { t.buflen } else { td }, "{what}");
        let slave_logged = u(&log["flows"][0]["bytes"]);
        let text_slave_logged =
            number_after(&text_logged[i], if t.name.ends_with("send") { "sent" } else { "received" });
        let stream = |flow: &str, by: &str| -> u64 {
            let s = r["streams"].as_array().unwrap().iter().find(|s| s["flow"] == flow && s["measured_by"] == by);
            u(&s.unwrap_or_else(|| panic!("{what}: no {flow} record by the {by}: {r}"))["bytes"])
        };
        if t.name.ends_with("echo") {
            // The master's counts: it sent every buffer, the slave echoed each one.
            let rr = &r["summary"]["rr"];
            assert_eq!(u(&rr["lost"]), 0, "{what}: {rr}");
            assert_eq!(stream("up", "client"), slave_logged, "{what}: sent = what the slave received");
            assert_eq!(u(&rr["transactions"]) * td, slave_logged, "{what}: every buffer came back");
            // The text run: the same buffers, the slave's record and netchar's counts.
            assert_eq!(t.slave.0 * td, text_slave_logged, "{what}: {}", t.figures);
            assert_eq!(t.slave, (u(&rr["transactions"]), u(&rr["transactions"])), "{what}");
            assert_eq!(number_after(&t.figures, ", received"), u(&rr["transactions"]), "{what}: {}", t.figures);
        } else if t.name.ends_with("send") {
            // The slave sends: its results record is the server's record in the JSON.
            assert_eq!(stream("down", "server"), slave_logged, "{what}");
            assert_eq!(stream("down", "client"), slave_logged, "{what}: nothing lost on loopback");
            assert_eq!(t.slave.0 * td, text_slave_logged, "{what}");
            assert_eq!(t.slave.0 * td, slave_logged, "{what}: the same buffers in both runs");
        } else {
            assert_eq!(stream("up", "server"), slave_logged, "{what}");
            assert_eq!(stream("up", "client"), slave_logged, "{what}: nothing lost on loopback");
            assert_eq!(t.slave.1 * td, text_slave_logged, "{what}");
            assert_eq!(t.slave.1 * td, slave_logged, "{what}: the same buffers in both runs");
        }
    }
}
