//! What a far end that is a target (the C responder on a board) says about itself over a test,
//! and what follows from it: its stack's own counters, its idle loop, and what it spent per
//! byte, datagram or transaction (docs/embedded.md, "Target-side figures").
//!
//! [`TargetFigures`] is the far end's report as it came (the `target` of its `results`
//! message); [`TargetReport`] is that report with the figures derived from it and from the
//! rest of the [`TestResult`], which it keeps beside them so that each can be recomputed.
//! Under QEMU's `-icount` the board's clock counts instructions, so its busy time per unit is
//! an instruction count that does not move with the host's load: a regression figure of the
//! build named in [`TargetReport::build`].

use crate::{Endpoint, TestKind, TestResult};
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
    /// `figures` with the figures derived from them and from `result` (its far end's CPU,
    /// stream records and transactions, its `remote_host`); instructions too when
    /// `ns_per_instruction` is given.
    pub fn derive(figures: TargetFigures, result: &TestResult, ns_per_instruction: Option<f64>) -> Self {
        let cpu = result.cpu.remote.as_ref();
        let wall = cpu.map_or(0.0, |c| c.wall_seconds);
        let idle_pct = match (figures.idle_count, figures.idle_per_second) {
            (Some(count), Some(per_second)) if per_second > 0 && wall > 0.0 => {
                Some(count as f64 / (per_second as f64 * wall) * 100.0)
            }
            _ => None,
        };
        // A far end without the CPU hook reports 0: no busy time is known, not none spent.
        let busy_seconds = cpu.map(|c| c.user_seconds + c.system_seconds).filter(|s| *s > 0.0 && s.is_finite());
        let (unit, units) = work_done(result);
        let ns_per_unit = match (busy_seconds, units) {
            (Some(busy), Some(n)) if n > 0 => Some(busy * 1e9 / n as f64),
            _ => None,
        };
        let ns_per_instruction = ns_per_instruction.filter(|ns| *ns > 0.0 && ns.is_finite());
        let instructions = ns_per_unit.zip(ns_per_instruction).map(|(ns, per)| ns / per);
        let of = |u: TargetUnit, v: Option<f64>| v.filter(|_| unit == Some(u));
        Self {
            build: result.remote_host.as_ref().map(|h| h.kernel.clone()).filter(|k| !k.is_empty()),
            idle_pct,
            busy_seconds,
            unit,
            units,
            busy_ns_per_byte: of(TargetUnit::Byte, ns_per_unit),
            busy_ns_per_datagram: of(TargetUnit::Datagram, ns_per_unit),
            busy_ns_per_transaction: of(TargetUnit::Transaction, ns_per_unit),
            ns_per_instruction,
            instructions_per_byte: of(TargetUnit::Byte, instructions),
            instructions_per_datagram: of(TargetUnit::Datagram, instructions),
            instructions_per_transaction: of(TargetUnit::Transaction, instructions),
            figures,
        }
    }

    /// The busy nanoseconds per unit, whichever the unit.
    pub fn busy_ns_per_unit(&self) -> Option<f64> {
        self.busy_ns_per_byte.or(self.busy_ns_per_datagram).or(self.busy_ns_per_transaction)
    }

    /// The instructions per unit, whichever the unit.
    pub fn instructions_per_unit(&self) -> Option<f64> {
        self.instructions_per_byte.or(self.instructions_per_datagram).or(self.instructions_per_transaction)
    }
}

