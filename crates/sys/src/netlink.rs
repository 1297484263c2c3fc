//! Route netlink (rtnetlink, `NETLINK_ROUTE`) requests for the counters: the interface the
//! route to a peer leaves by (`RTM_GETROUTE`, as `ip route get`), an interface's 64-bit
//! counters (`RTM_GETSTATS` with `IFLA_STATS_LINK_64`, as `ip -s link`) and the statistics
//! of its queueing disciplines (`RTM_GETQDISC`, as `tc -s qdisc`).
//!
//! netlink-packet-route builds and parses the messages; the socket is a plain netlink
//! datagram socket, made in (and so answered by) the calling thread's network namespace.
//! What this module owns is the exchange: sequence numbers, multipart dumps, the kernel's
//! error replies, and which answers belong to the interface asked about.

use netchar_model::{LinkCounters, QdiscCounters};
use netlink_packet_core::{NetlinkHeader, NetlinkMessage, NetlinkPayload, Nla, NLM_F_DUMP, NLM_F_REQUEST};
use netlink_packet_route::neighbour::{NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState};
use netlink_packet_route::route::{RouteAddress, RouteAttribute, RouteMessage};
use netlink_packet_route::stats::{StatsAttribute, StatsFilterMask, StatsMessage};
use netlink_packet_route::tc::{TcAttribute, TcHandle, TcMessage, TcStats2};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use std::io;
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::time::Duration;
use thiserror::Error;

/// Message types of the replies (linux/rtnetlink.h, linux/netlink.h).
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const RTM_NEWROUTE: u16 = 24;
const RTM_NEWNEIGH: u16 = 28;
const RTM_NEWQDISC: u16 = 36;
const RTM_NEWSTATS: u16 = 92;
/// Reply flag: the kernel's tables changed during this dump, so it may be inconsistent.
const NLM_F_DUMP_INTR: u16 = 16;
/// `TCA_STATS_PKT64` (Linux 5.5): a qdisc's packet count in 64 bits (`TCA_STATS_BASIC` has 32).
const TCA_STATS_PKT64: u16 = 8;
/// Bytes of a netlink message header, and of a `struct tcmsg` (family, pads, ifindex, ...).
const NLMSG_HDR_LEN: usize = 16;
/// How long the kernel may take to answer before a request counts as failed.
const REPLY_TIMEOUT: Duration = Duration::from_secs(1);
/// Receive buffer: the kernel fills dump datagrams up to 32 KiB.
const RECV_BUFFER: usize = 64 * 1024;

/// Why a netlink request failed.
#[derive(Debug, Error)]
pub enum NetlinkError {
    /// The socket could not be made (no netlink in this kernel, or a seccomp filter).
    #[error("cannot open a route netlink socket: {0}")]
    Open(#[source] io::Error),
    /// Sending or receiving failed, or the kernel did not answer within a second.
    #[error("netlink {request}: {source}")]
    Io {
        /// The request (`RTM_GETROUTE`, ...).
        request: &'static str,
        /// The socket's error.
        #[source]
        source: io::Error,
    },
    /// The kernel refused the request with an errno.
    #[error("netlink {request}: {source}")]
    Kernel {
        /// The request.
        request: &'static str,
        /// The kernel's errno (ENODEV for a gone interface, ENETUNREACH for no route, ...).
        #[source]
        source: io::Error,
    },
    /// The kernel's tables changed during a dump, three times running.
    #[error("netlink {request}: the dump was interrupted by changes three times")]
    Interrupted {
        /// The request.
        request: &'static str,
    },
    /// The answer could not be parsed, or lacked what was asked for.
    #[error("netlink {request}: {reason}")]
    Answer {
        /// The request.
        request: &'static str,
        /// What was wrong with it.
        reason: String,
    },
}

/// A route netlink socket with its buffers.
#[derive(Debug)]
pub struct Rtnetlink {
    socket: socket2::Socket,
    sequence: u32,
    buffer: Vec<u8>,
}

impl Rtnetlink {
    /// A socket in the calling thread's network namespace.
    pub fn open() -> Result<Self, NetlinkError> {
        let socket = socket2::Socket::new(
            socket2::Domain::from(libc::AF_NETLINK),
            socket2::Type::DGRAM,
            Some(socket2::Protocol::from(libc::NETLINK_ROUTE)),
        )
        .map_err(NetlinkError::Open)?;
        socket.set_read_timeout(Some(REPLY_TIMEOUT)).map_err(NetlinkError::Open)?;
        Ok(Self { socket, sequence: 0, buffer: vec![0; RECV_BUFFER] })
    }

