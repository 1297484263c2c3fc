//! irtt (the isochronous round-trip tester, protocol version 1), sans-IO: its packets as read
//! from loopback captures of Debian's irtt 0.9 and its documented flags.
//!
//! Every packet starts with a 3-byte magic and a flags byte; a packet with [`FLAG_HMAC`] has a
//! 16-byte HMAC next. Then:
//!
//! | packet | flags | after the header | length |
//! |---|---|---|---|
//! | open request | open | parameters | 4 + parameters |
//! | open reply | open, reply | token (8), the parameters the server accepts | 12 + parameters |
//! | data request | 0 | token (8), sequence number (u32 LE), room for the reply | the client's `-l` |
//! | data reply | reply | token, sequence number, stats, timestamps, fill | the request's length |
//! | close | close | token | 12 |
//!
//! A parameter is a tag byte and a zigzag varint (the server fill, tag 9, a varint length and
//! its bytes): 1 protocol version, 2 duration (ns), 3 interval (ns), 4 length, 5 received stats
//! (1 count, 2 window, 3 both), 6 timestamps (1 send, 2 receive, 3 both, 4 midpoint), 7 clocks
//! (1 wall, 2 monotonic, 3 both), 8 DSCP. A zero parameter is left out.
//!
//! A data reply carries, in this order and only as the parameters ask: the count of requests
//! the server received (u32), the window of the last 64 (bit 0: this one, bit i: sequence
//! number − i), the receive time, the send time (each wall ns since the epoch, then
//! monotonic ns, i64 LE; a midpoint stamp is one of them). The client sizes its requests so
//! that the reply fits: a server answers with exactly the request's length and never more.

use std::fmt;

/// The port irtt servers listen on.
pub const DEFAULT_PORT: u16 = 2112;
/// The protocol version this codec speaks.
pub const PROTOCOL_VERSION: i64 = 1;
/// The first three bytes of every packet.
pub const MAGIC: [u8; 3] = [0x14, 0xa7, 0x5b];
/// Flag: an open request (or, with [`FLAG_REPLY`], its answer).
pub const FLAG_OPEN: u8 = 1;
/// Flag: the server's answer.
pub const FLAG_REPLY: u8 = 2;
/// Flag: the client closes the connection.
pub const FLAG_CLOSE: u8 = 4;
/// Flag: a 16-byte HMAC follows the flags byte.
pub const FLAG_HMAC: u8 = 8;
/// Bytes of the magic and flags.
pub const HEADER_LEN: usize = 4;
/// Bytes of a connection token.
pub const TOKEN_LEN: usize = 8;
/// Bytes of an HMAC.
pub const HMAC_LEN: usize = 16;
/// Bytes of a data packet's fixed part: header, token, sequence number.
pub const DATA_FIXED_LEN: usize = HEADER_LEN + TOKEN_LEN + 4;
/// The longest UDP payload.
pub const MAX_PACKET: usize = 65_507;

/// Why bytes are not a packet this codec takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IrttError {
    /// Too short, or not irtt's magic.
    NotIrtt,
    /// Flags this end does not take here (a reply to a server, an unknown bit).
    Flags(u8),
    /// Signed with an HMAC, which this end has no key for.
    Hmac,
    /// A parameter that does not parse or is out of range.
    Param(String),
}

impl fmt::Display for IrttError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotIrtt => f.write_str("not an irtt packet"),
            Self::Flags(x) => write!(f, "irtt flags {x:#04x} not expected here"),
            Self::Hmac => f.write_str("an HMAC-signed irtt packet, and no key to check it"),
            Self::Param(why) => write!(f, "irtt parameters: {why}"),
        }
    }
}

impl std::error::Error for IrttError {}

/// What the server reports of the requests it received, per reply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReceivedStats {
    /// The count of requests received.
    pub count: bool,
    /// The window of the last 64.
    pub window: bool,
}

/// Which timestamps a reply carries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StampAt {
    /// None.
    #[default]
    None,
    /// At the server's send.
    Send,
    /// At the server's receive.
    Receive,
    /// Both.
    Both,
    /// One, midway between receive and send.
    Midpoint,
}

