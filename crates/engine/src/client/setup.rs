//! Opening the data streams: connecting each as the protocol describes it (TCP, to a port of
//! the test's own, per transaction, dialled back, sharing another's socket) and running each
//! UDP stream's setup exchange until the test starts.

use super::{connect_error, Driver};
use crate::control::{OpenStream, Transport, UdpHandshake};
use crate::dataplane::{DataSocket, DataStream};
use crate::error::ClientError;
use crate::tcp_setup::{connect_data, open_udp, ConnectFailure, LocalEnd};
use netchar_model::{Flow, Role};
use std::io::{self, Write};
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

/// The data streams being opened and set up, until the test starts.
#[derive(Default)]
pub(super) struct StreamSetup {
    /// UDP streams still setting up: repeated until the test starts.
    pub(super) udp_setup: Vec<UdpSetup>,
    /// When the setup datagrams last went out.
    pub(super) udp_setup_sent: Option<Instant>,
    /// The listener the peer dials back to ([`crate::control::ControlEvent::Listen`]).
    pub(super) dial_back: Option<std::net::TcpListener>,
    /// The UDP socket bound at the session's request ([`crate::control::ControlEvent::BindUdp`]),
    /// until a stream takes it.
    pub(super) bound_udp: Option<UdpSocket>,
    /// The streams opened, for the workers once the test starts.
    pub(super) pending_streams: Option<Vec<DataStream>>,
    /// Without a control connection: this end's sending TCP streams, for what their peer sent
    /// back unread (client::answers).
    pub(super) unread: Vec<(u32, std::net::TcpStream)>,
}

/// One UDP stream's setup: its socket (a clone of the data socket, non-blocking) and the
/// protocol's exchange.
pub(super) struct UdpSetup {
    pub(super) id: u32,
    pub(super) socket: UdpSocket,
    pub(super) handshake: Box<dyn UdpHandshake>,
}

