//! `--knee-loss` against ground truth (issue 23): a rate sweep over a veth pair whose two
//! ends each police incoming UDP with an nft `limit rate over` rule that drops and counts what
//! exceeds it, so that loss sets in partway up the sweep. The sweep's `--step-cmd` reads both
//! rules' counters before and after each step, as a lab reads its MAC registers; then, per
//! direction:
//!
//! - each step's `lost` is what the rule of its receiving end dropped during the step (its
//!   counter's delta), the breakdown's `unexplained` (nothing else on the path drops);
//! - the knee (`step.knee`) is the first step whose own measured loss is above the threshold,
//!   and no other step is marked.
//!
//! Needs root, `ip` and `nft`; otherwise it prints "skipping netns test: <reason>" and
//! passes, unless NETCHAR_REQUIRE_ALL=1, in which case it fails.
//!
//! Run: `cargo test -p netchar --test netns_knee -- --nocapture`

#[path = "support/netns.rs"]
mod netns;

use netns::{Link, Server};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

const PORT: &str = "5330";
const TABLE: &str = "nckneet";
/// The threshold the sweep is given: loss above 1% is the knee.
const KNEE_LOSS_PERCENT: f64 = 1.0;
/// The police rate: 2000 packets a second, 23.5 Mbit/s of 1472-byte datagrams (each its own
/// packet: the veths take no GSO batches, see [`police`]); a sweep from 10 to 40 Mbit/s
/// crosses it.
const POLICE: &str = "2000/second";
/// IPv4 + UDP headers, counted by nft with each datagram.
const IP_UDP_HEADERS: u64 = 28;

/// The rule on `ns`'s input: UDP over the police rate is counted and dropped. Its veth
/// (`dev`) takes no GSO batch (`gso_max_segs 1`: the stack segments a sender's batch before it
/// leaves), so that the rule polices datagrams, not batches whose size the sender's pacing
/// (and a busy machine) would set.
fn police(ns: &netns::Netns, dev: &str) -> Result<(), String> {
    ns.ip(&["link", "set", "dev", dev, "gso_max_segs", "1"])?;
    ns.nft(&["add", "table", "inet", TABLE])?;
    ns.nft(&["add", "chain", "inet", TABLE, "input", "{ type filter hook input priority 0; }"])?;
    ns.nft(&[
        "add", "rule", "inet", TABLE, "input", "meta", "l4proto", "udp", "limit", "rate", "over", POLICE, "burst",
        "200", "packets", "counter", "drop",
    ])?;
    Ok(())
}

/// A step command's reading: namespace name → (packets, bytes) of its rule's counter.
fn reading(c: &Value) -> BTreeMap<String, (u64, u64)> {
    c["stdout"]
        .as_str()
        .unwrap()
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w.as_slice() {
                [ns, "packets", p, "bytes", b] => Some((ns.to_string(), (p.parse().ok()?, b.parse().ok()?))),
                _ => None,
            }
        })
        .collect()
}

#[test]
fn the_knee_is_the_first_step_losing_more_than_the_threshold() {
    let link = match Link::create() {
        Ok(l) => l,
        Err(reason) => return netns::skip_or_fail(&reason),
    };
    if !netns::require::tool("nft policing", "nft", &["--version"], "apt-get install nftables") {
        return;
    }
    for (ns, dev) in [(&link.a, netns::DEV_A), (&link.b, netns::DEV_B)] {
        if let Err(e) = police(ns, dev) {
            return netns::skip_or_fail(&format!("cannot install the nft police rule: {e}"));
        }
    }
    let bin = env!("CARGO_BIN_EXE_netchar");
    let server_ip = link.b_ip.to_string();
    let mut server_cmd = link.b.command(bin);
    server_cmd.args(["server", "-B", &server_ip, "-p", PORT]);
    let server = Server::spawn(server_cmd, "listening on", Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("netchar server did not start: {e}"));
    // Reads both rules' counters, a line per namespace: "NAME packets P bytes B".
    let step_cmd = [&link.a, &link.b]
        .iter()
        .map(|ns| {
            let n = ns.name();
            format!("ip netns exec {n} nft list chain inet {TABLE} input | grep -o 'packets [0-9]* bytes [0-9]*' | sed 's/^/{n} /'")
        })
        .collect::<Vec<_>>()
        .join("; ");
    let mut client_cmd = link.a.command(bin);
    client_cmd.args([
        "suite",
        "bwsweep",
        &server_ip,
        "-p",
        PORT,
        "--from",
        "10M",
        "--to",
        "40M",
        "--step",
        "10M",
        "--duration",
        "1",
        "--knee-loss",
        "1%",
        "--json",
        "--step-cmd",
        &step_cmd,
    ]);
    let run = netns::run_with_timeout(client_cmd, Duration::from_secs(120)).unwrap_or_else(|e| panic!("{e}"));
    let context = format!("exit {:?}\nstderr:\n{}\nserver:\n{}", run.status, run.stderr, server.stderr());
    assert!(run.status.is_some_and(|s| s.success()), "{context}");
    let steps: Vec<Value> = serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {context}"));
    assert_eq!(steps.len(), 8, "4 rates, both ways");
    let mut knees = BTreeMap::new();
    for (i, r) in steps.iter().enumerate() {
        let dir = r["test"]["direction"].as_str().unwrap().to_string();
        let flow = &r["summary"][&dir];
        let step = &r["step"];
        assert_eq!(step["knee_loss_percent"].as_f64(), Some(KNEE_LOSS_PERCENT), "{step}");
        let cmds = step["commands"].as_array().unwrap();
        assert!(cmds.iter().all(|c| c["exit_code"] == 0), "step {}: {step}", i + 1);
        let (before, after) = (reading(&cmds[0]), reading(&cmds[1]));
        // The receiving end's rule: the server's (b) going up, the client's (a) going down.
        let receiver = if dir == "up" { link.b.name() } else { link.a.name() };
        let (p0, b0) = before[receiver];
        let (p1, b1) = after[receiver];
        let (skbs, bytes) = (p1 - p0, b1 - b0);
        let payload = r["test"]["block_bytes"].as_u64().unwrap();
        let dropped_bytes = bytes - IP_UDP_HEADERS * skbs;
        assert_eq!(dropped_bytes % payload, 0, "step {}: nft dropped {skbs} skbs / {bytes} bytes", i + 1);
        let dropped = dropped_bytes / payload;
        let lost = flow["receiver"]["lost"].as_u64().unwrap();
        let breakdown = &flow["loss_breakdown"];
        assert_eq!(lost, dropped, "step {}: lost vs the receiver's nft drops; {breakdown}", i + 1);
        assert_eq!(breakdown["unexplained"].as_u64(), Some(dropped), "step {}: {breakdown}", i + 1);
        let loss = flow["receiver"]["loss_percent"].as_f64().unwrap_or_else(|| panic!("step {}: {flow}", i + 1));
        let expect_knee = !knees.contains_key(&dir) && loss > KNEE_LOSS_PERCENT;
        if expect_knee {
            knees.insert(dir.clone(), i);
        }
        assert_eq!(step["knee"].as_bool().unwrap_or(false), expect_knee, "step {} ({dir}, loss {loss}%)", i + 1);
        eprintln!(
            "step {} {dir} {}: loss {loss:.3}% ({lost} = nft {dropped}){}",
            i + 1,
            r["test"]["udp"]["rate"],
            if expect_knee { " knee" } else { "" }
        );
    }
    // The police rate is crossed both ways: each direction has its knee.
    assert_eq!(knees.len(), 2, "{knees:?}\n{}", run.stdout);
}
