//! The exit statuses of every command, in one place below all of them.

/// The test ran and every figure was reported.
pub(crate) const OK: u8 = 0;
/// A `--expect` or `--baseline` gate was not met.
pub(crate) const GATE: u8 = 1;
/// Bad usage, no connection, a protocol error, or a test that failed part way.
pub(crate) const ERROR: u8 = 2;
/// Interrupted (Ctrl-C / SIGTERM); what was measured was still reported.
pub(crate) const INTERRUPTED: u8 = 130;
