//! The send-only UDP test (`--proto sink`, alias `send-only`): datagrams into a sink, with no
//! netchar server and no control connection, counted three ways besides the sender's own count.
//!
//! The sink is a veth pair between two namespaces whose far end drops every packet at its
//! netdev ingress hook, counting them (the earliest point nft sees a packet; the far end has
//! no address at all). The sending namespace has static neighbour entries and no IPv6
//! router solicitation, so after a settling pause nothing but the test's datagrams leaves its
//! interface. For each run, IPv4 and IPv6, with and without GSO, with and without checksums:
//!
//! * the datagrams the kernel accepted (`summary.up.sender.udp_sent.packets`) equal
//! * the egress interface's own count over the test, from the result's evidence (`link`
//!   `tx_packets`, `tx_bytes`),
//! * the sending host's egress nft counter that the run read itself (`--nft-counter`), and
//! * the sink's ingress drop counter, read by the test.
//!
//! A GSO batch crosses the veth as one packet whose bytes hold every datagram and the headers
//! once, so each count of datagrams is `(bytes − headers × packets) / payload`, checked to
//! divide exactly: the headers are IP and UDP at the nft hooks (28 B IPv4, 48 B IPv6) and the
//! Ethernet header too at the interface (14 B more).
//!
//! A second test refuses every send with an egress drop rule: every datagram is counted as a
//! send error with EPERM, none as sent, and the rule's own count agrees.
//!
//! Needs root, `ip` and `nft`; otherwise "skipping netns test: REASON", or a failure under
//! NETCHAR_REQUIRE_ALL=1.

#[path = "support/netns.rs"]
mod netns;

use netns::{Link, DEV_A, DEV_B};
use serde_json::Value;
use std::time::Duration;

/// The sink's UDP port (nothing listens on it anywhere).
const PORT: &str = "9000";
/// Datagram payload bytes.
const PAYLOAD: u64 = 64;
/// The sending namespace's IPv6 address and the sink's, on the veth.
const A6: &str = "fd00:5e:5e::1";
const B6: &str = "fd00:5e:5e::2";

/// The two namespaces, the sink's drop rule at `DEV_B`'s ingress, the sender's counting rule
/// at its egress, and the sender quiet but for the test.
fn sink() -> Option<Link> {
    let link = match Link::create() {
        Ok(l) => l,
        Err(e) => {
            netns::skip_or_fail(&e);
            return None;
        }
    };
    let setup = || -> Result<(), String> {
        let (a, b) = (&link.a, &link.b);
        a.sysctl(&format!("net.ipv6.conf.{DEV_A}.router_solicitations"), "0")?;
        a.ip(&["-6", "addr", "add", &format!("{A6}/64"), "dev", DEV_A, "nodad"])?;
        let mac = b.ip(&["-br", "link", "show", DEV_B])?;
        let mac = String::from_utf8_lossy(&mac.stdout);
        let mac = mac.split_whitespace().nth(2).ok_or_else(|| format!("no MAC for {DEV_B} in {mac:?}"))?.to_string();
        a.ip(&["neigh", "replace", &link.b_ip.to_string(), "lladdr", &mac, "dev", DEV_A, "nud", "permanent"])?;
        a.ip(&["-6", "neigh", "replace", B6, "lladdr", &mac, "dev", DEV_A, "nud", "permanent"])?;
        b.nft(&["add", "table", "netdev", "sink"])?;
        let hook = format!("{{ type filter hook ingress device {DEV_B} priority 0; policy accept; }}");
        b.nft(&["add", "chain", "netdev", "sink", "in", &hook])?;
        b.nft(&["add", "rule", "netdev", "sink", "in", "counter", "drop"])?;
        a.nft(&["add", "table", "inet", "count"])?;
        a.nft(&[
            "add",
            "chain",
            "inet",
            "count",
            "out",
            "{ type filter hook postrouting priority 0; policy accept; }",
        ])?;
        a.nft(&["add", "rule", "inet", "count", "out", "udp", "dport", PORT, "counter"])?;
        Ok(())
    };
    if let Err(e) = setup() {
        netns::skip_or_fail(&e);
        return None;
    }
    // The sender's IPv6 joins (MLD reports, about 1 s apart) and link-local address are done
    // before any test counts its interface.
    std::thread::sleep(Duration::from_secs(3));
    Some(link)
}

