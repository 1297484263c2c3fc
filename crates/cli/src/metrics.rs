//! Figures picked out of results by path, for `--expect`, `--baseline`, `--repeat`
//! statistics and `netchar compare`. A path such as `up.receiver.bits_per_second` or
//! `rr.latency_us.p99` is looked up under `summary`, then from the document's root.

use serde_json::Value;

/// The value at `path` in a result document, if it is a number.
pub(crate) fn lookup(doc: &Value, path: &str) -> Option<f64> {
    let walk = |root: &Value| path.split('.').try_fold(root, |v, key| v.get(key)).and_then(Value::as_f64);
    walk(&doc["summary"]).or_else(|| walk(doc))
}

/// The figure a test is judged by when none is named: receive rate for throughput tests,
/// transactions per second for request/response tests.
pub(crate) fn headline(doc: &Value) -> &'static str {
    if doc["summary"]["rr"].is_object() {
        "rr.transactions_per_second"
    } else if doc["summary"]["up"].is_object() {
        "up.receiver.bits_per_second"
    } else {
        "down.receiver.bits_per_second"
    }
}

/// The figures `netchar compare --metric` knows by name, each with what it picks: the
/// receiving or sending side of the result's first flow (up, else down), or the
/// request/response summary.
pub(crate) const METRIC_NAMES: &[(&str, &str)] = &[
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

/// The path of `metric` in `doc`: a name of [`METRIC_NAMES`] (`pps`: the first flow's
/// receiver's datagrams per second), or a path as it is (`down.receiver.packets_per_second`).
pub(crate) fn metric_path(metric: &str, doc: &Value) -> Result<String, String> {
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
    let flow = if doc["summary"]["up"].is_object() { "up" } else { "down" };
    Ok(format!("{flow}.{tail}"))
}

/// Whether a larger value of `path` is better (rates) or worse (latency, loss, errors).
pub(crate) fn higher_is_better(path: &str) -> bool {
    let worse =
        ["latency", "lost", "loss", "jitter", "late", "duplicates", "errors", "drops", "retransmits", "seconds"];
    !worse.iter().any(|w| path.contains(w))
}

/// A comparison operator of an expectation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Op {
    Ge,
    Gt,
    Le,
    Lt,
    Eq,
}

/// One `--expect 'PATH OP VALUE'`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Expectation {
    pub(crate) path: String,
    pub(crate) op: Op,
    pub(crate) value: f64,
    pub(crate) text: String,
}

impl Expectation {
    /// Parses `up.receiver.bits_per_second >= 400M`; the value takes SI/binary suffixes.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let ops = [(">=", Op::Ge), ("<=", Op::Le), ("==", Op::Eq), (">", Op::Gt), ("<", Op::Lt)];
        for (sym, op) in ops {
            if let Some((path, value)) = text.split_once(sym) {
                let path = path.trim().to_string();
                if path.is_empty() || path.contains(char::is_whitespace) {
                    return Err(format!(
                        "{text:?}: expected PATH OP VALUE, e.g. 'up.receiver.bits_per_second >= 400M'"
                    ));
                }
                let v = value.trim();
                let value = v.parse::<f64>().ok().filter(|x| x.is_finite()).or_else(|| {
                    let pct = v.strip_suffix('%').and_then(|p| p.trim().parse::<f64>().ok());
                    pct.or_else(|| netchar_model::units::parse_bytes(v).ok().map(|x| x as f64))
                });
                let value = value.ok_or_else(|| format!("{text:?}: {v:?} is not a number (e.g. 400M, 0.1, 200)"))?;
                return Ok(Self { path, op, value, text: text.trim().to_string() });
            }
        }
        Err(format!("{text:?}: no comparison (use >=, >, <=, < or ==)"))
    }

    /// Whether `measured` meets it.
    pub(crate) fn holds(&self, measured: f64) -> bool {
        match self.op {
            Op::Ge => measured >= self.value,
            Op::Gt => measured > self.value,
            Op::Le => measured <= self.value,
            Op::Lt => measured < self.value,
            Op::Eq => measured == self.value,
        }
    }
}

/// The values of `path` across several result documents (or arrays of them).
pub(crate) fn collect(docs: &[Value], path: &str) -> Vec<f64> {
    docs.iter()
        .flat_map(|d| match d {
            Value::Array(runs) => runs.iter().filter_map(|r| lookup(r, path)).collect::<Vec<_>>(),
            d => lookup(d, path).into_iter().collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expectations_parse_with_units_and_percent() {
        let e = Expectation::parse("up.receiver.bits_per_second >= 400M").unwrap();
        assert_eq!((e.path.as_str(), e.op, e.value), ("up.receiver.bits_per_second", Op::Ge, 4e8));
        let e = Expectation::parse("up.receiver.loss_percent < 0.1").unwrap();
        assert_eq!((e.op, e.value), (Op::Lt, 0.1));
        assert!(e.holds(0.05) && !e.holds(0.1));
        let e = Expectation::parse("rr.latency_us.p99<=200").unwrap();
        assert_eq!((e.op, e.value), (Op::Le, 200.0));
        assert!(Expectation::parse("fast").is_err());
        assert!(Expectation::parse("a b >= 1").is_err());
        assert!(Expectation::parse("x >= lots").is_err());
    }

    #[test]
    fn paths_resolve_under_summary_then_root() {
        let doc: Value =
            serde_json::json!({"summary": {"up": {"receiver": {"bits_per_second": 5.0}}}, "test": {"streams": 2}});
        assert_eq!(lookup(&doc, "up.receiver.bits_per_second"), Some(5.0));
        assert_eq!(lookup(&doc, "test.streams"), Some(2.0));
        assert_eq!(lookup(&doc, "nope"), None);
        assert_eq!(headline(&doc), "up.receiver.bits_per_second");
        assert!(higher_is_better("up.receiver.bits_per_second"));
        assert!(!higher_is_better("rr.latency_us.p99"));
    }

    #[test]
    fn metric_names_pick_the_first_flow_or_the_rr_summary() {
        let down: Value = serde_json::json!({"summary": {"down": {"receiver": {"packets_per_second": 7.0}}}});
        assert_eq!(metric_path("pps", &down).unwrap(), "down.receiver.packets_per_second");
        assert_eq!(lookup(&down, &metric_path("pps", &down).unwrap()), Some(7.0));
        let up: Value = serde_json::json!({"summary": {"up": {}, "down": {}}});
        assert_eq!(metric_path("tx-pps", &up).unwrap(), "up.sender.packets_per_second");
        assert_eq!(metric_path("bps", &up).unwrap(), "up.receiver.bits_per_second");
        assert_eq!(metric_path("rtt-p99", &up).unwrap(), "rr.latency_us.p99");
        assert_eq!(metric_path("down.sender.bytes", &up).unwrap(), "down.sender.bytes");
        let e = metric_path("ppps", &up).unwrap_err();
        assert!(e.contains("pps, tx-bps") && e.contains("rtt-p50"), "{e}");
        assert!(!higher_is_better(&metric_path("loss", &up).unwrap()));
    }
}
