//! The counters against ground truth, on a veth pair between two network namespaces (issue
//! 23): each test makes packets vanish at one known place and checks that the counters of
//! that place, and only those, account for every one.
//!
//! - a tbf with a tiny limit drops on the way out: the qdisc delta equals `tc -s qdisc`'s, and
//!   the stack counts the same datagrams as `UdpSndbufErrors` and `IpOutDiscards`;
//! - a receiver with a small SO_RCVBUF that does not read: `UdpRcvbufErrors` is exactly the
//!   datagrams sent less those its queue holds, and the socket's own count agrees;
//! - the peer set down while sending: the interface's tx drops move as `ip -s link` shows;
//! - an nft rule that drops in the input chain: the datagrams arrive on the interface and no
//!   interface, qdisc, stack or socket counter explains them (the "unexplained" remainder).
//!
//! Each test's thread enters a namespace with setns(2), so the snapshots (netlink, ioctl and
//! `/proc/thread-self/net`) read that namespace. Needs root, `ip` and `tc` (`nft` for the
//! last): without them the tests skip through netchar_testkit's netns, or fail under
//! `NETCHAR_REQUIRE_ALL=1`.

use netchar_testkit::netns;

use netchar_model::Evidence;
use netchar_sys::counters::{interface_to, Sampler, Snapshot};
use netns::{Link, Netns, DEV_A, DEV_B};
use serde_json::Value;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// Runs `work` on a thread of its own that has entered namespace `ns`.
fn in_netns<T: Send>(ns: &Netns, work: impl FnOnce() -> T + Send) -> T {
    let path = format!("/run/netns/{}", ns.name());
    std::thread::scope(|s| {
        s.spawn(|| {
            let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
            // SAFETY: setns takes a descriptor and a flag; CLONE_NEWNET moves only this
            // thread, which ends with the scope.
            let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns {path}: {}", std::io::Error::last_os_error());
            work()
        })
        .join()
        .expect("the namespace thread panicked")
    })
}

/// A veth pair with nothing on it but the test's traffic: IPv6 off (no router or neighbour
/// solicitations), and each end's neighbour entry made permanent (no ARP, and a datagram never
/// waits for one).
fn quiet_link() -> Option<Link> {
    let link = match Link::create() {
        Ok(l) => l,
        Err(reason) => {
            netns::skip_or_fail(&reason);
            return None;
        }
    };
    for ns in [&link.a, &link.b] {
        // A kernel without IPv6 has no such sysctl, and no IPv6 traffic either.
        let _ = ns.sysctl("net/ipv6/conf/all/disable_ipv6", "1");
    }
    let mac = |ns: &Netns, dev: &str| -> String {
        let out = ns.ip(&["-j", "link", "show", dev]).expect("ip link show");
        let v: Value = serde_json::from_slice(&out.stdout).expect("ip -j link show");
        v[0]["address"].as_str().expect("a MAC address").to_string()
    };
    let (mac_a, mac_b) = (mac(&link.a, DEV_A), mac(&link.b, DEV_B));
    let (a_ip, b_ip) = (link.a_ip.to_string(), link.b_ip.to_string());
    link.a.ip(&["neigh", "replace", &b_ip, "lladdr", &mac_b, "dev", DEV_A, "nud", "permanent"]).expect("neighbour");
    link.b.ip(&["neigh", "replace", &a_ip, "lladdr", &mac_a, "dev", DEV_B, "nud", "permanent"]).expect("neighbour");
    Some(link)
}

/// Sends `count` datagrams of `len` bytes from namespace a to `to`; how many the kernel took.
fn send_from_a(link: &Link, to: SocketAddr, count: usize, len: usize) -> usize {
    in_netns(&link.a, || {
        let socket = UdpSocket::bind("0.0.0.0:0").expect("bind the sender");
        let payload = vec![0x5a; len];
        (0..count).filter(|_| socket.send_to(&payload, to).is_ok()).count()
    })
}

/// Polls `probe` until it returns Some, for up to five seconds.
fn wait_for<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `tc -s -j qdisc show dev DEV` in `ns`: one JSON object per qdisc.
fn tc_qdiscs(ns: &Netns, dev: &str) -> Vec<Value> {
    let out = ns.tc(&["-s", "-j", "qdisc", "show", "dev", dev]).expect("tc -s qdisc show");
    serde_json::from_slice(&out.stdout).expect("tc -j prints JSON")
}

