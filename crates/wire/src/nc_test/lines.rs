//! The lines the stock programs print, as they print them.

use super::{Kind, Pause};
use std::time::Duration;

/// A line netchar adds to the stock output starts with this.
pub const NOTE_PREFIX: &str = "netchar: ";

/// The heading of the no-load section.
pub const NO_LOAD_HEADING: &str = "================== No load, master at 100% ========================";
/// The heading of the slave-load section (after an empty line).
pub const SLAVE_LOADS_HEADING: &str = "\n====================== Various slave compute loads ===================";
/// The heading of the master-load (idle) section (after an empty line).
pub const MASTER_LOADS_HEADING: &str = "\n====================== Various master loads ===================";

/// The line before each slave load's tests.
pub fn slave_load_line(load_pct: u32) -> String {
    format!(">>>>>>>>>>>> slave processing load at {load_pct}%")
}

/// The line under a test with the slave's results record (signed, as the stock master prints
/// its `%d`).
pub fn slave_counts_line(nsent: u32, nrecvd: u32) -> String {
    format!("   slave sent {}, recvd {}", nsent as i32, nrecvd as i32)
}

/// The stock result line: `"%s - %d bufs of %d bytes in %d.%02d seconds - %.2f KB/S - %.4f
/// Mbit/S (M = 10^6)"` (+ lost, + out of sequence). The time is truncated to 10 ms.
pub fn result_line(
    name: &str,
    total_packets: u32,
    buflen: u32,
    elapsed: Duration,
    lost: u32,
    seq_errors: u32,
) -> String {
    let secs = elapsed.as_secs();
    let centis = elapsed.subsec_micros() / 10_000;
    let real = secs as f64 + f64::from(centis) * 0.01;
    let thru = (i64::from(total_packets) * i64::from(buflen)) as f64 / real;
    let mut s = format!(
        "{name} - {total_packets} bufs of {buflen} bytes in {secs}.{centis:02} seconds - {:.2} KB/S - {:.4} Mbit/S (M = 10^6)",
        thru / 1024.0,
        thru * 8.0 / 1_000_000.0
    );
    if lost > 0 {
        s.push_str(&format!(", {lost} lost"));
    }
    if seq_errors > 0 {
        s.push_str(&format!(", {seq_errors} out of sequence"));
    }
    s
}

/// The line netchar adds under a stock result line of a test shorter than one tick of
/// nc_test's 10 ms clock: that line reads 0.00 seconds and an `inf` rate, as the stock master
/// printed it (it divides by the truncated time); this one says so and gives the rate over the
/// time netchar measured. None for a test of a tick or more.
pub fn under_one_tick_line(total_packets: u32, buflen: u32, elapsed: Duration) -> Option<String> {
    let seconds = elapsed.as_secs_f64();
    if seconds >= 0.01 {
        return None;
    }
    let bytes = f64::from(total_packets) * f64::from(buflen);
    let measured = if seconds > 0.0 {
        format!(
            "measured over {:.3} ms: {:.2} KB/S - {:.4} Mbit/S",
            seconds * 1e3,
            bytes / seconds / 1024.0,
            bytes * 8.0 / seconds / 1e6
        )
    } else {
        "no time measured".into()
    };
    Some(format!(
        "   under one tick of nc_test's 10 ms clock: the line above reads 0.00 seconds and an inf rate, as nc_test \
         printed it; {measured}"
    ))
}

/// The stock "Start ..." line.
pub fn start_line(kind: Kind, nbufs: u32, buflen: u32, pause: Pause) -> String {
    if pause.ticks > 0 {
        format!(
            "Start {} [{nbufs},{buflen}] - {}ms delay after {} packet{}",
            kind.name(),
            pause.ticks * 10,
            pause.threshold,
            if pause.threshold > 1 { "s" } else { "" }
        )
    } else {
        format!("Start {} [{nbufs},{buflen}] - no delays", kind.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A test shorter than one tick keeps the stock line (`inf KB/S`), and the note under it
    /// says why and gives the rate over the time measured.
    #[test]
    fn a_test_under_one_tick_gets_a_note_with_the_measured_rate() {
        let elapsed = Duration::from_micros(4000);
        assert!(result_line("UDP recv", 640, 1024, elapsed, 0, 0).contains("0.00 seconds - inf KB/S"));
        let note = under_one_tick_line(640, 1024, elapsed).unwrap();
        assert!(note.contains("reads 0.00 seconds and an inf rate"), "{note}");
        // 655360 bytes in 4 ms: 160000 KB/S, 1310.72 Mbit/s.
        assert!(note.ends_with("measured over 4.000 ms: 160000.00 KB/S - 1310.7200 Mbit/S"), "{note}");
        assert!(under_one_tick_line(640, 1024, Duration::ZERO).unwrap().ends_with("no time measured"));
        assert_eq!(under_one_tick_line(640, 1024, Duration::from_millis(10)), None);
    }
}
