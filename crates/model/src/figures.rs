//! A result's figures by name or by path, for `--expect`, `--baseline`, the statistics of
//! `--repeat` and `netchar compare`.
//!
//! A path names a number in the result's JSON form (docs/json.md), which is the vocabulary a
//! user writes gates in: `up.receiver.bits_per_second` or `rr.latency_us.p99` is looked up
//! under `summary`, then from the root (`test.streams`, `reset.time_to_ready_seconds`). A name
//! of [`METRIC_NAMES`] picks a figure of the result's first flow.

use crate::{Flow, TestResult};

/// The figures `--metric` knows by name, each with what it picks: the receiving or sending
/// side of the result's first flow (up, else down), or the request/response summary.
pub const METRIC_NAMES: &[(&str, &str)] = &[
    ("bps", "receiver.bits_per_second"),
    ("pps", "receiver.packets_per_second"),
    ("tx-bps", "sender.bits_per_second"),
    ("tx-pps", "sender.packets_per_second"),
    ("loss", "receiver.loss_percent"),
    ("jitter", "receiver.jitter_ms"),
    ("retransmits", "sender.retransmits"),
    ("tps", "rr.transactions_per_second"),
    ("rtt-min", "rr.latency_us.min"),
    ("rtt-mean", "rr.latency_us.mean"),
    ("rtt-p50", "rr.latency_us.p50"),
    ("rtt-p90", "rr.latency_us.p90"),
    ("rtt-p99", "rr.latency_us.p99"),
    ("rtt-p999", "rr.latency_us.p999"),
    ("rtt-max", "rr.latency_us.max"),
];

impl TestResult {
    /// The number at `path`, under `summary` first, then from the root; None where the result
    /// has no number there.
    pub fn figure(&self, path: &str) -> Option<f64> {
        let doc = serde_json::to_value(self).ok()?;
        figure_in(&doc, path)
    }

    /// The path of the figure a test is judged by when none is named: transactions per second
    /// for request/response tests, the send rate into a sink, else the first flow's receive
    /// rate.
    pub fn headline_path(&self) -> &'static str {
        if self.summary.rr.is_some() {
            "rr.transactions_per_second"
        } else if self.test.far_end == crate::FarEnd::Sink {
            // Nothing receives (a sink, a discard server): the sender's rate is the figure.
            "up.sender.bits_per_second"
        } else if self.summary.up.is_some() {
            "up.receiver.bits_per_second"
        } else {
            "down.receiver.bits_per_second"
        }
    }

    /// The path of `metric`: a name of [`METRIC_NAMES`] (`pps`: the first flow's receiver's
    /// datagrams per second), or a path as it is (`down.receiver.packets_per_second`).
    pub fn metric_path(&self, metric: &str) -> Result<String, String> {
        if metric.contains('.') {
            return Ok(metric.to_string());
        }
        let Some(&(_, tail)) = METRIC_NAMES.iter().find(|(n, _)| *n == metric) else {
            let names: Vec<&str> = METRIC_NAMES.iter().map(|(n, _)| *n).collect();
            return Err(format!(
                "--metric {metric}: one of {}, or a path such as up.receiver.bits_per_second",
                names.join(", ")
            ));
        };
        if tail.starts_with("rr.") {
            return Ok(tail.to_string());
        }
        let flow = if self.summary.up.is_some() { Flow::Up } else { Flow::Down };
        Ok(format!("{}.{tail}", flow.name()))
    }
}

/// Parts of a result that only a run can fill (its evidence, a target's report, the console,
/// the step and reset records, the raw streams and intervals, the hosts, latency under load):
/// a gate's path into one of these is checked after the run, not before.
const FILLED_BY_THE_RUN: &[&str] = &[
    "evidence",
    "target",
    "console",
    "step",
    "reset",
    "streams",
    "intervals",
    "host",
    "remote_host",
    "bind",
    "rr_idle",
    "rr_loaded",
    "load",
    "under_load",
];

