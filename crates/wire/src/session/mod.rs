//! The client and server state machines of control protocol v1.
//!
//! Both are plain structs with the quinn-proto shape: `handle_input(now, bytes)`,
//! `poll_output(&mut out)`, `poll_event()`, `poll_timeout()`, `handle_timeout(now)`, plus a few
//! calls by which the driver reports what its sockets and workers did. Each has one `enum State`
//! and one transition function. They never touch a socket or read a clock, so the tests run a
//! client against a server in memory with fake time.
//!
//! Sequence (docs/protocol.md):
//! ```text
//! C→S hello(control)            S→C hello(server)
//! C→S request{spec}             S→C accepted{cookie} | busy | rejected
//! C→S data connections: hello(data, cookie, stream id) each
//!                               S→C ready
//! C→S start                     ... data flows; keepalives both ways ...
//! C→S sender_done{totals}       S→C sender_done{totals}      (whoever sends)
//! C→S stop (only to end early)  S→C results{streams, cpu, error}
//! ```

mod client;
mod server;

pub use client::{ClientEvent, ClientSession};
pub use server::{ServerEvent, ServerSession};

use std::time::{Duration, Instant};

/// How long each phase may take before the session gives up.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// From connect to the server's hello.
    pub hello: Duration,
    /// For each setup step (answer to the request, data connections, start).
    pub phase: Duration,
    /// Longest silence from the peer while a test runs.
    pub silence: Duration,
    /// How often to send a keepalive when there is nothing else to say.
    pub keepalive: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            hello: Duration::from_secs(5),
            phase: Duration::from_secs(10),
            silence: Duration::from_secs(10),
            keepalive: Duration::from_secs(1),
        }
    }
}

/// When the peer was last heard and we last spoke, for keepalives and silence detection.
#[derive(Debug, Clone, Copy)]
struct Liveness {
    heard: Instant,
    spoke: Instant,
}

impl Liveness {
    fn new(now: Instant) -> Self {
        Self { heard: now, spoke: now }
    }

    fn keepalive_due(&self, now: Instant, t: &Timeouts) -> bool {
        now.saturating_duration_since(self.spoke) >= t.keepalive
    }

    fn silent_too_long(&self, now: Instant, t: &Timeouts) -> bool {
        now.saturating_duration_since(self.heard) >= t.silence
    }

    fn next_deadline(&self, t: &Timeouts) -> Instant {
        (self.spoke + t.keepalive).min(self.heard + t.silence)
    }
}

#[cfg(test)]
mod tests;
