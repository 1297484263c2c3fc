//! Snapshots of every counter that can say where a packet was lost on one end (issue 23):
//! the interface's own (netlink `IFLA_STATS64`, or `/proc/net/dev`), its driver's (ethtool
//! `GSTATS`), its queueing disciplines' (`RTM_GETQDISC`), and the namespace's stack
//! (`/proc/net/snmp`, `netstat`, `snmp6`); and the delta of two snapshots as the result's
//! [`Evidence`].
//!
//! Every source is optional: one that cannot be read is absent from the snapshot, with the
//! reason, and the others are still read. Everything is read in the calling thread's network
//! namespace. The socket's own drops (SO_MEMINFO) are not here: the test driver holds the
//! sockets and fills [`Evidence::socket_drops`].
//!
//! A [`Sampler`] keeps its sockets and the driver's statistic names between snapshots, for
//! the cost of a snapshot per interval; [`Snapshot::take`] opens and closes them each time.
//!
//! ```no_run
//! use netchar_sys::counters::{interface_to, Snapshot};
//! let iface = interface_to("192.0.2.7".parse().unwrap()).unwrap();
//! let before = Snapshot::take(&iface).unwrap();
//! // ... the test ...
//! let evidence = before.delta(&Snapshot::take(&iface).unwrap());
//! println!("qdisc drops: {:?}", evidence.qdiscs);
//! ```

use crate::ethtool::Ethtool;
use crate::netlink::{NetlinkError, Rtnetlink};
use crate::proc_net;
use netchar_model::{Evidence, LinkCounters, QdiscCounters, StackCounters};
use std::collections::BTreeMap;
use std::io;
use std::net::IpAddr;
use std::time::{Duration, Instant};
use thiserror::Error;

/// Why counters cannot be taken at all (a source that fails only makes the snapshot lack it).
#[derive(Debug, Error)]
pub enum CountersError {
    /// No interface of that name in this namespace.
    #[error("no interface {name:?} here: {source}")]
    NoSuchInterface {
        /// The name asked for.
        name: String,
        /// SIOCGIFINDEX's error.
        #[source]
        source: io::Error,
    },
    /// The route to the peer could not be looked up.
    #[error("cannot find the interface the route to {peer} leaves by: {source}")]
    Route {
        /// The peer.
        peer: IpAddr,
        /// Why.
        #[source]
        source: NetlinkError,
    },
    /// The ioctl socket could not be made.
    #[error("cannot open a socket for interface ioctls: {0}")]
    Socket(#[source] io::Error),
}

/// The interface the route to `peer` leaves by, in the calling thread's namespace (`lo` for
/// an address of this host).
pub fn interface_to(peer: IpAddr) -> Result<String, CountersError> {
    let route = |source| CountersError::Route { peer, source };
    let index = Rtnetlink::open().and_then(|mut nl| nl.route_to(peer)).map_err(route)?;
    let eth = Ethtool::open().map_err(CountersError::Socket)?;
    eth.interface_name(index).map_err(|e| route(NetlinkError::Answer { request: "SIOCGIFNAME", reason: e.to_string() }))
}

/// Every counter of one interface and its namespace at one moment.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The interface.
    pub interface: String,
    /// Its index (a different index later means the interface was made anew).
    pub ifindex: u32,
    /// When the snapshot was begun.
    pub taken_at: Instant,
    /// How long it took.
    pub cost: Duration,
    /// The interface's counters.
    pub link: Option<LinkCounters>,
    /// The driver's statistics, name and value, in the driver's order.
    pub driver: Option<Vec<(String, u64)>>,
    /// The interface's qdiscs, absolute counters.
    pub qdiscs: Option<Vec<QdiscCounters>>,
    /// The namespace's SNMP counters by nstat's name.
    pub snmp: Option<BTreeMap<String, u64>>,
    /// Each source that could not be read (`link`, `driver`, `qdiscs`, `snmp`, ...) with why.
    pub unavailable: BTreeMap<String, String>,
}

/// Takes snapshots of one interface, keeping its sockets and the driver's statistic names.
/// Use it from the thread (so the namespace) that opened it.
#[derive(Debug)]
pub struct Sampler {
    interface: String,
    ifindex: u32,
    netlink: Result<Rtnetlink, String>,
    ethtool: Ethtool,
    stat_names: Option<Vec<String>>,
}

impl Sampler {
    /// A sampler of interface `iface` of the calling thread's namespace.
    pub fn open(iface: &str) -> Result<Self, CountersError> {
        let ethtool = Ethtool::open().map_err(CountersError::Socket)?;
        let ifindex = ethtool
            .interface_index(iface)
            .map_err(|source| CountersError::NoSuchInterface { name: iface.to_string(), source })?;
        let netlink = Rtnetlink::open().map_err(|e| e.to_string());
        Ok(Self { interface: iface.to_string(), ifindex, netlink, ethtool, stat_names: None })
    }