/// The test's parameters, as an open request asks for them and its reply grants them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Params {
    /// The protocol version (1).
    pub protocol_version: i64,
    /// How long the client sends, ns.
    pub duration_ns: i64,
    /// The interval between requests, ns.
    pub interval_ns: i64,
    /// The client's `-l` (0: as short as the reply allows).
    pub length: i64,
    /// The server's stats per reply.
    pub stats: ReceivedStats,
    /// The reply's timestamps.
    pub stamp_at: StampAt,
    /// Wall clock stamps.
    pub wall: bool,
    /// Monotonic clock stamps.
    pub monotonic: bool,
    /// The DSCP the client's packets carry (the server may set it on its replies).
    pub dscp: i64,
    /// The fill the client asks the server to pad replies with (`--sfill`), as text.
    pub server_fill: Option<String>,
}

const P_VERSION: u8 = 1;
const P_DURATION: u8 = 2;
const P_INTERVAL: u8 = 3;
const P_LENGTH: u8 = 4;
const P_STATS: u8 = 5;
const P_STAMP_AT: u8 = 6;
const P_CLOCK: u8 = 7;
const P_DSCP: u8 = 8;
const P_SERVER_FILL: u8 = 9;

fn put_varint(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

fn get_varint(b: &[u8], at: &mut usize) -> Result<i64, IrttError> {
    let mut z = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*at).ok_or_else(|| IrttError::Param("a varint runs past the packet".into()))?;
        *at += 1;
        z |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(((z >> 1) as i64) ^ -((z & 1) as i64));
        }
    }
    Err(IrttError::Param("a varint longer than 64 bits".into()))
}

impl Params {
    /// The parameters' bytes (zero ones left out, as irtt does).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let stats = i64::from(self.stats.count) | i64::from(self.stats.window) << 1;
        let stamp = match self.stamp_at {
            StampAt::None => 0,
            StampAt::Send => 1,
            StampAt::Receive => 2,
            StampAt::Both => 3,
            StampAt::Midpoint => 4,
        };
        let clock = i64::from(self.wall) | i64::from(self.monotonic) << 1;
        for (tag, v) in [
            (P_VERSION, self.protocol_version),
            (P_DURATION, self.duration_ns),
            (P_INTERVAL, self.interval_ns),
            (P_LENGTH, self.length),
            (P_STATS, stats),
            (P_STAMP_AT, stamp),
            (P_CLOCK, clock),
            (P_DSCP, self.dscp),
        ] {
            if v != 0 {
                out.push(tag);
                put_varint(out, v);
            }
        }
        if let Some(fill) = self.server_fill.as_deref().filter(|f| !f.is_empty()) {
            out.push(P_SERVER_FILL);
            put_varint(out, fill.len() as i64);
            out.extend_from_slice(fill.as_bytes());
        }
    }

    /// Parses the parameters of an open request or reply.
    pub fn decode(b: &[u8]) -> Result<Self, IrttError> {
        let mut p = Self::default();
        let mut at = 0;
        let bad = |what: &str, v: i64| Err(IrttError::Param(format!("{what} {v}")));
        while at < b.len() {
            let tag = b[at];
            at += 1;
            let v = get_varint(b, &mut at)?;
            match tag {
                P_VERSION => p.protocol_version = v,
                P_DURATION if v >= 0 => p.duration_ns = v,
                P_INTERVAL if v >= 0 => p.interval_ns = v,
                P_LENGTH if (0..=MAX_PACKET as i64).contains(&v) => p.length = v,
                P_STATS if (0..=3).contains(&v) => p.stats = ReceivedStats { count: v & 1 != 0, window: v & 2 != 0 },
                P_STAMP_AT => {
                    p.stamp_at = match v {
                        0 => StampAt::None,
                        1 => StampAt::Send,
                        2 => StampAt::Receive,
                        3 => StampAt::Both,
                        4 => StampAt::Midpoint,
                        _ => return bad("timestamp mode", v),
                    }
                }
                P_CLOCK if (0..=3).contains(&v) => (p.wall, p.monotonic) = (v & 1 != 0, v & 2 != 0),
                P_DSCP if (0..64).contains(&v) => p.dscp = v,
                P_SERVER_FILL if v >= 0 && (v as usize) <= b.len() - at => {
                    let text = &b[at..at + v as usize];
                    at += v as usize;
                    p.server_fill = Some(String::from_utf8_lossy(text).into_owned());
                }
                P_DURATION | P_INTERVAL | P_LENGTH | P_STATS | P_CLOCK | P_DSCP | P_SERVER_FILL => {
                    return bad(&format!("parameter {tag} out of range:"), v)
                }
                _ => return bad("unknown parameter", i64::from(tag)),
            }
        }
        Ok(p)
    }

    /// Bytes of the timestamps a reply carries.
    fn stamp_len(&self) -> usize {
        let clocks = usize::from(self.wall) + usize::from(self.monotonic);
        let stamps = match self.stamp_at {
            StampAt::None => 0,
            StampAt::Send | StampAt::Receive | StampAt::Midpoint => 1,
            StampAt::Both => 2,
        };
        8 * clocks * stamps
    }

    /// The shortest data packet with these parameters: a reply's fixed part and fields (a
    /// request is at least as long, and its reply as long as it).
    pub fn min_data_len(&self, hmac: bool) -> usize {
        DATA_FIXED_LEN
            + if hmac { HMAC_LEN } else { 0 }
            + if self.stats.count { 4 } else { 0 }
            + if self.stats.window { 8 } else { 0 }
            + self.stamp_len()
    }
}

