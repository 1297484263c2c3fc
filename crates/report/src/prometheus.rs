//! The Prometheus text exposition (version 0.0.4) of an exporter probe: its outcome and
//! timing always, and the figures of the test it ran, read from the typed result so that a
//! renamed field fails to compile here rather than in a scrape.

use netchar_model::{Flow, SideTotals, TestResult};
use std::fmt::Write;

/// A text exposition, written one metric family at a time.
#[derive(Debug, Default)]
pub struct Exposition {
    text: String,
}

impl Exposition {
    /// A family's `# HELP` and `# TYPE` lines; its samples follow.
    pub fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.text, "# HELP {name} {help}");
        let _ = writeln!(self.text, "# TYPE {name} {kind}");
    }

    /// One sample of the family written last.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.text.push_str(name);
        if !labels.is_empty() {
            let parts: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{}\"", escape_label(v))).collect();
            let _ = write!(self.text, "{{{}}}", parts.join(","));
        }
        let _ = writeln!(self.text, " {}", format_value(value));
    }

    /// The exposition's text.
    pub fn into_text(self) -> String {
        self.text
    }
}

fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn format_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

/// What is known of a probe whether or not its test ran.
#[derive(Debug, Clone, Copy)]
pub struct Probe<'a> {
    /// The probed host, as the scrape named it (the `target` label).
    pub target: &'a str,
    /// The probed port.
    pub port: u16,
    /// `tcp`, `udp` or `rr` (the `protocol` label).
    pub protocol: &'a str,
    /// The server sent (`-R`): the figures are the down flow's.
    pub reverse: bool,
    /// The test ran and every figure was reported.
    pub success: bool,
    /// The probe's time, setup and results included, in seconds.
    pub elapsed_seconds: f64,
    /// The time the probe was allowed, in seconds.
    pub timeout_seconds: f64,
    /// The sending time the probe asked of the test (`-t`), in seconds.
    pub test_seconds: f64,
}

/// The exposition of one probe: success and timing always; the test's figures when `result`
/// is the result of a test that ran.
pub fn probe(p: &Probe<'_>, result: Option<&TestResult>) -> String {
    let port = p.port.to_string();
    let base = [("target", p.target), ("port", port.as_str()), ("protocol", p.protocol)];
    let mut m = Exposition::default();
    m.family("netchar_probe_success", "gauge", "1 if the test ran and every figure was reported, else 0.");
    m.sample("netchar_probe_success", &base, if p.success { 1.0 } else { 0.0 });
    m.family("netchar_probe_duration_seconds", "gauge", "Time the probe took, setup and results included.");
    m.sample("netchar_probe_duration_seconds", &base, p.elapsed_seconds);
    m.family(
        "netchar_probe_timeout_seconds",
        "gauge",
        "Time the probe was allowed: scrape timeout less the offset, or --max-duration plus setup.",
    );
    m.sample("netchar_probe_timeout_seconds", &base, p.timeout_seconds);
    m.family("netchar_probe_test_seconds", "gauge", "Sending time the probe asked of the test (-t).");
    m.sample("netchar_probe_test_seconds", &base, (p.test_seconds * 1000.0).round() / 1000.0);
    let Some(r) = result else { return m.into_text() };
    let flow = if p.reverse { Flow::Down } else { Flow::Up };
    let with_dir = [base[0], base[1], base[2], ("direction", flow.name())];
    if p.protocol == "rr" {
        let rr = r.summary.rr.clone().unwrap_or_default();
        let lat = &rr.latency_us;
        m.family("netchar_rr_latency_seconds", "summary", "Request/response round-trip time.");
        if r.summary.rr.is_some() {
            for (q, us) in [("0.5", lat.p50), ("0.9", lat.p90), ("0.99", lat.p99), ("0.999", lat.p999)] {
                m.sample("netchar_rr_latency_seconds", &[base[0], base[1], base[2], ("quantile", q)], us / 1e6);
            }
        }
        let count = rr.transactions as f64;
        m.sample("netchar_rr_latency_seconds_sum", &base, lat.mean * count / 1e6);
        m.sample("netchar_rr_latency_seconds_count", &base, count);
        m.family("netchar_rr_transactions_per_second", "gauge", "Completed transactions per second.");
        m.sample("netchar_rr_transactions_per_second", &base, rr.transactions_per_second);
    } else {
        let s = r.summary.flow(flow);
        let (sender, receiver) = s.map(|s| (s.sender.clone(), s.receiver.clone())).unwrap_or_default();
        m.family("netchar_sent_bytes", "gauge", "Payload bytes the sender wrote during the test.");
        m.sample("netchar_sent_bytes", &with_dir, sender.bytes as f64);
        m.family("netchar_received_bytes", "gauge", "Payload bytes the receiver read during the test.");
        m.sample("netchar_received_bytes", &with_dir, receiver.bytes as f64);
        m.family(
            "netchar_receiver_bytes_per_second",
            "gauge",
            "Payload rate at the receiver (multiply by 8 for bit/s).",
        );
        m.sample("netchar_receiver_bytes_per_second", &with_dir, receiver.bits_per_second / 8.0);
        if p.protocol == "tcp" {
            m.family("netchar_tcp_retransmits", "gauge", "TCP segments the sender retransmitted during the test.");
            m.sample("netchar_tcp_retransmits", &with_dir, sender.retransmits.unwrap_or(0) as f64);
        } else {
            let received = |of: fn(&SideTotals) -> Option<f64>| of(&receiver).unwrap_or(0.0);
            m.family("netchar_udp_lost_datagrams", "gauge", "UDP datagrams sent and never received.");
            m.sample(
                "netchar_udp_lost_datagrams",
                &with_dir,
                received(|t| t.udp_received.as_ref().map(|u| u.lost as f64)),
            );
            m.family("netchar_udp_jitter_seconds", "gauge", "RFC 3550 interarrival jitter at the receiver.");
            m.sample(
                "netchar_udp_jitter_seconds",
                &with_dir,
                received(|t| t.udp_received.as_ref().map(|u| u.jitter_ms)) / 1e3,
            );
        }
    }
    if r.cpu.local.is_some() || r.cpu.remote.is_some() {
        m.family(
            "netchar_cpu_ratio",
            "gauge",
            "CPU time over wall time of each end's test process (1 = one CPU busy).",
        );
        for (side, cpu) in [("client", &r.cpu.local), ("server", &r.cpu.remote)] {
            if let Some(cpu) = cpu {
                m.sample("netchar_cpu_ratio", &[base[0], base[1], base[2], ("side", side)], cpu.total_pct / 100.0);
            }
        }
    }
    m.into_text()
}