/// `ip -s -j link show DEV` in `ns`: its `stats64` object.
fn ip_link_stats(ns: &Netns, dev: &str) -> Value {
    let out = ns.ip(&["-s", "-j", "link", "show", dev]).expect("ip -s link show");
    let v: Value = serde_json::from_slice(&out.stdout).expect("ip -j prints JSON");
    v[0]["stats64"].clone()
}

fn number(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// Every counter of `e` that would explain a lost datagram on this end: the interface's
/// drops and errors, the qdiscs' drops, the stack's drop counters.
fn explained(e: &Evidence) -> u64 {
    let link = e.link.expect("link counters");
    let stack = e.stack.expect("stack counters");
    let qdisc_drops: u64 = e.qdiscs.as_ref().expect("qdiscs").iter().map(|q| q.drops).sum();
    link.rx_dropped
        + link.rx_errors
        + link.tx_dropped
        + link.tx_errors
        + qdisc_drops
        + stack.udp_in_errors
        + stack.udp_no_ports
        + stack.ip_in_discards
        + stack.ip_out_discards
}

#[test]
fn a_tbf_that_overflows_is_counted_as_tc_counts_it() {
    let Some(link) = quiet_link() else { return };
    // 1 Mbit/s with room for two 1042-byte frames: nearly every datagram of a burst is dropped.
    link.a
        .tc(&["qdisc", "replace", "dev", DEV_A, "root", "tbf", "rate", "1mbit", "burst", "1600", "limit", "3000"])
        .expect("install tbf");
    let mut sampler = in_netns(&link.a, || Sampler::open(DEV_A)).expect("a sampler of the veth");
    let tc_before = tc_qdiscs(&link.a, DEV_A);
    let before = in_netns(&link.a, || sampler.take());
    let to = SocketAddr::new(IpAddr::V4(link.b_ip), 9);
    let accepted = send_from_a(&link, to, 400, 1000);
    // Let the frames it queued leave (8 ms each at 1 Mbit/s).
    let after = wait_for("the tbf to empty", || {
        let s = in_netns(&link.a, || sampler.take());
        (s.qdiscs.as_ref()?.first()?.backlog_packets == 0).then_some(s)
    });
    let tc_after = tc_qdiscs(&link.a, DEV_A);
    let e = before.delta(&after);
    eprintln!("evidence: {}", serde_json::to_string(&e).unwrap());

    let qdiscs = e.qdiscs.as_ref().expect("qdiscs read");
    assert_eq!(qdiscs.len(), 1, "one visible qdisc, the tbf: {qdiscs:?}");
    let (tbf, truth_before, truth_after) = (&qdiscs[0], &tc_before[0], &tc_after[0]);
    assert_eq!((tbf.kind.as_str(), tbf.parent.as_str()), ("tbf", "root"));
    assert_eq!(tbf.handle, truth_after["handle"].as_str().unwrap());
    for (ours, name) in
        [(tbf.drops, "drops"), (tbf.packets, "packets"), (tbf.bytes, "bytes"), (tbf.overlimits, "overlimits")]
    {
        let truth = number(&truth_after[name]) - number(&truth_before[name]);
        assert_eq!(ours, truth, "{name}: ours {ours}, tc -s qdisc {truth}");
    }
    assert!(tbf.drops > 300, "the tbf dropped only {} of 400", tbf.drops);
    // Every datagram either left through the tbf or was dropped by it; UDP takes the qdisc's
    // drop as ENOBUFS and counts it as a send-buffer error (no IP_RECVERR), and IP as an
    // output discard; the sender saw every send succeed.
    assert_eq!(accepted, 400);
    assert_eq!(tbf.packets + tbf.drops, 400);
    let stack = e.stack.expect("stack counters");
    assert_eq!(stack.udp_sndbuf_errors, tbf.drops);
    assert_eq!(stack.ip_out_discards, tbf.drops);
    let link_counters = e.link.expect("link counters");
    assert_eq!(link_counters.tx_packets, tbf.packets, "the veth sent what the tbf let through");
    assert_eq!(link_counters.tx_dropped, 0, "the drops are the qdisc's, not the device's");
}

#[test]
fn a_receiver_that_does_not_read_loses_exactly_what_its_buffer_cannot_hold() {
    let Some(link) = quiet_link() else { return };
    const SENT: usize = 300;
    let (mut sampler, receiver) = in_netns(&link.b, || {
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None).unwrap();
        // The kernel doubles this and raises it to its minimum: a few datagrams' worth.
        socket.set_recv_buffer_size(4096).unwrap();
        socket.bind(&SocketAddr::new(IpAddr::V4(link.b_ip), 0).into()).unwrap();
        (Sampler::open(DEV_B).expect("a sampler of the veth"), UdpSocket::from(socket))
    });
    let to = receiver.local_addr().unwrap();
    let before = in_netns(&link.b, || sampler.take());
    assert_eq!(send_from_a(&link, to, SENT, 200), SENT);
    // Each datagram is queued or dropped in the softirq that takes it off b's backlog: once
    // IP has seen them all and the counters stand still, every decision is made.
    let e = wait_for("the stack to take every datagram", || {
        let first = before.delta(&in_netns(&link.b, || sampler.take()));
        std::thread::sleep(Duration::from_millis(50));
        let second = before.delta(&in_netns(&link.b, || sampler.take()));
        let ip_in = second.snmp.as_ref()?.get("IpInReceives").copied();
        (ip_in == Some(SENT as u64) && first.stack == second.stack).then_some(second)
    });
    eprintln!("evidence: {}", serde_json::to_string(&e).unwrap());
    receiver.set_nonblocking(true).unwrap();
    let mut held = 0u64;
    let mut buf = [0u8; 2048];
    while receiver.recv(&mut buf).is_ok() {
        held += 1;
    }
    let stack = e.stack.expect("stack counters");
    assert!(held > 0 && held < 50, "the small buffer held {held} datagrams");
    assert_eq!(stack.udp_rcvbuf_errors, SENT as u64 - held, "sent {SENT}, held {held}");
    assert_eq!(stack.udp_in_errors, stack.udp_rcvbuf_errors, "InErrors counts the receive-buffer drops");
    let socket_drops = netchar_sys::udp::socket_drops(std::os::fd::AsFd::as_fd(&receiver));
    assert_eq!(socket_drops, Some(stack.udp_rcvbuf_errors), "the socket's own count agrees");
    let link_counters = e.link.expect("link counters");
    assert_eq!(link_counters.rx_packets, SENT as u64, "all arrived on the interface");
    assert_eq!(link_counters.rx_dropped, 0);
    // UDP counts a delivery when the application reads it.
    let read = before.delta(&in_netns(&link.b, || sampler.take()));
    assert_eq!(read.snmp.unwrap().get("UdpInDatagrams").copied().unwrap_or(0), held);
}

