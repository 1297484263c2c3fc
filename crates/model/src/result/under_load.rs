//! What latency under load (`rr --under-load`) measured beside the rr test's own figures:
//! every load flow and every latency probe, on one time axis. The engine runs them; this
//! module only holds the figures, for every reporter.
//!
//! The time axis starts when the server admitted the first load flow; each flow and probe
//! carries its own start on that axis, and its intervals are already shifted onto it.

use crate::{Direction, Flow, FlowSummary, RrFigures};
use serde::{Deserialize, Serialize};

/// Every flow and probe of a latency-under-load test (`summary.under_load`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UnderLoad {
    /// The load as given to `--under-load` (`rrul`, `tcp-up:dscp=ef,tcp-down`, ...).
    pub load: String,
    /// Each load flow, in the order given.
    pub flows: Vec<LoadFlow>,
    /// One latency probe per DSCP class of the flows, in the order the classes first appear.
    pub probes: Vec<LatencyProbe>,
}

/// One load flow: a throughput test of one stream in one direction and class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadFlow {
    /// `tcp` or `udp`.
    pub protocol: String,
    /// Which way its data went.
    pub direction: Direction,
    /// The DSCP of its packets in both directions (data and acknowledgements); None: unmarked.
    pub dscp: Option<u8>,
    /// The class's name: `BE`, `BK`, `CS5`, `EF`, `AF41`, ... or `unmarked`.
    pub class: String,
    /// Its start on the time axis, seconds (when the server admitted it).
    pub start: f64,
    /// Client to server, from both ends' counters; absent when the flow did not go up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up: Option<FlowSummary>,
    /// Server to client, from both ends' counters; absent when the flow did not go down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down: Option<FlowSummary>,
    /// Its rate per interval on the time axis, as its receiver measured it.
    pub intervals: Vec<FlowRate>,
    /// Null, or why the flow failed.
    pub error: Option<String>,
}

/// A load flow's rate over one interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FlowRate {
    /// Start on the time axis, seconds.
    pub start: f64,
    /// End on the time axis, seconds.
    pub end: f64,
    /// Which way.
    pub flow: Flow,
    /// Bytes the receiver read in the interval.
    pub bytes: u64,
    /// 8 · bytes / (end − start).
    pub bits_per_second: f64,
}

/// One latency probe: an rr test in one DSCP class, idle and then beside the load.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyProbe {
    /// The DSCP of its requests and responses; None: unmarked.
    pub dscp: Option<u8>,
    /// The class's name, as [`LoadFlow::class`].
    pub class: String,
    /// Before the load started.
    pub idle: Option<RrFigures>,
    /// While the load ran (with its CDF, `latency_cdf`).
    pub loaded: Option<RrFigures>,
    /// The loaded run's start on the time axis, seconds.
    pub start: f64,
    /// The loaded run's latency per interval on the time axis.
    pub intervals: Vec<ProbeInterval>,
    /// Null, or why the probe failed.
    pub error: Option<String>,
}

/// A probe's round trips over one interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ProbeInterval {
    /// Start on the time axis, seconds.
    pub start: f64,
    /// End on the time axis, seconds.
    pub end: f64,
    /// Transactions completed in the interval.
    pub transactions: u64,
    /// Median round trip, µs.
    pub p50_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
    /// Slowest round trip, µs.
    pub max_us: f64,
}

/// The name of a DSCP class as flent's RRUL names them: `BE` (0), `BK` (CS1), otherwise the
/// RFC name in capitals (`CS5`, `EF`, `AF41`) or the code point; `unmarked` for None.
pub fn class_name(dscp: Option<u8>) -> String {
    match dscp {
        None => "unmarked".into(),
        Some(0) => "BE".into(),
        Some(8) => "BK".into(),
        Some(d) => crate::spec::dscp_name(d).map_or_else(|| d.to_string(), str::to_ascii_uppercase),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_named_as_rrul_names_them() {
        let names: Vec<String> = [Some(0), Some(8), Some(40), Some(46), Some(3), None].map(class_name).into();
        assert_eq!(names, ["BE", "BK", "CS5", "EF", "3", "unmarked"]);
    }
}
