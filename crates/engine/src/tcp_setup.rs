//! Socket options of data connections, applied the same way on both ends.

use netchar_model::{Role, TestSpec};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsFd;
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

/// Connects a data socket: buffer sizes and MSS go on before connect (they shape the
/// handshake's window scale and MSS option), everything else after.
pub(crate) fn connect_data(
    addr: SocketAddr,
    spec: &TestSpec,
    role: Role,
    timeout: Duration,
) -> Result<TcpStream, ConnectFailure> {
    let socket =
        Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP)).map_err(ConnectFailure::Io)?;
    pre_connect(&socket, spec).map_err(ConnectFailure::Option)?;
    socket.connect_timeout(&SockAddr::from(addr), timeout).map_err(ConnectFailure::Io)?;
    let stream: TcpStream = socket.into();
    post_connect(&stream, spec, role).map_err(ConnectFailure::Option)?;
    Ok(stream)
}

/// Why a data connection could not be made.
#[derive(Debug)]
pub(crate) enum ConnectFailure {
    Io(io::Error),
    Option(OptionError),
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

/// Options for an established data connection on either end.
pub(crate) fn post_connect(stream: &TcpStream, spec: &TestSpec, role: Role) -> Result<(), OptionError> {
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