    /// A snapshot of every source; those that fail are absent, with why.
    pub fn take(&mut self) -> Snapshot {
        let taken_at = Instant::now();
        let mut unavailable = BTreeMap::new();
        // The interface may have been made anew under its name (one ioctl): follow it, and
        // let the delta see the new index.
        match self.ethtool.interface_index(&self.interface) {
            Ok(index) => self.ifindex = index,
            Err(e) => _ = unavailable.insert("interface".into(), e.to_string()),
        }
        let (link, link_fallback) = self.link();
        let link = noted(&mut unavailable, "link", link);
        if let Some(why) = link_fallback {
            unavailable.insert("link_stats64".into(), why);
        }
        let driver = self.driver();
        let driver = noted(&mut unavailable, "driver", driver);
        let qdiscs = self.netlink_op(|nl, i| nl.qdiscs(i));
        let qdiscs = noted(&mut unavailable, "qdiscs", qdiscs);
        let (snmp, snmp6) = stack();
        let snmp = noted(&mut unavailable, "snmp", snmp);
        if let (Some(why), Some(_)) = (snmp6, &snmp) {
            unavailable.insert("snmp6".into(), why);
        }
        Snapshot {
            interface: self.interface.clone(),
            ifindex: self.ifindex,
            taken_at,
            cost: taken_at.elapsed(),
            link,
            driver,
            qdiscs,
            snmp,
            unavailable,
        }
    }

    fn netlink_op<T>(&mut self, op: impl FnOnce(&mut Rtnetlink, u32) -> Result<T, NetlinkError>) -> Result<T, String> {
        let nl = self.netlink.as_mut().map_err(|e| e.clone())?;
        op(nl, self.ifindex).map_err(|e| e.to_string())
    }

    /// The interface's counters, and why netlink was not used where /proc/net/dev was.
    fn link(&mut self) -> (Result<LinkCounters, String>, Option<String>) {
        match self.netlink_op(|nl, i| nl.link_counters(i)) {
            Ok(c) => (Ok(c), None),
            Err(why) => {
                let dev = proc_net::read("dev")
                    .map_err(|e| format!("{}: {e}", proc_net::path("dev").display()))
                    .and_then(|text| {
                        proc_net::dev_counters(&text, &self.interface)
                            .ok_or_else(|| format!("no line for {} in /proc/net/dev", self.interface))
                    });
                match dev {
                    Ok(c) => (Ok(c), Some(format!("{why}; read /proc/net/dev instead"))),
                    Err(e) => (Err(format!("{why}; {e}")), None),
                }
            }
        }
    }

    /// The driver's statistics; the names are read again whenever the count changes.
    fn driver(&mut self) -> Result<Vec<(String, u64)>, String> {
        let iface = &self.interface;
        for _ in 0..2 {
            let names = match self.stat_names.take() {
                Some(n) => n,
                None => self.ethtool.stat_names(iface).map_err(|e| e.to_string())?,
            };
            match self.ethtool.stats(iface, names.len()) {
                Ok(values) if values.len() == names.len() => {
                    let pairs = names.iter().cloned().zip(values).collect();
                    // No names are not kept: a count that grows from 0 is seen only by asking.
                    self.stat_names = (!names.is_empty()).then_some(names);
                    return Ok(pairs);
                }
                // The count changed (more values: EFAULT at the guard page; fewer): names again.
                Ok(_) => continue,
                Err(e) if e.raw_os_error() == Some(libc::EFAULT) => continue,
                Err(e) => return Err(e.to_string()),
            }
        }
        Err("the driver's count of statistics kept changing".into())
    }
}

/// The value of a source that was read; for one that was not, None and why in `unavailable`.
fn noted<T>(unavailable: &mut BTreeMap<String, String>, source: &str, result: Result<T, String>) -> Option<T> {
    result.map_err(|why| unavailable.insert(source.to_string(), why)).ok()
}

/// The namespace's SNMP counters, and why snmp6 was missing (no IPv6) where it was.
fn stack() -> (Result<BTreeMap<String, u64>, String>, Option<String>) {
    let read = |file: &str| proc_net::read(file).map_err(|e| format!("{}: {e}", proc_net::path(file).display()));
    let (snmp, netstat) = match (read("snmp"), read("netstat")) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => return (Err(e), None),
    };
    let (snmp6, why) = match read("snmp6") {
        Ok(t) => (t, None),
        Err(e) => (String::new(), Some(e)),
    };
    (Ok(proc_net::snmp_counters(&[&snmp, &netstat, &snmp6])), why)
}

impl Snapshot {
    /// A snapshot of interface `iface` of the calling thread's namespace.
    pub fn take(iface: &str) -> Result<Self, CountersError> {
        Ok(Sampler::open(iface)?.take())
    }

