//! Time stamps for the per-transaction loops: the CPU's time-stamp counter read directly where
//! the kernel itself keeps time with it, `Instant::now()` everywhere else.
//!
//! Why: a request/response test reads the clock once per transaction. `Instant::now()` is
//! `clock_gettime` in the vDSO, which reads the same counter and then the kernel's clock data
//! page: ~40 ns in a tight loop on a 2-vCPU VM, and after each context switch (two per
//! transaction when both ends share a core) a cache and TLB miss on that page besides. RDTSCP
//! alone takes ~15 ns there and touches no memory. Paired on one CPU (bench/builds_pair.sh),
//! this saved 0.2-0.6% of the CPU per TCP transaction and 1-2% per UDP one (the UDP responder
//! stamps each answer too).
//!
//! Trust: the counter is used only when the kernel's current clocksource is `tsc`, i.e. the
//! kernel has judged it invariant and synchronised across CPUs. Elsewhere (another
//! architecture, a VM on kvm-clock, no /sys) a [`Stopwatch`] is `Instant::now()` itself.
//!
//! Scale: ticks are converted with a ratio measured against CLOCK_MONOTONIC (the clock of
//! `Instant`) since the process's first reading ([`begin`]) and refined over each stopwatch's
//! life. Durations are taken between tick counts, so they never jump; the `Instant` of each
//! [`Stamp`] is re-anchored on a real clock reading every few milliseconds, so deadlines and
//! intervals stay on the clock every other thread uses.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// One reading: `ticks` for durations ([`Stopwatch::nanos`]), `at` to compare with deadlines.
#[derive(Clone, Copy, Debug)]
pub struct Stamp {
    /// The counter (nanoseconds since the stopwatch started, without the counter).
    pub ticks: u64,
    /// The reading on the monotonic clock of `Instant`.
    pub at: Instant,
}

/// A per-thread clock for hot loops (see the module's description).
#[derive(Debug)]
pub struct Stopwatch {
    counter: bool,
    /// Nanoseconds per tick, as a 32.32 fixed-point number.
    scale: u64,
    /// The first reading, over which the scale is refined.
    origin: (u64, Instant),
    /// The latest real clock reading the instants are derived from.
    anchor: (u64, Instant),
    /// Ticks after which the next stamp re-anchors.
    reanchor_after: u64,
}

/// How long the instants are derived from the counter before the real clock is read again.
const REANCHOR_NS: u64 = 4_000_000;

impl Stopwatch {
    /// The counter where the kernel keeps time with it, the system clock elsewhere.
    pub fn new() -> Self {
        match calibration() {
            Some(scale) => {
                let origin = paired_reading();
                Self {
                    counter: true,
                    scale,
                    origin,
                    anchor: origin,
                    reanchor_after: ((u128::from(REANCHOR_NS) << 32) / u128::from(scale.max(1))) as u64,
                }
            }
            None => Self::system(),
        }
    }

    /// `Instant::now()` whatever the machine (for comparisons).
    pub fn system() -> Self {
        let now = Instant::now();
        Self { counter: false, scale: 1 << 32, origin: (0, now), anchor: (0, now), reanchor_after: u64::MAX }
    }

    /// Whether this stopwatch reads the time-stamp counter.
    pub fn reads_counter(&self) -> bool {
        self.counter
    }

    /// The time now.
    #[inline]
    pub fn stamp(&mut self) -> Stamp {
        if !self.counter {
            let at = Instant::now();
            return Stamp { ticks: at.saturating_duration_since(self.origin.1).as_nanos() as u64, at };
        }
        let ticks = read_counter();
        let since = ticks.wrapping_sub(self.anchor.0);
        if since >= self.reanchor_after {
            return self.reanchor();
        }
        Stamp { ticks, at: self.anchor.1 + Duration::from_nanos(self.to_nanos(since)) }
    }

    /// Nanoseconds from `earlier` to `later` (0 if `later` is the earlier one).
    #[inline]
    pub fn nanos(&self, earlier: Stamp, later: Stamp) -> u64 {
        if later.ticks <= earlier.ticks {
            return 0;
        }
        self.to_nanos(later.ticks - earlier.ticks)
    }

    #[inline]
    fn to_nanos(&self, ticks: u64) -> u64 {
        ((u128::from(ticks) * u128::from(self.scale)) >> 32) as u64
    }

    /// Reads the real clock, refines the scale over the stopwatch's life so far, and makes that
    /// reading the new anchor.
    #[cold]
    fn reanchor(&mut self) -> Stamp {
        let (ticks, at) = paired_reading();
        let lived = ticks.wrapping_sub(self.origin.0);
        // Over a life of a few anchors the measured ratio is already better than the process's
        // calibration (both are bracketed readings, usually within ~50 ns).
        if lived >= 8 * self.reanchor_after {
            if let Some(scale) = scale_between(self.origin, (ticks, at)) {
                self.scale = scale;
            }
        }
        self.anchor = (ticks, at);
        Stamp { ticks, at }
    }
}

impl Default for Stopwatch {
    fn default() -> Self {
        Self::new()
    }
}

/// The process's first paired reading, or None when the counter is not to be used.
fn process_origin() -> Option<(u64, Instant)> {
    static ORIGIN: OnceLock<Option<(u64, Instant)>> = OnceLock::new();
    *ORIGIN.get_or_init(|| kernel_keeps_time_with_counter().then(paired_reading))
}

