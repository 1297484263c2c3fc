//! The typed messages of control protocol v1, carried as JSON in frames.
//!
//! JSON rather than a binary encoding: the messages are few and small, a person can read a
//! capture, and unknown fields are ignored so later versions can add them. Every message is an
//! object with a `type` tag, e.g. `{"type":"start"}`.

use crate::ProtocolError;
use netchar_model::{CpuUsage, Evidence, HostIdentity, HostInfo, StreamRecord, StreamTotal, TargetFigures, TestSpec};
use serde::{Deserialize, Deserializer, Serialize};

/// Client to server.
// One message at a time on a control connection: boxing the large request buys nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ClientMessage {
    /// Asks the server to run `spec`.
    Request {
        /// The test.
        spec: TestSpec,
        /// The client's netchar version, for the server's log.
        client_version: String,
        /// Cookie of a test this client runs at the same time (latency under load): admitted
        /// beside it even when the server runs as many tests as it admits.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        companion: Option<String>,
        /// The client's proof of its pre-shared key (crate::auth), when it has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        auth: Option<AuthProof>,
    },
    /// All data streams are connected: start the clocks and the workers.
    Start,
    /// The client's sending streams finished; exact totals per stream id.
    SenderDone {
        /// Exact totals of every stream the client sent on.
        totals: Vec<StreamTotal>,
    },
    /// End the test now (Ctrl-C, or a client-side failure). The server stops and reports.
    Stop {
        /// Why, for the server's log.
        reason: String,
    },
    /// The client is alive (sent when it has nothing else to say).
    Keepalive,
}

/// A client's answer to the server's nonce: who it is and the proof that it holds the key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthProof {
    /// The user whose key signed the proof.
    pub user: String,
    /// The client's nonce, 32 hex digits.
    pub nonce: String,
    /// HMAC-SHA256 proof, 64 hex digits.
    pub proof: String,
}

/// Server to client.
// One message at a time on a control connection: boxing the results' evidence buys nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerMessage {
    /// The test is admitted; data connections must present `cookie`.
    Accepted {
        /// Session cookie, 32 hex digits.
        cookie: String,
        /// Tests running on the server now, this one included.
        concurrent_tests: u32,
        /// The server's machine.
        host: HostInfo,
        /// The server's netchar version.
        server_version: String,
        /// A listener the server opened for this test alone (`netchar crr` connects to it once
        /// per transaction).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        data_port: Option<u16>,
        /// The server's proof of the same key, when the client authenticated (64 hex digits).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        server_proof: Option<String>,
    },
    /// The server is running as many tests as it admits, or refuses more connections or
    /// tests from this client for now; retrying later may succeed.
    Busy {
        /// Tests running.
        running: u32,
        /// Tests admitted at once (`--max-concurrent`).
        max: u32,
        /// Set when the limit reached is not `--max-concurrent` (too many connections from
        /// the client's address, too many test starts per minute, ...): one line.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// The request is not acceptable; the reason names the field.
    Rejected {
        /// One line.
        reason: String,
    },
    /// Every data connection arrived.
    Ready,
    /// The server's sending streams finished; exact totals per stream id.
    SenderDone {
        /// Exact totals of every stream the server sent on.
        totals: Vec<StreamTotal>,
    },
    /// The server's figures; the last message of a test.
    Results {
        /// The server's end of every stream.
        streams: Vec<StreamRecord>,
        /// The server's CPU.
        cpu: CpuUsage,
        /// A target's own figures over the test (the C responder on a board: its stack's
        /// counters, its idle loop); netchar's server sends none. Read leniently
        /// ([`lenient_target`]): a malformed one is dropped, never the results with it.
        #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "lenient_target")]
        target: Option<TargetFigures>,
        /// The server's interface, qdisc and stack counters over the test (towards the
        /// client), as deltas; netchar 0.1 servers before issue 23, peers and targets send
        /// none. Read leniently ([`lenient_part`]).
        #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "lenient_part")]
        evidence: Option<Evidence>,
        /// The server's settings that shape the test (kernel command line, its interface
        /// towards the client, CPU frequency governors). Read leniently ([`lenient_part`]).
        #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "lenient_part")]
        identity: Option<HostIdentity>,
        /// Set when the server ended the test early (shutdown, a failed stream).
        error: Option<String>,
    },
    /// The server is alive.
    Keepalive,
    /// The server ends the session; nothing follows.
    Error {
        /// One line.
        message: String,
    },
}