#[test]
fn a_peer_that_goes_down_makes_the_interface_drop_as_ip_shows() {
    let Some(link) = quiet_link() else { return };
    let mut sampler = in_netns(&link.a, || Sampler::open(DEV_A)).expect("a sampler of the veth");
    link.b.ip(&["link", "set", DEV_B, "down"]).expect("set the peer down");
    wait_for("the carrier to go", || {
        let out = link.a.ip(&["-j", "link", "show", DEV_A]).ok()?;
        let v: Value = serde_json::from_slice(&out.stdout).ok()?;
        let flags = v[0]["flags"].as_array()?;
        flags.iter().any(|f| f == "NO-CARRIER").then_some(())
    });
    let truth_before = ip_link_stats(&link.a, DEV_A);
    let before = in_netns(&link.a, || sampler.take());
    let to = SocketAddr::new(IpAddr::V4(link.b_ip), 9);
    let accepted = send_from_a(&link, to, 100, 500);
    let after = in_netns(&link.a, || sampler.take());
    let truth_after = ip_link_stats(&link.a, DEV_A);
    let e = before.delta(&after);
    eprintln!("evidence: {}; {accepted} of 100 sends accepted", serde_json::to_string(&e).unwrap());
    let link_counters = e.link.expect("link counters");
    let truth = |dir: &str, name: &str| number(&truth_after[dir][name]) - number(&truth_before[dir][name]);
    assert_eq!(link_counters.tx_dropped, truth("tx", "dropped"), "tx dropped as ip -s link shows");
    assert_eq!(link_counters.tx_errors, truth("tx", "errors"), "tx errors as ip -s link shows");
    assert_eq!(link_counters.tx_packets, truth("tx", "packets"));
    // The veth takes each datagram and drops it (its peer is down): nothing leaves, and every
    // datagram the sender handed over is a tx drop.
    assert_eq!(accepted, 100);
    assert_eq!(link_counters.tx_dropped, 100, "{link_counters:?}");
    assert_eq!(link_counters.tx_packets, 0);
}

