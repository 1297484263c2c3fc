//! The 40-byte hello that opens every netchar connection.
//!
//! Layout (big-endian):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `netchar\0` |
//! | 8 | 2 | protocol version |
//! | 10 | 1 | role: 0 control (client), 1 data (client), 2 server |
//! | 11 | 1 | flags: bit 0 (server hello) = the server requires authentication |
//! | 12 | 16 | session cookie (data connections), the server's nonce (server hello); zero otherwise |
//! | 28 | 4 | stream id (data connections; zero otherwise) |
//! | 32 | 8 | data connections of an authenticated test: the stream's tag (crate::auth); zero otherwise |
//!
//! Why 40 bytes: an iperf3 server reads a 37-byte cookie before it says anything. A hello of at
//! least 37 bytes makes it answer at once (PARAM_EXCHANGE, 0x09), so the client can name the
//! peer it found instead of waiting for a timeout (reference/iperf.md §1).

use crate::{ProtocolError, PROTOCOL_VERSION};

/// Bytes in a hello.
pub const HELLO_LEN: usize = 40;
/// The magic that starts every hello.
pub const MAGIC: [u8; 8] = *b"netchar\0";

/// What the connection is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A client's control connection.
    Control,
    /// A client's data connection for one stream.
    Data,
    /// The server's answer on a control connection.
    Server,
}

/// Flag in a server hello: the server runs tests only for clients that authenticate.
pub const FLAG_AUTH_REQUIRED: u8 = 1;

/// A decoded hello.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    /// Protocol version of the sender.
    pub version: u16,
    /// What the connection is for.
    pub role: Role,
    /// Flags ([`FLAG_AUTH_REQUIRED`]).
    pub flags: u8,
    /// The session cookie for data connections; the server's nonce in a server hello.
    pub cookie: [u8; 16],
    /// The stream id, for data connections.
    pub stream_id: u32,
    /// The stream's tag, for data connections of an authenticated test.
    pub tag: [u8; 8],
}

impl Hello {
    /// A client's control hello at this build's version.
    pub fn control() -> Self {
        Self { version: PROTOCOL_VERSION, role: Role::Control, flags: 0, cookie: [0; 16], stream_id: 0, tag: [0; 8] }
    }

    /// The server's answer at this build's version.
    pub fn server() -> Self {
        Self { role: Role::Server, ..Self::control() }
    }

    /// The server's answer carrying its nonce for this connection, and whether it requires
    /// authentication.
    pub fn server_with_nonce(nonce: [u8; 16], auth_required: bool) -> Self {
        Self { cookie: nonce, flags: if auth_required { FLAG_AUTH_REQUIRED } else { 0 }, ..Self::server() }
    }

    /// A data connection's hello.
    pub fn data(cookie: [u8; 16], stream_id: u32) -> Self {
        Self { role: Role::Data, cookie, stream_id, ..Self::control() }
    }

    /// A data connection's hello with its stream tag (authenticated tests).
    pub fn data_tagged(cookie: [u8; 16], stream_id: u32, tag: [u8; 8]) -> Self {
        Self { tag, ..Self::data(cookie, stream_id) }
    }

    /// True when a server hello says the server requires authentication.
    pub fn auth_required(&self) -> bool {
        self.flags & FLAG_AUTH_REQUIRED != 0
    }

