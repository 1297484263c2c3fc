//! Where a UDP flow's lost datagrams went ([`LossBreakdown`]), in words: under the receiver in
//! the text summary, under a sweep's or a maximum-rate search's table, and as the HTML
//! report's column heads.

use netchar_model::LossBreakdown;
use std::fmt::Write;

/// A loss breakdown in words: where the lost datagrams went, by cause (those not known
/// named as such), and, when it is approximate, why.
pub(crate) fn loss_breakdown_lines(b: &LossBreakdown) -> Vec<String> {
    let mut known = Vec::new();
    let mut unknown = Vec::new();
    for (name, share) in b.causes() {
        match share {
            Some(n) => known.push(format!("{} {n}", cause_label(name))),
            // A target's own counters exist only for a target: not known elsewhere is no news.
            None if name == "target" => {}
            None => unknown.push(cause_label(name)),
        }
    }
    known.push(format!("unexplained {} (between the ends, or where no counter sees)", b.unexplained));
    let mut first = format!("where the {} lost went: {}", b.lost, known.join(", "));
    if !unknown.is_empty() {
        let _ = write!(first, "; not known: {}", unknown.join(", "));
    }
    let mut lines = vec![first];
    if b.approximate {
        lines.push(format!("approximate: {}", b.notes.join("; ")));
    }
    lines
}

/// The words for a cause of [`LossBreakdown`].
pub(crate) fn cause_label(name: &str) -> &'static str {
    match name {
        "sender_qdisc" => "sender's qdisc",
        "sender_interface" => "sender's interface",
        "receiver_interface" => "receiver's interface",
        "receiver_stack" => "receiver's stack",
        "receiver_socket" => "receiver's socket",
        "target" => "target's own drops",
        _ => "another cause",
    }
}
