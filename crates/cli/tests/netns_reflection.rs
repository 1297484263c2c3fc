//! The UDP reflection attack across three hosts, with the victim's own firewall counting what
//! reaches it: an attacker (namespace A) opens a control connection to the server (namespace
//! S), asks for `udp -R -b 200M`, and sends setup datagrams whose source is the victim's
//! address (namespace V, reached from S over its own link). Before the fix one 68-byte spoofed
//! datagram made the server send 127 MB to the victim.
//!
//! Ground truth is nft's counter in V. With the default policy (data only from the control
//! connection's address) the victim receives nothing; with the victim's network allowed
//! (`--allow-data-from`), only 40-byte challenges, never more packets or bytes than the
//! attacker sent, and no test traffic. A good client's test in A beside the attack is exact.
//!
//! The attacker runs in A as this test binary re-executed (`attacker_role`, ignored in normal
//! runs), so no unsafe namespace switching is needed here.

#[path = "support/control.rs"]
mod control;
#[path = "support/netns.rs"]
mod netns;

use control::*;
use netchar_wire::datagram::{DatagramHeader, CHALLENGE_LEN, SETUP_LEN};
use netchar_wire::session::ClientEvent;
use netns::*;
use std::net::UdpSocket;
use std::process::Command;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_netchar");
/// IPv4 + UDP headers, as nft counts bytes at the IP layer.
const IP_UDP: u64 = 28;

