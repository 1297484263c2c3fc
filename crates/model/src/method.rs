//! How a test actually sent and received: the method behind its figures.
//!
//! Two results are only comparable when they were measured the same way. A UDP test without
//! checksums also runs without GSO (the kernel refuses GSO on a socket with SO_NO_CHECK), so
//! its packet rate is a different method's rate, not the effect of the checksum; two TCP runs
//! of which one fell back from MSG_ZEROCOPY to copying measured two send paths. [`Method`]
//! records what each run did, read from the stream records both ends reported (not from what
//! was asked), so that `compare`, `--baseline` and every later comparison can hold it
//! constant and name the field where two runs differ.
//!
//! The type is a part of the result and stands below it; [`Method::of`] reads the whole
//! result, so it is the result's (`result/method.rs`).

use serde::{Deserialize, Serialize};

/// How one test sent and received, as it ran. Each field is one thing that changes what a
/// test measures; a field absent (`None`) was not reported and differs from nothing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Method {
    /// The control protocol the test ran over: `netchar`, or a peer's (`iperf3`, ...).
    pub protocol: String,
    /// `tcp`, `udp`, `rr` (TCP request/response), `rr_udp` or `crr` (a connection per
    /// transaction).
    pub test: String,
    /// `up`, `down` or `bidir`.
    pub direction: String,
    /// Streams per flow.
    pub streams: u32,
    /// Bytes per write (TCP), per datagram (UDP, and so the GSO segment size) or per request
    /// (request/response).
    pub block_bytes: u64,
    /// Request/response: bytes per response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_bytes: Option<u64>,
    /// Request/response: transactions in flight per connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inflight: Option<u32>,
    /// What the senders wrote: `constant` (netchar's pattern) or the `--payload` kind and seed.
    pub payload: String,
    /// Receivers compared every byte with the sender's generator (`--verify`); left out of
    /// the JSON when off.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub verify: bool,
    /// UDP: datagrams carried a UDP checksum (false with `--no-udp-checksum`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_checksum: Option<bool>,
    /// UDP: every sending stream netchar ran sent with UDP GSO to the end of the test (a
    /// sender the kernel refused GSO falls back to sendmmsg, and this is false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gso: Option<bool>,
    /// UDP: datagrams the kernel took per send call, over all of netchar's sending streams
    /// (the batch: a GSO super-datagram or a sendmmsg vector). Measured, so two runs of one
    /// method differ in it a little; it counts as a difference when one is over twice the other.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datagrams_per_send: Option<f64>,
    /// UDP: the receivers got datagrams coalesced by GRO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gro: Option<bool>,
    /// UDP: the senders kept a schedule (`-b` or `--pps` above 0, or a pattern).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paced: Option<bool>,
    /// UDP, paced: the datagrams due within this many µs went out as one batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacing_quantum_us: Option<f64>,
    /// TCP senders: how the data left the sender (`copy`, or `--zerocopy`'s method at the end:
    /// `zerocopy`, `splice` or `copy`); several joined with `+` when streams differed. UDP
    /// senders: `socket` (the kernel's UDP send path), `af_xdp` (`--xdp`, whole frames
    /// through an AF_XDP socket) or `xdp_live` (`--xdp-live`, the kernel's XDP live frames).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send: Option<String>,
    /// TCP receivers: how the payload left the socket (`read`, or `msg_trunc` with
    /// `--skip-rx-copy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receive: Option<String>,
    /// TCP: the congestion control of the sending ends (`-C`, or the kernel's default there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion: Option<String>,
    /// TCP: socket buffer (`-w`), MSS (`-M`), no-delay (`-N`), rate cap (`-b`), as one text;
    /// `defaults` when none was set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_options: Option<String>,
    /// How receivers waited for data: `spin` (`--busy-poll`), the kernel's busy polling where a
    /// sysctl turned it on (`net.core.busy_read=50 on the client`), or `sleep`.
    pub busy_poll: String,
    /// Where the data workers ran: `client CPU 0, server CPU 1`, or `unpinned`.
    pub cpu_placement: String,
    /// IP options of the data packets (`--tos`, `--flowlabel`, `--df`), or `none`.
    pub ip_options: String,
    /// The server's background load (`--server-load`), or `none`.
    pub server_load: String,
}

/// Where two methods differ: the field's name (as `--accept-difference` takes it) and each
/// side's value as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodDifference {
    /// The field of [`Method`].
    pub field: &'static str,
    /// The first side's value.
    pub left: String,
    /// The second side's value.
    pub right: String,
}

impl std::fmt::Display for MethodDifference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {} vs {}", self.field, self.left, self.right)
    }
}

/// The fields of [`Method`], in the order they are compared and named.
pub const METHOD_FIELDS: &[&str] = &[
    "protocol",
    "test",
    "direction",
    "streams",
    "block_bytes",
    "response_bytes",
    "inflight",
    "payload",
    "verify",
    "udp_checksum",
    "gso",
    "datagrams_per_send",
    "gro",
    "paced",
    "pacing_quantum_us",
    "send",
    "receive",
    "congestion",
    "tcp_options",
    "busy_poll",
    "cpu_placement",
    "ip_options",
    "server_load",
];

