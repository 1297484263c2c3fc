//! Where lost datagrams went (issue 23), in every report that shows UDP loss: the text
//! summary under the receiver's line, the HTML report's table (and the hosts' identities),
//! and the sum over a sweep's steps and over a rate search's trials. The results are saved
//! runs of the real binary, their receivers made to lose datagrams and both ends given
//! evidence that explains part of it.

mod support;

use netchar_model::{
    Evidence, EvidenceReport, Flow, HostIdentity, InterfaceIdentity, LinkCounters, QdiscCounters, ResultHeader, Role,
    TestResult,
};
use netchar_report::max_rate::MaxRateTableReporter;
use netchar_report::sweep::SweepTableReporter;
use netchar_report::{parse_saved, Reporter, Saved};

/// `r` with each receiver of `flow` having lost `lost` datagrams more, both ends' evidence
/// (the sender's qdisc dropped `qdisc`, the receiver's socket `socket`) and the summaries
/// and breakdowns made again.
fn losing(r: &TestResult, lost: u64, qdisc: u64, socket: u64) -> TestResult {
    let mut streams = r.streams.clone();
    for s in streams.iter_mut().filter(|s| s.role == Role::Receiver) {
        let u = s.udp_received.as_mut().expect("a UDP receiver");
        u.packets -= lost;
        let lost = u.lost + lost;
        u.set_lost(lost);
        u.kernel_drops = socket;
    }
    for s in streams.iter_mut() {
        s.intervals.clear();
    }
    let header = ResultHeader {
        test: r.test.clone(),
        started_at: r.started_at.clone(),
        host: r.host.clone(),
        remote_host: r.remote_host.clone(),
    };
    let mut out = TestResult::assemble(header, streams, r.cpu.clone(), None);
    let sender = Evidence {
        interface: "eth0".into(),
        link: Some(LinkCounters::default()),
        qdiscs: Some(vec![QdiscCounters {
            kind: "tbf".into(),
            handle: "1:".into(),
            parent: "root".into(),
            drops: qdisc,
            ..QdiscCounters::default()
        }]),
        ..Evidence::default()
    };
    let receiver = Evidence {
        interface: "eth1".into(),
        link: Some(LinkCounters::default()),
        stack: Some(Default::default()),
        socket_drops: Some(socket),
        ..Evidence::default()
    };
    let up = out.summary.up.is_some();
    let (local, remote) = if up { (sender, receiver) } else { (receiver, sender) };
    out.evidence = Some(EvidenceReport { local: Some(local), remote: Some(remote), ..EvidenceReport::default() });
    out.fill_loss_breakdowns();
    out
}

fn saved(file: &str) -> Vec<Saved> {
    let text = std::fs::read_to_string(support::dir(file)).unwrap();
    parse_saved(&text, file).unwrap()
}

#[test]
fn the_text_summary_says_where_the_lost_datagrams_went() {
    let r = losing(&saved("fixtures/udp.json")[0].result, 100, 60, 15);
    let b = r.summary.up.as_ref().unwrap().loss_breakdown.clone().unwrap();
    assert_eq!((b.lost, b.sender_qdisc, b.receiver_socket, b.unexplained), (100, Some(60), Some(15), 25));
    let text = netchar_report::text::summary(&r, Default::default());
    assert!(
        text.contains(
            "     where the 100 lost went: sender's qdisc 60, sender's interface 0, receiver's interface 0, receiver's \
             stack 0, receiver's socket 15, unexplained 25 (between the ends, or where no counter sees)\n"
        ),
        "{text}"
    );
}

