//! The C allocator's settings for a long-running server.
//!
//! glibc serves a large allocation (128 KiB and more by default) with a mapping of its own
//! and gives it back when it is freed, but it raises that threshold to the size of the
//! largest such block freed so far, and from then on serves blocks of that size from its
//! per-thread arenas, each of which keeps up to twice the threshold of free memory resident.
//! A server whose tests free multi-megabyte receive buffers (a UDP receiver's batch for 32
//! KiB datagrams is 2 MiB) thus keeps growing until every arena holds its share: measured
//! with bench/soak.sh over every peer listener, 11 MiB after the warm-up and 25 MiB after
//! 10 minutes (50 MiB with iperf3's UDP tests alone), none of it in use. Fixing the
//! threshold keeps large buffers in mappings of their own, returned when a test ends (the
//! same soak: 8.7 MiB after the warm-up, 10.2 MiB after 10 minutes).

/// The threshold above which every allocation gets a mapping of its own.
pub const MMAP_THRESHOLD: usize = 128 * 1024;

/// Fixes glibc's mmap threshold at [`MMAP_THRESHOLD`] (which also stops it from moving),
/// unless the operator set the allocator up already (`MALLOC_MMAP_THRESHOLD_` or
/// `GLIBC_TUNABLES` in the environment). Returns whether it did. Call it before the first
/// thread starts. A no-op returning false on other C libraries.
pub fn keep_large_buffers_unmapped() -> bool {
    if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_some() || std::env::var_os("GLIBC_TUNABLES").is_some() {
        return false;
    }
    set_threshold()
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set_threshold() -> bool {
    // SAFETY: mallopt takes two integers and changes the allocator's parameters under its own
    // lock; it touches no memory of ours.
    unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD as libc::c_int) == 1 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set_threshold() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_threshold_is_set_unless_the_operator_set_one() {
        if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_some() || std::env::var_os("GLIBC_TUNABLES").is_some() {
            assert!(!keep_large_buffers_unmapped());
        } else {
            assert_eq!(keep_large_buffers_unmapped(), cfg!(all(target_os = "linux", target_env = "gnu")));
        }
    }
}
