//! A result's loss breakdowns: [`LossBreakdown::of`] reads the result's stream records,
//! evidence and target figures; the type and its arithmetic are [`crate::loss`]'s.

use crate::loss::TARGET_RECEIVE_DROPS;
use crate::{Flow, LossBreakdown, Role, TestKind, TestResult};

impl LossBreakdown {
    /// The breakdown of `flow`'s loss in `result`, from its evidence and its target's figures;
    /// None for a test that is not UDP, a flow whose receiver reported no figures, or a result
    /// without evidence.
    pub fn of(result: &TestResult, flow: Flow) -> Option<Self> {
        if result.test.spec.kind != TestKind::Udp {
            return None;
        }
        let evidence = result.evidence.as_ref()?;
        let of_flow = |role: Role| result.streams.iter().filter(move |s| s.flow == flow && s.role == role);
        let received: Vec<_> = of_flow(Role::Receiver).filter_map(|s| s.udp_received.as_ref()).collect();
        if received.is_empty() {
            return None;
        }
        let lost = received.iter().map(|r| r.lost).sum();
        let (sender, receiver, sender_end, receiver_end) = match flow {
            Flow::Up => (&evidence.local, &evidence.remote, "local", "remote"),
            Flow::Down => (&evidence.remote, &evidence.local, "remote", "local"),
        };
        let (sender, receiver) = (sender.as_ref(), receiver.as_ref());
        let sender_qdisc = sender.and_then(|e| e.qdiscs.as_ref()).map(|q| {
            // A classful root counts its children's drops: the roots alone count each once.
            q.iter().filter(|q| q.parent == "root").map(|q| q.drops).sum::<u64>()
        });
        let sender_interface = sender.and_then(|e| e.link).map(|l| l.tx_dropped + l.tx_errors);
        let receiver_interface = receiver.and_then(|e| e.link).map(|l| l.rx_dropped + l.rx_missed_errors + l.rx_errors);
        let receiver_socket = receiver.and_then(|e| e.socket_drops);
        let receiver_stack = receiver.and_then(|e| e.stack).map(|s| {
            // The sockets' own drops are in UdpInErrors too.
            s.ip_in_discards + s.udp_no_ports + s.udp_in_errors.saturating_sub(receiver_socket.unwrap_or(0))
        });
        let target = match (&result.target, flow) {
            (Some(t), Flow::Up) => {
                Some(TARGET_RECEIVE_DROPS.iter().filter_map(|n| t.figures.counters.get(*n)).sum::<u64>())
            }
            _ => None,
        };
        let mut b = Self::split(
            lost,
            [
                ("sender_qdisc", sender_qdisc),
                ("sender_interface", sender_interface),
                ("receiver_interface", receiver_interface),
                ("receiver_stack", receiver_stack),
                ("receiver_socket", receiver_socket),
                ("target", target),
            ],
        );
        let gso = of_flow(Role::Sender).any(|s| s.udp_sent.as_ref().is_some_and(|u| u.gso));
        if gso && sender_qdisc.unwrap_or(0) + sender_interface.unwrap_or(0) > 0 {
            b.approximate = true;
            b.notes.push(
                "the sender used UDP GSO: a qdisc or interface drop may be a batch of datagrams counted once".into(),
            );
        }
        if received.iter().any(|r| r.coalesced) && receiver_socket.unwrap_or(0) > 0 {
            b.approximate = true;
            b.notes.push("the receiver used GRO: a socket drop may be a batch of datagrams counted once".into());
        }
        for (end, e) in [(sender_end, sender), (receiver_end, receiver)] {
            match e {
                Some(e) if !e.reset.is_empty() => {
                    b.approximate = true;
                    b.notes.push(format!("{} counters restarted during the test: {}", who(end), e.reset.join(", ")));
                }
                Some(_) => {}
                None if b.target.is_some() && end == "remote" => {}
                None => {
                    let why = evidence.unavailable.get(end).map_or(String::new(), |w| format!(" ({w})"));
                    b.notes
                        .push(format!("{} counters are not known{why}: what it dropped is in unexplained", who(end)));
                }
            }
        }
        Some(b)
    }
}

