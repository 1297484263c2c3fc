//! The AF_XDP sender (`netchar udp HOST --xdp IFACE`) and the XDP sink counter (`netchar
//! xdp-count IFACE -p PORT`) on a veth pair between two namespaces (copy mode: veth has no
//! zero-copy AF_XDP), checked against counts the test reads itself:
//!
//! * to a netchar server, paced: the datagrams the sender reports equal the data datagrams an
//!   nft rule counted at the receiving interface's ingress hook and the server's receiver's
//!   count, nothing lost, over IPv4 with and without UDP checksums and over IPv6 (the
//!   receiving stack checks every checksum, so a wrong one would be loss);
//! * an nft rule dropping ~2% at random in the server's input hook: the receiver's loss is
//!   exactly that rule's count (plus any receive-buffer overflow the namespace's own counter
//!   saw), and sent = received + lost;
//! * into a sink, flat out: `xdp-count` on the far veth end counts exactly the datagrams the
//!   sender reports, and so does the far end's own rx counter (the sending namespace is kept
//!   quiet: static neighbours, no router solicitations), IPv4 and IPv6;
//! * refusals, each one line and a non-zero exit: no such interface, and not root (the
//!   binary run as `nobody` through setpriv), for both commands.
//!
//! Needs root, `ip` and `nft`; otherwise "skipping netns test: REASON", or a failure under
//! NETCHAR_REQUIRE_ALL=1.

#[path = "support/netns.rs"]
mod netns;

use netns::{Link, Netns, Server, DEV_A, DEV_B};
use serde_json::Value;
use std::time::Duration;

/// Datagram payload bytes.
const PAYLOAD: u64 = 64;
/// First 4 payload bytes of a netchar data datagram: "NC", version 1, flags 0.
const DATA_PREFIX: &str = "0x4e430100";
const A6: &str = "fd00:5e:5f::1";
const B6: &str = "fd00:5e:5f::2";

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// A link with IPv6 addresses on both ends, static neighbours both ways and no router
/// solicitations: after a settling pause, nothing but a test's own packets crosses it.
fn quiet_link() -> Option<Link> {
    let link = match Link::create() {
        Ok(l) => l,
        Err(e) => {
            netns::skip_or_fail(&e);
            return None;
        }
    };
    let setup = || -> Result<(), String> {
        let mac = |ns: &Netns, dev: &str| -> Result<String, String> {
            let out = ns.ip(&["-br", "link", "show", dev])?;
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            text.split_whitespace().nth(2).map(str::to_string).ok_or_else(|| format!("no MAC for {dev} in {text:?}"))
        };
        let (mac_a, mac_b) = (mac(&link.a, DEV_A)?, mac(&link.b, DEV_B)?);
        for (ns, dev, own, peer, peer_ip4, peer_mac) in [
            (&link.a, DEV_A, A6, B6, link.b_ip.to_string(), &mac_b),
            (&link.b, DEV_B, B6, A6, link.a_ip.to_string(), &mac_a),
        ] {
            ns.sysctl(&format!("net.ipv6.conf.{dev}.router_solicitations"), "0")?;
            ns.ip(&["-6", "addr", "add", &format!("{own}/64"), "dev", dev, "nodad"])?;
            ns.ip(&["neigh", "replace", &peer_ip4, "lladdr", peer_mac, "dev", dev, "nud", "permanent"])?;
            ns.ip(&["-6", "neigh", "replace", peer, "lladdr", peer_mac, "dev", dev, "nud", "permanent"])?;
        }
        Ok(())
    };
    if let Err(e) = setup() {
        netns::skip_or_fail(&e);
        return None;
    }
    // IPv6's joins (MLD reports, about 1 s apart) are done before any count starts.
    std::thread::sleep(Duration::from_secs(3));
    Some(link)
}

/// Counts (never drops) the netchar data datagrams to `port` at `DEV_B`'s ingress hook.
fn count_data_at_ingress(ns: &Netns, port: u16) -> Result<(), String> {
    ns.nft(&["add", "table", "netdev", "xdptest"])?;
    let hook = format!("{{ type filter hook ingress device {DEV_B} priority 0; policy accept; }}");
    ns.nft(&["add", "chain", "netdev", "xdptest", "in", &hook])?;
    let port = port.to_string();
    ns.nft(&["add", "rule", "netdev", "xdptest", "in", "udp", "dport", &port, "@th,64,32", DATA_PREFIX, "counter"])?;
    Ok(())
}

