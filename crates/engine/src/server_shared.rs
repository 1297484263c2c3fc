//! What the native server and every peer-protocol server of one process share: the server's
//! settings ([`ServerConfig`]), its log ([`ServerLog`], [`TestLog`]), the state every
//! connection thread reads ([`Shared`]: the admission registry, the reflection guard, the stop
//! flag) and the UDP socket they bind alike ([`bind_udp`]).
//!
//! It sits below both crate::server (the listener, which builds a [`Shared`] and starts the
//! peer listeners) and crate::peers (the adapters, which admit and log through it), so that
//! neither reaches into the other for them: server.rs re-exports the public types, whose path
//! stays `netchar_engine::server::ServerConfig`.

use crate::admission::{DataPathPolicy, Limits, Registry};
use crate::reflection::{PeerPolicy, ReflectionGuard};
use crate::StopFlag;
use netchar_model::{StreamRecord, TestSpec};
use netchar_wire::auth::KeyTable;
use netchar_wire::session::Timeouts;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;

/// How the server runs.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address to listen on; `[::]` takes IPv4 and IPv6.
    pub bind: SocketAddr,
    /// Exit after the first test.
    pub one_off: bool,
    /// Control protocol timeouts.
    pub timeouts: Timeouts,
    /// What the server admits.
    pub limits: Limits,
    /// Users allowed to run tests; `None`: anyone who reaches the port.
    pub keys: Option<Arc<KeyTable>>,
    /// Where data streams may come from besides the control connection's address.
    pub data_paths: DataPathPolicy,
    /// Who may receive unprompted UDP from the peer protocols (crate::reflection).
    pub peer_policy: PeerPolicy,
}

impl ServerConfig {
    /// A server on `bind` with the default limits and no authentication.
    pub fn new(bind: SocketAddr) -> Self {
        Self {
            bind,
            one_off: false,
            timeouts: Timeouts::default(),
            limits: Limits::default(),
            keys: None,
            data_paths: DataPathPolicy::default(),
            peer_policy: PeerPolicy::default(),
        }
    }
}

/// What the server did, for its log (one line each).
#[derive(Debug, Clone)]
pub enum ServerLog {
    /// A test ended (well or not).
    Test(Box<TestLog>),
    /// A connection or request was turned away before any test.
    Rejected {
        /// Who.
        peer: SocketAddr,
        /// Why.
        reason: String,
    },
}

/// One test as the server saw it.
#[derive(Debug, Clone)]
pub struct TestLog {
    /// The protocol the client spoke: "netchar", or a peer protocol's name ("iperf3", ...).
    pub protocol: &'static str,
    /// The client's software and version as it told them (`netchar 0.1.0`, `iperf3 3.12`).
    pub peer_software: Option<String>,
    /// The client's control connection.
    pub peer: SocketAddr,
    /// Where each data stream came from (TCP) or was sent to (UDP), by stream id.
    pub data_paths: Vec<(u32, SocketAddr)>,
    /// The authenticated user.
    pub user: Option<String>,
    /// The test it ran.
    pub spec: TestSpec,
    /// The server's records of every stream.
    pub streams: Vec<StreamRecord>,
    /// Tests running at once, this one included.
    pub concurrent_tests: u32,
    /// Data connections and setup datagrams refused for this test (wrong address, bad tag).
    pub refused_data: u64,
    /// Why it ended early, if it did.
    pub error: Option<String>,
}

pub(crate) type Logger = Arc<dyn Fn(ServerLog) + Send + Sync>;

/// What every connection thread and peer-protocol server shares.
pub(crate) struct Shared {
    pub(crate) registry: Registry,
    pub(crate) cfg: ServerConfig,
    pub(crate) log: Logger,
    pub(crate) stop: StopFlag,
    /// Every UDP listener's rules for answering (crate::reflection).
    pub(crate) guard: ReflectionGuard,
}

/// A UDP socket on the server's address and port that other sockets may share: the listener
/// for setup datagrams, and each test stream's socket connected to its client (the kernel
/// delivers to the connected socket first).
pub(crate) fn bind_udp(local: SocketAddr) -> io::Result<UdpSocket> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(local), Type::DGRAM, None)?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    if local.is_ipv6() {
        socket.set_only_v6(false)?;
    }
    socket.bind(&local.into())?;
    Ok(socket.into())
}