    /// The index of the interface the route to `peer` leaves by (`ip route get PEER`):
    /// loopback's for an address of this host.
    pub fn route_to(&mut self, peer: IpAddr) -> Result<u32, NetlinkError> {
        const REQUEST: &str = "RTM_GETROUTE";
        let mut message = RouteMessage::default();
        (message.header.address_family, message.header.destination_prefix_length) = match peer {
            IpAddr::V4(_) => (AddressFamily::Inet, 32),
            IpAddr::V6(_) => (AddressFamily::Inet6, 128),
        };
        message.attributes.push(RouteAttribute::Destination(RouteAddress::from(peer)));
        let mut oif = None;
        self.request(RouteNetlinkMessage::GetRoute(message), 0, REQUEST, |kind, payload| {
            if kind == RTM_NEWROUTE {
                let route: RouteMessage = parse(REQUEST, payload)?;
                oif = route.attributes.iter().find_map(|a| match a {
                    RouteAttribute::Oif(i) => Some(*i),
                    _ => None,
                });
            }
            Ok(())
        })?;
        oif.ok_or_else(|| NetlinkError::Answer {
            request: REQUEST,
            reason: format!("the route to {peer} names no interface"),
        })
    }

    /// The interface the route to `peer` leaves by and the next hop on it: the gateway of
    /// the route, or `peer` itself when it is on the link (`ip route get PEER`).
    pub fn next_hop(&mut self, peer: IpAddr) -> Result<(u32, IpAddr), NetlinkError> {
        const REQUEST: &str = "RTM_GETROUTE";
        let mut message = RouteMessage::default();
        (message.header.address_family, message.header.destination_prefix_length) = match peer {
            IpAddr::V4(_) => (AddressFamily::Inet, 32),
            IpAddr::V6(_) => (AddressFamily::Inet6, 128),
        };
        message.attributes.push(RouteAttribute::Destination(RouteAddress::from(peer)));
        let (mut oif, mut gateway) = (None, None);
        self.request(RouteNetlinkMessage::GetRoute(message), 0, REQUEST, |kind, payload| {
            if kind == RTM_NEWROUTE {
                let route: RouteMessage = parse(REQUEST, payload)?;
                for a in route.attributes {
                    match a {
                        RouteAttribute::Oif(i) => oif = Some(i),
                        RouteAttribute::Gateway(RouteAddress::Inet(g)) => gateway = Some(IpAddr::V4(g)),
                        RouteAttribute::Gateway(RouteAddress::Inet6(g)) => gateway = Some(IpAddr::V6(g)),
                        _ => {}
                    }
                }
            }
            Ok(())
        })?;
        let oif = oif.ok_or_else(|| NetlinkError::Answer {
            request: REQUEST,
            reason: format!("the route to {peer} names no interface"),
        })?;
        Ok((oif, gateway.unwrap_or(peer)))
    }