/// A request a server reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Open a connection with these parameters.
    Open(Params),
    /// A data request of the connection `token`.
    Data {
        /// The connection.
        token: [u8; 8],
        /// Its sequence number.
        sequence: u32,
    },
    /// Close the connection `token`.
    Close {
        /// The connection.
        token: [u8; 8],
    },
}

fn token_at(b: &[u8], at: usize) -> Option<[u8; 8]> {
    b.get(at..at + TOKEN_LEN).map(|t| t.try_into().expect("8 bytes"))
}

/// Reads a request (a server's input). HMAC-signed packets are refused: this end has no key.
pub fn parse_request(b: &[u8]) -> Result<Request, IrttError> {
    if b.len() < HEADER_LEN || b[..3] != MAGIC {
        return Err(IrttError::NotIrtt);
    }
    let flags = b[3];
    if flags & FLAG_HMAC != 0 {
        return Err(IrttError::Hmac);
    }
    match flags {
        FLAG_OPEN => Ok(Request::Open(Params::decode(&b[HEADER_LEN..])?)),
        0 if b.len() >= DATA_FIXED_LEN => Ok(Request::Data {
            token: token_at(b, HEADER_LEN).ok_or(IrttError::NotIrtt)?,
            sequence: u32::from_le_bytes(b[12..16].try_into().expect("4 bytes")),
        }),
        FLAG_CLOSE if b.len() >= HEADER_LEN + TOKEN_LEN => {
            Ok(Request::Close { token: token_at(b, HEADER_LEN).ok_or(IrttError::NotIrtt)? })
        }
        0 | FLAG_CLOSE => Err(IrttError::NotIrtt),
        other => Err(IrttError::Flags(other)),
    }
}

/// The open reply granting `params` for the connection `token`.
pub fn open_reply(token: [u8; 8], params: &Params) -> Vec<u8> {
    let mut out = Vec::with_capacity(40);
    out.extend_from_slice(&MAGIC);
    out.push(FLAG_OPEN | FLAG_REPLY);
    out.extend_from_slice(&token);
    params.encode(&mut out);
    out
}

/// A server's clocks at one moment: wall ns since the epoch, monotonic ns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stamp {
    /// Wall clock, ns since the Unix epoch.
    pub wall: i64,
    /// Monotonic clock, ns since some start.
    pub mono: i64,
}

impl Stamp {
    fn midpoint(self, other: Self) -> Self {
        Self { wall: self.wall / 2 + other.wall / 2, mono: self.mono / 2 + other.mono / 2 }
    }
}

/// What a data reply says beyond its sequence number.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplyFields {
    /// Requests the server received so far.
    pub received: u32,
    /// Bit i: sequence number − i was received.
    pub window: u64,
    /// When the request arrived.
    pub received_at: Stamp,
    /// When the reply left.
    pub sent_at: Stamp,
}

