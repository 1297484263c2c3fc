//! Restartable sequences (rseq): leaving them on a thread that does not use them.
//!
//! glibc (2.35 and later) registers an rseq area for every thread it starts. The kernel then
//! marks a registered thread each time it is switched out and, on its next return to user
//! space, writes the thread's CPU into that area (`__rseq_handle_notify_resume`, with its user
//! memory accesses). A request/response worker sharing a core with its peer is switched out
//! once per transaction, so it pays that update on every transaction: 0.08 µs of a 7.7 µs TCP
//! transaction on one core in bench/rr_profile.sh's profiles, and netperf's own rate rises
//! about 2% (median of 8 alternated rounds) with glibc's rseq turned off (bench/README.md). Nothing in netchar's data plane reads
//! the area (Rust's standard library and the allocator do not; glibc's `sched_getcpu` falls
//! back to the system call when the area says "unregistered"), so the data-plane workers
//! leave it ([`leave_current_thread`]).

use std::io;

/// The outcome of [`leave_current_thread`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Left {
    /// The thread's area was registered and no longer is.
    Left,
    /// The C library registered no area for this thread (older than 2.35, not glibc, or
    /// `GLIBC_TUNABLES=glibc.pthread.rseq=0`), or the architecture is not one this module
    /// knows glibc's rseq signature for: nothing to leave.
    NotRegistered,
}

/// Unregisters the calling thread's rseq area, which glibc registered when the thread started.
/// The thread must not use rseq afterwards; glibc's own users of the area fall back to system
/// calls.
pub fn leave_current_thread() -> io::Result<Left> {
    imp::leave()
}

/// The CPU number the kernel last wrote into the calling thread's rseq area: Some(cpu) while
/// the area is registered, None when it is not (or glibc registered none).
pub fn area_cpu() -> Option<u32> {
    imp::area_cpu()
}

#[cfg(all(target_os = "linux", target_env = "gnu", any(target_arch = "x86_64", target_arch = "aarch64")))]
mod imp {
    use super::Left;
    use std::io;

    /// The signature glibc registers its areas with (its `RSEQ_SIG`); the kernel refuses to
    /// unregister an area with another.
    #[cfg(target_arch = "x86_64")]
    const SIGNATURE: u32 = 0x5305_3053;
    #[cfg(target_arch = "aarch64")]
    const SIGNATURE: u32 = 0xd428_bc00;
    const FLAG_UNREGISTER: libc::c_int = 1;

    /// glibc's exported description of its areas: the offset from the thread pointer and the
    /// size (0: glibc registered none). Looked up at run time, so a C library without them
    /// means "nothing registered" rather than a link error.
    fn glibc_area() -> Option<(isize, u32)> {
        // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only looks a symbol up.
        let size = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_size".as_ptr()) } as *const u32;
        // SAFETY: as above.
        let offset = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_offset".as_ptr()) } as *const isize;
        if size.is_null() || offset.is_null() {
            return None;
        }
        // SAFETY: glibc defines __rseq_size as an unsigned int and __rseq_offset as a
        // ptrdiff_t, both set before main and constant afterwards.
        let (size, offset) = unsafe { (size.read(), offset.read()) };
        (size > 0).then_some((offset, size))
    }

    /// The calling thread's thread pointer, which glibc's __rseq_offset is relative to.
    fn thread_pointer() -> usize {
        let tp: usize;
        // SAFETY: on x86-64 glibc's TCB starts with a pointer to itself, at fs:0, which is the
        // thread pointer; reading it has no side effect.
        #[cfg(target_arch = "x86_64")]
        unsafe {
            std::arch::asm!("mov {}, qword ptr fs:0", out(reg) tp, options(nostack, readonly, preserves_flags))
        };
        // SAFETY: reading TPIDR_EL0, the thread pointer register, has no side effect.
        #[cfg(target_arch = "aarch64")]
        unsafe {
            std::arch::asm!("mrs {}, tpidr_el0", out(reg) tp, options(nomem, nostack, preserves_flags))
        };
        tp
    }

    fn area() -> Option<(*mut u8, u32)> {
        let (offset, size) = glibc_area()?;
        Some((thread_pointer().wrapping_add_signed(offset) as *mut u8, size))
    }

    pub(super) fn area_cpu() -> Option<u32> {
        let (at, _) = area()?;
        // SAFETY: glibc's area is the thread's own, at least 32 bytes from the thread pointer
        // plus __rseq_offset, 32-byte aligned; cpu_id is the u32 at offset 4, which the kernel
        // writes only on this thread's way back to user space (never concurrently with it).
        let cpu = unsafe { std::ptr::read_volatile(at.add(4) as *const i32) };
        // Negative: not registered (the kernel's -1 after unregistering, glibc's -2 when its
        // registration failed, e.g. under an emulator without the system call).
        u32::try_from(cpu).ok()
    }

    pub(super) fn leave() -> io::Result<Left> {
        let Some((at, size)) = area() else { return Ok(Left::NotRegistered) };
        // The kernel unregisters only with the length the area was registered with: glibc
        // before 2.40 registers __rseq_size bytes; later ones publish the features' size there
        // and register at least 32.
        let mut last = io::Error::from_raw_os_error(libc::EINVAL);
        for len in [size, size.max(32), size.next_multiple_of(32)] {
            // SAFETY: the rseq system call with FLAG_UNREGISTER only compares `at`, `len` and
            // the signature with the calling thread's registration and, when they match,
            // clears it and writes "unregistered" into the thread's own area.
            let ret = unsafe { libc::syscall(libc::SYS_rseq, at, len, FLAG_UNREGISTER, SIGNATURE) };
            if ret == 0 {
                return Ok(Left::Left);
            }
            last = io::Error::last_os_error();
            if last.raw_os_error() != Some(libc::EINVAL) {
                break;
            }
        }
        // EINVAL for every length: registered elsewhere, or not at all (a C library that
        // registered none despite its size, e.g. the tunable set in a later glibc).
        if area_cpu().is_none() {
            return Ok(Left::NotRegistered);
        }
        Err(last)
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu", any(target_arch = "x86_64", target_arch = "aarch64"))))]
mod imp {
    use super::Left;
    use std::io;

    pub(super) fn area_cpu() -> Option<u32> {
        None
    }

    pub(super) fn leave() -> io::Result<Left> {
        Ok(Left::NotRegistered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread leaves its area: the kernel marks it unregistered (and stops writing the CPU
    /// into it), and a second leave finds nothing registered.
    #[test]
    fn a_thread_leaves_the_area_glibc_registered() {
        std::thread::spawn(|| {
            let Some(cpu) = area_cpu() else {
                let why = "this C library registered no rseq area (glibc < 2.35, not glibc, or \
                           GLIBC_TUNABLES=glibc.pthread.rseq=0): nothing to leave";
                assert!(std::env::var_os("NETCHAR_REQUIRE_ALL").is_none(), "{why}");
                eprintln!("skipped: {why}");
                return;
            };
            assert!(cpu < 4096, "the kernel wrote CPU {cpu} into the area");
            assert_eq!(leave_current_thread().unwrap(), Left::Left);
            assert_eq!(area_cpu(), None, "the area still carries a CPU after leaving");
            // A context switch would write the CPU again if the thread were still registered.
            std::thread::sleep(std::time::Duration::from_millis(2));
            assert_eq!(area_cpu(), None, "the kernel wrote into the area after leaving");
            assert_eq!(leave_current_thread().unwrap(), Left::NotRegistered);
            // glibc falls back to the system call.
            assert!(crate::cpu::current_cpu().is_some());
        })
        .join()
        .unwrap();
    }
}
