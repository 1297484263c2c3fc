//! CPU accounting and placement: process times (`getrusage`), whole-machine times
//! (`/proc/stat`, softirq included: on loopback the receive path runs there), and pinning.

use crate::check;
use std::io;

/// User and system seconds of this process so far.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcessTimes {
    /// User-mode CPU seconds.
    pub user_seconds: f64,
    /// Kernel-mode CPU seconds.
    pub system_seconds: f64,
}

impl ProcessTimes {
    /// `getrusage(RUSAGE_SELF)`: every thread of the process, finished ones included.
    pub fn now() -> Self {
        // SAFETY: rusage is plain old data; all-zero is valid.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `ru` is a live rusage for the kernel to fill; RUSAGE_SELF cannot fail.
        unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
        let secs = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
        Self { user_seconds: secs(ru.ru_utime), system_seconds: secs(ru.ru_stime) }
    }
}

/// Whole-machine CPU time from the first line of `/proc/stat`, in clock ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostTimes {
    /// user + nice + system + irq + softirq + steal.
    pub busy: u64,
    /// softirq alone.
    pub softirq: u64,
    /// busy + idle + iowait.
    pub total: u64,
}

impl HostTimes {
    /// Reads `/proc/stat`; all zeros where it is not readable (not Linux, no /proc).
    pub fn now() -> Self {
        std::fs::read_to_string("/proc/stat").map(|s| Self::parse(&s)).unwrap_or_default()
    }

    /// Parses the `cpu ` line of a `/proc/stat` text.
    pub fn parse(text: &str) -> Self {
        let Some(line) = text.lines().find(|l| l.starts_with("cpu ")) else {
            return Self::default();
        };
        let v: Vec<u64> = line.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
        let get = |i: usize| v.get(i).copied().unwrap_or(0);
        // Fields: user nice system idle iowait irq softirq steal (guest is inside user).
        let busy = get(0) + get(1) + get(2) + get(5) + get(6) + get(7);
        Self { busy, softirq: get(6), total: busy + get(3) + get(4) }
    }
}

/// CPU seconds the calling thread has used (CLOCK_THREAD_CPUTIME_ID).
pub fn thread_cpu_seconds() -> f64 {
    clock_seconds(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// A thread's CPU-time clock.
pub type CpuClock = libc::clockid_t;

/// The CPU-time clock of another thread of this process (`pthread_getcpuclockid`), to read
/// with [`clock_seconds`] while that thread runs.
pub fn thread_cpu_clock(thread: libc::pthread_t) -> io::Result<CpuClock> {
    let mut clock: libc::clockid_t = 0;
    // SAFETY: `thread` names a live thread of this process (its owner keeps it joined until
    // it is done with the clock); `clock` is a live clockid_t to fill.
    match unsafe { libc::pthread_getcpuclockid(thread, &mut clock) } {
        0 => Ok(clock),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

/// Seconds on `clock` (a CPU-time clock: the calling thread's, or another's from
/// [`thread_cpu_clock`]); 0 where it cannot be read.
pub fn clock_seconds(clock: CpuClock) -> f64 {
    // SAFETY: timespec is plain old data.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: `ts` is a live timespec; an invalid clock id only returns EINVAL.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Makes the calling thread SCHED_IDLE: it runs only when nothing else wants the CPU (the
/// idle-headroom counters).
pub fn make_current_thread_idle() -> io::Result<()> {
    // SAFETY: sched_param is plain old data; priority 0 is the only valid one for SCHED_IDLE.
    let param: libc::sched_param = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 is the calling thread; `param` is live.
    check(unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) }).map(|_| ())
}

/// Sets the calling thread's timer slack (PR_SET_TIMERSLACK): how late the kernel may fire its
/// sleeps to coalesce wakeups. The default of 50 µs is most of a sleep's overshoot; at 1 ns a
/// 20 µs sleep on this class of VM wakes ~6 µs late (p99 ~15 µs) instead of ~56 µs, which lets
/// a paced sender sleep between datagrams instead of spinning.
pub fn set_current_thread_timer_slack(ns: u64) -> io::Result<()> {
    // SAFETY: PR_SET_TIMERSLACK takes the slack as an unsigned long and no pointers.
    check(unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) }).map(|_| ())
}

/// CPUs online.
pub fn online_cpus() -> u32 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n < 1 {
        1
    } else {
        n as u32
    }
}

/// How many CPUs the calling thread may run on (its affinity mask; `online_cpus` where the
/// mask cannot be read).
pub fn allowed_cpus() -> u32 {
    // SAFETY: a zeroed cpu_set_t is a valid empty set, and sched_getaffinity writes at most
    // its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return online_cpus();
        }
        (libc::CPU_COUNT(&set) as u32).max(1)
    }
}

/// Pins the calling thread to one CPU.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("CPU {cpu} is out of range")));
    }
    // SAFETY: cpu_set_t is plain old data; CPU_SET writes inside it (index checked above).
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a live cpu_set_t of the size passed; pid 0 is the calling thread.
    check(unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) }).map(|_| ())
}

/// The CPU the calling thread runs on now.
pub fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu has no preconditions.
    let c = unsafe { libc::sched_getcpu() };
    (c >= 0).then_some(c as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_line_is_parsed() {
        let t = HostTimes::parse("cpu  10 1 5 100 2 3 4 6 0 0\ncpu0 1 2 3\n");
        assert_eq!(t, HostTimes { busy: 10 + 1 + 5 + 3 + 4 + 6, softirq: 4, total: 29 + 100 + 2 });
        assert_eq!(HostTimes::parse("garbage"), HostTimes::default());
    }

    #[test]
    fn pinning_moves_the_thread() {
        pin_current_thread(0).unwrap();
        assert_eq!(current_cpu(), Some(0));
        assert!(pin_current_thread(1 << 20).is_err());
        assert!(online_cpus() >= 1);
    }
}
