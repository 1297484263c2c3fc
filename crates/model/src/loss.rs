//! Where a UDP flow's lost datagrams went (issue 23): the flow's `lost` split into what each
//! counter of the two ends explains, from both ends' [`Evidence`](crate::Evidence) and a target's own
//! counters, and the remainder that no counter explains: the network between the ends.
//!
//! The counters belong to an interface or to a network namespace, not to the test: a drop of
//! another program's packet on the same interface counts as much as one of the test's
//! datagrams. The breakdown therefore assumes that the test's traffic is all there is on its
//! ends' interfaces and stacks. Each cause is counted no further than the loss it can
//! explain: a datagram is lost at one place only, so the causes are taken in the order a
//! datagram meets them (the receiving sockets' own drops first, which are the test's alone),
//! each capped at what the causes before it left unexplained. Counters that moved by more
//! than that are reported as `counted_beyond_lost`, and the breakdown is marked approximate.
//!
//! ```
//! use netchar_model::LossBreakdown;
//! let parts = LossBreakdown::split(100, [("sender_qdisc", Some(30)), ("receiver_socket", Some(20))]);
//! assert_eq!((parts.sender_qdisc, parts.receiver_socket, parts.unexplained), (Some(30), Some(20), 50));
//! ```
//!
//! The type and its arithmetic are a part of the result and stand below it; [`LossBreakdown::of`]
//! reads the whole result, so it is the result's (`result/loss.rs`).

use serde::{Deserialize, Serialize};

/// A target's counters that count a datagram it received and dropped: lwIP's link, IP and UDP
/// drops (a frame without a buffer counts as a link drop too) and the responder's raw
/// transport's full receive queue (docs/embedded.md, "Target-side figures").
pub const TARGET_RECEIVE_DROPS: [&str; 4] = ["link_drop", "ip_drop", "udp_drop", "udp_queue_drop"];

/// A UDP flow's lost datagrams, split by what explains them (`summary.<flow>.loss_breakdown`).
///
/// A cause is absent when its counter is not known: the far end sent no evidence (a peer
/// protocol's server, an older netchar, a target that reports only its own counters), or the
/// counter could not be read (`evidence.*.unavailable` says why). Its share is then in
/// `unexplained`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LossBreakdown {
    /// Datagrams dropped by the sender's queueing disciplines (the root qdiscs' drops of the
    /// interface the route leaves by: a full queue, or its algorithm's choice).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_qdisc: Option<u64>,
    /// Datagrams the sender's interface dropped or failed to send (`tx_dropped` +
    /// `tx_errors`: a full ring, a link without carrier, a veth whose peer is down).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_interface: Option<u64>,
    /// Datagrams the receiver's interface dropped before its stack (`rx_dropped` +
    /// `rx_missed_errors` + `rx_errors`: no buffer, a full backlog, a bad frame).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver_interface: Option<u64>,
    /// Datagrams the receiver's stack dropped outside the test's sockets (`IpInDiscards`,
    /// `UdpNoPorts`, and the `UdpInErrors` its sockets did not count: checksum and memory
    /// errors, other sockets' full buffers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver_stack: Option<u64>,
    /// Datagrams the test's own receiving sockets dropped (their `sk_drops`: a full receive
    /// buffer), the `kernel_drops` of the receiver's records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver_socket: Option<u64>,
    /// Datagrams a target that received them dropped, by its own counters
    /// ([`TARGET_RECEIVE_DROPS`]); only where the far end is a target that reports them and
    /// the flow is towards it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<u64>,
    /// What no counter explains: lost between the ends (a router, a firewall, the wire), or
    /// at a place no counter of the ends sees. Never negative.
    pub unexplained: u64,
    /// The datagrams the breakdown splits: every stream's `lost` over the whole test, warm-up
    /// included (the counters cannot be split at `-O`).
    pub lost: u64,
    /// How far the causes' counters moved beyond the loss they could explain: drops of other
    /// traffic, or one drop counted at two places (both ends of a veth pair). 0 when every
    /// counter fits.
    #[serde(default)]
    pub counted_beyond_lost: u64,
    /// True when a figure may not be the test's own: the counters moved by more than the test
    /// lost, a counter restarted, or a drop counted a batch of datagrams once (GSO, GRO).
    #[serde(default)]
    pub approximate: bool,
    /// Why it is approximate, and what was not known, in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// The causes in the order the loss is shared among them: the test's own sockets first (their
/// counter is the test's alone), then the path from the sending socket to the receiving one.
const ORDER: [&str; 6] =
    ["receiver_socket", "sender_qdisc", "sender_interface", "target", "receiver_interface", "receiver_stack"];

