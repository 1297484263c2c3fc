//! Socket options of data connections, applied the same way on both ends: TCP's, and the IP
//! options of the test (`--tos`, `--flowlabel`, `--df`, `--no-udp-checksum`), which both ends
//! set on their own data sockets so that both directions carry them. Also where the client's
//! sockets are bound (`-B`, `--bind-dev`), and each stream's path MTU after the test.

use crate::dataplane::{DataSocket, DataStream};
use netchar_model::{Endpoint, LocalBinding, Role, StreamRecord, TestSpec};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io;
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

/// A socket option the kernel refused, with the flag that asked for it.
#[derive(Debug)]
pub(crate) struct OptionError {
    pub(crate) flag: &'static str,
    pub(crate) message: String,
}

impl OptionError {
    fn new(flag: &'static str, what: String, e: io::Error) -> Self {
        Self { flag, message: format!("{what}: {e}") }
    }
}

/// Where this end binds its sockets before connecting (the client's `-B ADDR[:PORT]` and
/// `--bind-dev`); the default leaves both to the kernel.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LocalEnd<'a> {
    /// Source address and port (0: the kernel's choice of port).
    pub(crate) address: Option<SocketAddr>,
    /// The interface (SO_BINDTODEVICE).
    pub(crate) device: Option<&'a str>,
}

impl<'a> LocalEnd<'a> {
    /// The binding of the control connection (`binding`'s address, any port), or with
    /// `stream` the binding of data stream `stream` (its port PORT + stream − 1 when `-B`
    /// gave a port).
    pub(crate) fn of(binding: Option<&'a LocalBinding>, stream: Option<u32>) -> Self {
        let Some(b) = binding else { return Self::default() };
        let port = match (b.port, stream) {
            (Some(first), Some(id)) => first.saturating_add(id.saturating_sub(1).min(u32::from(u16::MAX)) as u16),
            _ => 0,
        };
        Self { address: b.address.map(|ip| SocketAddr::new(ip, port)), device: b.device.as_deref() }
    }

    /// Binds `socket` here, for a connection to `peer`.
    fn bind(&self, socket: &Socket, peer: SocketAddr) -> Result<(), OptionError> {
        if let Some(dev) = self.device {
            netchar_sys::ip::bind_device(socket.as_fd(), dev)
                .map_err(|e| OptionError::new("--bind-dev", format!("SO_BINDTODEVICE {dev}"), e))?;
        }
        if let Some(at) = self.address {
            if at.is_ipv4() != peer.is_ipv4() {
                return Err(OptionError {
                    flag: "-B",
                    message: format!("{} is not of {peer}'s address family", at.ip()),
                });
            }
            if at.port() != 0 {
                // A stream's port again on the next run, while the last one's connection may
                // still be in TIME_WAIT.
                let _ = socket.set_reuse_address(true);
            }
            socket.bind(&SockAddr::from(at)).map_err(|e| OptionError::new("-B", format!("bind to {at}"), e))?;
        }
        Ok(())
    }
}

/// Connects the control connection from `local`.
pub(crate) fn connect_control(
    addr: SocketAddr,
    timeout: Duration,
    local: LocalEnd<'_>,
) -> Result<TcpStream, ConnectFailure> {
    let socket =
        Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP)).map_err(ConnectFailure::Io)?;
    local.bind(&socket, addr).map_err(ConnectFailure::Option)?;
    socket.connect_timeout(&SockAddr::from(addr), timeout).map_err(ConnectFailure::Io)?;
    Ok(socket.into())
}

/// Connects a data socket from `local`: buffer sizes, MSS and the IP options go on before
/// connect (they shape the handshake's window scale and MSS option, and mark it), the rest
/// after.
pub(crate) fn connect_data(
    addr: SocketAddr,
    spec: &TestSpec,
    role: Role,
    timeout: Duration,
    local: LocalEnd<'_>,
) -> Result<TcpStream, ConnectFailure> {
    let socket =
        Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP)).map_err(ConnectFailure::Io)?;
    local.bind(&socket, addr).map_err(ConnectFailure::Option)?;
    pre_connect(&socket, spec).map_err(ConnectFailure::Option)?;
    ip_options(socket.as_fd(), spec, addr, false).map_err(ConnectFailure::Option)?;
    let to = labelled(socket.as_fd(), spec, addr).map_err(ConnectFailure::Option)?;
    socket.connect_timeout(&SockAddr::from(to), timeout).map_err(ConnectFailure::Io)?;
    let stream: TcpStream = socket.into();
    post_connect(&stream, spec, role).map_err(ConnectFailure::Option)?;
    Ok(stream)
}

