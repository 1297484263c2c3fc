//! Ground-truth TCP goodput: two network namespaces joined by a veth pair shaped with tbf to
//! 200 Mbit/s in each direction. A bulk TCP transfer over that link must deliver exactly
//!
//!   200 Mbit/s × 1448 / 1514 = 191.28 Mbit/s
//!
//! of payload: with MTU 1500 and TCP timestamps (on by default in a fresh namespace, and set
//! explicitly below) a full segment carries 1448 payload bytes in a frame tbf charges as
//! 1514 bytes (14 Ethernet + 20 IPv4 + 32 TCP-with-options + 1448; tbf sees skb->len, which
//! includes the MAC header but no preamble/FCS). ACKs travel on the other veth end's tbf and do
//! not consume forward capacity.
//!
//! netchar's receiver-side goodput (`.summary.<dir>.receiver.bits_per_second`) must fall within
//! ±2% of that, in both directions, and both ends must agree on the byte count.
//!
//! Needs root, `ip` and `tc`; otherwise it prints "skipping netns test: <reason>" and passes,
//! unless NETCHAR_REQUIRE_ALL=1, in which case it fails.
//!
//! Run: `cargo test -p netchar --test netns_tbf -- --nocapture`

#[path = "support/netns.rs"]
mod netns;

use std::time::{Duration, Instant};

use netns::{Link, Server, DEV_A, DEV_B};
use serde_json::Value;

const RATE_MBIT: f64 = 200.0;
/// Payload bytes per full segment (MTU 1500 − 20 IPv4 − 20 TCP − 12 timestamp option).
const MSS: f64 = 1448.0;
/// Bytes tbf charges per full segment (payload + 52 header bytes + 14 Ethernet header).
const FRAME: f64 = 1514.0;
const TOLERANCE: f64 = 0.02;

/// The shaper on each veth end.
///
/// * `rate 200mbit`: the ground truth.
/// * `burst 256kb` (262144 bytes of tokens = 10.5 ms at 200 Mbit/s): the bucket must hold at
///   least one maximum packet, and veth hands tbf GSO super-packets of up to 64 KiB (no
///   ethtool here to turn GSO/TSO off). tbf segments a GSO packet larger than the bucket, and
///   accounts an unsegmented one as the sum of its wire frames (qdisc_pkt_len includes the
///   replicated headers), so either way the accounting is exact; the size matters for a
///   different reason: tokens above `burst` are discarded, so whenever tbf's dequeue runs late
///   (hrtimer slack, NET_TX softirq deferred to ksoftirqd, a busy 2-CPU CI box) by more than
///   burst/rate, link time is lost for good. Measured (2-CPU VM): burst 1540 (≈1 frame)
///   gives only ≈180 Mbit/s, 8 KiB ≈190.9; 32 KiB gives 191.1–191.3 on a quiet host but
///   188.3–191.2 with both CPUs kept busy by other processes, where 256 KiB (1.3 ms → 10.5 ms
///   of slack) stays at 190.9–191.4. The price of a large bucket is bounded: in any window
///   tbf sends at most rate×window + burst, and the bucket is only full after idle time (test
///   start, which `-O 1` omits), so the over-estimate is at most 256 KiB / (4 s × 25 MB/s)
///   ≈ 0.26%, well inside the ±2% band (seen: +0.03…+0.06%).
/// * `latency 50ms` (limit = rate×latency + burst ≈ 1.5 MB): a queue deep enough that TCP
///   never overflows it (TCP small queues keep the backlog near 100 KiB: RTTs of 3–5 ms are
///   seen; a 5 ms queue, limit ≈157 KB, still produced drops and retransmissions in slow
///   start), so the link never idles behind a loss recovery.
const TBF: &[&str] = &["tbf", "rate", "200mbit", "burst", "256kb", "latency", "50ms"];

const TEST_SECONDS: &str = "5";
const OMIT_SECONDS: &str = "1";

fn expected_bps() -> f64 {
    RATE_MBIT * 1e6 * MSS / FRAME
}