#[cfg(test)]
mod tests {
    use super::*;
    use netchar_model::{
        CpuReport, CpuUsage, Endpoint, LatencyUs, ResultHeader, Role, RrFigures, StreamRecord, TestInfo, TestSpec,
        UdpReceived, UdpSent,
    };

    fn result(spec: TestSpec, streams: Vec<StreamRecord>) -> TestResult {
        let header = ResultHeader::new(TestInfo::new(spec, "192.0.2.7:5300"));
        let cpu = |total_pct| CpuUsage { total_pct, ..CpuUsage::default() };
        TestResult::assemble(header, streams, CpuReport { local: Some(cpu(12.5)), remote: Some(cpu(40.0)) }, None)
    }

    fn probe_of(protocol: &'static str, reverse: bool) -> Probe<'static> {
        Probe {
            target: "node-a\"1",
            port: 5300,
            protocol,
            reverse,
            success: true,
            elapsed_seconds: 2.25,
            timeout_seconds: 9.5,
            test_seconds: 2.0004,
        }
    }

    #[test]
    fn exposition_escapes_label_values() {
        let mut m = Exposition::default();
        m.family("a_b", "gauge", "help");
        m.sample("a_b", &[("target", "x\"y\\z\n")], 1.5);
        assert_eq!(m.into_text(), "# HELP a_b help\n# TYPE a_b gauge\na_b{target=\"x\\\"y\\\\z\\n\"} 1.5\n");
    }

    #[test]
    fn a_tcp_probe_reports_the_flow_it_ran() {
        let mut tx = StreamRecord::bare(1, Flow::Down, Role::Sender, Endpoint::Server, 250_000_000, 2.0);
        tx.retransmits = Some(7);
        let rx = StreamRecord::bare(1, Flow::Down, Role::Receiver, Endpoint::Client, 250_000_000, 2.0);
        let mut spec = TestSpec::tcp_default();
        spec.direction = netchar_model::Direction::Down;
        insta::assert_snapshot!(probe(&probe_of("tcp", true), Some(&result(spec, vec![tx, rx]))));
    }

    #[test]
    fn a_udp_probe_reports_loss_and_jitter() {
        let mut tx = StreamRecord::bare(1, Flow::Up, Role::Sender, Endpoint::Client, 1_000 * 1_000, 1.0);
        tx.udp_sent = Some(UdpSent { packets: 1_000, sends: 1_000, ..UdpSent::default() });
        let mut rx = StreamRecord::bare(1, Flow::Up, Role::Receiver, Endpoint::Server, 990 * 1_000, 1.0);
        let mut received = UdpReceived { packets: 990, jitter_ms: 0.25, ..UdpReceived::default() };
        received.set_lost(10);
        rx.udp_received = Some(received);
        insta::assert_snapshot!(probe(&probe_of("udp", false), Some(&result(TestSpec::udp_default(), vec![tx, rx]))));
    }

    #[test]
    fn an_rr_probe_reports_its_round_trips_as_a_summary() {
        let mut r = result(TestSpec::tcp_default(), Vec::new());
        r.summary.rr = Some(RrFigures {
            transactions: 40_000,
            transactions_per_second: 20_000.0,
            latency_us: LatencyUs { mean: 50.0, p50: 45.0, p90: 60.0, p99: 90.0, p999: 250.0, ..LatencyUs::default() },
            ..RrFigures::default()
        });
        insta::assert_snapshot!(probe(&probe_of("rr", false), Some(&r)));
    }

    #[test]
    fn a_failed_probe_reports_its_outcome_alone() {
        let p = Probe { success: false, ..probe_of("tcp", false) };
        insta::assert_snapshot!(probe(&p, None));
    }
}