    /// The link-layer address the neighbour table holds for `addr` on interface `ifindex`
    /// (`ip neigh show ADDR dev IF`), if it holds a usable one (not incomplete or failed).
    pub fn neighbour_mac(&mut self, ifindex: u32, addr: IpAddr) -> Result<Option<[u8; 6]>, NetlinkError> {
        const REQUEST: &str = "RTM_GETNEIGH";
        let mut message = NeighbourMessage::default();
        message.header.family = match addr {
            IpAddr::V4(_) => AddressFamily::Inet,
            IpAddr::V6(_) => AddressFamily::Inet6,
        };
        let mut found = None;
        self.request(RouteNetlinkMessage::GetNeighbour(message), NLM_F_DUMP, REQUEST, |kind, payload| {
            if kind != RTM_NEWNEIGH {
                return Ok(());
            }
            let n: NeighbourMessage = parse(REQUEST, payload)?;
            if n.header.ifindex != ifindex
                || matches!(n.header.state, NeighbourState::Incomplete | NeighbourState::Failed)
            {
                return Ok(());
            }
            let matches = n.attributes.iter().any(|a| match (a, addr) {
                (NeighbourAttribute::Destination(NeighbourAddress::Inet(d)), IpAddr::V4(want)) => *d == want,
                (NeighbourAttribute::Destination(NeighbourAddress::Inet6(d)), IpAddr::V6(want)) => *d == want,
                _ => false,
            });
            if matches {
                found = n.attributes.iter().find_map(|a| match a {
                    NeighbourAttribute::LinkLayerAddress(mac) if mac.len() == 6 => mac[..6].try_into().ok(),
                    _ => None,
                });
            }
            Ok(())
        })?;
        Ok(found)
    }

    /// The 64-bit counters of interface `ifindex` (`struct rtnl_link_stats64`).
    pub fn link_counters(&mut self, ifindex: u32) -> Result<LinkCounters, NetlinkError> {
        const REQUEST: &str = "RTM_GETSTATS";
        let mut message = StatsMessage::default();
        message.header.ifindex = ifindex;
        message.header.filter_mask = StatsFilterMask::Link64;
        let mut found = None;
        self.request(RouteNetlinkMessage::GetStats(message), 0, REQUEST, |kind, payload| {
            if kind == RTM_NEWSTATS {
                let stats: StatsMessage = parse(REQUEST, payload)?;
                found = stats.attributes.into_iter().find_map(|a| match a {
                    StatsAttribute::Link64(s) => Some(s),
                    _ => None,
                });
            }
            Ok(())
        })?;
        let s = found.ok_or(NetlinkError::Answer { request: REQUEST, reason: "no IFLA_STATS_LINK_64".into() })?;
        Ok(LinkCounters {
            rx_packets: s.rx_packets,
            tx_packets: s.tx_packets,
            rx_bytes: s.rx_bytes,
            tx_bytes: s.tx_bytes,
            rx_errors: s.rx_errors,
            tx_errors: s.tx_errors,
            rx_dropped: s.rx_dropped,
            tx_dropped: s.tx_dropped,
            multicast: s.multicast,
            collisions: s.collisions,
            rx_length_errors: s.rx_length_errors,
            rx_over_errors: s.rx_over_errors,
            rx_crc_errors: s.rx_crc_errors,
            rx_frame_errors: s.rx_frame_errors,
            rx_fifo_errors: s.rx_fifo_errors,
            rx_missed_errors: s.rx_missed_errors,
            tx_aborted_errors: s.tx_aborted_errors,
            tx_carrier_errors: s.tx_carrier_errors,
            tx_fifo_errors: s.tx_fifo_errors,
            tx_heartbeat_errors: s.tx_heartbeat_errors,
            tx_window_errors: s.tx_window_errors,
            rx_nohandler: s.rx_nohandler,
            rx_otherhost_dropped: s.rx_otherhost_dropped,
        })
    }