/// What one direction measured.
#[derive(Debug)]
struct Measured {
    receiver_bps: f64,
    sender_bps: f64,
    sender_total: u64,
    receiver_total: u64,
    bytes_match: bool,
    receiver_seconds: f64,
    retransmits: Option<u64>,
    /// The receiver's rate in every interval after the warm-up.
    receiver_intervals_bps: Vec<f64>,
    /// The receiver's largest SO_RCVLOWAT (wake-up batching), if it batched.
    receive_low_water: Option<u64>,
    /// What the sending end's tbf let through after the warm-up, by its own counters, over
    /// the receiver's seconds: its payload (bytes less every frame's headers) less what the
    /// receiver counted in the warm-up.
    through_bps: f64,
}

fn get<'a>(v: &'a Value, path: &[&str]) -> &'a Value {
    path.iter().fold(v, |v, k| &v[*k])
}

/// Runs one `netchar tcp` test (client in namespace b, fresh one-off server in namespace a).
fn measure(link: &Link, port: u16, reverse: bool) -> Measured {
    measure_with(link, port, reverse, &[])
}

/// [`measure`] with more client arguments.
fn measure_with(link: &Link, port: u16, reverse: bool, extra: &[&str]) -> Measured {
    let bin = env!("CARGO_BIN_EXE_netchar");
    let port_s = port.to_string();
    let dir = if reverse { "down" } else { "up" };

    let mut server_cmd = link.a.command(bin);
    server_cmd.args(["server", "-p", &port_s, "--one-off"]);
    let server = Server::spawn(server_cmd, "listening on", Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("netchar server did not start in {}: {e}", link.a.name()));

    let mut client_cmd = link.b.command(bin);
    client_cmd.args(["tcp", &link.a_ip.to_string(), "-p", &port_s, "-t", TEST_SECONDS, "-O", OMIT_SECONDS, "--json"]);
    if reverse {
        client_cmd.arg("-R");
    }
    client_cmd.args(extra);
    let shown = format!("{client_cmd:?}");
    // The data leaves through the sending namespace's tbf: b's (the client's) up, a's down.
    let (shaper, dev) = if reverse { (&link.a, DEV_A) } else { (&link.b, DEV_B) };
    let counters = || shaper.qdisc_counters(dev).unwrap_or_else(|e| panic!("{e}"));
    let before = counters();
    let run = netns::run_with_timeout(client_cmd, Duration::from_secs(30)).unwrap_or_else(|e| panic!("{e}"));
    let tbf = counters().since(&before);
    let context = || netns::failure_context(&shown, &run, &server, link);
    match run.status {
        Some(st) if st.success() => {}
        _ => panic!("netchar tcp ({dir}) failed\n{}\nstdout:\n{}", context(), run.stdout),
    }
    let doc: Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("({dir}) stdout is not JSON: {e}\n{}\nstdout:\n{}", context(), run.stdout));
    assert!(doc["error"].is_null(), "({dir}) JSON reports an error: {}\n{}", doc["error"], context());

    let flow = get(&doc, &["summary", dir]);
    let num = |path: &[&str]| -> f64 {
        get(flow, path).as_f64().unwrap_or_else(|| {
            panic!("({dir}) .summary.{dir}.{} missing or not a number\n{}", path.join("."), context())
        })
    };
    let int = |path: &[&str]| -> u64 {
        get(flow, path).as_u64().unwrap_or_else(|| {
            panic!("({dir}) .summary.{dir}.{} missing or not an integer\n{}", path.join("."), context())
        })
    };
    let through = tbf.bytes.saturating_sub(tbf.packets * (FRAME - MSS) as u64);
    let warm_up = int(&["receiver", "total_bytes"]) - int(&["receiver", "bytes"]);
    let m = Measured {
        through_bps: through.saturating_sub(warm_up) as f64 * 8.0 / num(&["receiver", "seconds"]),
        receiver_bps: num(&["receiver", "bits_per_second"]),
        sender_bps: num(&["sender", "bits_per_second"]),
        sender_total: int(&["sender", "total_bytes"]),
        receiver_total: int(&["receiver", "total_bytes"]),
        bytes_match: flow["bytes_match"]
            .as_bool()
            .unwrap_or_else(|| panic!("({dir}) .summary.{dir}.bytes_match missing or not a bool\n{}", context())),
        receiver_seconds: num(&["receiver", "seconds"]),
        retransmits: flow["sender"]["retransmits"].as_u64(),
        receiver_intervals_bps: doc["intervals"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|iv| iv["omitted"] == false)
            .flat_map(|iv| iv["sum"].as_array().into_iter().flatten())
            .filter(|sum| sum["flow"] == dir && sum["role"] == "receiver")
            .filter_map(|sum| sum["bits_per_second"].as_f64())
            .collect(),
        receive_low_water: doc["streams"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|st| st["role"] == "receiver")
            .and_then(|st| st["receive_low_water"].as_u64()),
    };

    // The one-off server exits after its test; the guard kills it otherwise.
    let mut server = server;
    let _ = server.child.wait_timeout(Duration::from_secs(5));
    m
}