    /// What moved from this snapshot to `later` (of the same interface), every counter
    /// saturating at 0: one that went backwards is 0 and named in `reset`.
    pub fn delta(&self, later: &Snapshot) -> Evidence {
        let mut reset = Vec::new();
        let recreated = self.ifindex != later.ifindex;
        let link = both(&self.link, &later.link).map(|(a, b)| {
            if recreated {
                reset.push("link".to_string());
                return *b;
            }
            let mut d = *b;
            for ((name, before), (_, after)) in a.fields().into_iter().zip(d.fields_mut()) {
                *after = since(before, *after, || reset.push(format!("link.{name}")));
            }
            d
        });
        let driver = both(&self.driver, &later.driver).map(|(a, b)| {
            let before: BTreeMap<&str, u64> = a.iter().map(|(n, v)| (n.as_str(), *v)).collect();
            b.iter()
                .filter_map(|(name, after)| {
                    let d = match before.get(name.as_str()) {
                        Some(&v) => since(v, *after, || reset.push(format!("driver.{name}"))),
                        None => *after,
                    };
                    (d > 0).then(|| (name.clone(), d))
                })
                .collect()
        });
        let qdiscs = both(&self.qdiscs, &later.qdiscs).map(|(a, b)| qdisc_deltas(a, b, &mut reset));
        let snmp = both(&self.snmp, &later.snmp).map(|(a, b)| {
            b.iter()
                .filter(|(name, _)| !proc_net::SNMP_GAUGES.contains(&name.as_str()))
                .filter_map(|(name, &after)| {
                    let d = match a.get(name) {
                        Some(&v) => since(v, after, || reset.push(format!("snmp.{name}"))),
                        None => after,
                    };
                    (d > 0).then(|| (name.clone(), d))
                })
                .collect::<BTreeMap<String, u64>>()
        });
        let mut unavailable = self.unavailable.clone();
        unavailable.extend(later.unavailable.clone());
        Evidence {
            interface: later.interface.clone(),
            seconds: later.taken_at.saturating_duration_since(self.taken_at).as_secs_f64(),
            snapshot_us: [self.cost.as_micros() as u64, later.cost.as_micros() as u64],
            link,
            driver,
            qdiscs,
            stack: snmp.as_ref().map(stack_counters),
            snmp,
            socket_drops: None,
            reset,
            unavailable,
        }
    }
}

fn both<'a, T>(a: &'a Option<T>, b: &'a Option<T>) -> Option<(&'a T, &'a T)> {
    a.as_ref().zip(b.as_ref())
}

/// `after - before`, or 0 (and `went_back` called) where the counter went backwards.
fn since(before: u64, after: u64, went_back: impl FnOnce()) -> u64 {
    if after < before {
        went_back();
    }
    after.saturating_sub(before)
}

/// Each qdisc of `later` with what it counted since `earlier`; one that was not there before
/// (or was replaced: another kind at the same place) counts from its creation.
fn qdisc_deltas(earlier: &[QdiscCounters], later: &[QdiscCounters], reset: &mut Vec<String>) -> Vec<QdiscCounters> {
    later
        .iter()
        .map(|b| {
            let same = |a: &&QdiscCounters| a.handle == b.handle && a.parent == b.parent && a.kind == b.kind;
            let Some(a) = earlier.iter().find(same) else {
                reset.push(format!("qdisc {}", b.handle));
                return b.clone();
            };
            let mut d = b.clone();
            for (name, before, after) in [
                ("packets", a.packets, &mut d.packets),
                ("bytes", a.bytes, &mut d.bytes),
                ("drops", a.drops, &mut d.drops),
                ("overlimits", a.overlimits, &mut d.overlimits),
                ("requeues", a.requeues, &mut d.requeues),
            ] {
                *after = since(before, *after, || reset.push(format!("qdisc {}.{name}", b.handle)));
            }
            d
        })
        .collect()
}

