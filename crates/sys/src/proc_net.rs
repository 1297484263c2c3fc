//! The network namespace's counters as `/proc/net` prints them: the SNMP tables
//! (`snmp`, `netstat`, `snmp6`) as name → value maps under nstat's names, and an interface's
//! line of `/proc/net/dev` (the fallback where netlink cannot be used).
//!
//! Paths go through `/proc/thread-self/net` where it exists (Linux 3.17): `/proc/net` is the
//! namespace of the process's main thread, and a thread that entered another namespace reads
//! its own only through `thread-self`. The parsers are pure and take the file's text.

use netchar_model::LinkCounters;
use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;

/// The calling thread's `/proc/.../net/FILE`.
pub fn path(file: &str) -> PathBuf {
    let own = PathBuf::from("/proc/thread-self/net");
    let dir = if own.is_dir() { own } else { PathBuf::from("/proc/net") };
    dir.join(file)
}

/// Reads `/proc/.../net/FILE` of the calling thread's namespace.
pub fn read(file: &str) -> io::Result<String> {
    std::fs::read_to_string(path(file))
}

/// The connection-tracking table's fill, (entries, capacity), where the kernel tracks
/// connections (nf_conntrack loaded: any NAT rule loads it). None where it does not. A full
/// table drops the SYNs of new connections, which a test then sees as a peer that does not
/// answer.
pub fn conntrack_fill() -> Option<(u64, u64)> {
    let read = |name: &str| {
        std::fs::read_to_string(format!("/proc/sys/net/netfilter/{name}")).ok()?.trim().parse::<u64>().ok()
    };
    Some((read("nf_conntrack_count")?, read("nf_conntrack_max")?))
}

/// Said beside a connection that timed out when the connection-tracking table is full (at
/// least 99% of its capacity): why the SYN went unanswered, and what to do.
pub fn conntrack_full_hint() -> Option<String> {
    let (count, max) = conntrack_fill()?;
    full_table_hint(count, max)
}

/// [`conntrack_full_hint`] for a table of `count` entries of `max`.
fn full_table_hint(count: u64, max: u64) -> Option<String> {
    (max > 0 && count.saturating_mul(100) >= max.saturating_mul(99)).then(|| {
        format!(
            "; the connection-tracking table is full ({count} of {max} entries: the kernel drops new \
             connections' SYNs), so wait for closed connections to leave it (120 s) or raise \
             net.netfilter.nf_conntrack_max"
        )
    })
}

/// Every counter of the `snmp`, `netstat` and `snmp6` texts given, by nstat's name: the
/// table's name joined to the counter's (`Udp` + `RcvbufErrors` = `UdpRcvbufErrors`;
/// snmp6 names already carry theirs). Values that are not counters (Tcp `MaxConn` is -1) are
/// left out.
pub fn snmp_counters(texts: &[&str]) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for text in texts {
        let lines: Vec<&str> = text.lines().collect();
        let mut i = 0;
        while i < lines.len() {
            // snmp and netstat: "Table: name name ..." then "Table: value value ...".
            if let (Some((table, names)), Some((again, values))) =
                (lines[i].split_once(':'), lines.get(i + 1).and_then(|l| l.split_once(':')))
            {
                if table == again && !table.contains(char::is_whitespace) {
                    for (name, value) in names.split_whitespace().zip(values.split_whitespace()) {
                        if let Ok(v) = value.parse::<u64>() {
                            out.insert(format!("{table}{name}"), v);
                        }
                    }
                    i += 2;
                    continue;
                }
            }
            // snmp6: "Name value".
            let mut words = lines[i].split_whitespace();
            if let (Some(name), Some(value), None) = (words.next(), words.next(), words.next()) {
                if let Ok(v) = value.parse::<u64>() {
                    out.insert(name.to_string(), v);
                }
            }
            i += 1;
        }
    }
    out
}

/// Counters of the SNMP tables that are levels or settings, not counts: their deltas mean
/// nothing.
pub const SNMP_GAUGES: &[&str] =
    &["IpForwarding", "IpDefaultTTL", "TcpRtoAlgorithm", "TcpRtoMin", "TcpRtoMax", "TcpMaxConn", "TcpCurrEstab"];