/// The namespace pair with what the expected goodput depends on pinned down (1500-byte MTU,
/// TCP timestamps on) and `tbf` on both veth ends; None after saying why when it cannot be
/// made (a failure under NETCHAR_REQUIRE_ALL=1).
fn shaped_link(tbf: &[&str]) -> Option<Link> {
    let link = match Link::create() {
        Ok(l) => l,
        Err(reason) => {
            netns::skip_or_fail(&reason);
            return None;
        }
    };
    let pin = (|| -> Result<(), String> {
        link.a.ip(&["link", "set", DEV_A, "mtu", "1500"])?;
        link.b.ip(&["link", "set", DEV_B, "mtu", "1500"])?;
        link.a.sysctl("net.ipv4.tcp_timestamps", "1")?;
        link.b.sysctl("net.ipv4.tcp_timestamps", "1")?;
        Ok(())
    })();
    if let Err(e) = pin {
        netns::skip_or_fail(&format!("cannot configure the namespaces: {e}"));
        return None;
    }
    if let Err(e) = link.set_root_qdisc_both(tbf) {
        netns::skip_or_fail(&format!("cannot install the tbf qdisc: {e}"));
        return None;
    }
    Some(link)
}

#[test]
fn tcp_goodput_matches_tbf_ground_truth() {
    let started = Instant::now();
    let Some(link) = shaped_link(TBF) else { return };

    let expected = expected_bps();
    let up = measure(&link, 5301, false);
    let down = measure(&link, 5302, true);

    let show = |dir: &str, m: &Measured| {
        eprintln!(
            "netns_tbf {dir:>4}: receiver {:.3} Mbit/s ({:+.3}% vs {:.3}), sender {:.3} Mbit/s, \
             receiver seconds {:.3}, bytes {} / {} (match {}), retransmits {:?}, tbf let {:.3} Mbit/s through",
            m.receiver_bps / 1e6,
            (m.receiver_bps / expected - 1.0) * 100.0,
            expected / 1e6,
            m.sender_bps / 1e6,
            m.receiver_seconds,
            m.sender_total,
            m.receiver_total,
            m.bytes_match,
            m.retransmits,
            m.through_bps / 1e6,
        );
    };
    show("up", &up);
    show("down", &down);
    eprintln!("netns_tbf: total {:.1} s", started.elapsed().as_secs_f64());

    for (dir, m) in [("up", &up), ("down", &down)] {
        assert!(m.bytes_match, "{dir}: bytes_match is false: {m:?}");
        assert_eq!(m.sender_total, m.receiver_total, "{dir}: sender and receiver totals differ: {m:?}");
        assert!(m.receiver_total > 0, "{dir}: nothing was transferred: {m:?}");
    }
    // The link's rate is the truth when the link was kept full. A sender, a receiver or tbf's
    // own dequeue held off the CPU by other work on the machine (seen at load 14 on 2 CPUs:
    // 1.2% short) put less through the link than tbf would have passed, and then what tbf
    // counted through it over the receiver's seconds is what the receiver must match.
    let bad: Vec<String> = [("up", &up), ("down", &down)]
        .iter()
        .filter(|(_, m)| {
            let truth = expected.min(m.through_bps);
            !(truth * (1.0 - TOLERANCE)..=truth * (1.0 + TOLERANCE)).contains(&m.receiver_bps)
        })
        .map(|(dir, m)| {
            format!("{dir} {:.3} Mbit/s (truth {:.3})", m.receiver_bps / 1e6, expected.min(m.through_bps) / 1e6)
        })
        .collect();
    assert!(
        bad.is_empty(),
        "receiver goodput outside ±2% of min(191.28 Mbit/s, what tbf let through): {}\nqdiscs:\n{}",
        bad.join(", "),
        link.qdisc_stats()
    );
}

