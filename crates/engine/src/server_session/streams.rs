//! The stream phase: the test's data streams come in, routed from the server's port (by
//! cookie, by accept order, by a UDP setup) or to a socket of the test's own, until all are in.

use super::SessionDriver;
use crate::admission::DataConn;
use crate::dataplane::{DataSocket, DataStream};
use crate::error::ServerSessionError;
use crate::server_shared::bind_udp;
use crate::tcp_setup::post_connect;
use netchar_model::{Flow, Role, TestSpec};
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::mpsc;
use std::time::Instant;

/// Data streams queued for a test before its control thread takes them: a test has at most
/// 2 × MAX_STREAMS; more queued means a flood of copies, which are dropped.
pub(super) const ROUTE_QUEUE: usize = 2 * netchar_model::spec::MAX_STREAMS as usize + 16;

/// The test's data streams as they arrive, until all are in.
#[derive(Default)]
pub(super) struct StreamArrivals {
    /// Where the admission registry routes the test's streams; `None` once all are in.
    pub(super) data_rx: Option<mpsc::Receiver<DataConn>>,
    /// TCP data connections numbered by accept order (iperf3's), held until all are in.
    pub(super) in_order: Vec<(u64, TcpStream)>,
    /// The test's own data socket (ServerRequest::own_data_port) until its streams are in.
    pub(super) own: Option<OwnSocket>,
    /// The streams in so far, for the workers.
    pub(super) streams: Vec<DataStream>,
    /// Where each stream came from, for the log.
    pub(super) data_paths: Vec<(u32, SocketAddr)>,
    /// Data connections and setup datagrams refused for this test.
    pub(super) refused_data: u64,
    /// When every data stream was in: this end's clock for the test.
    pub(super) ready_at: Option<Instant>,
    /// The control connection, kept for a session whose control connection is the test's data
    /// stream (SessionDriver::serve_data_connection) until it hands it to the workers.
    pub(super) control_stream: Option<TcpStream>,
    /// The control connection is the workers' stream: the driver reads it no more.
    pub(super) control_is_data: bool,
}

/// A test's own data socket (crate::server_control::ServerRequest::own_data_port).
pub(super) enum OwnSocket {
    /// A listener (TCP tests; crr's, which its responder keeps).
    Tcp(TcpListener),
    /// A UDP socket waiting for the client's first datagram.
    Udp(UdpSocket),
}

impl OwnSocket {
    /// Binds `at` (a TCP listener, or a UDP socket with `udp`), non-blocking, with `window`
    /// as both buffers when given (accepted connections inherit them; UDP otherwise gets
    /// buffers sized for high rates). Returns the port and the buffers the kernel set
    /// (SO_SNDBUF, SO_RCVBUF).
    pub(super) fn bind(at: SocketAddr, udp: bool, window: Option<u64>) -> io::Result<(Self, u16, (u32, u32))> {
        use socket2::{Domain, Socket, Type};
        let socket = Socket::new(Domain::for_address(at), if udp { Type::DGRAM } else { Type::STREAM }, None)?;
        if !udp {
            socket.set_reuse_address(true)?;
        }
        if at.is_ipv6() {
            socket.set_only_v6(false)?;
        }
        let size = window.map_or(if udp { 8 << 20 } else { 0 }, |w| w.min(i32::MAX as u64) as usize);
        if size > 0 {
            // Best effort, as for every other socket: the kernel caps at its maximum.
            let _ = socket.set_send_buffer_size(size);
            let _ = socket.set_recv_buffer_size(size);
        }
        socket.bind(&at.into())?;
        if !udp {
            socket.listen(128)?;
        }
        socket.set_nonblocking(true)?;
        let port = socket.local_addr()?.as_socket().map_or(0, |a| a.port());
        let buffers = (socket.send_buffer_size()? as u32, socket.recv_buffer_size()? as u32);
        let own = if udp { Self::Udp(socket.into()) } else { Self::Tcp(socket.into()) };
        Ok((own, port, buffers))
    }
}