/// Checks, before any traffic, that `path` names a figure a test run to `spec` will have:
/// Ok, or one line saying it does not and naming the figures it will have that look like it.
pub fn check_path(spec: &crate::TestSpec, path: &str) -> Result<(), String> {
    let template = template(spec);
    if template.figure(path).is_some() {
        return Ok(());
    }
    let first = path.split('.').next().unwrap_or("");
    if FILLED_BY_THE_RUN.contains(&first) {
        return Ok(());
    }
    let doc = serde_json::to_value(&template).unwrap_or_default();
    let mut leaves = Vec::new();
    number_paths(&doc["summary"], "", &mut leaves);
    number_paths(&doc["cpu"], "cpu.", &mut leaves);
    let last = path.rsplit('.').next().unwrap_or("");
    // Those ending as the path does first (a misspelt middle), then those of its flow.
    let score =
        |l: &str| 2 * usize::from(l.ends_with(&format!(".{last}"))) + usize::from(l.split('.').next() == Some(first));
    let mut like: Vec<&String> = leaves.iter().filter(|l| score(l) > 0).collect();
    like.sort_by_key(|l| std::cmp::Reverse(score(l)));
    if like.is_empty() {
        like = leaves.iter().filter(|l| l.ends_with("bits_per_second") || l.ends_with("per_second")).collect();
    }
    const SHOWN: usize = 8;
    let more = like.len().saturating_sub(SHOWN);
    let mut names: Vec<&str> = like.iter().take(SHOWN).map(|s| s.as_str()).collect();
    let tail = format!("and {more} more");
    if more > 0 {
        names.push(&tail);
    }
    let flows: Vec<&str> = spec.direction.flows().iter().map(|f| f.name()).collect();
    let what = match first {
        "up" | "down" if !flows.contains(&first) && spec.kind != crate::TestKind::Rr => {
            format!("this test has no {first} flow (it runs {})", flows.join(" and "))
        }
        _ => format!("{path} is not a figure of this test"),
    };
    Err(format!("{what}; its figures include {} (docs/json.md)", names.join(", ")))
}

/// A result of the shape a test run to `spec` has, every figure zero.
fn template(spec: &crate::TestSpec) -> TestResult {
    use crate::{Endpoint, Role, StreamRecord, TestKind};
    let header = crate::ResultHeader::new(crate::TestInfo::new(spec.clone(), ""));
    let mut streams = Vec::new();
    if spec.kind != TestKind::Rr {
        for &flow in spec.direction.flows() {
            let (tx, rx) = if flow == Flow::Up {
                (Endpoint::Client, Endpoint::Server)
            } else {
                (Endpoint::Server, Endpoint::Client)
            };
            let mut sender = StreamRecord::bare(1, flow, Role::Sender, tx, 0, 0.0);
            let mut receiver = StreamRecord::bare(1, flow, Role::Receiver, rx, 0, 0.0);
            if spec.kind == TestKind::Udp {
                sender.udp_sent = Some(crate::UdpSent::default());
                receiver.udp_received = Some(crate::UdpReceived::default());
            } else {
                sender.retransmits = Some(0);
            }
            streams.extend([sender, receiver]);
        }
    }
    let cpu = crate::CpuReport { local: Some(Default::default()), remote: Some(Default::default()) };
    let mut r = TestResult::assemble(header, streams, cpu, None);
    if let Some(o) = &spec.rr {
        let empty = crate::LatencyUs::default();
        r.summary.rr = Some(crate::RrFigures {
            connect_latency_us: o.connect_per_transaction.then(|| empty.clone()),
            receive_wakeup_us: o.wakeup_stamps.then_some(empty),
            ..Default::default()
        });
    }
    r
}

/// The paths of every number under `v`, each prefixed with `prefix`.
fn number_paths(v: &serde_json::Value, prefix: &str, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                number_paths(v, &format!("{prefix}{k}."), out);
            }
        }
        serde_json::Value::Number(_) => out.push(prefix.trim_end_matches('.').to_string()),
        _ => {}
    }
}

/// The values of `path` over `results`, in their order, skipping those without it.
pub fn figures(results: &[TestResult], path: &str) -> Vec<f64> {
    results.iter().filter_map(|r| r.figure(path)).collect()
}

/// Whether a larger value of the figure at `path` is better (rates) or worse (latency, loss,
/// errors, time).
pub fn higher_is_better(path: &str) -> bool {
    let worse =
        ["latency", "lost", "loss", "jitter", "late", "duplicates", "errors", "drops", "retransmits", "seconds"];
    !worse.iter().any(|w| path.contains(w))
}

