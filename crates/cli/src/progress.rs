//! The live progress line on a terminal: elapsed and remaining time and the test now running,
//! kept as the last line on stderr while the interval lines and tables scroll above it on
//! stdout. Shown only when both stdout and stderr are terminals and the output is not JSON;
//! coloured only without `NO_COLOR` (<https://no-color.org>).
//!
//! Why not indicatif: one line redrawn with `\r` and "erase line" is all netchar needs, and
//! std already tells a terminal apart (`IsTerminal`); indicatif would bring four crates
//! (console, unicode-width, portable-atomic, unit-prefix) for it.
//!
//! Everything printed while the line is up goes through [`Progress::suspend`], which erases
//! the line, lets the caller write, and draws it again, so no line is ever written over.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// A test shorter than this finishes before a progress line would tell anything.
pub(crate) const LONG_TEST: Duration = Duration::from_secs(5);
/// How often the line is redrawn while nothing else prints (the elapsed time moves on).
const REDRAW_EVERY: Duration = Duration::from_millis(500);
/// Erases the terminal line the cursor is on and returns to its start (ECMA-48 EL 2, CR).
const ERASE_LINE: &str = "\r\x1b[2K";

/// The progress line of one job (a test, a `--repeat` series, a suite, a plan); a no-op when
/// not shown. Dropping it erases the line.
pub(crate) struct Progress {
    shown: Option<Arc<Shared>>,
    ticker: Option<std::thread::JoinHandle<()>>,
}

struct Shared {
    line: Mutex<Line>,
    /// Wakes the ticker early when the job ends.
    ended: Condvar,
}

struct Line {
    started: Instant,
    /// The whole job's expected length, when the tests are timed; else only elapsed is shown.
    expected: Option<Duration>,
    /// What runs now ("run 2 of 5", "3 of 12: tcp up").
    current: String,
    colour: bool,
    drawn: bool,
    ended: bool,
}

impl Progress {
    /// A line that is never shown.
    pub(crate) fn hidden() -> Self {
        Self { shown: None, ticker: None }
    }

    /// The progress line of a job expected to take `expected` (None: untimed), shown if
    /// `long` (the job is several tests, or a test of at least [`LONG_TEST`]), the output is
    /// not JSON and stdout and stderr are both terminals.
    pub(crate) fn start(json: bool, long: bool, expected: Option<Duration>) -> Self {
        if json || !long || !std::io::stdout().is_terminal() || !std::io::stderr().is_terminal() {
            return Self::hidden();
        }
        // no-color.org: set and not empty means no colour.
        let colour = std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
        let shared = Arc::new(Shared {
            line: Mutex::new(Line {
                started: Instant::now(),
                expected,
                current: String::new(),
                colour,
                drawn: false,
                ended: false,
            }),
            ended: Condvar::new(),
        });
        let ticker = {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || {
                let mut line = shared.line.lock().unwrap_or_else(|p| p.into_inner());
                while !line.ended {
                    line.draw();
                    line = shared.ended.wait_timeout(line, REDRAW_EVERY).unwrap_or_else(|p| p.into_inner()).0;
                }
            })
        };
        Self { shown: Some(shared), ticker: Some(ticker) }
    }

    /// Says what runs now and redraws the line.
    pub(crate) fn set_current(&self, what: impl Into<String>) {
        if let Some(s) = &self.shown {
            let mut line = s.line.lock().unwrap_or_else(|p| p.into_inner());
            line.current = what.into();
            line.draw();
        }
    }

    /// Runs `print` (which writes to stdout or stderr) with the line erased, then draws the
    /// line again below what it printed.
    pub(crate) fn suspend<R>(&self, print: impl FnOnce() -> R) -> R {
        let _erased = self.erase();
        print()
    }

    /// Erases the line until the guard is dropped, which draws it again: what prints in
    /// between appears above it. The ticker waits meanwhile, so hold it only to print.
    pub(crate) fn erase(&self) -> Erased<'_> {
        Erased(self.shown.as_ref().map(|s| {
            let mut line = s.line.lock().unwrap_or_else(|p| p.into_inner());
            line.erase();
            line
        }))
    }

    /// Erases the line for good; what prints after it prints as without a progress line.
    pub(crate) fn finish(&mut self) {
        if let Some(s) = self.shown.take() {
            {
                let mut line = s.line.lock().unwrap_or_else(|p| p.into_inner());
                line.ended = true;
                line.erase();
            }
            s.ended.notify_all();
        }
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
    }
}

/// The progress line erased while something prints; see [`Progress::erase`].
pub(crate) struct Erased<'a>(Option<std::sync::MutexGuard<'a, Line>>);

impl Drop for Erased<'_> {
    fn drop(&mut self) {
        if let Some(line) = self.0.as_mut() {
            line.draw();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

impl Line {
    fn text(&self) -> String {
        let elapsed = self.started.elapsed();
        let mut text = format!("elapsed {}", clock(elapsed));
        if let Some(expected) = self.expected {
            // Rounded up: "0:00 remaining" would claim the job is over while it runs.
            let left = expected.saturating_sub(elapsed) + Duration::from_millis(999);
            text.push_str(&format!(", remaining ~{}", clock(left)));
        }
        if !self.current.is_empty() {
            text.push_str(&format!(" | {}", self.current));
        }
        text
    }

    fn draw(&mut self) {
        if self.ended {
            return;
        }
        let text = self.text();
        // Cyan, then reset (SGR 36, 0): told apart from the figures, readable on dark and light.
        let shown =
            if self.colour { format!("{ERASE_LINE}\x1b[36m{text}\x1b[0m") } else { format!("{ERASE_LINE}{text}") };
        // Progress is a courtesy: a stderr that fails must not fail the test.
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(shown.as_bytes()).and_then(|_| err.flush());
        self.drawn = true;
    }

    fn erase(&mut self) {
        if self.drawn {
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(ERASE_LINE.as_bytes()).and_then(|_| err.flush());
            self.drawn = false;
        }
    }
}

/// `m:ss`, or `h:mm:ss` from an hour.
fn clock(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_shows_minutes_and_seconds_then_hours() {
        assert_eq!(clock(Duration::from_secs(5)), "0:05");
        assert_eq!(clock(Duration::from_secs(125)), "2:05");
        assert_eq!(clock(Duration::from_secs(3725)), "1:02:05");
    }

    #[test]
    fn a_hidden_line_runs_what_it_suspends_and_draws_nothing() {
        let mut p = Progress::hidden();
        p.set_current("run 1 of 2");
        assert_eq!(p.suspend(|| 7), 7);
        p.finish();
    }
}