/// Takes the process's first reading, against which every [`Stopwatch`] calibrates the counter:
/// called when the program starts, the calibration costs nothing by the time the first test
/// needs it (otherwise the first stopwatch waits until [`CALIBRATION_SPAN`] has passed).
pub fn begin() {
    let _ = process_origin();
}

/// The least time between the process's first reading and a calibration: each reading is
/// bracketed within ~50 ns, so the scale is good to ~2e-5, and each stopwatch refines it.
pub const CALIBRATION_SPAN: Duration = Duration::from_millis(3);

/// The scale (ns per tick, 32.32) over the process's life so far, or None when the counter is
/// not to be used.
fn calibration() -> Option<u64> {
    let (t0, i0) = process_origin()?;
    if let Some(rest) = CALIBRATION_SPAN.checked_sub(i0.elapsed()) {
        std::thread::sleep(rest);
    }
    scale_between((t0, i0), paired_reading())
}

/// Nanoseconds per tick (32.32) between two paired readings, None if no time passed.
fn scale_between((t0, i0): (u64, Instant), (t1, i1): (u64, Instant)) -> Option<u64> {
    let ns = i1.saturating_duration_since(i0).as_nanos();
    let ticks = t1.wrapping_sub(t0);
    (ticks > 0 && ns > 0).then(|| ((ns << 32) / u128::from(ticks)) as u64)
}

/// Whether the kernel's clocksource is the time-stamp counter (x86-64 Linux only).
fn kernel_keeps_time_with_counter() -> bool {
    cfg!(target_arch = "x86_64")
        && std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .is_ok_and(|s| s.trim() == "tsc")
}

/// A counter reading and a clock reading taken together: the counter is read on both sides of
/// the clock and the midpoint kept. A try wider than ~0.4 µs (a preemption or an interrupt in
/// between) is taken again, up to four tries, and the tightest kept.
fn paired_reading() -> (u64, Instant) {
    let mut best: Option<(u64, u64, Instant)> = None;
    for _ in 0..4 {
        let before = read_counter();
        let at = Instant::now();
        let after = read_counter();
        let width = after.wrapping_sub(before);
        if best.is_none_or(|(w, _, _)| width < w) {
            best = Some((width, before + width / 2, at));
        }
        if width < 1_000 {
            break;
        }
    }
    let (_, ticks, at) = best.expect("at least one try");
    (ticks, at)
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn read_counter() -> u64 {
    let mut aux = 0u32;
    // SAFETY: RDTSCP only reads the counter (and the CPU number into `aux`, a live u32); it
    // waits for the instructions before it to finish, so a receive has returned before its
    // stamp is taken, as with the vDSO's ordered read. Only called where the kernel's
    // clocksource is the counter, which on x86-64 implies the CPU has RDTSCP.
    unsafe { core::arch::x86_64::__rdtscp(&mut aux) }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn read_counter() -> u64 {
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stopwatch reads the counter exactly where the kernel keeps time with it.
    #[test]
    fn the_counter_is_used_where_the_kernel_uses_it() {
        assert_eq!(Stopwatch::new().reads_counter(), kernel_keeps_time_with_counter());
        assert!(!Stopwatch::system().reads_counter());
    }

    /// A duration measured in ticks lies within the span the system clock brackets around it,
    /// give or take 0.01% of it and a microsecond: a preemption between the readings only
    /// widens the bracket.
    #[test]
    fn durations_agree_with_the_system_clock() {
        for mut watch in [Stopwatch::new(), Stopwatch::system()] {
            for pause in [0u64, 50, 2_000, 9_000, 30_000] {
                let outer_start = Instant::now();
                let a = watch.stamp();
                let inner_start = Instant::now();
                std::thread::sleep(Duration::from_micros(pause));
                let inner_end = Instant::now();
                let b = watch.stamp();
                let outer_end = Instant::now();
                let measured = watch.nanos(a, b) as f64;
                let least = (inner_end - inner_start).as_nanos() as f64;
                let most = (outer_end - outer_start).as_nanos() as f64;
                let slack = most * 1e-4 + 1_000.0;
                assert!(
                    measured >= least - slack && measured <= most + slack,
                    "counter: {}: {measured} ns outside [{least}, {most}] after a {pause} us pause",
                    watch.reads_counter()
                );
                assert_eq!(watch.nanos(b, a), 0, "a backwards span is empty");
            }
        }
    }

    /// Across many re-anchorings (each 4 ms), every stamp's instant lies between system clock
    /// readings taken just before and after it, within a microsecond.
    #[test]
    fn instants_stay_on_the_system_clock() {
        let mut watch = Stopwatch::new();
        let until = Instant::now() + Duration::from_millis(60);
        let mut stamps = 0u64;
        let mut last = watch.stamp();
        loop {
            let before = Instant::now();
            let stamp = watch.stamp();
            let after = Instant::now();
            let slack = Duration::from_micros(1);
            assert!(
                stamp.at + slack >= before && stamp.at <= after + slack,
                "stamp {:?} outside [{before:?}, {after:?}] after {stamps} stamps",
                stamp.at
            );
            assert!(stamp.ticks >= last.ticks, "the counter went backwards");
            last = stamp;
            stamps += 1;
            if after >= until {
                break;
            }
        }
        assert!(stamps > 100, "only {stamps} stamps in 60 ms");
    }
}