/// The longest counter name kept: the responder's are a word or two (`tcp_memerr`).
const COUNTER_NAME_MAX: usize = 32;
/// The most counters kept (the board reports 24 kinds at most).
const COUNTERS_MAX: usize = 64;

/// `target` of a `results` message, taken as far as it is well formed: a value that is not
/// an object is no target; `idle_count` or `idle_per_second` that is not an unsigned integer
/// is left out, and so is a counter whose value is not one or whose name is not a short
/// identifier (lowercase letters, digits, `_`: the names reach a terminal and a report).
/// The figures are a far end's extra, so they never cost the client the test's results.
fn lenient_target<'de, D: Deserializer<'de>>(d: D) -> Result<Option<TargetFigures>, D::Error> {
    let value = Option::<serde_json::Value>::deserialize(d)?;
    let Some(serde_json::Value::Object(o)) = value else {
        return Ok(None);
    };
    let counters = match o.get("counters") {
        Some(serde_json::Value::Object(c)) => c
            .iter()
            .filter(|(name, _)| {
                !name.is_empty()
                    && name.len() <= COUNTER_NAME_MAX
                    && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            })
            .filter_map(|(name, v)| Some((name.clone(), v.as_u64()?)))
            .take(COUNTERS_MAX)
            .collect(),
        _ => Default::default(),
    };
    Ok(Some(TargetFigures {
        idle_count: o.get("idle_count").and_then(serde_json::Value::as_u64),
        idle_per_second: o.get("idle_per_second").and_then(serde_json::Value::as_u64),
        counters,
    }))
}

/// An optional part of a `results` message (`evidence`, `identity`), taken whole or not at
/// all: a value that is not the part's shape, or that holds a control character in any name
/// or text (they reach a terminal and a report), is no part. Like `target`, it is the far
/// end's extra and never costs the client the test's results.
fn lenient_part<'de, D: Deserializer<'de>, T: serde::de::DeserializeOwned>(d: D) -> Result<Option<T>, D::Error> {
    let Some(value) = Option::<serde_json::Value>::deserialize(d)? else {
        return Ok(None);
    };
    if !printable(&value) {
        return Ok(None);
    }
    Ok(serde_json::from_value(value).ok())
}

/// True when no string or key in `v` holds a control character.
fn printable(v: &serde_json::Value) -> bool {
    let clean = |s: &str| !s.chars().any(char::is_control);
    match v {
        serde_json::Value::String(s) => clean(s),
        serde_json::Value::Array(a) => a.iter().all(printable),
        serde_json::Value::Object(o) => o.iter().all(|(k, v)| clean(k) && printable(v)),
        _ => true,
    }
}

fn decode<T: for<'de> Deserialize<'de>>(payload: &[u8]) -> Result<T, ProtocolError> {
    serde_json::from_slice(payload).map_err(|e| ProtocolError::Malformed(e.to_string()))
}

fn encode<T: Serialize>(msg: &T) -> Vec<u8> {
    // Serialising these types cannot fail: no maps with non-string keys, no failing Serialize impls.
    serde_json::to_vec(msg).expect("control messages always serialise")
}

impl ClientMessage {
    /// Parses a frame's payload.
    pub fn decode(payload: &[u8]) -> Result<Self, ProtocolError> {
        decode(payload)
    }
    /// The frame payload.
    pub fn encode(&self) -> Vec<u8> {
        encode(self)
    }
    /// The message's name, for errors.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Request { .. } => "request",
            Self::Start => "start",
            Self::SenderDone { .. } => "sender_done",
            Self::Stop { .. } => "stop",
            Self::Keepalive => "keepalive",
        }
    }
}

