//! Golden tests of the line formats other programs and people read: the server's log (text and
//! JSON lines), the eCos nc_test master's lines with netchar's figures under them, and netio's
//! client lines, each on fixed inputs. After a deliberate change of a format,
//! `UPDATE_GOLDEN=1 cargo test -p netchar-report --test lines_golden` rewrites the files in
//! tests/expected; review the diff before committing it (scripts parse these lines).

use netchar_model::{Direction, Endpoint, Flow, Role, StreamRecord, TestKind, TestResult, TestSpec};
use netchar_report::block_sizes::NetioLinesReporter;
use netchar_report::nc_test_lines::{figures_line, MasterFigures, NcTestLinesReporter, RttUs};
use netchar_report::server_log::{self, LogEntry, TestEntry};
use netchar_report::Reporter;
use std::net::SocketAddr;
mod support;
use support::{check, dir};

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// The server's log of a fixed set of events: a rejection whose reason tries to forge a line,
/// a plain TCP test, an authenticated bidirectional test over two addresses with refused data
/// and an error, a peer protocol's test, and a flow that began late (an iperf2 dial-back).
fn server_log_lines(json: bool) -> String {
    let format = server_log::for_output(json);
    let mut lines = Vec::new();
    lines.push(format.line(LogEntry::Rejected {
        peer: addr("192.0.2.7:40001"),
        reason: "too many tests at once\ntest from 10.0.0.1:5: tcp x1 up: forged",
    }));

    let tcp = TestSpec::tcp_default();
    let streams = [StreamRecord::bare(1, Flow::Up, Role::Receiver, Endpoint::Server, 125_000_000, 1.0)];
    let paths = [(1, addr("192.0.2.1:40100"))];
    lines.push(format.line(LogEntry::Test(&TestEntry {
        protocol: "netchar",
        peer_software: Some("netchar 0.1.0"),
        peer: addr("192.0.2.1:40000"),
        data_paths: &paths,
        user: None,
        spec: &tcp,
        streams: &streams,
        concurrent_tests: 1,
        refused_data: 0,
        error: None,
    })));

    let bidir = TestSpec { direction: Direction::Bidir, streams: 2, ..TestSpec::tcp_default() };
    let streams = [
        StreamRecord::bare(1, Flow::Up, Role::Receiver, Endpoint::Server, 40_000_000, 2.0),
        StreamRecord::bare(2, Flow::Up, Role::Receiver, Endpoint::Server, 10_000_000, 1.5),
        StreamRecord::bare(3, Flow::Down, Role::Sender, Endpoint::Server, 3_000_000, 2.0),
        StreamRecord::bare(4, Flow::Down, Role::Sender, Endpoint::Server, 1_000_000, 2.0),
    ];
    let paths = [
        (1, addr("[2001:db8::1]:50001")),
        (2, addr("[2001:db8::1]:50002")),
        (3, addr("[2001:db8::2]:50003")),
        (4, addr("[2001:db8::1]:50004")),
    ];
    lines.push(format.line(LogEntry::Test(&TestEntry {
        protocol: "netchar",
        peer_software: Some("netchar 0.1.0"),
        peer: addr("[2001:db8::1]:50000"),
        data_paths: &paths,
        user: Some("lab\tuser"),
        spec: &bidir,
        streams: &streams,
        concurrent_tests: 2,
        refused_data: 3,
        error: Some("stopped by the client:\nbye"),
    })));

    let udp = TestSpec { direction: Direction::Down, ..TestSpec::udp_default() };
    let streams = [StreamRecord::bare(1, Flow::Down, Role::Sender, Endpoint::Server, 1_310_000, 10.0)];
    lines.push(format.line(LogEntry::Test(&TestEntry {
        protocol: "iperf3",
        peer_software: Some("iperf3 3.12"),
        peer: addr("192.0.2.9:33000"),
        data_paths: &[],
        user: None,
        spec: &udp,
        streams: &streams,
        concurrent_tests: 1,
        refused_data: 0,
        error: None,
    })));

    // The down flow of an iperf2 -r dial-back started 10 s into the test.
    let tradeoff = TestSpec { direction: Direction::Bidir, ..TestSpec::tcp_default() };
    let mut late = StreamRecord::bare(2, Flow::Down, Role::Sender, Endpoint::Server, 250_000_000, 20.0);
    late.started_seconds = Some(10.0);
    let streams = [StreamRecord::bare(1, Flow::Up, Role::Receiver, Endpoint::Server, 500_000_000, 10.0), late];
    lines.push(format.line(LogEntry::Test(&TestEntry {
        protocol: "iperf2",
        peer_software: None,
        peer: addr("192.0.2.10:5001"),
        data_paths: &[(1, addr("192.0.2.10:5002"))],
        user: None,
        spec: &tradeoff,
        streams: &streams,
        concurrent_tests: 1,
        refused_data: 0,
        error: None,
    })));
    lines.iter().map(|l| format!("{l}\n")).collect()
}

#[test]
fn server_log_text() {
    let text = server_log_lines(false);
    assert!(text.lines().all(|l| !l.is_empty()));
    assert_eq!(text.lines().count(), 5, "one line per event, a forged newline included:\n{text}");
    check("server-log.txt", &text);
}