impl LossBreakdown {
    /// The causes with their shares, in JSON's order: `sender_qdisc`, `sender_interface`,
    /// `receiver_interface`, `receiver_stack`, `receiver_socket`, `target`.
    pub fn causes(&self) -> [(&'static str, Option<u64>); 6] {
        [
            ("sender_qdisc", self.sender_qdisc),
            ("sender_interface", self.sender_interface),
            ("receiver_interface", self.receiver_interface),
            ("receiver_stack", self.receiver_stack),
            ("receiver_socket", self.receiver_socket),
            ("target", self.target),
        ]
    }

    fn cause_mut(&mut self, name: &str) -> Option<&mut Option<u64>> {
        Some(match name {
            "sender_qdisc" => &mut self.sender_qdisc,
            "sender_interface" => &mut self.sender_interface,
            "receiver_interface" => &mut self.receiver_interface,
            "receiver_stack" => &mut self.receiver_stack,
            "receiver_socket" => &mut self.receiver_socket,
            "target" => &mut self.target,
            _ => return None,
        })
    }

    /// The datagrams the known causes explain.
    pub fn explained(&self) -> u64 {
        self.causes().iter().filter_map(|(_, v)| *v).sum()
    }

    /// `lost` shared among the causes' counters (by name, as in [`Self::causes`]; None: not
    /// known), each capped at what the causes before it in the sharing order left; the rest is
    /// `unexplained`, what the counters have beyond it `counted_beyond_lost`.
    pub fn split<'a>(lost: u64, counters: impl IntoIterator<Item = (&'a str, Option<u64>)>) -> Self {
        let counters: Vec<(&str, Option<u64>)> = counters.into_iter().collect();
        let mut b = Self { lost, ..Self::default() };
        let mut left = lost;
        for name in ORDER {
            let Some(raw) = counters.iter().find(|(n, _)| *n == name).and_then(|(_, v)| *v) else { continue };
            let share = raw.min(left);
            left -= share;
            b.counted_beyond_lost += raw - share;
            if let Some(slot) = b.cause_mut(name) {
                *slot = Some(share);
            }
        }
        b.unexplained = left;
        if b.counted_beyond_lost > 0 {
            b.approximate = true;
            b.notes.push(format!(
                "the counters moved by {} more than the test lost: they count other traffic's drops too, or one \
                 drop at two places (both ends of a veth pair); each cause is capped at what the causes before it \
                 left unexplained",
                b.counted_beyond_lost
            ));
        }
        b
    }

    /// The sum of several breakdowns (a sweep's steps): each cause summed over the parts
    /// that know it; None for no parts.
    pub fn sum<'a>(parts: impl IntoIterator<Item = &'a Self>) -> Option<Self> {
        let parts: Vec<&Self> = parts.into_iter().collect();
        parts.first()?;
        let mut total = Self::default();
        for p in &parts {
            total.lost += p.lost;
            total.unexplained += p.unexplained;
            total.counted_beyond_lost += p.counted_beyond_lost;
            total.approximate |= p.approximate;
            for (name, v) in p.causes() {
                if let (Some(v), Some(slot)) = (v, total.cause_mut(name)) {
                    *slot = Some(slot.unwrap_or(0) + v);
                }
            }
            for n in &p.notes {
                if !total.notes.contains(n) {
                    total.notes.push(n.clone());
                }
            }
        }
        let uneven: Vec<&str> = total
            .causes()
            .iter()
            .filter(|(name, v)| {
                v.is_some() && parts.iter().any(|p| p.causes().iter().any(|c| c.0 == *name && c.1.is_none()))
            })
            .map(|(name, _)| *name)
            .collect();
        if !uneven.is_empty() {
            total.notes.push(format!("not known in every part, summed where known: {}", uneven.join(", ")));
        }
        Some(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_add_every_cause_and_say_which_were_not_known_everywhere() {
        let a = LossBreakdown::split(10, [("sender_qdisc", Some(4)), ("receiver_socket", Some(1))]);
        let b = LossBreakdown::split(5, [("sender_qdisc", Some(5)), ("receiver_socket", None)]);
        let s = LossBreakdown::sum([&a, &b]).unwrap();
        assert_eq!((s.lost, s.sender_qdisc, s.receiver_socket, s.unexplained), (15, Some(9), Some(1), 5));
        assert_eq!(s.notes, ["not known in every part, summed where known: receiver_socket"]);
        assert!(LossBreakdown::sum([]).is_none());
    }
}
