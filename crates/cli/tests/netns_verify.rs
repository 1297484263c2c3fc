//! Ground truth for `--verify`: two network namespaces joined by a veth pair, and in each an
//! nftables rule on the output hook that rewrites one payload byte of every Nth data packet the
//! namespace sends and counts the packets it rewrote. `--verify` must find exactly those.
//!
//! * `tcp_verify_counts_exactly_the_bytes_a_rule_rewrote_both_ways`: `--bidir` TCP of a random
//!   payload; each rewritten packet has one byte inverted (XOR 0xff, so it always differs), so
//!   each flow's `corrupted_bytes` equals the count of its sending namespace's rule.
//! * `udp_verify_counts_exactly_the_datagrams_a_rule_rewrote_both_ways`: `--bidir` UDP, one
//!   datagram per packet (`--no-gso`); `corrupted_datagrams` (and bytes) equal each rule's count,
//!   the first at datagram 0 (the rule's numgen starts there), byte 100.
//! * `rr_verify_counts_the_requests_and_answers_a_rule_rewrote`: UDP rr; the responder's count
//!   of corrupted requests and the requester's of corrupted answers equal the two rules'.
//!
//! How the rewrite is made: the tc way is `action pedit ex munge ... pipe action csum udp`
//! behind a filter that picks every Nth packet (gact's `random determ`). This machine's kernel
//! has none of those actions (CONFIG_NET_ACT_PEDIT, _CSUM and _GACT unset), so the rewrite is
//! nftables' payload statement, which does the same in one rule: `numgen inc mod N 0` picks
//! every Nth matching packet exactly, `@th,OFFSET,8 set @th,OFFSET,8 ^ 0xff` inverts the byte
//! OFFSET bits into the transport header and updates the checksum itself (what `csum` does
//! after pedit), and its `counter` counts the packets rewritten: the ground truth. Offsets: 864
//! bits is byte 108 from the UDP header, byte 100 of the UDP payload (netchar's 24-byte header
//! included, and in rr the 8-byte sequence key); 800 bits is byte 100 from the TCP header,
//! past any header with options, so always payload.
//!
//! Only data packets are rewritten. The control connection shares the data port, so the TCP
//! rules take only packets of a connection that has carried more than 1 MB in the data's
//! direction (conntrack's byte counts, `nf_conntrack_acct`; a control connection carries a few
//! kB) and longer than 1400 bytes (no pure ACKs); UDP takes netchar's data datagrams by their
//! first bytes (`NC`, version 1, flags 0; setup datagrams have flags) or, for rr, by length.
//! A rewritten packet must arrive once: the runs assert no datagram lost, and TCP is paced
//! below what the debug build's receivers keep up with, so that no segment is sent twice.
//!
//! Needs root, `ip`, `tc` and `nft`; otherwise it prints "skipping netns test: <reason>" and
//! passes, unless NETCHAR_REQUIRE_ALL=1, in which case it fails.
//!
//! Run: `cargo test -p netchar --test netns_verify -- --nocapture`

#[path = "support/netns.rs"]
mod netns;

use netns::{Link, Netns, Server, DEV_A, DEV_B};
use serde_json::Value;
use std::time::Duration;

const TABLE: &str = "ncverify";
const CHAIN: &str = "out";

/// The link, with an empty output chain in both namespaces, or None once the reason it cannot
/// be made here was given.
fn link_with_chains() -> Option<Link> {
    let link = match Link::create() {
        Ok(l) => l,
        Err(reason) => {
            netns::skip_or_fail(&reason);
            return None;
        }
    };
    for ns in [&link.a, &link.b] {
        let made = ns
            .nft(&["add", "table", "inet", TABLE])
            .and_then(|_| ns.nft(&["add", "chain", "inet", TABLE, CHAIN, "{ type filter hook output priority 0; }"]));
        if let Err(e) = made {
            netns::skip_or_fail(&format!("cannot add an nftables chain: {e}"));
            return None;
        }
    }
    Some(link)
}