fn figure_in(doc: &serde_json::Value, path: &str) -> Option<f64> {
    let walk = |root: &serde_json::Value| path.split('.').try_fold(root, |v, key| v.get(key)).and_then(|v| v.as_f64());
    walk(&doc["summary"]).or_else(|| walk(doc))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CpuReport, Endpoint, ResultHeader, Role, StreamRecord, TestInfo, TestSpec};

    fn result(spec: TestSpec, streams: Vec<StreamRecord>) -> TestResult {
        let header = ResultHeader::new(TestInfo::new(spec, "127.0.0.1:5300"));
        TestResult::assemble(header, streams, CpuReport::default(), None)
    }

    fn flow(flow: Flow, bytes: u64) -> Vec<StreamRecord> {
        vec![
            StreamRecord::bare(1, flow, Role::Sender, Endpoint::Client, bytes, 2.0),
            StreamRecord::bare(1, flow, Role::Receiver, Endpoint::Server, bytes, 2.0),
        ]
    }

    #[test]
    fn paths_resolve_under_summary_then_root() {
        let mut spec = TestSpec::tcp_default();
        spec.streams = 1;
        let r = result(spec, flow(Flow::Up, 1_000));
        assert_eq!(r.figure("up.receiver.bits_per_second"), Some(4_000.0));
        assert_eq!(r.figure("test.streams"), Some(1.0));
        assert_eq!((r.figure("nope"), r.figure("up.receiver")), (None, None));
        assert_eq!(r.headline_path(), "up.receiver.bits_per_second");
        assert_eq!(figures(&[r.clone(), r], "up.sender.bytes"), [1_000.0, 1_000.0]);
        assert!(higher_is_better("up.receiver.bits_per_second"));
        assert!(!higher_is_better("rr.latency_us.p99"));
    }

    #[test]
    fn a_gate_is_checked_against_what_the_test_will_have() {
        let mut down = TestSpec::udp_default();
        down.direction = crate::Direction::Down;
        assert_eq!(check_path(&down, "down.receiver.loss_percent"), Ok(()));
        assert_eq!(check_path(&down, "down.sender.send_errors"), Ok(()));
        assert_eq!(check_path(&down, "cpu.local.total_pct"), Ok(()));
        assert_eq!(check_path(&down, "test.streams"), Ok(()));
        // Figures only a run fills are checked after it.
        assert_eq!(check_path(&down, "evidence.local.link.tx_packets"), Ok(()));
        let e = check_path(&down, "up.receiver.bits_per_second").unwrap_err();
        assert!(e.starts_with("this test has no up flow (it runs down); its figures include"), "{e}");
        assert!(e.contains("down.receiver.bits_per_second"), "{e}");
        let e = check_path(&down, "down.reciever.loss_percent").unwrap_err();
        assert!(e.starts_with("down.reciever.loss_percent is not a figure of this test"), "{e}");
        assert!(e.contains("down.receiver.loss_percent"), "{e}");
        let tcp = TestSpec::tcp_default();
        assert_eq!(check_path(&tcp, "up.sender.retransmits"), Ok(()));
        assert!(check_path(&tcp, "up.receiver.loss_percent").is_err());
        let mut rr = TestSpec::tcp_default();
        rr.kind = crate::TestKind::Rr;
        rr.rr = Some(crate::RrOptions::default());
        assert_eq!(check_path(&rr, "rr.latency_us.p99"), Ok(()));
        assert!(check_path(&rr, "rr.connect_latency_us.p99").is_err());
        rr.rr.as_mut().unwrap().connect_per_transaction = true;
        assert_eq!(check_path(&rr, "rr.connect_latency_us.p99"), Ok(()));
        assert!(check_path(&rr, "rr.latency_us.p99.9").is_err());
    }

    #[test]
    fn metric_names_pick_the_first_flow_or_the_rr_summary() {
        let mut spec = TestSpec::udp_default();
        spec.direction = crate::Direction::Down;
        let down = result(spec, flow(Flow::Down, 8_000));
        assert_eq!(down.headline_path(), "down.receiver.bits_per_second");
        assert_eq!(down.metric_path("bps").unwrap(), "down.receiver.bits_per_second");
        assert_eq!(down.figure(&down.metric_path("bps").unwrap()), Some(32_000.0));
        let mut spec = TestSpec::tcp_default();
        spec.direction = crate::Direction::Bidir;
        let both = result(spec, [flow(Flow::Up, 1), flow(Flow::Down, 1)].concat());
        assert_eq!(both.metric_path("tx-pps").unwrap(), "up.sender.packets_per_second");
        assert_eq!(both.metric_path("rtt-p99").unwrap(), "rr.latency_us.p99");
        assert_eq!(both.metric_path("down.sender.bytes").unwrap(), "down.sender.bytes");
        let e = both.metric_path("ppps").unwrap_err();
        assert!(e.contains("pps, tx-bps") && e.contains("rtt-p50"), "{e}");
        assert!(!higher_is_better(&both.metric_path("loss").unwrap()));
        let mut sink = down.clone();
        sink.test.far_end = crate::FarEnd::Sink;
        assert_eq!(sink.headline_path(), "up.sender.bits_per_second");
        let mut rr = both.clone();
        rr.summary.rr = Some(crate::RrFigures { transactions_per_second: 9.0, ..Default::default() });
        assert_eq!(
            (rr.headline_path(), rr.figure("rr.transactions_per_second")),
            ("rr.transactions_per_second", Some(9.0))
        );
    }
}
