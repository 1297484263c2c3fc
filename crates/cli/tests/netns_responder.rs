//! Ground truth for the C responder (responder/, docs/embedded.md): two network namespaces
//! joined by a veth pair, the responder (its ASan/UBSan build) in one, the netchar client in
//! the other, and an nftables rule in the receiving namespace that drops ≈2% of netchar data
//! datagrams at random. The loss netchar reports must equal the rule's drop counter, up (the
//! responder's own accounting from the 24-byte headers) and down (`-R`: the responder paces,
//! the client accounts).
//!
//! The rule matches only data datagrams (first payload bytes `4E 43 01 00`: setup datagrams
//! are retried and must not be counted). nft counts skbs: a GSO batch from the client crosses
//! the veth whole, so the datagram count is `(bytes − 28 × skbs) / 1472`, checked exact (as
//! netns_udp.rs does).
//!
//! Needs root, `ip`, `nft`, make and gcc; otherwise it prints why and passes, unless
//! NETCHAR_REQUIRE_ALL=1 (CI), in which case a missing namespace fails it.

#[path = "support/netns.rs"]
mod netns;

use netns::{Link, Netns, Server, DEV_A, DEV_B};
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

const PAYLOAD: u64 = 1472;
const DATA_PREFIX: &str = "0x4e430100";
const TABLE: &str = "ncresp";
const CHAIN: &str = "in";

/// `make -C responder asan`, once for this file's tests (two makes at once race on the same
/// output file); None without make or gcc, once [`netns::skip_or_fail`] has said so (each test
/// that asks says so, not only the first).
fn responder_binary() -> Option<PathBuf> {
    static BUILT: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    match BUILT.get_or_init(build_responder) {
        Ok(bin) => Some(bin.clone()),
        Err(reason) => {
            netns::skip_or_fail(reason);
            None
        }
    }
}

fn build_responder() -> Result<PathBuf, String> {
    for tool in ["make", "gcc"] {
        if let Err(e) = Command::new(tool).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status() {
            return Err(format!("`{tool}` cannot be run ({e}); the C responder needs make and gcc"));
        }
    }
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../responder");
    let out = Command::new("make").arg("-C").arg(&dir).arg("asan").output().expect("run make -C responder asan");
    assert!(
        out.status.success(),
        "make -C responder asan failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(dir.join("build/netchar-responder-asan"))
}

fn add_drop_rule(ns: &Netns, port_match: &str, port: u16) -> Result<(), String> {
    ns.drop_at_random(TABLE, CHAIN, &["udp", port_match, &port.to_string(), "@th,64,32", DATA_PREFIX])
}

/// Datagrams the drop rule dropped.
fn dropped(ns: &Netns) -> Result<u64, String> {
    ns.counted_datagrams(TABLE, CHAIN, PAYLOAD)
}

fn loss_direction(link: &Link, bin: &PathBuf, port: u16, reverse: bool) -> Result<(), String> {
    let (receiver_ns, port_match) = if reverse { (&link.b, "sport") } else { (&link.a, "dport") };
    add_drop_rule(receiver_ns, port_match, port)?;
    let port_s = port.to_string();
    let mut cmd = link.a.command(bin);
    cmd.args(["--port", &port_s]);
    let server = Server::spawn(cmd, "listening on", Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("the responder did not start in {}: {e}", link.a.name()));
    let mut client = link.b.command(env!("CARGO_BIN_EXE_netchar"));
    let a_ip = link.a_ip.to_string();
    client.args(["udp", &a_ip, "-p", &port_s, "-t", "3", "-b", "50M", "-l", "1472", "--json"]);
    if reverse {
        client.arg("-R");
    }
    let shown = format!("{client:?}");
    let overflowed_before = receiver_ns.udp_receive_buffer_drops()?;
    let run = netns::run_with_timeout(client, Duration::from_secs(40)).unwrap_or_else(|e| panic!("{e}"));
    // Datagrams a busy machine made the receiving socket's buffer overflow with are lost too.
    let overflowed = receiver_ns.udp_receive_buffer_drops()? - overflowed_before;
    let context = netns::failure_context(&shown, &run, &server, link);
    assert!(run.status.is_some_and(|s| s.success()), "netchar udp failed\n{context}\nstdout:\n{}", run.stdout);
    let doc: Value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("not JSON: {e}\n{context}"));
    assert!(doc["error"].is_null(), "{}\n{context}", doc["error"]);
    assert_eq!(doc["test"]["peer_software"], "netchar-responder 0.1", "{}", doc["test"]);
    let dir = if reverse { "down" } else { "up" };
    let s = &doc["summary"][dir];
    let n = |side: &str, k: &str| s[side][k].as_u64().unwrap_or_else(|| panic!("{side}.{k} missing: {s}"));
    let (sent, got, lost) = (n("sender", "packets"), n("receiver", "packets"), n("receiver", "lost"));
    let nft = dropped(receiver_ns).unwrap_or_else(|e| panic!("{e}\n{context}"));
    eprintln!(
        "netns_responder {dir}: sent {sent}, received {got}, lost {lost}, nft dropped {nft}, socket overflows {overflowed}"
    );
    assert!(nft > 0, "({dir}) the rule dropped nothing: the test proves nothing\n{context}");
    assert_eq!(
        lost,
        nft + overflowed,
        "({dir}) netchar reports {lost} lost, nft dropped {nft}, sockets overflowed {overflowed}\n{context}\n{s}"
    );
    assert_eq!(sent, got + lost, "({dir}) sent != received + lost\n{s}");
    assert_eq!(s["packets_accounted"], true, "{s}");
    Ok(())
}