/// Adds the rule `oif DEV MATCH... numgen inc mod EVERY 0 counter @th,BIT,8 set @th,BIT,8 ^ 0xff`
/// to namespace `ns`.
fn rewrite_every(ns: &Netns, dev: &str, matcher: &[&str], every: u32, bit: u32) -> Result<(), String> {
    let (every, field) = (every.to_string(), format!("@th,{bit},8"));
    let xor = format!("{field} ^ 0xff");
    let mut rule = vec!["add", "rule", "inet", TABLE, CHAIN, "oif", dev];
    rule.extend_from_slice(matcher);
    rule.extend_from_slice(&["numgen", "inc", "mod", &every, "0", "counter", &field, "set", &xor]);
    ns.nft(&rule).map(|_| ())
}

/// Packets the one rewriting rule of `ns` rewrote.
fn rewritten(ns: &Netns) -> u64 {
    let counters = ns.nft_counters("inet", TABLE, CHAIN).unwrap_or_else(|e| panic!("{e}"));
    let &[(packets, _)] = counters.as_slice() else { panic!("one counter in {}: {counters:?}", ns.name()) };
    packets
}

/// Runs `netchar ARGS... --json` from namespace a against a one-off server in namespace b.
fn run(link: &Link, port: u16, args: &[&str]) -> Value {
    let bin = env!("CARGO_BIN_EXE_netchar");
    let port_s = port.to_string();
    let mut server_cmd = link.b.command(bin);
    server_cmd.args(["server", "-B", &link.b_ip.to_string(), "-p", &port_s, "--one-off"]);
    let mut server = Server::spawn(server_cmd, "listening on", Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("netchar server did not start in {}: {e}", link.b.name()));
    let mut client = link.a.command(bin);
    client.arg(args[0]).args([&link.b_ip.to_string(), "-p", &port_s, "-i", "0", "--json"]).args(&args[1..]);
    let shown = format!("{client:?}");
    let out = netns::run_with_timeout(client, Duration::from_secs(60)).unwrap_or_else(|e| panic!("{e}"));
    let _ = server.child.wait_timeout(Duration::from_secs(5));
    let context = netns::failure_context(&shown, &out, &server, link);
    assert!(out.status.is_some_and(|s| s.success()), "{context}\nstdout:\n{}", out.stdout);
    let doc: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("no JSON ({e})\n{context}"));
    assert!(doc["error"].is_null(), "{}\n{context}", doc["error"]);
    doc
}

