//! The header at the start of every netchar UDP datagram (24 bytes, big-endian).
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 2 | magic `0x4E43` ("NC") |
//! | 2 | 1 | version, 1 |
//! | 3 | 1 | flags: bit 0 = setup (hello) datagram |
//! | 4 | 4 | stream id |
//! | 8 | 8 | sequence number, from 0, never wraps |
//! | 16 | 8 | send time, ns on the sender's monotonic clock |
//!
//! The rest of a data datagram is filler up to the payload size (`-l`).
//!
//! UDP setup is a return-routability check (as QUIC's address validation): the server sends
//! test traffic only to an address that proved it receives there.
//!
//! | datagram | direction | flags | after the header | length |
//! |---|---|---|---|---|
//! | setup | client → server | setup | cookie (16), zero padding | [`SETUP_LEN`] |
//! | challenge | server → client | challenge | token (16) | [`CHALLENGE_LEN`] |
//! | confirm | client → server | setup + confirm | cookie (16), token (16), tag (8), zero padding | [`SETUP_LEN`] |
//!
//! The server answers a setup with a challenge to the source address; only the confirm that
//! echoes that address's token admits the stream. The client pads its setup datagrams so
//! that a challenge is never larger than the datagram that caused it: a spoofed setup buys
//! an attacker no amplification. The tag binds the stream to an authenticated test
//! (crate::auth::data_tag; zero without authentication).

use crate::ProtocolError;

/// Bytes in the header; also the smallest payload a UDP test can use.
pub const HEADER_LEN: usize = 24;
/// Magic at offset 0.
pub const MAGIC: u16 = 0x4E43;
/// Header version.
pub const VERSION: u8 = 1;
/// Flag: a setup datagram carrying the cookie, not test data.
pub const FLAG_SETUP: u8 = 1;
/// Flag: the server's challenge to the address a setup datagram came from.
pub const FLAG_CHALLENGE: u8 = 2;
/// Flag (with [`FLAG_SETUP`]): the client's answer to a challenge, echoing its token.
pub const FLAG_CONFIRM: u8 = 4;
/// Bytes in a setup or confirm datagram; the server ignores shorter ones.
pub const SETUP_LEN: usize = 64;
/// Bytes in a challenge datagram: never more than the setup that caused it.
pub const CHALLENGE_LEN: usize = HEADER_LEN + 16;

/// What a receiver makes of one datagram ([`DatagramFormat::classify`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    /// Test data: its stream, sequence number and send time (ns since the sender's start).
    Data {
        /// Stream id.
        stream_id: u32,
        /// Sequence number.
        sequence: u64,
        /// Send time in ns.
        sent_ns: u64,
    },
    /// A control datagram of the protocol's setup still in flight: not data, not foreign.
    Control,
    /// Not this protocol's datagram at all.
    Foreign,
}

