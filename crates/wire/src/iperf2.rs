//! iperf2's in-band test settings and UDP reports, and lwIP lwiperf's use of them, sans-IO
//! (reference/iperf.md §2 and interop-factcheck.md §2, checked against iperf2's
//! `include/payloads.h` and bytes captured from Debian's iperf 2.1.8 on loopback).
//!
//! iperf2 has no control connection. A client's settings ride at the start of each TCP
//! connection and in every UDP datagram; all fields are big-endian 32-bit words.
//!
//! | layout | client header | UDP datagram header | server report |
//! |---|---|---|---|
//! | 2.0.5 | 24 bytes (`client_hdr_v1`) | 12 bytes: id, tv_sec, tv_usec | 12 + 40 bytes |
//! | 2.1 | 24 + 36 (`client_hdrext`) = 60 | 16 bytes: id, tv_sec, tv_usec, id2 | 16 + 112 = 128 bytes |
//! | 2.2 | 24 + 40 = 64 | 16 bytes | 128 bytes |
//!
//! A UDP datagram's sequence number is `id` (2.0.5: 32 bits, from 0) or `id2:id` (2.1+: 64 bits,
//! from 1). The client's last datagram carries the negated number, −(last + 1): the FIN. The
//! server answers a FIN with its report (`server_hdr`) after the datagram header; the client
//! re-sends the FIN (each try one further down) until a report comes back.
//!
//! The time stamps are the sender's wall clock in seconds and microseconds (`gettimeofday`).

use crate::datagram::{DatagramFormat, Received};
use crate::ProtocolError;

/// iperf2's default port, TCP and UDP.
pub const DEFAULT_PORT: u16 = 5001;

/// Flag: the server must run a test back to the client (`-d`/`-r`; lwiperf's "answer").
pub const HEADER_VERSION1: u32 = 0x8000_0000;
/// Flag: `client_hdrext` follows the base header (every 2.1+ client).
pub const HEADER_EXTEND: u32 = 0x4000_0000;
/// Flag: UDP test features.
pub const HEADER_UDPTESTS: u32 = 0x2000_0000;
/// Flag: 64-bit UDP sequence numbers (`id2` valid).
pub const HEADER_SEQNO64B: u32 = 0x0800_0000;
/// Flag: reverse or full duplex on the client's own connection (2.1 `-R`, `--full-duplex`).
pub const HEADER_VERSION2: u32 = 0x0400_0000;
/// Flag: the client asks for the server's version ack (`-X`).
pub const HEADER_V2PEERDETECT: u32 = 0x0200_0000;
/// Flag: bits 1–8 of the flags hold the header's length.
pub const HEADER_LEN_BIT: u32 = 0x0001_0000;
/// Mask of the header length (in bytes, shifted left by one) under [`HEADER_LEN_BIT`].
pub const HEADER_LEN_MASK: u32 = 0x0000_01FE;
/// Flag (with [`HEADER_VERSION1`]): dual test, the server dials back at once (`-d`).
pub const RUN_NOW: u32 = 0x0000_0001;
/// Upper flag of the extension: the server sends on the client's connection (2.1 `-R`).
pub const UPPER_REVERSE: u16 = 0x0400;
/// Upper flag of the extension: both ways on the client's connection (`--full-duplex`).
pub const UPPER_FULLDUPLEX: u16 = 0x0800;
/// Upper flag of the extension: a rate is set (`-b`).
pub const UPPER_BWSET: u16 = 0x0100;
/// Upper flag: the client does no UDP FIN exchange (`--no-udp-fin`).
pub const UPPER_NOUDPFIN: u16 = 0x0008;
/// Server report flag: the transit extension is valid (server `-e`, `--trip-times`).
pub const SERVER_HEADER_EXTEND: u32 = 0x4000_0000;

/// Bytes of `client_hdr_v1`.
pub const V1_LEN: usize = 24;
/// Bytes of the 2.1 `client_hdrext`.
pub const EXT21_LEN: usize = 36;
/// Bytes of the 2.2 `client_hdrext` (it gained `barrier_usecs`).
pub const EXT22_LEN: usize = 40;
/// The longest header a server reads (iperf2's `MAX_HEADER_LEN`).
pub const MAX_HEADER_LEN: usize = 256;
/// Bytes of `server_hdr_v1` (2.0.5's whole report).
pub const SERVER_V1_LEN: usize = 40;
/// Bytes of the whole 2.1+ `server_hdr` (v1, transit extension, 64-bit counts).
pub const SERVER_LEN: usize = 112;
/// TCP and UDP: lwiperf and iperf2 re-read the header every 128 KiB (the default `-l`).
pub const LWIPERF_CHECK_INTERVAL: u64 = 128 * 1024;

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

/// Which generation of iperf2 the bytes follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// iperf 2.0.5 (and lwiperf): 24-byte header, 32-bit UDP sequence numbers, 12-byte datagram header.
    V205,
    /// iperf 2.1: 60-byte header, 64-bit sequence numbers, 16-byte datagram header.
    V21,
    /// iperf 2.2: 64-byte header (the extension grew by 4 bytes); otherwise as 2.1.
    V22,
}

impl Layout {
    /// Bytes of the UDP datagram header (`UDP_datagram`).
    pub fn datagram_header_len(self) -> usize {
        match self {
            Self::V205 => 12,
            Self::V21 | Self::V22 => 16,
        }
    }

    /// Bytes of the client header this layout sends.
    pub fn client_header_len(self) -> usize {
        match self {
            Self::V205 => V1_LEN,
            Self::V21 => V1_LEN + EXT21_LEN,
            Self::V22 => V1_LEN + EXT22_LEN,
        }
    }