/// 1 Gbit/s, the same shape as [`TBF`] scaled: 1.3 MB of tokens is the same 10.5 ms of slack.
const TBF_1G: &[&str] = &["tbf", "rate", "1gbit", "burst", "1300kb", "latency", "50ms"];

/// A receiver that batches its wake-ups (SO_RCVLOWAT, about 0.5 ms of data) still counts at the
/// link's rate in every interval, not only over the test: through a 1 Gbit/s tbf the mark is
/// ~57 KiB, and a reader that waited for its batch longer than that (a stuck mark, a read that
/// sat out its 100 ms timeout) would move whole milliseconds of bytes between intervals.
#[test]
fn a_batching_receiver_counts_at_the_link_rate_in_every_interval() {
    let Some(link) = shaped_link(TBF_1G) else { return };
    let expected = 1000e6 * MSS / FRAME;
    // A reader kept off the CPU for 15 ms moves 3% of a half-second interval into the next
    // (CI saw 924 then 984 Mbit/s under two spinning neighbours): such a run is tried again,
    // up to three times. A batching fault (a stuck mark, a read sitting out its timeout) moves
    // bytes in every run.
    for attempt in 1..=3 {
        let m = measure_with(&link, 5303, false, &["-i", "0.5"]);
        eprintln!(
            "netns_tbf 1 Gbit/s (attempt {attempt}): receiver {:.3} Mbit/s ({:+.3}% vs {:.3}), low-water mark {:?}, intervals {:?}",
            m.receiver_bps / 1e6,
            (m.receiver_bps / expected - 1.0) * 100.0,
            expected / 1e6,
            m.receive_low_water,
            m.receiver_intervals_bps.iter().map(|b| (b / 1e5).round() / 10.0).collect::<Vec<_>>(),
        );
        assert_eq!(m.sender_total, m.receiver_total, "sender and receiver totals differ: {m:?}");
        let mark = m.receive_low_water.unwrap_or_else(|| panic!("the receiver did not batch its wake-ups: {m:?}"));
        assert!((16 * 1024..=128 * 1024).contains(&mark), "mark {mark} for ~120 MB/s (0.5 ms is ~60 kB): {m:?}");
        // As above, what tbf let through is the truth where it fell short of the link.
        let truth = expected.min(m.through_bps);
        assert!(
            (truth * (1.0 - TOLERANCE)..=truth * (1.0 + TOLERANCE)).contains(&m.receiver_bps),
            "receiver {:.3} Mbit/s, truth {:.3}: {m:?}\nqdiscs:\n{}",
            m.receiver_bps / 1e6,
            truth / 1e6,
            link.qdisc_stats()
        );
        assert!(m.receiver_intervals_bps.len() >= 7, "8 half-second intervals after the warm-up: {m:?}");
        let off: Vec<f64> =
            m.receiver_intervals_bps.iter().copied().filter(|b| (b / truth - 1.0).abs() > 0.03).collect();
        if off.is_empty() {
            return;
        }
        assert!(
            attempt < 3,
            "intervals off the link's {:.3} Mbit/s by more than 3% in three runs, the last: {off:?} ({m:?})",
            truth / 1e6
        );
        eprintln!("netns_tbf 1 Gbit/s: intervals off by more than 3% ({off:?}); trying again");
    }
}