/// How a UDP test's datagrams carry their stream, sequence number and send time. netchar's
/// own header ([`NativeFormat`]) is the first; each peer protocol (iperf3, iperf2) brings its
/// own, and the UDP workers are generic over it (monomorphised: no dynamic call per datagram).
pub trait DatagramFormat {
    /// Whether the header names its stream; when not (iperf3), every datagram on a stream's
    /// socket is that stream's.
    const STREAM_IDS: bool = true;
    /// Bytes of header at the start of every datagram: the smallest payload.
    fn header_len(&self) -> usize;
    /// Writes the whole header into the start of `buf` (at least [`Self::header_len`] long).
    fn emit(&self, buf: &mut [u8], stream_id: u32, sequence: u64, sent_ns: u64);
    /// Rewrites the fields that change per datagram in an emitted header: the hot path.
    fn stamp(&self, buf: &mut [u8], sequence: u64, sent_ns: u64);
    /// What a received datagram is.
    fn classify(&self, buf: &[u8]) -> Received;
    /// Formats whose streams end with an exchange on the data socket (iperf2: the client's
    /// FIN, answered by the server's report) rewrite `buf`, a data datagram as sent, into the
    /// end datagram after `sent` datagrams, try `attempt` (from 0), at `sent_ns`, and say
    /// true. The default, no exchange, says false and leaves `buf` alone; a format whose end
    /// goes out once, answered by nobody, says false from try 1 on.
    fn end_datagram(&self, _buf: &mut [u8], _sent: u64, _attempt: u32, _sent_ns: u64) -> bool {
        false
    }
    /// True when `reply`, read on the data socket after an end datagram, ends the exchange.
    fn is_end_reply(&self, _reply: &[u8]) -> bool {
        false
    }
    /// For a receiver: when `buf` is the sender's end datagram (iperf2's FIN from a server
    /// sending `-R`), the number of data datagrams the sender sent before it. The default, a
    /// format whose sender tells its total otherwise, says None.
    fn end_of_stream(&self, _buf: &[u8]) -> Option<u64> {
        None
    }
    /// For a receiver: the datagram that asks the peer to start sending (iperf2's UDP `-R`
    /// request), re-sent until the first datagram arrives. The default: none.
    fn start_request(&self) -> Option<&[u8]> {
        None
    }
    /// Whether a data datagram's `sent_ns` is the sender's send time, so that a receiver
    /// measures jitter by it. A format whose datagrams carry no time says false.
    const SEND_TIMES: bool = true;
    /// Empty datagrams a sender sends after its last one to mark its stream's end, answered by
    /// nobody. The default: none.
    fn end_marks(&self) -> u32 {
        0
    }
}

/// A peer whose datagrams carry nothing of netchar's: no stream, sequence number or time.
/// A receiver numbers data datagrams in arrival order, so it counts datagrams and bytes but
/// can tell no loss, reordering or jitter from them; an empty datagram ends the stream (its
/// total is the count so far), and a sender marks its end with `end_marks` empty datagrams.
/// Its numbering is per worker: build one per stream.
#[derive(Debug, Default)]
pub struct UnsequencedFormat {
    /// Empty datagrams a sender sends at its end.
    pub end_marks: u32,
    arrived: std::cell::Cell<u64>,
}

impl UnsequencedFormat {
    /// A format whose senders end with `end_marks` empty datagrams.
    pub fn new(end_marks: u32) -> Self {
        Self { end_marks, arrived: std::cell::Cell::new(0) }
    }
}

impl DatagramFormat for UnsequencedFormat {
    const STREAM_IDS: bool = false;
    const SEND_TIMES: bool = false;

    fn header_len(&self) -> usize {
        0
    }

    fn emit(&self, _buf: &mut [u8], _stream_id: u32, _sequence: u64, _sent_ns: u64) {}

    fn stamp(&self, _buf: &mut [u8], _sequence: u64, _sent_ns: u64) {}

    fn classify(&self, _buf: &[u8]) -> Received {
        let sequence = self.arrived.get();
        self.arrived.set(sequence + 1);
        Received::Data { stream_id: 0, sequence, sent_ns: 0 }
    }

    fn end_of_stream(&self, buf: &[u8]) -> Option<u64> {
        buf.is_empty().then(|| self.arrived.get())
    }

    fn end_marks(&self) -> u32 {
        self.end_marks
    }
}

/// netchar's own 24-byte header (this module's table).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NativeFormat;

impl DatagramFormat for NativeFormat {
    fn header_len(&self) -> usize {
        HEADER_LEN
    }

    fn emit(&self, buf: &mut [u8], stream_id: u32, sequence: u64, sent_ns: u64) {
        DatagramHeader { flags: 0, stream_id, sequence, sent_ns }.emit(buf);
    }

    fn stamp(&self, buf: &mut [u8], sequence: u64, sent_ns: u64) {
        DatagramHeader::stamp(buf, sequence, sent_ns);
    }

