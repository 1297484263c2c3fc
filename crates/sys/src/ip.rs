//! IP-level options of a data socket, whichever its transport: the TOS byte (IPv4) or
//! traffic class (IPv6), the IPv6 flow label, don't-fragment with the path MTU the kernel
//! learned, UDP checksums off (IPv4), and binding to an interface.
//!
//! Each setter returns the kernel's error for the caller to name the flag that asked; none
//! falls back silently, because a test that was asked to mark its packets and did not would
//! measure something else.

use crate::{check, getsockopt_int, setsockopt_int};
use std::io;
use std::net::SocketAddrV6;
use std::os::fd::{AsRawFd, BorrowedFd};

/// SO_NO_CHECK in asm-generic/socket.h (x86, arm, riscv; the libc crate exports it for none of
/// the Linux targets).
const SO_NO_CHECK: libc::c_int = 11;
/// SO_BINDTODEVICE in asm-generic/socket.h.
const SO_BINDTODEVICE: libc::c_int = 25;
/// `in6_flowlabel_req.flr_action`: get (and with [`IPV6_FL_F_CREATE`], create) a label.
const IPV6_FL_A_GET: u8 = 0;
/// `flr_share`: any socket of this namespace may use the label.
const IPV6_FL_S_ANY: u8 = 255;
/// `flr_flags`: create the label if it does not exist.
const IPV6_FL_F_CREATE: u16 = 1;

/// `struct in6_flowlabel_req` of linux/in6.h (32 bytes).
#[repr(C)]
struct FlowLabelRequest {
    dst: libc::in6_addr,
    /// Network byte order.
    label: u32,
    action: u8,
    share: u8,
    flags: u16,
    expires: u16,
    linger: u16,
    pad: u32,
}

/// The socket's address family: true for AF_INET6.
pub fn is_ipv6(fd: BorrowedFd<'_>) -> io::Result<bool> {
    getsockopt_int(fd, libc::SOL_SOCKET, libc::SO_DOMAIN).map(|d| d == libc::AF_INET6)
}

/// Sets the TOS byte of every packet the socket sends (DSCP in the upper six bits; Linux keeps
/// a TCP socket's ECN bits its own). An IPv6 socket gets IPV6_TCLASS for its IPv6 packets and
/// IP_TOS too, for the IPv4 packets of a v4-mapped peer (a server listening on `[::]`).
pub fn set_tos(fd: BorrowedFd<'_>, tos: u8) -> io::Result<()> {
    if is_ipv6(fd)? {
        setsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_TCLASS, libc::c_int::from(tos))?;
    }
    setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_TOS, libc::c_int::from(tos))
}

/// Registers flow label `label` (1 to 0xFFFFF) for destination `to` on an IPv6 socket and
/// turns on sending it (IPV6_FLOWLABEL_MGR, IPV6_FLOWINFO_SEND); the label goes out once the
/// socket connects to [`with_flowlabel`]`(to, label)`: Linux takes a socket's label only
/// from the address it connects to.
pub fn set_flowlabel(fd: BorrowedFd<'_>, to: &SocketAddrV6, label: u32) -> io::Result<()> {
    let request = FlowLabelRequest {
        dst: libc::in6_addr { s6_addr: to.ip().octets() },
        label: (label & 0xF_FFFF).to_be(),
        action: IPV6_FL_A_GET,
        share: IPV6_FL_S_ANY,
        flags: IPV6_FL_F_CREATE,
        expires: 0,
        linger: 0,
        pad: 0,
    };
    // SAFETY: `request` is a live, fully initialised in6_flowlabel_req for the call, and the
    // size passed is its own.
    let ret = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_IPV6,
            libc::IPV6_FLOWLABEL_MGR,
            (&request as *const FlowLabelRequest).cast(),
            std::mem::size_of::<FlowLabelRequest>() as libc::socklen_t,
        )
    };
    check(ret)?;
    setsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_FLOWINFO_SEND, 1)
}

/// `to` with flow label `label` in its flow information (sin6_flowinfo, which the kernel
/// reads in network byte order and the standard library passes through as given).
pub fn with_flowlabel(to: SocketAddrV6, label: u32) -> SocketAddrV6 {
    SocketAddrV6::new(*to.ip(), to.port(), (label & 0xF_FFFF).to_be(), to.scope_id())
}

/// Sets don't-fragment: IP_PMTUDISC_DO (and on an IPv6 socket IPV6_PMTUDISC_DO and
/// IPV6_DONTFRAG). The kernel then never fragments what the socket sends: a datagram larger
/// than the path MTU fails with EMSGSIZE, and TCP sizes its segments to the path MTU it
/// learns from ICMP "fragmentation needed" / "packet too big".
pub fn set_dont_fragment(fd: BorrowedFd<'_>) -> io::Result<()> {
    if is_ipv6(fd)? {
        setsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_MTU_DISCOVER, libc::IPV6_PMTUDISC_DO)?;
        setsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_DONTFRAG, 1)?;
    }
    setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_MTU_DISCOVER, libc::IP_PMTUDISC_DO)
}

