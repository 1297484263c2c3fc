//! A result's target report: [`TargetReport::derive`] reads the far end's CPU, stream records
//! and transactions from the result; the types are [`crate::target`]'s.

use crate::{Endpoint, TargetFigures, TargetReport, TargetUnit, TestKind, TestResult};

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
        CpuReport, CpuUsage, Flow, HostInfo, ResultHeader, Role, RrFigures, StreamRecord, TestInfo, TestSpec,
        UdpReceived,
    };

    fn result(spec: TestSpec, streams: Vec<StreamRecord>, user: f64, wall: f64) -> TestResult {
        let header = ResultHeader {
            remote_host: Some(HostInfo { kernel: "lwIP 2.1.3 NO_SYS=1, gcc 12.2.1 -Os".into(), ..HostInfo::default() }),
            ..ResultHeader::new(TestInfo {
                peer_software: Some("netchar-responder 0.1".into()),
                ..TestInfo::new(spec, "10.77.0.2:5300")
            })
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
