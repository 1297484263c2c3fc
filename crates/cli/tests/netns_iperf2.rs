//! Ground truth through the iperf2 adapter, on the namespace test bed of `netns_tbf.rs` and
//! `netns_udp.rs`, against a real `iperf -s` / `iperf -s -u` in namespace a and netchar
//! `--proto iperf2` in b:
//!
//! * TCP goodput through a 200 Mbit/s tbf is 200 × 1448 / 1514 = 191.28 Mbit/s (see
//!   `netns_tbf.rs` for why), within ±2%: up as the iperf server's own CSV figure (iperf2 sends
//!   nothing back over TCP; its byte count is also checked against netchar's), `-R` as
//!   netchar's count of what the iperf server sent (checked against the server's CSV), and
//!   `-r`'s dial-back half the same way, timed from its own connection;
//! * UDP up: an nft rule in a drops data datagrams at random and counts them; the loss in the
//!   server report netchar brings back after the FIN equals that counter;
//! * UDP `-R`: the same rule in b, on the iperf server's datagrams; netchar's loss, settled
//!   against the count in the server's FIN, equals it.
//!
//! Needs root, `ip`, `tc`, `nft`, `ss` and iperf; otherwise it prints "skipping netns test:
//! <reason>" and passes, unless NETCHAR_REQUIRE_ALL=1, in which case it fails.

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
/// iperf2 servers count each TCP stream's settings header after its 4-byte flags word.
const HEADER_COUNTED: u64 = 20;

fn iperf_available() -> bool {
    if std::process::Command::new("iperf").arg("-v").output().is_ok() {
        return true;
    }
    netns::skip_or_fail("iperf (2.x) is not installed (apt-get install iperf)");
    false
}

/// `iperf -s [-u] -y C` in namespace a on `port`, its CSV lines on the captured stderr. The
/// shell says "ready pid=N" once the port is bound (iperf prints nothing at start with -y C);
/// the pid is killed on drop (the shell alone would leave iperf behind).
struct IperfServer {
    server: Server,
    pid: Option<u32>,
}

impl IperfServer {
    fn start(link: &Link, port: u16, udp: bool) -> Self {
        let (u, ss) = if udp { ("-u", "-Hlun") } else { ("", "-Hltn") };
        let script = format!(
            "iperf -s {u} -p {port} -y C 1>&2 & P=$!; \
             until ss {ss} 'sport = :{port}' | grep -q .; do sleep 0.05; done; echo \"ready pid=$P\" 1>&2; wait $P"
        );
        let mut cmd = link.a.command("sh");
        cmd.args(["-c", &script]);
        let server = Server::spawn(cmd, "ready pid=", Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("iperf -s did not start in {}: {e}", link.a.name()));
        let pid = server.stderr().split("ready pid=").nth(1).and_then(|r| r.split_whitespace().next()?.parse().ok());
        Self { server, pid }
    }