    /// The version words a client of this layout sends (major<<16|minor, patch<<16|kind; kind 3 = release).
    fn version(self) -> (u32, u32) {
        match self {
            Self::V205 => (0x0002_0000, 0x0005_0003),
            Self::V21 => (0x0002_0001, 0x0008_0003),
            Self::V22 => (0x0002_0002, 0x0000_0003),
        }
    }
}

/// The extension of a 2.1+ client header (`client_hdrext`): what this codec reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Extension {
    /// Upper flags ([`UPPER_REVERSE`], ...).
    pub upper_flags: u16,
    /// Lower flags.
    pub lower_flags: u16,
    /// major<<16 | minor.
    pub version_u: u32,
    /// patch<<16 | kind.
    pub version_l: u32,
    /// IP TOS.
    pub tos: u16,
    /// Rate, bit/s (UDP) or the TCP rate limit, low 32 bits.
    pub rate_low: u32,
    /// High 32 bits of the rate.
    pub rate_high: u32,
}

impl Extension {
    /// The peer's version as "2.1.8" (kind other than release appended: "-dev", "-rc", ...).
    pub fn version_string(&self) -> String {
        let kind = match self.version_l & 0xFFFF {
            3 => "",
            0 => "-dev",
            1 => "-rc",
            2 => "-rc2",
            5 => "-master",
            _ => "-other",
        };
        format!("{}.{}.{}{kind}", self.version_u >> 16, self.version_u & 0xFFFF, self.version_l >> 16)
    }

    /// The rate in bit/s.
    pub fn rate(&self) -> u64 {
        u64::from(self.rate_high) << 32 | u64::from(self.rate_low)
    }
}

/// An iperf2 client header (`client_hdr_v1` and, from 2.1, `client_hdrext`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClientHeader {
    /// Flags word ([`HEADER_VERSION1`], ...). [`ClientHeader::encode`] sets [`HEADER_EXTEND`]
    /// and the length bits itself when there is an extension.
    pub flags: u32,
    /// `-P` (2.2 `--sync-transfer-id` puts an id in bits 20–31).
    pub num_threads: i32,
    /// The port a `-d`/`-r` server dials back.
    pub port: i32,
    /// `-l`, or 0.
    pub buf_len: i32,
    /// 2.0.5: the UDP rate or the TCP window; 0 from 2.1.
    pub win_band: i32,
    /// < 0: −time in 10 ms units; ≥ 0: bytes.
    pub amount: i32,
    /// The 2.1+ extension.
    pub ext: Option<Extension>,
}

/// What `amount` asks for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Amount {
    /// Seconds.
    Seconds(f64),
    /// Bytes.
    Bytes(u64),
}

impl ClientHeader {
    /// A header for a test of `amount`, `-l` `buf_len`, from `port`.
    pub fn new(amount: Amount, buf_len: u32, port: u16) -> Self {
        Self {
            flags: 0,
            num_threads: 1,
            port: i32::from(port),
            buf_len: buf_len.min(i32::MAX as u32) as i32,
            win_band: 0,
            amount: Self::amount_word(amount),
            ext: None,
        }
    }

    /// `amount` as iperf2 writes it: −(10 ms units), or bytes in 31 bits.
    pub fn amount_word(amount: Amount) -> i32 {
        match amount {
            Amount::Seconds(s) => -((s * 100.0).round().clamp(1.0, i32::MAX as f64) as i32),
            Amount::Bytes(b) => (b & 0x7FFF_FFFF) as i32,
        }
    }

    /// What [`Self::amount`] asks for.
    pub fn amount(&self) -> Amount {
        if self.amount < 0 {
            Amount::Seconds(f64::from(self.amount.unsigned_abs()) / 100.0)
        } else {
            Amount::Bytes(self.amount as u64)
        }
    }

    /// The `-d`/`-r` dial-back the header asks for.
    pub fn dial_back(&self) -> Option<DialBack> {
        if self.flags & HEADER_VERSION1 == 0 {
            None
        } else if self.flags & RUN_NOW != 0 {
            Some(DialBack::Dual)
        } else {
            Some(DialBack::Tradeoff)
        }
    }

    /// True when the server sends on the client's own connection (2.1 `-R`).
    pub fn reverse(&self) -> bool {
        self.flags & HEADER_VERSION2 != 0 && self.ext.is_some_and(|e| e.upper_flags & UPPER_REVERSE != 0)
    }

    /// True for both ways on the client's own connection (`--full-duplex`).
    pub fn full_duplex(&self) -> bool {
        self.flags & HEADER_VERSION2 != 0 && self.ext.is_some_and(|e| e.upper_flags & UPPER_FULLDUPLEX != 0)
    }

    /// True when a 2.1 server answers this TCP header with its 28-byte ack on the data connection.
    pub fn expects_ack(&self) -> bool {
        (self.flags & HEADER_EXTEND != 0 && self.flags & HEADER_VERSION2 == 0) || self.flags & HEADER_V2PEERDETECT != 0
    }

    /// The header's bytes in `layout` (2.0.5: the base header only, the extension dropped).
    pub fn encode(&self, layout: Layout) -> Vec<u8> {
        let len = layout.client_header_len();
        let mut b = vec![0u8; len];
        let mut flags = self.flags;
        let ext = match layout {
            Layout::V205 => None,
            _ => {
                let (vu, vl) = layout.version();
                Some(self.ext.unwrap_or(Extension { version_u: vu, version_l: vl, ..Extension::default() }))
            }
        };
        if ext.is_some() {
            flags = (flags & !HEADER_LEN_MASK) | HEADER_EXTEND | HEADER_LEN_BIT | ((len as u32) << 1);
        }
        put32(&mut b, 0, flags);
        for (i, v) in [self.num_threads, self.port, self.buf_len, self.win_band, self.amount].into_iter().enumerate() {
            put32(&mut b, 4 + 4 * i, v as u32);
        }
        if let Some(e) = ext {
            // type, length (both 0 in a client header), then the flags.
            put32(&mut b, 32, u32::from(e.upper_flags) << 16 | u32::from(e.lower_flags));
            put32(&mut b, 36, e.version_u);
            put32(&mut b, 40, e.version_l);
            put32(&mut b, 44, u32::from(e.tos));
            put32(&mut b, 48, e.rate_low);
            put32(&mut b, 52, e.rate_high);
        }
        b
    }

