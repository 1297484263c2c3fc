//! Where the packets went, and what the host was: the counters of one end's interface, its
//! driver, its queueing disciplines and its network stack as deltas over a span of a test
//! ([`Evidence`]), and the settings that shape them ([`HostIdentity`]) (issue 23).
//!
//! Pure data: `netchar_sys::counters` takes the snapshots and makes the deltas,
//! `netchar_sys::identity` reads the settings. A source that could not be read is absent, and
//! `unavailable` says why, so "no drops" and "not known" never look alike. Names of counters
//! that come from the kernel (driver statistics, SNMP tables, offload features) are the
//! kernel's own, as `ethtool -S`, `nstat` and `ethtool -k` show them.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Declares a struct of `u64` counters with a doc line each, and [`fields`](LinkCounters::fields)
/// and `fields_mut` to walk them by their JSON names (for deltas and reporters).
macro_rules! counters {
    ($(#[$meta:meta])* pub struct $name:ident { $($(#[doc = $doc:expr])* $field:ident,)* }) => {
        $(#[$meta])*
        pub struct $name {
            $($(#[doc = $doc])* pub $field: u64,)*
        }

        impl $name {
            /// Every counter with its name (the field's, as in JSON), in declaration order.
            pub fn fields(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($field), self.$field)),*]
            }

            /// Every counter by name, to be written.
            pub fn fields_mut(&mut self) -> Vec<(&'static str, &mut u64)> {
                vec![$((stringify!($field), &mut self.$field)),*]
            }
        }
    };
}

/// One end's counters over one span (a whole test, or one interval): what each layer between
/// the wire and the socket counted, as the later snapshot minus the earlier one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// The interface the counters are of: the one the route to the peer leaves by.
    pub interface: String,
    /// Seconds between the two snapshots.
    pub seconds: f64,
    /// Microseconds the two snapshots took to read, the earlier and the later.
    pub snapshot_us: [u64; 2],
    /// The interface's own counters (netlink `IFLA_STATS64`, or `/proc/net/dev`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<LinkCounters>,
    /// The driver's statistics (`ethtool -S`, `ETHTOOL_GSTATS`), name → delta; those that did
    /// not move are left out. Real NICs count pause frames, ring overruns and MAC errors here;
    /// a veth has only its peer's index and per-queue XDP counters (moving only under an XDP
    /// program); loopback has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<BTreeMap<String, u64>>,
    /// The interface's queueing disciplines (`tc -s qdisc`), roots first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qdiscs: Option<Vec<QdiscCounters>>,
    /// The stack's drop counters that explain losses, picked out of `snmp`, IPv4 and IPv6 summed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<StackCounters>,
    /// Every counter of the namespace's `/proc/net/snmp`, `netstat` and `snmp6` that moved, by
    /// nstat's name (table and counter joined: `UdpRcvbufErrors`, `TcpExtListenDrops`,
    /// `Ip6InDiscards`). Gauges (`TcpCurrEstab`, `IpForwarding`, ...) are left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snmp: Option<BTreeMap<String, u64>>,
    /// Datagrams the test's own receiving sockets dropped (sk_drops, what SO_RXQ_OVFL
    /// reports), summed; set by the test driver, which holds the sockets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket_drops: Option<u64>,
    /// Counters that restarted between the snapshots, as `source.name` (`link.rx_packets`,
    /// `qdisc 1:.drops`, `snmp.UdpInDatagrams`): one that went backwards (reset, or a 32-bit
    /// counter that wrapped) has a delta of 0; a qdisc or interface that was replaced counts
    /// from its creation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reset: Vec<String>,
    /// Sources that could not be read, with why: `link`, `driver`, `qdiscs`, `snmp`, `snmp6`
    /// (`driver`: "Operation not supported"); `link_stats64` says why `link` came from
    /// /proc/net/dev instead of netlink.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unavailable: BTreeMap<String, String>,
}

/// Both ends' evidence over a test (`evidence` in the result): the client's own, and the
/// server's as it sent it. An end's evidence is absent when it could not be taken or was not
/// sent, and `unavailable` says why (`remote`: a peer protocol's server sends none).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EvidenceReport {
    /// The client's end: the interface the route to the server leaves by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<Evidence>,
    /// The server's end: the interface the route to the client leaves by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<Evidence>,
    /// `local` or `remote` → why that end's evidence is absent.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unavailable: BTreeMap<String, String>,
    /// `--nft-counter`: what the counted rules of the chains the user named (on the client's
    /// host) counted over the test.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nft: Vec<NftCounter>,
}

