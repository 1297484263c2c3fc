//! A connected UDP socket as the driver's control link (`ControlConnection::Udp`): nc_test's
//! master sends its requests to the slave's port 7777 and reads the replies as datagrams.
//!
//! The link turns a datagram socket into the byte pipe the driver reads and writes: a send is
//! one datagram, a read one datagram (a reply longer than the driver's buffer is cut there, as
//! a stock master's fixed-size `recvfrom` cuts it). A datagram protocol never closes, so no
//! read is the end of file: an empty datagram and an ICMP refusal read as "nothing came" and
//! the session's own timeout decides when the peer is silent.

use crate::control_link::ControlLink;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

/// A UDP socket connected to the peer's control address.
pub(super) struct UdpControl(UdpSocket);

impl UdpControl {
    /// A socket bound to `local` (this end's address with `-B`, or any address of the
    /// peer's family) and connected to `peer`.
    pub(super) fn connect(local: Option<SocketAddr>, peer: SocketAddr) -> io::Result<Self> {
        let any: SocketAddr =
            if peer.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse().expect("literal addresses parse");
        let socket = UdpSocket::bind(local.map_or(any, |l| SocketAddr::new(l.ip(), 0)))?;
        socket.connect(peer)?;
        Ok(Self(socket))
    }
}

impl ControlLink for UdpControl {
    fn read_within(&mut self, buf: &mut [u8], wait: Duration) -> io::Result<usize> {
        self.0.set_read_timeout(Some(wait.max(Duration::from_millis(1))))?;
        match self.0.recv(buf) {
            // No datagram means "closed": an empty one is nothing the session can read.
            Ok(0) => Err(io::ErrorKind::WouldBlock.into()),
            // The kernel's note of an ICMP port unreachable for an earlier request: nothing
            // answers there (yet); the session's timeout says so in its words.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Err(io::ErrorKind::WouldBlock.into()),
            read => read,
        }
    }
    fn send_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self.0.send(bytes) {
            Ok(_) => Ok(()),
            // A refusal noted for an earlier datagram; this one went out.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => self.0.send(bytes).map(|_| ()),
            Err(e) => Err(e),
        }
    }
    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }
    /// Nothing to close: a datagram socket has no connection to end.
    fn close_gently(&mut self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_send_is_a_datagram_and_each_read_one_datagram() {
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut link = UdpControl::connect(None, peer.local_addr().unwrap()).unwrap();
        link.send_all(b"first").unwrap();
        link.send_all(b"second").unwrap();
        let mut buf = [0u8; 64];
        let (n, from) = peer.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"first");
        assert_eq!(from, link.local_addr().unwrap());
        peer.send_to(b"reply one", from).unwrap();
        peer.send_to(b"", from).unwrap();
        peer.send_to(b"two", from).unwrap();
        let n = link.read_within(&mut buf, Duration::from_secs(10)).unwrap();
        assert_eq!(&buf[..n], b"reply one");
        let empty = link.read_within(&mut buf, Duration::from_secs(10)).unwrap_err();
        assert!(crate::is_retry(&empty), "an empty datagram is nothing, not the end: {empty:?}");
        let n = link.read_within(&mut buf, Duration::from_secs(10)).unwrap();
        assert_eq!(&buf[..n], b"two");
    }

    #[test]
    fn a_refusal_reads_as_nothing_and_the_next_request_still_goes_out() {
        // A port nothing listens on: the kernel answers the first datagram with a refusal.
        let closed = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = closed.local_addr().unwrap();
        drop(closed);
        let mut link = UdpControl::connect(None, addr).unwrap();
        link.send_all(b"anyone?").unwrap();
        let mut buf = [0u8; 16];
        for _ in 0..3 {
            let e = link.read_within(&mut buf, Duration::from_millis(20)).unwrap_err();
            assert!(crate::is_retry(&e), "{e:?}");
        }
        link.send_all(b"again").unwrap();
    }
}
