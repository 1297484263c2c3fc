//! The C responder on lwIP's own TCP/IP stack in user space (responder/ports/lwip-tap,
//! docs/embedded.md), measured by the netchar client: TCP up and down, UDP up and down with
//! exact loss accounting, rr and echo.
//!
//! Two namespaces joined by a veth pair (support/netns.rs). Namespace `a` also holds a TAP
//! device: its kernel side is 10.202.x.1/24, and the responder (its ASan/UBSan build) attaches
//! to it and runs lwIP as 10.202.x.2, so every frame to and from the responder goes through
//! lwIP's ARP, IPv4, TCP, UDP and sockets. The client runs in `b` and reaches lwIP through `a`,
//! which forwards. The hop is there for the loss ground truth: an nftables rule in `a`'s forward
//! hook drops ≈2% of the data datagrams at random, unseen by either end (a drop in the client's
//! own output hook would be reported to it as a send error). The loss netchar reports must
//! equal the rule's counter, up (the responder accounts from the datagram headers) and down
//! (`-R`: the responder paces, the client accounts).
//!
//! Needs root, `ip`, `nft`, make, gcc and liblwip-dev; otherwise it prints why and passes,
//! unless NETCHAR_REQUIRE_ALL=1 (CI), in which case it fails.

#[path = "support/netns.rs"]
mod netns;

use netns::{Finished, Link, Netns, Server, DEV_A, DEV_B};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const TAP: &str = "nctap0";
const PAYLOAD: u64 = 1472;
/// First payload bytes of a netchar data datagram (setup datagrams are retried and must not
/// be dropped by the rule).
const DATA_PREFIX: &str = "0x4e430100";
const TABLE: &str = "nclwip";
const CHAIN: &str = "lossy";
const RESPONDER: &str = "netchar-responder 0.1";