fn int(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

#[test]
fn tcp_verify_counts_exactly_the_bytes_a_rule_rewrote_both_ways() {
    let Some(link) = link_with_chains() else { return };
    let port: u16 = 5320;
    let p = port.to_string();
    let rules = rewrite_every(
        &link.a,
        DEV_A,
        &["tcp", "dport", &p, "ct", "original", "bytes", ">", "1000000", "ip", "length", ">", "1400"],
        50,
        800,
    )
    .and_then(|_| {
        rewrite_every(
            &link.b,
            DEV_B,
            &["tcp", "sport", &p, "ct", "reply", "bytes", ">", "1000000", "ip", "length", ">", "1400"],
            40,
            800,
        )
    })
    .and_then(|_| link.a.sysctl("net/netfilter/nf_conntrack_acct", "1"))
    .and_then(|_| link.b.sysctl("net/netfilter/nf_conntrack_acct", "1"));
    if let Err(e) = rules {
        netns::skip_or_fail(&format!("cannot install the rewriting rules: {e}"));
        return;
    }
    let r = run(&link, port, &["tcp", "--bidir", "-n", "200M", "-b", "1G", "--payload", "random", "--verify"]);
    for (flow, ns) in [("up", &link.a), ("down", &link.b)] {
        let (f, n) = (&r["summary"][flow], rewritten(ns));
        let v = &f["verify"];
        println!("{flow}: the rule rewrote {n} packets; --verify: {v}");
        assert!(n > 10, "{flow}: the rule rewrote {n} packets: {f}");
        assert_eq!(f["bytes_match"], true, "{f}");
        assert_eq!(int(&v["checked_bytes"]), 200_000_000, "every byte compared ({flow}): {v}");
        assert_eq!(int(&v["corrupted_bytes"]), n, "{flow}: one byte per rewritten packet: {v}");
        assert!(v["first_bad_offset"].is_u64() && v["first_bad_stream"].is_u64(), "{v}");
    }
}

#[test]
fn udp_verify_counts_exactly_the_datagrams_a_rule_rewrote_both_ways() {
    let Some(link) = link_with_chains() else { return };
    let port: u16 = 5321;
    let p = port.to_string();
    // netchar's data datagrams: "NC", version 1, flags 0 after the UDP header.
    let data = |dir: &'static str| ["udp", dir, "PORT", "@th,64,32", "0x4e430100"];
    let (mut up, mut down) = (data("dport"), data("sport"));
    up[2] = &p;
    down[2] = &p;
    let rules = rewrite_every(&link.a, DEV_A, &up, 7, 864).and_then(|_| rewrite_every(&link.b, DEV_B, &down, 9, 864));
    if let Err(e) = rules {
        netns::skip_or_fail(&format!("cannot install the rewriting rules: {e}"));
        return;
    }
    let args = [
        "udp",
        "--bidir",
        "--no-gso",
        "--pps",
        "2000",
        "-n",
        "2000000",
        "-l",
        "1000",
        "--payload",
        "random",
        "--verify",
    ];
    let r = run(&link, port, &args);
    for (flow, ns) in [("up", &link.a), ("down", &link.b)] {
        let (f, n) = (&r["summary"][flow], rewritten(ns));
        let v = &f["verify"];
        println!("{flow}: the rule rewrote {n} datagrams; --verify: {v}");
        assert_eq!((int(&f["receiver"]["packets"]), int(&f["receiver"]["lost"])), (2000, 0), "{f}");
        assert_eq!(int(&v["checked_datagrams"]), 2000, "{v}");
        assert_eq!((int(&v["corrupted_datagrams"]), int(&v["corrupted_bytes"])), (n, n), "{flow}: {v}");
        assert_eq!((int(&v["first_bad_datagram"]), int(&v["first_bad_offset"])), (0, 100), "{flow}: {v}");
    }
}

#[test]
fn rr_verify_counts_the_requests_and_answers_a_rule_rewrote() {
    let Some(link) = link_with_chains() else { return };
    let port: u16 = 5322;
    let p = port.to_string();
    // Requests and answers of 1000 bytes; setup datagrams (64) and challenges (40) are shorter.
    let rules = rewrite_every(&link.a, DEV_A, &["udp", "dport", &p, "ip", "length", ">", "200"], 7, 864)
        .and_then(|_| rewrite_every(&link.b, DEV_B, &["udp", "sport", &p, "ip", "length", ">", "200"], 9, 864));
    if let Err(e) = rules {
        netns::skip_or_fail(&format!("cannot install the rewriting rules: {e}"));
        return;
    }
    let r = run(&link, port, &["rr", "--udp", "-n", "3000", "-l", "1000", "--payload", "stackthru", "--verify"]);
    let rr = &r["summary"]["rr"];
    assert_eq!((int(&rr["transactions"]), int(&rr["lost"]), int(&rr["late"])), (3000, 0, 0), "{rr}");
    for (part, ns) in [("requests", &link.a), ("responses", &link.b)] {
        let (v, n) = (&r["summary"]["rr_verify"][part], rewritten(ns));
        println!("{part}: the rule rewrote {n} datagrams; --verify: {v}");
        assert_eq!(int(&v["checked_datagrams"]), 3000, "{part}: {v}");
        assert_eq!((int(&v["corrupted_datagrams"]), int(&v["corrupted_bytes"])), (n, n), "{part}: {v}");
        assert_eq!(int(&v["first_bad_offset"]), 100, "{part}: {v}");
    }
}
