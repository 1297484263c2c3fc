//! The target's console over a test (`--console`, `--console-cmd`): its lines on the test's
//! clock, and which of them match a known error pattern.
//!
//! Reading the console (a serial port, a command's output) is the CLI's and `netchar_sys`'s
//! job; this module only holds what was read and says what a line means, so every reporter
//! shows the same flags.

use serde::{Deserialize, Serialize};

/// The target's console lines from shortly before the test to shortly after it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ConsoleLog {
    /// Where the lines came from: `serial /dev/ttyUSB0 115200` or `command ssh board dmesg -w`.
    pub source: String,
    /// The lines kept, in the order they arrived.
    pub lines: Vec<ConsoleLine>,
    /// Lines read but not kept: past the count or byte bound of one test's console.
    pub dropped: u64,
    /// Set when the console ended (end of file, a read error) before the capture did; the
    /// test went on without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<ConsoleEnd>,
}

/// One console line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConsoleLine {
    /// When its first byte arrived, seconds since the test started (the intervals' clock);
    /// negative before the test.
    pub t: f64,
    /// The line, without its end of line; invalid UTF-8 replaced, other control characters
    /// dropped.
    pub text: String,
    /// The error pattern it matches, or null.
    pub flag: Option<ConsoleFlag>,
}

/// A console that ended before the capture did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConsoleEnd {
    /// When, seconds since the test started.
    pub t: f64,
    /// Why: `end of output`, or the read error.
    pub reason: String,
}

/// What a flagged line reports; see [`PATTERNS`] for the words that raise each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConsoleFlag {
    /// The stack ran out of buffers for a send (ENOBUFS): eCos's `sendto UDP data: No buffer
    /// space available`.
    NoBuffers,
    /// An allocation failed: lwIP's `memp_malloc`/`pbuf_alloc` out of memory, ERR_MEM.
    AllocFailure,
    /// The target gave up on something (eCos nc_test's `recvfrom timeout ... giving up`).
    GivingUp,
    /// A timeout.
    Timeout,
    /// A FIFO or buffer overran.
    Overrun,
    /// A panic, fault or abort.
    Panic,
    /// A failed assertion.
    Assert,
    /// A reset: of a connection, a link or the target.
    Reset,
    /// Any other line that says error or failed.
    Error,
}

impl ConsoleFlag {
    /// The flag's name, as in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Self::NoBuffers => "no_buffers",
            Self::AllocFailure => "alloc_failure",
            Self::GivingUp => "giving_up",
            Self::Timeout => "timeout",
            Self::Overrun => "overrun",
            Self::Panic => "panic",
            Self::Assert => "assert",
            Self::Reset => "reset",
            Self::Error => "error",
        }
    }
}

/// The error patterns, lower case, tried in order against the lower-cased line; the first
/// that occurs in it names the line's flag. The specific causes come before the generic
/// ones, so `recvfrom timeout ... giving up` is `giving_up` and `sendto: No buffer space
/// available` is `no_buffers`, not `error`.
pub const PATTERNS: &[(&str, ConsoleFlag)] = &[
    ("no buffer space available", ConsoleFlag::NoBuffers),
    ("enobufs", ConsoleFlag::NoBuffers),
    ("out of memory", ConsoleFlag::AllocFailure),
    ("could not allocate", ConsoleFlag::AllocFailure),
    ("alloc failed", ConsoleFlag::AllocFailure),
    ("allocation failed", ConsoleFlag::AllocFailure),
    ("err_mem", ConsoleFlag::AllocFailure),
    ("giving up", ConsoleFlag::GivingUp),
    ("timed out", ConsoleFlag::Timeout),
    ("timeout", ConsoleFlag::Timeout),
    ("overrun", ConsoleFlag::Overrun),
    ("overflow", ConsoleFlag::Overrun),
    ("panic", ConsoleFlag::Panic),
    ("fault", ConsoleFlag::Panic),
    ("abort", ConsoleFlag::Panic),
    ("assert", ConsoleFlag::Assert),
    ("reset", ConsoleFlag::Reset),
    ("reboot", ConsoleFlag::Reset),
    ("error", ConsoleFlag::Error),
    ("failed", ConsoleFlag::Error),
];

/// The flag of a console line: the first of [`PATTERNS`] it contains, ignoring case.
///
/// ```
/// use netchar_model::console::{classify, ConsoleFlag};
/// assert_eq!(classify("sendto UDP data: No buffer space available"), Some(ConsoleFlag::NoBuffers));
/// assert_eq!(classify("listening on 10.77.0.2:5300"), None);
/// ```
pub fn classify(line: &str) -> Option<ConsoleFlag> {
    let lower = line.to_lowercase();
    PATTERNS.iter().find(|(p, _)| lower.contains(p)).map(|&(_, flag)| flag)
}

impl ConsoleLog {
    /// Lines that match an error pattern.
    pub fn flagged(&self) -> impl Iterator<Item = &ConsoleLine> {
        self.lines.iter().filter(|l| l.flag.is_some())
    }
}

impl ConsoleLine {
    /// A line at `t` with its flag from [`classify`].
    pub fn new(t: f64, text: String) -> Self {
        let flag = classify(&text);
        Self { t, text, flag }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lines_the_issue_names_get_their_flags() {
        let cases = [
            ("sendto UDP data: No buffer space available", Some(ConsoleFlag::NoBuffers)),
            ("send: ENOBUFS", Some(ConsoleFlag::NoBuffers)),
            ("recvfrom timeout (5 s), giving up", Some(ConsoleFlag::GivingUp)),
            ("recv: Connection timed out", Some(ConsoleFlag::Timeout)),
            ("tcp: connection reset by peer", Some(ConsoleFlag::Reset)),
            ("eth0: RX FIFO overrun", Some(ConsoleFlag::Overrun)),
            ("memp_malloc: out of memory in pool PBUF_POOL", Some(ConsoleFlag::AllocFailure)),
            ("tcp_write: could not allocate memory for pbuf", Some(ConsoleFlag::AllocFailure)),
            ("Kernel panic - not syncing", Some(ConsoleFlag::Panic)),
            ("hard fault: pc=0x0000123a", Some(ConsoleFlag::Panic)),
            ("Assertion \"pbuf_free: p->ref > 0\" failed", Some(ConsoleFlag::Assert)),
            ("ERROR: bad checksum", Some(ConsoleFlag::Error)),
            ("bind failed", Some(ConsoleFlag::Error)),
            ("netchar-responder listening on 10.77.0.2:5300", None),
            ("", None),
        ];
        for (line, flag) in cases {
            assert_eq!(classify(line), flag, "{line:?}");
        }
    }

    #[test]
    fn every_pattern_is_lower_case_and_raises_its_own_flag() {
        for &(p, flag) in PATTERNS {
            assert_eq!(p, p.to_lowercase(), "{p}");
            // Earlier, broader patterns must not shadow a later one.
            assert_eq!(classify(&p.to_uppercase()), Some(flag), "{p}");
        }
    }

    #[test]
    fn flags_serialize_as_their_names() {
        for &(_, flag) in PATTERNS {
            assert_eq!(serde_json::to_value(flag).unwrap(), flag.name());
        }
    }
}