/// A UDP socket bound at `local` (any address of `peer`'s family, when none is given) and
/// connected to `peer` with the test's IP options, its buffers sized for high rates.
pub(crate) fn open_udp(peer: SocketAddr, spec: &TestSpec, local: LocalEnd<'_>) -> Result<UdpSocket, ConnectFailure> {
    let socket =
        Socket::new(Domain::for_address(peer), Type::DGRAM, Some(Protocol::UDP)).map_err(ConnectFailure::Io)?;
    local.bind(&socket, peer).map_err(ConnectFailure::Option)?;
    if local.address.is_none() {
        let any: SocketAddr =
            if peer.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse().expect("literal addresses parse");
        socket.bind(&SockAddr::from(any)).map_err(ConnectFailure::Io)?;
    }
    let socket: UdpSocket = socket.into();
    size_udp_buffers(&socket);
    connect_udp(&socket, peer, spec)?;
    Ok(socket)
}

/// Sets the test's IP options on a bound UDP socket and connects it to `peer` (the flow label
/// goes with the connect, the only place Linux takes it from).
pub(crate) fn connect_udp(socket: &UdpSocket, peer: SocketAddr, spec: &TestSpec) -> Result<(), ConnectFailure> {
    ip_options(socket.as_fd(), spec, peer, true).map_err(ConnectFailure::Option)?;
    let to = labelled(socket.as_fd(), spec, peer).map_err(ConnectFailure::Option)?;
    socket.connect(to).map_err(ConnectFailure::Io)
}

/// True for a peer reached over IPv6 proper (not an IPv4 peer of a dual-stack socket).
fn ipv6_peer(peer: SocketAddr) -> bool {
    match peer.ip() {
        IpAddr::V4(_) => false,
        IpAddr::V6(v6) => v6.to_ipv4_mapped().is_none(),
    }
}

/// The test's TOS and don't-fragment, and for UDP its zero checksums, on a data socket to
/// `peer`. Before connect where this end connects; an accepted connection gets them as soon
/// as it is in (its handshake went out unmarked).
fn ip_options(fd: BorrowedFd<'_>, spec: &TestSpec, peer: SocketAddr, udp: bool) -> Result<(), OptionError> {
    if let Some(tos) = spec.ip.tos {
        netchar_sys::ip::set_tos(fd, tos).map_err(|e| OptionError::new("--tos", format!("IP_TOS {tos:#04x}"), e))?;
    }
    if spec.ip.dont_fragment {
        netchar_sys::ip::set_dont_fragment(fd)
            .map_err(|e| OptionError::new("--df", "IP_MTU_DISCOVER IP_PMTUDISC_DO".into(), e))?;
    }
    if udp && spec.udp.as_ref().is_some_and(|u| u.no_checksum) {
        if ipv6_peer(peer) {
            return Err(OptionError {
                flag: "--no-udp-checksum",
                message: format!(
                    "IPv4 only: the UDP checksum is mandatory over IPv6 (RFC 8200 §8.1), and {peer} is IPv6"
                ),
            });
        }
        netchar_sys::ip::set_no_udp_checksum(fd)
            .map_err(|e| OptionError::new("--no-udp-checksum", "SO_NO_CHECK".into(), e))?;
    }
    Ok(())
}

/// Registers the test's flow label on a socket to an IPv6 `peer` and returns the address to
/// connect to (carrying the label); any other socket connects to `peer` as it is.
fn labelled(fd: BorrowedFd<'_>, spec: &TestSpec, peer: SocketAddr) -> Result<SocketAddr, OptionError> {
    match (spec.ip.flowlabel, peer) {
        (Some(label), SocketAddr::V6(v6)) if ipv6_peer(peer) => {
            netchar_sys::ip::set_flowlabel(fd, &v6, label)
                .map_err(|e| OptionError::new("--flowlabel", format!("IPV6_FLOWLABEL_MGR {label}"), e))?;
            Ok(SocketAddr::V6(netchar_sys::ip::with_flowlabel(v6, label)))
        }
        _ => Ok(peer),
    }
}

/// Duplicates of the connected data sockets of a `--df` test, kept to read each stream's path
/// MTU once the workers are done with their sockets.
#[derive(Debug, Default)]
pub(crate) struct PathMtuProbes(Vec<(u32, OwnedFd, bool)>);

