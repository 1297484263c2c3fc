//! `netchar exporter` refuses a target outside `--allow-target` before sending it anything: the
//! exporter runs in namespace a, a `netchar server` in namespace b, and an nft counter in b
//! counts every packet that arrives for the server's port. A refused probe (403) must leave it
//! at zero; an allowed probe, the control, must move it.
//!
//! Needs root, `ip` and `nft`; otherwise it prints "skipping netns test: <reason>" and passes,
//! unless NETCHAR_REQUIRE_ALL=1, in which case it fails.

#[path = "support/netns.rs"]
mod netns;

use netns::*;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_netchar");
const PORT: &str = "5300";

/// GET `path` from the exporter inside namespace `ns` (its loopback); returns (status, body).
fn get_in(ns: &Netns, port: u16, path: &str) -> (u16, String) {
    let script = "import sys, urllib.request, urllib.error\n\
                  try:\n    r = urllib.request.urlopen(sys.argv[1], timeout=30); print(r.status); print(r.read().decode())\n\
                  except urllib.error.HTTPError as e:\n    print(e.code); print(e.read().decode())";
    let out = ns.command("python3").args(["-c", script, &format!("http://127.0.0.1:{port}{path}")]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (status, body) = text.split_once('\n').unwrap_or((&text, ""));
    (
        status.trim().parse().unwrap_or_else(|_| panic!("no status: {text} {}", String::from_utf8_lossy(&out.stderr))),
        body.to_string(),
    )
}

fn packets_to_server(link: &Link) -> u64 {
    link.b.nft_counters("inet", "probe", "input").unwrap().iter().map(|c| c.0).sum()
}

fn exporter_in(ns: &Netns, allow: &str) -> (Server, u16) {
    let mut cmd = ns.command(BIN);
    cmd.args(["exporter", "--listen", "127.0.0.1:0", "--allow-target", allow, "--max-duration", "1"]);
    let server = Server::spawn(cmd, "listening on", Duration::from_secs(10)).unwrap();
    let first = server.stderr();
    let line = first.lines().find(|l| l.contains("listening on")).unwrap();
    let port = line.rsplit(':').next().unwrap().trim().parse().unwrap();
    (server, port)
}

#[test]
fn a_target_outside_the_allow_list_gets_not_one_packet() {
    if std::process::Command::new("python3").arg("-c").arg("1").output().is_err() {
        skip_or_fail("python3 is needed to make HTTP requests inside the namespace");
        return;
    }
    let link = match Link::create() {
        Ok(l) => l,
        Err(reason) => {
            skip_or_fail(&reason);
            return;
        }
    };
    let b = &link.b;
    b.nft(&["add", "table", "inet", "probe"]).unwrap();
    b.nft(&["add", "chain", "inet", "probe", "input", "{ type filter hook input priority 0; }"]).unwrap();
    b.nft(&["add", "rule", "inet", "probe", "input", "th", "dport", PORT, "counter"]).unwrap();
    let mut server_cmd = b.command(BIN);
    server_cmd.args(["server", "-p", PORT]);
    let _server = Server::spawn(server_cmd, "limits:", Duration::from_secs(10)).unwrap();
    let target = format!("/probe?target={}:{PORT}", link.b_ip);

    let (exporter, port) = exporter_in(&link.a, "192.0.2.0/24");
    let (status, body) = get_in(&link.a, port, &target);
    assert_eq!(status, 403, "{body}");
    let (status, _) = get_in(&link.a, port, &format!("{target}&proto=udp"));
    assert_eq!(status, 403);
    assert_eq!(packets_to_server(&link), 0, "a refused probe sent packets to its target");
    drop(exporter);

    // The control: the same probe allowed reaches the server, and the counter sees it.
    let (_exporter, port) = exporter_in(&link.a, &format!("{}/32", link.b_ip));
    let (status, body) = get_in(&link.a, port, &target);
    assert_eq!(status, 200, "{body}");
    let success = body.lines().find(|l| l.starts_with("netchar_probe_success{")).unwrap();
    assert!(success.ends_with(" 1"), "{body}");
    assert!(packets_to_server(&link) > 0);
}