fn ingress_packets(ns: &Netns) -> u64 {
    ns.nft_counters("netdev", "xdptest", "in").unwrap_or_else(|e| panic!("{e}"))[0].0
}

/// A `/sys/class/net/DEV/statistics` counter of namespace `ns`.
fn link_stat(ns: &Netns, dev: &str, name: &str) -> u64 {
    let out = ns.command("cat").arg(format!("/sys/class/net/{dev}/statistics/{name}")).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or_else(|e| panic!("{dev} {name}: {e}"))
}

/// `netchar udp` from namespace a with `args`, to a one-off server in b on `port`, as JSON.
fn to_server(link: &Link, port: u16, dest: &str, args: &[&str]) -> Value {
    let bin = env!("CARGO_BIN_EXE_netchar");
    let port_s = port.to_string();
    let mut server_cmd = link.b.command(bin);
    server_cmd.args(["server", "-p", &port_s, "--one-off"]);
    let mut server = Server::spawn(server_cmd, "listening on", Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("netchar server did not start in {}: {e}", link.b.name()));
    let mut cmd = link.a.command(bin);
    let payload = PAYLOAD.to_string();
    cmd.args(["udp", dest, "-p", &port_s, "--xdp", DEV_A, "-l", &payload, "-i", "0", "--json"]);
    // One second, unless the test gives a count (-n).
    if !args.contains(&"-n") {
        cmd.args(["-t", "1"]);
    }
    cmd.args(args);
    let shown = format!("{cmd:?}");
    let run = netns::run_with_timeout(cmd, Duration::from_secs(30)).unwrap_or_else(|e| panic!("{e}"));
    let _ = server.child.wait_timeout(Duration::from_secs(5));
    assert!(
        run.status.is_some_and(|s| s.success()),
        "{shown}: {:?}\n{}\n{}\nserver:\n{}",
        run.status,
        run.stderr,
        run.stdout,
        server.stderr()
    );
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{shown}: not JSON ({e}):\n{}", run.stdout))
}

#[test]
fn xdp_datagrams_are_the_interfaces_and_the_receivers_count_exactly() {
    let Some(link) = quiet_link() else { return };
    let port = 5410;
    count_data_at_ingress(&link.b, port).unwrap_or_else(|e| panic!("{e}"));
    let b4 = link.b_ip.to_string();
    let cases: [(&str, &str, &[&str]); 3] =
        [("IPv4", &b4, &[]), ("IPv4, no checksums", &b4, &["--no-udp-checksum"]), ("IPv6", B6, &[])];
    for (what, dest, extra) in cases {
        let before = ingress_packets(&link.b);
        let r = to_server(&link, port, dest, &[&["--pps", "20000"], extra].concat());
        let counted = ingress_packets(&link.b) - before;
        let up = &r["summary"]["up"];
        let (sent, received) = (u(&up["sender"]["packets"]), u(&up["receiver"]["packets"]));
        assert!(sent > 1000, "{what}: {up}");
        assert_eq!(counted, sent, "{what}: sent vs {DEV_B}'s ingress count of data datagrams\n{up}");
        assert_eq!(received, sent, "{what}: the receiver's count vs sent\n{up}");
        assert_eq!(u(&up["receiver"]["lost"]), 0, "{what}: {up}");
        assert_eq!(r["method"]["send"], "af_xdp", "{what}: {}", r["method"]);
        assert_eq!(r["method"]["udp_checksum"], !extra.contains(&"--no-udp-checksum"), "{what}");
    }
}

#[test]
fn xdp_loss_is_exactly_what_a_random_drop_rule_dropped() {
    let Some(link) = quiet_link() else { return };
    let port = 5411;
    let port_s = port.to_string();
    link.b
        .drop_at_random("xdploss", "in", &["udp", "dport", &port_s, "@th,64,32", DATA_PREFIX])
        .unwrap_or_else(|e| panic!("{e}"));
    let overflow_before = link.b.udp_receive_buffer_drops().unwrap_or_else(|e| panic!("{e}"));
    let r = to_server(&link, port, &link.b_ip.to_string(), &["--pps", "20000"]);
    let overflow = link.b.udp_receive_buffer_drops().unwrap_or_else(|e| panic!("{e}")) - overflow_before;
    let dropped = link.b.nft_counters("inet", "xdploss", "in").unwrap_or_else(|e| panic!("{e}"))[0].0;
    let up = &r["summary"]["up"];
    let (sent, received, lost) =
        (u(&up["sender"]["packets"]), u(&up["receiver"]["packets"]), u(&up["receiver"]["lost"]));
    assert!(dropped > 0, "the rule dropped nothing of {sent}: {up}");
    assert_eq!(
        lost,
        dropped + overflow,
        "lost vs the rule's drops ({dropped}) and receive-buffer overflows ({overflow})\n{up}"
    );
    assert_eq!(sent, received + lost, "{up}");
}

