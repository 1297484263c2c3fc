//! The link of a session opened by a datagram (iperf2's UDP test): one UDP source's datagrams,
//! which the listener reads from its shared socket and hands over one by one, as the
//! session's control input; what the session sends goes back to that source from the
//! listener's socket, only as far as the reflection guard lets it (the listener's check).

use crate::control_link::ControlLink;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Datagrams queued for a session before its thread reads them; beyond this many, the
/// listener drops them (the session counts them lost, as a full socket buffer would).
pub(crate) const DATAGRAM_QUEUE: usize = 4096;

/// Whether the guard lets `bytes` go back to the source now.
pub(crate) type AnswerCheck = Box<dyn Fn(usize) -> bool + Send>;

/// The session's end: reads one datagram per read, each with its arrival time
/// ([`DatagramLink::arrivals`]).
pub(crate) struct DatagramLink {
    incoming: mpsc::Receiver<(SystemTime, Vec<u8>)>,
    socket: UdpSocket,
    source: SocketAddr,
    may_answer: AnswerCheck,
    /// The listener's receive time of the datagram read last, in ns since the Unix epoch.
    arrived_ns: Arc<AtomicU64>,
}

/// The listener's end: where the source's datagrams go.
pub(crate) struct DatagramSource {
    tx: mpsc::SyncSender<(SystemTime, Vec<u8>)>,
}

/// What handing a datagram to its session came to.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Handed {
    /// Queued for the session.
    Queued,
    /// The session is behind: the datagram was dropped.
    Dropped,
    /// The session is over.
    Over,
}

impl DatagramLink {
    /// A link for `source`'s datagrams, answering from `socket` (a clone of the listener's)
    /// when `may_answer` allows; and the listener's end.
    pub(crate) fn new(socket: UdpSocket, source: SocketAddr, may_answer: AnswerCheck) -> (Self, DatagramSource) {
        let (tx, incoming) = mpsc::sync_channel(DATAGRAM_QUEUE);
        let link = Self { incoming, socket, source, may_answer, arrived_ns: Arc::default() };
        (link, DatagramSource { tx })
    }

    /// The receive time of the datagram the session is handling, as the listener read it (ns
    /// since the Unix epoch): a session that measures jitter takes it from here, not from
    /// when its thread got to the datagram.
    pub(crate) fn arrivals(&self) -> Arc<AtomicU64> {
        self.arrived_ns.clone()
    }
}

impl DatagramSource {
    /// Hands `datagram`, received at `at`, to the session.
    pub(crate) fn hand(&self, at: SystemTime, datagram: &[u8]) -> Handed {
        match self.tx.try_send((at, datagram.to_vec())) {
            Ok(()) => Handed::Queued,
            Err(mpsc::TrySendError::Full(_)) => Handed::Dropped,
            Err(mpsc::TrySendError::Disconnected(_)) => Handed::Over,
        }
    }
}

impl ControlLink for DatagramLink {
    fn read_within(&mut self, buf: &mut [u8], wait: Duration) -> io::Result<usize> {
        match self.incoming.recv_timeout(wait) {
            Ok((at, datagram)) => {
                let ns = at.duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos() as u64;
                self.arrived_ns.store(ns, Ordering::Relaxed);
                let n = datagram.len().min(buf.len());
                buf[..n].copy_from_slice(&datagram[..n]);
                Ok(n)
            }
            Err(mpsc::RecvTimeoutError::Timeout) => Err(io::ErrorKind::TimedOut.into()),
            // The listener let the source go (it is stopping).
            Err(mpsc::RecvTimeoutError::Disconnected) => Ok(0),
        }
    }
    /// One datagram to the source, if the reflection guard allows it; a datagram held back is
    /// not an error (the listener logs the first refusal).
    fn send_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        if (self.may_answer)(bytes.len()) {
            self.socket.send_to(bytes, self.source)?;
        }
        Ok(())
    }
    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }
    fn close_gently(&mut self) {}
}