    /// The queueing disciplines of interface `ifindex` with their counters (absolute values),
    /// roots first. Hidden qdiscs (a tbf's inner fifo) are not dumped, as by `tc qdisc show`.
    pub fn qdiscs(&mut self, ifindex: u32) -> Result<Vec<QdiscCounters>, NetlinkError> {
        const REQUEST: &str = "RTM_GETQDISC";
        // A dump the kernel marks as interrupted (a qdisc changed meanwhile) is asked again.
        for _ in 0..3 {
            let mut found = Vec::new();
            let outcome = self.request(
                RouteNetlinkMessage::GetQueueDiscipline(TcMessage::default()),
                NLM_F_DUMP,
                REQUEST,
                |kind, payload| {
                    // The dump covers every interface: look at the tcmsg's ifindex (bytes
                    // 4..8) before parsing, so another interface's unusual qdisc cannot fail
                    // this one's.
                    let index = payload.get(4..8).map(|b| u32::from_ne_bytes(b.try_into().expect("4 bytes")));
                    if kind == RTM_NEWQDISC && index == Some(ifindex) {
                        found.push(qdisc_counters(parse(REQUEST, payload)?));
                    }
                    Ok(())
                },
            );
            match outcome {
                Ok(()) => {
                    found.sort_by_key(|q| (q.parent != "root", q.parent.clone(), q.handle.clone()));
                    return Ok(found);
                }
                Err(NetlinkError::Interrupted { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Err(NetlinkError::Interrupted { request: REQUEST })
    }

    /// Sends `message` and hands the payload of every reply of this request to `each` with
    /// its message type, until the answer ends (a single reply, an acknowledgement, or the
    /// end of a dump).
    fn request(
        &mut self,
        message: RouteNetlinkMessage,
        flags: u16,
        request: &'static str,
        mut each: impl FnMut(u16, &[u8]) -> Result<(), NetlinkError>,
    ) -> Result<(), NetlinkError> {
        self.sequence = self.sequence.wrapping_add(1);
        let mut packet = NetlinkMessage::new(NetlinkHeader::default(), NetlinkPayload::from(message));
        packet.header.flags = NLM_F_REQUEST | flags;
        packet.header.sequence_number = self.sequence;
        packet.finalize();
        let mut bytes = vec![0; packet.buffer_len()];
        packet.serialize(&mut bytes);
        self.socket.send(&bytes).map_err(|source| NetlinkError::Io { request, source })?;
        let dump = flags & NLM_F_DUMP == NLM_F_DUMP;
        let mut interrupted = false;
        loop {
            let len = self.receive().map_err(|source| NetlinkError::Io { request, source })?;
            let mut at = 0;
            let mut answered = false;
            while at + NLMSG_HDR_LEN <= len {
                let header = &self.buffer[at..at + NLMSG_HDR_LEN];
                let field32 = |i: usize| u32::from_ne_bytes(header[i..i + 4].try_into().expect("4 bytes"));
                let field16 = |i: usize| u16::from_ne_bytes(header[i..i + 2].try_into().expect("2 bytes"));
                let (length, kind, reply_flags, sequence) = (field32(0) as usize, field16(4), field16(6), field32(8));
                if length < NLMSG_HDR_LEN || at + length > len {
                    return Err(NetlinkError::Answer {
                        request,
                        reason: format!("a reply of {length} bytes is malformed"),
                    });
                }
                let payload = &self.buffer[at + NLMSG_HDR_LEN..at + length];
                at += length.next_multiple_of(4);
                if sequence != self.sequence {
                    continue; // an answer to an earlier request that timed out
                }
                interrupted |= reply_flags & NLM_F_DUMP_INTR != 0;
                match kind {
                    NLMSG_DONE => answered = true,
                    NLMSG_ERROR => {
                        let code = payload.get(..4).map(|b| i32::from_ne_bytes(b.try_into().expect("4 bytes")));
                        match code {
                            Some(0) => answered = true,
                            Some(errno) => {
                                let source = io::Error::from_raw_os_error(-errno);
                                return Err(NetlinkError::Kernel { request, source });
                            }
                            None => return Err(NetlinkError::Answer { request, reason: "a short error reply".into() }),
                        }
                    }
                    _ => {
                        each(kind, payload)?;
                        answered |= !dump;
                    }
                }
            }
            if answered {
                if interrupted {
                    return Err(NetlinkError::Interrupted { request });
                }
                return Ok(());
            }
        }
    }

    /// Receives one datagram into the buffer; an error where it did not fit.
    fn receive(&mut self) -> io::Result<usize> {
        // SAFETY: `buffer` is live and writable for its length; MSG_TRUNC only makes the
        // kernel report the datagram's real length, it still writes at most `len` bytes.
        let n = unsafe {
            libc::recv(self.socket.as_raw_fd(), self.buffer.as_mut_ptr().cast(), self.buffer.len(), libc::MSG_TRUNC)
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = n as usize;
        if n > self.buffer.len() {
            return Err(io::Error::other(format!("a {n}-byte reply was truncated")));
        }
        Ok(n)
    }
}

fn parse<T: netlink_packet_core::Parseable<[u8]>>(request: &'static str, payload: &[u8]) -> Result<T, NetlinkError> {
    T::parse(payload).map_err(|e| NetlinkError::Answer { request, reason: format!("cannot parse a reply: {e}") })
}

/// A qdisc's kind, place and counters from its `RTM_NEWQDISC` message.
fn qdisc_counters(message: TcMessage) -> QdiscCounters {
    let mut q = QdiscCounters {
        handle: handle_text(message.header.handle),
        parent: parent_text(message.header.parent),
        ..Default::default()
    };
    let (mut packets64, mut compat, mut stats2) = (None, None, false);
    for attribute in message.attributes {
        match attribute {
            TcAttribute::Kind(kind) => q.kind = kind,
            // The old fixed struct, which every kernel still sends beside TCA_STATS2.
            TcAttribute::Stats(s) => compat = Some(s),
            TcAttribute::Stats2(stats) => {
                stats2 = true;
                for s in stats {
                    match s {
                        TcStats2::Basic(b) => (q.bytes, q.packets) = (b.bytes, b.packets.into()),
                        TcStats2::Queue(s) => {
                            (q.drops, q.overlimits, q.requeues) =
                                (s.drops.into(), s.overlimits.into(), s.requeues.into());
                            (q.backlog_bytes, q.backlog_packets) = (s.backlog.into(), s.qlen.into());
                        }
                        TcStats2::Other(nla) if nla.kind() == TCA_STATS_PKT64 && nla.value_len() == 8 => {
                            let mut value = [0u8; 8];
                            nla.emit_value(&mut value);
                            packets64 = Some(u64::from_ne_bytes(value));
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    if let (false, Some(s)) = (stats2, compat) {
        (q.bytes, q.packets, q.drops, q.overlimits) = (s.bytes, s.packets.into(), s.drops.into(), s.overlimits.into());
        (q.backlog_bytes, q.backlog_packets) = (s.backlog.into(), s.qlen.into());
    }
    if let Some(p) = packets64 {
        q.packets = p;
    }
    q
}

/// A handle as tc prints it: `1:`, `8001:`, `1:a` (hex).
fn handle_text(h: TcHandle) -> String {
    if h.minor == 0 {
        format!("{:x}:", h.major)
    } else {
        format!("{:x}:{:x}", h.major, h.minor)
    }
}

fn parent_text(h: TcHandle) -> String {
    match h {
        TcHandle::ROOT => "root".into(),
        TcHandle::INGRESS => "ingress".into(),
        h => handle_text(h),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_route_counters_and_qdisc() {
        let mut nl = Rtnetlink::open().unwrap();
        let lo = nl.route_to("127.0.0.1".parse().unwrap()).unwrap();
        let eth = crate::ethtool::Ethtool::open().unwrap();
        assert_eq!(eth.interface_name(lo).unwrap(), "lo");
        let before = nl.link_counters(lo).unwrap();
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        socket.send_to(&[0; 100], socket.local_addr().unwrap()).unwrap();
        let after = nl.link_counters(lo).unwrap();
        // Loopback counts a packet once each way.
        assert!(after.tx_packets > before.tx_packets && after.rx_packets > before.rx_packets, "{after:?}");
        let qdiscs = nl.qdiscs(lo).unwrap();
        assert!(qdiscs.iter().all(|q| !q.kind.is_empty()), "{qdiscs:?}");
        match nl.link_counters(u32::MAX - 1) {
            Err(NetlinkError::Kernel { source, .. }) => assert_eq!(source.raw_os_error(), Some(libc::ENODEV)),
            other => panic!("an interface that does not exist gave {other:?}"),
        }
    }

    #[test]
    fn handles_print_as_tc_prints_them() {
        assert_eq!(parent_text(TcHandle::ROOT), "root");
        assert_eq!(handle_text(TcHandle { major: 0x8001, minor: 0 }), "8001:");
        assert_eq!(parent_text(TcHandle { major: 1, minor: 10 }), "1:a");
    }
}
