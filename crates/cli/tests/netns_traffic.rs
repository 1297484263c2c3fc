//! Ground truth for the traffic options (`--tos`/`--dscp`, `--flowlabel`, `--df`,
//! `--no-udp-checksum`, `-B`, `--bind-dev`): nftables rules in the server's namespace count
//! the packets that carry what was asked for, in both directions, and the kernel's own
//! behaviour (path MTU discovery through a router with a narrower link) is checked against
//! what the result reports.
//!
//! * `dscp_marks_both_directions_of_tcp_and_udp`: `--dscp ef` over IPv4 and IPv6, TCP and
//!   UDP, up and `-R`: the server's input hook counts the client's packets with DSCP EF, its
//!   output hook the server's own (data, or the acknowledgements of the client's data).
//! * `rrul_marks_each_flow_and_probe_with_its_class`: `rr --under-load rrul`: per DSCP class
//!   (BE, BK, CS5, EF) the server's input hook counts at least the bytes its up flow delivered
//!   and its output hook at least the bytes its down flow sent; no TCP packet carries another
//!   class.
//! * `under_load_list_marks_each_flow_in_its_own_direction`: `--under-load
//!   tcp-up:dscp=ef,tcp-down:dscp=cs1,udp-up:20M:dscp=af41`: one class per flow, so each
//!   flow's marks are told apart by direction: EF carries the up flow's bytes into the server
//!   and only acknowledgements out of it, CS1 the reverse, and every UDP datagram the server
//!   receives is AF41.
//! * `dscp_reaches_iperf3_and_iperf2_servers`: a stock `iperf3 -s` and `iperf -s` mark what
//!   they send for `-R` when netchar's request carries the TOS.
//! * `zero_udp_checksums_are_on_the_wire_both_ways`: with `--no-udp-checksum` every data
//!   datagram crosses the veth with a UDP checksum of 0, up and down; without it none does.
//! * `flow_label_is_on_the_clients_packets_and_the_servers_datagrams`: `ip6 flowlabel`.
//! * `bind_address_is_the_source_the_server_sees`: `-B` with a second address of the
//!   client's interface, and a port: the server's log and nft name that source and ports.
//! * `bind_dev_sends_through_the_second_interface`: `--bind-dev` to a second veth pair, the
//!   server's address being on the first.
//! * `df_reports_the_path_mtu_and_refuses_larger_datagrams`: client — router — server with a
//!   1280-byte link between router and server: the path MTU reported is 1280 at both ends,
//!   datagrams larger than it are refused by the sender's kernel and counted as send errors,
//!   and TCP arrives whole.
//!
//! Needs root, `ip`, `tc` and `nft` (and `iperf3`, `iperf` for the peer test); otherwise it
//! prints "skipping ..." and passes, unless NETCHAR_REQUIRE_ALL=1.
//!
//! Run: `cargo test -p netchar --test netns_traffic -- --nocapture --test-threads 1`

#[path = "support/netns.rs"]
mod netns;

use netns::{run_with_timeout, Link, Netns, Routed, Server, DEV_A, DEV_B};
use serde_json::Value;
use std::time::Duration;

const TABLE: &str = "nctraffic";
/// First 4 payload bytes of a netchar data datagram: "NC", version 1, flags 0.
const DATA_PREFIX: &str = "0x4e430100";

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_netchar")
}

/// A link, or None once the reason it cannot be made here was given.
fn link() -> Option<Link> {
    match Link::create() {
        Ok(l) => Some(l),
        Err(reason) => {
            netns::skip_or_fail(&reason);
            None
        }
    }
}

/// Gives both ends of `link` IPv6 addresses (fd00:201:x::1 on the client's side `b`, ::2 on
/// the server's side `a`, no duplicate detection so they are usable at once); returns the
/// server's.
fn add_ipv6(link: &Link) -> Result<String, String> {
    let x = link.a_ip.octets()[2];
    let (a6, b6) = (format!("fd00:201:{x}::2"), format!("fd00:201:{x}::1"));
    link.a.ip(&["-6", "addr", "add", &format!("{a6}/64"), "dev", DEV_A, "nodad"])?;
    link.b.ip(&["-6", "addr", "add", &format!("{b6}/64"), "dev", DEV_B, "nodad"])?;
    Ok(a6)
}