#[test]
fn an_nft_drop_in_the_input_chain_is_explained_by_no_counter() {
    let Some(link) = quiet_link() else { return };
    if !netns::require::tool("nft input drop counters", "nft", &["--version"], "apt-get install nftables") {
        return;
    }
    const SENT: u64 = 200;
    let (mut sampler, receiver) = in_netns(&link.b, || {
        let socket = UdpSocket::bind(SocketAddr::new(IpAddr::V4(link.b_ip), 0)).unwrap();
        (Sampler::open(DEV_B).expect("a sampler of the veth"), socket)
    });
    let port = receiver.local_addr().unwrap().port().to_string();
    link.b.nft(&["add", "table", "inet", "nc"]).expect("nft table");
    link.b.nft(&["add", "chain", "inet", "nc", "input", "{ type filter hook input priority 0; }"]).expect("nft chain");
    link.b.nft(&["add", "rule", "inet", "nc", "input", "udp", "dport", &port, "counter", "drop"]).expect("nft rule");
    let before = in_netns(&link.b, || sampler.take());
    let to = receiver.local_addr().unwrap();
    assert_eq!(send_from_a(&link, to, SENT as usize, 300), SENT as usize);
    let dropped = wait_for("nft to drop every datagram", || {
        let counters = link.b.nft_counters("inet", "nc", "input").ok()?;
        (counters.first()?.0 == SENT).then_some(SENT)
    });
    let e = before.delta(&in_netns(&link.b, || sampler.take()));
    eprintln!("evidence: {}", serde_json::to_string(&e).unwrap());
    receiver.set_nonblocking(true).unwrap();
    assert!(receiver.recv(&mut [0u8; 512]).is_err(), "the socket received nothing");
    let link_counters = e.link.expect("link counters");
    assert_eq!(link_counters.rx_packets, SENT, "every datagram arrived on the interface");
    assert_eq!(explained(&e), 0, "no counter explains the nft drops: {e:?}");
    let socket_drops = netchar_sys::udp::socket_drops(std::os::fd::AsFd::as_fd(&receiver));
    assert_eq!(socket_drops, Some(0));
    // What the next phase reports as unexplained: sent − received − explained.
    let received = 0;
    assert_eq!(SENT - received - explained(&e), dropped);
}

#[test]
fn snapshots_of_a_veth_read_every_source_and_say_what_it_lacks() {
    let Some(link) = quiet_link() else { return };
    let (e, costs, route, identity) = in_netns(&link.a, || {
        let route = interface_to(IpAddr::V4(link.b_ip)).expect("the route to b");
        let mut sampler = Sampler::open(&route).expect("a sampler");
        let first = sampler.take();
        let mut costs: Vec<u128> = (0..50).map(|_| sampler.take().cost.as_micros()).collect();
        costs.sort_unstable();
        let fresh = Snapshot::take(&route).expect("a snapshot");
        let identity = netchar_sys::identity::describe(&[&route]);
        (first.delta(&fresh), costs, route, identity)
    });
    eprintln!(
        "snapshot of a veth: {} us median, {} us at the 90th percentile, {} us at most (a kept sampler); {} us opening anew",
        costs[25], costs[45], costs[49], e.snapshot_us[1]
    );
    eprintln!("identity: {}", serde_json::to_string(&identity).unwrap());
    assert_eq!(route, DEV_A);
    assert!(e.link.is_some() && e.qdiscs.is_some() && e.snmp.is_some());
    assert!(e.driver.is_some(), "veth has driver statistics: {:?}", e.unavailable);
    assert!(e.unavailable.is_empty(), "{:?}", e.unavailable);
    let veth = &identity.interfaces[0];
    assert_eq!(veth.driver.as_deref(), Some("veth"));
    assert!(veth.unavailable.contains_key("coalesce"), "veth has no interrupt coalescing: {veth:?}");
    let gro_truth =
        link.a.command("ethtool").args(["-k", DEV_A]).output().map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
    if let Ok(text) = gro_truth {
        let on = text.lines().any(|l| l.trim() == "generic-receive-offload: on");
        assert_eq!(veth.offloads.get("rx-gro"), Some(&on), "rx-gro as ethtool -k shows it");
    }
}
