//! Process groups: a user's command runs in one of its own, so that a timeout ends everything
//! it started (`timeout(1)`'s way).

use crate::check;
use std::io;

/// Sends SIGKILL to every process of the group `pgid` (a child started with
/// `CommandExt::process_group(0)` leads a group of its own pid).
pub fn kill_group(pgid: u32) -> io::Result<()> {
    let pgid = libc::pid_t::try_from(pgid).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    if pgid <= 1 {
        // 0 is the caller's own group and 1 init's: never what a child's pid names.
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: killpg only sends a signal.
    check(unsafe { libc::killpg(pgid, libc::SIGKILL) }).map(|_| ())
}
