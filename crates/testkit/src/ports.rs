//! Free loopback ports for servers a test starts itself, never the same port twice in one test
//! process.
//!
//! A test that cannot have a server announce its port asks the kernel for one (bind port 0,
//! read it, close) and passes it on. Two threads doing that at once can be given the same port:
//! the second server then fails to listen, the first one's listener makes the second test
//! believe its own server is up, and the second test's client is refused once the first test
//! ends. Remembering every port handed out closes that race inside the process; a server that
//! still fails to bind (another process took the port) is the caller's to detect by its exit.

use std::collections::HashSet;
use std::net::{TcpListener, UdpSocket};
use std::sync::Mutex;

static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// A loopback port free for TCP (and, with `udp_too`, for UDP) at the time of the call, not
/// handed out before by this process.
fn fresh(udp_too: bool, udp_only: bool) -> u16 {
    loop {
        let port = if udp_only {
            UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
        } else {
            TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
        };
        if udp_too && UdpSocket::bind(("127.0.0.1", port)).is_err() {
            continue;
        }
        let mut handed = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
        if handed.get_or_insert_with(HashSet::new).insert(port) {
            return port;
        }
    }
}

/// A free TCP port on 127.0.0.1.
pub fn free_tcp_port() -> u16 {
    fresh(false, false)
}

/// A free UDP port on 127.0.0.1.
pub fn free_udp_port() -> u16 {
    fresh(false, true)
}

/// A port free for both TCP and UDP on 127.0.0.1.
pub fn free_tcp_and_udp_port() -> u16 {
    fresh(true, false)
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
        let distinct: HashSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len());
        assert!(ports.iter().all(|&p| p != 0));
    }
}