/// Table `inet nctraffic` in `ns` with an input and an output chain, each with `rules` (nft
/// words, each rule ending in `counter`), in order.
fn counting(ns: &Netns, input: &[&str], output: &[&str]) -> Result<(), String> {
    let _ = ns.nft(&["delete", "table", "inet", TABLE]);
    ns.nft(&["add", "table", "inet", TABLE])?;
    for (chain, hook, rules) in [("in", "input", input), ("out", "output", output)] {
        ns.nft(&["add", "chain", "inet", TABLE, chain, &format!("{{ type filter hook {hook} priority 0; }}")])?;
        for rule in rules {
            let mut args = vec!["add", "rule", "inet", TABLE, chain];
            args.extend(rule.split_whitespace());
            ns.nft(&args)?;
        }
    }
    Ok(())
}

/// The packet counts of the chain's rules, in order.
fn counts(ns: &Netns, chain: &str) -> Vec<u64> {
    ns.nft_counters("inet", TABLE, chain).unwrap_or_else(|e| panic!("nft counters: {e}")).iter().map(|c| c.0).collect()
}

/// A netchar server in `ns` on `port` (several tests in turn), with `extra` flags.
fn server(ns: &Netns, port: u16, extra: &[&str]) -> Server {
    let mut cmd = ns.command(bin());
    cmd.args(["server", "-p", &port.to_string()]).args(extra);
    Server::spawn(cmd, "listening on", Duration::from_secs(10)).unwrap_or_else(|e| panic!("server: {e}"))
}

/// Runs `netchar ARGS... --json` in `ns`; the result document, or a panic with both ends'
/// output.
fn client(ns: &Netns, args: &[&str], srv: &Server) -> Value {
    let mut cmd = ns.command(bin());
    cmd.args(args).arg("--json");
    let shown = format!("netchar {}", args.join(" "));
    let run = run_with_timeout(cmd, Duration::from_secs(60)).unwrap_or_else(|e| panic!("{shown}: {e}"));
    let ok = run.status.is_some_and(|s| s.success());
    assert!(ok, "{shown}: {:?}\nstderr:\n{}\nserver:\n{}", run.status, run.stderr, srv.stderr());
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{shown}: not JSON ({e}):\n{}", run.stdout))
}

/// A client run expected to fail: its stderr.
fn refused(ns: &Netns, args: &[&str]) -> String {
    let mut cmd = ns.command(bin());
    cmd.args(args);
    let run = run_with_timeout(cmd, Duration::from_secs(30)).unwrap();
    assert_eq!(run.status.and_then(|s| s.code()), Some(2), "netchar {}: {}", args.join(" "), run.stderr);
    run.stderr
}

fn num(doc: &Value, path: &str) -> u64 {
    path.split('.')
        .try_fold(doc, |v, k| v.get(k))
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!(".{path} is not a count in {doc}"))
}

/// The record of `role` measured by `who` in `flow` (one stream).
fn record<'a>(doc: &'a Value, flow: &str, role: &str) -> &'a Value {
    doc["streams"]
        .as_array()
        .and_then(|s| s.iter().find(|r| r["flow"] == flow && r["role"] == role))
        .unwrap_or_else(|| panic!("no {flow} {role} record in {doc}"))
}

