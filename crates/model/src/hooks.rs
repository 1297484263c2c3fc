//! The user's own commands a test ran around itself (issue 23): `--step-cmd` before and after
//! each step of a sweep, suite or plan ([`StepRecord`]), and `--reset-cmd` before each
//! `--repeat` iteration, with the wait for the target to answer again ([`ResetRecord`]).
//!
//! Pure data: the CLI runs the commands and fills these in.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One run of a user's command (`sh -c COMMAND`): what it was given and what it did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CommandRun {
    /// When it ran: `before` or `after` (a step), `reset` (an iteration).
    pub phase: String,
    /// The command, as given.
    pub command: String,
    /// The `NETCHAR_*` variables it was given, besides netchar's own environment.
    pub env: BTreeMap<String, String>,
    /// Its exit status; absent when it did not exit by itself (killed, timed out, not started).
    pub exit_code: Option<i32>,
    /// True when it ran past its timeout and was killed.
    pub timed_out: bool,
    /// Why it could not be started or waited for (`sh` missing, ...); absent when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Seconds from its start to its exit (or to its kill at the timeout).
    pub seconds: f64,
    /// Its standard output, the first bytes of it (lossily UTF-8).
    pub stdout: String,
    /// Its standard error, the first bytes of it (lossily UTF-8).
    pub stderr: String,
    /// Bytes of standard output and standard error beyond what is kept, in that order.
    pub truncated_bytes: [u64; 2],
}

impl CommandRun {
    /// It exited by itself, with status 0.
    pub fn succeeded(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out && self.error.is_none()
    }

    /// A few words on how it ended: `exit 0`, `exit 3`, `timed out, killed`, or the error.
    pub fn outcome(&self) -> String {
        match (&self.error, self.timed_out, self.exit_code) {
            (Some(e), _, _) => format!("failed: {e}"),
            (None, true, _) => "timed out, killed".into(),
            (None, false, Some(c)) => format!("exit {c}"),
            (None, false, None) => "killed by a signal".into(),
        }
    }
}

/// A result's place in a sweep, suite or plan (`step` in the result): its number, the
/// `--step-cmd` runs around it, and, in a rate sweep, whether it is the knee.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// The step's number in its job, from 1, in the order the steps ran.
    pub index: u32,
    /// `--step-cmd` before the step and after it, in that order; empty without `--step-cmd`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<CommandRun>,
    /// A rate sweep's knee threshold (`--knee-loss`), in percent: the knee is the first step of
    /// its direction whose loss is above it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knee_loss_percent: Option<f64>,
    /// True on the step that is its direction's knee.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub knee: bool,
}

/// `--reset-cmd` before an iteration (`reset` in the result): the command, and the wait
/// until the server accepted a control connection again.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResetRecord {
    /// The command's run.
    pub command: CommandRun,
    /// Seconds from the command's start until the server accepted a connection; absent when
    /// it did not within `--reset-timeout`.
    pub time_to_ready_seconds: Option<f64>,
    /// Connection attempts made while waiting, the successful one included.
    pub probes: u32,
}