/// The path MTU the kernel holds for a connected socket's destination (IP_MTU, IPV6_MTU for
/// an IPv6 peer): the route's MTU, lowered by what path MTU discovery learned. ENOTCONN while
/// the socket holds no route (a UDP socket whose TOS changed since it last sent).
pub fn path_mtu(fd: BorrowedFd<'_>, ipv6_peer: bool) -> io::Result<u32> {
    let mtu = if ipv6_peer {
        getsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_MTU)?
    } else {
        getsockopt_int(fd, libc::IPPROTO_IP, libc::IP_MTU)?
    };
    Ok(mtu.max(0) as u32)
}

/// Sends UDP datagrams with a checksum of zero (SO_NO_CHECK): IPv4 only, where RFC 768 makes
/// the checksum optional. An IPv6 path ignores the option: its UDP checksum is mandatory
/// (RFC 8200 §8.1).
pub fn set_no_udp_checksum(fd: BorrowedFd<'_>) -> io::Result<()> {
    setsockopt_int(fd, libc::SOL_SOCKET, SO_NO_CHECK, 1)
}

/// Whether the socket sends UDP checksums of zero.
pub fn no_udp_checksum(fd: BorrowedFd<'_>) -> io::Result<bool> {
    getsockopt_int(fd, libc::SOL_SOCKET, SO_NO_CHECK).map(|v| v != 0)
}

/// Binds the socket to interface `name` (SO_BINDTODEVICE): it sends and receives through that
/// interface only. Needs CAP_NET_RAW before Linux 5.7, and on any kernel to move a socket
/// already bound to another interface.
pub fn bind_device(fd: BorrowedFd<'_>, name: &str) -> io::Result<()> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains('\0') {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "an interface name is 1 to 15 bytes"));
    }
    // SAFETY: `name` is a live buffer of `name.len()` bytes; the kernel copies at most that.
    let ret = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_BINDTODEVICE,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    check(ret).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream, UdpSocket};
    use std::os::fd::AsFd;

    #[test]
    fn tos_dont_fragment_and_checksums_set_and_read_back_on_loopback() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        set_tos(tx.as_fd(), 0xb8).unwrap();
        assert_eq!(getsockopt_int(tx.as_fd(), libc::IPPROTO_IP, libc::IP_TOS).unwrap(), 0xb8);
        set_dont_fragment(tx.as_fd()).unwrap();
        assert_eq!(getsockopt_int(tx.as_fd(), libc::IPPROTO_IP, libc::IP_MTU_DISCOVER).unwrap(), libc::IP_PMTUDISC_DO);
        // Setting the TOS dropped the socket's cached route; a send takes one again, and with
        // it the path MTU: loopback's (65536, reported as the largest IPv4 packet, 65535).
        assert_eq!(tx.send(&[1u8; 100]).unwrap(), 100);
        assert!(path_mtu(tx.as_fd(), false).unwrap() >= 65_535);
        assert!(!no_udp_checksum(tx.as_fd()).unwrap());
        set_no_udp_checksum(tx.as_fd()).unwrap();
        assert!(no_udp_checksum(tx.as_fd()).unwrap());
        assert!(!is_ipv6(tx.as_fd()).unwrap());
        assert_eq!(tx.send(&[1u8; 100]).unwrap(), 100);
    }

    #[test]
    fn an_ipv6_socket_takes_a_traffic_class_and_a_flow_label() {
        let Ok(l) = TcpListener::bind("[::1]:0") else { return };
        let to = match l.local_addr().unwrap() {
            std::net::SocketAddr::V6(a) => a,
            std::net::SocketAddr::V4(_) => unreachable!("bound to ::1"),
        };
        let s = socket2::Socket::new(socket2::Domain::IPV6, socket2::Type::STREAM, None).unwrap();
        set_tos(s.as_fd(), 0x28).unwrap();
        assert_eq!(getsockopt_int(s.as_fd(), libc::IPPROTO_IPV6, libc::IPV6_TCLASS).unwrap(), 0x28);
        set_flowlabel(s.as_fd(), &to, 0x12345).unwrap();
        s.connect(&std::net::SocketAddr::V6(with_flowlabel(to, 0x12345)).into()).unwrap();
        let (accepted, _) = l.accept().unwrap();
        drop(accepted);
        assert!(is_ipv6(s.as_fd()).unwrap());
        assert_eq!(with_flowlabel(to, 0x12345).flowinfo(), 0x12345u32.to_be());
        let _ = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    }

    #[test]
    fn interface_names_are_checked_before_the_kernel_sees_them() {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        for bad in ["", "a-name-of-sixteen", "lo\0x"] {
            assert_eq!(bind_device(s.as_fd(), bad).unwrap_err().kind(), io::ErrorKind::InvalidInput, "{bad:?}");
        }
        // Root or not, binding to loopback by name is allowed on Linux 5.7+ and as root.
        let _ = bind_device(s.as_fd(), "lo");
    }
}