    /// The header a UDP client puts after every datagram header: 2.0.5's 24 bytes (rate in
    /// `win_band`), or 2.1's 76 (the extension with the rate, 16 zero bytes of start time, and
    /// SEQNO64B), as Debian's 2.1.8 sends them.
    pub fn udp_settings(layout: Layout, amount: Amount, buf_len: u32, rate_bps: u64, port: u16) -> Vec<u8> {
        let mut h = Self::new(amount, buf_len, port);
        if layout == Layout::V205 {
            h.win_band = rate_bps.min(i32::MAX as u64) as i32;
            return h.encode(Layout::V205);
        }
        let (version_u, version_l) = layout.version();
        h.ext = Some(Extension {
            version_u,
            version_l,
            rate_low: rate_bps as u32,
            rate_high: (rate_bps >> 32) as u32,
            ..Extension::default()
        });
        let mut b = h.encode(layout);
        b.resize(b.len() + 16, 0);
        let flags = (be32(&b, 0) & !HEADER_LEN_MASK) | HEADER_SEQNO64B | ((b.len() as u32) << 1);
        put32(&mut b, 0, flags);
        b
    }

    /// The one datagram a 2.1+ client sends for UDP `-R` (re-sent until data comes): datagram
    /// 1's header stamped `wall_ns`, then [`Self::udp_settings`] with VERSION2 and UDPTESTS
    /// and the REVERSE upper flag, zero-padded to `buf_len` as Debian's 2.1.8 sends it (flags
    /// `6c010098`). The server then sends for `amount` and ends with a FIN of its own.
    pub fn udp_reverse_request(amount: Amount, buf_len: u32, rate_bps: u64, port: u16, wall_ns: u64) -> Vec<u8> {
        let settings = Self::udp_settings(Layout::V21, amount, buf_len, rate_bps, port);
        let hl = Layout::V21.datagram_header_len();
        let mut b = vec![0u8; (hl + settings.len()).max(buf_len.min(65_507) as usize)];
        UdpHeader { seq: 1, sec: (wall_ns / 1_000_000_000) as u32, usec: ((wall_ns % 1_000_000_000) / 1000) as u32 }
            .emit(&mut b, Layout::V21);
        b[hl..hl + settings.len()].copy_from_slice(&settings);
        let flags = be32(&b, hl) | HEADER_VERSION2 | HEADER_UDPTESTS;
        put32(&mut b, hl, flags);
        put32(&mut b, hl + 32, u32::from(UPPER_REVERSE) << 16);
        b
    }

    /// A UDP `-R` request ([`Self::udp_reverse_request`]) asking the server to send with TOS
    /// `tos` (iperf2's `-S`): the extension's TOS field, which a 2.1+ server sets on the socket
    /// it sends from.
    pub fn with_tos(mut request: Vec<u8>, tos: u8) -> Vec<u8> {
        let at = Layout::V21.datagram_header_len() + 44;
        if request.len() >= at + 4 {
            put32(&mut request, at, u32::from(tos));
        }
        request
    }

    /// How many bytes of header a server takes from the start of `bytes` (the rule of iperf2
    /// 2.1.8's `Settings.cpp`): the length field under [`HEADER_LEN_BIT`]; else 24 with
    /// VERSION1 or EXTEND, plus 36 with VERSION2 or EXTEND; else the flags word alone. None
    /// until the flags word is in.
    pub fn wire_len(bytes: &[u8]) -> Option<usize> {
        if bytes.len() < 4 {
            return None;
        }
        let flags = be32(bytes, 0);
        Some(if flags & HEADER_LEN_BIT != 0 {
            (((flags & HEADER_LEN_MASK) >> 1) as usize).max(4)
        } else {
            let mut n = 4;
            if flags & (HEADER_VERSION1 | HEADER_EXTEND) != 0 {
                n = V1_LEN;
            }
            if flags & (HEADER_VERSION2 | HEADER_EXTEND) != 0 {
                n = V1_LEN + EXT21_LEN;
            }
            n
        })
    }

    /// Parses a header at the start of `bytes`: Ok(None) while more bytes are needed, else the
    /// header and the bytes it took ([`Self::wire_len`]; a header of the flags word alone has
    /// every other field 0). Never reads past [`MAX_HEADER_LEN`].
    pub fn decode(bytes: &[u8]) -> Result<Option<(Self, usize)>, ProtocolError> {
        let Some(len) = Self::wire_len(bytes) else { return Ok(None) };
        if len > MAX_HEADER_LEN {
            return Err(ProtocolError::Malformed(format!("iperf2 header of {len} bytes")));
        }
        if bytes.len() < len {
            return Ok(None);
        }
        let b = &bytes[..len];
        let word = |i: usize| if b.len() >= 4 * i + 4 { be32(b, 4 * i) } else { 0 };
        let flags = word(0);
        let ext = (flags & HEADER_EXTEND != 0 && len >= V1_LEN + EXT21_LEN).then(|| Extension {
            upper_flags: (word(8) >> 16) as u16,
            lower_flags: word(8) as u16,
            version_u: word(9),
            version_l: word(10),
            tos: word(11) as u16,
            rate_low: word(12),
            rate_high: word(13),
        });
        let h = Self {
            flags,
            num_threads: word(1) as i32,
            port: word(2) as i32,
            buf_len: word(3) as i32,
            win_band: word(4) as i32,
            amount: word(5) as i32,
            ext,
        };
        Ok(Some((h, len)))
    }

