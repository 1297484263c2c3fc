//! The built-in suites end to end over loopback: every row they promise, each from a real test,
//! and the flags a suite's mode cannot honour refused in one line.

#[path = "support/loopback.rs"]
mod common;
#[path = "support/ecos.rs"]
mod ecos;

use common::*;
use serde_json::Value;
use std::time::Duration;

/// The loopback device's MTU: the path MTU of every loopback test.
fn loopback_mtu() -> u64 {
    std::fs::read_to_string("/sys/class/net/lo/mtu").ok().and_then(|m| m.trim().parse().ok()).unwrap_or(65536)
}

/// The sizes `suite sizes` runs over TCP and UDP on a path of `mtu` bytes (IPv4): its list
/// with the jumbo-frame payloads (9000 - 52 and 9000 - 28) where the path takes them, UDP
/// only where the datagram fits.
fn expected_sizes(mtu: u64) -> (Vec<u64>, Vec<u64>) {
    let mut tcp = vec![64, 256, 512, 1024, 1448, 1472, 4096, 16384, 65507];
    if mtu >= 9000 {
        tcp.extend([8948, 8972]);
        tcp.sort_unstable();
    }
    let udp = tcp.iter().copied().filter(|s| s + 28 <= mtu).collect();
    (tcp, udp)
}

fn suite_json(s: &Server, name: &str) -> Vec<Value> {
    let port = s.port.to_string();
    // 0.5 s: on a machine loaded to 10+ runnable threads a worker started 0.2 s late was seen
    // to find its time already up and send nothing.
    let run = netchar(&["suite", name, "127.0.0.1", "-p", &port, "--duration", "0.5", "--json"]);
    assert_eq!(run.code, 0, "{name}: {}", run.stderr);
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    v.as_array().unwrap().clone()
}

#[test]
fn netio_runs_tcp_and_udp_both_ways_for_each_block_size() {
    let s = Server::start(&[]);
    let runs = suite_json(&s, "netio");
    assert_eq!(runs.len(), 6 * 4);
    let sizes: Vec<u64> = runs.iter().step_by(4).map(|r| r["test"]["block_bytes"].as_u64().unwrap()).collect();
    assert_eq!(sizes, [1024, 2048, 4096, 8192, 16384, 32767]);
    for (i, r) in runs.iter().enumerate() {
        assert!(r["error"].is_null(), "{}", r["error"]);
        let (kind, dir) = [("tcp", "up"), ("tcp", "down"), ("udp", "up"), ("udp", "down")][i % 4];
        assert_eq!(r["test"]["kind"], kind);
        // Each row is what its receiver counted of what its sender sent, whatever share of the
        // machine the half second gave them (a worker started late on a busy machine was seen
        // to send little or nothing): TCP delivers every byte, a UDP datagram either arrived
        // or was lost.
        let (tx, rx) = (&r["summary"][dir]["sender"], &r["summary"][dir]["receiver"]);
        let size = r["test"]["block_bytes"].as_u64().unwrap();
        if kind == "tcp" {
            assert_eq!(u(&tx["total_bytes"]), u(&rx["total_bytes"]), "{size} {kind} {dir}: {}", r["summary"][dir]);
        } else {
            let (sent, received, lost) = (u(&tx["packets"]), u(&rx["packets"]), u(&rx["lost"]));
            assert_eq!(received + lost, sent, "{size} {kind} {dir}: {}", r["summary"][dir]);
        }
        let (bytes, seconds) = (u(&rx["bytes"]), f(&rx["seconds"]));
        let bps = f(&rx["bits_per_second"]);
        let counted = if seconds > 0.0 { bytes as f64 * 8.0 / seconds } else { 0.0 };
        assert!((bps - counted).abs() <= 1e-6 * counted.max(1.0), "{size} {kind} {dir}: {bps} b/s, counted {counted}");
    }
    let port = s.port.to_string();
    let text = netchar(&["suite", "netio", "127.0.0.1", "-p", &port, "--duration", "0.1"]);
    assert!(
        text.stdout.contains("| Packet size |   TCP-tx    |   TCP-rx    |   UDP-tx    |   UDP-rx    |"),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains("| 32767 bytes |"), "{}", text.stdout);
}