/// Turns the data request in `packet` (left as read, its length the reply's) into its reply
/// per `params`, the rest filled with zeros. None when the request is too short for the reply
/// the parameters ask for (the request is then dropped, as irtt's server drops it): a reply is
/// never longer than its request.
pub fn write_data_reply(packet: &mut [u8], params: &Params, f: &ReplyFields) -> Option<()> {
    if packet.len() < params.min_data_len(false) {
        return None;
    }
    packet[3] = FLAG_REPLY;
    let mut at = DATA_FIXED_LEN;
    let mut put = |bytes: &[u8]| {
        packet[at..at + bytes.len()].copy_from_slice(bytes);
        at += bytes.len();
    };
    if params.stats.count {
        put(&f.received.to_le_bytes());
    }
    if params.stats.window {
        put(&f.window.to_le_bytes());
    }
    let stamps: &[Stamp] = match params.stamp_at {
        StampAt::None => &[],
        StampAt::Send => &[f.sent_at],
        StampAt::Receive => &[f.received_at],
        StampAt::Both => &[f.received_at, f.sent_at],
        StampAt::Midpoint => &[f.received_at.midpoint(f.sent_at)],
    };
    for s in stamps {
        if params.wall {
            put(&s.wall.to_le_bytes());
        }
        if params.monotonic {
            put(&s.mono.to_le_bytes());
        }
    }
    packet[at..].fill(0);
    Some(())
}

/// Sets the send stamp of a reply written by [`write_data_reply`] (called just before the
/// send, so that the stamp is as late as it can be); a reply whose parameters carry no send
/// stamp of its own is left alone.
pub fn restamp_send(packet: &mut [u8], params: &Params, sent_at: Stamp) {
    if !matches!(params.stamp_at, StampAt::Send | StampAt::Both) {
        return;
    }
    let mut at = DATA_FIXED_LEN + if params.stats.count { 4 } else { 0 } + if params.stats.window { 8 } else { 0 };
    if params.stamp_at == StampAt::Both {
        at += params.stamp_len() / 2;
    }
    if params.wall {
        packet[at..at + 8].copy_from_slice(&sent_at.wall.to_le_bytes());
        at += 8;
    }
    if params.monotonic {
        packet[at..at + 8].copy_from_slice(&sent_at.mono.to_le_bytes());
    }
}

/// The client's side, for tests and tools: an open request.
pub fn open_request(params: &Params) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.push(FLAG_OPEN);
    params.encode(&mut out);
    out
}

/// A data request of `len` bytes (at least [`Params::min_data_len`]).
pub fn data_request(token: [u8; 8], sequence: u32, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len.max(DATA_FIXED_LEN)];
    out[..3].copy_from_slice(&MAGIC);
    out[4..12].copy_from_slice(&token);
    out[12..16].copy_from_slice(&sequence.to_le_bytes());
    out
}

/// A close of the connection `token`.
pub fn close_request(token: [u8; 8]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.push(FLAG_CLOSE);
    out.extend_from_slice(&token);
    out
}

/// A reply a client reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// The server's answer to an open: the token and the parameters granted.
    Open([u8; 8], Params),
    /// A data reply.
    Data {
        /// Its sequence number.
        sequence: u32,
        /// Its fields, as the parameters ask (the others zero).
        fields: ReplyFields,
    },
}

/// Fixed-size fields in order (the length checked before).
struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let v = self.b[self.at..self.at + N].try_into().expect("length checked");
        self.at += N;
        v
    }
}