/// What one counted nftables rule counted over a test (`--nft-counter FAMILY TABLE CHAIN`).
/// nft counts what its hook sees: a GSO super-packet is one packet whose bytes span all its
/// segments.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NftCounter {
    /// `FAMILY TABLE CHAIN`.
    pub chain: String,
    /// The rule's handle in the chain.
    pub handle: u64,
    /// The rule as nft prints it, without its counter.
    pub rule: String,
    /// Packets it counted over the test.
    pub packets: u64,
    /// Bytes it counted over the test.
    pub bytes: u64,
}

counters! {
    /// An interface's counters (`struct rtnl_link_stats64`; the names are the kernel's).
    ///
    /// Read from `/proc/net/dev` (when netlink cannot be used) the composite columns land in
    /// one field: `rx_dropped` includes `rx_missed_errors`, `rx_frame_errors` includes the
    /// length, over and CRC errors, `tx_carrier_errors` includes the aborted, window and
    /// heartbeat errors; the fields /proc/net/dev lacks stay 0.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct LinkCounters {
        /// Packets received.
        rx_packets,
        /// Packets sent.
        tx_packets,
        /// Bytes received.
        rx_bytes,
        /// Bytes sent.
        tx_bytes,
        /// Bad packets received (the sum of the detailed rx errors, as the driver counts it).
        rx_errors,
        /// Packets that could not be sent.
        tx_errors,
        /// Packets received but dropped before the stack (no buffer, a veth peer's full
        /// backlog, ...).
        rx_dropped,
        /// Packets dropped on the way out (a veth whose peer is down, a full ring, ...).
        tx_dropped,
        /// Multicast packets received.
        multicast,
        /// Collisions (half duplex).
        collisions,
        /// Frames of a bad length received.
        rx_length_errors,
        /// Receive ring overruns (the NIC had no descriptor for a frame).
        rx_over_errors,
        /// Frames with a bad CRC received.
        rx_crc_errors,
        /// Misaligned frames received.
        rx_frame_errors,
        /// Receive FIFO overruns.
        rx_fifo_errors,
        /// Frames the NIC missed for want of host buffers.
        rx_missed_errors,
        /// Transmissions aborted.
        tx_aborted_errors,
        /// Transmissions that lost the carrier.
        tx_carrier_errors,
        /// Transmit FIFO errors (underruns).
        tx_fifo_errors,
        /// Heartbeat (SQE) errors.
        tx_heartbeat_errors,
        /// Late collisions.
        tx_window_errors,
        /// Packets received for a protocol nothing handles.
        rx_nohandler,
        /// Packets received for another host, dropped (Linux 5.19).
        rx_otherhost_dropped,
    }
}

/// One queueing discipline of the interface, its counters as deltas (`tc -s qdisc show`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QdiscCounters {
    /// Its kind: `tbf`, `fq_codel`, `mq`, `noqueue`, ...
    pub kind: String,
    /// Its handle as tc prints it (`1:`).
    pub handle: String,
    /// Its parent: `root`, `ingress`, or a class (`1:1`).
    pub parent: String,
    /// Packets it sent on.
    pub packets: u64,
    /// Bytes it sent on.
    pub bytes: u64,
    /// Packets it dropped (its queue was full, or its algorithm chose to).
    pub drops: u64,
    /// Times a packet was held back over its rate or limit (not a drop).
    pub overlimits: u64,
    /// Packets handed back to it by a busy driver.
    pub requeues: u64,
    /// Bytes queued in it at the end of the span (a level, not a delta).
    pub backlog_bytes: u64,
    /// Packets queued in it at the end of the span (a level, not a delta).
    pub backlog_packets: u64,
}