    #[inline]
    fn classify(&self, buf: &[u8]) -> Received {
        match DatagramHeader::read(buf) {
            None => Received::Foreign,
            // Setup, challenge or confirm datagrams still in flight when the test started.
            Some(h) if h.flags != 0 => Received::Control,
            Some(h) => Received::Data { stream_id: h.stream_id, sequence: h.sequence, sent_ns: h.sent_ns },
        }
    }
}

// No amplification: the answer to a setup is never larger than the setup.
const _: () = assert!(CHALLENGE_LEN <= SETUP_LEN);

/// A parsed setup or confirm datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setup {
    /// The stream it sets up.
    pub stream_id: u32,
    /// The test's cookie.
    pub cookie: [u8; 16],
    /// For a confirm: the token of the challenge it answers, and the stream's tag.
    pub confirm: Option<([u8; 16], [u8; 8])>,
}

/// A parsed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatagramHeader {
    /// Flags.
    pub flags: u8,
    /// Stream id.
    pub stream_id: u32,
    /// Sequence number.
    pub sequence: u64,
    /// Send time in ns.
    pub sent_ns: u64,
}

impl DatagramHeader {
    /// Writes the header into the first [`HEADER_LEN`] bytes of `buf` (which must be at least
    /// that long; checked by the caller's payload minimum).
    pub fn emit(&self, buf: &mut [u8]) {
        buf[0..2].copy_from_slice(&MAGIC.to_be_bytes());
        buf[2] = VERSION;
        buf[3] = self.flags;
        buf[4..8].copy_from_slice(&self.stream_id.to_be_bytes());
        buf[8..16].copy_from_slice(&self.sequence.to_be_bytes());
        buf[16..24].copy_from_slice(&self.sent_ns.to_be_bytes());
    }

    /// Rewrites only the sequence number and send time of an emitted header: the two fields
    /// that change per datagram on the hot path.
    pub fn stamp(buf: &mut [u8], sequence: u64, sent_ns: u64) {
        buf[8..16].copy_from_slice(&sequence.to_be_bytes());
        buf[16..24].copy_from_slice(&sent_ns.to_be_bytes());
    }

    /// Parses a datagram's header; foreign or truncated datagrams are errors, never panics.
    pub fn parse(buf: &[u8]) -> Result<Self, ProtocolError> {
        if buf.len() < HEADER_LEN {
            return Err(ProtocolError::Malformed(format!(
                "datagram of {} bytes is shorter than the header",
                buf.len()
            )));
        }
        Self::read(buf).ok_or_else(|| ProtocolError::Malformed("datagram without the netchar header".into()))
    }

    /// [`Self::parse`] without the reason: the receiver's per-datagram path, which only counts
    /// what is not a netchar datagram and must not build a message for it.
    #[inline]
    pub fn read(buf: &[u8]) -> Option<Self> {
        let h: &[u8; HEADER_LEN] = buf.get(..HEADER_LEN)?.try_into().ok()?;
        if u16::from_be_bytes([h[0], h[1]]) != MAGIC || h[2] != VERSION {
            return None;
        }
        let u32_at = |i: usize| u32::from_be_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
        let u64_at = |i: usize| u64::from_be_bytes(h[i..i + 8].try_into().expect("8 bytes of the header"));
        Some(Self { flags: h[3], stream_id: u32_at(4), sequence: u64_at(8), sent_ns: u64_at(16) })
    }

    /// A setup datagram: header, cookie, padding.
    pub fn setup(stream_id: u32, cookie: &[u8; 16]) -> [u8; SETUP_LEN] {
        let mut b = [0u8; SETUP_LEN];
        Self { flags: FLAG_SETUP, stream_id, sequence: 0, sent_ns: 0 }.emit(&mut b);
        b[HEADER_LEN..HEADER_LEN + 16].copy_from_slice(cookie);
        b
    }