/// `netchar xdp-count DEV_B -p PORT --json` in namespace b: stdout (the totals) goes to the
/// file returned, Server::spawn reading stderr's ready line; the shell execs the counter, so
/// the pid [`stop_sink`] signals is the counter's.
fn start_sink(link: &Link, port: &str, what: &str) -> (Server, std::path::PathBuf) {
    let bin = env!("CARGO_BIN_EXE_netchar");
    let out_path = std::env::temp_dir().join(format!("netchar-xdp-count-{}-{what}", std::process::id()));
    let mut counter = link.b.command("sh");
    let script = format!("exec \"$0\" xdp-count {DEV_B} -p {port} --json > \"$1\"");
    counter.args(["-c", &script, bin, out_path.to_str().unwrap()]);
    let sink = Server::spawn(counter, "counting and dropping", Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("xdp-count did not start: {e}"));
    (sink, out_path)
}

/// Ends the count with Ctrl-C, as a user ends it; its totals.
fn stop_sink(mut sink: Server, out_path: &std::path::Path, what: &str) -> Value {
    let pid = sink.child.id().to_string();
    assert!(std::process::Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
    let status = sink.child.wait_timeout(Duration::from_secs(10));
    assert!(status.is_some_and(|s| s.success()), "{what}: xdp-count after Ctrl-C: {status:?}\n{}", sink.stderr());
    let counted: Value = serde_json::from_str(&std::fs::read_to_string(out_path).unwrap()).unwrap();
    let _ = std::fs::remove_file(out_path);
    counted
}

/// `--xdp-live`: the kernel's XDP live-frames mode sends, the XDP program writing each frame's
/// sequence number and send time. Flat out into the sink, `xdp-count` and the far end's rx
/// counter count exactly what the program sent; a counted run to a netchar server (the sink's
/// program, still attached, passes other ports on: veth takes redirected frames only for a peer
/// with XDP) arrives whole, in order, every datagram also counted at the ingress hook.
#[test]
fn the_live_frames_sender_is_counted_exactly_by_the_sink_and_the_receiver() {
    let Some(link) = quiet_link() else { return };
    let bin = env!("CARGO_BIN_EXE_netchar");
    let b4 = link.b_ip.to_string();
    let (sink, out_path) = start_sink(&link, "9000", "live");
    let rx_before = link_stat(&link.b, DEV_B, "rx_packets");
    let mut cmd = link.a.command(bin);
    cmd.args(["udp", &b4, "-p", "9000", "--proto", "sink", "--xdp", DEV_A, "--xdp-live", "--no-udp-checksum"]);
    cmd.args(["-b", "0", "-l", &PAYLOAD.to_string(), "-t", "1", "-i", "0", "--json"]);
    let shown = format!("{cmd:?}");
    let run = netns::run_with_timeout(cmd, Duration::from_secs(30)).unwrap_or_else(|e| panic!("{e}"));
    assert!(run.status.is_some_and(|s| s.success()), "{shown}: {:?}\n{}", run.status, run.stderr);
    let r: Value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.stdout));
    let rx = link_stat(&link.b, DEV_B, "rx_packets") - rx_before;
    let sent = u(&r["summary"]["up"]["sender"]["packets"]);
    assert!(sent > 10_000, "{}", r["summary"]);
    assert_eq!(r["method"]["send"], "xdp_live", "{}", r["method"]);
    assert_eq!(rx, sent, "{DEV_B}'s rx_packets vs sent");

    let port = 5412;
    count_data_at_ingress(&link.b, port).unwrap_or_else(|e| panic!("{e}"));
    let before = ingress_packets(&link.b);
    let bytes = (1000 * PAYLOAD).to_string();
    let r = to_server(&link, port, &b4, &["--xdp-live", "--no-udp-checksum", "-b", "0", "-n", &bytes]);
    let counted_in = ingress_packets(&link.b) - before;
    let counted = stop_sink(sink, &out_path, "live");
    assert_eq!(u(&counted["packets"]), sent, "xdp-count vs sent into the sink: {counted}");
    let up = &r["summary"]["up"];
    assert_eq!(u(&up["sender"]["packets"]), 1000, "{up}");
    assert_eq!(u(&up["receiver"]["packets"]), 1000, "{up}");
    assert_eq!(u(&up["receiver"]["lost"]), 0, "{up}");
    assert_eq!(u(&up["receiver"]["out_of_order"]), 0, "sequence numbers as the program wrote them: {up}");
    assert_eq!(counted_in, 1000, "{DEV_B}'s ingress count of data datagrams");
    assert_eq!(r["method"]["udp_checksum"], false);
}