/// The named drop counters out of an SNMP delta, IPv4 and IPv6 summed.
fn stack_counters(snmp: &BTreeMap<String, u64>) -> StackCounters {
    let sum = |names: &[&str]| names.iter().map(|n| snmp.get(*n).copied().unwrap_or(0)).sum();
    StackCounters {
        udp_in_errors: sum(&["UdpInErrors", "Udp6InErrors"]),
        udp_rcvbuf_errors: sum(&["UdpRcvbufErrors", "Udp6RcvbufErrors"]),
        udp_sndbuf_errors: sum(&["UdpSndbufErrors", "Udp6SndbufErrors"]),
        udp_no_ports: sum(&["UdpNoPorts", "Udp6NoPorts"]),
        udp_mem_errors: sum(&["UdpMemErrors", "Udp6MemErrors"]),
        ip_in_discards: sum(&["IpInDiscards", "Ip6InDiscards"]),
        ip_out_discards: sum(&["IpOutDiscards", "Ip6OutDiscards"]),
        tcp_backlog_drops: sum(&["TcpExtTCPBacklogDrop"]),
        tcp_listen_drops: sum(&["TcpExtListenDrops"]),
        tcp_listen_overflows: sum(&["TcpExtListenOverflows"]),
        tcp_retransmits: sum(&["TcpRetransSegs"]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(link: LinkCounters, qdiscs: Vec<QdiscCounters>, snmp: &[(&str, u64)]) -> Snapshot {
        Snapshot {
            interface: "eth0".into(),
            ifindex: 2,
            taken_at: Instant::now(),
            cost: Duration::from_micros(40),
            link: Some(link),
            driver: Some(vec![("rx_pause".into(), 3), ("peer_ifindex".into(), 9)]),
            qdiscs: Some(qdiscs),
            snmp: Some(snmp.iter().map(|(n, v)| (n.to_string(), *v)).collect()),
            unavailable: BTreeMap::new(),
        }
    }

    fn tbf(drops: u64) -> QdiscCounters {
        QdiscCounters { kind: "tbf".into(), handle: "1:".into(), parent: "root".into(), drops, ..Default::default() }
    }

    #[test]
    fn deltas_saturate_and_name_what_went_backwards() {
        let a = snapshot(
            LinkCounters { rx_packets: 10, tx_dropped: 5, ..Default::default() },
            vec![tbf(7)],
            &[("UdpRcvbufErrors", 4), ("Udp6RcvbufErrors", 1), ("TcpCurrEstab", 9), ("IpOutDiscards", 8)],
        );
        let mut b = snapshot(
            LinkCounters { rx_packets: 25, tx_dropped: 2, ..Default::default() },
            vec![tbf(10), QdiscCounters { kind: "fq".into(), handle: "2:".into(), packets: 4, ..Default::default() }],
            &[("UdpRcvbufErrors", 6), ("Udp6RcvbufErrors", 2), ("TcpCurrEstab", 1), ("IpOutDiscards", 8)],
        );
        b.driver = Some(vec![("rx_pause".into(), 5), ("peer_ifindex".into(), 9), ("rx_queue_1_drops".into(), 2)]);
        b.unavailable.insert("snmp6".into(), "no IPv6".into());
        let e = a.delta(&b);
        let link = e.link.unwrap();
        assert_eq!((link.rx_packets, link.tx_dropped), (15, 0));
        let driver = e.driver.unwrap();
        assert_eq!(driver.into_iter().collect::<Vec<_>>(), [("rx_pause".into(), 2), ("rx_queue_1_drops".into(), 2)]);
        let qdiscs = e.qdiscs.unwrap();
        assert_eq!((qdiscs[0].drops, qdiscs[1].packets), (3, 4));
        let snmp = e.snmp.unwrap();
        assert_eq!(snmp.len(), 2, "gauges and counters that did not move are left out: {snmp:?}");
        assert_eq!(e.stack.unwrap().udp_rcvbuf_errors, 3);
        assert_eq!(e.reset, ["link.tx_dropped", "qdisc 2:"]);
        assert_eq!(e.unavailable["snmp6"], "no IPv6");
        assert_eq!(e.snapshot_us, [40, 40]);
    }

    #[test]
    fn an_interface_made_anew_counts_from_its_creation() {
        let a = snapshot(LinkCounters { rx_packets: 100, ..Default::default() }, vec![], &[]);
        let mut b = snapshot(LinkCounters { rx_packets: 3, ..Default::default() }, vec![], &[]);
        b.ifindex = 3;
        let e = a.delta(&b);
        assert_eq!(e.link.unwrap().rx_packets, 3);
        assert_eq!(e.reset, ["link"]);
    }

    #[test]
    fn loopback_has_link_qdisc_and_stack_counters_but_no_driver_statistics() {
        let mut sampler = Sampler::open("lo").unwrap();
        let a = sampler.take();
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        socket.send_to(&[0; 10], socket.local_addr().unwrap()).unwrap();
        let b = sampler.take();
        let e = a.delta(&b);
        assert!(e.link.unwrap().tx_packets >= 1);
        assert!(e.driver.is_none());
        assert!(e.unavailable["driver"].contains("not supported"), "{:?}", e.unavailable);
        assert!(e.qdiscs.is_some() && e.stack.is_some());
        assert!(e.snmp.unwrap().get("UdpOutDatagrams").is_some_and(|&n| n >= 1));
        assert!(matches!(Snapshot::take("nc-no-such0"), Err(CountersError::NoSuchInterface { .. })));
        assert_eq!(interface_to("127.0.0.1".parse().unwrap()).unwrap(), "lo");
    }
}