/// The unit of the test's work and how many the far end did (see [`TargetReport::units`]).
fn work_done(r: &TestResult) -> (Option<TargetUnit>, Option<u64>) {
    let far = r.streams.iter().filter(|s| s.measured_by == Endpoint::Server);
    match r.test.spec.kind {
        TestKind::Tcp => (Some(TargetUnit::Byte), Some(far.map(|s| s.bytes).sum())),
        TestKind::Udp => {
            let datagrams = far
                .map(|s| {
                    s.udp_received.as_ref().map_or(0, |u| u.packets) + s.udp_sent.as_ref().map_or(0, |u| u.packets)
                })
                .sum();
            (Some(TargetUnit::Datagram), Some(datagrams))
        }
        TestKind::Rr => (Some(TargetUnit::Transaction), r.summary.rr.as_ref().map(|rr| rr.transactions)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        CpuReport, CpuUsage, FarEnd, Flow, HostInfo, ResultHeader, Role, RrFigures, StreamRecord, TestInfo, TestSpec,
        UdpReceived,
    };

    fn result(spec: TestSpec, streams: Vec<StreamRecord>, user: f64, wall: f64) -> TestResult {
        let header = ResultHeader {
            test: TestInfo {
                spec,
                remote: "10.77.0.2:5300".into(),
                family: "ipv4".into(),
                title: None,
                client_cpu: None,
                concurrent_tests: 1,
                protocol: "netchar".into(),
                peer_software: Some("netchar-responder 0.1".into()),
                far_end: FarEnd::Reports,
                caveats: Vec::new(),
            },
            started_at: "2026-01-01T00:00:00Z".into(),
            host: HostInfo::default(),
            remote_host: Some(HostInfo { kernel: "lwIP 2.1.3 NO_SYS=1, gcc 12.2.1 -Os".into(), ..HostInfo::default() }),
        };
        let remote = CpuUsage { user_seconds: user, wall_seconds: wall, ..CpuUsage::default() };
        TestResult::assemble(header, streams, CpuReport { local: None, remote: Some(remote) }, None)
    }

    fn figures() -> TargetFigures {
        TargetFigures {
            idle_count: Some(1_000_000),
            idle_per_second: Some(4_000_000),
            counters: [("link_recv".to_string(), 2812), ("tcp_drop".to_string(), 0), ("ip_drop".to_string(), 3)]
                .into_iter()
                .collect(),
        }
    }

    #[test]
    fn tcp_cost_is_the_far_ends_busy_time_over_its_bytes() {
        let far = StreamRecord::bare(1, Flow::Up, Role::Receiver, Endpoint::Server, 4_000_000, 1.0);
        let near = StreamRecord::bare(1, Flow::Up, Role::Sender, Endpoint::Client, 4_000_000, 1.0);
        // 0.75 s busy of 1.0 s wall: 187.5 ns per byte, 5.859375 instructions at 32 ns.
        let r = result(TestSpec::tcp_default(), vec![near, far], 0.75, 1.0);
        let t = TargetReport::derive(figures(), &r, Some(32.0));
        assert_eq!(t.idle_pct, Some(25.0));
        assert_eq!((t.unit, t.units), (Some(TargetUnit::Byte), Some(4_000_000)));
        assert_eq!(t.busy_ns_per_byte, Some(187.5));
        assert_eq!(t.instructions_per_byte, Some(5.859375));
        assert_eq!((t.busy_ns_per_datagram, t.instructions_per_transaction), (None, None));
        assert_eq!(t.build.as_deref(), Some("lwIP 2.1.3 NO_SYS=1, gcc 12.2.1 -Os"));
        assert_eq!(t.figures.trouble().collect::<Vec<_>>(), [("ip_drop", 3)]);
        // Without the instruction time only the nanoseconds.
        let t = TargetReport::derive(figures(), &r, None);
        assert_eq!((t.busy_ns_per_byte, t.instructions_per_byte), (Some(187.5), None));
    }

    #[test]
    fn udp_counts_the_far_ends_datagrams_and_rr_the_transactions() {
        let mut far = StreamRecord::bare(1, Flow::Up, Role::Receiver, Endpoint::Server, 0, 1.0);
        far.udp_received = Some(UdpReceived { packets: 500, ..UdpReceived::default() });
        let mut spec = TestSpec::tcp_default();
        spec.kind = TestKind::Udp;
        let t = TargetReport::derive(TargetFigures::default(), &result(spec, vec![far], 0.5, 2.0), None);
        assert_eq!((t.units, t.busy_ns_per_datagram, t.idle_pct), (Some(500), Some(1e6), None));

        let mut spec = TestSpec::tcp_default();
        spec.kind = TestKind::Rr;
        let mut r = result(spec, Vec::new(), 0.2, 1.0);
        r.summary.rr = Some(RrFigures { transactions: 2000, ..RrFigures::default() });
        let t = TargetReport::derive(TargetFigures::default(), &r, Some(32.0));
        assert_eq!((t.busy_ns_per_transaction, t.instructions_per_transaction), (Some(100_000.0), Some(3125.0)));
    }

    #[test]
    fn no_busy_time_reported_derives_no_cost() {
        let far = StreamRecord::bare(1, Flow::Up, Role::Receiver, Endpoint::Server, 1000, 1.0);
        let t = TargetReport::derive(figures(), &result(TestSpec::tcp_default(), vec![far], 0.0, 1.0), Some(32.0));
        assert_eq!((t.busy_seconds, t.busy_ns_per_byte, t.instructions_per_byte), (None, None, None));
        assert_eq!(t.idle_pct, Some(25.0));
    }

    #[test]
    fn the_report_reads_back_from_its_json() {
        let far = StreamRecord::bare(1, Flow::Up, Role::Receiver, Endpoint::Server, 1000, 1.0);
        let t = TargetReport::derive(figures(), &result(TestSpec::tcp_default(), vec![far], 0.5, 1.0), Some(32.0));
        let v = serde_json::to_value(&t).unwrap();
        assert_eq!(v["counters"]["link_recv"], 2812, "{v}");
        assert_eq!(v["idle_count"], 1_000_000, "{v}");
        assert_eq!(v["unit"], "byte", "{v}");
        assert!(v.get("busy_ns_per_datagram").is_none(), "{v}");
        assert_eq!(serde_json::from_value::<TargetReport>(v).unwrap(), t);
    }
}