    /// The peer software this header names: "iperf 2.1.8", or "iperf 2.0" without an extension.
    pub fn software(&self) -> (String, Option<String>) {
        match self.ext {
            Some(e) if e.version_u != 0 => ("iperf".into(), Some(e.version_string())),
            _ => ("iperf".into(), None),
        }
    }
}

/// A dial-back test (the server connects to the client's `port`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DialBack {
    /// `-d`: at once, both ways at the same time.
    Dual,
    /// `-r`: after the client's test.
    Tradeoff,
}

/// A UDP datagram header (`UDP_datagram`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpHeader {
    /// Sequence number; negative in a FIN.
    pub seq: i64,
    /// Send time, wall clock seconds.
    pub sec: u32,
    /// Send time, microseconds.
    pub usec: u32,
}

impl UdpHeader {
    /// Writes the header into `buf` (at least `layout.datagram_header_len()` long). 2.0.5
    /// carries the low 32 bits only.
    pub fn emit(&self, buf: &mut [u8], layout: Layout) {
        put32(buf, 0, self.seq as u32);
        put32(buf, 4, self.sec);
        put32(buf, 8, self.usec);
        if layout != Layout::V205 {
            put32(buf, 12, (self.seq >> 32) as u32);
        }
    }

    /// Parses a datagram's header; None when shorter than the layout's header.
    pub fn parse(buf: &[u8], layout: Layout) -> Option<Self> {
        if buf.len() < layout.datagram_header_len() {
            return None;
        }
        let low = be32(buf, 0);
        let seq = match layout {
            Layout::V205 => i64::from(low as i32),
            _ => (i64::from(be32(buf, 12)) << 32) | i64::from(low),
        };
        Some(Self { seq, sec: be32(buf, 4), usec: be32(buf, 8) })
    }

    /// The layout of a client's datagram: 2.1+ clients put their header at offset 16 with
    /// EXTEND or SEQNO64B set; 2.0.5 at offset 12, where offset 16 holds its thread count.
    pub fn sniff_layout(buf: &[u8]) -> Layout {
        if buf.len() >= 20 && be32(buf, 16) & (HEADER_EXTEND | HEADER_SEQNO64B) != 0 {
            Layout::V21
        } else {
            Layout::V205
        }
    }
}

/// The server's report on a UDP test (`server_hdr`), answered to the client's FIN.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ServerReport {
    /// Flags: [`HEADER_VERSION1`], [`HEADER_SEQNO64B`] for 64-bit counts, [`SERVER_HEADER_EXTEND`].
    pub flags: u32,
    /// Bytes received (the FIN included).
    pub bytes: u64,
    /// Receive duration, seconds part.
    pub stop_sec: u32,
    /// Receive duration, microseconds part.
    pub stop_usec: u32,
    /// Datagrams lost.
    pub lost: u64,
    /// Datagrams out of order.
    pub out_of_order: u64,
    /// Datagrams counted (the FIN included): the last sequence number seen.
    pub datagrams: u64,
    /// Jitter, seconds part.
    pub jitter_sec: u32,
    /// Jitter, microseconds part.
    pub jitter_usec: u32,
}

impl ServerReport {
    /// The receive duration in seconds.
    pub fn seconds(&self) -> f64 {
        f64::from(self.stop_sec) + f64::from(self.stop_usec) / 1e6
    }

    /// The jitter in seconds.
    pub fn jitter_seconds(&self) -> f64 {
        f64::from(self.jitter_sec) + f64::from(self.jitter_usec) / 1e6
    }

    /// The report's bytes after the datagram header: 40 (2.0.5) or 112 (2.1+: the transit
    /// extension zero, the 64-bit count extension filled).
    pub fn encode(&self, layout: Layout) -> Vec<u8> {
        let len = if layout == Layout::V205 { SERVER_V1_LEN } else { SERVER_LEN };
        let mut b = vec![0u8; len];
        let mut flags = self.flags | HEADER_VERSION1;
        if layout != Layout::V205 {
            flags |= HEADER_SEQNO64B;
        }
        let words = [
            flags,
            (self.bytes >> 32) as u32,
            self.bytes as u32,
            self.stop_sec,
            self.stop_usec,
            self.lost as u32,
            self.out_of_order as u32,
            self.datagrams as u32,
            self.jitter_sec,
            self.jitter_usec,
        ];
        for (i, w) in words.into_iter().enumerate() {
            put32(&mut b, 4 * i, w);
        }
        if layout != Layout::V205 {
            put32(&mut b, 100, (self.lost >> 32) as u32);
            put32(&mut b, 104, (self.out_of_order >> 32) as u32);
            put32(&mut b, 108, (self.datagrams >> 32) as u32);
        }
        b
    }

    /// Parses a report at the start of `b` (after the datagram header); None unless VERSION1 is set.
    pub fn decode(b: &[u8]) -> Option<Self> {
        if b.len() < SERVER_V1_LEN {
            return None;
        }
        let w = |i: usize| be32(b, 4 * i);
        let flags = w(0);
        if flags & HEADER_VERSION1 == 0 {
            return None;
        }
        let wide = flags & HEADER_SEQNO64B != 0 && b.len() >= SERVER_LEN;
        let high = |at: usize| if wide { u64::from(be32(b, at)) << 32 } else { 0 };
        Some(Self {
            flags,
            bytes: u64::from(w(1)) << 32 | u64::from(w(2)),
            stop_sec: w(3),
            stop_usec: w(4),
            lost: high(100) | u64::from(w(5)),
            out_of_order: high(104) | u64::from(w(6)),
            datagrams: high(108) | u64::from(w(7)),
            jitter_sec: w(8),
            jitter_usec: w(9),
        })
    }

