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
//!
//! A signed packet (irtt's `--hmac=KEY`, every packet of the test, both ways) carries
//! HMAC-MD5 under the key over the whole packet with the HMAC field zeroed, in the 16 bytes
//! after the flags; everything after it moves 16 bytes on (checked against captures of irtt
//! 0.9: `irtt client --hmac=sekrit`, each packet's field equal to that HMAC). A key written
//! `0x...` is hex, as irtt takes it.

use hmac::{Hmac, Mac};
use std::fmt;

type HmacMd5 = Hmac<md5::Md5>;

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
    /// Unsigned, or signed wrongly, where this end has a key: not the peer's, or another key.
    BadHmac,
    /// A parameter that does not parse or is out of range.
    Param(String),
}

impl fmt::Display for IrttError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotIrtt => f.write_str("not an irtt packet"),
            Self::Flags(x) => write!(f, "irtt flags {x:#04x} not expected here"),
            Self::Hmac => f.write_str("an HMAC-signed irtt packet, and no key to check it"),
            Self::BadHmac => f.write_str("an irtt packet without a correct HMAC under the key given"),
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
    parse_request_keyed(b, None)
}

/// Reads a request for a server with `key`: only a packet signed under it is one
/// ([`IrttError::BadHmac`] otherwise); without a key a signed one is not ([`IrttError::Hmac`]).
pub fn parse_request_keyed(b: &[u8], key: Option<&[u8]>) -> Result<Request, IrttError> {
    if b.len() < HEADER_LEN || b[..3] != MAGIC {
        return Err(IrttError::NotIrtt);
    }
    let signed = b[3] & FLAG_HMAC != 0;
    match key {
        Some(k) if !verify(b, k) => return Err(IrttError::BadHmac),
        None if signed => return Err(IrttError::Hmac),
        _ => {}
    }
    let at = body_at(signed);
    match b[3] & !FLAG_HMAC {
        FLAG_OPEN => Ok(Request::Open(Params::decode(&b[at..])?)),
        0 if b.len() >= at + TOKEN_LEN + 4 => Ok(Request::Data {
            token: token_at(b, at).ok_or(IrttError::NotIrtt)?,
            sequence: u32::from_le_bytes(b[at + TOKEN_LEN..at + TOKEN_LEN + 4].try_into().expect("4 bytes")),
        }),
        FLAG_CLOSE if b.len() >= at + TOKEN_LEN => {
            Ok(Request::Close { token: token_at(b, at).ok_or(IrttError::NotIrtt)? })
        }
        0 | FLAG_CLOSE => Err(IrttError::NotIrtt),
        other => Err(IrttError::Flags(other)),
    }
}

/// The open reply granting `params` for the connection `token`.
pub fn open_reply(token: [u8; 8], params: &Params) -> Vec<u8> {
    open_reply_keyed(token, params, None)
}