/// Interface `iface`'s counters from a `/proc/net/dev` text; None where it has no line.
///
/// The file folds some counters together (net/core/net-procfs.c): the `drop` column is
/// rx_dropped + rx_missed_errors, `frame` is the length, over, CRC and frame errors, `carrier`
/// the carrier, aborted, window and heartbeat errors. They land in `rx_dropped`,
/// `rx_frame_errors` and `tx_carrier_errors`.
pub fn dev_counters(text: &str, iface: &str) -> Option<LinkCounters> {
    let line = text.lines().find_map(|l| {
        let (name, rest) = l.split_once(':')?;
        (name.trim() == iface).then_some(rest)
    })?;
    let v: Vec<u64> = line.split_whitespace().map(|x| x.parse().unwrap_or(0)).collect();
    if v.len() < 16 {
        return None;
    }
    // Receive: bytes packets errs drop fifo frame compressed multicast;
    // transmit: bytes packets errs drop fifo colls carrier compressed.
    Some(LinkCounters {
        rx_bytes: v[0],
        rx_packets: v[1],
        rx_errors: v[2],
        rx_dropped: v[3],
        rx_fifo_errors: v[4],
        rx_frame_errors: v[5],
        multicast: v[7],
        tx_bytes: v[8],
        tx_packets: v[9],
        tx_errors: v[10],
        tx_dropped: v[11],
        tx_fifo_errors: v[12],
        collisions: v[13],
        tx_carrier_errors: v[14],
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table seen full in a crr run back to back with others: 262144 entries of 262144
    /// (a container runtime's NAT rules had loaded nf_conntrack).
    #[test]
    fn a_full_connection_tracking_table_is_named_with_its_figures() {
        let hint = full_table_hint(262_144, 262_144).expect("full");
        assert!(hint.contains("connection-tracking table is full (262144 of 262144 entries"), "{hint}");
        assert!(hint.contains("nf_conntrack_max"), "{hint}");
        assert!(full_table_hint(259_523, 262_144).is_some(), "99% is full");
        assert_eq!(full_table_hint(198_147, 262_144), None);
        assert_eq!(full_table_hint(0, 0), None);
    }

    const SNMP: &str = "\
Ip: Forwarding DefaultTTL InReceives InDiscards OutDiscards
Ip: 1 64 1000 2 3
Tcp: RtoAlgorithm MaxConn RetransSegs
Tcp: 1 -1 17
Udp: InDatagrams NoPorts InErrors RcvbufErrors
Udp: 50 1 4 4
";
    const NETSTAT: &str = "\
TcpExt: SyncookiesSent ListenOverflows ListenDrops TCPBacklogDrop
TcpExt: 0 5 6 7
IpExt: InNoRoutes
IpExt: 0
";
    const SNMP6: &str = "Ip6InReceives                   \t100\nUdp6RcvbufErrors                \t9\nIcmp6InType1 2\n";

    #[test]
    fn snmp_tables_are_read_under_nstat_names() {
        let m = snmp_counters(&[SNMP, NETSTAT, SNMP6]);
        assert_eq!(m["UdpRcvbufErrors"], 4);
        assert_eq!(m["IpInDiscards"], 2);
        assert_eq!(m["TcpRetransSegs"], 17);
        assert_eq!(m["TcpExtTCPBacklogDrop"], 7);
        assert_eq!(m["TcpExtListenDrops"], 6);
        assert_eq!(m["IpExtInNoRoutes"], 0);
        assert_eq!(m["Udp6RcvbufErrors"], 9);
        assert_eq!(m["Icmp6InType1"], 2);
        assert!(!m.contains_key("TcpMaxConn"), "-1 is not a counter");
    }

    #[test]
    fn this_hosts_tables_parse() {
        let texts: Vec<String> = ["snmp", "netstat"].iter().map(|f| read(f).unwrap()).collect();
        let m = snmp_counters(&texts.iter().map(String::as_str).collect::<Vec<_>>());
        for name in ["UdpInErrors", "UdpRcvbufErrors", "UdpSndbufErrors", "UdpNoPorts", "IpInDiscards", "IpOutDiscards"]
        {
            assert!(m.contains_key(name), "{name} missing");
        }
        for name in ["TcpRetransSegs", "TcpExtListenDrops", "TcpExtListenOverflows", "TcpExtTCPBacklogDrop"] {
            assert!(m.contains_key(name), "{name} missing");
        }
    }

    #[test]
    fn a_dev_line_folds_as_the_kernel_prints_it() {
        let text = "Inter-|   Receive |  Transmit\n face |bytes packets errs drop fifo frame compressed multicast|bytes packets errs drop fifo colls carrier compressed\n    lo: 100 2 3 4 5 6 0 7 200 8 9 10 11 12 13 0\n";
        let c = dev_counters(text, "lo").unwrap();
        assert_eq!((c.rx_bytes, c.rx_packets, c.rx_errors, c.rx_dropped, c.rx_fifo_errors), (100, 2, 3, 4, 5));
        assert_eq!((c.rx_frame_errors, c.multicast, c.tx_bytes, c.tx_packets), (6, 7, 200, 8));
        assert_eq!(
            (c.tx_errors, c.tx_dropped, c.tx_fifo_errors, c.collisions, c.tx_carrier_errors),
            (9, 10, 11, 12, 13)
        );
        assert!(dev_counters(text, "eth0").is_none());
        assert!(dev_counters(&read("dev").unwrap(), "lo").is_some());
    }
}
