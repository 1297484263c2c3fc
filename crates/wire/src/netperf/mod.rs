//! netperf's control protocol (netperf 2.5 to 2.7, HewlettPackard/netperf; docs/netperf.md),
//! sans-IO: the fixed-size control message ([`Message`]), the OMNI test that stock netperf
//! sends for its classic test names ([`omni`]), the server's figures ([`figures`]), and both
//! roles: [`client`] (netchar against a netserver) and [`server`] (netchar answering a stock
//! netperf).
//!
//! The wire, as netperf 2.7.1 does it (checked against captures of netperf and netserver built
//! from HewlettPackard/netperf, `crates/wire/tests/fixtures/netperf/`):
//! - one TCP control connection, netserver on port 12865; no hello, no version: netperf's first
//!   bytes are a request;
//! - every message is 656 bytes: two 32-bit header words (request: type, and the CPU netserver
//!   should bind to or −1; response: type, and an errno, 0 for success) and 162 words of
//!   test-specific data ([`Message`]). Integers and IEEE-754 single floats go as 32-bit
//!   big-endian words (netperf converts them with `htonl`); the character fields after a
//!   layout's numbers go as they are;
//! - with the default build (OMNI tests on, "migrated" classic names), TCP_STREAM, TCP_MAERTS,
//!   UDP_STREAM, TCP_RR, UDP_RR and TCP_CRR are all one request type, DO_OMNI (97), told apart
//!   by protocol, direction and flags ([`omni`]). netserver answers OMNI_RESPONSE (98) with the
//!   data port it listens on; netperf connects (or sends datagrams) there, ends the data phase
//!   (shutdown, or three empty datagrams), and netserver sends the results unasked, in a
//!   second message on the same buffer.
//!
//! netserver fills its response in place, converts it to network order in place, and never
//! clears it between messages: the fields a message does not set go out as the previous
//! message left them, converted once more. [`ResponseImage`] keeps the same memory, so that
//! what netchar's server sends is byte for byte what a netserver on a little-endian host sends
//! (netperf reads none of those stale fields).

pub mod client;
pub mod figures;
pub mod omni;
pub mod server;

use crate::ProtocolError;
use std::time::Duration;

/// netserver's control port.
pub const CONTROL_PORT: u16 = 12865;
/// Test-specific words in a message (`MAXSPECDATA`).
pub const SPEC_WORDS: usize = 162;
/// Bytes of test-specific data.
pub const SPEC_LEN: usize = 4 * SPEC_WORDS;
/// Bytes of every control message, request or response.
pub const MESSAGE_LEN: usize = 8 + SPEC_LEN;
/// What netserver adds to its timer when netperf sends, so that netperf's own end (a shutdown,
/// empty datagrams) comes first; subtracted from its elapsed time when the timer ended the test.
pub const PAD_TIME: Duration = Duration::from_secs(4);

/// Request and response types (netlib.h). Responses to the classic tests are their request
/// plus one; their results, plus two.
pub mod code {
    /// Raise netserver's debug level; answered [`DEBUG_OK`].
    pub const DEBUG_ON: i32 = 1;
    /// Lower it; answered [`DEBUG_OK`].
    pub const DEBUG_OFF: i32 = 2;
    /// The answer to both.
    pub const DEBUG_OK: i32 = 3;
    /// Never answered by netserver (it is not in its switch: "unknown test").
    pub const NODE_IDENTIFY: i32 = 4;
    /// Calibrate the CPU (`netperf -t REM_CPU`): answered with the same type, a float rate and
    /// a CPU count in the first two words.
    pub const CPU_CALIBRATE: i32 = 5;
    /// `netperf -Z`: a NUL-terminated passphrase in the data, unconverted; never answered.
    pub const PASSPHRASE: i32 = 6;
    /// The classic TCP_STREAM request (netperf built with `--disable-omni`, or before 2.5).
    pub const DO_TCP_STREAM: i32 = 10;
    /// The classic TCP_RR request.
    pub const DO_TCP_RR: i32 = 13;
    /// The classic UDP_STREAM request.
    pub const DO_UDP_STREAM: i32 = 16;
    /// The classic UDP_RR request.
    pub const DO_UDP_RR: i32 = 19;
    /// The classic TCP_CRR request.
    pub const DO_TCP_CRR: i32 = 34;
    /// The classic TCP_MAERTS request.
    pub const DO_TCP_MAERTS: i32 = 94;
    /// Every test of a default netperf 2.5+ build.
    pub const DO_OMNI: i32 = 97;
    /// netserver's answer to [`DO_OMNI`], and (in its results message) the type the results
    /// carry too.
    pub const OMNI_RESPONSE: i32 = 98;
    /// Defined by netperf for OMNI results; netserver never sends it.
    pub const OMNI_RESULTS: i32 = 99;
    /// System information (deprecated: answered with ",Deprecated" four times).
    pub const DO_SYSINFO: i32 = 600;
    /// The answer to [`DO_SYSINFO`].
    pub const SYSINFO_RESPONSE: i32 = 601;
}

