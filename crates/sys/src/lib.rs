//! The operating system beneath netchar: TCP socket options and `TCP_INFO`, `MSG_ZEROCOPY`
//! sends, CPU affinity, and CPU accounting (`getrusage`, `/proc/stat`).
//!
//! This is the only netchar crate with `unsafe`; every block says why it is sound. Each
//! function degrades to a typed error where the kernel lacks the feature, never a panic, so
//! callers can fall back (e.g. `--zerocopy` to plain sends).
//!
//! ```
//! let snap = netchar_sys::cpu::ProcessTimes::now();
//! assert!(snap.user_seconds >= 0.0);
//! ```
#![deny(missing_docs)]

pub mod alloc;
pub mod clock;
pub mod console;
pub mod counters;
pub mod cpu;
pub mod direct;
pub mod ethtool;
pub mod fdtable;
pub mod host;
pub mod identity;
pub mod ip;
pub mod netlink;
pub mod nft;
pub mod proc_net;
pub mod process;
pub mod rseq;
pub mod tcp;
pub mod udp;
pub mod wake;
pub mod xdp;
pub mod xdp_count;
pub mod xdp_live;
pub mod zerocopy;

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// Turns a -1 return into the thread's `errno` as an `io::Error`.
fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// An int socket option, set.
fn setsockopt_int(fd: BorrowedFd<'_>, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: `value` is a live c_int for the call; the size passed matches it.
    let ret = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    check(ret).map(|_| ())
}

/// An int socket option, read.
fn getsockopt_int(fd: BorrowedFd<'_>, level: libc::c_int, name: libc::c_int) -> io::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` and `len` are live; `len` holds the int's size, as getsockopt requires.
    let ret =
        unsafe { libc::getsockopt(fd.as_raw_fd(), level, name, (&mut value as *mut libc::c_int).cast(), &mut len) };
    check(ret).map(|_| value)
}
