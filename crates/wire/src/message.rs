//! The typed messages of control protocol v1, carried as JSON in frames.
//!
//! JSON rather than a binary encoding: the messages are few and small, a person can read a
//! capture, and unknown fields are ignored so later versions can add them. Every message is an
//! object with a `type` tag, e.g. `{"type":"start"}`.

use crate::ProtocolError;
use netchar_model::{CpuUsage, HostInfo, StreamRecord, StreamTotal, TestSpec};
use serde::{Deserialize, Serialize};

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