#[test]
fn the_html_report_has_a_breakdown_table_and_both_ends_identities() {
    let mut r = losing(&saved("fixtures/udp.json")[0].result, 100, 130, 0);
    r.host.identity = Some(HostIdentity {
        kernel_cmdline: Some("quiet isolcpus=2".into()),
        cpu_governors: [("performance".to_string(), 4)].into(),
        interfaces: vec![InterfaceIdentity {
            name: "eth0".into(),
            driver: Some("ixgbe".into()),
            firmware_version: Some("0x800003e7".into()),
            offloads: [("rx-gro".to_string(), true), ("tx-udp-segmentation".to_string(), false)].into(),
            coalesce: [("rx-usecs".to_string(), 50), ("tx-usecs".to_string(), 0)].into(),
            ..InterfaceIdentity::default()
        }],
        ..HostIdentity::default()
    });
    let html = netchar_report::html::document(&[Saved { label: "udp.json".into(), result: r }], Default::default());
    let table = &html[html.find("<table id=\"loss-breakdown\"").expect("a loss breakdown table")..];
    let table = &table[..table.find("</table>").unwrap()];
    assert!(table.contains("<th>sender&#39;s qdisc</th>"), "{table}");
    // 130 counted, 100 lost: capped, said, and the server's causes past it get nothing.
    assert!(table.contains("<td>udp.json</td><td>up</td><td class=\"n\">100</td><td class=\"n\">100</td>"), "{table}");
    assert!(table.contains("approximate: the counters moved by 30 more than the test lost"), "{table}");
    for row in [
        "<td>kernel command line</td><td>quiet isolcpus=2</td>",
        "<td>CPU frequency governors</td><td>performance on 4 CPUs</td>",
        "<td>eth0 driver (ethtool)</td><td>ixgbe, firmware 0x800003e7</td>",
        "<td>eth0 offloads</td><td>on: rx-gro; off: tx-udp-segmentation</td>",
        "<td>eth0 interrupt coalescing</td><td>rx-usecs 50</td>",
    ] {
        assert!(html.contains(row), "{row} missing");
    }
    // Without breakdowns (results of an older netchar) there is no such section.
    let html = netchar_report::html::document(&saved("fixtures/udp.json"), Default::default());
    assert!(!html.contains("Loss breakdown"));
}

#[test]
fn a_sweep_sums_its_steps_breakdowns_per_direction() {
    let steps: Vec<Saved> = saved("fixtures/suite-bwsweep.json")
        .into_iter()
        .map(|s| Saved { result: losing(&s.result, 10, 4, 1), ..s })
        .collect();
    let table = SweepTableReporter::new(20_000_000).on_results(&steps);
    let sums: Vec<&str> = table.lines().filter(|l| l.starts_with("over the")).collect();
    let want = "over the 2 steps, where the 20 lost went: sender's qdisc 8, sender's interface 0, receiver's \
                interface 0, receiver's stack 0, receiver's socket 2, unexplained 10 (between the ends, or where no \
                counter sees)";
    assert_eq!(sums, [want, want], "{table}");
    assert_eq!(steps.iter().filter(|s| s.result.summary.flow(Flow::Down).is_some()).count(), 2);
    // Steps without breakdowns: the table as before.
    let plain = SweepTableReporter::new(20_000_000).on_results(&saved("fixtures/suite-bwsweep.json"));
    assert!(!plain.contains("lost went"), "{plain}");
}

#[test]
fn a_rate_search_sums_its_trials_breakdowns() {
    let trials: Vec<Saved> = saved("fixtures-search/udp-find-max-rate.json")
        .into_iter()
        .map(|s| {
            let paced = netchar_report::max_rate::offered_bps(&s.result.test.spec).is_some();
            Saved { result: if paced { losing(&s.result, 3, 3, 0) } else { s.result.clone() }, ..s }
        })
        .collect();
    let paced = trials.iter().filter(|s| netchar_report::max_rate::offered_bps(&s.result.test.spec).is_some()).count();
    let lost: u64 =
        trials.iter().filter_map(|s| s.result.summary.up.as_ref()?.loss_breakdown.as_ref()).map(|b| b.lost).sum();
    let table = MaxRateTableReporter::new(0.0).on_results(&trials);
    // The search's sender used GSO, and the qdisc's drops are counted per batch: said.
    let lines: Vec<&str> = table.lines().collect();
    let (last, approximate) = (lines[lines.len() - 2], lines[lines.len() - 1]);
    assert_eq!(
        approximate,
        "  approximate: the sender used UDP GSO: a qdisc or interface drop may be a batch of datagrams counted once"
    );
    let want = format!(
        "over the {paced} trials, where the {lost} lost went: sender's qdisc {}, sender's interface 0, receiver's \
         interface 0, receiver's stack 0, receiver's socket 0, unexplained {} (between the ends, or where no \
         counter sees)",
        3 * paced,
        lost - 3 * paced as u64
    );
    assert_eq!(last, want, "{table}");
}
