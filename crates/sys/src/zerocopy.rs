//! `MSG_ZEROCOPY` sends with their completions reaped from the socket's error queue.
//!
//! Kernel contract (Documentation/networking/msg_zerocopy.rst): each zero-copy `send` call gets
//! a 32-bit id, counting from 0; the kernel reports ranges of finished ids on `MSG_ERRQUEUE`.
//! Until its id completes a buffer must not change; netchar's payload never changes, so only
//! its lifetime matters: call [`ZeroCopySender::finish`] before dropping the buffer. Unreaped
//! completions use option memory, and sends then fail with `ENOBUFS`, so they are reaped as
//! they come. On loopback the kernel often copies anyway (`SO_EE_CODE_ZEROCOPY_COPIED`); the
//! count of such completions is kept so the report can say so.

use crate::check;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::{Duration, Instant};

const SO_EE_ORIGIN_ZEROCOPY: u8 = 5;
const SO_EE_CODE_ZEROCOPY_COPIED: u8 = 1;
/// Reap once this many sends are unconfirmed; keeps option memory (optmem_max) in bounds.
const MAX_OUTSTANDING: u64 = 128;
/// Also reap without waiting every this many sends, so the queue never backs up to the cap.
const REAP_EVERY: u64 = 8;

/// Counters of one zero-copy sender.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ZeroCopyStats {
    /// Zero-copy send calls that sent something.
    pub sends: u64,
    /// Of those, confirmed complete by the kernel.
    pub completed: u64,
    /// Of the completed ones, those the kernel had to copy after all.
    pub copied: u64,
}

/// Sends with `MSG_ZEROCOPY` on one socket.
#[derive(Debug, Default)]
pub struct ZeroCopySender {
    stats: ZeroCopyStats,
}

impl ZeroCopySender {
    /// Enables SO_ZEROCOPY on the socket; fails where the kernel has no zero-copy send.
    pub fn new(fd: BorrowedFd<'_>) -> io::Result<Self> {
        crate::tcp::set_zerocopy(fd)?;
        Ok(Self::default())
    }

    /// The counters so far.
    pub fn stats(&self) -> ZeroCopyStats {
        self.stats
    }

    /// Sends `buf` without copying; returns the bytes the kernel took.
    pub fn send(&mut self, fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
        loop {
            if self.stats.sends - self.stats.completed >= MAX_OUTSTANDING {
                self.reap(fd, Some(Duration::from_millis(100)))?;
            } else if self.stats.sends % REAP_EVERY == 0 {
                self.reap(fd, None)?;
            }
            // SAFETY: `buf` is live for the call; the caller keeps it alive and unchanged until
            // `finish` has confirmed every send (the module's contract).
            let n = unsafe { libc::send(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len(), libc::MSG_ZEROCOPY) };
            if n >= 0 {
                if n > 0 {
                    self.stats.sends += 1;
                }
                return Ok(n as usize);
            }
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::ENOBUFS) => {
                    self.reap(fd, Some(Duration::from_millis(100)))?;
                }
                Some(libc::EINTR) => {}
                _ => return Err(err),
            }
        }
    }

    /// Waits until every send is confirmed, at most `limit`. Returns the final counters.
    pub fn finish(&mut self, fd: BorrowedFd<'_>, limit: Duration) -> io::Result<ZeroCopyStats> {
        let deadline = Instant::now() + limit;
        while self.stats.completed < self.stats.sends {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "zero-copy completions did not arrive"));
            }
            self.reap(fd, Some(left.min(Duration::from_millis(100))))?;
        }
        Ok(self.stats)
    }

    /// Reads every completion queued now; with `wait`, first waits up to that long for one.
    fn reap(&mut self, fd: BorrowedFd<'_>, wait: Option<Duration>) -> io::Result<()> {
        if let Some(wait) = wait {
            let mut pfd = libc::pollfd { fd: fd.as_raw_fd(), events: 0, revents: 0 };
            // SAFETY: `pfd` is one live pollfd, matching the count of 1.
            check(unsafe { libc::poll(&mut pfd, 1, wait.as_millis().max(1) as libc::c_int) })?;
        }
        while let Some((lo, hi, code)) = read_completion(fd)? {
            let count = u64::from(hi.wrapping_sub(lo)) + 1;
            self.stats.completed += count;
            if code & SO_EE_CODE_ZEROCOPY_COPIED != 0 {
                self.stats.copied += count;
            }
        }
        Ok(())
    }
}

/// One zero-copy completion range from the error queue, or None when the queue is empty.
fn read_completion(fd: BorrowedFd<'_>) -> io::Result<Option<(u32, u32, u8)>> {
    let mut control = [0u64; 16];
    // SAFETY: msghdr is plain old data; all-zero is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: `msg` points at the live `control` buffer with its true size and no data iovecs.
    let ret = unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) };
    if ret < 0 {
        let err = io::Error::last_os_error();
        return match err.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
            _ => Err(err),
        };
    }
    // SAFETY: `msg` was filled by recvmsg; CMSG_FIRSTHDR/NXTHDR only walk inside msg_control.
    let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(&msg) };
    while !cmsg.is_null() {
        // SAFETY: `cmsg` is non-null and inside the control buffer (checked by the macros).
        let hdr = unsafe { &*cmsg };
        let is_err = (hdr.cmsg_level == libc::SOL_IP && hdr.cmsg_type == libc::IP_RECVERR)
            || (hdr.cmsg_level == libc::SOL_IPV6 && hdr.cmsg_type == libc::IPV6_RECVERR);
        if is_err {
            // SAFETY: for IP(V6)_RECVERR the data is a sock_extended_err; read_unaligned because
            // the control buffer gives no alignment guarantee for the payload type.
            let ee: libc::sock_extended_err = unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast()) };
            if ee.ee_origin == SO_EE_ORIGIN_ZEROCOPY && ee.ee_errno == 0 {
                return Ok(Some((ee.ee_info, ee.ee_data, ee.ee_code)));
            }
        }
        // SAFETY: as above.
        cmsg = unsafe { libc::CMSG_NXTHDR(&msg, cmsg) };
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsFd;

    #[test]
    fn every_send_is_confirmed() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let reader = std::thread::spawn(move || {
            let mut buf = vec![0u8; 1 << 16];
            let mut total = 0u64;
            loop {
                let n = s.read(&mut buf).unwrap();
                if n == 0 {
                    return total;
                }
                total += n as u64;
            }
        });
        let mut zc = ZeroCopySender::new(c.as_fd()).unwrap();
        let buf = vec![7u8; 64 * 1024];
        let mut sent = 0u64;
        for _ in 0..500 {
            sent += zc.send(c.as_fd(), &buf).unwrap() as u64;
        }
        let stats = zc.finish(c.as_fd(), Duration::from_secs(5)).unwrap();
        c.shutdown(std::net::Shutdown::Write).unwrap();
        assert_eq!(reader.join().unwrap(), sent);
        assert_eq!(stats.completed, stats.sends);
        assert!(stats.sends > 0);
    }
}
