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

/// The protocol whose client sent `first_bytes` to a netchar server instead of a hello, when
/// netchar knows it. Each signature was read from the real tool's first segment on loopback
/// (iperf3 3.12, iperf 2.1.8, netperf 2.7.0, irtt 0.9.0; crates/cli/tests/wrong_server.rs runs
/// them), netio's from its CONTROL message as [`crate::netio`] decodes it:
///
/// | client | first bytes |
/// |---|---|
/// | iperf3 | a 37-byte cookie: 36 lowercase letters and digits, then NUL |
/// | iperf2 | its settings header, a big-endian flags word with a header bit (`HEADER_VERSION1`, `HEADER_EXTEND`, `HEADER_VERSION2`) and a thread count; without one (a plain `-c`), its payload `0123456789...` |
/// | netperf | a request: a big-endian type below 1024, then -1 (`00 00 00 61 ff ff ff ff` for DO_OMNI) |
/// | netio | CONTROL: command 1-3 (C2S, S2C, RES) and a block size of at most 64 KiB, in either byte order |
/// | irtt | its magic `14 a7 5b`, then a flags byte with OPEN set (UDP) |
pub fn recognised_client(first_bytes: &[u8]) -> Option<KnownProtocol> {
    let word = |at: usize| first_bytes.get(at..at + 4).map(|w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
    let iperf2_header_bits =
        crate::iperf2::HEADER_VERSION1 | crate::iperf2::HEADER_EXTEND | crate::iperf2::HEADER_VERSION2;
    let digits = first_bytes.len() >= 10 && first_bytes.iter().enumerate().all(|(i, &c)| c == b'0' + (i % 10) as u8);
    match first_bytes {
        _ if digits => Some(KnownProtocol::Iperf2),
        b if b.len() >= 36
            && b[..36].iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
            && b.get(36).is_none_or(|&c| c == 0) =>
        {
            Some(KnownProtocol::Iperf3)
        }
        b if b.len() >= 4 && b[..3] == crate::irtt::MAGIC && b[3] & crate::irtt::FLAG_OPEN != 0 => {
            Some(KnownProtocol::Irtt)
        }
        _ if word(0).is_some_and(|flags| flags & iperf2_header_bits != 0)
            && word(4).is_some_and(|threads| (1..=1024).contains(&threads)) =>
        {
            Some(KnownProtocol::Iperf2)
        }
        // Without -d or -r, stock iperf 2.0 (and netchar's iperf2 client) sends flags 0, the
        // thread count, then the port the server listens on.
        _ if word(0) == Some(0)
            && word(4).is_some_and(|threads| (1..=1024).contains(&threads))
            && word(8).is_some_and(|port| (1..=65535).contains(&port)) =>
        {
            Some(KnownProtocol::Iperf2)
        }
        _ if word(0).is_some_and(|kind| (1..1024).contains(&kind)) && word(4) == Some(u32::MAX) => {
            Some(KnownProtocol::Netperf)
        }
        b if b.len() >= crate::netio::CONTROL_LEN => {
            let control = crate::netio::Control::decode(b[..crate::netio::CONTROL_LEN].try_into().expect("8 bytes")).0;
            ((1..=3).contains(&control.cmd) && (1..=crate::netio::MAX_BLOCK).contains(&control.data))
                .then_some(KnownProtocol::Netio)
        }
        _ => None,
    }
}

/// Names the client that sent `first_bytes` to a netchar server instead of a hello, and the
/// `netchar server` flag that answers it, for the server's log.
pub fn identify_client(first_bytes: &[u8]) -> String {
    match recognised_client(first_bytes) {
        Some(known) => {
            let (flag, port) = known.listener();
            format!(
                "{} ({}); this port speaks netchar: `netchar server {flag}` answers {} clients on {port}",
                known.client_name(),
                client_evidence(known, first_bytes),
                known.name()
            )
        }
        None if first_bytes.is_empty() => "it sent nothing".into(),
        None => identify_peer(first_bytes).replace("answered with", "sent").replace("answered", "sent"),
    }
}

/// What in `first_bytes` gave `known`'s client away.
fn client_evidence(known: KnownProtocol, first_bytes: &[u8]) -> &'static str {
    match known {
        KnownProtocol::Iperf3 => "its 37-byte cookie",
        KnownProtocol::Iperf2 if first_bytes.starts_with(b"0123456789") => {
            "its payload of digits, without a settings header"
        }
        KnownProtocol::Iperf2 => "its settings header",
        KnownProtocol::Netperf => "its control request",
        KnownProtocol::Netio => "its CONTROL command",
        KnownProtocol::Irtt => "its open request",
        KnownProtocol::Echo | KnownProtocol::Chargen => "its first bytes",
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

/// The serv_errno netserver answers a request of an unknown type with.
const NETSERVER_UNKNOWN_REQUEST: u32 = 998;

/// For a client whose server never sends on the stream (an iperf2 server, a discard service:
/// `expected` names it, "an iperf2 server"), after the test: what the peer that did is, from
/// what it sent back (`answer`, the first bytes; `sent`, this end's first bytes, which an echo
/// server returns) or from its close while this end still sent (`closed_early`). None when
/// the peer behaved as `expected` does: silent, and open until the client closed.
pub fn not_a_silent_server(expected: &str, sent: &[u8], answer: &[u8], closed_early: bool) -> Option<String> {
    let what = match answer {
        [] if closed_early => format!(
            "it closed the connection during the test without a word, as a netio server does (suite netio --proto \
             netio), and {expected} reads until its client closes"
        ),
        [] => return None,
        b if !sent.is_empty() && sent[..sent.len().min(b.len())] == b[..sent.len().min(b.len())] => {
            "an echo server answered (it sent the client's bytes back); add --proto echo".to_string()
        }
        b => identify_peer(b),
    };
    Some(format!("not {expected}: {what}"))
}

/// Names the kind of peer that sent `first_bytes` instead of a netchar hello.
///
/// Called with whatever arrived before the peer went quiet or closed, so it must accept any
/// length, including a prefix of a real hello.
pub fn identify_peer(first_bytes: &[u8]) -> String {
    match first_bytes {
        // A netio server closes on a command it does not know (netchar's hello is one).
        [] => "it closed the connection without answering, as a netio server does (suite netio --proto netio)"
            .to_string(),
        [0x09, ..] => "an iperf3 server answered (PARAM_EXCHANGE); add --proto iperf3, or start `netchar server` there"
            .to_string(),
        [0xFF, ..] => "an iperf3 server answered ACCESS_DENIED (it is busy with another test)".to_string(),
        [0xFE, ..] => "an iperf3 server answered SERVER_ERROR".to_string(),
        // iperf 2.1's acknowledgement of a client's settings header (type 2, 28 bytes): it read
        // the first bytes sent as a header (iperf 2.1.8 on loopback, crates/cli/tests/wrong_server.rs).
        [0, 0, 0, 2, 0, 0, 0, 0x1c, ..] => {
            "an iperf2 server answered (its acknowledgement of a client's header); add --proto iperf2".to_string()
        }
        // netserver's answer to a request of a type it does not know: a response whose
        // serv_errno is 998 (netperf 2.7's netserver.c), 656 bytes, to every 656 it reads.
        b if b.len() >= 8 && b[0] == 0 && b[4..8] == NETSERVER_UNKNOWN_REQUEST.to_be_bytes() => {
            "netperf's netserver answered (its error response to a request it does not know); add --proto netperf"
                .to_string()
        }
        b if b.starts_with(b"SSH-") => "an SSH server answered".to_string(),
        b if recognised_protocol(b) == Some(KnownProtocol::Echo) => {
            "an echo server answered (it sent netchar's hello back); add --proto echo".to_string()
        }
        b if recognised_protocol(b) == Some(KnownProtocol::Chargen) => {
            "a chargen server answered (printable characters, unasked); add --proto chargen".to_string()
        }
        b if b.starts_with(b"HTTP/") => "an HTTP server answered".to_string(),
        // A peer protocol's client (`--proto netperf`, `--proto iperf3`) at a netchar server,
        // which answers anything that is not a hello with its own before it closes.
        b if b.len() >= HELLO_LEN && b[..MAGIC.len()] == MAGIC && b[10] == 2 => {
            "a netchar server answered (its hello): netchar's own protocol, which runs without --proto (or with --proto netchar)"
                .to_string()
        }
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
    fn peer_clients_are_recognised_by_their_first_bytes() {
        // First segments of the real clients against a netchar server on loopback.
        let iperf2_header = [0x40, 0x01, 0x00, 0x78, 0, 0, 0, 1, 0, 0, 0x3b, 0xc4, 0, 0, 0, 0];
        let netperf_omni = [0, 0, 0, 0x61, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
        let iperf3_cookie = b"mq5zbbxdvqo2wnjhmhaxeyxq7ikhmcqkpg3i\0";
        // netchar's own iperf2 client, as stock iperf 2.0 without -d or -r: flags 0.
        let iperf2_plain_header = [0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0x3b, 0xc4, 0, 2, 0, 0];
        let cases: [(&[u8], Option<KnownProtocol>); 11] = [
            (iperf3_cookie, Some(KnownProtocol::Iperf3)),
            (&iperf2_plain_header, Some(KnownProtocol::Iperf2)),
            (&iperf3_cookie[..36], Some(KnownProtocol::Iperf3)),
            (&iperf2_header, Some(KnownProtocol::Iperf2)),
            (b"0123456789012345678901234567890123456789", Some(KnownProtocol::Iperf2)),
            (&netperf_omni, Some(KnownProtocol::Netperf)),
            (&[0, 0, 0, 1, 0, 0, 0x04, 0, 0, 0, 0, 0], Some(KnownProtocol::Netio)),
            (&[1, 0, 0, 0, 0, 0x04, 0, 0], Some(KnownProtocol::Netio)),
            (&[0x14, 0xa7, 0x5b, 0x01, 0x02], Some(KnownProtocol::Irtt)),
            (&Hello::control().encode(), None),
            (b"GET / HTTP/1.1\r\n", None),
        ];
        for (bytes, expected) in cases {
            assert_eq!(recognised_client(bytes), expected, "{bytes:02x?}");
        }
        assert_eq!(
            identify_client(&netperf_omni),
            "a netperf client (its control request); this port speaks netchar: `netchar server --netperf` answers \
             netperf clients on 12865"
        );
        assert!(identify_client(&iperf2_header).starts_with("an iperf2 client (its settings header); "));
        assert!(identify_client(iperf3_cookie).contains("`netchar server --iperf3` answers iperf3 clients on 5201"));
        assert_eq!(identify_client(&[]), "it sent nothing");
        assert_eq!(identify_client(b"\x00\x01"), "it sent unknown bytes [00 01]");
        // What iperf 2.1.8 answered an iperf3 client's cookie with, on a busy machine.
        let ack = [0, 0, 0, 2, 0, 0, 0, 0x1c, 0, 0, 0, 0, 0, 2, 0, 1];
        assert!(identify_peer(&ack).contains("an iperf2 server answered"), "{}", identify_peer(&ack));
    }

    #[test]
    fn what_answered_a_client_of_a_silent_server_is_named_from_its_bytes_and_its_close() {
        let sent = b"0123456789012345678901234567890123456789";
        let named = |answer: &[u8], closed_early| not_a_silent_server("a discard server", sent, answer, closed_early);
        // Silent, and open until the client closed (or closed after it): the server expected.
        assert_eq!(named(&[], false), None);
        assert!(named(&[], true).unwrap().contains("during the test without a word, as a netio server does"));
        assert!(named(&Hello::server().encode(), false).unwrap().starts_with("not a discard server: a netchar server"));
        assert!(named(&[0x09], false).unwrap().contains("an iperf3 server answered (PARAM_EXCHANGE)"));
        assert!(named(&sent[..12], true)
            .unwrap()
            .contains("an echo server answered (it sent the client's bytes back)"));
        // netserver's answer to a request of an unknown type (netperf 2.7.0 on loopback).
        let netserver = [0, 0, 0, 0, 0, 0, 0x03, 0xe6, 0, 0, 0, 0];
        assert!(
            named(&netserver, false).unwrap().contains("netperf's netserver answered"),
            "{:?}",
            named(&netserver, false)
        );
        assert!(identify_peer(&[0, 0, 0, 0, 0, 0, 0x03, 0xe7]).contains("unknown bytes"));
    }

    #[test]
    fn a_netchar_server_answering_a_peer_protocol_is_named() {
        let answer = Hello::server_with_nonce([7; 16], false).encode();
        assert!(identify_peer(&answer).starts_with("a netchar server answered"), "{}", identify_peer(&answer));
        assert!(recognised_protocol(&answer).is_none());
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
