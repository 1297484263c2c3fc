//! The target's console in the text report: after the figures, each line at its second of
//! the test, the flagged ones marked with `!` and their flag.

use netchar_model::{ConsoleLine, ConsoleLog};
use std::fmt::Write;

/// Up to this many lines are all shown; a longer console shows only its flagged lines (the
/// JSON result keeps them all).
pub const SHOWN_LINES: usize = 40;

/// The console section of a result's text summary.
pub fn console_lines(log: &ConsoleLog) -> String {
    let mut out = String::new();
    let flagged = log.flagged().count();
    let _ = write!(out, "console ({}): {} lines, {flagged} flagged", log.source, log.lines.len());
    if log.dropped > 0 {
        let _ = write!(out, ", {} more dropped (over the bound)", log.dropped);
    }
    out.push('\n');
    let all = log.lines.len() <= SHOWN_LINES;
    for line in log.lines.iter().filter(|l| all || l.flag.is_some()) {
        out.push_str(&console_line(line));
        out.push('\n');
    }
    if !all {
        let _ =
            writeln!(out, "  ({} unflagged lines not shown: see the JSON result's console)", log.lines.len() - flagged);
    }
    if let Some(end) = &log.ended {
        let _ = writeln!(out, "console ended at {:.3} s: {}; the test went on", end.t, end.reason);
    }
    out
}

/// `  ! 1.502 [no_buffers] sendto ...` or `    -0.213 booting`: the second on the test's
/// clock, right-aligned.
pub fn console_line(line: &ConsoleLine) -> String {
    match line.flag {
        Some(f) => format!("! {:>9.3} [{}] {}", line.t, f.name(), line.text),
        None => format!("  {:>9.3} {}", line.t, line.text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(n: usize) -> ConsoleLog {
        let mut lines: Vec<ConsoleLine> =
            (0..n).map(|i| ConsoleLine::new(i as f64 - 1.0, format!("line {i}"))).collect();
        lines.push(ConsoleLine::new(2.5, "sendto UDP data: No buffer space available".into()));
        ConsoleLog { source: "serial /dev/ttyUSB0 115200".into(), lines, dropped: 0, ended: None }
    }

    #[test]
    fn a_short_console_is_shown_whole_with_its_flagged_lines_marked() {
        let text = console_lines(&log(2));
        let expected = [
            "console (serial /dev/ttyUSB0 115200): 3 lines, 1 flagged",
            "     -1.000 line 0",
            "      0.000 line 1",
            "!     2.500 [no_buffers] sendto UDP data: No buffer space available",
        ];
        assert_eq!(text, expected.map(|l| format!("{l}\n")).concat());
    }

    #[test]
    fn a_long_console_shows_its_flagged_lines_the_drops_and_its_end() {
        let mut l = log(SHOWN_LINES + 5);
        l.dropped = 7;
        l.ended = Some(netchar_model::console::ConsoleEnd { t: 3.25, reason: "end of output".into() });
        let text = console_lines(&l);
        assert!(text.contains("46 lines, 1 flagged, 7 more dropped"), "{text}");
        assert!(!text.contains("line 3\n"), "{text}");
        assert!(text.contains("[no_buffers]") && text.contains("45 unflagged lines not shown"), "{text}");
        assert!(text.contains("console ended at 3.250 s: end of output"), "{text}");
    }
}