#[test]
fn dscp_marks_both_directions_of_tcp_and_udp() {
    let Some(link) = link() else { return };
    let a6 = match add_ipv6(&link) {
        Ok(a) => a,
        Err(e) => return netns::skip_or_fail(&format!("cannot add IPv6 addresses: {e}")),
    };
    let port = 5411;
    let srv = server(&link.a, port, &[]);
    for (family, ip, host) in [("ip", "-4", link.a_ip.to_string()), ("ip6", "-6", a6)] {
        let marked = |proto: &str| format!("meta l4proto {proto} {family} dscp ef counter");
        let unmarked = |proto: &str| format!("meta l4proto {proto} {family} dscp != ef counter");
        let rules = [marked("tcp"), unmarked("tcp"), marked("udp"), unmarked("udp")];
        let rules: Vec<&str> = rules.iter().map(String::as_str).collect();
        let port_s = port.to_string();
        for (what, args) in [
            ("tcp up", vec!["tcp", host.as_str(), "-n", "20M"]),
            ("tcp -R", vec!["tcp", host.as_str(), "-n", "20M", "-R"]),
            ("udp up", vec!["udp", host.as_str(), "-t", "1", "-b", "20M", "--no-gso"]),
            ("udp -R", vec!["udp", host.as_str(), "-t", "1", "-b", "20M", "--no-gso", "-R"]),
        ] {
            counting(&link.a, &rules, &rules).unwrap();
            let mut args = args.clone();
            args.extend(["-p", &port_s, "-i", "0", "--dscp", "ef", ip]);
            let doc = client(&link.b, &args, &srv);
            assert_eq!(doc["test"]["ip"]["tos"], 0xb8, "{what}: {}", doc["test"]);
            let (inp, out) = (counts(&link.a, "in"), counts(&link.a, "out"));
            eprintln!("{family} {what}: in {inp:?}, out {out:?} (tcp ef, tcp other, udp ef, udp other)");
            if what.starts_with("tcp") {
                // Data one way, acknowledgements the other: both marked by their sender. The
                // control connection (unmarked, as iperf3's) and the server's SYN-ACK (sent
                // before it knew the test) are the few others.
                assert!(inp[0] > 50 && out[0] > 50, "{family} {what}: in {inp:?}, out {out:?}");
                assert!(inp[0] > 4 * inp[1] && out[0] > 4 * out[1], "{family} {what}: in {inp:?}, out {out:?}");
            } else if what == "udp up" {
                let received = num(&doc, "summary.up.receiver.packets");
                assert!(received > 1000, "{received}");
                // Every datagram (and the setup's) marked. The server's one UDP packet, its
                // challenge to the setup, goes from the listener, before any test is known.
                assert!(inp[2] >= received && inp[3] == 0, "{family} {what}: {received} received, in {inp:?}");
                assert!(out[2] + out[3] <= 1, "{family} {what}: out {out:?}");
            } else {
                let sent = num(&doc, "summary.down.sender.packets");
                assert!(out[2] >= sent && sent > 1000, "{family} {what}: {sent} sent, out {out:?}");
                assert!(inp[2] >= 1 && inp[3] == 0, "{family} {what}: the client's setup datagrams, in {inp:?}");
            }
        }
    }
}