/// Reads a server's reply for a connection with `params`.
pub fn parse_reply(b: &[u8], params: &Params) -> Result<Reply, IrttError> {
    if b.len() < HEADER_LEN + TOKEN_LEN || b[..3] != MAGIC {
        return Err(IrttError::NotIrtt);
    }
    match b[3] {
        f if f == FLAG_OPEN | FLAG_REPLY => {
            Ok(Reply::Open(token_at(b, HEADER_LEN).expect("length checked"), Params::decode(&b[12..])?))
        }
        FLAG_REPLY if b.len() >= params.min_data_len(false) => {
            let sequence = u32::from_le_bytes(b[12..16].try_into().expect("4 bytes"));
            let mut r = Reader { b, at: DATA_FIXED_LEN };
            let mut fields = ReplyFields::default();
            if params.stats.count {
                fields.received = u32::from_le_bytes(r.take());
            }
            if params.stats.window {
                fields.window = u64::from_le_bytes(r.take());
            }
            let stamp = |r: &mut Reader<'_>| Stamp {
                wall: if params.wall { i64::from_le_bytes(r.take()) } else { 0 },
                mono: if params.monotonic { i64::from_le_bytes(r.take()) } else { 0 },
            };
            match params.stamp_at {
                StampAt::None => {}
                StampAt::Send => fields.sent_at = stamp(&mut r),
                StampAt::Receive | StampAt::Midpoint => fields.received_at = stamp(&mut r),
                StampAt::Both => {
                    fields.received_at = stamp(&mut r);
                    fields.sent_at = stamp(&mut r);
                }
            }
            Ok(Reply::Data { sequence, fields })
        }
        other => Err(IrttError::Flags(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `irtt client -i 200ms -d 1s -l 60` (0.9): its open request, captured on loopback.
    const OPEN_60: [u8; 26] = [
        0x14, 0xa7, 0x5b, 0x01, 0x01, 0x02, 0x02, 0x80, 0xa8, 0xd6, 0xb9, 0x07, 0x03, 0x80, 0x88, 0xde, 0xbe, 0x01,
        0x04, 0x78, 0x05, 0x06, 0x06, 0x06, 0x07, 0x06,
    ];
    const TOKEN: [u8; 8] = [0x1e, 0xdb, 0x18, 0x16, 0x0d, 0x12, 0x28, 0x7a];

    fn default_params() -> Params {
        Params {
            protocol_version: 1,
            duration_ns: 1_000_000_000,
            interval_ns: 200_000_000,
            length: 60,
            stats: ReceivedStats { count: true, window: true },
            stamp_at: StampAt::Both,
            wall: true,
            monotonic: true,
            ..Params::default()
        }
    }

    #[test]
    fn a_captured_open_request_parses_and_its_reply_is_the_captured_one() {
        let Request::Open(p) = parse_request(&OPEN_60).unwrap() else { panic!("not an open") };
        assert_eq!(p, default_params());
        assert_eq!(open_request(&p), OPEN_60);
        // The server's answer, as captured: the token, then the same parameters.
        let reply = open_reply(TOKEN, &p);
        assert_eq!(reply.len(), 34);
        assert_eq!(&reply[..12], &[0x14, 0xa7, 0x5b, 0x03, 0x1e, 0xdb, 0x18, 0x16, 0x0d, 0x12, 0x28, 0x7a]);
        assert_eq!(&reply[12..], &OPEN_60[4..]);
        assert_eq!(parse_reply(&reply, &p).unwrap(), Reply::Open(TOKEN, p));
    }

    #[test]
    fn a_data_reply_fills_the_request_exactly_as_captured() {
        let p = default_params();
        assert_eq!(p.min_data_len(false), 60);
        let mut packet = data_request(TOKEN, 1, 60);
        assert_eq!(parse_request(&packet).unwrap(), Request::Data { token: TOKEN, sequence: 1 });
        let f = ReplyFields {
            received: 2,
            window: 3,
            received_at: Stamp { wall: 0x18ec_66bb_cd4e_dd37, mono: 0x2a33_999e },
            sent_at: Stamp { wall: 0x18ec_66bb_cd4f_0f82, mono: 0x2a33_cb66 },
        };
        write_data_reply(&mut packet, &p, &f).unwrap();
        let captured: [u8; 48] = [
            0x1e, 0xdb, 0x18, 0x16, 0x0d, 0x12, 0x28, 0x7a, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x03, 0x00,
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x37, 0xdd, 0x4e, 0xcd, 0xbb, 0x66, 0xec, 0x18, 0x9e, 0x99, 0x33, 0x2a,
            0x00, 0x00, 0x00, 0x00, 0x82, 0x0f, 0x4f, 0xcd, 0xbb, 0x66, 0xec, 0x18,
        ];
        assert_eq!(&packet[..4], &[0x14, 0xa7, 0x5b, 0x02]);
        assert_eq!(&packet[4..52], &captured);
        assert_eq!(parse_reply(&packet, &p).unwrap(), Reply::Data { sequence: 1, fields: f });
        let later = Stamp { wall: 7, mono: 9 };
        restamp_send(&mut packet, &p, later);
        let Reply::Data { fields, .. } = parse_reply(&packet, &p).unwrap() else { panic!() };
        assert_eq!((fields.sent_at, fields.received_at), (later, f.received_at));
    }

    #[test]
    fn a_request_too_short_for_its_reply_gets_none() {
        let p = default_params();
        let mut short = data_request(TOKEN, 0, 59);
        assert_eq!(write_data_reply(&mut short, &p, &ReplyFields::default()), None);
        let minimal = Params { protocol_version: 1, ..Params::default() };
        assert_eq!(minimal.min_data_len(false), 16);
        assert_eq!(minimal.min_data_len(true), 32);
    }

    #[test]
    fn foreign_signed_and_malformed_packets_are_refused() {
        assert_eq!(parse_request(b"GET / HTTP/1.0"), Err(IrttError::NotIrtt));
        assert_eq!(parse_request(&[0x14, 0xa7, 0x5b]), Err(IrttError::NotIrtt));
        let mut signed = OPEN_60.to_vec();
        signed[3] |= FLAG_HMAC;
        assert_eq!(parse_request(&signed), Err(IrttError::Hmac));
        let mut reply = OPEN_60.to_vec();
        reply[3] = FLAG_OPEN | FLAG_REPLY;
        assert_eq!(parse_request(&reply), Err(IrttError::Flags(3)));
        assert!(matches!(parse_request(&[0x14, 0xa7, 0x5b, 1, 99, 2]), Err(IrttError::Param(_))));
        assert!(matches!(parse_request(&[0x14, 0xa7, 0x5b, 1, 2, 0x80]), Err(IrttError::Param(_))));
        assert!(matches!(parse_request(&[0x14, 0xa7, 0x5b, 1, 2, 1]), Err(IrttError::Param(_))), "negative duration");
        assert_eq!(parse_request(&[0x14, 0xa7, 0x5b, 0, 1, 2]), Err(IrttError::NotIrtt), "a data packet too short");
        assert_eq!(parse_request(&close_request(TOKEN)), Ok(Request::Close { token: TOKEN }));
    }

    fn stamp_at() -> impl Strategy<Value = StampAt> {
        prop_oneof![
            Just(StampAt::None),
            Just(StampAt::Send),
            Just(StampAt::Receive),
            Just(StampAt::Both),
            Just(StampAt::Midpoint)
        ]
    }

    prop_compose! {
        fn params()(duration_ns in 0i64..i64::MAX, interval_ns in 0i64..1 << 40, length in 0i64..65_507,
                    count: bool, window: bool, stamp_at in stamp_at(), wall: bool, monotonic: bool,
                    dscp in 0i64..64, fill in proptest::option::of("[a-z:0-9]{1,12}")) -> Params {
            Params { protocol_version: 1, duration_ns, interval_ns, length, stats: ReceivedStats { count, window },
                     stamp_at, wall, monotonic, dscp, server_fill: fill }
        }
    }

    proptest! {
        #[test]
        fn params_round_trip(p in params()) {
            let Request::Open(back) = parse_request(&open_request(&p)).unwrap() else { panic!() };
            prop_assert_eq!(&back, &p);
            prop_assert_eq!(parse_reply(&open_reply(TOKEN, &p), &p).unwrap(), Reply::Open(TOKEN, p));
        }

        #[test]
        fn data_replies_round_trip_and_never_outgrow_the_request(
            p in params(), extra in 0usize..64, received: u32, window: u64,
            r in any::<(i64, i64, i64, i64)>(), sequence: u32,
        ) {
            let len = p.min_data_len(false) + extra;
            let mut packet = data_request(TOKEN, sequence, len);
            let f = ReplyFields {
                received, window,
                received_at: Stamp { wall: r.0, mono: r.1 },
                sent_at: Stamp { wall: r.2, mono: r.3 },
            };
            write_data_reply(&mut packet, &p, &f).unwrap();
            prop_assert_eq!(packet.len(), len);
            let Reply::Data { sequence: s, fields } = parse_reply(&packet, &p).unwrap() else { panic!() };
            prop_assert_eq!(s, sequence);
            if p.stats.count { prop_assert_eq!(fields.received, received); }
            if p.stats.window { prop_assert_eq!(fields.window, window); }
        }

        #[test]
        fn any_bytes_parse_or_fail_without_panicking(b in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = parse_request(&b);
            let mut with_magic = MAGIC.to_vec();
            with_magic.extend_from_slice(&b);
            let _ = parse_request(&with_magic);
            let _ = parse_reply(&with_magic, &Params::default());
        }
    }
}