    /// The CSV lines so far, waiting up to 10 s for `n`.
    fn lines(&self, n: usize) -> Vec<Vec<String>> {
        for _ in 0..200 {
            let lines: Vec<Vec<String>> = self
                .server
                .stderr()
                .lines()
                .filter(|l| l.matches(',').count() >= 8)
                .map(|l| l.split(',').map(str::to_string).collect())
                .collect();
            if lines.len() >= n {
                return lines;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("iperf -s wrote fewer than {n} CSV lines: {}", self.server.stderr());
    }
}

impl Drop for IperfServer {
    fn drop(&mut self) {
        if let Some(pid) = self.pid {
            let _ = std::process::Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
    }
}

fn csv_u64(line: &[String], i: usize) -> u64 {
    line[i].trim().parse().unwrap_or_else(|_| panic!("CSV field {i} of {line:?}"))
}

/// `netchar KIND --proto iperf2` from namespace b; its JSON.
fn netchar(link: &Link, server: &IperfServer, kind: &str, port: u16, args: &[&str]) -> Value {
    let mut cmd = link.b.command(env!("CARGO_BIN_EXE_netchar"));
    let port = port.to_string();
    cmd.args([kind, &link.a_ip.to_string(), "-p", &port, "--proto", "iperf2", "--json", "-i", "0"]).args(args);
    let shown = format!("{cmd:?}");
    let run = netns::run_with_timeout(cmd, Duration::from_secs(40)).unwrap_or_else(|e| panic!("{e}"));
    let context = netns::failure_context(&shown, &run, &server.server, link);
    assert!(run.status.is_some_and(|s| s.success()), "{context}\nstdout:\n{}", run.stdout);
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("not JSON ({e})\n{context}"))
}

#[test]
fn tcp_goodput_through_the_iperf2_adapter_matches_tbf() {
    if !iperf_available() {
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
    let port = 5011u16;
    let server = IperfServer::start(&link, port, false);
    let mut bad = Vec::new();
    // The link's rate is the truth when the link was kept full over the receiver's seconds; a
    // machine kept busy by other work can hold the sender, the receiver or tbf's own dequeue
    // off the CPU for a good part of a second, and then what tbf counted through it over those
    // seconds is (its bytes less every frame's headers). Never above the link's rate.
    let mut check = |what: &str, bps: f64, seconds: f64, tbf: netns::QdiscCounters| {
        let through = tbf.bytes.saturating_sub(tbf.packets * FRAME_HEADERS);
        let truth = EXPECTED_BPS.min(through as f64 * 8.0 / seconds);
        eprintln!(
            "netns_iperf2 tcp {what}: {:.3} Mbit/s over {seconds:.3} s ({:+.3}% vs {:.3}; tbf let {through} bytes \
             through)",
            bps / 1e6,
            (bps / truth - 1.0) * 100.0,
            truth / 1e6,
        );
        if (bps / truth - 1.0).abs() > 0.02 {
            bad.push(format!("{what} {:.3} Mbit/s (truth {:.3})", bps / 1e6, truth / 1e6));
        }
    };
    // Up, the data leaves through b's tbf; -R, through a's (the iperf server's).
    let up_counters = || link.b.qdisc_counters(DEV_B).unwrap_or_else(|e| panic!("{e}"));
    let down_counters = || link.a.qdisc_counters(DEV_A).unwrap_or_else(|e| panic!("{e}"));

    let before = up_counters();
    let v = netchar(&link, &server, "tcp", port, &["-t", "5"]);
    let tbf = up_counters().since(&before);
    let sent = v["summary"]["up"]["sender"]["total_bytes"].as_u64().unwrap();
    let line = &server.lines(1)[0];
    assert_eq!(csv_u64(line, 7), sent + HEADER_COUNTED, "the iperf server counted every byte netchar wrote");
    // The iperf server's own seconds: its CSV's interval, "0.0-5.0".
    let (from, to) = line[6].split_once('-').unwrap_or_else(|| panic!("no interval in {line:?}"));
    let seconds = to.parse::<f64>().unwrap() - from.parse::<f64>().unwrap();
    check("up (the iperf server's CSV)", csv_u64(line, 8) as f64, seconds, tbf);

    let before = down_counters();
    let v = netchar(&link, &server, "tcp", port, &["-t", "5", "-R"]);
    let tbf = down_counters().since(&before);
    let r = &v["summary"]["down"]["receiver"];
    let line = &server.lines(2)[1];
    assert_eq!(csv_u64(line, 7), r["total_bytes"].as_u64().unwrap(), "netchar read every byte iperf sent");
    let (received_bps, seconds) = (r["bits_per_second"].as_f64().unwrap(), r["seconds"].as_f64().unwrap());
    check("down (netchar's receiver)", received_bps, seconds, tbf);

    // -r: netchar's 3 s up, then the iperf server dials back into namespace b and sends 3 s.
    // The down half is timed from its own connection: its rate is the link's, not half of it.
    // (a's tbf carries the up half's acknowledgements too: headers alone, no payload.)
    let before = down_counters();
    let v = netchar(&link, &server, "tcp", port, &["-t", "3", "-r"]);
    let tbf = down_counters().since(&before);
    let lines = server.lines(4);
    let back = lines[2..].iter().find(|l| l[4] != port.to_string()).unwrap_or_else(|| panic!("{lines:?}"));
    let r = &v["summary"]["down"]["receiver"];
    // Timed from the dial-back, by the test's own clock: the down stream's clock started when
    // the iperf server connected, which it does once the up half has ended.
    let streams = v["streams"].as_array().unwrap();
    let stream = |flow: &str| streams.iter().find(|s| s["flow"] == flow).unwrap_or_else(|| panic!("{streams:?}"));
    let (up_end, down) = (stream("up")["seconds"].as_f64().unwrap(), stream("down"));
    let started = down["started_seconds"].as_f64().unwrap_or_else(|| panic!("no started_seconds: {down}"));
    assert!(started > up_end, "the dial-back's clock started at {started} s, before the up half ended at {up_end} s");
    let timed = down["seconds"].as_f64().unwrap() - started;
    assert!((r["seconds"].as_f64().unwrap() - timed).abs() < 1e-6, "{r}: timed from the dial-back, {timed} s");
    assert_eq!(csv_u64(back, 7), r["total_bytes"].as_u64().unwrap(), "netchar read every byte of the dial-back");
    let (received_bps, seconds) = (r["bits_per_second"].as_f64().unwrap(), r["seconds"].as_f64().unwrap());
    check("-r down (netchar's receiver, timed from the dial-back)", received_bps, seconds, tbf);
    assert!(
        bad.is_empty(),
        "outside ±2% of min({:.3} Mbit/s, what tbf let through): {}\nqdiscs:\n{}",
        EXPECTED_BPS / 1e6,
        bad.join(", "),
        link.qdisc_stats()
    );
}

#[test]
fn udp_loss_through_the_iperf2_adapter_equals_the_nft_drop_counter() {
    if !iperf_available() {
        return;
    }
    let Some(link) = Link::shaped(TBF) else { return };
    let port = 5013u16;
    // Datagrams to the server (1200-byte payloads: UDP length 1208). A dropped FIN counts too,
    // and so does it in iperf2's report: its retry carries the next number.
    let port_s = port.to_string();
    let rules = link.a.drop_at_random("iperf2loss", "input", &["udp", "dport", &port_s, "udp", "length", "1208"]);
    if let Err(e) = rules {
        netns::skip_or_fail(&format!("cannot install the nftables drop rule: {e}"));
        return;
    }
    let server = IperfServer::start(&link, port, true);
    let overflowed_before = link.a.udp_receive_buffer_drops().unwrap();
    let v = netchar(&link, &server, "udp", port, &["-t", "3", "-b", "50M", "-l", "1200"]);
    let dropped = link.a.nft_counters("inet", "iperf2loss", "input").unwrap()[0].0;
    // A busy machine can keep the iperf server off the CPU until its socket buffer overflows:
    // those datagrams are lost too, counted by the kernel of namespace a.
    let overflowed = link.a.udp_receive_buffer_drops().unwrap() - overflowed_before;
    let up = &v["summary"]["up"];
    let lost = up["receiver"]["lost"].as_u64().unwrap();
    let received = up["receiver"]["packets"].as_u64().unwrap();
    let sent = up["sender"]["packets"].as_u64().unwrap();
    let line = &server.lines(1)[0];
    eprintln!(
        "netns_iperf2 udp: netchar sent {sent}, the iperf server's report: received {received}, lost {lost}; \
         nft dropped {dropped}, the receive buffer overflowed {overflowed}; server CSV {line:?}"
    );
    assert!(dropped > 0, "the drop rule matched nothing: the test proves nothing");
    assert_eq!(
        lost,
        dropped + overflowed,
        "the iperf server's loss (its report, through netchar) is the nft drop counter plus the socket overflows"
    );
    assert_eq!(lost, csv_u64(line, 10), "the report netchar read is the server's own CSV line");
    assert_eq!(received + lost, csv_u64(line, 11));
}

/// UDP `-R`: the iperf server in a sends to netchar in b; an nft rule in b drops data datagrams
/// at random (a positive sequence number: the first payload bit 0, so never the FIN, which
/// carries the count), and netchar's loss, settled against the FIN's count, equals the counter
/// (plus b's socket overflows on a busy machine).
#[test]
fn udp_reverse_loss_through_the_iperf2_adapter_equals_the_nft_drop_counter() {
    if !iperf_available() {
        return;
    }
    let Some(link) = Link::shaped(TBF) else { return };
    let port = 5015u16;
    let port_s = port.to_string();
    let rules = link.b.drop_at_random(
        "iperf2rloss",
        "input",
        &["udp", "sport", &port_s, "udp", "length", "1208", "@th,64,1", "0"],
    );
    if let Err(e) = rules {
        netns::skip_or_fail(&format!("cannot install the nftables drop rule: {e}"));
        return;
    }
    let server = IperfServer::start(&link, port, true);
    let overflowed_before = link.b.udp_receive_buffer_drops().unwrap();
    let v = netchar(&link, &server, "udp", port, &["-t", "3", "-b", "50M", "-l", "1200", "-R"]);
    let dropped = link.b.nft_counters("inet", "iperf2rloss", "input").unwrap()[0].0;
    let overflowed = link.b.udp_receive_buffer_drops().unwrap() - overflowed_before;
    let down = &v["summary"]["down"]["receiver"];
    let (received, lost) = (down["packets"].as_u64().unwrap(), down["lost"].as_u64().unwrap());
    let line = server.lines(1).last().unwrap().clone();
    eprintln!(
        "netns_iperf2 udp -R: netchar received {received}, lost {lost}; nft dropped {dropped}, b's receive buffer \
         overflowed {overflowed}; server CSV {line:?}"
    );
    assert!(dropped > 0, "the drop rule matched nothing: the test proves nothing");
    assert_eq!(lost, dropped + overflowed, "netchar's loss is the nft drop counter plus the socket overflows");
    assert_eq!((received + lost + 1) * 1200, csv_u64(&line, 7), "the server sent these and the FIN");
}