impl SessionDriver<'_> {
    /// Takes the data streams routed here; says so when all have arrived.
    pub(super) fn collect_streams(&mut self) -> Result<(), ServerSessionError> {
        // Streams are numbered and counted as the workers run the test.
        let (Some(rx), Some(spec)) = (&self.arrivals.data_rx, self.test.run.clone().or_else(|| self.test.spec.clone()))
        else {
            return Ok(());
        };
        let expected = spec.total_streams() as usize;
        let mut arrived = Vec::new();
        while let Ok(conn) = rx.try_recv() {
            arrived.push(conn);
        }
        for conn in arrived {
            let (id, socket) = match conn {
                DataConn::Tcp(id, socket) => {
                    if self.arrivals.streams.iter().any(|s| s.id == id) {
                        return Err(ServerSessionError::Streams(format!("two data connections for stream {id}")));
                    }
                    (id, socket)
                }
                DataConn::TcpInOrder(order, socket) => {
                    if self.arrivals.in_order.len() + self.arrivals.streams.len() >= expected {
                        return Err(ServerSessionError::Streams("more data connections than the test has".into()));
                    }
                    self.arrivals.in_order.push((order, socket));
                    continue;
                }
                DataConn::Udp(id, from) => {
                    // Setup datagrams are repeated until the test starts: extra copies are
                    // expected.
                    if self.arrivals.streams.iter().any(|s| s.id == id) {
                        continue;
                    }
                    self.add_udp(id, from, None, &spec)?;
                    continue;
                }
                DataConn::UdpHello(from, hello) => {
                    // Repeated hellos from a stream already in: not a new stream.
                    if self.arrivals.data_paths.iter().any(|(_, a)| *a == from) {
                        continue;
                    }
                    let id = self.arrivals.streams.len() as u32 + 1;
                    self.add_udp(id, from, self.session.udp_answer(&hello), &spec)?;
                    continue;
                }
            };
            self.add_tcp(id, socket, &spec)?;
        }
        self.collect_own(&spec, expected)?;
        if !self.arrivals.in_order.is_empty() && self.arrivals.in_order.len() + self.arrivals.streams.len() == expected
        {
            // Numbered by the listener's accept order, as the client connected them.
            self.arrivals.in_order.sort_by_key(|(order, _)| *order);
            for (_, socket) in std::mem::take(&mut self.arrivals.in_order) {
                let id = self.arrivals.streams.len() as u32 + 1;
                self.add_tcp(id, socket, &spec)?;
            }
        }
        if self.arrivals.streams.len() == expected {
            // Before this end's clock starts: the snapshot takes a few tenths of a millisecond.
            if let Some(p) = &mut self.workers.evidence {
                p.start();
            }
            let now = Instant::now();
            self.arrivals.ready_at = Some(now);
            // No more data streams for this test: late copies of UDP setup datagrams must not
            // open a second socket for a stream (it would take the stream's traffic).
            self.arrivals.data_rx = None;
            self.arrivals.own = None;
            self.session.streams_connected(now);
            // Out at once: this end's clock started now.
            self.flush()?;
        }
        Ok(())
    }

    /// Takes the streams that come to the test's own data socket: connections from the
    /// client's address (others are closed and counted) or, for UDP, the first datagram from
    /// it, only looked at (it is the test's first datagram), to whose sender the socket is then
    /// connected. A datagram from anywhere else is read and dropped; the reflection guard's
    /// source rule applies to it first (crate::reflection).
    pub(super) fn collect_own(&mut self, spec: &TestSpec, expected: usize) -> Result<(), ServerSessionError> {
        let Some(own) = self.arrivals.own.take() else { return Ok(()) };
        let (client, policy) = (self.peer.ip(), self.shared.cfg.data_paths.clone());
        match own {
            OwnSocket::Tcp(listener) => {
                while self.arrivals.streams.len() < expected {
                    match listener.accept() {
                        Ok((socket, from)) if policy.allows(client, from.ip()) => {
                            socket.set_nonblocking(false).map_err(ServerSessionError::io("a data connection"))?;
                            let id = self.arrivals.streams.len() as u32 + 1;
                            self.add_tcp(id, socket, spec)?;
                        }
                        Ok(_) => self.arrivals.refused_data += 1,
                        Err(e) if crate::is_retry(&e) => break,
                        Err(e) => return Err(ServerSessionError::io("the test's data listener failed")(e)),
                    }
                }
                if self.arrivals.streams.len() < expected {
                    self.arrivals.own = Some(OwnSocket::Tcp(listener));
                }
            }
            OwnSocket::Udp(socket) => {
                let mut first = [0u8; 1];
                loop {
                    let from = match socket.peek_from(&mut first) {
                        Ok((_, from)) => from,
                        Err(e) if crate::is_retry(&e) => {
                            self.arrivals.own = Some(OwnSocket::Udp(socket));
                            return Ok(());
                        }
                        // ICMP errors of earlier sends surface here: nothing to take.
                        Err(_) => {
                            let _ = socket.recv_from(&mut first);
                            continue;
                        }
                    };
                    if self.shared.guard.check_source(from).is_ok() && policy.allows(client, from.ip()) {
                        let id = self.arrivals.streams.len() as u32 + 1;
                        let flow = spec.flow_of(id).ok_or_else(|| {
                            ServerSessionError::Streams(format!("UDP stream {id}, which the test does not have"))
                        })?;
                        let role = if flow == Flow::Up { Role::Receiver } else { Role::Sender };
                        crate::tcp_setup::connect_udp(&socket, from, spec)
                            .map_err(|f| f.to_string())
                            .and_then(|_| socket.set_nonblocking(false).map_err(|e| e.to_string()))
                            .map_err(|e| ServerSessionError::Data(format!("UDP stream {id} from {from}: {e}")))?;
                        self.arrivals.data_paths.push((id, from));
                        self.arrivals.streams.push(DataStream { id, flow, role, socket: DataSocket::Udp(socket) });
                        return Ok(());
                    }
                    let _ = socket.recv_from(&mut first);
                    self.arrivals.refused_data += 1;
                }
            }
        }
        Ok(())
    }

    /// The session's control connection becomes the test's data stream 1
    /// (ServerControlEvent::ControlIsData): from here the workers read and write it.
    pub(super) fn control_is_data(&mut self) -> Result<(), ServerSessionError> {
        let spec = self.test.run.clone().or_else(|| self.test.spec.clone());
        let (Some(socket), Some(spec)) = (self.arrivals.control_stream.take(), spec) else {
            return Err(ServerSessionError::Streams(
                "the session asked for its control connection as a data stream: it has none, or no test".into(),
            ));
        };
        socket.set_read_timeout(None).map_err(ServerSessionError::io("the test's connection"))?;
        self.arrivals.control_is_data = true;
        self.add_tcp(1, socket, &spec)
    }

    fn add_tcp(&mut self, id: u32, socket: TcpStream, spec: &TestSpec) -> Result<(), ServerSessionError> {
        let flow = spec.flow_of(id).ok_or_else(|| {
            ServerSessionError::Streams(format!("data connection for stream {id}, which the test does not have"))
        })?;
        let role = if flow == Flow::Up { Role::Receiver } else { Role::Sender };
        post_connect(&socket, spec, role)
            .map_err(|e| ServerSessionError::Data(format!("stream {id}: {}: {}", e.flag, e.message)))?;
        if let Ok(from) = socket.peer_addr() {
            self.arrivals.data_paths.push((id, from));
        }
        self.arrivals.streams.push(DataStream { id, flow, role, socket: DataSocket::Tcp(socket) });
        Ok(())
    }

    /// A UDP socket on the control connection's port connected to `peer` (the kernel gives it
    /// the stream's datagrams before the listener), answering the stream's hello if the
    /// protocol does.
    fn add_udp(
        &mut self,
        id: u32,
        peer: SocketAddr,
        answer: Option<Vec<u8>>,
        spec: &TestSpec,
    ) -> Result<(), ServerSessionError> {
        let flow = spec
            .flow_of(id)
            .ok_or_else(|| ServerSessionError::Streams(format!("UDP stream {id}, which the test does not have")))?;
        let role = if flow == Flow::Up { Role::Receiver } else { Role::Sender };
        let local = self.link.local_addr().map_err(ServerSessionError::io("the control connection's address"))?;
        let socket = bind_udp(SocketAddr::new(self.shared.cfg.bind.ip(), local.port()))
            .map_err(crate::tcp_setup::ConnectFailure::Io)
            .and_then(|s| crate::tcp_setup::connect_udp(&s, peer, spec).map(|_| s))
            .map_err(|e| ServerSessionError::Data(format!("cannot open UDP stream {id} to {peer}: {e}")))?;
        crate::tcp_setup::size_udp_buffers(&socket);
        if let Some(answer) = answer {
            socket.send(&answer).map_err(ServerSessionError::io(format!("UDP stream {id}")))?;
        }
        self.arrivals.data_paths.push((id, peer));
        self.arrivals.streams.push(DataStream { id, flow, role, socket: DataSocket::Udp(socket) });
        Ok(())
    }
}