/// errno values netserver (or netchar's server) puts in a response to refuse a request, as
/// Linux numbers them; netperf prints "netperf: remote error N" and the local strerror(N).
pub mod errno {
    /// EPERM: refused by the server's policy (a limit).
    pub const NOT_PERMITTED: i32 = 1;
    /// EBUSY: the server runs as many tests as it allows.
    pub const BUSY: i32 = 16;
    /// EOPNOTSUPP: a test or option netchar's server does not run.
    pub const NOT_SUPPORTED: i32 = 95;
    /// What netserver answers a request type it does not know ("unknown test number").
    pub const UNKNOWN_REQUEST: i32 = 998;
}

/// A few errno values a netserver sends, in words (Linux numbering), for error messages.
pub fn errno_text(errno: i32) -> String {
    let known = match errno {
        1 => "operation not permitted",
        13 => "permission denied",
        16 => "device or resource busy",
        22 => "invalid argument",
        24 => "too many open files",
        95 => "operation not supported",
        97 => "address family not supported",
        98 => "address already in use",
        99 => "cannot assign requested address",
        errno::UNKNOWN_REQUEST => "unknown request type",
        _ => return format!("errno {errno}"),
    };
    format!("errno {errno}, {known}")
}

/// One control message: the two header words and the test-specific bytes as they are on the
/// wire (big-endian words; read the character fields with [`Message::bytes`]).
#[derive(Clone, PartialEq, Eq)]
pub struct Message {
    /// Request or response type ([`code`]).
    pub kind: i32,
    /// Requests: the CPU netserver should bind to (`netperf -T ,N`), −1 for none. Responses:
    /// 0, or the errno of a refusal.
    pub status: i32,
    /// The test-specific data.
    pub data: [u8; SPEC_LEN],
}

impl std::fmt::Debug for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let used = self.data.iter().rposition(|&b| b != 0).map_or(0, |i| i / 4 + 1);
        let words: Vec<String> = (0..used).map(|i| format!("{:08x}", self.word(i))).collect();
        f.debug_struct("Message")
            .field("kind", &self.kind)
            .field("status", &self.status)
            .field("words", &words.join(" "))
            .finish()
    }
}

impl Message {
    /// A message of this type and status with zeroed data.
    pub fn new(kind: i32, status: i32) -> Self {
        Self { kind, status, data: [0; SPEC_LEN] }
    }

    /// Test-specific word `i` (big-endian); 0 past the end.
    pub fn word(&self, i: usize) -> u32 {
        self.data.get(4 * i..4 * i + 4).map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Sets word `i`; ignored past the end.
    pub fn set_word(&mut self, i: usize, v: u32) {
        if let Some(b) = self.data.get_mut(4 * i..4 * i + 4) {
            b.copy_from_slice(&v.to_be_bytes());
        }
    }

    /// `len` bytes of the data from byte `offset`, clipped to the data.
    pub fn bytes(&self, offset: usize, len: usize) -> &[u8] {
        let start = offset.min(SPEC_LEN);
        &self.data[start..(start + len).min(SPEC_LEN)]
    }

    /// Copies `bytes` into the data at byte `offset`, clipped to the data.
    pub fn set_bytes(&mut self, offset: usize, bytes: &[u8]) {
        let start = offset.min(SPEC_LEN);
        let n = bytes.len().min(SPEC_LEN - start);
        self.data[start..start + n].copy_from_slice(&bytes[..n]);
    }

    /// The 656 bytes on the wire.
    pub fn encode(&self) -> [u8; MESSAGE_LEN] {
        let mut b = [0u8; MESSAGE_LEN];
        b[..4].copy_from_slice(&self.kind.to_be_bytes());
        b[4..8].copy_from_slice(&self.status.to_be_bytes());
        b[8..].copy_from_slice(&self.data);
        b
    }

    /// Decodes exactly one message; any other length is refused with what arrived.
    pub fn decode(bytes: &[u8]) -> Result<Self, ProtocolError> {
        if bytes.len() != MESSAGE_LEN {
            return Err(ProtocolError::Malformed(format!(
                "a netperf control message is {MESSAGE_LEN} bytes, not {} ({})",
                bytes.len(),
                hex_prefix(bytes)
            )));
        }
        let word = |i: usize| i32::from_be_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
        let mut data = [0u8; SPEC_LEN];
        data.copy_from_slice(&bytes[8..]);
        Ok(Self { kind: word(0), status: word(4), data })
    }

    /// The type, read in either byte order: netserver's results carry theirs little-endian
    /// (its buffer's header was converted twice), so 98 arrives as 0x62000000.
    pub fn kind_any_order(&self) -> i32 {
        if (0..=0xFFFF).contains(&self.kind) {
            self.kind
        } else {
            self.kind.swap_bytes()
        }
    }
}

/// Up to 16 bytes in hex, for error messages.
pub(crate) fn hex_prefix(bytes: &[u8]) -> String {
    let shown: Vec<String> = bytes.iter().take(16).map(|b| format!("{b:02x}")).collect();
    if bytes.len() > 16 {
        format!("{} ...", shown.join(" "))
    } else {
        shown.join(" ")
    }
}

/// Collects control bytes into whole messages.
#[derive(Debug, Clone, Default)]
pub(crate) struct MessageBuffer {
    buf: Vec<u8>,
}

impl MessageBuffer {
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    pub(crate) fn len(&self) -> usize {
        self.buf.len()
    }

