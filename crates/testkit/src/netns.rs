//! Network-namespace fixtures for ground-truth tests.
//!
//! Builds two private network namespaces joined by a veth pair ([`Link`]), or N of them on a
//! bridge ([`Bridged`]), shapes/impairs the link with `tc`/`nft`, runs commands inside a
//! namespace, and tears everything down on drop (also when the test panics). Nothing here
//! touches the host's own interfaces or addresses: the veth pairs are created directly inside
//! the namespaces, so their names and the 10.201.x.0/24 and 10.202.x.0/24 addresses only exist
//! there.
//!
//! Use from a test with `use netchar_testkit::netns;` (the netchar crate's tests include
//! `support/netns.rs`, which re-exports it).
//!
//! Environments without root, `ip`, `tc` or namespace support make [`Link::create`] return
//! `Err(reason)`; pass that to [`skip_or_fail`], which skips (returns) unless
//! `NETCHAR_REQUIRE_ALL=1` is set, in which case it panics (support/require.rs).

#![allow(dead_code, unreachable_pub)]

pub use crate::require;

use std::io::{BufRead, BufReader, Read};
use std::net::Ipv4Addr;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// Prefix of every namespace this module creates: `ncx-<pid>-<seq>-a|b` (`-hub`, `-nI` for a bridge).
const NS_PREFIX: &str = "ncx-";
/// Interface names inside the namespaces (private to them, so fixed names are fine).
pub const DEV_A: &str = "ncveth0";
pub const DEV_B: &str = "ncveth1";

static SEQ: AtomicU32 = AtomicU32::new(0);

/// Call when the fixture cannot be built. Without `NETCHAR_REQUIRE_ALL=1` this prints
/// "skipping netns test: REASON" and returns (the caller should then return early); with it,
/// it panics so CI notices the missing coverage ([`require::unavailable`]).
pub fn skip_or_fail(reason: &str) {
    require::unavailable("netns test", reason);
}

/// Runs `cmd` to completion, returning its output or a readable error (used for setup steps).
fn run_checked(cmd: &mut Command) -> Result<Output, String> {
    let shown = format!("{cmd:?}");
    let out = cmd.stdin(Stdio::null()).output().map_err(|e| format!("cannot run {shown}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{shown} failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(out)
}

fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    // Uid: real effective saved fs
    line.split_whitespace().nth(2)?.parse().ok()
}

fn tool_available(tool: &str, arg: &str) -> Result<(), String> {
    match Command::new(tool).arg(arg).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).status() {
        Ok(_) => Ok(()),
        Err(e) => Err(format!("`{tool}` is not usable: {e}")),
    }
}

/// Checks the preconditions that do not need any change to the system.
pub fn preflight() -> Result<(), String> {
    if !cfg!(target_os = "linux") {
        return Err("network namespaces need Linux".into());
    }
    match effective_uid() {
        Some(0) => {}
        Some(uid) => return Err(format!("needs root (effective uid is {uid})")),
        None => return Err("cannot determine the effective uid".into()),
    }
    tool_available("ip", "-V")?;
    tool_available("tc", "-V")?;
    Ok(())
}

/// Deletes namespaces left behind by earlier runs of these tests that were killed before their
/// guards ran (names carry the pid; only namespaces of processes that no longer exist go).
fn reap_stale() {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).stderr(Stdio::null()).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(rest) = name.strip_prefix(NS_PREFIX) else { continue };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else { continue };
        if pid != std::process::id() && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = Command::new("ip").args(["netns", "del", name]).stderr(Stdio::null()).status();
        }
    }
}

/// A qdisc's counters: ` Sent 123 bytes 45 pkt (dropped 0, overlimits 6 requeues 0)`. A GSO
/// packet counts as its segments, its bytes with every segment's headers (qdisc_pkt_len).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QdiscCounters {
    /// Bytes sent, link-layer headers included.
    pub bytes: u64,
    /// Packets sent.
    pub packets: u64,
    /// Packets dropped.
    pub dropped: u64,
    /// Times a packet had to wait for the shaper's tokens.
    pub overlimits: u64,
}