fn who(end: &str) -> &'static str {
    if end == "local" {
        "the client's"
    } else {
        "the server's"
    }
}
impl TestResult {
    /// Sets `summary.<flow>.loss_breakdown` of every UDP flow from the result's evidence and
    /// target figures ([`LossBreakdown::of`]).
    pub fn fill_loss_breakdowns(&mut self) {
        for flow in [Flow::Up, Flow::Down] {
            let b = LossBreakdown::of(self, flow);
            let slot = match flow {
                Flow::Up => self.summary.up.as_mut(),
                Flow::Down => self.summary.down.as_mut(),
            };
            if let Some(f) = slot {
                f.loss_breakdown = b;
            }
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        CpuReport, Evidence, EvidenceReport, LinkCounters, QdiscCounters, ResultHeader, StackCounters, StreamRecord,
        TargetFigures, TargetReport, TestInfo, TestSpec, UdpReceived, UdpSent,
    };

    /// Evidence of an end where nothing moved.
    fn quiet_evidence(interface: &str) -> Evidence {
        Evidence {
            interface: interface.into(),
            seconds: 1.0,
            link: Some(Default::default()),
            qdiscs: Some(Vec::new()),
            stack: Some(Default::default()),
            socket_drops: Some(0),
            ..Default::default()
        }
    }

    fn result(direction: crate::Direction, lost: u64, evidence: Option<EvidenceReport>) -> TestResult {
        let mut spec = TestSpec::udp_default();
        spec.direction = direction;
        let flow = if direction == crate::Direction::Down { Flow::Down } else { Flow::Up };
        let (tx_by, rx_by) = if flow == Flow::Up {
            (crate::Endpoint::Client, crate::Endpoint::Server)
        } else {
            (crate::Endpoint::Server, crate::Endpoint::Client)
        };
        let mut tx = StreamRecord::bare(1, flow, Role::Sender, tx_by, 1000 * 1472, 1.0);
        tx.udp_sent = Some(UdpSent { packets: 1000, ..Default::default() });
        let mut rx = StreamRecord::bare(1, flow, Role::Receiver, rx_by, (1000 - lost) * 1472, 1.0);
        let mut u = UdpReceived { packets: 1000 - lost, ..Default::default() };
        u.set_lost(lost);
        rx.udp_received = Some(u);
        let header = ResultHeader::new(TestInfo::new(spec, "192.0.2.7:5300"));
        let mut r = TestResult::assemble(header, vec![tx, rx], CpuReport::default(), None);
        r.evidence = evidence;
        r.fill_loss_breakdowns();
        r
    }

    fn tbf(parent: &str, drops: u64) -> QdiscCounters {
        QdiscCounters { kind: "tbf".into(), handle: "1:".into(), parent: parent.into(), drops, ..Default::default() }
    }

    #[test]
    fn each_end_explains_its_own_drops_and_the_rest_is_the_network() {
        let mut client = quiet_evidence("eth0");
        client.qdiscs = Some(vec![tbf("root", 30), tbf("1:1", 30)]);
        client.link = Some(LinkCounters { tx_dropped: 10, rx_dropped: 99, ..Default::default() });
        let mut server = quiet_evidence("eth1");
        server.link = Some(LinkCounters { rx_dropped: 5, rx_missed_errors: 1, tx_dropped: 77, ..Default::default() });
        server.stack =
            Some(StackCounters { udp_in_errors: 22, udp_rcvbuf_errors: 20, ip_in_discards: 3, ..Default::default() });
        server.socket_drops = Some(20);
        let ev = EvidenceReport { local: Some(client), remote: Some(server), ..Default::default() };
        let r = result(crate::Direction::Up, 100, Some(ev));
        let b = r.summary.up.as_ref().unwrap().loss_breakdown.clone().unwrap();
        // The root's drops only (its child's are in them); the client's rx drops are another
        // flow's; the server's stack: 3 discards and the 2 InErrors its sockets did not count.
        assert_eq!(
            b.causes(),
            [
                ("sender_qdisc", Some(30)),
                ("sender_interface", Some(10)),
                ("receiver_interface", Some(6)),
                ("receiver_stack", Some(5)),
                ("receiver_socket", Some(20)),
                ("target", None)
            ]
        );
        assert_eq!((b.lost, b.unexplained, b.counted_beyond_lost, b.approximate), (100, 29, 0, false));
        assert!(b.notes.is_empty(), "{:?}", b.notes);
        let json = serde_json::to_value(&r.summary).unwrap();
        assert_eq!(json["up"]["loss_breakdown"]["unexplained"], 29);
        assert!(json["up"]["loss_breakdown"].get("target").is_none());
        assert_eq!(serde_json::from_value::<crate::Summary>(json).unwrap(), r.summary);
    }

    #[test]
    fn counters_beyond_the_loss_are_capped_in_path_order_and_said() {
        let mut client = quiet_evidence("veth0");
        client.link = Some(LinkCounters { tx_dropped: 40, ..Default::default() });
        let mut server = quiet_evidence("veth1");
        // The veth pair counts one drop at both ends.
        server.link = Some(LinkCounters { rx_dropped: 40, ..Default::default() });
        server.socket_drops = Some(5);
        server.stack = Some(StackCounters { udp_in_errors: 5, ..Default::default() });
        let ev = EvidenceReport { local: Some(client), remote: Some(server), ..Default::default() };
        let b = result(crate::Direction::Up, 42, Some(ev)).summary.up.unwrap().loss_breakdown.unwrap();
        assert_eq!((b.receiver_socket, b.sender_interface, b.receiver_interface), (Some(5), Some(37), Some(0)));
        assert_eq!((b.unexplained, b.counted_beyond_lost, b.approximate), (0, 43, true));
        assert!(b.notes[0].contains("43 more than the test lost"), "{:?}", b.notes);
    }

    #[test]
    fn an_end_without_evidence_is_not_known_and_a_target_speaks_for_itself() {
        // Down: the server sends, the client receives; the server sent no evidence.
        let mut unavailable = std::collections::BTreeMap::new();
        unavailable.insert("remote".to_string(), "iperf3's server sends none".to_string());
        let mut client = quiet_evidence("eth0");
        client.socket_drops = Some(4);
        client.stack = Some(StackCounters { udp_in_errors: 4, udp_rcvbuf_errors: 4, ..Default::default() });
        let ev = EvidenceReport { local: Some(client.clone()), remote: None, unavailable, ..Default::default() };
        let b = result(crate::Direction::Down, 10, Some(ev.clone())).summary.down.unwrap().loss_breakdown.unwrap();
        assert_eq!(
            (b.sender_qdisc, b.sender_interface, b.receiver_socket, b.receiver_stack),
            (None, None, Some(4), Some(0))
        );
        assert_eq!(b.unexplained, 6);
        assert!(!b.approximate);
        assert_eq!(
            b.notes,
            ["the server's counters are not known (iperf3's server sends none): what it dropped is in unexplained"]
        );

        // Up to a target: its own drops explain what its receive path lost.
        let mut r = result(crate::Direction::Up, 10, None);
        r.evidence = Some(EvidenceReport { local: Some(client), ..Default::default() });
        let counters = [("udp_queue_drop".to_string(), 3), ("link_drop".to_string(), 2), ("tcp_drop".to_string(), 9)];
        let figures = TargetFigures { counters: counters.into(), ..Default::default() };
        r.target = Some(TargetReport::derive(figures, &r, None));
        r.fill_loss_breakdowns();
        let b = r.summary.up.unwrap().loss_breakdown.unwrap();
        assert_eq!((b.target, b.receiver_socket, b.unexplained), (Some(5), None, 5));
        assert!(b.notes.is_empty(), "a target's counters are its evidence: {:?}", b.notes);
    }

    #[test]
    fn no_breakdown_without_evidence_and_none_for_tcp() {
        assert!(result(crate::Direction::Up, 3, None).summary.up.unwrap().loss_breakdown.is_none());
        let mut r = result(crate::Direction::Up, 3, Some(EvidenceReport::default()));
        r.test.spec.kind = TestKind::Tcp;
        assert!(LossBreakdown::of(&r, Flow::Up).is_none());
    }

    #[test]
    fn gso_batches_and_restarted_counters_make_it_approximate() {
        let mut client = quiet_evidence("eth0");
        client.qdiscs = Some(vec![tbf("root", 3)]);
        let mut server = quiet_evidence("eth1");
        server.reset = vec!["link".into()];
        let mut r = result(crate::Direction::Up, 30, None);
        r.streams[0].udp_sent.as_mut().unwrap().gso = true;
        r.evidence = Some(EvidenceReport { local: Some(client), remote: Some(server), ..Default::default() });
        r.fill_loss_breakdowns();
        let b = r.summary.up.unwrap().loss_breakdown.unwrap();
        assert!(b.approximate);
        assert!(b.notes[0].contains("GSO") && b.notes[1].contains("server's counters restarted"), "{:?}", b.notes);
    }
}