#[test]
fn responder_udp_loss_equals_nft_drop_counter_both_directions() {
    let link = match Link::create() {
        Ok(l) => l,
        Err(reason) => return netns::skip_or_fail(&reason),
    };
    let Some(bin) = responder_binary() else { return };
    for (ns, dev) in [(&link.a, DEV_A), (&link.b, DEV_B)] {
        if let Err(e) = ns.ip(&["link", "set", dev, "mtu", "1500"]) {
            return netns::skip_or_fail(&format!("cannot configure the namespaces: {e}"));
        }
    }
    for (port, reverse) in [(5321, false), (5322, true)] {
        if let Err(e) = loss_direction(&link, &bin, port, reverse) {
            return netns::skip_or_fail(&format!("cannot install the nftables drop rule: {e}"));
        }
    }
}

/// The counts after the peer's address in the responder's first log line containing `needle`
/// ("netio udp from A.B.C.D:PORT: received N datagrams (B bytes)"), waiting for it.
fn logged_counts(server: &Server, needle: &str) -> Vec<u64> {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let log = server.stderr();
        if let Some(line) = log.lines().find(|l| l.contains(needle)) {
            let tail = line.rsplit(": ").next().unwrap_or("");
            return tail.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect();
        }
        assert!(std::time::Instant::now() < deadline, "no {needle:?} in the responder's log:\n{log}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// netio's UDP test uses the same port on both ends (the server sends to the client's address
/// at port+1), so it runs across the namespaces: the responder's netio role in one, `netchar
/// suite netio --proto netio -u` in the other. The counts the responder sent in its RES
/// answers are the ones it logged, and no end received more than the other sent.
#[test]
fn responder_netio_udp_suite_across_namespaces() {
    let link = match Link::create() {
        Ok(l) => l,
        Err(reason) => return netns::skip_or_fail(&reason),
    };
    let Some(bin) = responder_binary() else { return };
    let mut cmd = link.a.command(&bin);
    cmd.args(["--port", "5323", "--netio-port", "18767"]);
    let server = Server::spawn(cmd, "netio server on", Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("the responder did not start in {}: {e}", link.a.name()));
    let mut client = link.b.command(env!("CARGO_BIN_EXE_netchar"));
    let a_ip = link.a_ip.to_string();
    client.args(["suite", "netio", &a_ip, "--proto", "netio", "-u", "-b", "1k", "--netio-interval", "1", "--json"]);
    let shown = format!("{client:?}");
    let run = netns::run_with_timeout(client, Duration::from_secs(60)).unwrap_or_else(|e| panic!("{e}"));
    let context = netns::failure_context(&shown, &run, &server, &link);
    assert!(run.status.is_some_and(|s| s.success()), "netchar suite netio -u failed\n{context}");
    let doc: Value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("not JSON: {e}\n{context}"));
    let r = &doc[0];
    assert!(r["error"].is_null(), "{}\n{context}", r["error"]);
    let rec = |flow: &str, role: &str| {
        r["streams"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["flow"] == flow && s["role"] == role)
            .map_or_else(|| panic!("no {flow} {role} record: {r}"), |s| s["bytes"].as_u64().unwrap())
    };
    let (sent, got_by_responder) = (rec("up", "sender"), rec("up", "receiver"));
    let (responder_sent, got) = (rec("down", "sender"), rec("down", "receiver"));
    assert!(sent > 0 && got > 0 && got_by_responder <= sent && got <= responder_sent, "{r}");
    // The responder's own counts, as it logged them: 1024-byte datagrams, what its RES said.
    let up = logged_counts(&server, "netio udp from");
    assert_eq!((up[0] * 1024, up[1]), (got_by_responder, got_by_responder), "{up:?}\n{context}");
    let down = logged_counts(&server, ": sent ");
    eprintln!("netns_responder netio -u: client sent {sent} B, responder counted {got_by_responder} B; responder sent {responder_sent} B, client got {got} B");
    assert_eq!((down[0] * 1024, down[1]), (responder_sent, responder_sent), "{down:?}\n{context}");
}