    /// The next whole message, if one is buffered.
    pub(crate) fn take(&mut self) -> Option<Message> {
        if self.buf.len() < MESSAGE_LEN {
            return None;
        }
        let msg = Message::decode(&self.buf[..MESSAGE_LEN]).expect("exactly MESSAGE_LEN bytes decode");
        self.buf.drain(..MESSAGE_LEN);
        Some(msg)
    }

    pub(crate) fn clear(&mut self) {
        self.buf.clear();
    }
}

/// netserver's response buffer as it sits in the memory of a little-endian host: header and
/// data words in host order. [`Self::emit`] converts the first words to network order in place
/// and returns the buffer's bytes, as `send_response_n` does; nothing is ever cleared, so the
/// fields a message leaves alone go out as the last message left them, converted once more.
#[derive(Clone, PartialEq, Eq)]
pub struct ResponseImage {
    mem: [u8; MESSAGE_LEN],
}

impl Default for ResponseImage {
    fn default() -> Self {
        Self { mem: [0; MESSAGE_LEN] }
    }
}

impl std::fmt::Debug for ResponseImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseImage").field("header", &hex_prefix(&self.mem[..8])).finish_non_exhaustive()
    }
}

impl ResponseImage {
    /// Sets the response type (header word 0).
    pub fn set_kind(&mut self, kind: i32) {
        self.mem[..4].copy_from_slice(&kind.to_le_bytes());
    }

    /// Sets the errno (header word 1).
    pub fn set_errno(&mut self, errno: i32) {
        self.mem[4..8].copy_from_slice(&errno.to_le_bytes());
    }

    /// Sets test-specific word `i` to an integer, in host order.
    pub fn set_word(&mut self, i: usize, v: u32) {
        if let Some(b) = self.mem.get_mut(8 + 4 * i..12 + 4 * i) {
            b.copy_from_slice(&v.to_le_bytes());
        }
    }

    /// Test-specific word `i` as the memory holds it now.
    pub fn word(&self, i: usize) -> u32 {
        self.mem.get(8 + 4 * i..12 + 4 * i).map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Copies raw bytes (a character field) to byte `offset` of the data, clipped.
    pub fn set_bytes(&mut self, offset: usize, bytes: &[u8]) {
        let start = (8 + offset).min(MESSAGE_LEN);
        let n = bytes.len().min(MESSAGE_LEN - start);
        self.mem[start..start + n].copy_from_slice(&bytes[..n]);
    }

    /// Converts the header and the first `converted` data words to network order in place
    /// (all of them for `None`, as `send_response()` does) and returns the bytes sent.
    pub fn emit(&mut self, converted: Option<usize>) -> [u8; MESSAGE_LEN] {
        let words = converted.map_or(MESSAGE_LEN / 4, |n| (2 + n).min(MESSAGE_LEN / 4));
        for w in self.mem[..4 * words].chunks_exact_mut(4) {
            w.reverse();
        }
        self.mem
    }
}

/// The six tests netchar speaks, by netperf's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TestKind {
    /// netperf sends over TCP, netserver receives.
    TcpStream,
    /// netserver sends over TCP, netperf receives.
    TcpMaerts,
    /// netperf sends UDP datagrams, netserver counts them.
    UdpStream,
    /// Request/response transactions on one TCP connection.
    TcpRr,
    /// Request/response transactions over UDP.
    UdpRr,
    /// One TCP connection per transaction: connect, request, response, close.
    TcpCrr,
}

impl TestKind {
    /// Every kind, in netperf's documentation order.
    pub const ALL: [Self; 6] =
        [Self::TcpStream, Self::TcpMaerts, Self::UdpStream, Self::TcpRr, Self::UdpRr, Self::TcpCrr];

