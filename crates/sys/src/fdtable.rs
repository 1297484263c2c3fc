//! A thread's own file-descriptor table, for the request/response hot loop.
//!
//! In a process whose threads share one descriptor table, every socket call takes and drops a
//! reference on the file (`fdget` cannot use its lock-free shortcut), about 50–90 ns per call on
//! a 2-vCPU VM; a single-threaded peer such as sockperf does not pay it. A worker that moves
//! into a table of its own, holding only its socket and the standard streams, makes its calls
//! at the single-threaded price. The process's table still holds the socket's number until a
//! thread that uses it closes that copy ([`SharedCopy::close`]).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::thread::ThreadId;

/// The socket's number in the table the calling thread left: still open there until closed.
#[derive(Debug)]
pub struct SharedCopy {
    fd: RawFd,
    moved: ThreadId,
}

/// Gives the calling thread a descriptor table of its own (`unshare(CLONE_FILES)`) holding
/// only `keep` and descriptors 0–2 (so a panic message still reaches stderr); every other copy
/// is closed at once, so no other test's socket stays open through this thread. `keep` must be
/// a descriptor the caller owns and that no other thread uses by number: the returned
/// [`SharedCopy`] is then the process table's copy, for another thread to close.
///
/// Fails without changing anything where the kernel lacks `close_range` (before Linux 5.9) or
/// refuses `unshare`.
pub fn move_to_own_table(keep: BorrowedFd<'_>) -> io::Result<SharedCopy> {
    let fd = keep.as_raw_fd();
    // An empty range past every descriptor: 0 where close_range exists, ENOSYS where not.
    close_range(u32::MAX, u32::MAX)?;
    // SAFETY: unshare(CLONE_FILES) copies this thread's descriptor table; every descriptor keeps
    // its number and file, so every object of this thread stays valid.
    crate::check(unsafe { libc::unshare(libc::CLONE_FILES) })?;
    let fd_u = fd as u32;
    if fd_u > 3 {
        close_range(3, fd_u - 1)?;
    }
    close_range((fd_u + 1).max(3), u32::MAX)?;
    Ok(SharedCopy { fd, moved: std::thread::current().id() })
}

/// Closes every descriptor of the calling thread's table from `first` to `last`.
fn close_range(first: u32, last: u32) -> io::Result<()> {
    // SAFETY: only called on this thread's private copy of the table (or on an empty range to
    // probe for the call), where no object of this program owns the descriptors closed: they
    // are copies whose owners live in the table the thread left.
    let ret = unsafe { libc::syscall(libc::SYS_close_range, first, last, 0u32) };
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

impl SharedCopy {
    /// Closes the process table's copy. Call from a thread that did not move (it shares the
    /// process table); from the thread that moved, it does nothing, since there the number is
    /// the live socket itself.
    pub fn close(self) {
        if std::thread::current().id() == self.moved {
            return;
        }
        // SAFETY: `self.fd` is, in this (the process's) table, the copy left behind by a thread
        // that moved its socket into a table of its own; that socket's owner lives in the
        // other table, so nothing here owns this number, and SharedCopy is consumed, so it is
        // closed once.
        unsafe { libc::close(self.fd) };
    }
}

/// The workspace's one switch for tests that cannot run here (NETCHAR_REQUIRE_ALL).
#[cfg(test)]
pub(crate) use netchar_testkit::require;

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsFd;

    /// A thread moves its socket into its own table: it still talks through it, the process
    /// table's copy is closed, and the connection closes when the thread drops its socket.
    #[test]
    fn a_thread_keeps_its_socket_and_the_process_closes_its_copy() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut peer_side = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        // A copy left open would withhold the EOF: fail then, rather than wait for ever.
        peer_side.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
        let (socket, _) = listener.accept().unwrap();
        let fd = socket.as_raw_fd();
        let (tx, rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::spawn(move || {
            let copy = move_to_own_table(socket.as_fd());
            tx.send(copy).unwrap();
            go_rx.recv().unwrap();
            use std::io::Write;
            (&socket).write_all(b"x").unwrap();
            drop(socket);
        });
        let copy = match rx.recv().unwrap() {
            Ok(c) => c,
            Err(e) => {
                go_tx.send(()).unwrap();
                worker.join().unwrap();
                let reason = format!("no private descriptor table here (close_range, Linux 5.9+, and unshare): {e}");
                return require::unavailable("a_thread_keeps_its_socket_and_the_process_closes_its_copy", &reason);
            }
        };
        // Still open in the process table until closed here.
        // SAFETY: fcntl F_GETFD only asks whether the number is open.
        assert!(unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0);
        copy.close();
        // (Whether the number is closed now is not asked: a test running beside this one may
        // have been given it already. The peer's EOF below proves it.)
        go_tx.send(()).unwrap();
        worker.join().unwrap();
        use std::io::Read;
        let mut got = Vec::new();
        peer_side.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"x", "the data, then EOF: the thread's drop closed the last copy");
    }
}