counters! {
    /// The stack's counters that say where a datagram or segment was dropped, IPv4 and IPv6
    /// summed where the kernel keeps them apart (`Udp` and `Udp6`, `Ip` and `Ip6`).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct StackCounters {
        /// UDP datagrams received that could not be delivered (`UdpInErrors`, `Udp6InErrors`):
        /// includes the receive-buffer, memory and checksum errors.
        udp_in_errors,
        /// UDP datagrams dropped because the socket's receive buffer was full
        /// (`UdpRcvbufErrors`).
        udp_rcvbuf_errors,
        /// UDP datagrams not sent for want of buffer space, a full queue or a qdisc that
        /// dropped them (`UdpSndbufErrors`: a qdisc drop reaches the sender as ENOBUFS, which
        /// UDP counts here unless IP_RECVERR is set).
        udp_sndbuf_errors,
        /// UDP datagrams to a port nothing listens on (`UdpNoPorts`).
        udp_no_ports,
        /// UDP datagrams dropped over the protocol's memory limit (`UdpMemErrors`).
        udp_mem_errors,
        /// IP packets received and discarded without an error in them (`IpInDiscards`).
        ip_in_discards,
        /// IP packets discarded on the way out (`IpOutDiscards`: a qdisc drop also counts here).
        ip_out_discards,
        /// TCP segments dropped because the socket's backlog was full (`TcpExtTCPBacklogDrop`).
        tcp_backlog_drops,
        /// Connection requests dropped at a listener (`TcpExtListenDrops`).
        tcp_listen_drops,
        /// Connection requests dropped because a listener's accept queue was full
        /// (`TcpExtListenOverflows`).
        tcp_listen_overflows,
        /// TCP segments retransmitted (`TcpRetransSegs`).
        tcp_retransmits,
    }
}

/// The settings of one end that shape what a test measures, for `netchar compare` to warn
/// when two runs differ in them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostIdentity {
    /// The kernel's command line (`/proc/cmdline`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_cmdline: Option<String>,
    /// CPU frequency governor → how many CPUs run it (`scaling_governor`); empty where the
    /// kernel has no CPU frequency scaling (most VMs), and `unavailable` says so.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cpu_governors: BTreeMap<String, u32>,
    /// The interfaces the test used.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<InterfaceIdentity>,
    /// Sources that could not be read, with why (`cpu_governors`: "no cpufreq ...").
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unavailable: BTreeMap<String, String>,
}

/// One interface's driver and settings (`ethtool -i`, `-k`, `-c`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InterfaceIdentity {
    /// Interface name.
    pub name: String,
    /// Driver (`ETHTOOL_GDRVINFO`): `ixgbe`, `virtio_net`, `veth`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// The driver's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_version: Option<String>,
    /// The NIC's firmware version; absent where the driver gives none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firmware_version: Option<String>,
    /// Where the NIC sits (`0000:03:00.0`); absent for virtual interfaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus_info: Option<String>,
    /// Offload features by the kernel's name (`rx-gro`, `tx-tcp-segmentation`,
    /// `tx-checksum-ip-generic`, ...) → on or off (`ETHTOOL_GFEATURES`); features the device
    /// can neither do nor change are left out.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub offloads: BTreeMap<String, bool>,
    /// Interrupt coalescing by `ethtool -C`'s names (`rx-usecs`, `rx-frames`, `adaptive-rx`,
    /// ...) → value (`ETHTOOL_GCOALESCE`); empty where the driver has none (veth, loopback).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub coalesce: BTreeMap<String, u32>,
    /// Sources that could not be read, with why (`coalesce`: "Operation not supported").
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unavailable: BTreeMap<String, String>,
}

/// One setting in which two [`HostIdentity`]s differ.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdentityDifference {
    /// What differs: `kernel_cmdline`, `cpu_governors`, `eth0 driver`, `eth0 offload rx-gro`, ...
    pub what: String,
    /// Its value in the first identity; absent where that one does not have it.
    pub left: Option<String>,
    /// Its value in the second identity; absent where that one does not have it.
    pub right: Option<String>,
}

