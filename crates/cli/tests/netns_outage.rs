//! A server on one host, a client on another: 100% loss of the data path and a link taken down
//! and up in the middle of a test. The test ends with exact figures (every datagram accounted as
//! lost, against nft's drop counter; every TCP byte delivered once the link is back), and the
//! server keeps serving with the open files it had before.

#[path = "support/netns.rs"]
mod netns;

use netns::*;
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_netchar");
const PORT: &str = "5300";

fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count()).unwrap_or(0)
}

fn fds_settle(pid: u32, baseline: usize) -> usize {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let n = fds(pid);
        if n <= baseline || std::time::Instant::now() > deadline {
            return n;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn client(link: &Link, args: &[&str]) -> (Option<i32>, Value, String) {
    let mut cmd = link.b.command(BIN);
    cmd.args(args[..1].iter()).arg(link.a_ip.to_string()).args(["-p", PORT, "--json"]).args(&args[1..]);
    let run = run_with_timeout(cmd, Duration::from_secs(60)).unwrap();
    let v: Value =
        serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", run.stdout, run.stderr));
    (run.status.and_then(|s| s.code()), v, run.stderr)
}

/// A link with `netchar server` in namespace a, or None once the skip was explained.
fn server_and_client() -> Option<(Link, Server)> {
    if Command::new("nft").arg("--version").output().is_err() {
        skip_or_fail("nft is not installed (apt-get install nftables)");
        return None;
    }
    let link = match Link::create() {
        Ok(l) => l,
        Err(reason) => {
            skip_or_fail(&reason);
            return None;
        }
    };
    let mut cmd = link.a.command(BIN);
    cmd.args(["server", "-B", "0.0.0.0", "-p", PORT]);
    let server = Server::spawn(cmd, "listening", Duration::from_secs(10)).unwrap();
    Some((link, server))
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

#[test]
fn total_loss_and_a_link_outage_end_with_exact_figures_and_a_healthy_server() {
    let Some((link, server)) = server_and_client() else { return };
    let pid = server.child.id();
    // A first test, so the baseline counts what the server keeps open between tests.
    let (code, _, err) = client(&link, &["tcp", "-n", "1M", "-i", "0"]);
    assert_eq!(code, Some(0), "{err}");
    let baseline = fds(pid);

    // 100% loss of the data datagrams (longer than 100 bytes); setup datagrams (64) pass.
    link.a.nft(&["add", "table", "inet", "outage"]).unwrap();
    link.a.nft(&["add", "chain", "inet", "outage", "input", "{ type filter hook input priority 0; }"]).unwrap();
    link.a
        .nft(&[
            "add", "rule", "inet", "outage", "input", "udp", "dport", PORT, "udp", "length", ">", "100", "counter",
            "drop",
        ])
        .unwrap();
    let (code, v, err) = client(&link, &["udp", "-b", "10M", "-t", "2", "-l", "1472"]);
    // nft counts skbs: a GSO super-packet of k datagrams is one skb with one IP/UDP header
    // and k payloads, so datagrams = (bytes − 28 × skbs) / 1472.
    let (skbs, bytes) = link.a.nft_counters("inet", "outage", "input").unwrap()[0];
    let payload = bytes - 28 * skbs;
    assert_eq!(payload % 1472, 0, "{skbs} skbs of {bytes} bytes are not whole 1472-byte datagrams");
    let dropped = payload / 1472;
    let up = &v["summary"]["up"];
    eprintln!(
        "total loss: exit {code:?}, sent {}, received {}, lost {}, nft dropped {dropped}",
        up["sender"]["packets"], up["receiver"]["packets"], up["receiver"]["lost"]
    );
    assert_eq!(code, Some(0), "{err}\n{}", server.stderr());
    assert_eq!(n(&up["receiver"]["packets"]), 0, "{up}");
    assert_eq!(n(&up["receiver"]["lost"]), n(&up["sender"]["packets"]), "{up}");
    assert_eq!(n(&up["receiver"]["lost"]), dropped, "netchar's loss against nft's drop counter: {up}");
    link.a.nft(&["delete", "table", "inet", "outage"]).unwrap();

    // The server's link goes down for 3 s in the middle of a 6 s TCP test, then comes back.
    let outage = {
        let a = link.a.name().to_string();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(1500));
            let ip = |state: &str| Command::new("ip").args(["-n", &a, "link", "set", DEV_A, state]).status().unwrap();
            assert!(ip("down").success());
            std::thread::sleep(Duration::from_secs(3));
            assert!(ip("up").success());
        })
    };
    let (code, v, err) = client(&link, &["tcp", "-t", "6", "-i", "0"]);
    outage.join().unwrap();
    let up = &v["summary"]["up"];
    eprintln!(
        "link outage: exit {code:?}, bytes_match {}, sender {}, receiver {}",
        up["bytes_match"], up["sender"]["total_bytes"], up["receiver"]["total_bytes"]
    );
    assert_eq!(code, Some(0), "{err}\n{}", server.stderr());
    assert_eq!(up["bytes_match"], true, "{up}");

    // And the server serves the next test with what it had open before.
    let (code, v, err) = client(&link, &["udp", "-b", "10M", "-t", "1", "-R"]);
    assert_eq!(code, Some(0), "{err}");
    let down = &v["summary"]["down"];
    assert_eq!(n(&down["sender"]["packets"]), n(&down["receiver"]["packets"]) + n(&down["receiver"]["lost"]), "{down}");
    let after = fds_settle(pid, baseline);
    assert!(after <= baseline, "server fds {baseline} before, {after} after");
}

/// A firewall on the server's own host refusing its sends (nft drop in OUTPUT: the kernel
/// answers EPERM) for a second of a `udp -R` test: the refused sends are counted as send
/// errors, never as sent, and the test goes on to the end. It used to end the server's sender.
#[test]
fn a_local_firewall_refusing_the_servers_sends_is_counted_not_fatal() {
    let Some((link, server)) = server_and_client() else { return };
    let firewall = {
        let a = link.a.name().to_string();
        std::thread::spawn(move || {
            let nft =
                |args: &[&str]| Command::new("ip").args(["netns", "exec", &a, "nft"]).args(args).status().unwrap();
            std::thread::sleep(Duration::from_millis(1000));
            assert!(nft(&["add", "table", "inet", "fw"]).success());
            assert!(nft(&["add", "chain", "inet", "fw", "out", "{ type filter hook output priority 0; }"]).success());
            assert!(nft(&["add", "rule", "inet", "fw", "out", "udp", "sport", PORT, "counter", "drop"]).success());
            std::thread::sleep(Duration::from_millis(1000));
            assert!(nft(&["delete", "table", "inet", "fw"]).success());
        })
    };
    let (code, v, err) = client(&link, &["udp", "-R", "-b", "20M", "-t", "3", "-i", "0"]);
    firewall.join().unwrap();
    let down = &v["summary"]["down"];
    eprintln!("firewall: exit {code:?}, {down}");
    assert_eq!(code, Some(0), "{err}\n{}", server.stderr());
    assert!(n(&down["sender"]["send_errors"]) > 0, "the firewall refused nothing: {down}");
    assert_eq!(n(&down["sender"]["packets"]), n(&down["receiver"]["packets"]) + n(&down["receiver"]["lost"]), "{down}");
    assert_eq!(n(&down["receiver"]["lost"]), 0, "refused sends are not sent, so not lost: {down}");
}
