//! The block-size suites across a veth pair whose MTU the test sets, so the path MTU is ground
//! truth: `suite sizes` runs the jumbo-frame sizes only where the path takes them and skips,
//! in one line, the UDP sizes whose datagrams it does not; and `suite netio --proto netio
//! --tcp -u` runs both protocols against netchar's netio server in one table (netio's UDP test
//! needs port+1 free on both ends, so it cannot run on one host).
//!
//! Needs root and `ip`; otherwise it prints "skipping netns test: <reason>" and passes,
//! unless NETCHAR_REQUIRE_ALL=1, in which case it fails.

#[path = "support/netns.rs"]
mod netns;

use netns::{Link, Server, DEV_A, DEV_B};
use serde_json::Value;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_netchar");

/// A netchar server in namespace a (native on 5330, netio on 18767).
fn server(link: &Link) -> Server {
    let mut cmd = link.a.command(BIN);
    cmd.args(["server", "-p", "5330", "--netio"]);
    Server::spawn(cmd, "listening on", Duration::from_secs(10)).expect("server starts")
}

/// Both veth ends at `mtu`.
fn set_mtu(link: &Link, mtu: u32) {
    let m = mtu.to_string();
    link.a.ip(&["link", "set", DEV_A, "mtu", &m]).unwrap();
    link.b.ip(&["link", "set", DEV_B, "mtu", &m]).unwrap();
}

/// The block sizes of each protocol in a `suite sizes --json` run, and its stderr.
fn sizes_run(link: &Link, server: &Server) -> (Vec<u64>, Vec<u64>, String) {
    let mut client = link.b.command(BIN);
    client.args(["suite", "sizes", &link.a_ip.to_string(), "-p", "5330", "-n", "64Ki", "--json"]);
    let run = netns::run_with_timeout(client, Duration::from_secs(120)).unwrap_or_else(|e| panic!("{e}"));
    assert!(run.status.is_some_and(|s| s.success()), "{}\n{}\nserver: {}", run.stdout, run.stderr, server.stderr());
    let doc: Value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.stdout));
    let of = |kind: &str| -> Vec<u64> {
        doc.as_array()
            .unwrap()
            .iter()
            .filter(|r| r["test"]["kind"] == kind)
            .map(|r| {
                assert_eq!(r["summary"]["up"]["sender"]["total_bytes"], 65536, "{}", r["test"]);
                r["test"]["block_bytes"].as_u64().unwrap()
            })
            .collect()
    };
    (of("tcp"), of("udp"), run.stderr)
}

#[test]
fn sizes_follow_the_path_mtu() {
    let link = match Link::create() {
        Ok(l) => l,
        Err(reason) => return netns::skip_or_fail(&reason),
    };
    let server = server(&link);
    // A standard Ethernet path: no jumbo sizes; UDP up to 1500 - 28 bytes.
    let (tcp, udp, stderr) = sizes_run(&link, &server);
    assert_eq!(tcp, [64, 256, 512, 1024, 1448, 1472, 4096, 16384, 65507]);
    assert_eq!(udp, [64, 256, 512, 1024, 1448, 1472]);
    assert_eq!(
        stderr.trim(),
        "netchar: suite sizes: UDP 4096, 16384, 65507 bytes skipped: larger datagrams than the path's MTU of 1500 bytes"
    );
    // Jumbo frames: their payloads join the list, and UDP runs up to 9000 - 28 bytes.
    set_mtu(&link, 9000);
    let (tcp, udp, stderr) = sizes_run(&link, &server);
    assert_eq!(tcp, [64, 256, 512, 1024, 1448, 1472, 4096, 8948, 8972, 16384, 65507]);
    assert_eq!(udp, [64, 256, 512, 1024, 1448, 1472, 4096, 8948, 8972]);
    assert!(stderr.contains("UDP 16384, 65507 bytes skipped") && stderr.contains("MTU of 9000"), "{stderr}");
}

/// netchar as a netio client, TCP then UDP, Tx only: netio's lines for each, then one table
/// of the two with a row per size and a cell in each column.
#[test]
fn netio_client_runs_tcp_and_udp_into_one_table() {
    let link = match Link::create() {
        Ok(l) => l,
        Err(reason) => return netns::skip_or_fail(&reason),
    };
    let server = server(&link);
    let mut client = link.b.command(BIN);
    let a_ip = link.a_ip.to_string();
    client.args(["suite", "netio", &a_ip, "--proto", "netio", "--tcp", "-u", "-b", "1k,2000", "--tx-only"]);
    client.args(["--duration", "1"]);
    let run = netns::run_with_timeout(client, Duration::from_secs(60)).unwrap_or_else(|e| panic!("{e}"));
    let out = &run.stdout;
    assert!(run.status.is_some_and(|s| s.success()), "{out}\n{}\nserver: {}", run.stderr, server.stderr());
    let tcp = out.find("TCP connection established.").unwrap_or_else(|| panic!("{out}"));
    let udp = out.find("\nUDP connection established.").unwrap_or_else(|| panic!("{out}"));
    assert!(tcp < udp && out[tcp..udp].matches("Packet size ").count() == 2, "{out}");
    let table: Vec<&str> = out.lines().skip_while(|l| !l.starts_with("| Packet size")).collect();
    assert_eq!(table[0], "| Packet size |   TCP-tx    |   UDP-tx    |", "{out}");
    for (row, size) in table[2..4].iter().zip(["1024", "2000"]) {
        assert!(row.starts_with(&format!("|  {size:>4} bytes | ")) && row.matches(" MB/s |").count() == 2, "{out}");
    }
}