impl HostIdentity {
    /// Every setting in which `self` and `other` differ; interfaces are matched by name.
    /// A setting neither side could read is not a difference.
    pub fn differences(&self, other: &Self) -> Vec<IdentityDifference> {
        let mut out = Vec::new();
        differ(&mut out, "kernel_cmdline".into(), self.kernel_cmdline.clone(), other.kernel_cmdline.clone());
        let governors = |g: &BTreeMap<String, u32>| {
            (!g.is_empty()).then(|| g.iter().map(|(k, n)| format!("{k} x{n}")).collect::<Vec<_>>().join(", "))
        };
        differ(&mut out, "cpu_governors".into(), governors(&self.cpu_governors), governors(&other.cpu_governors));
        let mut names: Vec<&str> = self.interfaces.iter().chain(&other.interfaces).map(|i| i.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        for name in names {
            let find = |id: &Self| id.interfaces.iter().find(|i| i.name == name).cloned().unwrap_or_default();
            let (a, b) = (find(self), find(other));
            for (what, x, y) in [
                ("driver", &a.driver, &b.driver),
                ("driver_version", &a.driver_version, &b.driver_version),
                ("firmware_version", &a.firmware_version, &b.firmware_version),
                ("bus_info", &a.bus_info, &b.bus_info),
            ] {
                differ(&mut out, format!("{name} {what}"), x.clone(), y.clone());
            }
            for (key, x, y) in keyed(&a.offloads, &b.offloads) {
                differ(&mut out, format!("{name} offload {key}"), x.map(on_off), y.map(on_off));
            }
            for (key, x, y) in keyed(&a.coalesce, &b.coalesce) {
                differ(&mut out, format!("{name} coalesce {key}"), x.map(|v| v.to_string()), y.map(|v| v.to_string()));
            }
        }
        out
    }
}

fn on_off(on: bool) -> String {
    if on { "on" } else { "off" }.to_string()
}

/// Every key of either map with its value on each side.
fn keyed<'a, V: Copy>(a: &'a BTreeMap<String, V>, b: &'a BTreeMap<String, V>) -> Vec<(&'a str, Option<V>, Option<V>)> {
    let mut keys: Vec<&str> = a.keys().chain(b.keys()).map(String::as_str).collect();
    keys.sort_unstable();
    keys.dedup();
    keys.into_iter().map(|k| (k, a.get(k).copied(), b.get(k).copied())).collect()
}

fn differ(out: &mut Vec<IdentityDifference>, what: String, left: Option<String>, right: Option<String>) {
    if left != right && (left.is_some() || right.is_some()) {
        out.push(IdentityDifference { what, left, right });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_counters_walk_every_field_by_its_json_name() {
        let mut c = LinkCounters { rx_packets: 3, rx_otherhost_dropped: 9, ..Default::default() };
        let fields = c.fields();
        assert_eq!(fields.len(), 23);
        assert_eq!(fields[0], ("rx_packets", 3));
        assert_eq!(fields[22], ("rx_otherhost_dropped", 9));
        for (_, v) in c.fields_mut() {
            *v += 1;
        }
        assert_eq!((c.rx_packets, c.tx_packets), (4, 1));
        let json = serde_json::to_value(c).unwrap();
        for (name, v) in c.fields() {
            assert_eq!(json[name], v, "{name}");
        }
    }

    #[test]
    fn evidence_leaves_out_what_was_not_read_and_says_why() {
        let mut e = Evidence { interface: "lo".into(), seconds: 2.0, ..Default::default() };
        e.unavailable.insert("driver".into(), "Operation not supported".into());
        e.stack = Some(StackCounters { udp_rcvbuf_errors: 5, ..Default::default() });
        let json = serde_json::to_value(&e).unwrap();
        assert!(json.get("driver").is_none() && json.get("link").is_none() && json.get("reset").is_none());
        assert_eq!(json["stack"]["udp_rcvbuf_errors"], 5);
        assert_eq!(json["unavailable"]["driver"], "Operation not supported");
        let back: Evidence = serde_json::from_value(json).unwrap();
        assert_eq!(back, e);
    }

    #[test]
    fn identities_differ_in_named_settings_only() {
        let nic = |gro: bool, usecs: u32| InterfaceIdentity {
            name: "eth0".into(),
            driver: Some("ixgbe".into()),
            offloads: [("rx-gro".to_string(), gro), ("tx-tcp-segmentation".to_string(), true)].into(),
            coalesce: [("rx-usecs".to_string(), usecs)].into(),
            ..Default::default()
        };
        let a = HostIdentity {
            kernel_cmdline: Some("quiet".into()),
            cpu_governors: [("performance".to_string(), 8)].into(),
            interfaces: vec![nic(true, 50)],
            ..Default::default()
        };
        assert!(a.differences(&a).is_empty());
        let mut b = a.clone();
        b.interfaces = vec![nic(false, 50)];
        b.cpu_governors = [("powersave".to_string(), 8)].into();
        let d = a.differences(&b);
        assert_eq!(
            d,
            vec![
                IdentityDifference {
                    what: "cpu_governors".into(),
                    left: Some("performance x8".into()),
                    right: Some("powersave x8".into())
                },
                IdentityDifference {
                    what: "eth0 offload rx-gro".into(),
                    left: Some("on".into()),
                    right: Some("off".into())
                },
            ]
        );
        // Neither side read it: not a difference; one side lacks the interface: every
        // setting it has differs.
        let mut c = a.clone();
        c.interfaces.clear();
        assert_eq!(a.differences(&c).len(), 4);
    }
}