    /// A confirm datagram: header, cookie, the challenge's token, the stream's tag, padding.
    pub fn confirm(stream_id: u32, cookie: &[u8; 16], token: &[u8; 16], tag: &[u8; 8]) -> [u8; SETUP_LEN] {
        let mut b = [0u8; SETUP_LEN];
        Self { flags: FLAG_SETUP | FLAG_CONFIRM, stream_id, sequence: 0, sent_ns: 0 }.emit(&mut b);
        b[HEADER_LEN..HEADER_LEN + 16].copy_from_slice(cookie);
        b[HEADER_LEN + 16..HEADER_LEN + 32].copy_from_slice(token);
        b[HEADER_LEN + 32..HEADER_LEN + 40].copy_from_slice(tag);
        b
    }

    /// The server's challenge for `stream_id`.
    pub fn challenge(stream_id: u32, token: &[u8; 16]) -> [u8; CHALLENGE_LEN] {
        let mut b = [0u8; CHALLENGE_LEN];
        Self { flags: FLAG_CHALLENGE, stream_id, sequence: 0, sent_ns: 0 }.emit(&mut b);
        b[HEADER_LEN..].copy_from_slice(token);
        b
    }

    /// Parses a setup or confirm datagram; anything else (data, a challenge, a setup shorter
    /// than [`SETUP_LEN`]) is `None`.
    pub fn parse_setup(buf: &[u8]) -> Option<Setup> {
        let h = Self::parse(buf).ok()?;
        if h.flags & FLAG_SETUP == 0 || buf.len() < SETUP_LEN {
            return None;
        }
        let cookie = buf[HEADER_LEN..HEADER_LEN + 16].try_into().ok()?;
        let confirm = if h.flags & FLAG_CONFIRM != 0 {
            let token = buf[HEADER_LEN + 16..HEADER_LEN + 32].try_into().ok()?;
            let tag = buf[HEADER_LEN + 32..HEADER_LEN + 40].try_into().ok()?;
            Some((token, tag))
        } else {
            None
        };
        Some(Setup { stream_id: h.stream_id, cookie, confirm })
    }

    /// The stream id and token of a challenge datagram.
    pub fn parse_challenge(buf: &[u8]) -> Option<(u32, [u8; 16])> {
        let h = Self::parse(buf).ok()?;
        if h.flags & FLAG_CHALLENGE == 0 || buf.len() < CHALLENGE_LEN {
            return None;
        }
        Some((h.stream_id, buf[HEADER_LEN..HEADER_LEN + 16].try_into().ok()?))
    }

    /// True for a challenge exactly as the server emits it (its sequence and time fields are
    /// zero). A late challenge can reach a client's data socket after the test started: the
    /// receivers skip it instead of taking it for data.
    pub fn is_challenge(buf: &[u8]) -> bool {
        buf.len() == CHALLENGE_LEN
            && Self::parse(buf).is_ok_and(|h| h.flags == FLAG_CHALLENGE && h.sequence == 0 && h.sent_ns == 0)
    }