#[test]
fn rrul_marks_each_flow_and_probe_with_its_class() {
    let Some(link) = link() else { return };
    let port = 5417;
    let srv = server(&link.a, port, &[]);
    let classes = [("BE", "cs0"), ("BK", "cs1"), ("CS5", "cs5"), ("EF", "ef")];
    let mut rules: Vec<String> =
        classes.iter().map(|(_, nft)| format!("meta l4proto tcp ip dscp {nft} counter")).collect();
    rules.push("meta l4proto tcp ip dscp != { cs0, cs1, cs5, ef } counter".into());
    let rules: Vec<&str> = rules.iter().map(String::as_str).collect();
    counting(&link.a, &rules, &rules).unwrap();
    let host = link.a_ip.to_string();
    let port_s = port.to_string();
    let doc = client(&link.b, &["rr", &host, "-p", &port_s, "-t", "1", "-i", "0", "--under-load", "rrul"], &srv);
    assert!(doc["error"].is_null(), "{}", doc["error"]);
    let (inp, out) =
        (link.a.nft_counters("inet", TABLE, "in").unwrap(), link.a.nft_counters("inet", TABLE, "out").unwrap());
    eprintln!("rrul (packets, bytes) per class BE, BK, CS5, EF, other: in {inp:?}, out {out:?}");
    let ul = &doc["summary"]["under_load"];
    let flow = |class: &str, dir: &str| -> u64 {
        let f = ul["flows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["class"] == class && f["direction"] == dir)
            .unwrap_or_else(|| panic!("no {dir} flow of {class} in {ul}"));
        num(f, &format!("{dir}.receiver.total_bytes"))
    };
    for (i, (class, _)) in classes.iter().enumerate() {
        let (up, down) = (flow(class, "up"), flow(class, "down"));
        assert!(up > 0 && down > 0, "{class}: up {up}, down {down}");
        // The up flow's payload all reached the server marked with its class, the down flow's
        // all left it so: the hook's bytes (headers included) cover at least that much.
        assert!(inp[i].1 >= up, "{class}: {up} bytes delivered up, the input hook counted {:?}", inp[i]);
        assert!(out[i].1 >= down, "{class}: {down} bytes sent down, the output hook counted {:?}", out[i]);
        let probe = ul["probes"].as_array().unwrap().iter().find(|p| p["class"] == *class).unwrap();
        assert!(num(probe, "loaded.transactions") > 0 && num(probe, "idle.transactions") > 0, "{probe}");
    }
    assert_eq!((inp[4].0, out[4].0), (0, 0), "TCP packets of another class: in {inp:?}, out {out:?}");
}

#[test]
fn under_load_list_marks_each_flow_in_its_own_direction() {
    let Some(link) = link() else { return };
    let port = 5418;
    let srv = server(&link.a, port, &[]);
    let rules = [
        "meta l4proto tcp ip dscp ef counter",
        "meta l4proto tcp ip dscp cs1 counter",
        "meta l4proto tcp ip dscp != { cs0, cs1, af41, ef } counter",
        "meta l4proto udp ip dscp af41 counter",
        "meta l4proto udp ip dscp != af41 counter",
    ];
    counting(&link.a, &rules, &rules).unwrap();
    let (host, port_s) = (link.a_ip.to_string(), port.to_string());
    let load = "tcp-up:dscp=ef,tcp-down:dscp=cs1,udp-up:20M:dscp=af41";
    let doc = client(&link.b, &["rr", &host, "-p", &port_s, "-t", "1", "-i", "0", "--under-load", load], &srv);
    assert!(doc["error"].is_null(), "{}", doc["error"]);
    let (inp, out) =
        (link.a.nft_counters("inet", TABLE, "in").unwrap(), link.a.nft_counters("inet", TABLE, "out").unwrap());
    eprintln!("list (packets, bytes) tcp EF, tcp CS1, tcp other, udp AF41, udp other: in {inp:?}, out {out:?}");
    let flows = doc["summary"]["under_load"]["flows"].as_array().unwrap();
    let up = num(&flows[0], "up.receiver.total_bytes");
    let down = num(&flows[1], "down.receiver.total_bytes");
    let udp = num(&flows[2], "up.receiver.total_bytes");
    assert_eq!(
        (flows[0]["class"].as_str(), flows[1]["class"].as_str(), flows[2]["class"].as_str()),
        (Some("EF"), Some("BK"), Some("AF41"))
    );
    assert!(up > 0 && down > 0 && udp > 0, "up {up}, down {down}, udp {udp} bytes");
    // EF: the up flow's data into the server; out of it only the acknowledgements of that data
    // and the EF probe's answers, fewer bytes than the data.
    assert!(inp[0].1 >= up && out[0].1 < up, "EF: {up} bytes up; in {:?}, out {:?}", inp[0], out[0]);
    // CS1: the down flow's data out of the server; into it only acknowledgements and requests.
    assert!(out[1].1 >= down && inp[1].1 < down, "CS1: {down} bytes down; in {:?}, out {:?}", inp[1], out[1]);
    assert_eq!((inp[2].0, out[2].0), (0, 0), "TCP packets of a class the test did not ask for");
    // Every byte the UDP flow delivered arrived marked AF41 (its sender batches datagrams
    // with GSO, so the hook sees fewer, larger packets: bytes, not datagrams), and no UDP
    // packet came in otherwise.
    assert!(inp[3].1 >= udp && inp[4].0 == 0, "AF41: {udp} bytes received; in {inp:?}");
}

#[test]
fn dscp_reaches_iperf3_and_iperf2_servers() {
    for (tool, arg) in [("iperf3", "--version"), ("iperf", "--version")] {
        if !netns::require::tool("dscp_reaches_iperf3_and_iperf2_servers", tool, &[arg], "apt-get install iperf3 iperf")
        {
            return;
        }
    }
    let Some(link) = link() else { return };
    let host = link.a_ip.to_string();
    let rules = ["meta l4proto tcp ip dscp af41 counter", "meta l4proto tcp ip dscp != af41 counter"];
    // iperf3 before 3.13 sets only IPV6_TCLASS on the sockets of a server listening on `::`,
    // which leaves an IPv4 client's packets unmarked (esnet/iperf 85ab335): -4 keeps it to IPv4.
    for (proto, server_cmd, port) in [
        ("iperf3", vec!["iperf3", "-s", "-4", "-p", "5412"], "5412"),
        ("iperf2", vec!["iperf", "-s", "-p", "5413"], "5413"),
    ] {
        let mut cmd = link.a.command(server_cmd[0]);
        cmd.args(&server_cmd[1..]);
        // Both print their banner on stdout, buffered: give them a moment to listen instead.
        let guard = netns::ChildGuard::new(
            cmd.stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap(),
        );
        std::thread::sleep(Duration::from_millis(500));
        counting(&link.a, &rules, &rules).unwrap();
        let mut cmd = link.b.command(bin());
        cmd.args(["tcp", &host, "--proto", proto, "-p", port, "-t", "1", "-i", "0", "-R", "--dscp", "af41"]);
        let run = run_with_timeout(cmd, Duration::from_secs(30)).unwrap();
        assert!(run.status.is_some_and(|s| s.success()), "{proto}: {}", run.stderr);
        let (inp, out) = (counts(&link.a, "in"), counts(&link.a, "out"));
        eprintln!("{proto} -R: in {inp:?}, out {out:?} (af41, other)");
        // The peer's data to the client carries the TOS its request carried.
        assert!(out[0] > 50 && out[0] > 4 * out[1], "{proto}: out {out:?}");
        assert!(inp[0] > 20, "{proto}: this end's acknowledgements, in {inp:?}");
        drop(guard);
    }
    // And the other way: netchar's iperf3 server marks what it sends for a stock client's -S.
    let srv = server(&link.a, 5414, &["--iperf3", "--iperf3-port", "5415"]);
    counting(&link.a, &rules, &rules).unwrap();
    let mut cmd = link.b.command("iperf3");
    cmd.args(["-c", &host, "-p", "5415", "-t", "1", "-R", "-S", "0x88"]);
    let run = run_with_timeout(cmd, Duration::from_secs(30)).unwrap();
    assert!(run.status.is_some_and(|s| s.success()), "iperf3 -c: {}\n{}\n{}", run.stdout, run.stderr, srv.stderr());
    let out = counts(&link.a, "out");
    eprintln!("netchar server --iperf3, iperf3 -c -R -S 0x88: out {out:?} (af41, other)");
    assert!(out[0] > 50 && out[0] > 4 * out[1], "out {out:?}");
    // A peer that carries no TOS and sends data in the test: refused before any traffic.
    let e = refused(&link.b, &["rr", &host, "--proto", "echo", "--tos", "0xb8", "-t", "1"]);
    assert!(e.contains("--tos is not carried to the echo server") && e.lines().count() == 1, "{e}");
}

#[test]
fn zero_udp_checksums_are_on_the_wire_both_ways() {
    let Some(link) = link() else { return };
    let port = 5414;
    let p = port.to_string();
    let srv = server(&link.a, port, &[]);
    let input = [
        format!("udp dport {p} @th,64,32 {DATA_PREFIX} udp checksum 0 counter"),
        format!("udp dport {p} @th,64,32 {DATA_PREFIX} udp checksum != 0 counter"),
    ];
    let output = [
        format!("udp sport {p} @th,64,32 {DATA_PREFIX} udp checksum 0 counter"),
        format!("udp sport {p} @th,64,32 {DATA_PREFIX} udp checksum != 0 counter"),
    ];
    let (input, output): (Vec<&str>, Vec<&str>) =
        (input.iter().map(String::as_str).collect(), output.iter().map(String::as_str).collect());
    let host = link.a_ip.to_string();
    for (zero, reverse) in [(true, false), (true, true), (false, false), (false, true)] {
        counting(&link.a, &input, &output).unwrap();
        let mut args = vec!["udp", host.as_str(), "-p", &p, "-t", "1", "-b", "20M", "-i", "0", "--no-gso"];
        if zero {
            args.push("--no-udp-checksum");
        }
        if reverse {
            args.push("-R");
        }
        let doc = client(&link.b, &args, &srv);
        let flow = if reverse { "down" } else { "up" };
        let sent = num(&doc, &format!("summary.{flow}.sender.packets"));
        let (inp, out) = (counts(&link.a, "in"), counts(&link.a, "out"));
        eprintln!("zero {zero} -R {reverse}: {sent} sent; in {inp:?}, out {out:?} (checksum 0, other)");
        let seen = if reverse { out } else { inp };
        assert!(sent > 1000, "{sent}");
        // Exact: one datagram per skb (no GSO), every data datagram counted by one rule.
        let expected = if zero { [sent, 0] } else { [0, sent] };
        assert_eq!(seen, expected, "zero {zero} -R {reverse}");
        if zero {
            assert_eq!(doc["test"]["udp"]["no_checksum"], true);
        }
    }
    // IPv6's UDP checksum is mandatory: refused in one line, before any traffic.
    let e = refused(&link.b, &["udp", "::1", "--no-udp-checksum"]);
    assert!(e.contains("--no-udp-checksum") && e.contains("IPv4 only") && e.lines().count() == 1, "{e}");
}

#[test]
fn flow_label_is_on_the_clients_packets_and_the_servers_datagrams() {
    let Some(link) = link() else { return };
    let a6 = match add_ipv6(&link) {
        Ok(a) => a,
        Err(e) => return netns::skip_or_fail(&format!("cannot add IPv6 addresses: {e}")),
    };
    let port = 5415;
    let p = port.to_string();
    let srv = server(&link.a, port, &[]);
    let rules = ["meta l4proto tcp ip6 flowlabel 0x12345 counter", "meta l4proto udp ip6 flowlabel 0x12345 counter"];
    for (label, args) in [
        (true, vec!["tcp", a6.as_str(), "-n", "10M"]),
        (true, vec!["udp", a6.as_str(), "-t", "1", "-b", "10M", "--no-gso", "-R"]),
        (false, vec!["tcp", a6.as_str(), "-n", "10M"]),
    ] {
        counting(&link.a, &rules, &rules).unwrap();
        let mut args = args.clone();
        args.extend(["-p", &p, "-i", "0"]);
        if label {
            args.extend(["--flowlabel", "0x12345"]);
        }
        let doc = client(&link.b, &args, &srv);
        let (inp, out) = (counts(&link.a, "in"), counts(&link.a, "out"));
        eprintln!("{} label {label}: in {inp:?}, out {out:?} (tcp, udp)", args[0]);
        match (label, args[0]) {
            (false, _) => assert_eq!((inp.iter().sum::<u64>(), out.iter().sum::<u64>()), (0, 0)),
            (true, "tcp") => {
                assert_eq!(doc["test"]["ip"]["flowlabel"], 0x12345);
                assert!(inp[0] > 50, "the client's TCP packets: in {inp:?}");
            }
            _ => {
                let sent = num(&doc, "summary.down.sender.packets");
                assert!(sent > 500 && out[1] >= sent, "the server's datagrams: {sent} sent, out {out:?}");
                assert!(inp[1] >= 1, "the client's setup datagrams: in {inp:?}");
            }
        }
    }
    // IPv4 has no flow label.
    let e = refused(&link.b, &["tcp", &link.a_ip.to_string(), "--flowlabel", "5"]);
    assert!(e.contains("IPv6 only") && e.lines().count() == 1, "{e}");
}

#[test]
fn bind_address_is_the_source_the_server_sees() {
    let Some(link) = link() else { return };
    let second = {
        let o = link.b_ip.octets();
        std::net::Ipv4Addr::new(o[0], o[1], o[2], 3)
    };
    if let Err(e) = link.b.ip(&["addr", "add", &format!("{second}/24"), "dev", DEV_B]) {
        return netns::skip_or_fail(&format!("cannot add a second address: {e}"));
    }
    let port = 5416;
    let p = port.to_string();
    let srv = server(&link.a, port, &[]);
    let rules = [
        format!("ip saddr {second} tcp sport 7100 counter"),
        format!("ip saddr {second} tcp sport 7101 counter"),
        format!("ip saddr {} meta l4proto tcp counter", link.b_ip),
    ];
    let rules: Vec<&str> = rules.iter().map(String::as_str).collect();
    counting(&link.a, &rules, &[]).unwrap();
    let bind = format!("{second}:7100");
    let doc = client(&link.b, &["tcp", &link.a_ip.to_string(), "-p", &p, "-n", "4M", "-P", "2", "-B", &bind], &srv);
    assert_eq!(doc["bind"], serde_json::json!({"address": second.to_string(), "port": 7100}));
    let inp = counts(&link.a, "in");
    // Stream 1 from port 7100, stream 2 from 7101, nothing from the interface's first address.
    assert!(inp[0] > 20 && inp[1] > 20 && inp[2] == 0, "in {inp:?}");
    let log = srv.stderr();
    assert!(log.contains(&format!("test from [::ffff:{second}]")), "{log}");
    assert!(log.contains(&format!("data ::ffff:{second}")), "{log}");
}

#[test]
fn bind_dev_sends_through_the_second_interface() {
    let Some(link) = link() else { return };
    let x = link.a_ip.octets()[2];
    let (dev_b2, dev_a2) = ("ncveth5", "ncveth4");
    let second = (|| -> Result<(), String> {
        link.b.ip(&["link", "add", dev_b2, "type", "veth", "peer", "name", dev_a2, "netns", link.a.name()])?;
        link.b.ip(&["addr", "add", &format!("10.205.{x}.2/24"), "dev", dev_b2])?;
        link.a.ip(&["addr", "add", &format!("10.205.{x}.1/24"), "dev", dev_a2])?;
        link.b.ip(&["link", "set", dev_b2, "up"])?;
        link.a.ip(&["link", "set", dev_a2, "up"]).map(drop)
    })();
    if let Err(e) = second {
        return netns::skip_or_fail(&format!("cannot add a second veth pair: {e}"));
    }
    let port = 5417;
    let p = port.to_string();
    let srv = server(&link.a, port, &[]);
    let rules = [format!("iifname {dev_a2} tcp dport {p} counter"), format!("iifname {DEV_A} tcp dport {p} counter")];
    let rules: Vec<&str> = rules.iter().map(String::as_str).collect();
    counting(&link.a, &rules, &[]).unwrap();
    // The server's address is on the first pair's subnet: only the binding sends it through
    // the second (Linux takes the destination as on that link, and its address as the source).
    let doc = client(&link.b, &["tcp", &link.a_ip.to_string(), "-p", &p, "-n", "4M", "--bind-dev", dev_b2], &srv);
    assert_eq!(doc["bind"]["device"], dev_b2);
    let inp = counts(&link.a, "in");
    assert!(inp[0] > 20 && inp[1] == 0, "in {inp:?} ({dev_a2}, {DEV_A})");
    let log = srv.stderr();
    assert!(log.contains(&format!("test from [::ffff:10.205.{x}.2]")), "{log}");
}

#[test]
fn df_reports_the_path_mtu_and_refuses_larger_datagrams() {
    let net = match Routed::create(1280) {
        Ok(n) => n,
        Err(reason) => return netns::skip_or_fail(&reason),
    };
    let port = 5418;
    let p = port.to_string();
    let srv = server(&net.server, port, &[]);
    let host = net.server_ip.to_string();
    let mtu_of = |doc: &Value, flow: &str, role: &str| record(doc, flow, role)["path_mtu"].as_u64();
    // 1472-byte payloads make 1500-byte packets: the router cannot forward the first ones and
    // says so (ICMP "fragmentation needed", MTU 1280); every later send is refused at once.
    let doc =
        client(&net.client, &["udp", &host, "-p", &p, "-t", "1", "-b", "10M", "-l", "1472", "--df", "--no-gso"], &srv);
    let errors = num(&doc, "summary.up.sender.send_errors");
    assert!(errors > 100, "{errors} send errors");
    assert_eq!(num(&doc, "summary.up.receiver.packets"), 0, "nothing fits the path");
    assert_eq!(mtu_of(&doc, "up", "sender"), Some(1280), "{}", record(&doc, "up", "sender"));
    // Datagrams that fit go through, none refused; the path MTU stays what was learned.
    let doc = client(&net.client, &["udp", &host, "-p", &p, "-t", "1", "-b", "10M", "-l", "1200", "--df"], &srv);
    assert_eq!(num(&doc, "summary.up.sender.send_errors"), 0);
    assert!(num(&doc, "summary.up.receiver.packets") > 500);
    assert_eq!(mtu_of(&doc, "up", "sender"), Some(1280));
    // The server's own link is 1280: its 1472-byte datagrams are refused and counted there.
    let doc = client(&net.client, &["udp", &host, "-p", &p, "-t", "1", "-b", "10M", "-l", "1472", "--df", "-R"], &srv);
    assert!(num(&doc, "summary.down.sender.send_errors") > 100, "{}", doc["summary"]);
    assert_eq!(mtu_of(&doc, "down", "sender"), Some(1280));
    // TCP sizes its segments to the path: every byte arrives, both ends report 1280.
    let doc = client(&net.client, &["tcp", &host, "-p", &p, "-n", "10M", "--df"], &srv);
    assert_eq!(doc["summary"]["up"]["bytes_match"], true);
    assert_eq!((mtu_of(&doc, "up", "sender"), mtu_of(&doc, "up", "receiver")), (Some(1280), Some(1280)));
}