impl ServerMessage {
    /// Parses a frame's payload.
    pub fn decode(payload: &[u8]) -> Result<Self, ProtocolError> {
        decode(payload)
    }
    /// The frame payload.
    pub fn encode(&self) -> Vec<u8> {
        encode(self)
    }
    /// The message's name, for errors.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Accepted { .. } => "accepted",
            Self::Busy { .. } => "busy",
            Self::Rejected { .. } => "rejected",
            Self::Ready => "ready",
            Self::SenderDone { .. } => "sender_done",
            Self::Results { .. } => "results",
            Self::Keepalive => "keepalive",
            Self::Error { .. } => "error",
        }
    }
}

/// Formats a cookie as 32 lowercase hex digits.
pub fn cookie_to_hex(cookie: &[u8; 16]) -> String {
    cookie.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses 32 hex digits into a cookie.
pub fn cookie_from_hex(hex: &str) -> Result<[u8; 16], ProtocolError> {
    let bad = || ProtocolError::Malformed(format!("cookie {hex:?} is not 32 hex digits"));
    // from_str_radix alone would take "+7" as a byte.
    if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad());
    }
    let mut c = [0u8; 16];
    for (i, byte) in c.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn golden_json() {
        assert_eq!(ClientMessage::Start.encode(), br#"{"type":"start"}"#);
        assert_eq!(
            ServerMessage::Busy { running: 1, max: 1, reason: None }.encode(),
            br#"{"type":"busy","running":1,"max":1}"#
        );
        let sd = ClientMessage::SenderDone { totals: vec![StreamTotal { id: 1, bytes: 42, packets: 0 }] };
        assert_eq!(sd.encode(), br#"{"type":"sender_done","totals":[{"id":1,"bytes":42,"packets":0}]}"#);
    }

    #[test]
    fn request_round_trips() {
        let m = ClientMessage::Request {
            spec: TestSpec::tcp_default(),
            client_version: "0.1.0".into(),
            companion: None,
            auth: None,
        };
        assert_eq!(ClientMessage::decode(&m.encode()).unwrap(), m);
    }

    fn results_with(target: &str) -> Vec<u8> {
        format!(r#"{{"type":"results","streams":[],"cpu":{{"user_pct":1.5,"system_pct":0,"total_pct":1.5,"total_pct_of_all_cpus":1.5,"host_busy_pct":0,"host_softirq_pct":0,"user_seconds":0.75,"system_seconds":0,"wall_seconds":1,"cpus":1}}{target},"error":null}}"#)
            .into_bytes()
    }

    fn target_of(payload: &[u8]) -> Option<TargetFigures> {
        match ServerMessage::decode(payload) {
            Ok(ServerMessage::Results { target, cpu, .. }) => {
                assert_eq!(cpu.user_seconds, 0.75, "the results around the target are read");
                target
            }
            other => panic!("not results: {other:?}"),
        }
    }

    #[test]
    fn a_targets_figures_round_trip_and_are_absent_from_a_servers_results() {
        // As the board writes them (responder/src/nc_responder.c, out_target).
        let board = results_with(
            r#","target":{"idle_count":812345,"idle_per_second":4080145,"counters":{"link_recv":2812,"tcp_drop":2}}"#,
        );
        let t = target_of(&board).expect("a target");
        assert_eq!((t.idle_count, t.idle_per_second), (Some(812_345), Some(4_080_145)));
        assert_eq!(t.counters.get("link_recv"), Some(&2812));
        let m = ServerMessage::Results {
            streams: Vec::new(),
            cpu: CpuUsage::default(),
            target: Some(t),
            evidence: None,
            identity: None,
            error: None,
        };
        assert_eq!(ServerMessage::decode(&m.encode()).unwrap(), m);
        // netchar's server and the hosted responder send none, and none is written.
        assert_eq!(target_of(&results_with("")), None);
        let m = ServerMessage::Results {
            streams: Vec::new(),
            cpu: CpuUsage::default(),
            target: None,
            evidence: None,
            identity: None,
            error: None,
        };
        assert!(!String::from_utf8(m.encode()).unwrap().contains("target"));
    }

    #[test]
    fn a_malformed_target_is_dropped_not_the_results() {
        for garbage in [r#","target":5"#, r#","target":null"#, r#","target":"x""#, r#","target":[1,2]"#] {
            assert_eq!(target_of(&results_with(garbage)), None, "{garbage}");
        }
        // Each bad field is left out, the good ones kept.
        let t = target_of(&results_with(
            r#","target":{"idle_count":-1,"idle_per_second":1.5,"counters":{"ok":1,"neg":-2,"big":1e30,"s":"7","Bad Name":3,"x\u001b":4,"nested":{"a":1}},"extra":[]}"#,
        ))
        .expect("an object is a target");
        assert_eq!((t.idle_count, t.idle_per_second), (None, None));
        assert_eq!(t.counters.into_iter().collect::<Vec<_>>(), [("ok".to_string(), 1)]);
        let t = target_of(&results_with(r#","target":{"counters":7}"#)).unwrap();
        assert!(t.counters.is_empty());
        let many: Vec<String> = (0..100).map(|i| format!("\"c{i}\":{i}")).collect();
        let t = target_of(&results_with(&format!(r#","target":{{"counters":{{{}}}}}"#, many.join(",")))).unwrap();
        assert_eq!(t.counters.len(), COUNTERS_MAX);
    }

    fn evidence_of(payload: &[u8]) -> (Option<Evidence>, Option<HostIdentity>) {
        match ServerMessage::decode(payload) {
            Ok(ServerMessage::Results { evidence, identity, cpu, .. }) => {
                assert_eq!(cpu.user_seconds, 0.75, "the results around the evidence are read");
                (evidence, identity)
            }
            other => panic!("not results: {other:?}"),
        }
    }

    #[test]
    fn a_servers_evidence_and_identity_round_trip_and_a_malformed_one_is_dropped_not_the_results() {
        let mut evidence = Evidence { interface: "eth0".into(), seconds: 2.5, ..Evidence::default() };
        evidence.socket_drops = Some(7);
        evidence.unavailable.insert("driver".into(), "Operation not supported".into());
        let identity = HostIdentity { kernel_cmdline: Some("quiet".into()), ..HostIdentity::default() };
        let m = ServerMessage::Results {
            streams: Vec::new(),
            cpu: CpuUsage::default(),
            target: None,
            evidence: Some(evidence.clone()),
            identity: Some(identity.clone()),
            error: None,
        };
        assert_eq!(ServerMessage::decode(&m.encode()).unwrap(), m);
        // An older server sends neither.
        assert_eq!(evidence_of(&results_with("")), (None, None));
        let good_identity = r#","identity":{"kernel_cmdline":"quiet"}"#;
        for garbage in [
            r#","evidence":5"#,
            r#","evidence":null"#,
            r#","evidence":{"seconds":1}"#,
            r#","evidence":{"interface":"eth0","seconds":1,"snapshot_us":[1,2],"socket_drops":-1}"#,
            r#","evidence":{"interface":"eth\u001b[2J","seconds":1,"snapshot_us":[1,2]}"#,
            r#","evidence":{"interface":"eth0","seconds":1,"snapshot_us":[1,2],"snmp":{"Udp\u0007":1}}"#,
        ] {
            let (e, i) = evidence_of(&results_with(&format!("{garbage}{good_identity}")));
            assert_eq!(e, None, "{garbage}");
            assert_eq!(i, Some(identity.clone()), "the identity beside it is kept: {garbage}");
        }
        let (e, i) = evidence_of(&results_with(
            r#","evidence":{"interface":"eth0","seconds":2.5,"snapshot_us":[0,0],"socket_drops":7,"unavailable":{"driver":"Operation not supported"}},"identity":{"cpu_governors":{"x":-1}}"#,
        ));
        assert_eq!((e, i), (Some(evidence), None));
    }

    #[test]
    fn cookies_round_trip_and_reject_garbage() {
        let c = [7u8; 16];
        assert_eq!(cookie_from_hex(&cookie_to_hex(&c)).unwrap(), c);
        assert!(cookie_from_hex("zz").is_err());
        assert!(cookie_from_hex("é0000000000000000000000000000000").is_err());
    }

    proptest! {
        #[test]
        fn decoding_any_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = ClientMessage::decode(&bytes);
            let _ = ServerMessage::decode(&bytes);
        }
    }
}