/// Runs in namespace A when the test starts it: the attacker's control session and its
/// spoofed setups. Prints `attack-sent PACKETS BYTES` (UDP payload bytes).
#[test]
#[ignore = "a role of netns_reflection, started by it inside a namespace"]
fn attacker_role() {
    // Not a skip: run by hand (`--ignored`) without the test that starts it, it has no role.
    let Ok(server) = std::env::var("NETCHAR_ATTACK_SERVER") else { return };
    let from = std::env::var("NETCHAR_ATTACK_FROM").unwrap();
    let spoof = std::env::var("NETCHAR_ATTACK_SPOOF").unwrap();
    let (ip, port) = server.rsplit_once(':').unwrap();
    let mut attacker = Control::open_to(&from, ip, port.parse().unwrap(), udp_reverse(200_000_000), None);
    let cookie = match attacker.next_event() {
        Ok(ClientEvent::Accepted { cookie, .. }) => cookie,
        other => panic!("the attacker's test was not admitted: {other:?}"),
    };
    let socket = UdpSocket::bind(format!("{spoof}:0")).unwrap();
    let setup = DatagramHeader::setup(1, &cookie);
    let (mut packets, mut bytes) = (0u64, 0u64);
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        if let Ok(n) = socket.send_to(&setup, &server) {
            packets += 1;
            bytes += n as u64;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    // On a line of its own: libtest prints the test name before it without a newline.
    println!("\nattack-sent {packets} {bytes}");
}

struct Hosts {
    link: Link,
    victim: Netns,
    victim_ip: String,
}

/// S (link.a) — A (link.b) over the Link's veth; S — V over a second veth. The victim's
/// address is also put on A's loopback so A can send from it (the spoof).
fn three_hosts() -> Result<Hosts, String> {
    let link = Link::create()?;
    let v = Netns::create(&format!("{}-v", link.a.name())).map_err(|e| format!("cannot create a namespace: {e}"))?;
    let x = link.a_ip.octets()[2];
    let (s_ip, victim_ip) = (format!("10.202.{x}.1"), format!("10.202.{x}.2"));
    link.a.ip(&["link", "add", "ncvs0", "type", "veth", "peer", "name", "ncvv0", "netns", v.name()])?;
    link.a.ip(&["addr", "add", &format!("{s_ip}/24"), "dev", "ncvs0"])?;
    v.ip(&["addr", "add", &format!("{victim_ip}/24"), "dev", "ncvv0"])?;
    link.a.ip(&["link", "set", "ncvs0", "up"])?;
    v.ip(&["link", "set", "ncvv0", "up"])?;
    link.b.ip(&["addr", "add", &format!("{victim_ip}/32"), "dev", "lo"])?;
    // The spoofed datagrams arrive on S's link to A: strict reverse-path filtering would drop
    // them before the server saw them, which would prove nothing about the server.
    for key in
        ["net/ipv4/conf/all/rp_filter", "net/ipv4/conf/default/rp_filter", &format!("net/ipv4/conf/{DEV_A}/rp_filter")]
    {
        link.a.sysctl(key, "0")?;
    }
    v.nft(&["add", "table", "inet", "victim"])?;
    v.nft(&["add", "chain", "inet", "victim", "input", "{ type filter hook input priority 0; }"])?;
    v.nft(&["add", "rule", "inet", "victim", "input", "meta", "l4proto", "udp", "counter"])?;
    Ok(Hosts { link, victim: v, victim_ip })
}

#[test]
fn a_spoofed_udp_setup_sends_the_victim_nothing_across_three_hosts() {
    if let Err(reason) = preflight() {
        skip_or_fail(&reason);
        return;
    }
    if Command::new("nft").arg("--version").output().is_err() {
        skip_or_fail("nft is not installed (apt-get install nftables)");
        return;
    }
    for allow in [false, true] {
        let hosts = match three_hosts() {
            Ok(h) => h,
            Err(reason) => {
                skip_or_fail(&reason);
                return;
            }
        };
        let Hosts { link, victim, victim_ip } = &hosts;
        let mut server_cmd = link.a.command(BIN);
        server_cmd.args(["server", "-B", "0.0.0.0", "-p", "5300", "--max-concurrent", "2"]);
        if allow {
            server_cmd.args(["--allow-data-from", "10.202.0.0/16"]);
        }
        let server = Server::spawn(server_cmd, "listening", Duration::from_secs(10)).unwrap();
        let target = format!("{}:5300", link.a_ip);
        let mut attack = link.b.command(std::env::current_exe().unwrap());
        attack
            .args(["--ignored", "--exact", "attacker_role", "--nocapture", "--test-threads", "1"])
            .env("NETCHAR_ATTACK_SERVER", &target)
            .env("NETCHAR_ATTACK_FROM", link.b_ip.to_string())
            .env("NETCHAR_ATTACK_SPOOF", victim_ip);
        let attacker = std::thread::spawn(move || run_with_timeout(attack, Duration::from_secs(30)));
        std::thread::sleep(Duration::from_millis(300));
        let mut good = link.b.command(BIN);
        good.args(["udp", &link.a_ip.to_string(), "-p", "5300", "-b", "20M", "-t", "2", "--json", "--busy-wait", "5"]);
        let good = run_with_timeout(good, Duration::from_secs(30)).unwrap();
        let attacker = attacker.join().unwrap().unwrap();
        let sent =
            attacker.stdout.lines().find_map(|l| l.strip_prefix("attack-sent ")).unwrap_or_else(|| {
                panic!("the attacker role printed no count:\n{}\n{}", attacker.stdout, attacker.stderr)
            });
        let mut it = sent.split_whitespace().map(|n| n.parse::<u64>().unwrap());
        let (sent_packets, sent_bytes) = (it.next().unwrap(), it.next().unwrap());
        assert!(sent_packets > 100, "the attack sent only {sent_packets} datagrams");
        assert_eq!(
            good.status.map(|s| s.code()),
            Some(Some(0)),
            "good client failed: {}\n{}",
            good.stderr,
            server.stderr()
        );
        let v: serde_json::Value = serde_json::from_str(&good.stdout).unwrap();
        let up = &v["summary"]["up"];
        let n = |x: &serde_json::Value| x.as_u64().unwrap();
        assert_eq!(n(&up["sender"]["packets"]), n(&up["receiver"]["packets"]) + n(&up["receiver"]["lost"]), "{up}");
        let counters = victim.nft_counters("inet", "victim", "input").unwrap();
        let (victim_packets, victim_bytes) = counters[0];
        eprintln!(
            "allow victim's network: {allow}; attacker sent {sent_packets} setups ({sent_bytes} B payload); \
             victim's nft counted {victim_packets} UDP packets, {victim_bytes} B"
        );
        if allow {
            assert!(victim_packets <= sent_packets, "{victim_packets} packets to the victim for {sent_packets} sent");
            assert_eq!(
                victim_bytes,
                victim_packets * (CHALLENGE_LEN as u64 + IP_UDP),
                "not only challenges reached the victim"
            );
            assert!(victim_bytes <= sent_packets * (SETUP_LEN as u64 + IP_UDP), "amplification");
        } else {
            assert_eq!(victim_packets, 0, "{victim_bytes} bytes reached the victim\nserver:\n{}", server.stderr());
        }
        let log = server.stderr();
        assert!(log.contains("data streams refused") || allow, "{log}");
    }
}