impl QdiscCounters {
    /// The first (root) qdisc's counters in `tc -s qdisc show`'s output.
    pub fn parse(text: &str) -> Option<Self> {
        let words: Vec<&str> = text.split_whitespace().map(|w| w.trim_matches(|c| c == '(' || c == ',')).collect();
        let at = words.iter().position(|w| *w == "Sent")?;
        let after = |name: &str| -> Option<u64> {
            let i = words[at..].iter().position(|w| *w == name)?;
            words.get(at + i + 1)?.parse().ok()
        };
        Some(Self {
            bytes: words.get(at + 1)?.parse().ok()?,
            packets: words.get(at + 3)?.parse().ok()?,
            dropped: after("dropped")?,
            overlimits: after("overlimits")?,
        })
    }

    /// What moved from `before` to `self`.
    pub fn since(&self, before: &Self) -> Self {
        Self {
            bytes: self.bytes - before.bytes,
            packets: self.packets - before.packets,
            dropped: self.dropped - before.dropped,
            overlimits: self.overlimits - before.overlimits,
        }
    }
}

/// One network namespace, deleted on drop.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

impl Netns {
    /// Creates namespace `name` and brings its loopback up.
    pub fn create(name: &str) -> Result<Self, String> {
        run_checked(Command::new("ip").args(["netns", "add", name]))?;
        let ns = Self { name: name.to_string() };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// A command that runs `program` inside this namespace (`ip netns exec NAME program`).
    /// `ip netns exec` execs the program, so the child's pid is the program's own.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name]).arg(program);
        c
    }

    /// `ip -n NAME ARGS...`, failing with the command's stderr.
    pub fn ip(&self, args: &[&str]) -> Result<Output, String> {
        run_checked(Command::new("ip").args(["-n", &self.name]).args(args))
    }

    /// `tc ARGS...` inside this namespace.
    pub fn tc(&self, args: &[&str]) -> Result<Output, String> {
        run_checked(self.command("tc").args(args))
    }

    /// The counters of the qdisc at the root of `dev`, by its own account (`tc -s qdisc`):
    /// what a shaper let through, dropped and held back, the truth a rate through it is
    /// measured against when the machine did not keep the link full.
    pub fn qdisc_counters(&self, dev: &str) -> Result<QdiscCounters, String> {
        let out = self.tc(&["-s", "qdisc", "show", "dev", dev])?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        QdiscCounters::parse(&text).ok_or_else(|| format!("no counters in `tc -s qdisc show dev {dev}`: {text}"))
    }

    /// `nft ARGS...` inside this namespace (for loss/impairment tests).
    pub fn nft(&self, args: &[&str]) -> Result<Output, String> {
        run_checked(self.command("nft").args(args))
    }

    /// A table `inet TABLE` with a filter chain `CHAIN` on the input hook, for a test's rules.
    pub fn input_chain(&self, table: &str, chain: &str) -> Result<(), String> {
        self.nft(&["add", "table", "inet", table])?;
        self.nft(&["add", "chain", "inet", table, chain, "{ type filter hook input priority 0; }"]).map(|_| ())
    }

    /// A table `inet TABLE` with an input chain `CHAIN` whose one rule drops 2% of the packets
    /// that `matcher` selects (nft words, e.g. `["udp", "dport", "5001"]`) at random and counts
    /// what it dropped: the ground truth of the loss tests.
    pub fn drop_at_random(&self, table: &str, chain: &str, matcher: &[&str]) -> Result<(), String> {
        self.input_chain(table, chain)?;
        let mut rule = vec!["add", "rule", "inet", table, chain];
        rule.extend_from_slice(matcher);
        rule.extend_from_slice(&["numgen", "random", "mod", "1000", "<", "20", "counter", "drop"]);
        self.nft(&rule).map(|_| ())
    }