impl PathMtuProbes {
    /// Probes of `streams` when the test asks for don't-fragment; none otherwise.
    pub(crate) fn of(streams: &[DataStream], spec: &TestSpec) -> Self {
        if !spec.ip.dont_fragment {
            return Self::default();
        }
        let probe = |fd: BorrowedFd<'_>, peer: io::Result<SocketAddr>| {
            Some((fd.try_clone_to_owned().ok()?, peer.map(ipv6_peer).unwrap_or(false)))
        };
        Self(
            streams
                .iter()
                .filter_map(|s| {
                    let (fd, v6) = match &s.socket {
                        DataSocket::Tcp(t) => probe(t.as_fd(), t.peer_addr())?,
                        DataSocket::Udp(u) => probe(u.as_fd(), u.peer_addr())?,
                        _ => return None,
                    };
                    Some((s.id, fd, v6))
                })
                .collect(),
        )
    }

    /// Sets `path_mtu` on this end's records (`measured_by`) of the probed streams.
    pub(crate) fn fill(&self, records: &mut [StreamRecord], measured_by: Endpoint) {
        for r in records.iter_mut().filter(|r| r.measured_by == measured_by) {
            if let Some((_, fd, v6)) = self.0.iter().find(|(id, ..)| *id == r.id) {
                r.path_mtu = netchar_sys::ip::path_mtu(fd.as_fd(), *v6).ok();
            }
        }
    }
}

/// Why a data connection could not be made.
#[derive(Debug)]
pub(crate) enum ConnectFailure {
    Io(io::Error),
    Option(OptionError),
}

impl std::fmt::Display for ConnectFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Io(e) => write!(f, "{e}"),
            Self::Option(o) => write!(f, "{}: {}", o.flag, o.message),
        }
    }
}

fn pre_connect(socket: &Socket, spec: &TestSpec) -> Result<(), OptionError> {
    if let Some(w) = spec.tcp.window_bytes {
        socket.set_send_buffer_size(w as usize).map_err(|e| OptionError::new("-w", format!("SO_SNDBUF {w}"), e))?;
        socket.set_recv_buffer_size(w as usize).map_err(|e| OptionError::new("-w", format!("SO_RCVBUF {w}"), e))?;
    }
    if let Some(m) = spec.tcp.mss {
        netchar_sys::tcp::set_mss(socket.as_fd(), m)
            .map_err(|e| OptionError::new("-M", format!("TCP_MAXSEG {m}"), e))?;
    }
    Ok(())
}

/// Options for an established data connection on either end (an accepted one gets the
/// test's IP options here too).
pub(crate) fn post_connect(stream: &TcpStream, spec: &TestSpec, role: Role) -> Result<(), OptionError> {
    if let Ok(peer) = stream.peer_addr() {
        ip_options(stream.as_fd(), spec, peer, false)?;
    }
    let o = &spec.tcp;
    if o.nodelay {
        stream.set_nodelay(true).map_err(|e| OptionError::new("-N", "TCP_NODELAY".into(), e))?;
    }
    if let Some(w) = o.window_bytes {
        let s = socket2::SockRef::from(stream);
        s.set_send_buffer_size(w as usize).map_err(|e| OptionError::new("-w", format!("SO_SNDBUF {w}"), e))?;
        s.set_recv_buffer_size(w as usize).map_err(|e| OptionError::new("-w", format!("SO_RCVBUF {w}"), e))?;
    }
    if let Some(cc) = &o.congestion {
        netchar_sys::tcp::set_congestion(stream.as_fd(), cc).map_err(|e| OptionError {
            flag: "-C",
            message: format!(
                "congestion control {cc:?} is not available here ({e}); see /proc/sys/net/ipv4/tcp_available_congestion_control"
            ),
        })?;
    }
    if role == Role::Sender {
        if let Some(rate) = o.rate_bps_per_stream.filter(|&r| r > 0) {
            // Kernel pacing smooths the user-space schedule's block-sized bursts; set a little
            // above the goodput target because the kernel paces whole frames, headers included.
            let bytes_per_second = rate / 8 + rate / 80;
            let _ = netchar_sys::tcp::set_max_pacing_rate(stream.as_fd(), bytes_per_second);
        }
    }
    Ok(())
}

/// Socket buffers for UDP streams: 8 MiB asked, the kernel caps at rmem_max/wmem_max (the
/// receive queue's drops are counted separately, the socket drop counter). Best effort.
pub(crate) fn size_udp_buffers(socket: &std::net::UdpSocket) {
    let s = socket2::SockRef::from(socket);
    let _ = s.set_recv_buffer_size(8 << 20);
    let _ = s.set_send_buffer_size(8 << 20);
}