    /// The 40 bytes on the wire.
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..10].copy_from_slice(&self.version.to_be_bytes());
        b[10] = match self.role {
            Role::Control => 0,
            Role::Data => 1,
            Role::Server => 2,
        };
        b[11] = self.flags;
        b[12..28].copy_from_slice(&self.cookie);
        b[28..32].copy_from_slice(&self.stream_id.to_be_bytes());
        b[32..40].copy_from_slice(&self.tag);
        b
    }

    /// Decodes a whole hello. Anything but netchar's magic is described by [`identify_peer`].
    /// A version other than ours is returned, not rejected: the caller decides.
    pub fn decode(b: &[u8; HELLO_LEN]) -> Result<Self, ProtocolError> {
        if b[0..8] != MAGIC {
            return Err(ProtocolError::NotNetchar(identify_peer(b)));
        }
        let version = u16::from_be_bytes([b[8], b[9]]);
        let role = match b[10] {
            0 => Role::Control,
            1 => Role::Data,
            2 => Role::Server,
            other => return Err(ProtocolError::Malformed(format!("hello with unknown role {other}"))),
        };
        let mut cookie = [0u8; 16];
        cookie.copy_from_slice(&b[12..28]);
        let stream_id = u32::from_be_bytes([b[28], b[29], b[30], b[31]]);
        let mut tag = [0u8; 8];
        tag.copy_from_slice(&b[32..40]);
        Ok(Self { version, role, flags: b[11], cookie, stream_id, tag })
    }
}

pub use crate::known::KnownProtocol;

/// The protocol netchar also speaks whose answer `first_bytes` is, when they are one's: an
/// iperf3 server asks for parameters (PARAM_EXCHANGE), an echo server sends netchar's own
/// hello back, a chargen server sends RFC 864's printable characters unasked.
pub fn recognised_protocol(first_bytes: &[u8]) -> Option<KnownProtocol> {
    let echoed = Hello::control().encode();
    match first_bytes {
        [0x09, ..] => Some(KnownProtocol::Iperf3),
        b if b.len() >= 12 && b[..12] == echoed[..12] => Some(KnownProtocol::Echo),
        b if b.len() >= 8
            && b.iter().all(|&c| (0x20..0x7f).contains(&c) || c == b'\r' || c == b'\n')
            && !b.starts_with(b"SSH-")
            && !b.starts_with(b"HTTP/") =>
        {
            Some(KnownProtocol::Chargen)
        }
        _ => None,
    }
}

/// The error for a peer that sent `first_bytes` instead of a netchar hello: which protocol it
/// speaks when netchar knows it, else what it looks like.
pub fn not_netchar(first_bytes: &[u8]) -> ProtocolError {
    match recognised_protocol(first_bytes) {
        Some(protocol) => ProtocolError::PeerProtocol { protocol, what: identify_peer(first_bytes) },
        None => ProtocolError::NotNetchar(identify_peer(first_bytes)),
    }
}

