//! Latency under load against ground truth: two namespaces joined by a veth pair shaped with
//! tbf to 50 Mbit/s with a deep queue. Idle, a 1-byte round trip crosses an empty queue; with a
//! bulk TCP upload on the same link, requests wait behind the upload's backlog in the shaper,
//! so the loaded p99 must exceed the idle p99, and the report must say so. With `rrul` (four
//! flows each way, shaped both ways) the same holds for each class's probe.
//!
//! Needs root, `ip` and `tc`; otherwise it prints "skipping netns test: <reason>" and passes,
//! unless NETCHAR_REQUIRE_ALL=1, in which case it fails.

#[path = "support/netns.rs"]
mod netns;

use netns::{Link, Server, DEV_A, DEV_B};
use serde_json::Value;
use std::time::Duration;

/// 50 Mbit/s; a 50 ms queue (≈ 300 KB) that TCP's backlog can fill: a bufferbloated bottleneck.
const TBF: &[&str] = &["tbf", "rate", "50mbit", "burst", "32kb", "latency", "50ms"];

fn run_rr(link: &Link, port: u16, extra: &[&str]) -> Value {
    let bin = env!("CARGO_BIN_EXE_netchar");
    let port_s = port.to_string();
    let mut server_cmd = link.a.command(bin);
    server_cmd.args(["server", "-p", &port_s]);
    let server = Server::spawn(server_cmd, "listening on", Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("netchar server did not start: {e}"));
    let mut client = link.b.command(bin);
    client.args(["rr", &link.a_ip.to_string(), "-p", &port_s, "--json"]).args(extra);
    let shown = format!("{client:?}");
    let run = netns::run_with_timeout(client, Duration::from_secs(60)).unwrap_or_else(|e| panic!("{e}"));
    assert!(run.status.is_some_and(|s| s.success()), "{shown} failed: {}\nserver: {}", run.stderr, server.stderr());
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{shown}: not JSON ({e}): {}", run.stdout))
}

#[test]
fn latency_under_upload_exceeds_idle_latency_at_a_bloated_bottleneck() {
    let Some(link) = Link::shaped(TBF) else { return };
    let shaper = || link.b.qdisc_counters(DEV_B).unwrap_or_else(|e| panic!("{e}"));
    let before = shaper();
    let r = run_rr(&link, 5311, &["-t", "3", "-i", "0", "--under-load", "tcp-up"]);
    let tbf = shaper().since(&before);
    assert!(r["error"].is_null(), "{}", r["error"]);
    let s = &r["summary"];
    let p99 = |k: &str| s[k]["latency_us"]["p99"].as_f64().unwrap_or_else(|| panic!("{k} missing: {s}"));
    let (idle, loaded) = (p99("rr_idle"), p99("rr_loaded"));
    let load_bps = s["load"]["up"]["receiver"]["bits_per_second"].as_f64().unwrap_or(0.0);
    eprintln!(
        "netns_latency: idle p99 {idle:.1} us, loaded p99 {loaded:.1} us ({:.1}x), load {:.1} Mbit/s, placement {}",
        loaded / idle,
        load_bps / 1e6,
        s["placement"]
    );
    assert!(loaded > idle, "queueing in the shaper must show: idle p99 {idle} us, loaded p99 {loaded} us");
    // The load really ran over the shaped link while latency was measured: the shaper itself
    // held packets back for want of tokens (a share of the machine the load may not have had
    // would be an assumption), and no rate got past it.
    assert!(load_bps > 0.0 && load_bps < 52e6, "load {load_bps} bit/s through a 50 Mbit/s shaper");
    assert!(tbf.overlimits > 0, "the upload never filled the shaper: {tbf:?}\n{}", link.qdisc_stats());
    assert!(s["rr_loaded"]["transactions"].as_u64().unwrap() > 0);
}

/// RRUL through the same bottleneck, shaped both ways: four TCP flows up and four down fill
/// the shaper in each direction, and every class's probe waits behind them (tbf is one FIFO:
/// it schedules no class ahead of another).
#[test]
fn rrul_through_a_bloated_bottleneck_delays_every_class() {
    let Some(link) = Link::shaped(TBF) else { return };
    let shapers = || {
        let counters = |ns: &netns::Netns, dev| ns.qdisc_counters(dev).unwrap_or_else(|e| panic!("{e}"));
        [("up", counters(&link.b, DEV_B)), ("down", counters(&link.a, DEV_A))]
    };
    let before = shapers();
    let r = run_rr(&link, 5312, &["-t", "3", "-i", "0", "--under-load", "rrul"]);
    let after = shapers();
    assert!(r["error"].is_null(), "{}", r["error"]);
    let ul = &r["summary"]["under_load"];
    for dir in ["up", "down"] {
        let bps: f64 =
            ul["flows"].as_array().unwrap().iter().filter_map(|f| f[dir]["receiver"]["bits_per_second"].as_f64()).sum();
        eprintln!("netns_latency rrul: {dir} flows {:.1} Mbit/s in all", bps / 1e6);
        assert!(bps > 0.0 && bps < 52e6, "{dir}: {bps} bit/s through a 50 Mbit/s shaper");
    }
    // Each direction's flows filled its shaper, by the shaper's own count.
    for ((dir, after), (_, before)) in after.iter().zip(&before) {
        let tbf = after.since(before);
        assert!(tbf.overlimits > 0, "{dir}: the flows never filled the shaper: {tbf:?}\n{}", link.qdisc_stats());
    }
    for p in ul["probes"].as_array().unwrap() {
        let p99 = |phase: &str| p[phase]["latency_us"]["p99"].as_f64().unwrap_or_else(|| panic!("{phase}: {p}"));
        let (idle, loaded) = (p99("idle"), p99("loaded"));
        eprintln!("netns_latency rrul: {} idle p99 {idle:.1} us, loaded p99 {loaded:.1} us", p["class"]);
        assert!(loaded > idle, "{}: idle p99 {idle} us, loaded p99 {loaded} us", p["class"]);
        assert!(p["loaded"]["transactions"].as_u64().unwrap() > 0);
    }
}
