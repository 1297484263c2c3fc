//! netchar's native control protocol, version 1, sans-IO (docs/protocol.md).
//!
//! Layers, each usable without a socket or a clock:
//! - [`hello`]: the fixed 40-byte hello that opens every connection, control or data, and the
//!   recognition of peers that are not netchar (an iperf3 server, an SSH banner, ...);
//! - [`codec`]: length-prefixed frames with a hard size cap checked before allocation;
//! - [`message`]: the typed messages carried in frames;
//! - [`iperf2`]: iperf2's in-band headers and UDP server report, and lwiperf's use of them;
//! - [`iperf3`]: iperf3's control protocol, both sides, and its UDP header;
//! - [`netio`]: netio's CONTROL message, block framing, client and server state machines;
//! - [`netperf`]: netperf's control messages and OMNI tests, client and server state machines;
//! - [`nc_test`]: eCos nc_test_master / nc_test_slave, both roles;
//! - [`payload`]: the bytes senders write (`--payload`) and the receivers' check of them (`--verify`);
//! - [`services`]: echo, discard and chargen (RFC 862/863/864): the chargen pattern and checks;
//! - [`session`]: the client and server state machines. Time comes in as `now`; bytes come in
//!   through `handle_input` and go out through `poll_output`; what the driver must do comes out
//!   of `poll_event`.
//!
//! ```
//! use netchar_wire::hello::{Hello, Role};
//! let hello = Hello::control();
//! let bytes = hello.encode();
//! assert_eq!(Hello::decode(&bytes).unwrap(), hello);
//! assert_eq!(bytes.len(), netchar_wire::hello::HELLO_LEN);
//! assert_eq!(hello.role, Role::Control);
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod auth;
pub mod codec;
pub mod datagram;
pub mod hello;
pub mod iperf2;
pub mod iperf3;
pub mod irtt;
pub mod known;
pub mod message;
pub mod nc_test;
pub mod netio;
pub mod netperf;
pub mod payload;
pub mod services;
pub mod session;

/// The control protocol version this build speaks.
///
/// v2: the server hello carries a nonce and the authentication flag, requests may carry a
/// proof, and UDP setup needs a return-routability check (docs/protocol.md).
pub const PROTOCOL_VERSION: u16 = 2;

/// Everything that can go wrong while decoding or sequencing the control protocol.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
pub enum ProtocolError {
    /// The peer's first bytes are not a netchar hello; the string says what they look like.
    #[error("the peer is not a netchar server: {0}")]
    NotNetchar(String),
    /// The peer's first bytes are another protocol's, one netchar also speaks.
    #[error("the peer is not a netchar server: {what}")]
    PeerProtocol {
        /// The protocol its answer is ([`hello::recognised_protocol`]).
        protocol: known::KnownProtocol,
        /// What it answered.
        what: String,
    },
    /// The peer accepted the connection but sent nothing before the hello's deadline (one of
    /// [`known::SILENT_SERVERS`], which wait for their client's first bytes, or another service).
    #[error(
        "the peer is not a netchar server: no netchar hello within {:.0} s: the peer accepted the connection and \
         said nothing, as {} does",
        waited.as_secs_f64(),
        known::SILENT_SERVERS
    )]
    Silent {
        /// How long it was given.
        waited: std::time::Duration,
    },
    /// The peer speaks another protocol version.
    #[error("the peer speaks netchar control protocol v{peer}, this netchar speaks v{ours}; run the same netchar version on both ends")]
    Version {
        /// The peer's version.
        peer: u16,
        /// Ours.
        ours: u16,
    },
    /// A frame announced more bytes than the cap.
    #[error("control message of {len} bytes exceeds the {max}-byte limit")]
    Oversize {
        /// Announced length.
        len: u32,
        /// The cap.
        max: u32,
    },
    /// A frame's payload is not a valid message.
    #[error("malformed control message: {0}")]
    Malformed(String),
    /// A valid message arrived in a state where it makes no sense.
    #[error("unexpected {message} while {state}")]
    Unexpected {
        /// The message's name.
        message: &'static str,
        /// The state's description.
        state: &'static str,
    },
    /// The peer stayed silent for longer than the phase allows.
    #[error("{0}")]
    Timeout(String),
    /// Authentication was missing, failed, or the peer could not prove its key.
    #[error("{0}")]
    Auth(String),
    /// The server turned the test down for good (an option it does not run, a limit the test
    /// exceeds); the string is its reason.
    #[error("the server rejected the test: {0}")]
    Rejected(String),
    /// The peer reported an error and ended the test.
    #[error("{0}")]
    Peer(String),
}
