//! What a far end that is a target (the C responder on a board) says about itself over a test,
//! and what follows from it: its stack's own counters, its idle loop, and what it spent per
//! byte, datagram or transaction (docs/embedded.md, "Target-side figures").
//!
//! [`TargetFigures`] is the far end's report as it came (the `target` of its `results`
//! message); [`TargetReport`] is that report with the figures derived from it and from the
//! rest of the [`TestResult`](crate::TestResult), which it keeps beside them so that each can be
//! recomputed. The types are parts of the result and stand below it; [`TargetReport::derive`]
//! reads the whole result, so it is the result's (`result/target.rs`).
//! Under QEMU's `-icount` the board's clock counts instructions, so its busy time per unit is
//! an instruction count that does not move with the host's load: a regression figure of the
//! build named in [`TargetReport::build`].

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The far end's own figures over one test, as it reported them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetFigures {
    /// Counts its idle loop made over the test (the eCos nc_test slave's idle counter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_count: Option<u64>,
    /// Counts the idle loop makes in a second of an unloaded target (calibrated at boot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_per_second: Option<u64>,
    /// How much each of its counters changed over the test, by name (lwIP's `lwip_stats`,
    /// its transport's and driver's drops); the far end sends only those that moved.
    #[serde(default)]
    pub counters: BTreeMap<String, u64>,
}

impl TargetFigures {
    /// True for a counter that counts trouble: a drop (`*_drop`, `*_near_full`), an
    /// allocation or other error (`*err*`), a retransmission or a reset sent.
    pub fn is_trouble(name: &str) -> bool {
        name.ends_with("_drop")
            || name.contains("err")
            || name.contains("retrans")
            || name.ends_with("rst_out")
            || name.ends_with("near_full")
    }

    /// The counters that count trouble and moved, in name order.
    pub fn trouble(&self) -> impl Iterator<Item = (&str, u64)> {
        self.counters.iter().filter(|(n, v)| **v > 0 && Self::is_trouble(n)).map(|(n, v)| (n.as_str(), *v))
    }
}

/// What the figures are per: the unit of a test's work on the far end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetUnit {
    /// A byte the far end received or sent (TCP, both directions).
    Byte,
    /// A datagram the far end received or sent (UDP).
    Datagram,
    /// A completed transaction (rr, echo).
    Transaction,
}

impl TargetUnit {
    /// `byte`, `datagram` or `transaction`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Byte => "byte",
            Self::Datagram => "datagram",
            Self::Transaction => "transaction",
        }
    }
}

/// The far end's report with what follows from it (`target` in the JSON result).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetReport {
    /// As the far end reported them.
    #[serde(flatten)]
    pub figures: TargetFigures,
    /// The far end's build, as it names it in `remote_host.kernel` (the C responder on a
    /// board: lwIP's version, compiler, optimisation and a hash of `lwipopts.h`): the figures
    /// below are that build's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<String>,
    /// idle_count / (idle_per_second × `cpu.remote.wall_seconds`) × 100: the share of the
    /// test the target spent in its idle loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_pct: Option<f64>,
    /// The far end's busy time, `cpu.remote.user_seconds + system_seconds` (on the board the
    /// time its loop was not idle), on its own clock; absent when it reports none (0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_seconds: Option<f64>,
    /// What the figures below are per.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<TargetUnit>,
    /// How many of them: the far end's bytes (TCP, its stream records, warm-up included),
    /// datagrams received + sent (UDP, its stream records), or the completed transactions
    /// (`summary.rr.transactions`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub units: Option<u64>,
    /// busy_seconds × 10⁹ / units: the far end's busy nanoseconds per byte (TCP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_ns_per_byte: Option<f64>,
    /// The same per datagram (UDP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_ns_per_datagram: Option<f64>,
    /// The same per transaction (rr, echo).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_ns_per_transaction: Option<f64>,
    /// The target's nanoseconds per instruction, as given (`--target-ns-per-instruction`: 32
    /// for QEMU's `-icount shift=5`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ns_per_instruction: Option<f64>,
    /// busy_ns_per_byte / ns_per_instruction: instructions per byte, idle loop excluded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions_per_byte: Option<f64>,
    /// The same per datagram.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions_per_datagram: Option<f64>,
    /// The same per transaction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions_per_transaction: Option<f64>,
}

impl TargetReport {
    /// The busy nanoseconds per unit, whichever the unit.
    pub fn busy_ns_per_unit(&self) -> Option<f64> {
        self.busy_ns_per_byte.or(self.busy_ns_per_datagram).or(self.busy_ns_per_transaction)
    }

    /// The instructions per unit, whichever the unit.
    pub fn instructions_per_unit(&self) -> Option<f64> {
        self.instructions_per_byte.or(self.instructions_per_datagram).or(self.instructions_per_transaction)
    }
}