fn on_off(b: bool) -> String {
    if b { "on" } else { "off" }.to_string()
}

impl Method {
    /// The value of `field` as text, or None where it was not reported.
    pub fn field(&self, field: &str) -> Option<String> {
        let num = |v: f64| {
            let s = format!("{v:.1}");
            s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
        };
        Some(match field {
            "protocol" => self.protocol.clone(),
            "test" => self.test.clone(),
            "direction" => self.direction.clone(),
            "streams" => self.streams.to_string(),
            "block_bytes" => self.block_bytes.to_string(),
            "response_bytes" => self.response_bytes?.to_string(),
            "inflight" => self.inflight?.to_string(),
            "payload" => self.payload.clone(),
            "verify" => on_off(self.verify),
            "udp_checksum" => on_off(self.udp_checksum?),
            "gso" => on_off(self.gso?),
            "datagrams_per_send" => num(self.datagrams_per_send?),
            "gro" => on_off(self.gro?),
            "paced" => if self.paced? { "yes" } else { "no" }.to_string(),
            "pacing_quantum_us" => num(self.pacing_quantum_us?),
            "send" => self.send.clone()?,
            "receive" => self.receive.clone()?,
            "congestion" => self.congestion.clone()?,
            "tcp_options" => self.tcp_options.clone()?,
            "busy_poll" => self.busy_poll.clone(),
            "cpu_placement" => self.cpu_placement.clone(),
            "ip_options" => self.ip_options.clone(),
            "server_load" => self.server_load.clone(),
            _ => return None,
        })
    }

    /// Where `self` and `other` differ, field by field in [`METHOD_FIELDS`] order. A field one
    /// side did not report is no difference (an older result, a peer's report); the measured
    /// `datagrams_per_send` differs when one side's is over twice the other's, and only
    /// between senders that ran flat out.
    ///
    /// A paced sender's batch is set by its schedule, not by how it sends: the datagrams due
    /// in one pacing quantum (so it grows with the rate), and after a late wake-up the ones it
    /// fell behind by. Two paced runs at different rates, or one on a busy machine, differ in
    /// it while sending alike; what they share is `pacing_quantum_us`, compared as a field.
    pub fn differences(&self, other: &Self) -> Vec<MethodDifference> {
        let mut out = Vec::new();
        let both_flat_out = self.paced == Some(false) && other.paced == Some(false);
        for &field in METHOD_FIELDS {
            let (Some(left), Some(right)) = (self.field(field), other.field(field)) else { continue };
            let differ = match (field, self.datagrams_per_send, other.datagrams_per_send) {
                ("datagrams_per_send", Some(a), Some(b)) => both_flat_out && a.max(b) > 2.0 * a.min(b),
                _ => left != right,
            };
            if differ {
                out.push(MethodDifference { field, left, right });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_field_names_are_the_json_keys_and_each_reads_back() {
        let m = Method {
            response_bytes: Some(1),
            inflight: Some(1),
            verify: true,
            udp_checksum: Some(true),
            gso: Some(true),
            datagrams_per_send: Some(1.0),
            gro: Some(false),
            paced: Some(true),
            pacing_quantum_us: Some(0.0),
            send: Some("copy".into()),
            receive: Some("read".into()),
            congestion: Some("cubic".into()),
            tcp_options: Some("defaults".into()),
            ..Method::default()
        };
        let json = serde_json::to_value(&m).unwrap();
        let keys: Vec<&str> = json.as_object().unwrap().keys().map(String::as_str).collect();
        let mut names = METHOD_FIELDS.to_vec();
        names.sort();
        assert_eq!(keys, names);
        assert!(METHOD_FIELDS.iter().all(|f| m.field(f).is_some()));
        assert_eq!(m.field("nonsense"), None);
    }

    /// Batches of 1.2 and 3.3 per send: a difference between two flat-out senders (one fell
    /// back to smaller batches), none between two paced ones (a rate of 2000/s and one of
    /// 3000/s with the same quantum, or a late wake-up's catch-up burst).
    #[test]
    fn the_batch_size_is_a_method_only_for_senders_that_ran_flat_out() {
        let udp = |paced: bool, per_send: f64| Method {
            gso: Some(true),
            datagrams_per_send: Some(per_send),
            paced: Some(paced),
            pacing_quantum_us: paced.then_some(1000.0),
            ..Method::default()
        };
        let fields = |a: &Method, b: &Method| a.differences(b).iter().map(|d| d.field).collect::<Vec<_>>();
        assert_eq!(fields(&udp(false, 1.2), &udp(false, 3.3)), ["datagrams_per_send"]);
        assert!(fields(&udp(false, 2.0), &udp(false, 3.3)).is_empty());
        assert!(fields(&udp(true, 1.2), &udp(true, 3.3)).is_empty());
        assert_eq!(fields(&udp(true, 1.2), &udp(false, 3.3)), ["paced"]);
        let mut other_quantum = udp(true, 1.2);
        other_quantum.pacing_quantum_us = Some(250.0);
        assert_eq!(fields(&udp(true, 1.2), &other_quantum), ["pacing_quantum_us"]);
    }
}