    /// netperf's name (`-t`).
    pub fn name(self) -> &'static str {
        match self {
            Self::TcpStream => "TCP_STREAM",
            Self::TcpMaerts => "TCP_MAERTS",
            Self::UdpStream => "UDP_STREAM",
            Self::TcpRr => "TCP_RR",
            Self::UdpRr => "UDP_RR",
            Self::TcpCrr => "TCP_CRR",
        }
    }

    /// The kind netperf names so (case-insensitive, as netperf reads `-t`).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name().eq_ignore_ascii_case(name))
    }

    /// UDP data.
    pub fn is_udp(self) -> bool {
        matches!(self, Self::UdpStream | Self::UdpRr)
    }

    /// Request/response transactions (counted in the results' `trans_received`).
    pub fn is_rr(self) -> bool {
        matches!(self, Self::TcpRr | Self::UdpRr | Self::TcpCrr)
    }
}

/// How a test ends: its `test_length` word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestEnd {
    /// After this many seconds (`-l N`); 0 runs until netperf stops (netserver sets no timer).
    Seconds(u32),
    /// After this many bytes (streams) or transactions (request/response): `-l -N`, sent as −N.
    Units(u32),
}

impl TestEnd {
    /// The `test_length` word.
    pub fn to_word(self) -> i32 {
        match self {
            Self::Seconds(s) => s.min(i32::MAX as u32) as i32,
            Self::Units(n) => -(n.min(i32::MAX as u32) as i32),
        }
    }

    /// Reads a `test_length` word.
    pub fn from_word(w: i32) -> Self {
        if w >= 0 {
            Self::Seconds(w as u32)
        } else {
            Self::Units(w.unsigned_abs())
        }
    }
}

/// The data connection's address family, as netperf numbers it (its own numbers, since
/// AF_INET6 differs between systems).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// NF_INET, 4.
    V4,
    /// NF_INET6, 6.
    V6,
}

impl Family {
    /// netperf's number.
    pub fn code(self) -> u32 {
        match self {
            Self::V4 => 4,
            Self::V6 => 6,
        }
    }

    /// The family of netperf's number; NF_UNSPEC (0) is IPv4, as netserver's default.
    pub fn from_code(code: u32) -> Option<Self> {
        match code {
            0 | 4 => Some(Self::V4),
            6 => Some(Self::V6),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_656_bytes_of_big_endian_words() {
        let mut m = Message::new(code::DO_OMNI, -1);
        m.set_word(0, 65536);
        m.set_word(13, 1.5f32.to_bits());
        m.set_bytes(152, b"cubic\0");
        let b = m.encode();
        assert_eq!(b.len(), 656);
        assert_eq!(&b[..12], &[0, 0, 0, 0x61, 0xff, 0xff, 0xff, 0xff, 0, 1, 0, 0]);
        assert_eq!(&b[8 + 52..8 + 56], &1.5f32.to_be_bytes());
        assert_eq!(&b[160..166], b"cubic\0");
        assert_eq!(Message::decode(&b).unwrap(), m);
        let e = Message::decode(&b[..655]).unwrap_err();
        assert!(e.to_string().contains("656 bytes, not 655"), "{e}");
        assert!(Message::decode(&[]).is_err());
    }

    #[test]
    fn results_types_read_in_either_order() {
        let mut m = Message::new(0x6200_0000, 0);
        assert_eq!(m.kind_any_order(), code::OMNI_RESPONSE);
        m.kind = code::OMNI_RESPONSE;
        assert_eq!(m.kind_any_order(), code::OMNI_RESPONSE);
    }

    #[test]
    fn the_image_converts_in_place_and_keeps_what_it_held() {
        let mut img = ResponseImage::default();
        img.set_kind(98);
        img.set_word(0, 0x0002_0000);
        img.set_word(11, 43599);
        let first = img.emit(Some(18));
        assert_eq!(&first[..4], &[0, 0, 0, 98]);
        assert_eq!(&first[8 + 44..8 + 48], &43599u32.to_be_bytes());
        // A second message that sets word 0 only: word 11 goes out converted twice (host
        // order), as does the header.
        img.set_word(0, 7);
        let second = img.emit(Some(27));
        assert_eq!(&second[..4], &[98, 0, 0, 0]);
        assert_eq!(&second[8..12], &7u32.to_be_bytes());
        assert_eq!(&second[8 + 44..8 + 48], &43599u32.to_le_bytes());
    }

    #[test]
    fn names_and_lengths() {
        for k in TestKind::ALL {
            assert_eq!(TestKind::from_name(&k.name().to_lowercase()), Some(k));
        }
        assert_eq!(TestKind::from_name("TCP_CC"), None);
        assert_eq!(TestEnd::from_word(TestEnd::Units(1000).to_word()), TestEnd::Units(1000));
        assert_eq!(TestEnd::from_word(10), TestEnd::Seconds(10));
        assert_eq!(TestEnd::from_word(i32::MIN), TestEnd::Units(1 << 31));
    }
}