impl Driver<'_> {
    /// Opens the data streams as the protocol described them.
    pub(super) fn open_streams(&mut self, open: Vec<OpenStream>) -> Result<(), ClientError> {
        let mut streams = Vec::new();
        for OpenStream { id, flow, transport } in open {
            let role = if flow == Flow::Up { Role::Sender } else { Role::Receiver };
            let local = LocalEnd::of(self.cfg.bind.as_ref(), Some(id));
            let refused = |f: ConnectFailure, to: SocketAddr, what: &str| match f {
                ConnectFailure::Io(source) => {
                    ClientError::Io { context: format!("cannot open {what} stream {id} to {to}"), source }
                }
                ConnectFailure::Option(o) => ClientError::SocketOption { flag: o.flag, message: o.message },
            };
            let socket = match transport {
                Transport::PerTransaction { port } => DataSocket::CrrTarget(SocketAddr::new(self.addr.ip(), port)),
                Transport::DialBack => {
                    let listener =
                        self.setup.dial_back.as_ref().and_then(|l| l.try_clone().ok()).ok_or_else(|| {
                            ClientError::Stream(format!("stream {id}: no listener for the dial-back"))
                        })?;
                    DataSocket::DialBack(listener, self.addr.ip())
                }
                Transport::SameAs { id: other } => {
                    let failed = |source: io::Error| ClientError::Io {
                        context: format!("stream {id}: cannot share stream {other}"),
                        source,
                    };
                    match streams.iter().find(|s: &&DataStream| s.id == other).map(|s| &s.socket) {
                        Some(DataSocket::Tcp(t)) => DataSocket::Tcp(t.try_clone().map_err(failed)?),
                        Some(DataSocket::Udp(u)) => DataSocket::Udp(u.try_clone().map_err(failed)?),
                        _ => return Err(ClientError::Stream(format!("stream {id}: no stream {other} to share"))),
                    }
                }
                Transport::Udp { handshake } => {
                    let failed =
                        |source: io::Error| ClientError::Io { context: format!("cannot open UDP stream {id}"), source };
                    let socket = open_udp(self.addr, &self.spec, local).map_err(|f| refused(f, self.addr, "UDP"))?;
                    let setup = socket.try_clone().map_err(failed)?;
                    // Non-blocking while setting up, to poll for the peer's answers; the clone
                    // shares the data socket's file, so it is set back before the workers start.
                    setup.set_nonblocking(true).map_err(failed)?;
                    self.setup.udp_setup.push(UdpSetup { id, socket: setup, handshake });
                    DataSocket::Udp(socket)
                }
                Transport::UdpToPort { port } => {
                    let to = SocketAddr::new(self.addr.ip(), port);
                    DataSocket::Udp(open_udp(to, &self.spec, local).map_err(|f| refused(f, to, "UDP"))?)
                }
                Transport::BoundUdp { port } => {
                    let socket =
                        self.setup.bound_udp.take().ok_or_else(|| {
                            ClientError::Stream(format!("stream {id}: no UDP socket was bound for it"))
                        })?;
                    let to = SocketAddr::new(self.addr.ip(), port);
                    crate::tcp_setup::connect_udp(&socket, to, &self.spec).map_err(|f| refused(f, to, "UDP"))?;
                    DataSocket::Udp(socket)
                }
                Transport::UdpSamePort { port } => {
                    let here = match &self.control {
                        Some(control) => control.local_addr().map_err(|source| ClientError::Io {
                            context: format!("UDP stream {id}: this end's address"),
                            source,
                        })?,
                        None => return Err(ClientError::Stream(format!("stream {id}: no control connection"))),
                    };
                    let to = SocketAddr::new(self.addr.ip(), port);
                    DataSocket::Udp(bind_same_port(SocketAddr::new(here.ip(), port), to, &self.spec).map_err(|f| {
                        match f {
                            ConnectFailure::Io(source) => ClientError::Io {
                                context: format!(
                                    "cannot bind UDP {}:{port} (the peer sends to that port of this host; free it)",
                                    here.ip()
                                ),
                                source,
                            },
                            ConnectFailure::Option(o) => ClientError::SocketOption { flag: o.flag, message: o.message },
                        }
                    })?)
                }
                Transport::TcpToPort { port } => {
                    let to = SocketAddr::new(self.addr.ip(), port);
                    let socket =
                        connect_data(to, &self.spec, role, self.cfg.connect_timeout, local).map_err(|f| match f {
                            ConnectFailure::Io(e) => connect_error(to, e, self.cfg.connect_timeout),
                            ConnectFailure::Option(o) => ClientError::SocketOption { flag: o.flag, message: o.message },
                        })?;
                    DataSocket::Tcp(socket)
                }
                Transport::Tcp { preamble } => {
                    let mut socket =
                        connect_data(self.addr, &self.spec, role, self.cfg.connect_timeout, local).map_err(|f| match f {
                            ConnectFailure::Io(e) if self.control.is_none() && e.kind() == io::ErrorKind::ConnectionRefused => {
                                // No control connection came first: this is the peer's own port.
                                ClientError::Stream(format!(
                                    "nothing answers at {} (connection refused): no {} server there; check the host and -p",
                                    self.addr,
                                    self.cfg.protocol.name()
                                ))
                            }
                            ConnectFailure::Io(e) => connect_error(self.addr, e, self.cfg.connect_timeout),
                            ConnectFailure::Option(o) => ClientError::SocketOption { flag: o.flag, message: o.message },
                        })?;
                    socket.write_all(&preamble).map_err(|e| connect_error(self.addr, e, self.cfg.connect_timeout))?;
                    if self.control.is_none() {
                        if self.session.awaits_opening() {
                            super::answers::await_opening(&socket, id, self.session.as_mut(), self.cfg.timeouts.hello)?;
                        }
                        if let (Flow::Up, Ok(copy)) = (flow, socket.try_clone()) {
                            self.setup.unread.push((id, copy));
                        }
                    }
                    DataSocket::Tcp(socket)
                }
            };
            streams.push(DataStream { id, flow, role, socket });
        }
        self.setup.pending_streams = Some(streams);
        self.send_udp_setup();
        Ok(())
    }

    /// Runs each UDP stream's setup exchange (netchar's: setup, the server's challenge, a
    /// confirm echoing its token; docs/protocol.md). Its datagram is repeated every 50 ms
    /// until the test starts, so a lost datagram only delays the test (iperf3 sends one,
    /// esnet/iperf#351); an answer that changes it is answered at once.
    pub(super) fn send_udp_setup(&mut self) {
        let mut buf = [0u8; 2048];
        for s in &mut self.setup.udp_setup {
            // The socket is connected to the peer's port: only the peer's datagrams arrive.
            while !s.handshake.answered() {
                let Ok(n) = s.socket.recv(&mut buf) else { break };
                if s.handshake.on_datagram(&buf[..n]) {
                    let _ = s.socket.send(&s.handshake.datagram());
                }
            }
        }
        if self.setup.udp_setup.is_empty()
            || self.setup.udp_setup_sent.is_some_and(|t| t.elapsed() < Duration::from_millis(50))
        {
            return;
        }
        let now = Instant::now();
        for s in self.setup.udp_setup.iter_mut().filter(|s| !s.handshake.answered()) {
            let d = s.handshake.datagram();
            if !d.is_empty() && s.handshake.due(now) {
                let _ = s.socket.send(&d);
            }
        }
        self.setup.udp_setup_sent = Some(Instant::now());
    }
}

/// A UDP socket for [`crate::control::ControlEvent::BindUdp`]: on `port` of this end's `-B`
/// address (any address of the peer's family without one), or on any free port when `port`
/// is taken; sized as every UDP data socket (a lock-step peer's answers come in a burst when
/// the test ends). No `SO_REUSEADDR`: on UDP it would let another program bind the same port
/// and take some of this test's datagrams.
pub(super) fn bind_udp_port(
    peer: SocketAddr,
    bind: Option<&netchar_model::LocalBinding>,
    port: u16,
) -> Result<UdpSocket, ClientError> {
    let any: SocketAddr = if peer.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse().expect("literal addresses parse");
    let ip = LocalEnd::of(bind, None).address.unwrap_or(any).ip();
    let socket = UdpSocket::bind(SocketAddr::new(ip, port))
        .or_else(|_| UdpSocket::bind(SocketAddr::new(ip, 0)))
        .map_err(|source| ClientError::Io { context: format!("cannot bind a UDP port on {ip}"), source })?;
    crate::tcp_setup::size_udp_buffers(&socket);
    Ok(socket)
}

/// A UDP socket bound to `here` and connected to `to`, sized and optioned as every UDP data
/// socket (crate::tcp_setup).
fn bind_same_port(
    here: SocketAddr,
    to: SocketAddr,
    spec: &netchar_model::TestSpec,
) -> Result<UdpSocket, ConnectFailure> {
    let socket = UdpSocket::bind(here).map_err(ConnectFailure::Io)?;
    crate::tcp_setup::size_udp_buffers(&socket);
    crate::tcp_setup::connect_udp(&socket, to, spec)?;
    Ok(socket)
}
