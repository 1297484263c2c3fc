//! Ground truth through the iperf3 adapter, on the namespace test bed of `netns_tbf.rs` and
//! `netns_udp.rs`, against a real `iperf3 -s` in namespace a and netchar `--proto iperf3` in b:
//!
//! * TCP goodput through a 200 Mbit/s tbf is 200 × 1448 / 1514 = 191.28 Mbit/s (see
//!   `netns_tbf.rs` for why), within ±2%, up (the figure is the iperf3 server's own count) and
//!   `-R` (netchar's count of what the iperf3 server sent), or, where less crossed the link
//!   over the receiver's seconds (a sender, a receiver or tbf's dequeue held off the CPU of a
//!   busy machine), within ±2% of what tbf's own counters say it let through;
//! * UDP `-R`: an nft rule in b drops data datagrams at random and counts them; the loss
//!   netchar reports, settled on the iperf3 server's own datagram count, equals that counter.
//!
//! Needs root, `ip`, `tc`, `nft` and iperf3; otherwise it prints "skipping netns test: <reason>"
//! and passes, unless NETCHAR_REQUIRE_ALL=1, in which case it fails.

#[path = "support/netns.rs"]
mod netns;

use netns::{Link, Server, DEV_A, DEV_B};
use serde_json::Value;
use std::time::Duration;

const TBF: &[&str] = &["tbf", "rate", "200mbit", "burst", "256kb", "latency", "50ms"];
const EXPECTED_BPS: f64 = 200e6 * 1448.0 / 1514.0;
/// The bytes of a full frame's headers tbf charges besides the payload: 14 Ethernet, 20 IPv4,
/// 32 TCP with timestamps.
const FRAME_HEADERS: u64 = 1514 - 1448;

fn iperf3_available() -> bool {
    if std::process::Command::new("iperf3").arg("--version").output().is_ok() {
        return true;
    }
    netns::skip_or_fail("iperf3 is not installed (apt-get install iperf3)");
    false
}

/// `iperf3 -s -1` in namespace a on `port`.
fn iperf3_server(link: &Link, port: u16) -> Server {
    let mut cmd = link.a.command("sh");
    // iperf3 says "Server listening" on stdout; --forceflush sends it at once.
    cmd.args(["-c", &format!("exec iperf3 -s -1 -p {port} --forceflush 1>&2")]);
    Server::spawn(cmd, "Server listening", Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("iperf3 -s did not start in {}: {e}", link.a.name()))
}

/// `netchar KIND --proto iperf3` from namespace b; its JSON.
fn netchar(link: &Link, server: &Server, kind: &str, port: u16, args: &[&str]) -> Value {
    let mut cmd = link.b.command(env!("CARGO_BIN_EXE_netchar"));
    let port = port.to_string();
    cmd.args([kind, &link.a_ip.to_string(), "-p", &port, "--proto", "iperf3", "--json", "-i", "0"]).args(args);
    let shown = format!("{cmd:?}");
    let run = netns::run_with_timeout(cmd, Duration::from_secs(40)).unwrap_or_else(|e| panic!("{e}"));
    let context = netns::failure_context(&shown, &run, server, link);
    assert!(run.status.is_some_and(|s| s.success()), "{context}\nstdout:\n{}", run.stdout);
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("not JSON ({e})\n{context}"))
}