/// Names the kind of peer that sent `first_bytes` instead of a netchar hello.
///
/// Called with whatever arrived before the peer went quiet or closed, so it must accept any
/// length, including a prefix of a real hello.
pub fn identify_peer(first_bytes: &[u8]) -> String {
    match first_bytes {
        [] => "it closed the connection without answering".to_string(),
        [0x09, ..] => "an iperf3 server answered (PARAM_EXCHANGE); add --proto iperf3, or start `netchar server` there"
            .to_string(),
        [0xFF, ..] => "an iperf3 server answered ACCESS_DENIED (it is busy with another test)".to_string(),
        [0xFE, ..] => "an iperf3 server answered SERVER_ERROR".to_string(),
        b if b.starts_with(b"SSH-") => "an SSH server answered".to_string(),
        b if recognised_protocol(b) == Some(KnownProtocol::Echo) => {
            "an echo server answered (it sent netchar's hello back); add --proto echo".to_string()
        }
        b if recognised_protocol(b) == Some(KnownProtocol::Chargen) => {
            "a chargen server answered (printable characters, unasked); add --proto chargen".to_string()
        }
        b if b.starts_with(b"HTTP/") => "an HTTP server answered".to_string(),
        b if b.len() < HELLO_LEN && b[..b.len().min(MAGIC.len())] == MAGIC[..b.len().min(MAGIC.len())] => {
            format!("it sent {} of the {HELLO_LEN} bytes of a netchar hello and stopped", b.len())
        }
        b => {
            let shown: String = b.iter().take(16).map(|x| format!("{x:02x}")).collect::<Vec<_>>().join(" ");
            format!("it answered with unknown bytes [{shown}]")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn golden_bytes_of_a_data_hello() {
        let h = Hello::data([0xAB; 16], 3);
        let b = h.encode();
        assert_eq!(&b[0..12], b"netchar\0\x00\x02\x01\x00");
        assert_eq!(&b[12..28], &[0xAB; 16]);
        assert_eq!(&b[28..40], &[0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn iperf3_answers_are_recognised() {
        assert!(identify_peer(&[0x09]).contains("iperf3"));
        assert!(identify_peer(&[0xFF]).contains("busy"));
        assert!(identify_peer(b"SSH-2.0-OpenSSH").contains("SSH"));
        assert!(identify_peer(&[]).contains("closed"));
    }

    #[test]
    fn peers_netchar_also_speaks_are_recognised() {
        assert_eq!(recognised_protocol(&[0x09]), Some(KnownProtocol::Iperf3));
        // An echo server sends the client's own hello back.
        assert_eq!(recognised_protocol(&Hello::control().encode()), Some(KnownProtocol::Echo));
        assert_eq!(recognised_protocol(&Hello::server().encode()), None);
        assert_eq!(recognised_protocol(b" !\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFG"), Some(KnownProtocol::Chargen));
        assert_eq!(recognised_protocol(b"SSH-2.0-OpenSSH_9.2"), None);
        assert_eq!(recognised_protocol(b"HTTP/1.1 400 Bad Request\r\n"), None);
        assert_eq!(recognised_protocol(&[]), None);
        assert!(matches!(not_netchar(&[0x09]), ProtocolError::PeerProtocol { protocol: KnownProtocol::Iperf3, .. }));
        assert!(matches!(
            not_netchar(&Hello::control().encode()),
            ProtocolError::PeerProtocol { protocol: KnownProtocol::Echo, .. }
        ));
        assert!(matches!(not_netchar(b"\x00\x01"), ProtocolError::NotNetchar(_)));
        assert_eq!(KnownProtocol::Chargen.to_string(), "chargen");
    }

    #[test]
    fn a_partial_netchar_hello_is_named_as_such() {
        // A hello cut short after the magic used to be shown as "unknown bytes [6e 65 74 ...]".
        let h = Hello::server().encode();
        assert_eq!(identify_peer(&h[..12]), "it sent 12 of the 40 bytes of a netchar hello and stopped");
        assert_eq!(identify_peer(&h[..3]), "it sent 3 of the 40 bytes of a netchar hello and stopped");
        assert!(identify_peer(b"netcha!").contains("unknown bytes"));
    }

    #[test]
    fn server_hellos_carry_the_nonce_and_the_auth_flag() {
        let h = Hello::server_with_nonce([4; 16], true);
        let d = Hello::decode(&h.encode()).unwrap();
        assert!(d.auth_required());
        assert_eq!(d.cookie, [4; 16]);
        assert!(!Hello::server().auth_required());
        let t = Hello::data_tagged([1; 16], 2, [3; 8]);
        assert_eq!(Hello::decode(&t.encode()).unwrap().tag, [3; 8]);
    }

    proptest! {
        #[test]
        fn decoding_any_bytes_never_panics(bytes in proptest::array::uniform32(any::<u8>()), tail in proptest::array::uniform8(any::<u8>())) {
            let mut b = [0u8; HELLO_LEN];
            b[..32].copy_from_slice(&bytes);
            b[32..].copy_from_slice(&tail);
            let _ = Hello::decode(&b);
            let _ = identify_peer(&b);
        }

        #[test]
        fn round_trip(cookie in proptest::array::uniform16(any::<u8>()), id in any::<u32>()) {
            let h = Hello::data(cookie, id);
            prop_assert_eq!(Hello::decode(&h.encode()).unwrap(), h);
        }
    }
}
