//! TCP socket options that socket2 does not cover, and `TCP_INFO`.

use crate::check;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

fn setsockopt<T>(fd: BorrowedFd<'_>, level: libc::c_int, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` points to a live `T` of `size_of::<T>()` bytes for the call's duration,
    // and `fd` is a valid descriptor borrowed for the call.
    let ret = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    check(ret).map(|_| ())
}

/// Sets TCP_CONGESTION, e.g. `cubic` or `bbr`. Fails with `ENOENT` when the algorithm is not
/// available (`/proc/sys/net/ipv4/tcp_available_congestion_control`).
pub fn set_congestion(fd: BorrowedFd<'_>, name: &str) -> io::Result<()> {
    let bytes = name.as_bytes();
    // SAFETY: `bytes` is a live buffer of `bytes.len()` bytes; the kernel copies it.
    let ret = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            bytes.as_ptr().cast(),
            bytes.len() as libc::socklen_t,
        )
    };
    check(ret).map(|_| ())
}

/// Reads TCP_CONGESTION back.
pub fn congestion(fd: BorrowedFd<'_>) -> io::Result<String> {
    let mut buf = [0u8; 32];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: `buf` and `len` are live and `len` holds the buffer's size, as getsockopt requires.
    let ret = unsafe {
        libc::getsockopt(fd.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_CONGESTION, buf.as_mut_ptr().cast(), &mut len)
    };
    check(ret)?;
    let used = &buf[..(len as usize).min(buf.len())];
    let end = used.iter().position(|&b| b == 0).unwrap_or(used.len());
    Ok(String::from_utf8_lossy(&used[..end]).into_owned())
}

/// Sets TCP_MAXSEG.
pub fn set_mss(fd: BorrowedFd<'_>, mss: u32) -> io::Result<()> {
    setsockopt(fd, libc::IPPROTO_TCP, libc::TCP_MAXSEG, &(mss as libc::c_int))
}

/// Sets SO_MAX_PACING_RATE in bytes per second (kernel pacing: fq, or TCP's internal pacing
/// since Linux 4.13).
pub fn set_max_pacing_rate(fd: BorrowedFd<'_>, bytes_per_second: u64) -> io::Result<()> {
    // The option takes an unsigned 32-bit value on old kernels and 64-bit since 4.19; a 32-bit
    // value saturates at 4 GB/s, which is above every rate this cap is used for in practice.
    let value = bytes_per_second.min(u64::from(u32::MAX)) as u32;
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_MAX_PACING_RATE, &value)
}

/// Enables SO_ZEROCOPY (needed before MSG_ZEROCOPY sends; Linux 4.14).
pub fn set_zerocopy(fd: BorrowedFd<'_>) -> io::Result<()> {
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_ZEROCOPY, &(1 as libc::c_int))
}

/// Receives up to `buf.len()` bytes of the stream and discards them in the kernel: `recv` with
/// `MSG_TRUNC`, which on a TCP socket frees the data without copying it to user space (tcp(7),
/// since Linux 2.4; the return value is the number of bytes discarded, exactly as a read would
/// have returned). `buf` is only passed along; its contents are not written. Returns 0 at EOF,
/// and an error of kind `Unsupported` where the socket refuses the flag.
pub fn recv_discard(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: `buf` is a live, writable buffer of `buf.len()` bytes for the call (the kernel
        // does not write it with MSG_TRUNC on TCP, but may on other socket types).
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), libc::MSG_TRUNC) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => {}
            Some(libc::EINVAL | libc::EOPNOTSUPP) => return Err(io::Error::new(io::ErrorKind::Unsupported, err)),
            _ => return Err(err),
        }
    }
}

/// Sets `SO_RCVLOWAT`: a blocking read waits for `bytes` (or the end of the stream, or its
/// timeout), and the kernel wakes the reader only once that much has arrived.
pub fn set_receive_low_water(fd: BorrowedFd<'_>, bytes: usize) -> io::Result<()> {
    let value = bytes.min(i32::MAX as usize) as libc::c_int;
    // SAFETY: a plain setsockopt with a pointer to a live int and its size.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVLOWAT,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The `TCP_INFO` fields netchar reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpInfo {
    /// Segments retransmitted over the connection's life (`tcpi_total_retrans`).
    pub total_retransmits: u64,
    /// Congestion window in bytes (`tcpi_snd_cwnd` × `tcpi_snd_mss`).
    pub cwnd_bytes: u64,
    /// Smoothed RTT in microseconds.
    pub rtt_us: u32,
    /// RTT variance in microseconds.
    pub rttvar_us: u32,
    /// Sender MSS.
    pub snd_mss: u32,
}

/// Reads `TCP_INFO`.
pub fn tcp_info(fd: BorrowedFd<'_>) -> io::Result<TcpInfo> {
    // SAFETY: tcp_info is plain old data; all-zero is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `info` and `len` are live; `len` holds the struct's size, and the kernel writes at
    // most that many bytes (older kernels fewer, leaving the zeroed tail).
    let ret = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    check(ret)?;
    Ok(TcpInfo {
        total_retransmits: u64::from(info.tcpi_total_retrans),
        cwnd_bytes: u64::from(info.tcpi_snd_cwnd) * u64::from(info.tcpi_snd_mss),
        rtt_us: info.tcpi_rtt,
        rttvar_us: info.tcpi_rttvar,
        snd_mss: info.tcpi_snd_mss,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsFd;

    #[test]
    fn tcp_info_and_options_work_on_loopback() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let info = tcp_info(c.as_fd()).unwrap();
        assert!(info.snd_mss > 0);
        assert!(info.cwnd_bytes > 0);
        set_mss(c.as_fd(), 1000).unwrap();
        set_max_pacing_rate(c.as_fd(), 1_000_000).unwrap();
        let cc = congestion(c.as_fd()).unwrap();
        assert!(!cc.is_empty());
        set_congestion(c.as_fd(), &cc).unwrap();
        assert_eq!(set_congestion(c.as_fd(), "nosuchalgo").unwrap_err().raw_os_error(), Some(libc::ENOENT));
    }

    #[test]
    fn recv_discard_counts_every_byte_and_leaves_the_buffer_alone() {
        use std::io::Write;
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let sent: usize = 3_000_017;
        let writer = std::thread::spawn(move || {
            let block = vec![b'x'; 65536];
            let mut left = sent;
            while left > 0 {
                let n = c.write(&block[..left.min(block.len())]).unwrap();
                left -= n;
            }
        });
        let mut buf = vec![0u8; 131072];
        let mut total = 0;
        loop {
            let n = recv_discard(s.as_fd(), &mut buf).unwrap();
            if n == 0 {
                break;
            }
            total += n;
        }
        writer.join().unwrap();
        assert_eq!(total, sent);
        assert!(buf.iter().all(|&b| b == 0), "MSG_TRUNC copied data into the buffer");
    }
}
