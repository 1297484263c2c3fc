//! Free loopback ports for servers a test starts itself, never the same port twice in one test
//! process.
//!
//! A test that cannot have a server announce its port asks the kernel for one (bind port 0,
//! read it, close) and passes it on. Two threads doing that at once can be given the same port:
//! the second server then fails to listen, the first one's listener makes the second test
//! believe its own server is up, and the second test's client is refused once the first test
//! ends. Remembering every port handed out closes that race inside the process; a server that
//! still fails to bind (another process took the port) is the caller's to detect by its exit.

use std::collections::BTreeSet;
use std::net::{TcpListener, UdpSocket};
use std::sync::Mutex;

static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// What a port must be free for.
enum FreeFor {
    Tcp,
    Udp,
    TcpAndUdp,
}

/// A loopback port free for `what` at the time of the call, not handed out before by this
/// process.
fn fresh(what: FreeFor) -> u16 {
    loop {
        let port = match what {
            FreeFor::Udp => UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port(),
            FreeFor::Tcp | FreeFor::TcpAndUdp => TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port(),
        };
        if matches!(what, FreeFor::TcpAndUdp) && UdpSocket::bind(("127.0.0.1", port)).is_err() {
            continue;
        }
        if HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner()).insert(port) {
            return port;
        }
    }
}

/// A free TCP port on 127.0.0.1.
pub fn free_tcp_port() -> u16 {
    fresh(FreeFor::Tcp)
}

/// A free UDP port on 127.0.0.1.
pub fn free_udp_port() -> u16 {
    fresh(FreeFor::Udp)
}

/// A port free for both TCP and UDP on 127.0.0.1.
pub fn free_tcp_and_udp_port() -> u16 {
    fresh(FreeFor::TcpAndUdp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_port_is_handed_out_twice_across_threads() {
        let ports: Vec<u16> = std::thread::scope(|s| {
            let threads: Vec<_> =
                (0..8).map(|_| s.spawn(|| (0..50).map(|_| free_tcp_port()).collect::<Vec<_>>())).collect();
            threads.into_iter().flat_map(|t| t.join().unwrap()).collect()
        });
        let distinct: BTreeSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len());
        assert!(ports.iter().all(|&p| p != 0));
    }
}
