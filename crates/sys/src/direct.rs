//! Socket sends and receives by the system call itself, not through libc's wrappers, for the
//! request/response loops (one send and one receive per transaction on each end).
//!
//! In a process with more than one thread, glibc's `send`, `recv` and `sendto`/`recvfrom` are
//! cancellation points: each wraps its system call in `__pthread_enable_asynccancel` and
//! `__pthread_disable_asynccancel`, two calls and two atomic read-modify-writes of the
//! thread's cancel word (glibc 2.36, `SYSCALL_CANCEL`). A single-threaded process (netperf,
//! sockperf) skips them. netchar never cancels a thread, so these go through `syscall(2)`,
//! which is no cancellation point: on one CPU, `perf record` of TCP rr put 0.17 µs per
//! transaction in those two functions across both ends, about 4% of a transaction
//! (bench/README.md, "Request/response on one CPU: the lever").
//!
//! Errors are the thread's `errno`, as the std wrappers give them (`EINTR` is returned, not
//! retried: the callers check their flags between calls).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// Turns a system call's return (-1 and `errno` on failure) into a byte count.
fn bytes(ret: libc::c_long) -> io::Result<usize> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret as usize)
    }
}

/// `send(fd, buf, MSG_NOSIGNAL)` on a connected socket: a closed peer is an `EPIPE` error,
/// never a SIGPIPE, as with std's `write` on a `TcpStream`.
pub fn send(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: sendto(2) with a null address reads `buf.len()` bytes from `buf`, which is live
    // and readable for the whole call; the descriptor is borrowed, so it stays open.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_sendto,
            fd.as_raw_fd() as libc::c_long,
            buf.as_ptr() as libc::c_long,
            buf.len() as libc::c_long,
            libc::MSG_NOSIGNAL as libc::c_long,
            0 as libc::c_long,
            0 as libc::c_long,
        )
    };
    bytes(ret)
}

/// `recv(fd, buf, 0)`: up to `buf.len()` bytes (0 at a TCP stream's end; a UDP datagram's
/// length, cut to the buffer).
pub fn recv(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: recvfrom(2) with a null address writes at most `buf.len()` bytes into `buf`,
    // which is live and writable for the whole call; the descriptor is borrowed, so it stays open.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_recvfrom,
            fd.as_raw_fd() as libc::c_long,
            buf.as_mut_ptr() as libc::c_long,
            buf.len() as libc::c_long,
            0 as libc::c_long,
            0 as libc::c_long,
            0 as libc::c_long,
        )
    };
    bytes(ret)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream, UdpSocket};
    use std::os::fd::AsFd;

    #[test]
    fn tcp_bytes_go_both_ways_and_the_end_reads_zero() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        assert_eq!(send(s.as_fd(), b"abc").unwrap(), 3);
        let mut got = [0u8; 8];
        let n = c.read(&mut got).unwrap();
        assert_eq!(&got[..n], b"abc");
        c.write_all(b"xy").unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(recv(s.as_fd(), &mut buf).unwrap(), 2);
        assert_eq!(&buf[..2], b"xy");
        drop(c);
        assert_eq!(recv(s.as_fd(), &mut buf).unwrap(), 0);
    }

    #[test]
    fn a_closed_peer_is_an_error_not_a_signal() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        drop(c);
        drop(l);
        // The first send may still be taken; the next ones meet the reset.
        let failed = (0..50).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(2));
            send(s.as_fd(), b"x").is_err()
        });
        assert!(failed);
    }

    #[test]
    fn udp_datagrams_keep_their_bounds_and_a_timeout_is_would_block() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        b.connect(a.local_addr().unwrap()).unwrap();
        send(a.as_fd(), &[7u8; 5]).unwrap();
        send(a.as_fd(), &[8u8; 3]).unwrap();
        let mut buf = [0u8; 16];
        assert_eq!(recv(b.as_fd(), &mut buf).unwrap(), 5);
        assert_eq!(recv(b.as_fd(), &mut buf).unwrap(), 3);
        b.set_read_timeout(Some(std::time::Duration::from_millis(5))).unwrap();
        let e = recv(b.as_fd(), &mut buf).unwrap_err();
        assert!(matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut), "{e:?}");
    }
}
