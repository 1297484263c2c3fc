//! A protocol's caveats about a result's figures (from the protocol registry), those that
//! apply to the result: the text summary places each under its flow, the HTML report lists
//! them.

use netchar_model::{Caveat, CaveatWhen, Flow, TestResult};

/// Every caveat of a result that applies to its figures, each prefixed with its flow: what
/// the HTML report lists beside the figures (the text summary places each under its flow).
pub(crate) fn applicable_caveats(r: &TestResult) -> Vec<String> {
    let mut lines = Vec::new();
    for c in &r.test.caveats {
        let flows: Vec<Flow> = match c.flow {
            Some(f) => vec![f],
            None => vec![Flow::Up, Flow::Down],
        };
        let prefix = |f: Flow| if c.flow.is_some() { format!("{}: ", f.name()) } else { String::new() };
        match c.when {
            CaveatWhen::Always => {
                lines.push(format!("{}{}", c.flow.map_or(String::new(), prefix), c.text));
            }
            CaveatWhen::ReceiverShort => {
                for f in flows {
                    if let Some(s) = r.summary.flow(f).filter(|s| s.receiver.total_bytes < s.sender.total_bytes) {
                        lines.push(format!("{}{}", prefix(f), c.render(s.sender.total_bytes, s.receiver.total_bytes)));
                    }
                }
            }
            CaveatWhen::DatagramsShort => {
                for f in flows {
                    let Some(s) = r.summary.flow(f) else { continue };
                    let sent = s.sender.udp_sent.as_ref().map(|u| u.packets);
                    let counted = s.receiver.udp_received.as_ref().map(|u| u.packets + u.lost);
                    if let (Some(sent), Some(counted)) = (sent, counted) {
                        if counted < sent {
                            lines.push(format!("{}{}", prefix(f), c.render(sent, counted)));
                        }
                    }
                }
            }
        }
    }
    lines
}

/// A protocol's caveats about `flow` (or the whole test, for `None`) under `when`.
pub(crate) fn caveats(r: &TestResult, flow: Option<Flow>, when: CaveatWhen) -> impl Iterator<Item = &Caveat> {
    r.test.caveats.iter().filter(move |c| c.flow == flow && c.when == when)
}

/// The caveat of `when` about `flow`, or about every flow.
pub(crate) fn caveat(r: &TestResult, flow: Flow, when: CaveatWhen) -> Option<&Caveat> {
    r.test.caveats.iter().find(|c| c.when == when && c.flow.is_none_or(|f| f == flow))
}
