//! iperf2 and lwIP's lwiperf, both roles. The codecs are netchar_wire::iperf2.
//!
//! Client ([`Iperf2Control`], client.rs): iperf2 has no control connection
//! (`ControlConnection::None`); each data stream carries the test's settings itself:
//! - TCP up: a 24-byte 2.0.5-style header with flags 0 (no dial-back, no version ack to
//!   read), then netchar's data; the server counts every byte, the header's included. iperf2
//!   sends no TCP report back, so every figure is netchar's;
//! - TCP down (`-R`): 2.1's header with VERSION2 and the REVERSE flag (iperf 2.1+ servers):
//!   the server sends on the client's connection for `-t` and closes;
//! - UDP up: every datagram carries iperf2's 16-byte header (64-bit sequence numbers, wall
//!   clock stamps) and 2.1's UDP client header; the sender ends with the FIN, repeated until the
//!   server's report comes back on the same socket (the sender's end exchange,
//!   netchar_wire::datagram::DatagramFormat::end_datagram). The report's bytes, loss,
//!   out-of-order count and jitter are the far end's figures;
//! - lwiperf (`--proto lwiperf`): TCP up only, the 24-byte header twice as lwiperf's own client
//!   sends it; lwiperf reports nothing back.
//!
//! Server ([`Iperf2Listener`], server.rs, and its sessions, session.rs, on the one server
//! driver): `netchar server --iperf2` answers `iperf -c` over TCP (each connection a session
//! whose header is its request and whose connection then is the test's stream, counted as
//! iperf2 counts it) and UDP (a session per client source, the FIN answered with the server
//! report built from netchar's own counters).

mod client;
mod server;
mod session;

pub use client::{check_spec, Flavour, Iperf2Control};
pub(crate) use client::{far_end_applies, iperf2_session, lwiperf_session, measurement, measurement_lwiperf};
pub(crate) use server::bind_listener;
pub use server::Iperf2Listener;
pub use session::to_spec;
#[cfg(test)]
pub(crate) use session::{TcpSession, UdpSession};