    /// The cookie of a setup datagram.
    pub fn setup_cookie(buf: &[u8]) -> Option<[u8; 16]> {
        Self::parse_setup(buf).map(|s| s.cookie)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn golden_bytes() {
        let mut b = [0u8; 24];
        DatagramHeader { flags: 0, stream_id: 2, sequence: 0x0102030405060708, sent_ns: 9 }.emit(&mut b);
        assert_eq!(b, [0x4E, 0x43, 1, 0, 0, 0, 0, 2, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 0, 0, 0, 9]);
        DatagramHeader::stamp(&mut b, 1, 2);
        assert_eq!(DatagramHeader::parse(&b).unwrap().sequence, 1);
    }

    #[test]
    fn setup_datagrams_carry_the_cookie() {
        let b = DatagramHeader::setup(3, &[5; 16]);
        assert_eq!(DatagramHeader::setup_cookie(&b), Some([5; 16]));
        let mut data = [0u8; 40];
        DatagramHeader { flags: 0, stream_id: 3, sequence: 1, sent_ns: 1 }.emit(&mut data);
        assert_eq!(DatagramHeader::setup_cookie(&data), None);
    }

    #[test]
    fn the_native_format_classifies_data_control_and_foreign() {
        let f = NativeFormat;
        let mut b = [0u8; 40];
        f.emit(&mut b, 3, 7, 9);
        assert_eq!(f.classify(&b), Received::Data { stream_id: 3, sequence: 7, sent_ns: 9 });
        f.stamp(&mut b, 8, 10);
        assert_eq!(f.classify(&b), Received::Data { stream_id: 3, sequence: 8, sent_ns: 10 });
        assert_eq!(f.classify(&DatagramHeader::challenge(3, &[1; 16])), Received::Control);
        assert_eq!(f.classify(&DatagramHeader::setup(3, &[1; 16])), Received::Control);
        assert_eq!(f.classify(b"hello"), Received::Foreign);
        assert_eq!(f.header_len(), HEADER_LEN);
    }

    #[test]
    fn challenges_are_never_larger_than_the_setup_that_causes_them() {
        let setup = DatagramHeader::setup(3, &[5; 16]);
        // A setup cut short (an attacker saving bytes) is ignored, so it earns no challenge.
        assert_eq!(DatagramHeader::parse_setup(&setup[..SETUP_LEN - 1]), None);
        assert_eq!(DatagramHeader::parse_setup(&setup), Some(Setup { stream_id: 3, cookie: [5; 16], confirm: None }));
    }

    #[test]
    fn confirms_echo_the_token_and_carry_the_tag() {
        let c = DatagramHeader::confirm(2, &[1; 16], &[7; 16], &[8; 8]);
        assert_eq!(
            DatagramHeader::parse_setup(&c),
            Some(Setup { stream_id: 2, cookie: [1; 16], confirm: Some(([7; 16], [8; 8])) })
        );
        let ch = DatagramHeader::challenge(2, &[7; 16]);
        assert_eq!(DatagramHeader::parse_challenge(&ch), Some((2, [7; 16])));
        assert_eq!(DatagramHeader::parse_challenge(&c), None);
        assert_eq!(DatagramHeader::parse_setup(&ch), None);
        assert!(DatagramHeader::is_challenge(&ch));
        assert!(!DatagramHeader::is_challenge(&c));
        // An rr response of the same length (sequence key, then filler) is not a challenge.
        let mut response = [b'r'; CHALLENGE_LEN];
        response[..8].copy_from_slice(&7u64.to_le_bytes());
        assert!(!DatagramHeader::is_challenge(&response));
    }

    proptest! {
        #[test]
        fn parsing_any_bytes_never_panics(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = DatagramHeader::parse(&b);
            let _ = DatagramHeader::setup_cookie(&b);
            let _ = DatagramHeader::parse_setup(&b);
            let _ = DatagramHeader::parse_challenge(&b);
        }

        #[test]
        fn round_trip(flags in any::<u8>(), id in any::<u32>(), seq in any::<u64>(), ts in any::<u64>()) {
            let h = DatagramHeader { flags, stream_id: id, sequence: seq, sent_ns: ts };
            let mut b = [0u8; HEADER_LEN];
            h.emit(&mut b);
            prop_assert_eq!(DatagramHeader::parse(&b).unwrap(), h);
        }
    }

    #[test]
    fn unsequenced_datagrams_are_numbered_by_arrival_and_an_empty_one_ends_the_stream() {
        let f = UnsequencedFormat::new(3);
        assert_eq!(f.classify(b"anything"), Received::Data { stream_id: 0, sequence: 0, sent_ns: 0 });
        assert_eq!(f.classify(&[]), Received::Data { stream_id: 0, sequence: 1, sent_ns: 0 });
        assert_eq!(f.end_of_stream(b"x"), None);
        assert_eq!(f.end_of_stream(&[]), Some(2));
        assert_eq!((f.end_marks(), f.header_len()), (3, 0));
    }
}