#[test]
fn the_xdp_sink_counts_every_datagram_the_xdp_sender_sent() {
    let Some(link) = quiet_link() else { return };
    let bin = env!("CARGO_BIN_EXE_netchar");
    let port = "9000";
    let b4 = link.b_ip.to_string();
    for (what, dest) in [("IPv4", b4.as_str()), ("IPv6", B6)] {
        let (sink, out_path) = start_sink(&link, port, what);
        let rx_before = link_stat(&link.b, DEV_B, "rx_packets");
        let mut cmd = link.a.command(bin);
        let payload = PAYLOAD.to_string();
        cmd.args(["udp", dest, "-p", port, "--proto", "sink", "--xdp", DEV_A, "-b", "0", "-l", &payload]);
        cmd.args(["-t", "1", "-i", "0", "--json"]);
        let shown = format!("{cmd:?}");
        let run = netns::run_with_timeout(cmd, Duration::from_secs(30)).unwrap_or_else(|e| panic!("{e}"));
        assert!(run.status.is_some_and(|s| s.success()), "{shown}: {:?}\n{}", run.status, run.stderr);
        let r: Value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.stdout));
        let rx = link_stat(&link.b, DEV_B, "rx_packets") - rx_before;
        let counted = stop_sink(sink, &out_path, what);
        let sent = u(&r["summary"]["up"]["sender"]["packets"]);
        assert!(sent > 1000, "{what}: {}", r["summary"]);
        assert_eq!(u(&counted["packets"]), sent, "{what}: xdp-count vs sent: {counted}");
        let headers = if dest.contains(':') { 14 + 40 + 8 } else { 14 + 20 + 8 };
        assert_eq!(u(&counted["bytes"]), sent * (headers + PAYLOAD), "{what}: {counted}");
        assert_eq!(rx, sent, "{what}: {DEV_B}'s rx_packets vs sent");
        // Detached on the way out: the interface has no XDP program left.
        let shown = link.b.ip(&["link", "show", DEV_B]).unwrap();
        let shown = String::from_utf8_lossy(&shown.stdout);
        assert!(!shown.contains("xdp"), "{what}: a program is still attached: {shown}");
    }
}

#[test]
fn no_such_interface_and_not_root_are_refused_in_one_line() {
    let Some(link) = quiet_link() else { return };
    let bin = env!("CARGO_BIN_EXE_netchar");
    let b4 = link.b_ip.to_string();
    let refused = |cmd: std::process::Command, want: &str| {
        let shown = format!("{cmd:?}");
        let run = netns::run_with_timeout(cmd, Duration::from_secs(30)).unwrap_or_else(|e| panic!("{e}"));
        assert!(run.status.is_some_and(|s| !s.success()), "{shown} did not fail: {}", run.stdout);
        let lines: Vec<&str> = run.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{shown}: {}", run.stderr);
        assert!(lines[0].contains(want), "{shown}: {:?} does not say {want:?}", lines[0]);
    };
    let mut udp = link.a.command(bin);
    udp.args(["udp", &b4, "--proto", "sink", "-p", "9000", "--xdp", "nosuch0", "-t", "1"]);
    refused(udp, "--xdp nosuch0: no such interface");
    let mut count = link.b.command(bin);
    count.args(["xdp-count", "nosuch0", "-p", "9000", "-t", "1"]);
    refused(count, "xdp-count nosuch0: no such interface");
    if !netns::require::tool("the not-root refusals", "setpriv", &["--version"], "util-linux") {
        return;
    }
    let nobody = |ns: &Netns| {
        let mut c = ns.command("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", bin]);
        c
    };
    let mut udp = nobody(&link.a);
    udp.args(["udp", &b4, "--proto", "sink", "-p", "9000", "--xdp", DEV_A, "-t", "1"]);
    refused(udp, "--xdp needs root");
    let mut count = nobody(&link.b);
    count.args(["xdp-count", DEV_B, "-p", "9000", "-t", "1"]);
    refused(count, "xdp-count needs root");
}