/// `make -C responder lwip-tap-asan`; Err(reason to skip) without make, gcc or lwIP's headers.
fn responder_binary() -> Result<PathBuf, String> {
    for tool in ["make", "gcc"] {
        if Command::new(tool).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_err() {
            return Err(format!("`{tool}` is not installed; the lwIP responder needs make and gcc"));
        }
    }
    if !Path::new("/usr/include/lwip/lwip/sockets.h").exists() {
        return Err("lwIP's headers are not installed (apt-get install liblwip-dev)".into());
    }
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../responder");
    let out = Command::new("make").arg("-C").arg(&dir).arg("lwip-tap-asan").output().expect("run make -C responder");
    assert!(
        out.status.success(),
        "make -C responder lwip-tap-asan failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(dir.join("build/netchar-responder-lwip-asan"))
}

/// The link with a TAP device in `a` and routes between `b` and lwIP's subnet; returns
/// (kernel side address, lwIP's address).
fn add_tap(link: &Link) -> Result<(String, String), String> {
    let x = link.a_ip.octets()[2];
    let (kernel_side, lwip) = (format!("10.202.{x}.1"), format!("10.202.{x}.2"));
    link.a.ip(&["tuntap", "add", "dev", TAP, "mode", "tap"])?;
    link.a.ip(&["addr", "add", &format!("{kernel_side}/24"), "dev", TAP])?;
    link.a.ip(&["link", "set", TAP, "up"])?;
    for (ns, dev) in [(&link.a, DEV_A), (&link.b, DEV_B)] {
        ns.ip(&["link", "set", dev, "mtu", "1500"])?;
    }
    link.a.sysctl("net/ipv4/ip_forward", "1")?;
    link.b.ip(&["route", "add", &format!("10.202.{x}.0/24"), "via", &link.a_ip.to_string()])?;
    Ok((kernel_side, lwip))
}

/// A fresh forward-hook rule in `a` that drops ≈2% of the data datagrams of `port_match port`.
fn add_drop_rule(ns: &Netns, port_match: &str, port: u16) -> Result<(), String> {
    let _ = ns.nft(&["delete", "table", "inet", TABLE]);
    ns.nft(&["add", "table", "inet", TABLE])?;
    ns.nft(&["add", "chain", "inet", TABLE, CHAIN, "{ type filter hook forward priority 0; }"])?;
    let port = port.to_string();
    ns.nft(&[
        "add",
        "rule",
        "inet",
        TABLE,
        CHAIN,
        "udp",
        port_match,
        &port,
        "@th,64,32",
        DATA_PREFIX,
        "numgen",
        "random",
        "mod",
        "1000",
        "<",
        "20",
        "counter",
        "drop",
    ])
    .map(|_| ())
}

/// Datagrams the drop rule dropped.
fn dropped(ns: &Netns) -> Result<u64, String> {
    ns.counted_datagrams(TABLE, CHAIN, PAYLOAD)
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

struct Bed {
    link: Link,
    lwip: String,
    server: Server,
    port: String,
}

impl Bed {
    /// `netchar KIND LWIP -p PORT --json EXTRA...` from namespace b; the one result, checked
    /// to be error-free and measured against the responder.
    fn run(&self, kind: &str, extra: &[&str]) -> Value {
        let mut cmd = self.link.b.command(env!("CARGO_BIN_EXE_netchar"));
        cmd.args([kind, &self.lwip, "-p", &self.port, "--json"]).args(extra);
        let shown = format!("{cmd:?}");
        let run = netns::run_with_timeout(cmd, Duration::from_secs(60)).unwrap_or_else(|e| panic!("{e}"));
        let context = self.context(&shown, &run);
        assert!(run.status.is_some_and(|s| s.success()), "netchar failed\n{context}\nstdout:\n{}", run.stdout);
        let doc: Value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("not JSON: {e}\n{context}"));
        // `netchar echo` prints one result per pattern element, in an array.
        let doc = match doc {
            Value::Array(mut all) => {
                assert_eq!(all.len(), 1, "one result per pattern: {all:?}");
                all.remove(0)
            }
            one => one,
        };
        assert!(doc["error"].is_null(), "{}\n{context}", doc["error"]);
        assert_eq!(doc["test"]["peer_software"], RESPONDER, "{}", doc["test"]);
        doc
    }

    fn context(&self, shown: &str, run: &Finished) -> String {
        format!(
            "client: {shown}\nclient exit: {:?} after {:?}\nclient stderr:\n{}\nresponder stderr:\n{}",
            run.status,
            run.elapsed,
            run.stderr,
            self.server.stderr()
        )
    }

    /// TCP with a byte budget: both ends counted exactly the budget.
    fn tcp(&self, reverse: bool) {
        const BUDGET: u64 = 8_000_000;
        let budget = BUDGET.to_string();
        let mut extra = vec!["-n", &budget];
        if reverse {
            extra.push("-R");
        }
        let res = self.run("tcp", &extra);
        let flow = if reverse { "down" } else { "up" };
        let s = &res["summary"][flow];
        assert_eq!(s["bytes_match"], true, "{flow}: {s}");
        let (tx, rx) = (u(&s["sender"]["total_bytes"]), u(&s["receiver"]["total_bytes"]));
        eprintln!("netns_lwip tcp {flow}: sent {tx}, received {rx}");
        assert_eq!(tx, BUDGET, "{flow}: the sender sends exactly -n: {s}");
        assert_eq!(rx, BUDGET, "{flow}: the receiver reads every byte: {s}");
        let far = res["streams"].as_array().unwrap().iter().find(|r| r["measured_by"] == "server").unwrap();
        assert_eq!(u(&far["bytes"]), BUDGET, "the responder's own count: {far}");
    }

    /// TCP receivers counted in lwIP's receive callback (the port's TCP sink) side by side:
    /// two up streams, then one up beside one down (--bidir); every flow exact to its budget.
    fn tcp_streams(&self) {
        const BUDGET: u64 = 6_000_000;
        let budget = BUDGET.to_string();
        for (extra, flows) in
            [(vec!["-n", &budget, "-P", "2"], &["up"][..]), (vec!["-n", &budget, "--bidir"], &["up", "down"][..])]
        {
            let res = self.run("tcp", &extra);
            for flow in flows {
                let s = &res["summary"][flow];
                let (tx, rx) = (u(&s["sender"]["total_bytes"]), u(&s["receiver"]["total_bytes"]));
                eprintln!("netns_lwip tcp {extra:?} {flow}: sent {tx}, received {rx}");
                assert_eq!(s["bytes_match"], true, "{extra:?} {flow}: {s}");
                assert_eq!((tx, rx), (BUDGET, BUDGET), "{extra:?} {flow}: {s}");
            }
            let far: u64 = res["streams"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| r["measured_by"] == "server" && r["flow"] == "up")
                .map(|r| u(&r["bytes"]))
                .sum();
            assert_eq!(far, BUDGET, "{extra:?}: the responder's own count of the up streams: {}", res["streams"]);
        }
    }

    /// Paced UDP through the drop rule: lost == the rule's counter, sent == received + lost.
    fn udp(&self, reverse: bool) {
        let port: u16 = self.port.parse().unwrap();
        let port_match = if reverse { "sport" } else { "dport" };
        if let Err(e) = add_drop_rule(&self.link.a, port_match, port) {
            return netns::skip_or_fail(&format!("cannot install the nftables drop rule: {e}"));
        }
        // 10 Mbit/s: lwIP queues at most 128 datagrams for the responder's socket (the unix
        // port's mailbox), which this rate leaves 150 ms to drain on a busy machine.
        let mut extra = vec!["-t", "3", "-b", "10M", "-l", "1472"];
        if reverse {
            extra.push("-R");
        }
        let res = self.run("udp", &extra);
        let flow = if reverse { "down" } else { "up" };
        let s = &res["summary"][flow];
        let (sent, got, lost) = (u(&s["sender"]["packets"]), u(&s["receiver"]["packets"]), u(&s["receiver"]["lost"]));
        let nft = dropped(&self.link.a).unwrap_or_else(|e| panic!("{e}\nresponder:\n{}", self.server.stderr()));
        eprintln!("netns_lwip udp {flow}: sent {sent}, received {got}, lost {lost}, nft dropped {nft}");
        assert!(nft > 0, "({flow}) the rule dropped nothing: the test proves nothing\n{s}");
        assert_eq!(lost, nft, "({flow}) netchar reports {lost} lost, nft dropped {nft}\n{s}");
        assert_eq!(sent, got + lost, "({flow}) sent != received + lost\n{s}");
        assert_eq!(s["packets_accounted"], true, "{s}");
        let _ = self.link.a.nft(&["delete", "table", "inet", TABLE]);
    }

    /// rr over TCP and UDP and the nc_test echo pattern: every request answered, and the
    /// responder read every request byte.
    fn rr_and_echo(&self) {
        for extra in [&["-n", "1001", "-l", "32", "--response", "64"][..], &["--udp", "-n", "2000", "-l", "32"][..]] {
            let res = self.run("rr", extra);
            let rr = &res["summary"]["rr"];
            let want = if extra.contains(&"--udp") { 2000 } else { 1001 };
            eprintln!("netns_lwip rr {extra:?}: {} transactions, {} lost", rr["transactions"], rr["lost"]);
            assert_eq!(u(&rr["transactions"]), want, "{extra:?}: {rr}");
            assert_eq!(u(&rr["lost"]), 0, "{rr}");
            let far = res["streams"].as_array().unwrap().iter().find(|s| s["measured_by"] == "server").unwrap();
            assert_eq!(u(&far["bytes"]), want * 32, "{extra:?}: {far}");
        }
        let res = self.run("echo", &["--pattern", "64x1024,10@1ms"]);
        assert_eq!(u(&res["summary"]["rr"]["transactions"]), 64, "{}", res["summary"]["rr"]);
        let far = res["streams"].as_array().unwrap().iter().find(|s| s["measured_by"] == "server").unwrap();
        assert_eq!(u(&far["bytes"]), 64 * 1024, "{far}");
    }
}

#[test]
fn lwip_responder_over_tap_tcp_udp_rr_echo_against_ground_truth() {
    let link = match Link::create() {
        Ok(l) => l,
        Err(reason) => return netns::skip_or_fail(&reason),
    };
    let bin = match responder_binary() {
        Ok(b) => b,
        Err(reason) => return netns::skip_or_fail(&reason),
    };
    let (kernel_side, lwip) = match add_tap(&link) {
        Ok(a) => a,
        Err(e) => return netns::skip_or_fail(&format!("cannot create the TAP device and routes: {e}")),
    };
    let mut cmd = link.a.command(&bin);
    // Port 0: lwIP picks the port; the start line reports it.
    cmd.args(["--tap", TAP, "--ip", &format!("{lwip}/24"), "--gw", &kernel_side, "--port", "0"]);
    let server = Server::spawn(cmd, "listening on", Duration::from_secs(20))
        .unwrap_or_else(|e| panic!("the lwIP responder did not start: {e}"));
    let started = server.stderr();
    let port = started
        .split("port ")
        .last()
        .and_then(|p| p.split_whitespace().next())
        .filter(|p| p.parse::<u16>().is_ok_and(|n| n > 0))
        .unwrap_or_else(|| panic!("no port in the responder's start line {started:?}"))
        .to_string();
    let mut bed = Bed { link, lwip, server, port };
    bed.tcp(false);
    bed.tcp(true);
    bed.tcp_streams();
    bed.udp(false);
    bed.udp(true);
    bed.rr_and_echo();
    let log = bed.server.stderr();
    assert!(
        bed.server.child.wait_timeout(Duration::from_millis(10)).is_none(),
        "the lwIP responder exited; its log:\n{log}"
    );
    assert!(
        !log.contains("AddressSanitizer") && !log.contains("runtime error"),
        "the responder's sanitizers reported:\n{log}"
    );
}
