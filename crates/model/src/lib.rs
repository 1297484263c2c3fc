//! netchar's data model: what a test is ([`TestSpec`]), the units it is measured in
//! ([`units`]), and what a test produced ([`TestResult`]).
//!
//! This crate does no I/O and knows no sockets or clocks: the client, the server, every
//! reporter and every protocol adapter meet here. Every figure in a [`TestResult`] is in SI
//! base units (bytes, seconds, bits per second) and is derived from raw counters that are kept
//! beside it, so a reader can recompute it.
//!
//! ```
//! use netchar_model::units::{parse_bytes, parse_bit_rate};
//! assert_eq!(parse_bytes("128Ki").unwrap(), 131_072);
//! assert_eq!(parse_bit_rate("1.5G").unwrap(), 1_500_000_000);
//! ```
//!
//! The modules stand in layers, each on the ones below it only. At the bottom what a test is
//! and what it is measured in ([`units`], [`payload`], [`spec`]) and what its ends observed
//! beside the figures ([`evidence`], [`console`], [`hooks`]); above them the parts of a result
//! that have their own arithmetic ([`loss`], [`method`], [`target`]: types and what they compute
//! from their own fields); then the [`result`] that holds them all, with the derivations that
//! read a whole result (a flow's loss breakdown, the method, the target's cost per unit) as its
//! own submodules, and the latency-under-load figures it is made of ([`under_load`]); on top,
//! what reads results ([`figures`]).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod console;
pub mod evidence;
pub mod figures;
pub mod hooks;
pub mod loss;
pub mod method;
pub mod payload;
pub mod result;
pub mod spec;
pub mod target;
pub mod units;

pub use console::{ConsoleFlag, ConsoleLine, ConsoleLog};
pub use evidence::*;
pub use hooks::{CommandRun, ResetRecord, StepRecord};
pub use loss::LossBreakdown;
pub use method::{Method, MethodDifference, METHOD_FIELDS};
pub use payload::{Integrity, PayloadKind, PayloadSpec, RrIntegrity};
pub use result::under_load::{self, FlowRate, LatencyProbe, LoadFlow, ProbeInterval, UnderLoad};
pub use result::*;
pub use spec::*;
pub use target::{TargetFigures, TargetReport, TargetUnit};

/// The version of the JSON result schema (docs/json.md). Bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// Bits per second for `bytes` moved in `seconds`; 0 when no time elapsed, never NaN.
pub fn bits_per_second(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 && seconds.is_finite() {
        bytes as f64 * 8.0 / seconds
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_is_zero_not_nan_for_zero_time() {
        assert_eq!(bits_per_second(1000, 0.0), 0.0);
        assert_eq!(bits_per_second(1000, f64::NAN), 0.0);
        assert_eq!(bits_per_second(125, 1.0), 1000.0);
    }
}
