//! The UDP datagram formats the workers speak, and the seam a peer protocol's own format comes
//! in by. The data plane holds no protocol's header code: netchar's own format and the
//! protocol-neutral unsequenced one are netchar_wire::datagram's, and every peer protocol's
//! format (iperf2's, iperf3's, the echo service's, netio's) is built by its protocol's adapter
//! for each worker ([`PeerDatagrams`]).
//!
//! A format is chosen once per worker, and the worker's loop is monomorphised over it
//! ([`UdpWorker::run`]): no `dyn` call per datagram.

use super::integrity::UdpPayload;
use super::{udp, Controls, StreamShared};
use netchar_model::{Role, TestSpec};
use netchar_wire::datagram::{DatagramFormat, NativeFormat, UnsequencedFormat};
use std::io;
use std::net::UdpSocket;
use std::time::Instant;

/// How a test's UDP datagrams carry sequence numbers and send times.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DatagramFormatKind {
    /// netchar's own 24-byte header (netchar_wire::datagram).
    #[default]
    Native,
    /// A format its protocol's adapter builds for each worker.
    Peer(PeerDatagrams),
    /// A peer whose datagrams carry nothing of netchar's (netchar_wire::datagram::
    /// UnsequencedFormat): receivers count datagrams and bytes in arrival order, an empty
    /// datagram ends a stream, senders end theirs with `end_marks` empty datagrams, and UDP rr
    /// takes each answer for the oldest request (the peer echoes no sequence key).
    Unsequenced {
        /// Empty datagrams a sender (or rr requester) sends after its last one.
        end_marks: u32,
    },
}

impl DatagramFormatKind {
    /// Whether a UDP rr peer echoes the leading bytes of each request (the requester's
    /// sequence key) in its answer; when not, answers are taken in order.
    pub(super) fn echoes_rr_keys(self) -> bool {
        !matches!(self, Self::Unsequenced { .. })
    }

    /// Whether an empty datagram ends the stream (and how many a sender sends): None for
    /// formats whose streams end otherwise.
    pub(super) fn end_marks(self) -> Option<u32> {
        match self {
            Self::Unsequenced { end_marks } => Some(end_marks),
            _ => None,
        }
    }
}

/// A peer protocol's UDP format, built by the protocol's adapter for each worker: `run` builds
/// the format from what the worker is (its spec, its role, its socket, its start) and runs the
/// worker over it with [`UdpWorker::run`].
#[derive(Clone, Copy)]
pub struct PeerDatagrams {
    /// The protocol, as its registry entry names it (crate::protocols).
    pub protocol: &'static str,
    /// A setting of the protocol's format that the worker does not know from its spec, as the
    /// adapter chose it ([`UdpWorker::variant`]; iperf3: 64-bit sequence numbers); 0 for none.
    pub variant: u32,
    /// Builds the worker's format and runs the worker over it.
    pub run: fn(UdpWorker<'_>) -> io::Result<()>,
}

impl std::fmt::Debug for PeerDatagrams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerDatagrams").field("protocol", &self.protocol).finish_non_exhaustive()
    }
}

/// One protocol's format is one function: compared by the protocol's name and variant
/// (function pointers have no reliable identity).
impl PartialEq for PeerDatagrams {
    fn eq(&self, other: &Self) -> bool {
        (self.protocol, self.variant) == (other.protocol, other.variant)
    }
}

impl Eq for PeerDatagrams {}

/// One UDP worker, ready to run over a format: what a [`PeerDatagrams`] builds its format from.
pub struct UdpWorker<'a> {
    pub(super) shared: &'a StreamShared,
    pub(super) controls: &'a Controls,
    pub(super) spec: &'a TestSpec,
    pub(super) started: Instant,
    pub(super) socket: &'a UdpSocket,
    /// [`PeerDatagrams::variant`] of the format the worker runs (0 for the others).
    pub(super) variant: u32,
    /// What the sender writes behind each header and the receiver compares (`--payload`,
    /// `--verify`).
    pub(super) payload: UdpPayload,
}

impl UdpWorker<'_> {
    /// The test.
    pub fn spec(&self) -> &TestSpec {
        self.spec
    }

    /// Whether this worker sends (else it receives).
    pub fn is_sender(&self) -> bool {
        self.shared.role == Role::Sender
    }

    /// The setting its protocol's adapter chose for the format ([`PeerDatagrams::variant`]).
    pub fn variant(&self) -> u32 {
        self.variant
    }

    /// The worker's connected socket (its peer's address names the peer's port).
    pub fn socket(&self) -> &UdpSocket {
        self.socket
    }

    /// The realtime clock's reading (ns since the epoch) at the worker's start, on which
    /// formats with wall-clock stamps place their datagrams.
    pub fn realtime_start_ns(&self) -> u64 {
        udp::realtime_at(self.started)
    }

    /// Runs the worker's loop (sending or receiving) over `format`, to the stream's end.
    pub fn run<F: DatagramFormat>(self, format: &F) -> io::Result<()> {
        let Self { shared, controls, spec, started, socket, payload, .. } = self;
        match shared.role {
            Role::Sender => udp::send(format, shared, controls, spec, started, socket, &payload),
            Role::Receiver => udp::receive(format, shared, controls, spec, started, socket, &payload),
        }
    }

    /// Runs the worker over the format `kind` names.
    pub(super) fn run_kind(self, kind: DatagramFormatKind) -> io::Result<()> {
        match kind {
            DatagramFormatKind::Native => self.run(&NativeFormat),
            DatagramFormatKind::Peer(peer) => (peer.run)(Self { variant: peer.variant, ..self }),
            DatagramFormatKind::Unsequenced { end_marks } => self.run(&UnsequencedFormat::new(end_marks)),
        }
    }
}