/// Every size of the default list, over TCP and UDP, each a fixed transfer (`-n`): the sender
/// wrote exactly those bytes, a TCP receiver got them all, and every UDP datagram arrived or was
/// counted lost. The timed sweep's table is the text run's.
#[test]
fn sizes_sweeps_block_sizes_over_tcp_and_udp() {
    let s = Server::start(&[]);
    let port = s.port.to_string();
    let run = netchar(&["suite", "sizes", "127.0.0.1", "-p", &port, "-n", "100000", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc: Value = serde_json::from_str(&run.stdout).unwrap();
    let runs = doc.as_array().unwrap();
    let (tcp, udp) = expected_sizes(loopback_mtu());
    let sizes = |kind: &str| -> Vec<u64> {
        runs.iter().filter(|r| r["test"]["kind"] == kind).map(|r| u(&r["test"]["block_bytes"])).collect()
    };
    assert_eq!((sizes("tcp"), sizes("udp")), (tcp.clone(), udp), "the loopback MTU is {}", loopback_mtu());
    for r in runs {
        let up = &r["summary"]["up"];
        assert!(r["error"].is_null(), "{}", r["error"]);
        assert_eq!(u(&up["sender"]["total_bytes"]), 100_000, "{}", r["test"]);
        if r["test"]["kind"] == "tcp" {
            assert_eq!(u(&up["receiver"]["total_bytes"]), 100_000, "{}", r["test"]);
        }
    }
    assert!(runs[tcp.len()..].iter().all(|r| r["summary"]["up"]["packets_accounted"] == true));
    let port = s.port.to_string();
    let text = netchar(&["suite", "sizes", "127.0.0.1", "-p", &port, "--duration", "0.1"]);
    assert!(text.stdout.contains("MB/s (2^20) Mbit/s (10^6)"), "{}", text.stdout);
}

/// `suite sizes -n`: each block size moves exactly that many bytes, the last block shorter
/// where the size does not divide it (stackthru's X-Block), counted at both ends; the table
/// shows the whole blocks and the last one.
#[test]
fn sizes_transfer_exactly_the_bytes_asked_for_per_block_size() {
    let s = Server::start(&[]);
    let port = s.port.to_string();
    let args = ["suite", "sizes", "127.0.0.1", "-p", &port, "-n", "1000000", "-b", "1448,65507"];
    let run = netchar(&[&args[..], &["--json"]].concat());
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc: Value = serde_json::from_str(&run.stdout).unwrap();
    let runs = doc.as_array().unwrap();
    let shape: Vec<(&str, u64)> =
        runs.iter().map(|r| (r["test"]["kind"].as_str().unwrap(), u(&r["test"]["block_bytes"]))).collect();
    assert_eq!(shape, [("tcp", 1448), ("tcp", 65507), ("udp", 1448), ("udp", 65507)]);
    for r in runs {
        let up = &r["summary"]["up"];
        assert_eq!(u(&up["sender"]["total_bytes"]), 1_000_000, "{}", r["test"]);
        if r["test"]["kind"] == "tcp" {
            assert_eq!(u(&up["receiver"]["total_bytes"]), 1_000_000, "{}", r["test"]);
        } else {
            // 690 datagrams of 1448 and one of 880; 15 of 65507 and one of 17395.
            let whole = 1_000_000 / u(&r["test"]["block_bytes"]);
            assert_eq!(u(&up["sender"]["packets"]), whole + 1, "{up}");
            assert!(u(&up["receiver"]["packets"]) + u(&up["receiver"]["lost"]) == whole + 1, "{up}");
        }
    }
    let text = netchar(&args);
    assert_eq!(text.code, 0, "{}", text.stderr);
    let rows: Vec<Vec<&str>> = text.stdout.lines().skip(1).map(|l| l.split_whitespace().collect()).collect();
    let header: Vec<&str> = text.stdout.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header[..7], ["proto", "block", "sent", "blocks", "x-block", "received", "real"], "{}", text.stdout);
    assert_eq!(rows[0][..6], ["TCP", "1448", "1000000", "690", "880", "1000000"], "{}", text.stdout);
    assert_eq!(rows[1][..6], ["TCP", "65507", "1000000", "15", "17395", "1000000"], "{}", text.stdout);
    assert_eq!(rows[3][..5], ["UDP", "65507", "1000000", "15", "17395"], "{}", text.stdout);
}

/// `suite netio -b LIST -u --tx-only`: the sizes asked for, UDP only, client to server only,
/// each datagram of its size; `--preset mdk` is the MDK write-up's sizes, and the table has a
/// row per size and a column per protocol and direction that ran.
#[test]
fn netio_takes_a_size_list_or_the_mdk_preset_and_honours_udp_and_tx_only() {
    let s = Server::start(&[]);
    let port = s.port.to_string();
    let base = ["suite", "netio", "127.0.0.1", "-p", &port, "--duration", "0.3"];
    let run = netchar(&[&base[..], &["-b", "256,1k,1440,2000,4000", "-u", "--tx-only", "--json"]].concat());
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc: Value = serde_json::from_str(&run.stdout).unwrap();
    let runs = doc.as_array().unwrap();
    let sizes: Vec<u64> = runs.iter().map(|r| u(&r["test"]["block_bytes"])).collect();
    assert_eq!(sizes, [256, 1024, 1440, 2000, 4000]);
    for r in runs {
        assert_eq!((r["test"]["kind"].as_str(), r["test"]["direction"].as_str()), (Some("udp"), Some("up")));
        let tx = &r["summary"]["up"]["sender"];
        assert!(u(&tx["packets"]) > 0, "{tx}");
        assert_eq!(u(&tx["total_bytes"]), u(&tx["packets"]) * u(&r["test"]["block_bytes"]), "{tx}");
    }
    let text = netchar(&[&base[..], &["--preset", "mdk", "--tcp"]].concat());
    assert_eq!(text.code, 0, "{}", text.stderr);
    let lines: Vec<&str> = text.stdout.lines().collect();
    assert_eq!(lines[0], "| Packet size |   TCP-tx    |   TCP-rx    |", "{}", text.stdout);
    for (line, size) in lines[2..7].iter().zip(["256", "1024", "1440", "2000", "4000"]) {
        assert!(line.starts_with(&format!("| {size:>5} bytes | ")) && line.matches(" MB/s |").count() == 2, "{line}");
    }
    assert_eq!(lines.len(), 8, "a row per size and the footer:\n{}", text.stdout);
}

/// Both modes of `suite ecos` print the same tests with the same words for the same
/// directions: natively against `netchar server` and with `--proto nc6-test` against
/// `netchar server --nc-test` (its slave), the same `Start` lines, result lines and slave
/// counts, and in their JSON every "send" is a flow from the server (down), every "recv" one
/// to it (up). The four runs go side by side, each against its own server.
#[test]
fn ecos_prints_the_same_words_for_the_same_directions_in_both_modes() {
    let native = |json: bool| {
        std::thread::spawn(move || {
            let s = Server::start(&[]);
            let port = s.port.to_string();
            let mut args = vec!["suite", "ecos", "127.0.0.1", "-p", &port, "--quick"];
            if json {
                args.push("--json");
            }
            netchar(&args)
        })
    };
    let nc6 = |json: bool| {
        std::thread::spawn(move || {
            let s = Server::start(&["--nc-test", "--nc-test-port", "0", "--nc-test-data-port", "0"]);
            let (ctrl, data) = nc_test_ports(&s);
            let mut args = vec!["suite", "ecos", "127.0.0.1", "--proto", "nc6-test", "--quick"];
            args.extend(["-p", &ctrl, "--nc-test-data-port", &data]);
            if json {
                args.push("--json");
            }
            netchar(&args)
        })
    };
    let runs = [native(false), native(true), nc6(false), nc6(true)].map(|t| t.join().unwrap());
    for (run, mode) in runs.iter().zip(["native", "native --json", "nc6-test", "nc6-test --json"]) {
        assert_eq!(run.code, 0, "{mode}: {}\n{}", run.stderr, run.stdout);
    }
    ecos::check_quick_text(&runs[0].stdout, "native");
    ecos::check_quick_text(&runs[2].stdout, "nc6-test");
    for (run, mode) in [(&runs[1], "native"), (&runs[3], "nc6-test")] {
        let doc: Value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{mode}: {e}"));
        assert_eq!(ecos::directions(&doc), ecos::quick_directions(), "{mode}");
    }
}

/// The nc_test control and data ports a server announced.
fn nc_test_ports(server: &Server) -> (String, String) {
    let announced = |l: &String| l.starts_with("answering eCos nc_test masters");
    let line = match server.startup.iter().find(|l| announced(l)) {
        Some(l) => l.clone(),
        None => std::iter::from_fn(|| server.stderr.recv_timeout(Duration::from_secs(10)).ok())
            .find(announced)
            .expect("the nc_test start-up line"),
    };
    // "answering eCos nc_test masters on UDP [::]:PORT (data on port N), ..."
    let ctrl = line.split(" (data").next().and_then(|a| a.rsplit(':').next()).unwrap().to_string();
    let data = line.split("data on port ").nth(1).and_then(|r| r.split(')').next()).unwrap().to_string();
    (ctrl, data)
}

/// Every suite takes only its own flags, and a flag its mode cannot honour is refused before
/// any traffic, in one line (no server is running: none is reached).
#[test]
fn suite_flags_a_mode_cannot_honour_are_refused_in_one_line() {
    let h = "127.0.0.1";
    for (args, needle) in [
        (vec!["suite", "netio", h, "--rx-timeout", "3"], "--rx-timeout 3: with --proto netio only"),
        (vec!["suite", "ecos", h, "--nc-test-data-port", "8770"], "--nc-test-data-port 8770: with --proto nc-test"),
        (
            vec!["suite", "ecos", h, "--proto", "iperf3"],
            "--proto iperf3: expected one of 'auto', 'netchar', 'nc-test', 'nc6-test'",
        ),
        (
            vec!["suite", "netio", h, "--proto", "nc-test"],
            "--proto nc-test: expected one of 'auto', 'netchar', 'netio'",
        ),
        (vec!["suite", "bwsweep", h, "--proto", "nc-test"], "unexpected argument '--proto'"),
        (
            vec!["suite", "ecos", h, "--duration", "1"],
            "--time 1: the ecos suite runs nc6_test_master's counts of buffers",
        ),
        (
            vec!["suite", "ecos", h, "-t", "2"],
            "not for a time; --quick runs a short form, and bwsweep, netio and sizes take -t 2",
        ),
        (vec!["suite", "bwsweep", h, "--connect-timeout", "0"], "--connect-timeout 0: must be more than 0"),
        (vec!["suite", "netio", h, "-t", "x"], "-t x: not a number of seconds"),
        (vec!["suite", "sizes", h, "-u"], "unexpected argument '-u'"),
        (vec!["suite", "sizes", h, "-n", "1M", "--duration", "1"], "cannot be used with"),
        (vec!["suite", "netio", h, "-b", "256", "--preset", "mdk"], "cannot be used with"),
        (vec!["suite", "netio", h, "--preset", "big"], "--preset big: expected one of 'netio', 'mdk'"),
        (vec!["suite", "netio", h, "-b", "1k,x"], "-b 1k,x: \"x\" is not a size"),
        (vec!["suite", "netio", h, "-u", "-b", "64k"], "-b 65536: UDP blocks are at most 65507 bytes"),
        (vec!["suite", "sizes", h, "-n", "0"], "-n 0: at least 1 byte"),
        (vec!["suite", "nosuch", h], "unrecognized subcommand 'nosuch'; see netchar suite --help"),
    ] {
        let run = netchar(&args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(needle), "{args:?}: {:?}", run.stderr);
        assert_eq!(run.stderr.trim().lines().count(), 1, "{args:?}: one line: {}", run.stderr);
    }
}

/// Every suite with a per-step time takes `-t` for it, as the tests do (`--duration` stays),
/// and `--connect-timeout`: each result's own time is the one asked for.
#[test]
fn suites_take_t_for_each_steps_time_as_the_tests_do() {
    let s = Server::start(&[]);
    let port = s.port.to_string();
    for args in [
        vec!["bwsweep", "--from", "10M", "--to", "20M", "--step", "10M"],
        vec!["sizes", "-b", "1000"],
        vec!["netio", "-b", "1k", "--tcp"],
    ] {
        let name = args[0];
        let common = ["127.0.0.1", "-p", &port, "-t", "0.3", "--connect-timeout", "3", "--json"];
        let run = netchar(&[&["suite"], &args[..1], &common[..], &args[1..]].concat());
        assert_eq!(run.code, 0, "{name}: {}", run.stderr);
        let v: Value = serde_json::from_str(&run.stdout).unwrap();
        let runs = v.as_array().unwrap();
        assert!(!runs.is_empty(), "{name}");
        for r in runs {
            assert!(r["error"].is_null(), "{name}: {}", r["error"]);
            assert_eq!(f(&r["test"]["end"]["seconds"]), 0.3, "{name}: {}", r["test"]);
        }
    }
}

/// `--json-out FILE` means for a suite what it means for a test: the results also go to FILE,
/// as `--json` would print them (one array), and the text still goes to stdout.
#[test]
fn a_suites_json_out_holds_every_result_beside_its_table() {
    let s = Server::start(&[]);
    let port = s.port.to_string();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sizes.json");
    let args = ["suite", "sizes", "127.0.0.1", "-p", &port, "-n", "1000000", "-b", "1448"];
    let run = netchar(&[&args[..], &["--json-out", file.to_str().unwrap()]].concat());
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.starts_with("proto"), "the table on stdout: {}", run.stdout);
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let runs = doc.as_array().unwrap();
    let kinds: Vec<&str> = runs.iter().map(|r| r["test"]["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["tcp", "udp"]);
    for r in runs {
        assert_eq!(u(&r["summary"]["up"]["sender"]["total_bytes"]), 1_000_000, "{}", r["test"]);
    }
    // The same figures as the table's: its TCP row received what the file's TCP result did.
    let tcp_row: Vec<&str> = run.stdout.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(tcp_row[5], u(&runs[0]["summary"]["up"]["receiver"]["total_bytes"]).to_string());
}