    /// The whole reply datagram to a FIN: `fin`'s datagram header (2.0.5 servers echo the
    /// FIN; 2.1 zeroes it) and the report.
    pub fn reply(&self, layout: Layout, fin: &[u8]) -> Vec<u8> {
        let hl = layout.datagram_header_len();
        let mut out = vec![0u8; hl];
        if layout == Layout::V205 && fin.len() >= hl {
            out.copy_from_slice(&fin[..hl]);
        }
        out.extend_from_slice(&self.encode(layout));
        out
    }

    /// Parses a reply datagram to a FIN: the report at offset 16 (2.1+) or 12 (2.0.5), found by
    /// its VERSION1 flag as iperf2 clients of both layouts find it.
    pub fn parse_reply(b: &[u8]) -> Option<(Self, Layout)> {
        if b.len() >= 16 + SERVER_V1_LEN && be32(b, 16) & HEADER_VERSION1 != 0 {
            return Self::decode(&b[16..]).map(|r| (r, Layout::V21));
        }
        if b.len() >= 12 + SERVER_V1_LEN {
            return Self::decode(&b[12..]).map(|r| (r, Layout::V205));
        }
        None
    }
}

/// iperf2's UDP datagrams as a [`DatagramFormat`]: header, the client header after it (iperf2
/// servers read the test's settings from any datagram), then the pattern.
///
/// Sequence numbers on the wire are netchar's plus `first_seq` (2.1+: 1; 2.0.5: 0); the send
/// time is `epoch_ns` (the wall clock at the test's start, ns) plus netchar's offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpFormat {
    /// The layout.
    pub layout: Layout,
    /// The wall clock at the sender's start, ns since the Unix epoch (0 for a receiver).
    pub epoch_ns: u64,
    /// The client header carried after the datagram header (a sender's; empty for none).
    pub settings: Vec<u8>,
    /// A UDP `-R` receiver's request to the server (empty for none).
    pub request: Vec<u8>,
    /// The FIN goes out once and no report is awaited: a server's `-R` sender, whose client
    /// answers nothing (Debian's 2.1.8 ends so).
    pub fin_once: bool,
}

impl UdpFormat {
    /// The format of `layout` with `settings` after the datagram header.
    pub fn new(layout: Layout, epoch_ns: u64, settings: Vec<u8>) -> Self {
        Self { layout, epoch_ns, settings, request: Vec::new(), fin_once: false }
    }

    /// A server's `-R` sender's format ([`Self::fin_once`]).
    pub fn with_fin_once(mut self) -> Self {
        self.fin_once = true;
        self
    }

    /// A receiver's format that asks the server to send with `request`
    /// ([`ClientHeader::udp_reverse_request`]) until data comes.
    pub fn with_request(mut self, request: Vec<u8>) -> Self {
        self.request = request;
        self
    }

    fn first_seq(&self) -> u64 {
        if self.layout == Layout::V205 {
            0
        } else {
            1
        }
    }

    /// The FIN after `sent` datagrams, try `attempt` (0, 1, ...: iperf2 sends each try one
    /// further down): the whole header written into `buf`.
    pub fn fin(&self, buf: &mut [u8], sent: u64, attempt: u32, now_ns: u64) {
        let last = (sent + self.first_seq()).saturating_sub(1);
        let seq = -((last as i64).saturating_add(1).saturating_add(i64::from(attempt)));
        let t = self.epoch_ns.saturating_add(now_ns);
        UdpHeader { seq, sec: (t / 1_000_000_000) as u32, usec: ((t % 1_000_000_000) / 1000) as u32 }
            .emit(buf, self.layout);
    }
}

impl DatagramFormat for UdpFormat {
    // A socket per stream, as iperf2 itself (its header names no stream).
    const STREAM_IDS: bool = false;

    fn header_len(&self) -> usize {
        self.layout.datagram_header_len() + self.settings.len()
    }

    fn emit(&self, buf: &mut [u8], _stream_id: u32, sequence: u64, sent_ns: u64) {
        let hl = self.layout.datagram_header_len();
        buf[hl..hl + self.settings.len()].copy_from_slice(&self.settings);
        self.stamp(buf, sequence, sent_ns);
    }

    fn stamp(&self, buf: &mut [u8], sequence: u64, sent_ns: u64) {
        let t = self.epoch_ns.wrapping_add(sent_ns);
        let seq = sequence.wrapping_add(self.first_seq()) as i64;
        UdpHeader { seq, sec: (t / 1_000_000_000) as u32, usec: ((t % 1_000_000_000) / 1000) as u32 }
            .emit(buf, self.layout);
    }

    fn end_datagram(&self, buf: &mut [u8], sent: u64, attempt: u32, sent_ns: u64) -> bool {
        if self.fin_once && attempt > 0 {
            return false;
        }
        self.fin(buf, sent, attempt, sent_ns);
        true
    }

    fn is_end_reply(&self, reply: &[u8]) -> bool {
        ServerReport::parse_reply(reply).is_some()
    }

    fn start_request(&self) -> Option<&[u8]> {
        (!self.request.is_empty()).then_some(&self.request[..])
    }

    fn end_of_stream(&self, buf: &[u8]) -> Option<u64> {
        // The FIN is −(last + 1): 2.1 numbers data from 1 (last = the count), 2.0.5 from 0.
        let h = UdpHeader::parse(buf, self.layout).filter(|h| h.seq < 0)?;
        Some(h.seq.unsigned_abs().saturating_sub(self.first_seq()))
    }

    fn classify(&self, buf: &[u8]) -> Received {
        match UdpHeader::parse(buf, self.layout) {
            None => Received::Foreign,
            // A FIN (or any negative number) ends the stream: not data for the receiver's ledger.
            Some(h) if h.seq < 0 => Received::Control,
            Some(h) if (h.seq as u64) < self.first_seq() => Received::Control,
            Some(h) => {
                let wall = u64::from(h.sec) * 1_000_000_000 + u64::from(h.usec) * 1000;
                Received::Data {
                    stream_id: 1,
                    sequence: h.seq as u64 - self.first_seq(),
                    sent_ns: wall.saturating_sub(self.epoch_ns),
                }
            }
        }
    }
}