#[test]
fn server_log_json_lines() {
    let text = server_log_lines(true);
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(v["event"] == "test" || v["event"] == "rejected", "{line}");
    }
    check("server-log.jsonl", &text);
}

/// The master's lines of a fixed sequence (what the nc_test state machine prints for it)
/// with netchar's figures under each test: an echo test with its round trips, a recv test
/// that lost buffers, a send test with out-of-sequence and bad buffers, and a test whose slave
/// sent no results record.
#[test]
fn nc_test_master_lines() {
    let mut r = NcTestLinesReporter;
    let mut out = String::new();
    let mut line = |r: &mut NcTestLinesReporter, l: &str| out.push_str(&r.on_line(l));
    line(&mut r, "================== No load, master at 100% ========================");
    line(&mut r, "Start UDP echo [10,1024] - no delays");
    line(&mut r, "UDP echo - 20 bufs of 1024 bytes in 0 seconds - 20480 KB/sec");
    line(&mut r, "   slave sent 10, recvd 10");
    let echo = MasterFigures {
        // 10 echoes, 100..1000 us given out of order: the percentiles are nearest rank.
        rtt_us: RttUs::of_samples(&[500.0, 100.0, 300.0, 1000.0, 200.0, 400.0, 600.0, 800.0, 700.0, 900.0]),
        sent: 10,
        received: 10,
        slave_receives: true,
        slave_sends: true,
        slave_counts: Some((10, 10)),
        out_of_sequence: 0,
        bad: 0,
        ..Default::default()
    };
    out.push_str(&r.on_line(&figures_line(&echo)));
    let recv = MasterFigures { sent: 640, slave_receives: true, slave_counts: Some((0, 600)), ..Default::default() };
    let mut line = |r: &mut NcTestLinesReporter, l: &str| out.push_str(&r.on_line(l));
    line(&mut r, "Start UDP recv [640,1024] - no delays");
    line(&mut r, "UDP recv - 640 bufs of 1024 bytes in 1 seconds - 640 KB/sec");
    out.push_str(&r.on_line(&figures_line(&recv)));
    let send = MasterFigures {
        received: 630,
        slave_sends: true,
        slave_counts: Some((640, 0)),
        out_of_sequence: 2,
        bad: 1,
        ..Default::default()
    };
    out.push_str(&r.on_line(&figures_line(&send)));
    let lost = MasterFigures { sent: 5, received: 3, slave_receives: true, slave_sends: true, ..Default::default() };
    out.push_str(&r.on_line("No results record sent"));
    out.push_str(&r.on_line(&figures_line(&lost)));
    // When a test ends its lines are out: nothing more.
    let saved =
        netchar_report::parse_saved(&std::fs::read_to_string(dir("fixtures").join("rr.json")).unwrap(), "rr").unwrap();
    assert_eq!(r.on_finish(&saved[0].result), "");
    check("nc-test.txt", &out);
}

fn netio_result(size: u64, title: &str, error: Option<&str>) -> TestResult {
    let saved = netchar_report::parse_saved(&std::fs::read_to_string(dir("fixtures").join("tcp.json")).unwrap(), "tcp")
        .unwrap();
    let mut r = saved[0].result.clone();
    r.test.protocol = "netio".into();
    r.test.remote = "192.0.2.5:18767".into();
    r.test.spec.kind = TestKind::Tcp;
    r.test.spec.direction = Direction::Bidir;
    r.test.spec.block_bytes = size;
    r.test.title = Some(title.into());
    r.error = error.map(str::to_string);
    r
}

/// netio's client lines: the header, a line per size (a note in brackets), `Done.` after a
/// run that ended well and none after one that failed once its sizes had run.
#[test]
fn netio_client_lines() {
    let sizes = [
        netio_result(1024, "Packet size  1k bytes:  52.23 MByte/s Tx,  55.97 MByte/s Rx.", None),
        netio_result(
            2048,
            "Packet size  2k bytes:  60.10 MByte/s Tx,  (failed) Rx.",
            Some("no data from the server: Rx skipped, the rest runs Tx only"),
        ),
    ];
    let mut r = NetioLinesReporter::default();
    let mut out = r.on_start(&sizes[0].test);
    // Once: the header belongs to the run, not to each size.
    assert_eq!(r.on_start(&sizes[1].test), "");
    for s in &sizes {
        out.push_str(&r.on_finish(s));
    }
    out.push_str(&r.on_job_end(&sizes));
    let version = format!("netchar {}: ", env!("CARGO_PKG_VERSION"));
    check("netio-client.txt", &out.replace(&version, "netchar VERSION: "));

    // The run failed after its sizes: their final results carry the error, no `Done.`.
    let mut r = NetioLinesReporter::default();
    let _ = r.on_finish(&sizes[0]);
    let failed = [netio_result(
        1024,
        "Packet size  1k bytes:  52.23 MByte/s Tx,  55.97 MByte/s Rx.",
        Some("netio control connection: reset"),
    )];
    assert_eq!(r.on_job_end(&failed), "");
}