#[test]
fn tcp_goodput_through_the_iperf3_adapter_matches_tbf() {
    if !iperf3_available() {
        return;
    }
    let Some(link) = Link::shaped(TBF) else { return };
    let pin = (|| -> Result<(), String> {
        link.a.ip(&["link", "set", DEV_A, "mtu", "1500"])?;
        link.b.ip(&["link", "set", DEV_B, "mtu", "1500"])?;
        link.a.sysctl("net.ipv4.tcp_timestamps", "1")?;
        link.b.sysctl("net.ipv4.tcp_timestamps", "1")
    })();
    if let Err(e) = pin {
        netns::skip_or_fail(&format!("cannot configure the namespaces: {e}"));
        return;
    }
    let mut bad = Vec::new();
    for (i, (flow, extra)) in [("up", vec![]), ("down", vec!["-R"])].into_iter().enumerate() {
        let port = 5211 + i as u16;
        let server = iperf3_server(&link, port);
        let mut args = vec!["-t", "5"];
        args.extend(extra);
        // The data leaves through the sending namespace's tbf: b's for up, a's (the iperf3
        // server's) for -R.
        let (shaper, dev) = if flow == "up" { (&link.b, DEV_B) } else { (&link.a, DEV_A) };
        let counters = || shaper.qdisc_counters(dev).unwrap_or_else(|e| panic!("{e}"));
        let before = counters();
        let v = netchar(&link, &server, "tcp", port, &args);
        let tbf = counters().since(&before);
        let s = &v["summary"][flow];
        let (sent, received) =
            (s["sender"]["total_bytes"].as_u64().unwrap(), s["receiver"]["total_bytes"].as_u64().unwrap());
        let bps = s["receiver"]["bits_per_second"].as_f64().unwrap();
        let seconds = s["receiver"]["seconds"].as_f64().unwrap();
        // The payload tbf let through, by its own count: its bytes less every frame's headers
        // (the iperf3 control connection's few messages ride along).
        let through = tbf.bytes.saturating_sub(tbf.packets * FRAME_HEADERS);
        let through_bps = through as f64 * 8.0 / seconds;
        eprintln!(
            "netns_iperf3 tcp {flow:>4}: receiver {:.3} Mbit/s ({:+.3}% vs {:.3}) over {seconds:.3} s, bytes {sent} / \
             {received}, tbf let {through} bytes of payload through ({:.3} Mbit/s over those seconds)",
            bps / 1e6,
            (bps / EXPECTED_BPS - 1.0) * 100.0,
            EXPECTED_BPS / 1e6,
            through_bps / 1e6
        );
        assert!(received > 0 && received <= sent, "{flow}: {sent} sent, {received} received");
        // The link's rate is the truth when the link was kept full over the receiver's seconds.
        // On a machine other work keeps busy, the sender, the receiver or tbf's own dequeue can
        // be held off the CPU for a good part of a second, and less crosses the link than it
        // would have passed: then what tbf counted through it over those seconds is the truth.
        // Never above the link's rate.
        let truth = EXPECTED_BPS.min(through_bps);
        if (bps / truth - 1.0).abs() > 0.02 {
            bad.push(format!(
                "{flow} {:.3} Mbit/s (truth {:.3}; tbf let {through} bytes through, the receiver counted {received})",
                bps / 1e6,
                truth / 1e6
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "outside ±2% of min({:.3} Mbit/s, what tbf let through): {}\nqdiscs:\n{}",
        EXPECTED_BPS / 1e6,
        bad.join(", "),
        link.qdisc_stats()
    );
}

#[test]
fn udp_loss_through_the_iperf3_adapter_equals_the_nft_drop_counter() {
    if !iperf3_available() {
        return;
    }
    let Some(link) = Link::shaped(TBF) else { return };
    let port = 5213u16;
    // Data datagrams only (1200-byte payloads: UDP length 1208), not the 4-byte hello's answer.
    let port_s = port.to_string();
    let rules = link.b.drop_at_random("iperf3loss", "input", &["udp", "sport", &port_s, "udp", "length", "1208"]);
    if let Err(e) = rules {
        netns::skip_or_fail(&format!("cannot install the nftables drop rule: {e}"));
        return;
    }
    let server = iperf3_server(&link, port);
    let overflowed_before = link.b.udp_receive_buffer_drops().unwrap();
    let v = netchar(&link, &server, "udp", port, &["-t", "3", "-b", "50M", "-l", "1200", "-R"]);
    let dropped = link.b.nft_counters("inet", "iperf3loss", "input").unwrap()[0].0;
    // Datagrams a busy machine made netchar's socket buffer overflow with are lost too.
    let overflowed = link.b.udp_receive_buffer_drops().unwrap() - overflowed_before;
    let mine = v["streams"].as_array().unwrap().iter().find(|s| s["role"] == "receiver").unwrap().clone();
    let far = v["streams"].as_array().unwrap().iter().find(|s| s["role"] == "sender").unwrap().clone();
    let lost = mine["udp_received"]["lost"].as_u64().unwrap();
    let received = mine["udp_received"]["packets"].as_u64().unwrap();
    let sent = far["udp_sent"]["packets"].as_u64().unwrap();
    eprintln!(
        "netns_iperf3 udp -R: iperf3 sent {sent}, netchar received {received}, lost {lost}, nft dropped {dropped}, \
         socket overflows {overflowed}"
    );
    assert!(dropped > 0, "the drop rule matched nothing: the test proves nothing");
    assert_eq!(lost, dropped + overflowed, "netchar's loss is the nft drop counter (plus socket overflows)");
    assert_eq!(received + lost, sent, "every datagram the iperf3 server sent is accounted for");
}
