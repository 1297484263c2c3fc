//! Waking one thread out of a blocking system call that has no timeout: a real-time signal of
//! the process's own, whose handler does nothing and is installed without SA_RESTART, so the
//! call returns EINTR. A receive timeout would wake it too, but the kernel arms and cancels a
//! timer on every receive that waits, once per transaction of a request/response test; a
//! signal costs nothing until it is sent.

use std::io;
use std::sync::OnceLock;

/// The signal: the second real-time signal free for applications (glibc keeps the ones below
/// `SIGRTMIN()` for itself; the first free one is the likeliest to be taken by a library).
fn signal() -> libc::c_int {
    libc::SIGRTMIN() + 1
}

extern "C" fn interrupted(_: libc::c_int) {}

/// Installs the signal's handler, once per process; a thread that relies on [`wake`] calls
/// this before it blocks.
pub fn prepare() -> io::Result<()> {
    static INSTALLED: OnceLock<Result<(), i32>> = OnceLock::new();
    let installed = INSTALLED.get_or_init(|| {
        // SAFETY: sigaction is plain old data; all-zero is an empty mask and no flags.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = interrupted as extern "C" fn(libc::c_int) as libc::sighandler_t;
        // No SA_RESTART: that is the point, the interrupted call must return.
        action.sa_flags = 0;
        // SAFETY: `action` is live and fully initialised; the handler is async-signal-safe
        // (it does nothing).
        let rc = unsafe { libc::sigaction(signal(), &action, std::ptr::null_mut()) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error().raw_os_error().unwrap_or(libc::EINVAL))
        }
    });
    installed.map_err(io::Error::from_raw_os_error)
}

/// The calling thread's id, for [`wake`].
pub fn current_thread() -> i32 {
    // SAFETY: gettid cannot fail.
    unsafe { libc::gettid() }
}

/// Interrupts thread `tid` of this process: a blocking system call it is in returns EINTR
/// (ESRCH when the thread is gone). The caller must know the thread is still this process's:
/// a thread id is reused once its thread has ended.
pub fn wake(tid: i32) -> io::Result<()> {
    // SAFETY: tgkill only sends a signal; the pid is this process's, the signal has a handler.
    let rc = unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, signal()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    /// A receive with no timeout on a socket nobody sends to returns EINTR when woken, and
    /// only then.
    #[test]
    fn a_blocked_receive_returns_when_woken() {
        prepare().unwrap();
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let fd = socket.as_raw_fd();
        let (tid_tx, tid_rx) = mpsc::channel();
        let receiver = std::thread::spawn(move || {
            tid_tx.send(current_thread()).unwrap();
            let mut buf = [0u8; 16];
            // SAFETY: `buf` is live for its length; `fd` stays open (the socket outlives the join).
            let rc = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
            (rc, io::Error::last_os_error().raw_os_error(), Instant::now())
        });
        let tid = tid_rx.recv().unwrap();
        std::thread::sleep(Duration::from_millis(100));
        assert!(!receiver.is_finished(), "the receive returned before it was woken");
        let woken_at = Instant::now();
        // The receive may not have started yet on a slow machine: wake until it returns.
        while !receiver.is_finished() {
            wake(tid).unwrap();
            std::thread::sleep(Duration::from_millis(10));
        }
        let (rc, errno, returned_at) = receiver.join().unwrap();
        assert_eq!((rc, errno), (-1, Some(libc::EINTR)));
        assert!(returned_at >= woken_at);
        drop(socket);
    }
}