/// lwIP lwiperf's side of the protocol (lwip `src/apps/lwiperf/lwiperf.c`).
pub mod lwiperf {
    use super::{Amount, ClientHeader};

    /// The preamble netchar writes to an lwiperf server: the 24-byte v1 header twice, as
    /// lwiperf's own client does (its server strips a header from the first segment and
    /// again from the next, checking them against each other only with VERSION1 set).
    /// Flags 0: no dial-back.
    pub fn client_preamble(amount: Amount, port: u16) -> Vec<u8> {
        let mut h = ClientHeader::new(amount, 0, port);
        h.num_threads = 1;
        let one = h.encode(super::Layout::V205);
        [one.clone(), one].concat()
    }

    /// The bytes of stream offset `at` that an lwiperf server strips and does not count:
    /// the check points at 0 and at 24 + k·128 KiB carry a header when a segment starts there.
    pub fn is_check_point(at: u64) -> bool {
        at == 0 || (at >= 24 && (at - 24).is_multiple_of(super::LWIPERF_CHECK_INTERVAL))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    /// The first 60 bytes of `iperf -c 127.0.0.1 -p 25004 -n 1000000` (Debian iperf 2.1.8),
    /// read by a plain TCP listener on loopback (2026-11-23).
    const TCP_21: &str = "40010078 00000001 000061ac 00000000 00000000 000f4240 00000000 00000000
        00000000 00020001 00080003 00000000 00000000 00000000 00000000";

    /// The first 92 bytes (16 of datagram header, a 76-byte client header) of datagram 1 of `iperf -c 127.0.0.1 -u -p 25001 -b 1M -t 1 -l 200`
    /// (Debian iperf 2.1.8, tcpdump on loopback, 2026-11-23).
    const UDP_21: &str = "00000001 6b03ea80 000e38bd 00000000 48010098 00000001 000061a9 000000c8
        00000000 ffffff9c 00000000 00000000 00000000 00020001 00080003 00000000 00100000 00000000 00000000
        00000000 00000000 00000000 00000000";

    /// The server's answer to that test's FIN (`iperf -s -u -p 25001`, Debian 2.1.8): 128 bytes.
    const REPORT_21: &str = "00000000 00000000 00000000 00000000 88000000 00000000 000202d8 00000001
        00000b93 00000000 00000000 00000293 00000000 00000000 00000000 00000003 00000000 00000065
        00000000 00001541 00000000 00000008 00003399 000a127b 00000000 00000000 00000293 00000291
        00000001 00000000 00000000 00000000";

    #[test]
    fn decodes_a_captured_21_tcp_header() {
        let b = hex(TCP_21);
        assert_eq!(b.len(), 60);
        let (h, len) = ClientHeader::decode(&b).unwrap().unwrap();
        assert_eq!(len, 60);
        assert_eq!(h.amount(), Amount::Bytes(1_000_000));
        assert_eq!(h.port, 25004);
        assert_eq!(h.software().1.as_deref(), Some("2.1.8"));
        assert!(h.expects_ack());
        assert!(!h.reverse());
        assert_eq!(h.dial_back(), None);
        // netchar's own encoding of the same settings is the same bytes.
        let mut ours = ClientHeader::new(Amount::Bytes(1_000_000), 0, 25004);
        ours.ext = h.ext;
        assert_eq!(ours.encode(Layout::V21), b);
    }

    #[test]
    fn decodes_a_captured_21_udp_datagram() {
        let b = hex(UDP_21);
        assert_eq!(UdpHeader::sniff_layout(&b), Layout::V21);
        let d = UdpHeader::parse(&b, Layout::V21).unwrap();
        assert_eq!(d.seq, 1);
        assert_eq!((d.sec, d.usec), (0x6b03ea80, 0x000e38bd));
        let (h, len) = ClientHeader::decode(&b[16..]).unwrap().unwrap();
        assert_eq!(len, 76, "LEN_BIT length 0x98 >> 1");
        assert_eq!(h.amount(), Amount::Seconds(1.0));
        assert_eq!(h.buf_len, 200);
        assert_eq!(h.ext.unwrap().rate(), 1 << 20);
        assert_eq!(h.flags & HEADER_SEQNO64B, HEADER_SEQNO64B);
        let f = UdpFormat::new(Layout::V21, 0x6b03ea80 * 1_000_000_000, Vec::new());
        assert_eq!(f.classify(&b), Received::Data { stream_id: 1, sequence: 0, sent_ns: 0x000e38bd * 1000 });
    }

    #[test]
    fn decodes_a_captured_21_server_report() {
        let b = hex(REPORT_21);
        assert_eq!(b.len(), 128);
        let (r, layout) = ServerReport::parse_reply(&b).unwrap();
        assert_eq!(layout, Layout::V21);
        assert_eq!(r.bytes, 131_800);
        assert_eq!(r.datagrams, 659);
        assert_eq!((r.lost, r.out_of_order), (0, 0));
        assert_eq!((r.stop_sec, r.stop_usec), (1, 2963));
        // Re-encoded, the fields this codec carries come back the same.
        let again = r.reply(Layout::V21, &[]);
        assert_eq!(ServerReport::parse_reply(&again).unwrap().0, r);
        assert_eq!(again.len(), 128);
    }

    #[test]
    fn udp_settings_match_the_captured_client() {
        let b = hex(UDP_21);
        let ours = ClientHeader::udp_settings(Layout::V21, Amount::Seconds(1.0), 200, 1 << 20, 25001);
        assert_eq!(ours, b[16..]);
        let old = ClientHeader::udp_settings(Layout::V205, Amount::Seconds(1.0), 200, 1 << 20, 25001);
        assert_eq!(old.len(), 24);
        assert_eq!(ClientHeader::decode(&old).unwrap().unwrap().1, 4, "flags 0: a server reads the flags word");
    }

    #[test]
    fn the_fin_of_the_captured_test() {
        // 658 data datagrams (1..=658), then FIN −659 with id2 0xFFFFFFFF: fffffd6d ... ffffffff.
        let f = UdpFormat::new(Layout::V21, 0, Vec::new());
        let mut b = [0u8; 16];
        f.fin(&mut b, 658, 0, 0);
        assert_eq!(&b[0..4], &hex("fffffd6d")[..]);
        assert_eq!(&b[12..16], &hex("ffffffff")[..]);
        assert_eq!(f.classify(&b), Received::Control);
        f.fin(&mut b, 658, 2, 0);
        assert_eq!(UdpHeader::parse(&b, Layout::V21).unwrap().seq, -661);
        // 2.0.5 counts from 0: after 10 datagrams (0..=9) the FIN is −10.
        let old = UdpFormat::new(Layout::V205, 0, Vec::new());
        let mut b = [0u8; 12];
        old.fin(&mut b, 10, 0, 0);
        assert_eq!(UdpHeader::parse(&b, Layout::V205).unwrap().seq, -10);
    }

    /// The first 92 bytes of the one datagram `iperf -c 127.0.0.1 -u -p 25341 -R -t 1 -b 1M
    /// -l 1000` sends (Debian iperf 2.1.8, tcpdump on loopback, 2026-11-23); the rest of its
    /// 1000 bytes are zero. The server answered with data 1..=133 and the FIN ffffff7a (−134).
    const UDP_REVERSE_21: &str = "00000001 6b041769 000bc55e 00000000 6c010098 00000001 000062fd 000003e8
        00000000 ffffff9c 00000000 00000000 04000000 00020001 00080003 00000000 00100000 00000000 00000000
        00000000 00000000 00000000 00000000";

    #[test]
    fn udp_reverse_request_matches_the_captured_client() {
        let b = hex(UDP_REVERSE_21);
        let wall = 0x6b041769u64 * 1_000_000_000 + 0x000bc55e * 1000;
        let ours = ClientHeader::udp_reverse_request(Amount::Seconds(1.0), 1000, 1 << 20, 25341, wall);
        assert_eq!(ours.len(), 1000);
        assert_eq!(&ours[..b.len()], &b[..]);
        assert!(ours[b.len()..].iter().all(|&x| x == 0));
        let (h, _) = ClientHeader::decode(&ours[16..]).unwrap().unwrap();
        assert!(h.reverse());
        // The server's FIN after 133 data datagrams.
        let f = UdpFormat::new(Layout::V21, 0, Vec::new());
        let mut fin = [0u8; 16];
        fin[..4].copy_from_slice(&hex("ffffff7a"));
        fin[12..].copy_from_slice(&hex("ffffffff"));
        assert_eq!(f.end_of_stream(&fin), Some(133));
        assert_eq!(f.classify(&fin), Received::Control);
        let mut data = [0u8; 16];
        f.emit(&mut data, 1, 5, 0);
        assert_eq!(f.end_of_stream(&data), None);
    }

    /// A server's `-R` sender: data numbered from 1 with no settings after the header, and
    /// one FIN, −(last + 1), that awaits no report.
    #[test]
    fn a_reverse_senders_fin_goes_once() {
        let f = UdpFormat::new(Layout::V21, 1_700_000_000_000_000_000, Vec::new()).with_fin_once();
        assert_eq!(f.header_len(), 16);
        let mut b = [0u8; 16];
        f.emit(&mut b, 1, 0, 0);
        assert_eq!(UdpHeader::parse(&b, Layout::V21).map(|h| (h.seq, h.sec)), Some((1, 1_700_000_000)));
        assert!(f.end_datagram(&mut b, 250, 0, 0));
        assert_eq!(UdpHeader::parse(&b, Layout::V21).map(|h| h.seq), Some(-251));
        assert!(!f.end_datagram(&mut b, 250, 1, 0), "no second try");
        assert!(
            UdpFormat::new(Layout::V21, 0, Vec::new()).end_datagram(&mut b, 250, 1, 0),
            "a client's FIN is repeated"
        );
    }

    #[test]
    fn header_lengths_follow_the_servers_rule() {
        assert_eq!(ClientHeader::wire_len(&[0, 0, 0, 0]), Some(4));
        assert_eq!(ClientHeader::wire_len(&[0x80, 0, 0, 0]), Some(24));
        assert_eq!(ClientHeader::wire_len(&[0x04, 0, 0, 0]), Some(60));
        assert_eq!(ClientHeader::wire_len(&[0x40, 0, 0, 0]), Some(60));
        assert_eq!(ClientHeader::wire_len(&hex("40010080")), Some(64), "2.2's plain TCP header");
        assert_eq!(ClientHeader::wire_len(&[0x40, 0]), None);
        let h22 = ClientHeader::new(Amount::Seconds(10.0), 0, 5001).encode(Layout::V22);
        assert_eq!(&h22[..4], &hex("40010080")[..]);
        assert_eq!(ClientHeader::decode(&h22).unwrap().unwrap().0.software().1.as_deref(), Some("2.2.0"));
    }

    #[test]
    fn reverse_and_dial_back_flags() {
        let mut h = ClientHeader::new(Amount::Seconds(1.0), 0, 5001);
        h.flags = HEADER_VERSION2;
        h.ext = Some(Extension { upper_flags: UPPER_REVERSE, version_u: 0x20001, ..Extension::default() });
        let b = h.encode(Layout::V21);
        assert_eq!(&b[..4], &hex("44010078")[..], "2.1.8's -R flags word");
        let back = ClientHeader::decode(&b).unwrap().unwrap().0;
        assert!(back.reverse() && !back.expects_ack());
        let d = ClientHeader { flags: HEADER_VERSION1 | RUN_NOW, ..ClientHeader::default() };
        assert_eq!(d.dial_back(), Some(DialBack::Dual));
        let r = ClientHeader { flags: HEADER_VERSION1, ..ClientHeader::default() };
        assert_eq!(r.dial_back(), Some(DialBack::Tradeoff));
    }

    #[test]
    fn a_205_report_sits_at_offset_12() {
        let r = ServerReport { bytes: 1470 * 9, datagrams: 9, lost: 1, ..ServerReport::default() };
        let fin = [0xFFu8, 0xFF, 0xFF, 0xF6, 1, 2, 3, 4, 5, 6, 7, 8];
        let reply = r.reply(Layout::V205, &fin);
        assert_eq!(reply.len(), 52, "a 2.0.5 client needs at least 52 bytes");
        assert_eq!(&reply[..12], &fin);
        let (back, layout) = ServerReport::parse_reply(&reply).unwrap();
        assert_eq!(layout, Layout::V205);
        assert_eq!(back.bytes, r.bytes);
        assert_eq!(back.lost, 1);
    }

    #[test]
    fn lwiperf_preamble_is_the_v1_header_twice() {
        let p = lwiperf::client_preamble(Amount::Seconds(10.0), 5001);
        assert_eq!(p.len(), 48);
        assert_eq!(p[..24], p[24..]);
        assert_eq!(&p[..24], &hex("00000000 00000001 00001389 00000000 00000000 fffffc18")[..]);
        assert!(lwiperf::is_check_point(0) && lwiperf::is_check_point(24) && lwiperf::is_check_point(24 + 131_072));
        assert!(!lwiperf::is_check_point(48));
    }

    fn arb_ext() -> impl Strategy<Value = Option<Extension>> {
        proptest::option::of(
            (any::<u16>(), any::<u16>(), any::<u32>(), any::<u32>(), any::<u16>(), any::<u32>(), any::<u32>())
                .prop_map(|(u, l, vu, vl, tos, lo, hi)| Extension {
                    upper_flags: u,
                    lower_flags: l,
                    version_u: vu,
                    version_l: vl,
                    tos,
                    rate_low: lo,
                    rate_high: hi,
                }),
        )
    }

    proptest! {
        #[test]
        fn client_headers_round_trip(
            flags in any::<u32>(), t in any::<i32>(), port in any::<i32>(), l in any::<i32>(),
            w in any::<i32>(), a in any::<i32>(), ext in arb_ext(), v22 in any::<bool>()
        ) {
            let layout = if v22 { Layout::V22 } else { Layout::V21 };
            let h = ClientHeader { flags, num_threads: t, port, buf_len: l, win_band: w, amount: a, ext };
            let b = h.encode(layout);
            let (back, len) = ClientHeader::decode(&b).unwrap().unwrap();
            prop_assert_eq!(len, b.len());
            prop_assert_eq!((back.num_threads, back.port, back.buf_len, back.win_band, back.amount), (t, port, l, w, a));
            if let Some(e) = ext {
                prop_assert_eq!(back.ext, Some(e));
            }
            // 2.0.5 layout: the base header alone, flags as given (kept short of EXTEND's rule).
            let v1 = ClientHeader { flags: flags & HEADER_VERSION1, ext: None, ..h };
            let b = v1.encode(Layout::V205);
            let decoded = ClientHeader::decode(&b).unwrap();
            if flags & HEADER_VERSION1 != 0 {
                prop_assert_eq!(decoded, Some((v1, 24)));
            } else {
                prop_assert_eq!(decoded.map(|d| d.1), Some(4));
            }
        }

        #[test]
        fn datagrams_round_trip(seq in any::<u64>(), t in 0u64..4_000_000_000_000_000_000, v205 in any::<bool>()) {
            let layout = if v205 { Layout::V205 } else { Layout::V21 };
            let f = UdpFormat::new(layout, 0, vec![7; 24]);
            let seq = if v205 { seq % 0x7FFF_FFFF } else { seq % (i64::MAX as u64 - 1) };
            let mut b = vec![0u8; f.header_len() + 10];
            f.emit(&mut b, 1, seq, t);
            let sent_ns = t - t % 1000;
            prop_assert_eq!(f.classify(&b), Received::Data { stream_id: 1, sequence: seq, sent_ns });
            prop_assert_eq!(&b[layout.datagram_header_len()..f.header_len()], &[7u8; 24][..]);
        }

        #[test]
        fn reports_round_trip(
            bytes in any::<u64>(), s in any::<u32>(), us in any::<u32>(), lost in any::<u64>(),
            ooo in any::<u64>(), n in any::<u64>(), js in any::<u32>(), ju in any::<u32>()
        ) {
            let r = ServerReport {
                flags: HEADER_VERSION1 | HEADER_SEQNO64B, bytes, stop_sec: s, stop_usec: us, lost,
                out_of_order: ooo, datagrams: n, jitter_sec: js, jitter_usec: ju,
            };
            prop_assert_eq!(ServerReport::parse_reply(&r.reply(Layout::V21, &[])), Some((r, Layout::V21)));
        }

        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..400)) {
            if let Ok(Some((_, len))) = ClientHeader::decode(&b) {
                prop_assert!(len <= b.len() && len <= MAX_HEADER_LEN);
            }
            let _ = ClientHeader::wire_len(&b);
            let _ = ServerReport::parse_reply(&b);
            let _ = ServerReport::decode(&b);
            let _ = UdpHeader::sniff_layout(&b);
            for layout in [Layout::V205, Layout::V21] {
                let _ = UdpHeader::parse(&b, layout);
                let _ = UdpFormat::new(layout, 123, Vec::new()).classify(&b);
            }
        }
    }
}