/// [`open_reply`], signed under `key` if given.
pub fn open_reply_keyed(token: [u8; 8], params: &Params, key: Option<&[u8]>) -> Vec<u8> {
    let mut out = header(FLAG_OPEN | FLAG_REPLY, key.is_some());
    out.extend_from_slice(&token);
    params.encode(&mut out);
    if let Some(k) = key {
        sign(&mut out, k);
    }
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
    let signed = packet[3] & FLAG_HMAC != 0;
    if packet.len() < params.min_data_len(signed) {
        return None;
    }
    // A signed request's reply keeps the flag and its room ([`sign`] it once it is stamped).
    packet[3] = FLAG_REPLY | packet[3] & FLAG_HMAC;
    let mut at = sequence_at(signed) + 4;
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
    let signed = packet[3] & FLAG_HMAC != 0;
    let fixed = sequence_at(signed) + 4;
    let mut at = fixed + if params.stats.count { 4 } else { 0 } + if params.stats.window { 8 } else { 0 };
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

/// Where a packet's body (an open's parameters, or the token) starts: after the magic and
/// flags and, in a signed packet, the HMAC.
pub fn body_at(signed: bool) -> usize {
    HEADER_LEN + if signed { HMAC_LEN } else { 0 }
}

/// An HMAC key as irtt takes it: `0x` and hex digits, or the text's own bytes.
pub fn hmac_key(text: &[u8]) -> Result<Vec<u8>, IrttError> {
    let Some(hex) = text.strip_prefix(b"0x") else { return Ok(text.to_vec()) };
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    if hex.is_empty() || hex.len() % 2 != 0 {
        return Err(IrttError::Param("an HMAC key of 0x and an odd number of hex digits".into()));
    }
    hex.chunks(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect::<Option<Vec<u8>>>()
        .ok_or_else(|| IrttError::Param("an HMAC key of 0x and something not hex".into()))
}

fn mac_of(packet: &[u8], key: &[u8]) -> [u8; HMAC_LEN] {
    let mut mac = HmacMd5::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(&packet[..HEADER_LEN]);
    mac.update(&[0; HMAC_LEN]);
    mac.update(&packet[HEADER_LEN + HMAC_LEN..]);
    mac.finalize().into_bytes().into()
}

/// Signs a packet built with room for its HMAC (its flags say [`FLAG_HMAC`]), in place.
pub fn sign(packet: &mut [u8], key: &[u8]) {
    packet[3] |= FLAG_HMAC;
    let mac = mac_of(packet, key);
    packet[HEADER_LEN..HEADER_LEN + HMAC_LEN].copy_from_slice(&mac);
}

/// Whether `packet` is signed, and correctly under `key`.
pub fn verify(packet: &[u8], key: &[u8]) -> bool {
    if packet.len() < HEADER_LEN + HMAC_LEN || packet[3] & FLAG_HMAC == 0 {
        return false;
    }
    let mut mac = HmacMd5::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(&packet[..HEADER_LEN]);
    mac.update(&[0; HMAC_LEN]);
    mac.update(&packet[HEADER_LEN + HMAC_LEN..]);
    mac.verify_slice(&packet[HEADER_LEN..HEADER_LEN + HMAC_LEN]).is_ok()
}

/// A packet's header: magic, `flags` and, signed, room for the HMAC.
fn header(flags: u8, signed: bool) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.push(flags | if signed { FLAG_HMAC } else { 0 });
    out.resize(body_at(signed), 0);
    out
}

/// The client's side: an open request, signed under `key` if given.
pub fn open_request(params: &Params, key: Option<&[u8]>) -> Vec<u8> {
    let mut out = header(FLAG_OPEN, key.is_some());
    params.encode(&mut out);
    if let Some(k) = key {
        sign(&mut out, k);
    }
    out
}

/// A data request of `len` bytes (at least [`Params::min_data_len`]), with room for an HMAC
/// when `signed` ([`sign`] it once its sequence number is in).
pub fn data_request(token: [u8; 8], sequence: u32, len: usize, signed: bool) -> Vec<u8> {
    let at = body_at(signed);
    let mut out = header(0, signed);
    out.extend_from_slice(&token);
    out.extend_from_slice(&sequence.to_le_bytes());
    out.resize(len.max(at + TOKEN_LEN + 4), 0);
    out
}

/// Where a data packet's sequence number sits.
pub fn sequence_at(signed: bool) -> usize {
    body_at(signed) + TOKEN_LEN
}

/// A close of the connection `token`, signed under `key` if given.
pub fn close_request(token: [u8; 8], key: Option<&[u8]>) -> Vec<u8> {
    let mut out = header(FLAG_CLOSE, key.is_some());
    out.extend_from_slice(&token);
    if let Some(k) = key {
        sign(&mut out, k);
    }
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

/// Reads a server's reply for a connection with `params`; with `key`, only a packet signed
/// under it is one ([`IrttError::BadHmac`] otherwise), without, a signed one is not
/// ([`IrttError::Hmac`]).
pub fn parse_reply(b: &[u8], params: &Params, key: Option<&[u8]>) -> Result<Reply, IrttError> {
    if b.len() < HEADER_LEN || b[..3] != MAGIC {
        return Err(IrttError::NotIrtt);
    }
    let signed = b[3] & FLAG_HMAC != 0;
    match key {
        Some(k) if !verify(b, k) => return Err(IrttError::BadHmac),
        None if signed => return Err(IrttError::Hmac),
        _ => {}
    }
    let at = body_at(signed);
    if b.len() < at + TOKEN_LEN {
        return Err(IrttError::NotIrtt);
    }
    match b[3] & !FLAG_HMAC {
        f if f == FLAG_OPEN | FLAG_REPLY => {
            Ok(Reply::Open(token_at(b, at).expect("length checked"), Params::decode(&b[at + TOKEN_LEN..])?))
        }
        FLAG_REPLY if b.len() >= params.min_data_len(signed) => {
            let seq_at = at + TOKEN_LEN;
            let sequence = u32::from_le_bytes(b[seq_at..seq_at + 4].try_into().expect("4 bytes"));
            let mut r = Reader { b, at: seq_at + 4 };
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
        FLAG_REPLY => Err(IrttError::NotIrtt),
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
        assert_eq!(open_request(&p, None), OPEN_60);
        // The server's answer, as captured: the token, then the same parameters.
        let reply = open_reply(TOKEN, &p);
        assert_eq!(reply.len(), 34);
        assert_eq!(&reply[..12], &[0x14, 0xa7, 0x5b, 0x03, 0x1e, 0xdb, 0x18, 0x16, 0x0d, 0x12, 0x28, 0x7a]);
        assert_eq!(&reply[12..], &OPEN_60[4..]);
        assert_eq!(parse_reply(&reply, &p, None).unwrap(), Reply::Open(TOKEN, p));
    }

    #[test]
    fn a_data_reply_fills_the_request_exactly_as_captured() {
        let p = default_params();
        assert_eq!(p.min_data_len(false), 60);
        let mut packet = data_request(TOKEN, 1, 60, false);
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
        assert_eq!(parse_reply(&packet, &p, None).unwrap(), Reply::Data { sequence: 1, fields: f });
        let later = Stamp { wall: 7, mono: 9 };
        restamp_send(&mut packet, &p, later);
        let Reply::Data { fields, .. } = parse_reply(&packet, &p, None).unwrap() else { panic!() };
        assert_eq!((fields.sent_at, fields.received_at), (later, f.received_at));
    }

    #[test]
    fn a_request_too_short_for_its_reply_gets_none() {
        let p = default_params();
        let mut short = data_request(TOKEN, 0, 59, false);
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
        assert_eq!(parse_request(&close_request(TOKEN, None)), Ok(Request::Close { token: TOKEN }));
    }

    /// `irtt client -i 100ms -d 300ms --hmac=sekrit` against `irtt server --hmac=sekrit`
    /// (0.9), captured on loopback: the open, the server's open reply, the second data reply
    /// and the close.
    const SIGNED_OPEN: [u8; 39] = [
        0x14, 0xa7, 0x5b, 0x09, 0x4c, 0x65, 0x40, 0x0c, 0x24, 0x33, 0x89, 0xe3, 0xff, 0x88, 0x69, 0xd4, 0x1e, 0x4c,
        0x38, 0xb3, 0x01, 0x02, 0x02, 0x80, 0x8c, 0x8d, 0x9e, 0x02, 0x03, 0x80, 0x84, 0xaf, 0x5f, 0x05, 0x06, 0x06,
        0x06, 0x07, 0x06,
    ];
    const SIGNED_OPEN_REPLY: [u8; 47] = [
        0x14, 0xa7, 0x5b, 0x0b, 0x3f, 0xab, 0x09, 0xc8, 0x64, 0x87, 0x5e, 0xf5, 0xb1, 0xd7, 0x0c, 0xe9, 0xe6, 0x12,
        0x96, 0xb4, 0xfa, 0xe0, 0xd2, 0xc6, 0x59, 0x2a, 0xda, 0xe6, 0x01, 0x02, 0x02, 0x80, 0x8c, 0x8d, 0x9e, 0x02,
        0x03, 0x80, 0x84, 0xaf, 0x5f, 0x05, 0x06, 0x06, 0x06, 0x07, 0x06,
    ];
    const SIGNED_REPLY_1: [u8; 76] = [
        0x14, 0xa7, 0x5b, 0x0a, 0x1b, 0x35, 0x37, 0x37, 0xdc, 0xb2, 0x6b, 0x45, 0x9f, 0x4e, 0x0d, 0x8e, 0xfc, 0x36,
        0x14, 0x00, 0xfa, 0xe0, 0xd2, 0xc6, 0x59, 0x2a, 0xda, 0xe6, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00,
        0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x55, 0x76, 0x79, 0xf4, 0xe6, 0x6e, 0xec, 0x18, 0x45, 0x19,
        0x3b, 0x60, 0x00, 0x00, 0x00, 0x00, 0x18, 0xb2, 0x79, 0xf4, 0xe6, 0x6e, 0xec, 0x18, 0xf4, 0x54, 0x3b, 0x60,
        0x00, 0x00, 0x00, 0x00,
    ];
    const SIGNED_CLOSE: [u8; 28] = [
        0x14, 0xa7, 0x5b, 0x0c, 0x61, 0x3a, 0x97, 0x36, 0xb1, 0xab, 0xa3, 0xba, 0xc3, 0x4e, 0x48, 0xf9, 0xbd, 0xb9,
        0x6a, 0x3c, 0xfa, 0xe0, 0xd2, 0xc6, 0x59, 0x2a, 0xda, 0xe6,
    ];

    #[test]
    fn a_server_with_a_key_reads_signed_requests_and_signs_its_replies_as_irtts_does() {
        let key = b"sekrit";
        let Ok(Request::Open(p)) = parse_request_keyed(&SIGNED_OPEN, Some(key)) else { panic!("not an open") };
        let token = [0xfa, 0xe0, 0xd2, 0xc6, 0x59, 0x2a, 0xda, 0xe6];
        assert_eq!(open_reply_keyed(token, &p, Some(key)), SIGNED_OPEN_REPLY, "irtt's own reply, byte for byte");
        assert_eq!(parse_request_keyed(&SIGNED_OPEN, Some(b"other")), Err(IrttError::BadHmac));
        assert_eq!(parse_request_keyed(&OPEN_60, Some(key)), Err(IrttError::BadHmac), "unsigned");
        assert_eq!(parse_request_keyed(&SIGNED_CLOSE, Some(key)), Ok(Request::Close { token }));
        // The request of SIGNED_REPLY_1, answered with its fields: the captured reply.
        let mut packet = data_request(token, 1, 76, true);
        sign(&mut packet, key);
        assert_eq!(parse_request_keyed(&packet, Some(key)), Ok(Request::Data { token, sequence: 1 }));
        let Ok(Reply::Data { fields, .. }) = parse_reply(&SIGNED_REPLY_1, &p, Some(key)) else { panic!() };
        write_data_reply(&mut packet, &p, &fields).unwrap();
        restamp_send(&mut packet, &p, fields.sent_at);
        sign(&mut packet, key);
        assert_eq!(packet, SIGNED_REPLY_1);
    }

    #[test]
    fn signed_packets_are_irtts_own_and_a_wrong_key_or_none_is_refused() {
        let key = b"sekrit";
        let p = Params {
            protocol_version: 1,
            duration_ns: 300_000_000,
            interval_ns: 100_000_000,
            stats: ReceivedStats { count: true, window: true },
            stamp_at: StampAt::Both,
            wall: true,
            monotonic: true,
            ..Params::default()
        };
        assert_eq!(open_request(&p, Some(key)), SIGNED_OPEN);
        let token = [0xfa, 0xe0, 0xd2, 0xc6, 0x59, 0x2a, 0xda, 0xe6];
        assert_eq!(close_request(token, Some(key)), SIGNED_CLOSE);
        assert_eq!(parse_reply(&SIGNED_OPEN_REPLY, &p, Some(key)), Ok(Reply::Open(token, p.clone())));
        let Reply::Data { sequence, fields } = parse_reply(&SIGNED_REPLY_1, &p, Some(key)).unwrap() else { panic!() };
        assert_eq!((sequence, fields.received, fields.window), (1, 2, 3));
        assert_eq!(fields.received_at.wall, 0x18ec_6ee6_f479_7655);
        assert_eq!(p.min_data_len(true), SIGNED_REPLY_1.len());
        // The request that got that reply, rebuilt and signed.
        let mut request = data_request(token, 1, 76, true);
        sign(&mut request, key);
        assert!(verify(&request, key) && !verify(&request, b"other"));
        assert_eq!(parse_reply(&SIGNED_REPLY_1, &p, Some(b"other")), Err(IrttError::BadHmac));
        assert_eq!(parse_reply(&SIGNED_REPLY_1, &p, None), Err(IrttError::Hmac));
        assert_eq!(parse_reply(&open_reply(token, &p), &p, Some(key)), Err(IrttError::BadHmac), "unsigned");
        assert_eq!(hmac_key(b"0x0aFf").unwrap(), [0x0a, 0xff]);
        assert_eq!(hmac_key(b"plain").unwrap(), b"plain");
        assert!(hmac_key(b"0xabc").is_err() && hmac_key(b"0xzz").is_err());
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
            let Request::Open(back) = parse_request(&open_request(&p, None)).unwrap() else { panic!() };
            prop_assert_eq!(&back, &p);
            prop_assert_eq!(parse_reply(&open_reply(TOKEN, &p), &p, None).unwrap(), Reply::Open(TOKEN, p));
        }

        #[test]
        fn data_replies_round_trip_and_never_outgrow_the_request(
            p in params(), extra in 0usize..64, received: u32, window: u64,
            r in any::<(i64, i64, i64, i64)>(), sequence: u32,
        ) {
            let len = p.min_data_len(false) + extra;
            let mut packet = data_request(TOKEN, sequence, len, false);
            let f = ReplyFields {
                received, window,
                received_at: Stamp { wall: r.0, mono: r.1 },
                sent_at: Stamp { wall: r.2, mono: r.3 },
            };
            write_data_reply(&mut packet, &p, &f).unwrap();
            prop_assert_eq!(packet.len(), len);
            let Reply::Data { sequence: s, fields } = parse_reply(&packet, &p, None).unwrap() else { panic!() };
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
            let _ = parse_request_keyed(&with_magic, Some(b"key"));
            let _ = parse_reply(&with_magic, &Params::default(), None);
            let _ = parse_reply(&with_magic, &Params::default(), Some(b"key"));
        }
    }
}