    /// The `(packets, bytes)` of every `counter` statement in chain `FAMILY TABLE CHAIN`, in rule
    /// order (`nft list chain ...` prints them as `counter packets N bytes M`).
    ///
    /// nft counts what the hook sees: one GSO/GRO super-packet is *one* packet whose bytes span
    /// all its segments.
    pub fn nft_counters(&self, family: &str, table: &str, chain: &str) -> Result<Vec<(u64, u64)>, String> {
        let out = self.nft(&["list", "chain", family, table, chain])?;
        let text = String::from_utf8_lossy(&out.stdout);
        let mut found = Vec::new();
        for line in text.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            for (i, w) in words.iter().enumerate() {
                if *w != "counter" {
                    continue;
                }
                match words.get(i + 1..i + 5) {
                    Some(["packets", p, "bytes", b]) => {
                        let p = p.parse().map_err(|e| format!("bad packet count {p:?} in {line:?}: {e}"))?;
                        let b = b.parse().map_err(|e| format!("bad byte count {b:?} in {line:?}: {e}"))?;
                        found.push((p, b));
                    }
                    _ => return Err(format!("cannot parse the counter in {line:?}")),
                }
            }
        }
        Ok(found)
    }

    /// Writes a sysctl of this namespace (e.g. `net/ipv4/tcp_timestamps`), via /proc/sys.
    pub fn sysctl(&self, key: &str, value: &str) -> Result<(), String> {
        let path = format!("/proc/sys/{}", key.replace('.', "/"));
        run_checked(self.command("sh").args(["-c", "printf '%s' \"$1\" > \"$2\"", "sh", value, &path]))?;
        Ok(())
    }

    /// Reads a sysctl of this namespace.
    pub fn read_sysctl(&self, key: &str) -> Result<String, String> {
        let path = format!("/proc/sys/{}", key.replace('.', "/"));
        let out = run_checked(self.command("cat").arg(&path))?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// IPv4 UDP datagrams of `payload` bytes that the one counter of `table`/`chain` (family
    /// inet) counted. nft counts skbs, and a GSO batch crosses a veth whole, so the count is
    /// `(bytes − 28 × skbs) / payload`, checked to be whole datagrams.
    pub fn counted_datagrams(&self, table: &str, chain: &str, payload: u64) -> Result<u64, String> {
        const IP_UDP_HEADERS: u64 = 28;
        let counters = self.nft_counters("inet", table, chain)?;
        let &[(skbs, bytes)] = counters.as_slice() else {
            return Err(format!("expected one counter in {} inet {table} {chain}, found {counters:?}", self.name));
        };
        let total = bytes.checked_sub(IP_UDP_HEADERS * skbs).ok_or("counter smaller than its headers")?;
        if total % payload != 0 {
            return Err(format!("nft counter {skbs} skbs / {bytes} bytes is not whole {payload}-byte datagrams"));
        }
        Ok(total / payload)
    }

    /// UDP datagrams this namespace's stack dropped because a socket's receive buffer was
    /// full (`Udp: RcvbufErrors` in its /proc/net/snmp, IPv4 and IPv6 summed): a receiver that
    /// a busy machine keeps off the CPU loses datagrams there, not on the wire.
    pub fn udp_receive_buffer_drops(&self) -> Result<u64, String> {
        let mut total = 0;
        for (file, prefix) in [("/proc/net/snmp", "Udp:"), ("/proc/net/snmp6", "Udp6RcvbufErrors")] {
            let out = run_checked(self.command("cat").arg(file))?;
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            total += if prefix == "Udp:" {
                // Two "Udp:" lines: the names, then the values.
                let mut lines = text.lines().filter(|l| l.starts_with(prefix));
                let (names, values) = (lines.next().unwrap_or(""), lines.next().unwrap_or(""));
                names
                    .split_whitespace()
                    .zip(values.split_whitespace())
                    .find(|(n, _)| *n == "RcvbufErrors")
                    .and_then(|(_, v)| v.parse::<u64>().ok())
                    .ok_or_else(|| format!("no Udp RcvbufErrors in {file} of {}", self.name))?
            } else {
                text.lines()
                    .find_map(|l| l.strip_prefix(prefix))
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .ok_or_else(|| format!("no {prefix} in {file} of {}", self.name))?
            };
        }
        Ok(total)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting the namespace also destroys the veth end inside it (and with it the peer).
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// Before a new set of namespaces: checks this machine can make them, deletes those a killed
/// run left behind, and returns a name prefix unique to this process and call, and a byte in
/// 1..=250 that varies with it (for the set's private subnet).
fn new_topology() -> Result<(String, u8), String> {
    preflight()?;
    reap_stale();
    let pid = std::process::id();
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    Ok((format!("{NS_PREFIX}{pid}-{seq}"), ((pid.wrapping_add(seq)) % 250 + 1) as u8))
}

/// [`Netns::create`], its error in words for [`skip_or_fail`].
fn new_netns(name: &str) -> Result<Netns, String> {
    Netns::create(name).map_err(|e| format!("cannot create a network namespace: {e}"))
}

/// Two namespaces `a` and `b` joined by a veth pair: `a` has `DEV_A` with `a_ip`/24, `b` has
/// `DEV_B` with `b_ip`/24. Dropping it deletes both namespaces.
#[derive(Debug)]
pub struct Link {
    pub a: Netns,
    pub b: Netns,
    pub a_ip: Ipv4Addr,
    pub b_ip: Ipv4Addr,
}

impl Link {
    /// Builds the pair. Errors carry a human-readable reason suitable for [`skip_or_fail`].
    pub fn create() -> Result<Self, String> {
        let (base, x) = new_topology()?;
        // The subnet is only visible inside the two namespaces; varying it per link merely
        // keeps captures/logs of concurrent runs distinguishable.
        let a_ip = Ipv4Addr::new(10, 201, x, 1);
        let b_ip = Ipv4Addr::new(10, 201, x, 2);

        let a = new_netns(&format!("{base}-a"))?;
        let b = new_netns(&format!("{base}-b"))?;
        // Create the pair inside namespace a with the peer placed straight into namespace b,
        // so no interface ever appears in the host's namespace.
        a.ip(&["link", "add", DEV_A, "type", "veth", "peer", "name", DEV_B, "netns", b.name()])
            .map_err(|e| format!("cannot create a veth pair: {e}"))?;
        a.ip(&["addr", "add", &format!("{a_ip}/24"), "dev", DEV_A])?;
        b.ip(&["addr", "add", &format!("{b_ip}/24"), "dev", DEV_B])?;
        a.ip(&["link", "set", DEV_A, "up"])?;
        b.ip(&["link", "set", DEV_B, "up"])?;
        Ok(Self { a, b, a_ip, b_ip })
    }

    /// Replaces the root qdisc of both veth ends with `tc qdisc replace dev DEV root SPEC...`
    /// (e.g. `["tbf", "rate", "200mbit", ...]`).
    /// A link with `qdisc` as the root qdisc on both ends, or None once [`skip_or_fail`] has
    /// said why one cannot be made here.
    pub fn shaped(qdisc: &[&str]) -> Option<Self> {
        let link = match Self::create() {
            Ok(l) => l,
            Err(reason) => {
                skip_or_fail(&reason);
                return None;
            }
        };
        if let Err(e) = link.set_root_qdisc_both(qdisc) {
            skip_or_fail(&format!("cannot install the {} qdisc: {e}", qdisc.first().unwrap_or(&"root")));
            return None;
        }
        Some(link)
    }

    pub fn set_root_qdisc_both(&self, spec: &[&str]) -> Result<(), String> {
        for (ns, dev) in [(&self.a, DEV_A), (&self.b, DEV_B)] {
            let mut args = vec!["qdisc", "replace", "dev", dev, "root"];
            args.extend_from_slice(spec);
            ns.tc(&args)?;
        }
        Ok(())
    }

    /// `tc -s qdisc show` of both ends, for diagnostics.
    pub fn qdisc_stats(&self) -> String {
        let mut s = String::new();
        for (ns, dev) in [(&self.a, DEV_A), (&self.b, DEV_B)] {
            match ns.tc(&["-s", "qdisc", "show", "dev", dev]) {
                Ok(o) => s.push_str(&format!("[{}] {}", ns.name(), String::from_utf8_lossy(&o.stdout))),
                Err(e) => s.push_str(&format!("[{}] {e}\n", ns.name())),
            }
        }
        s
    }
}

/// Three namespaces in a line joined by two veth pairs, `client` — `router` — `server`: the
/// client holds 10.203.x.1/24 (`DEV_A`), the router 10.203.x.2/24 (`DEV_B`) and 10.204.x.1/24
/// (`DEV_R`), the server 10.204.x.2/24 (`DEV_S`); the ends route to each other through the
/// router, which forwards. `path_mtu` is the MTU of the router–server link, so the client's
/// path is narrower than its own link: what path MTU discovery must find.
#[derive(Debug)]
pub struct Routed {
    pub client: Netns,
    pub router: Netns,
    pub server: Netns,
    pub client_ip: Ipv4Addr,
    pub server_ip: Ipv4Addr,
}

/// The router's interface towards the server in a [`Routed`].
pub const DEV_R: &str = "ncveth2";
/// The server's interface in a [`Routed`].
pub const DEV_S: &str = "ncveth3";

impl Routed {
    /// Builds the line. Errors carry a human-readable reason suitable for [`skip_or_fail`].
    pub fn create(path_mtu: u32) -> Result<Self, String> {
        let (base, x) = new_topology()?;
        let client_ip = Ipv4Addr::new(10, 203, x, 1);
        let router_near = Ipv4Addr::new(10, 203, x, 2);
        let router_far = Ipv4Addr::new(10, 204, x, 1);
        let server_ip = Ipv4Addr::new(10, 204, x, 2);
        let client = new_netns(&format!("{base}-c"))?;
        let router = new_netns(&format!("{base}-r"))?;
        let server = new_netns(&format!("{base}-s"))?;
        // Each pair created in one namespace with its peer placed straight into the next.
        client
            .ip(&["link", "add", DEV_A, "type", "veth", "peer", "name", DEV_B, "netns", router.name()])
            .map_err(|e| format!("cannot create a veth pair: {e}"))?;
        router.ip(&["link", "add", DEV_R, "type", "veth", "peer", "name", DEV_S, "netns", server.name()])?;
        let mtu = path_mtu.to_string();
        router.ip(&["link", "set", DEV_R, "mtu", &mtu])?;
        server.ip(&["link", "set", DEV_S, "mtu", &mtu])?;
        client.ip(&["addr", "add", &format!("{client_ip}/24"), "dev", DEV_A])?;
        router.ip(&["addr", "add", &format!("{router_near}/24"), "dev", DEV_B])?;
        router.ip(&["addr", "add", &format!("{router_far}/24"), "dev", DEV_R])?;
        server.ip(&["addr", "add", &format!("{server_ip}/24"), "dev", DEV_S])?;
        for (ns, dev) in [(&client, DEV_A), (&router, DEV_B), (&router, DEV_R), (&server, DEV_S)] {
            ns.ip(&["link", "set", dev, "up"])?;
        }
        client.ip(&["route", "add", "default", "via", &router_near.to_string()])?;
        server.ip(&["route", "add", "default", "via", &router_far.to_string()])?;
        router.sysctl("net/ipv4/ip_forward", "1")?;
        Ok(Self { client, router, server, client_ip, server_ip })
    }
}

/// Bridge and port names inside the hub namespace of a [`Bridged`] (private to it).
pub const BRIDGE_DEV: &str = "ncbr";
/// Each node's end of its veth pair to the bridge (in the node's own namespace).
pub const NODE_DEV: &str = "ncveth0";

/// `n` namespaces on one Ethernet segment: a Linux bridge in a hub namespace of its own, and a
/// veth pair from the bridge to each node namespace, node `i` holding `ips[i]`/24. Like a rack
/// of hosts on one switch; the hub has no address, so it never takes part in the traffic.
/// Dropping it deletes every namespace (and with them the bridge and the veth pairs).
#[derive(Debug)]
pub struct Bridged {
    pub nodes: Vec<Netns>,
    pub ips: Vec<Ipv4Addr>,
    pub hub: Netns,
}

impl Bridged {
    /// Builds the segment. Errors carry a human-readable reason suitable for [`skip_or_fail`].
    pub fn create(n: usize) -> Result<Self, String> {
        assert!((2..=200).contains(&n), "a bridged segment of {n} nodes");
        let (base, x) = new_topology()?;
        // 10.202.x.0/24 exists only inside the node namespaces; x varies per segment only to
        // keep captures of concurrent runs apart (the 10.201 of [`Link`] stays distinct).
        let hub = new_netns(&format!("{base}-hub"))?;
        hub.ip(&["link", "add", BRIDGE_DEV, "type", "bridge"])
            .map_err(|e| format!("cannot create a bridge (CONFIG_BRIDGE): {e}"))?;
        hub.ip(&["link", "set", BRIDGE_DEV, "up"])?;
        let mut nodes = Vec::with_capacity(n);
        let mut ips = Vec::with_capacity(n);
        for i in 0..n {
            let node = new_netns(&format!("{base}-n{i}"))?;
            let port = format!("ncport{i}");
            // Created in the hub with the peer placed straight into the node: no interface ever
            // appears in the host's namespace.
            hub.ip(&["link", "add", &port, "type", "veth", "peer", "name", NODE_DEV, "netns", node.name()])
                .map_err(|e| format!("cannot create a veth pair: {e}"))?;
            hub.ip(&["link", "set", &port, "master", BRIDGE_DEV])?;
            hub.ip(&["link", "set", &port, "up"])?;
            let ip = Ipv4Addr::new(10, 202, x, i as u8 + 1);
            node.ip(&["addr", "add", &format!("{ip}/24"), "dev", NODE_DEV])?;
            node.ip(&["link", "set", NODE_DEV, "up"])?;
            nodes.push(node);
            ips.push(ip);
        }
        Ok(Self { nodes, ips, hub })
    }

    /// A segment of `n` nodes, or None once [`skip_or_fail`] has said why one cannot be made here.
    pub fn create_or_skip(n: usize) -> Option<Self> {
        match Self::create(n) {
            Ok(b) => Some(b),
            Err(reason) => {
                skip_or_fail(&reason);
                None
            }
        }
    }
}

/// A child process killed (and reaped) on drop.
#[derive(Debug)]
pub struct ChildGuard {
    child: Option<Child>,
}

impl ChildGuard {
    pub fn new(child: Child) -> Self {
        Self { child: Some(child) }
    }

    pub fn id(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    /// Waits up to `timeout` for the child to exit on its own; `None` if it is still running.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let child = self.child.as_mut()?;
        let deadline = Instant::now() + timeout;
        loop {
            match child.try_wait() {
                Ok(Some(st)) => return Some(st),
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
                _ => return None,
            }
        }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            if let Ok(None) = c.try_wait() {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
    }
}

/// A server process started in a namespace whose stderr is drained by a thread (so it can
/// never block on a full pipe) and kept for diagnostics.
#[derive(Debug)]
pub struct Server {
    pub child: ChildGuard,
    stderr: Arc<Mutex<String>>,
}

impl Server {
    /// Spawns `cmd` (stdout discarded, stderr captured) and waits up to `timeout` for a stderr
    /// line containing `ready`.
    pub fn spawn(mut cmd: Command, ready: &str, timeout: Duration) -> Result<Self, String> {
        let shown = format!("{cmd:?}");
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot spawn {shown}: {e}"))?;
        let pipe = child.stderr.take().expect("stderr is piped");
        let mut guard = ChildGuard::new(child);
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel::<()>();
        let ready = ready.to_string();
        {
            let log = log.clone();
            thread::spawn(move || {
                let mut tx = Some(tx);
                for line in BufReader::new(pipe).lines() {
                    let Ok(line) = line else { break };
                    let hit = line.contains(&ready);
                    {
                        let mut l = log.lock().unwrap_or_else(|p| p.into_inner());
                        l.push_str(&line);
                        l.push('\n');
                    }
                    if hit {
                        if let Some(tx) = tx.take() {
                            let _ = tx.send(());
                        }
                    }
                }
            });
        }
        match rx.recv_timeout(timeout) {
            Ok(()) => Ok(Self { child: guard, stderr: log }),
            Err(_) => {
                let exited = guard.wait_timeout(Duration::from_millis(100));
                let text = log.lock().unwrap_or_else(|p| p.into_inner()).clone();
                Err(format!("{shown} did not report readiness within {timeout:?} (exit: {exited:?}); stderr:\n{text}"))
            }
        }
    }

    /// Everything the server has written to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Result of [`run_with_timeout`].
#[derive(Debug)]
pub struct Finished {
    /// `None` if the command was killed at the timeout.
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

/// What a failed client run's message should show: the command, how it ended, both ends'
/// error output and the shaper's counters.
pub fn failure_context(shown: &str, run: &Finished, server: &Server, link: &Link) -> String {
    format!(
        "client: {shown}\nclient exit: {:?} after {:?}\nclient stderr:\n{}\nserver stderr:\n{}\nqdiscs:\n{}",
        run.status,
        run.elapsed,
        run.stderr,
        server.stderr(),
        link.qdisc_stats()
    )
}

/// Runs `cmd` with both output streams captured, killing it after `timeout`.
pub fn run_with_timeout(mut cmd: Command, timeout: Duration) -> Result<Finished, String> {
    let shown = format!("{cmd:?}");
    let started = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot spawn {shown}: {e}"))?;
    let mut out_pipe = child.stdout.take().expect("stdout is piped");
    let mut err_pipe = child.stderr.take().expect("stderr is piped");
    let out_t = thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out_pipe.read_to_end(&mut s);
        s
    });
    let err_t = thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err_pipe.read_to_end(&mut s);
        s
    });
    let mut guard = ChildGuard::new(child);
    let status = guard.wait_timeout(timeout);
    drop(guard); // kills it if still running, which closes the pipes
    let stdout = String::from_utf8_lossy(&out_t.join().unwrap_or_default()).into_owned();
    let stderr = String::from_utf8_lossy(&err_t.join().unwrap_or_default()).into_owned();
    Ok(Finished { status, stdout, stderr, elapsed: started.elapsed() })
}

#[cfg(test)]
mod tests {
    use super::QdiscCounters;

    #[test]
    fn a_qdiscs_counters_are_read_from_tc() {
        let text = "qdisc tbf 8001: root refcnt 2 rate 200Mbit burst 256Kb lat 50ms \n Sent 118657740 bytes 81950 pkt \
                    (dropped 3, overlimits 4521 requeues 0) \n backlog 0b 0p requeues 0\n";
        let c = QdiscCounters::parse(text).unwrap();
        assert_eq!(c, QdiscCounters { bytes: 118_657_740, packets: 81_950, dropped: 3, overlimits: 4521 });
        let before = QdiscCounters { bytes: 40, packets: 1, dropped: 0, overlimits: 21 };
        assert_eq!(c.since(&before).overlimits, 4500);
        assert_eq!(QdiscCounters::parse("qdisc noqueue 0: root refcnt 2\n"), None);
    }
}