/// `netchar udp DEST --proto sink ...` from the sending namespace, as JSON.
fn send(link: &Link, dest: &str, extra: &[&str]) -> Value {
    let bin = env!("CARGO_BIN_EXE_netchar");
    let mut cmd = link.a.command(bin);
    let payload = PAYLOAD.to_string();
    cmd.args(["udp", dest, "-p", PORT, "--proto", "sink", "-l", &payload, "-t", "1", "-i", "0", "--json"]);
    cmd.args(["--nft-counter", "inet count out"]).args(extra);
    let shown = format!("{cmd:?}");
    let run = netns::run_with_timeout(cmd, Duration::from_secs(30)).unwrap_or_else(|e| panic!("{e}"));
    assert!(run.status.is_some_and(|s| s.success()), "{shown}: {:?}\n{}\n{}", run.status, run.stderr, run.stdout);
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{shown}: not JSON ({e}):\n{}", run.stdout))
}

/// Datagrams of `PAYLOAD` bytes in a count of `packets` and `bytes`, each packet carrying
/// `headers` bytes once; the division must be exact.
fn datagrams(what: &str, packets: u64, bytes: u64, headers: u64) -> u64 {
    let payload = bytes.checked_sub(headers * packets).unwrap_or_else(|| panic!("{what}: {bytes} bytes < headers"));
    assert_eq!(payload % PAYLOAD, 0, "{what}: {packets} packets, {bytes} bytes are not whole {PAYLOAD}-byte datagrams");
    payload / PAYLOAD
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

#[test]
fn datagrams_sent_into_a_sink_are_what_the_interface_and_both_nft_rules_counted() {
    let Some(link) = sink() else { return };
    let b4 = link.b_ip.to_string();
    let cases: [(&str, &str, &[&str], u64); 6] = [
        ("IPv4, GSO", &b4, &["-b", "0"], 28),
        ("IPv4, no GSO, two threads", &b4, &["-b", "0", "--no-gso", "-P", "2"], 28),
        ("IPv4, no checksums", &b4, &["-b", "0", "--no-udp-checksum"], 28),
        ("IPv4, paced", &b4, &["--pps", "20000"], 28),
        ("IPv6, GSO", B6, &["-b", "0"], 48),
        ("IPv6, no GSO", B6, &["-b", "0", "--no-gso"], 48),
    ];
    for (what, dest, extra, ip_udp) in cases {
        let before = link.b.nft_counters("netdev", "sink", "in").unwrap()[0];
        let r = send(&link, dest, extra);
        let after = link.b.nft_counters("netdev", "sink", "in").unwrap()[0];
        let sent = &r["summary"]["up"]["sender"];
        let packets = u(&sent["packets"]);
        assert!(packets > 1000, "{what}: {sent}");
        assert_eq!(u(&sent["send_errors"]), 0, "{what}: {sent}");
        assert_eq!(r["test"]["protocol"], "sink", "{what}");
        assert!(r["remote_host"].is_null(), "{what}: a sink has no far end that reports");
        let sink = datagrams(&format!("{what}: sink ingress"), after.0 - before.0, after.1 - before.1, ip_udp);
        assert_eq!(sink, packets, "{what}: sent vs the sink's ingress counter");
        let nft = &r["evidence"]["nft"];
        assert_eq!(nft.as_array().map(Vec::len), Some(1), "{what}: {nft}");
        let egress = datagrams(&format!("{what}: egress nft"), u(&nft[0]["packets"]), u(&nft[0]["bytes"]), ip_udp);
        assert_eq!(egress, packets, "{what}: sent vs the egress nft counter the run read");
        let local = &r["evidence"]["local"];
        assert_eq!(local["interface"], DEV_A, "{what}: {local}");
        let link_tx = &local["link"];
        let iface =
            datagrams(&format!("{what}: {DEV_A} tx"), u(&link_tx["tx_packets"]), u(&link_tx["tx_bytes"]), ip_udp + 14);
        assert_eq!(iface, packets, "{what}: sent vs {DEV_A}'s own tx counters");
        let method = &r["method"];
        let gso = !extra.contains(&"--no-gso") && !extra.contains(&"--no-udp-checksum");
        assert_eq!(method["gso"], gso, "{what}: {method}");
        assert_eq!(method["udp_checksum"], !extra.contains(&"--no-udp-checksum"), "{what}: {method}");
    }
}

#[test]
fn every_send_a_firewall_refuses_is_an_eperm_send_error() {
    let Some(link) = sink() else { return };
    link.a.nft(&["add", "chain", "inet", "count", "refuse", "{ type filter hook output priority 0; }"]).unwrap();
    link.a.nft(&["add", "rule", "inet", "count", "refuse", "udp", "dport", PORT, "counter", "drop"]).unwrap();
    let r = send(&link, &link.b_ip.to_string(), &["--pps", "2000", "--no-gso", "--nft-counter", "inet count refuse"]);
    let sent = &r["summary"]["up"]["sender"];
    let refused = u(&sent["send_errors"]);
    assert!(refused > 1000, "{sent}");
    assert_eq!(u(&sent["packets"]), 0, "{sent}");
    assert_eq!(sent["send_errors_by_errno"], serde_json::json!({ "EPERM": refused }), "{sent}");
    let rules = r["evidence"]["nft"].as_array().unwrap();
    let refusing = rules.iter().find(|n| n["chain"] == "inet count refuse").expect("the refusing rule's count");
    assert_eq!(u(&refusing["packets"]), refused, "{refusing}");
}

/// plans/pps.toml as written, but for its length (0.3 s runs, 3 counted after 1 warm-up):
/// into a sink at its own addresses, then compared as the write-up compares. The comparison is
/// refused until the checksum is named, and then names nothing else; what the statistics say
/// of three short sets on a busy machine is not asserted (a 95% test says "difference" of equal
/// sets one time in twenty).
#[test]
fn the_pps_plan_runs_into_a_sink_and_compares_like_for_like() {
    let Some(link) = sink() else { return };
    let mac = link.b.ip(&["-br", "link", "show", DEV_B]).unwrap();
    let mac = String::from_utf8_lossy(&mac.stdout).split_whitespace().nth(2).unwrap().to_string();
    for (addr, peer, v6) in [("198.18.0.1/24", "198.18.0.2", false), ("2001:2::1/64", "2001:2::2", true)] {
        let family = if v6 { "-6" } else { "-4" };
        link.a.ip(&[family, "addr", "add", addr, "dev", DEV_A, "nodad"]).unwrap();
        link.a.ip(&[family, "neigh", "replace", peer, "lladdr", &mac, "dev", DEV_A, "nud", "permanent"]).unwrap();
    }
    let dir = std::env::temp_dir().join(format!("netchar-pps-plan-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let plan = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../plans/pps.toml")).unwrap();
    let short = plan.replace("duration = 5", "duration = 0.3").replace("repeat = 10", "repeat = 3");
    assert_ne!(short, plan, "plans/pps.toml no longer sets duration = 5 and repeat = 10");
    std::fs::write(dir.join("pps.toml"), short).unwrap();
    let bin = env!("CARGO_BIN_EXE_netchar");
    let run = |args: &[&str]| {
        let mut cmd = link.a.command(bin);
        cmd.args(args).current_dir(&dir);
        let shown = format!("{cmd:?}");
        let out = netns::run_with_timeout(cmd, Duration::from_secs(120)).unwrap_or_else(|e| panic!("{e}"));
        (out.status.and_then(|s| s.code()), out.stdout, out.stderr, shown)
    };
    let (code, stdout, stderr, shown) = run(&["run", "pps.toml"]);
    assert_eq!(code, Some(0), "{shown}\n{stderr}\n{stdout}");
    // Each test's repeat summary judges the send rate: nothing receives.
    assert_eq!(stdout.matches("up.sender.bits_per_second: ").count(), 3, "{stdout}");
    assert!(!stdout.contains("up.receiver.bits_per_second: "), "{stdout}");
    for set in ["runs/pps-udp4", "runs/pps-udp4-nocsum", "runs/pps-udp6"] {
        let runs: Vec<_> = std::fs::read_dir(dir.join(set)).unwrap().collect();
        assert_eq!(runs.len(), 3, "{set}: the counted runs, the warm-up not kept");
    }
    let sets = ["runs/pps-udp4", "runs/pps-udp4-nocsum", "runs/pps-udp6"];
    let (code, _, stderr, shown) = run(&[&["compare"][..], &sets, &["--metric", "tx-pps"]].concat());
    assert_eq!(code, Some(2), "{shown}: {stderr}");
    assert!(
        stderr.contains("runs/pps-udp4-nocsum sent differently from runs/pps-udp4: udp_checksum: on vs off. Make"),
        "{stderr}"
    );
    let args = [&["compare"][..], &sets, &["--metric", "tx-pps", "--accept-difference", "udp_checksum"]].concat();
    let (code, stdout, stderr, shown) = run(&args);
    assert_eq!(code, Some(0), "{shown}: {stderr}");
    assert!(stderr.contains("the sets differ in udp_checksum: on vs off, as accepted"), "{stderr}");
    for (mark, n) in [("x", 3), ("+", 3), ("*", 3)] {
        assert!(stdout.contains(&format!("{mark}   {n} ")), "{stdout}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
