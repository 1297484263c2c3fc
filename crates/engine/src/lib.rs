//! Runs netchar tests over real sockets.
//!
//! - [`client`]: connects to a server, drives its control protocol through the seam in
//!   [`control`] (netchar's own [`control::NativeClient`] first), opens the data streams as
//!   the protocol describes them and runs the local end of every stream;
//! - [`server`]: the listener that tells control from data connections by their hello, admits
//!   tests (`--max-concurrent`), and runs each test's server end in its own control thread,
//!   through the one driver of every protocol's server session (`server_session`, behind the
//!   seam in [`server_control`]);
//! - [`dataplane`]: the worker threads, one per stream, apart from the control sessions; they
//!   share nothing but a few atomic counters per stream, read by the collector once per tick;
//! - [`peers`]: servers of peer protocols (iperf3, ...) beside the native one, one admission;
//! - [`protocols`]: the one table of the protocols netchar speaks, both roles;
//! - [`registry`]: what a protocol entry is, and the client settings a session is made from;
//! - [`reflection`]: what every UDP listener may send to an address that has not proved itself;
//! - [`measure`]: CPU and host figures around a test;
//! - [`jobs`]: what runs many tests (repeats, searches, sweeps, plans, latency under load),
//!   yielding to a sink;
//! - [`error`]: the client's errors as kinds a caller matches (a silent peer, a busy server, a
//!   refused option, a peer of another kind, ...), never by their words.
//!
//! The modules are layered, each depending only on those below it (tests/module_graph.rs
//! fails on a cycle). At the very bottom is [`error`], which names nothing else of the engine.
//! Above it are the bases: [`admission`], [`dataplane`], the seams
//! ([`control`], [`server_control`]), [`measure`], [`reflection`]. Above them the registry's
//! types ([`registry`]) and the server's shared parts (`server_shared`: its settings, log and
//! state; `server_session`: the session driver). The adapters ([`peers`]) stand on those, never
//! on a driver; the table ([`protocols`]) lists the adapters; the drivers ([`client`],
//! [`server`]) read the table and start the adapters; the [`jobs`] (repeats, searches, sweeps,
//! plans, the netio and eCos suites, latency under load), which run many tests, stand on the
//! drivers. Types that moved down are re-exported where they were ([`client::ClientConfig`],
//! [`server::ServerConfig`], [`protocols::ProtocolDef`], ...).
//!
//! The engine never prints: live figures reach the caller through a callback, results as
//! [`netchar_model::TestResult`].
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod admission;
pub mod client;
pub mod control;
mod control_link;
pub mod dataplane;
#[cfg(test)]
mod driver_tests;
pub mod error;
mod evidence;
pub mod jobs;
pub mod load;
pub mod measure;
pub mod peers;
pub mod protocols;
pub mod reflection;
pub mod registry;
pub mod server;
pub mod server_control;
#[cfg(test)]
mod server_driver_tests;
mod server_session;
mod server_shared;
mod tcp_setup;

use std::sync::atomic::{AtomicBool, Ordering};

/// netchar's own port (TCP and UDP), the server's and the client's default.
pub const DEFAULT_PORT: u16 = 5300;
use std::sync::Arc;

/// True when a read or write on a socket with a timeout found nothing to do yet (timed out,
/// would block, interrupted): try again, the connection is fine.
pub(crate) fn is_retry(e: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted)
}

/// A flag that asks a running test or server to stop: set by SIGINT/SIGTERM handlers.
#[derive(Debug, Clone, Default)]
pub struct StopFlag(Arc<AtomicBool>);

impl StopFlag {
    /// A flag not yet raised.
    pub fn new() -> Self {
        Self::default()
    }
    /// Raises the flag.
    pub fn raise(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
    /// True once raised.
    pub fn is_raised(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
    /// The shared boolean, for `signal_hook::flag::register`.
    pub fn as_arc(&self) -> Arc<AtomicBool> {
        self.0.clone()
    }
}
