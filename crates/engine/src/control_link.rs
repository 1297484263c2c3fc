//! The byte pipe a driver runs a control session over: a TCP connection in the product, an
//! in-memory pair in the engine's unit tests, which drive the client and server drivers
//! against each other without a socket for the control exchange (the data plane still runs
//! on loopback).
//!
//! Below both drivers (crate::client, crate::server_session) and naming neither.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
#[cfg(test)]
use std::sync::atomic::{AtomicBool, Ordering};
#[cfg(test)]
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// One end of a control connection, as a driver uses it.
pub(crate) trait ControlLink: Send {
    /// Reads what the peer sent, waiting at most `wait` for something to arrive: `Ok(0)` once
    /// the peer closed its end, an error that [`crate::is_retry`] accepts when nothing came.
    fn read_within(&mut self, buf: &mut [u8], wait: Duration) -> io::Result<usize>;
    /// Sends all of `bytes`, or fails.
    fn send_all(&mut self, bytes: &[u8]) -> io::Result<()>;
    /// This end's address: the server binds a test's own data sockets beside it.
    fn local_addr(&self) -> io::Result<SocketAddr>;
    /// Closes this end gently: whatever the peer still sends is read until it closes or a
    /// short while passes, so that the peer gets what was sent last.
    fn close_gently(&mut self);
}

/// What [`ControlLink::close_gently`] reads of a peer at most once this end has closed.
const GENTLE_CLOSE_MAX_BYTES: usize = 1 << 20;

impl ControlLink for TcpStream {
    fn read_within(&mut self, buf: &mut [u8], wait: Duration) -> io::Result<usize> {
        let _ = self.set_read_timeout(Some(wait.max(Duration::from_millis(1))));
        self.read(buf)
    }
    fn send_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.write_all(bytes)
    }
    fn local_addr(&self) -> io::Result<SocketAddr> {
        TcpStream::local_addr(self)
    }
    /// This side first, then the peer's bytes are read until it closes (2 s and 1 MiB at
    /// most). Closing with unread bytes would send a reset, and a reset makes the peer's kernel
    /// drop the answers it has not read yet. A peer that sends more than a control exchange
    /// after this end closed is streaming, not reading answers (another protocol's client on
    /// a netio port, a test that ran past the server's limit): it gets the reset at once
    /// rather than two seconds of a server that still takes its bytes.
    fn close_gently(&mut self) {
        let _ = self.shutdown(Shutdown::Write);
        let deadline = Instant::now() + Duration::from_secs(2);
        let (mut buf, mut drained) = ([0u8; 4096], 0usize);
        while Instant::now() < deadline && drained < GENTLE_CLOSE_MAX_BYTES {
            match self.read_within(&mut buf, Duration::from_millis(100)) {
                Ok(0) => return,
                Ok(n) => drained += n,
                Err(e) if crate::is_retry(&e) => {}
                Err(_) => return,
            }
        }
    }
}

/// One end of an in-memory control connection ([`MemoryLink::pair`]): what one end sends,
/// the other reads, in order; dropping or closing an end is the peer's end of file.
#[cfg(test)]
pub(crate) struct MemoryLink {
    incoming: mpsc::Receiver<Vec<u8>>,
    outgoing: Option<mpsc::Sender<Vec<u8>>>,
    /// Bytes received and not read yet.
    pending: Vec<u8>,
    local: SocketAddr,
    /// Set by [`LinkCut::cut`]: both ends see the connection gone.
    cut: Arc<AtomicBool>,
}

/// Breaks a [`MemoryLink`] pair from outside, as a peer that dies does: both ends read end of
/// file and fail to send from then on.
#[derive(Clone)]
#[cfg(test)]
pub(crate) struct LinkCut(Arc<AtomicBool>);

#[cfg(test)]
impl LinkCut {
    /// Cuts the connection.
    pub(crate) fn cut(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[cfg(test)]
impl MemoryLink {
    /// Two joined ends, each claiming `local` as its address, and the switch that cuts them.
    pub(crate) fn pair(local: SocketAddr) -> (Self, Self, LinkCut) {
        let (to_b, from_a) = mpsc::channel();
        let (to_a, from_b) = mpsc::channel();
        let cut = Arc::new(AtomicBool::new(false));
        let end = |incoming, outgoing| Self {
            incoming,
            outgoing: Some(outgoing),
            pending: Vec::new(),
            local,
            cut: cut.clone(),
        };
        (end(from_b, to_b), end(from_a, to_a), LinkCut(cut.clone()))
    }

    fn is_cut(&self) -> bool {
        self.cut.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
impl ControlLink for MemoryLink {
    fn read_within(&mut self, buf: &mut [u8], wait: Duration) -> io::Result<usize> {
        if self.is_cut() {
            return Ok(0);
        }
        if self.pending.is_empty() {
            match self.incoming.recv_timeout(wait) {
                Ok(bytes) => self.pending = bytes,
                Err(mpsc::RecvTimeoutError::Timeout) => return Err(io::ErrorKind::TimedOut.into()),
                Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(0),
            }
        }
        let n = buf.len().min(self.pending.len());
        buf[..n].copy_from_slice(&self.pending[..n]);
        self.pending.drain(..n);
        Ok(n)
    }
    fn send_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match &self.outgoing {
            Some(tx) if !self.is_cut() => tx.send(bytes.to_vec()).map_err(|_| io::ErrorKind::BrokenPipe.into()),
            _ => Err(io::ErrorKind::BrokenPipe.into()),
        }
    }
    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }
    fn close_gently(&mut self) {
        self.outgoing = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_one_end_sends_the_other_reads_in_order_until_it_closes() {
        let (mut a, mut b, _) = MemoryLink::pair("127.0.0.1:9".parse().unwrap());
        a.send_all(b"hello ").unwrap();
        a.send_all(b"world").unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4];
        while got.len() < 11 {
            let n = b.read_within(&mut buf, Duration::from_secs(5)).unwrap();
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(got, b"hello world");
        let nothing = b.read_within(&mut buf, Duration::from_millis(1)).unwrap_err();
        assert!(crate::is_retry(&nothing), "{nothing:?}");
        a.close_gently();
        assert_eq!(b.read_within(&mut buf, Duration::from_secs(5)).unwrap(), 0);
        drop(b);
        assert_eq!(a.send_all(b"late").unwrap_err().kind(), io::ErrorKind::BrokenPipe);
    }

    #[test]
    fn a_cut_link_is_closed_for_both_ends() {
        let (mut a, mut b, cut) = MemoryLink::pair("127.0.0.1:9".parse().unwrap());
        a.send_all(b"unread").unwrap();
        cut.cut();
        let mut buf = [0u8; 8];
        assert_eq!(b.read_within(&mut buf, Duration::from_secs(5)).unwrap(), 0);
        assert!(b.send_all(b"x").is_err() && a.send_all(b"y").is_err());
        assert_eq!(a.read_within(&mut buf, Duration::from_secs(5)).unwrap(), 0);
    }
}
