//! What a test is: the kind, the direction, the streams, when it ends and the socket options.
//!
//! A [`TestSpec`] travels from client to server in the control protocol, so both ends run the
//! same test. Validation lives in [`TestSpec::validate`], which both the command line and the
//! server call: the server never trusts a spec because the client validated it.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Which protocol and pattern of traffic a test runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestKind {
    /// Bulk TCP throughput.
    Tcp,
    /// UDP datagram streams: paced or unpaced, with loss, reordering, duplicates and jitter.
    Udp,
    /// Request/response transactions: round-trip latency and transactions per second.
    Rr,
}

impl TestKind {
    /// `tcp`, `udp` or `rr`, as the command line and the logs name it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Tcp => "tcp",
            Self::Udp => "udp",
            Self::Rr => "rr",
        }
    }
}

/// Request/response options (`netchar rr`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RrOptions {
    /// Transactions over UDP datagrams instead of a TCP connection.
    pub udp: bool,
    /// Request bytes (`-l`).
    pub request_bytes: u64,
    /// Response bytes (`--response`).
    pub response_bytes: u64,
    /// Transactions outstanding per connection (`--inflight`).
    pub inflight: u32,
    /// UDP: a request without a reply after this many seconds is lost (`--timeout`).
    pub timeout_seconds: f64,
    /// Spin on non-blocking receives instead of sleeping in the kernel (`--busy-poll`).
    pub busy_poll: bool,
    /// UDP: stamp every answer in the kernel (SO_TIMESTAMPNS) to split each round trip into
    /// the wait to be woken and the rest (`--wakeup-stamps`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub wakeup_stamps: bool,
    /// A new TCP connection per transaction: connect, request, response, close (`netchar crr`).
    #[serde(default)]
    pub connect_per_transaction: bool,
    /// Pause after every this many transactions (`netchar echo --pattern N@GAP`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_every: Option<u64>,
    /// The pause, in seconds.
    #[serde(default)]
    pub pause_seconds: f64,
}

impl Default for RrOptions {
    fn default() -> Self {
        Self {
            udp: false,
            request_bytes: 1,
            response_bytes: 1,
            inflight: 1,
            timeout_seconds: 1.0,
            busy_poll: false,
            wakeup_stamps: false,
            connect_per_transaction: false,
            pause_every: None,
            pause_seconds: 0.0,
        }
    }
}

/// How fast UDP senders go.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UdpRate {
    /// Bits per second of UDP payload (`-b`); for the whole test unless `per_stream`.
    BitsPerSecond(u64),
    /// Datagrams per second (`--pps`); for the whole test unless `per_stream`.
    PacketsPerSecond(u64),
    /// As fast as the sender can (`-b 0`).
    Unlimited,
}

/// A burst-and-gap pattern and/or an exact list of datagram counts and sizes (`--pattern`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Pattern {
    /// Send exactly these (count, payload bytes) in order, then stop. Empty: no fixed list.
    pub sizes: Vec<(u64, u64)>,
    /// Bursts of this many datagrams, each followed by a pause.
    pub burst: Option<u64>,
    /// The pause after each burst, in seconds.
    pub gap_seconds: f64,
}

impl Pattern {
    /// Parses `640x1024`, `10@10ms`, or both comma-separated (`640x1024,10@10ms`), as the eCos
    /// nc_test suite's "[640,1024]" buffers and "10ms delay after 10 packets".
    pub fn parse(spec: &str) -> Result<Self, String> {
        let mut p = Self::default();
        for item in spec.split(',').map(str::trim) {
            if let Some((count, size)) = item.split_once(['x', 'X']) {
                let count = crate::units::parse_bytes(count).map_err(|e| format!("count in {item:?}: {e}"))?;
                let size = crate::units::parse_bytes(size).map_err(|e| format!("size in {item:?}: {e}"))?;
                if count == 0 || size == 0 {
                    return Err(format!("{item:?}: count and size must be at least 1"));
                }
                p.sizes.push((count, size));
            } else if let Some((n, gap)) = item.split_once('@') {
                let n: u64 =
                    n.trim().parse().map_err(|_| format!("{item:?}: burst size {n:?} is not a whole number"))?;
                if n == 0 || p.burst.is_some() {
                    return Err(format!("{item:?}: one burst of at least 1 datagram"));
                }
                p.burst = Some(n);
                p.gap_seconds = parse_duration(gap)
                    .ok_or_else(|| format!("{item:?}: gap {gap:?} is not a duration like 10ms, 1s, 500us"))?;
            } else {
                return Err(format!("{item:?}: expected COUNTxSIZE (e.g. 640x1024) or BURST@GAP (e.g. 10@10ms)"));
            }
        }
        Ok(p)
    }

    /// Datagrams the size list sends in all (None without a list).
    pub fn total_datagrams(&self) -> Option<u64> {
        (!self.sizes.is_empty()).then(|| self.sizes.iter().fold(0u64, |n, (c, _)| n.saturating_add(*c)))
    }
}

/// Parses `10ms`, `1.5s`, `500us`, `250000ns` into seconds.
pub fn parse_duration(s: &str) -> Option<f64> {
    let s = s.trim();
    let (num, scale) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = s.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = s.strip_suffix("ns") {
        (n, 1e-9)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else {
        return None;
    };
    let v: f64 = num.trim().parse().ok()?;
    (v.is_finite() && v >= 0.0).then_some(v * scale)
}

/// Longest `--pacing-quantum`: a batch sent that far ahead of its slots shortens the receiver's
/// measured time by as much, so longer quanta would skew short tests' receive rates.
pub const MAX_PACING_QUANTUM_SECONDS: f64 = 0.01;

/// UDP options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UdpOptions {
    /// Target rate.
    pub rate: UdpRate,
    /// The rate applies to each stream, not to the whole test.
    pub per_stream: bool,
    /// Burst/gap pattern and exact size list.
    pub pattern: Option<Pattern>,
    /// How long receivers keep listening after the sender's last datagram, in seconds.
    pub grace_seconds: f64,
    /// Use UDP GSO on the sender where the kernel has it.
    pub gso: bool,
    /// Use UDP GRO on the receiver (its figures are then labelled coalesced).
    pub gro: bool,
    /// Paced senders send the datagrams due within this many seconds as one batch (0: each
    /// datagram at its own time). Trades a short burst for far less sender CPU at high rates.
    #[serde(default)]
    pub pacing_quantum_seconds: f64,
    /// Datagrams go out with a UDP checksum of zero (SO_NO_CHECK, `--no-udp-checksum`): IPv4
    /// only, where the checksum is optional (RFC 768). Saves the sender computing it where the
    /// NIC would not; left out of the JSON when off.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_checksum: bool,
    /// Senders build whole frames and send them through an AF_XDP socket on this interface
    /// queue (`--xdp IFACE[:QUEUE]`), past the kernel's UDP and IP send path; None: the UDP
    /// socket. Left out of the JSON when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xdp: Option<XdpSend>,
}

/// Where an AF_XDP sender sends (`--xdp IFACE[:QUEUE]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct XdpSend {
    /// The interface the route to the peer leaves by.
    pub interface: String,
    /// Its transmit queue (0 unless given).
    pub queue: u32,
    /// `--xdp-live`: the frames go out through the kernel's XDP live-frames mode (an XDP
    /// program redirecting each to the interface, no socket buffer per frame) instead of an
    /// AF_XDP socket. Left out of the JSON when off.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub live: bool,
}

impl Default for UdpOptions {
    fn default() -> Self {
        Self {
            rate: UdpRate::BitsPerSecond(1_000_000),
            per_stream: false,
            pattern: None,
            grace_seconds: 0.25,
            gso: true,
            gro: false,
            pacing_quantum_seconds: 0.0,
            no_checksum: false,
            xdp: None,
        }
    }
}

/// Which way the data flows, seen from the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Client sends, server receives.
    Up,
    /// Server sends, client receives (`-R`).
    Down,
    /// Both at once, each stream count in each direction (`--bidir`).
    Bidir,
}

impl Direction {
    /// The one-way flows this direction is made of.
    pub fn flows(self) -> &'static [Flow] {
        match self {
            Self::Up => &[Flow::Up],
            Self::Down => &[Flow::Down],
            Self::Bidir => &[Flow::Up, Flow::Down],
        }
    }
}

/// One way of data: client to server (`Up`) or server to client (`Down`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Flow {
    /// Client to server.
    Up,
    /// Server to client.
    Down,
}

impl Flow {
    /// `up` or `down`, as JSON keys and text output name it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Up => "up",
            Self::Down => "down",
        }
    }
}

/// When the senders stop.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndCondition {
    /// After this many seconds of sending (`-t`).
    Seconds(f64),
    /// After exactly this many bytes per flow, split across the flow's streams (`-n`).
    Bytes(u64),
}

/// TCP socket options, applied on both ends where they make sense.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TcpOptions {
    /// SO_SNDBUF / SO_RCVBUF in bytes (`-w`); None leaves kernel autotuning alone.
    pub window_bytes: Option<u64>,
    /// TCP_MAXSEG (`-M`).
    pub mss: Option<u32>,
    /// TCP_NODELAY (`-N`).
    pub nodelay: bool,
    /// TCP_CONGESTION algorithm name (`-C`).
    pub congestion: Option<String>,
    /// Send with MSG_ZEROCOPY (`--zerocopy`).
    pub zerocopy: bool,
    /// TCP receivers discard the payload in the kernel (`recv` with `MSG_TRUNC`) instead of
    /// copying it out (`--skip-rx-copy`). Left out of the JSON when off, so peers built before
    /// it read the spec as before.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skip_rx_copy: bool,
    /// TCP receivers are woken for every segment that arrives, as iperf3's are
    /// (`--rx-wake-per-segment`), instead of once per batch of about 0.5 ms of data
    /// (`SO_RCVLOWAT`). Left out of the JSON when off.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub wake_per_segment: bool,
    /// Cap of each stream's send rate in bits per second (`-b`); None = as fast as possible.
    pub rate_bps_per_stream: Option<u64>,
}

/// IP-level options of every data socket, on both ends and in both directions: the far end
/// applies them to its own sockets too, so its packets (data, or acknowledgements and answers)
/// carry them as well. Left out of the JSON when none is set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpOptions {
    /// The TOS byte (IPv4) or traffic class (IPv6) of every data packet: the DSCP in its upper
    /// six bits, ECN in the lower two (`--tos`; `--dscp` sets the DSCP, shifted left by two).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tos: Option<u8>,
    /// The IPv6 flow label of every data packet, 1 to 0xFFFFF (`--flowlabel`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flowlabel: Option<u32>,
    /// Never fragment (`--df`: IP_PMTUDISC_DO, IPV6_DONTFRAG): a UDP datagram larger than the
    /// path MTU is refused by the kernel and counted as a send error, TCP sizes its segments to
    /// the path MTU it learns, and each stream reports that path MTU.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dont_fragment: bool,
}

impl IpOptions {
    /// True when no option is set.
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// The DSCP names (RFC 2474 class selectors, RFC 2597 assured forwarding, RFC 3246 expedited
/// forwarding, RFC 5865 voice-admit, RFC 8622 lower effort) and their code points.
pub const DSCP_NAMES: &[(&str, u8)] = &[
    ("cs0", 0),
    ("df", 0),
    ("le", 1),
    ("cs1", 8),
    ("af11", 10),
    ("af12", 12),
    ("af13", 14),
    ("cs2", 16),
    ("af21", 18),
    ("af22", 20),
    ("af23", 22),
    ("cs3", 24),
    ("af31", 26),
    ("af32", 28),
    ("af33", 30),
    ("cs4", 32),
    ("af41", 34),
    ("af42", 36),
    ("af43", 38),
    ("cs5", 40),
    ("va", 44),
    ("ef", 46),
    ("cs6", 48),
    ("cs7", 56),
];

/// A whole number written in decimal or in hexadecimal with `0x`.
fn parse_small(s: &str) -> Option<u32> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Parses `--tos`: the whole TOS byte, 0 to 255, in decimal or `0x` hexadecimal (`0xb8`).
pub fn parse_tos(s: &str) -> Result<u8, String> {
    parse_small(s)
        .and_then(|v| u8::try_from(v).ok())
        .ok_or_else(|| "expected the TOS byte, 0 to 255 (e.g. 184 or 0xb8; --dscp ef says the same)".into())
}

/// Parses `--dscp`: a name of [`DSCP_NAMES`] (`ef`, `af41`, `cs1`, any case) or a code point
/// 0 to 63; returns the code point.
pub fn parse_dscp(s: &str) -> Result<u8, String> {
    let lower = s.trim().to_ascii_lowercase();
    if let Some(&(_, v)) = DSCP_NAMES.iter().find(|(n, _)| *n == lower) {
        return Ok(v);
    }
    parse_small(&lower)
        .and_then(|v| u8::try_from(v).ok())
        .filter(|&v| v < 64)
        .ok_or_else(|| "expected a DSCP name (ef, af11 to af43, cs0 to cs7, va, le, df) or a code point 0 to 63".into())
}

/// The name of DSCP `code` (`ef`), the class selectors' and `df` for 0 included.
pub fn dscp_name(code: u8) -> Option<&'static str> {
    DSCP_NAMES.iter().find(|&&(n, v)| v == code && n != "cs0").map(|(n, _)| *n)
}

/// The largest IPv6 flow label (20 bits).
pub const MAX_FLOWLABEL: u32 = 0xF_FFFF;

/// Everything both ends need to run one test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestSpec {
    /// Protocol and traffic pattern.
    pub kind: TestKind,
    /// Which way data flows.
    pub direction: Direction,
    /// Streams per flow (`-P`).
    pub streams: u32,
    /// When the senders stop.
    pub end: EndCondition,
    /// Bytes per write and per read (`-l`).
    pub block_bytes: u64,
    /// Seconds at the start excluded from the summary (`-O`).
    pub omit_seconds: f64,
    /// Seconds per interval report; 0 = no interval reports (`-i`).
    pub interval_seconds: f64,
    /// TCP options.
    pub tcp: TcpOptions,
    /// UDP options (UDP tests only).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub udp: Option<UdpOptions>,
    /// Request/response options (rr tests only).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rr: Option<RrOptions>,
    /// CPU the server pins its data workers to (`-A x,SERVERCPU`).
    pub server_cpu: Option<usize>,
    /// A background CPU load the server runs during the test: (percent of one CPU per
    /// thread, threads) (`--server-load`, `--server-load-threads`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_load: Option<(f64, u32)>,
    /// Both ends measure their idle headroom with idle-priority counters (`--idle`).
    #[serde(default)]
    pub measure_idle: bool,
    /// IP-level options of the data sockets, applied on both ends.
    #[serde(default, skip_serializing_if = "IpOptions::is_default")]
    pub ip: IpOptions,
    /// What the senders write (`--payload`); absent: netchar's constant pattern (rr: its
    /// constant request and response bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<crate::PayloadSpec>,
    /// Receivers compare every byte with the sender's generator and report what differed
    /// (`--verify`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub verify: bool,
}

/// A spec that cannot run, with the flag to blame.
#[derive(Debug, Error, PartialEq)]
pub enum SpecError {
    /// Options of another kind of test (UDP options on a TCP test, ...): a request that no
    /// client builds, refused so that no code reads unchecked values from it.
    #[error("{0}")]
    Inconsistent(String),
    /// A burst, gap or pause that no sender can follow.
    #[error("{0}")]
    Pattern(String),
    /// `-b 0` on TCP (the flag takes no rate for "as fast as possible").
    #[error("-b 0: a TCP rate cap must be more than 0 (leave -b out for as fast as possible)")]
    TcpRate,
    /// `-P` out of range.
    #[error("-P {0}: the number of streams must be between 1 and {MAX_STREAMS}")]
    Streams(u32),
    /// `-l` out of range.
    #[error("-l {0}: the block size must be between 1 byte and {MAX_BLOCK_BYTES} bytes")]
    BlockSize(u64),
    /// `-t` out of range.
    #[error("-t {0}: the duration must be more than 0 and at most {MAX_SECONDS} seconds")]
    Duration(f64),
    /// `-n 0`.
    #[error("-n 0: the byte count must be at least 1 byte per stream")]
    ByteCount,
    /// `-O` out of range.
    #[error("-O {0}: the warm-up must be at least 0 and shorter than the test")]
    Omit(f64),
    /// `-i` out of range.
    #[error("-i {0}: the interval must be 0 (off) or between 0.1 and 3600 seconds")]
    Interval(f64),
    /// `-M` out of range.
    #[error("-M {0}: the MSS must be between 88 and 65535")]
    Mss(u32),
    /// `-w` out of range.
    #[error("-w {0}: the socket buffer must be between 1 KiB and 1 GiB")]
    Window(u64),
    /// UDP payload out of range.
    #[error("-l {0}: a UDP payload must be between {UDP_HEADER_BYTES} bytes (netchar's datagram header) and {MAX_UDP_PAYLOAD} bytes")]
    UdpPayload(u64),
    /// An rr test without rr options.
    #[error("an rr test needs rr options")]
    MissingRr,
    /// Request or response size out of range.
    #[error("{0} {1}: must be between 1 and {2} bytes")]
    RrSize(&'static str, u64, u64),
    /// `--inflight` out of range.
    #[error("--inflight {0}: must be between 1 and {MAX_INFLIGHT} (over UDP, more than 1 needs requests and responses of at least 8 bytes to carry the sequence number)")]
    Inflight(u32),
    /// `--timeout` out of range.
    #[error("--timeout {0}: must be more than 0 and at most 60 seconds")]
    Timeout(f64),
    /// A UDP test without UDP options.
    #[error("a UDP test needs UDP options")]
    MissingUdp,
    /// A zero rate that is not `-b 0`.
    #[error("--pps 0: use -b 0 for as fast as possible")]
    Rate,
    /// `--grace` out of range.
    #[error("--grace {0}: must be between 0 and 60 seconds")]
    Grace(f64),
    /// `--pacing-quantum` out of range.
    #[error("--pacing-quantum {0} s: must be between 0 and 10 ms")]
    PacingQuantum(f64),
    /// `--server-load` out of range.
    #[error("--server-load {0} with {1} threads: the load is 0 to 100 (% of one CPU per thread), 1 to 64 threads")]
    ServerLoad(f64, u32),
    /// `-C` not a plausible algorithm name.
    #[error("-C {0:?}: a congestion control name is 1 to 15 letters, digits, '_' or '-'")]
    Congestion(String),
    /// `--flowlabel` out of range.
    #[error("--flowlabel {0}: a flow label is 1 to {MAX_FLOWLABEL} (20 bits)")]
    FlowLabel(u32),
    /// `--payload` or `--verify` with an option that cannot keep to it.
    #[error("{0}")]
    Payload(String),
}

/// The most streams per flow a test may ask for.
pub const MAX_STREAMS: u32 = 128;
/// The largest block a test may ask for.
pub const MAX_BLOCK_BYTES: u64 = 16 * 1024 * 1024;
/// netchar's TCP write (and read) length when `-l` is not given and the sender is not paced.
/// Four times iperf3's. On loopback (2 vCPUs, Linux 6.18, sender and receiver on CPUs of their
/// own) the sending CPU is the bound, and fewer, longer writes leave more of it for copying:
/// `perf record` of that CPU with four streams showed `_raw_spin_unlock_irqrestore` (where a
/// VM's wake-ups of the readers land) at 12% of it with 128 KiB writes and 5.5% with 512 KiB,
/// the copy at 39% and 52%. `bench/newest.sh` against the build that wrote 128 KiB, 7
/// alternated rounds: one stream ×1.21 (6/7 rounds), four ×1.11 (5/7). 1 and 2 MiB gained no
/// more than 512 KiB in direct sweeps.
pub const TCP_BLOCK_BYTES: u64 = 512 * 1024;
/// The TCP write length of a paced sender when `-l` is not given (a pause comes between
/// writes, so a smaller one keeps the bursts short), and the default of the peer tools whose
/// protocols netchar speaks (iperf3's and iperf2's `-l`).
pub const PACED_TCP_BLOCK_BYTES: u64 = 128 * 1024;
/// The most transactions a connection may keep outstanding.
pub const MAX_INFLIGHT: u32 = 4096;
/// netchar's UDP datagram header: the smallest UDP payload.
pub const UDP_HEADER_BYTES: u64 = 24;
/// The largest UDP payload over IPv4 (65535 − 20 − 8).
pub const MAX_UDP_PAYLOAD: u64 = 65_507;
/// The longest test, one day as iperf3 allows.
pub const MAX_SECONDS: f64 = 86_400.0;

impl TestSpec {
    /// A TCP test with the defaults of `netchar tcp`: up, one stream, 10 s, writes of
    /// [`TCP_BLOCK_BYTES`].
    pub fn tcp_default() -> Self {
        Self {
            kind: TestKind::Tcp,
            direction: Direction::Up,
            streams: 1,
            end: EndCondition::Seconds(10.0),
            block_bytes: TCP_BLOCK_BYTES,
            omit_seconds: 0.0,
            interval_seconds: 1.0,
            tcp: TcpOptions::default(),
            udp: None,
            rr: None,
            server_cpu: None,
            server_load: None,
            measure_idle: false,
            ip: IpOptions::default(),
            payload: None,
            verify: false,
        }
    }

    /// A UDP test with the defaults of `netchar udp`: up, one stream, 10 s, 1 Mbit/s, payload
    /// chosen from the address family once known (block_bytes 0 = not yet chosen).
    pub fn udp_default() -> Self {
        Self { kind: TestKind::Udp, block_bytes: 0, udp: Some(UdpOptions::default()), ..Self::tcp_default() }
    }

    /// A request/response test with the defaults of `netchar rr`: TCP, 1-byte request and
    /// response, one transaction in flight, one connection, 10 s.
    pub fn rr_default() -> Self {
        Self { kind: TestKind::Rr, block_bytes: 1, rr: Some(RrOptions::default()), ..Self::tcp_default() }
    }

    /// True when the data streams are UDP sockets.
    pub fn uses_udp(&self) -> bool {
        self.kind == TestKind::Udp || self.rr.as_ref().is_some_and(|r| r.udp)
    }

    /// How long receivers keep listening after the peer's senders finished: the UDP grace
    /// period. None for a UDP rr responder: its requester finishes only once every request it
    /// sent was answered or waited for for `--timeout` (and counted lost), so nothing it still
    /// reads could count; waiting the timeout again made every `rr --udp` a `--timeout` longer
    /// than `-t`.
    pub fn receive_grace_seconds(&self) -> f64 {
        let grace = match &self.udp {
            Some(u) => u.grace_seconds,
            None => 0.0,
        };
        // validate() bounds it to 60 s; a spec that skipped it still yields a wait that
        // Duration can hold.
        if grace.is_finite() {
            grace.clamp(0.0, 60.0)
        } else {
            0.0
        }
    }

    /// Datagrams per second stream `id` must send, None for unlimited.
    pub fn udp_pps_per_stream(&self) -> Option<f64> {
        let u = self.udp.as_ref()?;
        let share = if u.per_stream { 1.0 } else { f64::from(self.streams) };
        match u.rate {
            UdpRate::Unlimited => None,
            UdpRate::PacketsPerSecond(p) => Some(p as f64 / share),
            UdpRate::BitsPerSecond(b) => Some(b as f64 / 8.0 / self.block_bytes.max(1) as f64 / share),
        }
    }

    /// Checks every field against its range. Both the client and the server call this.
    pub fn validate(&self) -> Result<(), SpecError> {
        if self.streams == 0 || self.streams > MAX_STREAMS {
            return Err(SpecError::Streams(self.streams));
        }
        let (min_block, max_block) = match self.kind {
            TestKind::Tcp | TestKind::Rr => (1, MAX_BLOCK_BYTES),
            TestKind::Udp => (UDP_HEADER_BYTES, MAX_UDP_PAYLOAD),
        };
        if self.block_bytes < min_block || self.block_bytes > max_block {
            return Err(match self.kind {
                TestKind::Tcp | TestKind::Rr => SpecError::BlockSize(self.block_bytes),
                TestKind::Udp => SpecError::UdpPayload(self.block_bytes),
            });
        }
        let foreign = match self.kind {
            TestKind::Tcp if self.udp.is_some() || self.rr.is_some() => Some("a TCP test carries UDP or rr options"),
            TestKind::Udp if self.rr.is_some() => Some("a UDP test carries rr options"),
            TestKind::Rr if self.udp.is_some() => Some("an rr test carries UDP options"),
            _ => None,
        };
        if let Some(what) = foreign {
            return Err(SpecError::Inconsistent(what.into()));
        }
        if self.kind == TestKind::Rr {
            let r = self.rr.as_ref().ok_or(SpecError::MissingRr)?;
            let max = if r.udp { MAX_UDP_PAYLOAD } else { MAX_BLOCK_BYTES };
            for (flag, n) in [("-l", r.request_bytes), ("--response", r.response_bytes)] {
                if n == 0 || n > max {
                    return Err(SpecError::RrSize(flag, n, max));
                }
            }
            if r.inflight == 0 || r.inflight > MAX_INFLIGHT {
                return Err(SpecError::Inflight(r.inflight));
            }
            if r.udp && r.inflight > 1 && r.request_bytes.min(r.response_bytes) < 8 {
                // Replies are matched by a sequence number carried in the payload; 1..7 bytes
                // carry its low bytes, enough for one outstanding request but not for many.
                return Err(SpecError::Inflight(r.inflight));
            }
            if !(r.timeout_seconds > 0.0 && r.timeout_seconds <= 60.0) {
                return Err(SpecError::Timeout(r.timeout_seconds));
            }
            if r.pause_every == Some(0) || !(0.0..=MAX_SECONDS).contains(&r.pause_seconds) {
                return Err(SpecError::Pattern(format!(
                    "a pause of {} s every {:?} transactions: pauses are 0 to {MAX_SECONDS} s, after at least 1 transaction",
                    r.pause_seconds, r.pause_every
                )));
            }
        }
        if self.kind == TestKind::Udp {
            let u = self.udp.as_ref().ok_or(SpecError::MissingUdp)?;
            match u.rate {
                UdpRate::BitsPerSecond(0) | UdpRate::PacketsPerSecond(0) => return Err(SpecError::Rate),
                _ => {}
            }
            if !(0.0..=60.0).contains(&u.grace_seconds) {
                return Err(SpecError::Grace(u.grace_seconds));
            }
            if !(0.0..=MAX_PACING_QUANTUM_SECONDS).contains(&u.pacing_quantum_seconds) {
                return Err(SpecError::PacingQuantum(u.pacing_quantum_seconds));
            }
            if let Some(p) = &u.pattern {
                if let Some(&(_, size)) = p.sizes.iter().find(|(_, s)| *s < UDP_HEADER_BYTES || *s > MAX_UDP_PAYLOAD) {
                    return Err(SpecError::UdpPayload(size));
                }
                if p.sizes.iter().try_fold(0u64, |n, (c, _)| n.checked_add(*c)).is_none() {
                    return Err(SpecError::Pattern("--pattern: more than 2^64 datagrams in all".into()));
                }
                if p.burst == Some(0) || !(0.0..=MAX_SECONDS).contains(&p.gap_seconds) {
                    return Err(SpecError::Pattern(format!(
                        "--pattern: bursts of {:?} datagrams with {} s gaps: a burst is at least 1 datagram, a gap 0 to {MAX_SECONDS} s",
                        p.burst, p.gap_seconds
                    )));
                }
            }
        }
        match self.end {
            EndCondition::Seconds(s) if !(s > 0.0 && s <= MAX_SECONDS) => return Err(SpecError::Duration(s)),
            EndCondition::Bytes(n) if n < u64::from(self.streams) => return Err(SpecError::ByteCount),
            _ => {}
        }
        let too_long = matches!(self.end, EndCondition::Seconds(s) if self.omit_seconds >= s);
        if !(self.omit_seconds >= 0.0 && self.omit_seconds <= MAX_SECONDS) || too_long {
            return Err(SpecError::Omit(self.omit_seconds));
        }
        let i = self.interval_seconds;
        if !(i == 0.0 || (0.1..=3600.0).contains(&i)) {
            return Err(SpecError::Interval(i));
        }
        if let Some((pct, threads)) = self.server_load {
            if !(0.0..=100.0).contains(&pct) || threads == 0 || threads > 64 {
                return Err(SpecError::ServerLoad(pct, threads));
            }
        }
        if self.tcp.rate_bps_per_stream == Some(0) {
            return Err(SpecError::TcpRate);
        }
        if let Some(m) = self.tcp.mss {
            if !(88..=65535).contains(&m) {
                return Err(SpecError::Mss(m));
            }
        }
        if let Some(w) = self.tcp.window_bytes {
            if !(1024..=1 << 30).contains(&w) {
                return Err(SpecError::Window(w));
            }
        }
        if let Some(l) = self.ip.flowlabel {
            if !(1..=MAX_FLOWLABEL).contains(&l) {
                return Err(SpecError::FlowLabel(l));
            }
        }
        self.validate_payload()?;
        if let Some(c) = &self.tcp.congestion {
            let ok = !c.is_empty()
                && c.len() <= 15
                && c.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-');
            if !ok {
                return Err(SpecError::Congestion(c.clone()));
            }
        }
        Ok(())
    }

    /// `--payload` and `--verify` against the options that would break them.
    fn validate_payload(&self) -> Result<(), SpecError> {
        let kind = self.payload.map(|p| p.kind).unwrap_or_default();
        let refuse = |what: &str| Err(SpecError::Payload(what.into()));
        if self.verify && self.tcp.skip_rx_copy {
            return refuse("--verify reads every byte: not with --skip-rx-copy, which discards them unread");
        }
        if self.tcp.zerocopy && (self.verify || !kind.is_constant()) {
            return refuse(
                "--zerocopy sends one constant buffer from its start, not the stream's generator: \
                 not with --verify or --payload random/stackthru",
            );
        }
        let crr = self.rr.as_ref().is_some_and(|r| r.connect_per_transaction);
        if crr && (self.verify || self.payload.is_some()) {
            return refuse(
                "crr: --payload and --verify apply to rr (one connection), not to a connection per transaction",
            );
        }
        Ok(())
    }

    /// The stream ids of `flow`, numbered from 1: up streams first, then down streams.
    pub fn stream_ids(&self, flow: Flow) -> std::ops::RangeInclusive<u32> {
        let p = self.streams;
        let first = match (self.direction, flow) {
            (Direction::Bidir, Flow::Down) => p + 1,
            _ => 1,
        };
        first..=first + p - 1
    }

    /// Total data streams the client opens.
    pub fn total_streams(&self) -> u32 {
        self.streams * self.direction.flows().len() as u32
    }

    /// Which flow stream `id` carries.
    pub fn flow_of(&self, id: u32) -> Option<Flow> {
        self.direction.flows().iter().copied().find(|f| self.stream_ids(*f).contains(&id))
    }

    /// The exact byte budget of stream `id` under `-n`: the flow's total split evenly, the
    /// remainder going to the first streams, so the budgets add up to the total exactly.
    pub fn byte_budget(&self, id: u32) -> Option<u64> {
        let EndCondition::Bytes(total) = self.end else {
            return None;
        };
        let flow = self.flow_of(id)?;
        let index = u64::from(id - self.stream_ids(flow).start());
        let p = u64::from(self.streams);
        Some(total / p + u64::from(index < total % p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate() {
        assert_eq!(TestSpec::tcp_default().validate(), Ok(()));
    }

    #[test]
    fn out_of_range_values_name_their_flag() {
        let mut s = TestSpec::tcp_default();
        s.streams = 0;
        assert!(s.validate().unwrap_err().to_string().starts_with("-P 0"));
        let mut s = TestSpec::tcp_default();
        s.block_bytes = 0;
        assert!(s.validate().unwrap_err().to_string().starts_with("-l 0"));
        let mut s = TestSpec::tcp_default();
        s.end = EndCondition::Seconds(-1.0);
        assert!(s.validate().unwrap_err().to_string().starts_with("-t -1"));
        let mut s = TestSpec::tcp_default();
        s.omit_seconds = 10.0;
        assert_eq!(s.validate(), Err(SpecError::Omit(10.0)));
    }

    #[test]
    fn patterns_parse_like_the_ecos_suite() {
        let p = Pattern::parse("640x1024").unwrap();
        assert_eq!(p.sizes, vec![(640, 1024)]);
        assert_eq!(p.total_datagrams(), Some(640));
        let p = Pattern::parse("10@10ms").unwrap();
        assert_eq!((p.burst, p.gap_seconds), (Some(10), 0.01));
        let p = Pattern::parse("2048x1024, 1@100ms").unwrap();
        assert_eq!((p.sizes.len(), p.burst), (1, Some(1)));
        assert!(Pattern::parse("10@").is_err());
        assert!(Pattern::parse("0x10").is_err());
        assert!(Pattern::parse("fast").is_err());
        assert_eq!(parse_duration("500us"), Some(0.0005));
    }

    #[test]
    fn udp_rates_split_across_streams_unless_per_stream() {
        let mut s = TestSpec::udp_default();
        s.block_bytes = 1000;
        s.streams = 4;
        s.udp.as_mut().unwrap().rate = UdpRate::BitsPerSecond(8_000_000);
        assert_eq!(s.udp_pps_per_stream(), Some(250.0));
        s.udp.as_mut().unwrap().per_stream = true;
        assert_eq!(s.udp_pps_per_stream(), Some(1000.0));
        s.block_bytes = 10;
        assert!(s.validate().unwrap_err().to_string().starts_with("-l 10"));
    }

    #[test]
    fn tos_and_dscp_parse_by_number_and_name() {
        assert_eq!(parse_tos("184"), Ok(184));
        assert_eq!(parse_tos("0xB8"), Ok(0xb8));
        assert!(parse_tos("256").is_err() && parse_tos("ef").is_err() && parse_tos("-1").is_err());
        assert_eq!(parse_dscp("EF"), Ok(46));
        assert_eq!(parse_dscp("af41"), Ok(34));
        assert_eq!(parse_dscp("cs1"), Ok(8));
        assert_eq!(parse_dscp("le"), Ok(1));
        assert_eq!(parse_dscp("0x2e"), Ok(46));
        assert_eq!(parse_dscp("63"), Ok(63));
        assert!(parse_dscp("64").is_err() && parse_dscp("af44").is_err());
        assert_eq!((dscp_name(46), dscp_name(0), dscp_name(3)), (Some("ef"), Some("df"), None));
    }

    #[test]
    fn ip_options_are_absent_from_the_json_unless_set_and_flow_labels_are_20_bits() {
        let mut s = TestSpec::tcp_default();
        assert!(!serde_json::to_string(&s).unwrap().contains("\"ip\""));
        s.ip = IpOptions { tos: Some(0xb8), flowlabel: Some(MAX_FLOWLABEL), dont_fragment: true };
        assert_eq!(s.validate(), Ok(()));
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["ip"], serde_json::json!({"tos": 184, "flowlabel": 1048575, "dont_fragment": true}));
        assert_eq!(serde_json::from_value::<TestSpec>(v).unwrap(), s);
        for bad in [0, MAX_FLOWLABEL + 1] {
            s.ip.flowlabel = Some(bad);
            assert_eq!(s.validate(), Err(SpecError::FlowLabel(bad)));
        }
        let mut u = TestSpec::udp_default();
        u.block_bytes = 1472;
        assert!(!serde_json::to_string(&u).unwrap().contains("no_checksum"));
        u.udp.as_mut().unwrap().no_checksum = true;
        assert!(serde_json::to_string(&u).unwrap().contains("\"no_checksum\":true"));
    }

    #[test]
    fn payloads_and_verify_refuse_the_options_that_would_break_them() {
        use crate::{PayloadKind, PayloadSpec};
        let mut s = TestSpec::tcp_default();
        assert!(!serde_json::to_string(&s).unwrap().contains("payload"), "absent unless asked");
        s.verify = true;
        s.payload = Some(PayloadSpec { kind: PayloadKind::Random, seed: 3 });
        assert_eq!(s.validate(), Ok(()));
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(
            (&v["payload"], &v["verify"]),
            (&serde_json::json!({"kind": "random", "seed": 3}), &serde_json::json!(true))
        );
        assert_eq!(serde_json::from_value::<TestSpec>(v).unwrap(), s);
        s.tcp.skip_rx_copy = true;
        assert!(matches!(s.validate(), Err(SpecError::Payload(_))), "--verify reads what --skip-rx-copy discards");
        s.tcp.skip_rx_copy = false;
        s.tcp.zerocopy = true;
        assert!(matches!(s.validate(), Err(SpecError::Payload(_))), "zero-copy sends one buffer from its start");
        s.verify = false;
        s.payload = Some(PayloadSpec { kind: PayloadKind::Zeros, seed: 0 });
        assert_eq!(s.validate(), Ok(()), "a constant payload without --verify is any buffer");
        let mut crr = TestSpec::rr_default();
        crr.rr.as_mut().unwrap().connect_per_transaction = true;
        crr.verify = true;
        assert!(matches!(crr.validate(), Err(SpecError::Payload(_))));
    }

    #[test]
    fn bidir_numbers_up_streams_first() {
        let mut s = TestSpec::tcp_default();
        s.direction = Direction::Bidir;
        s.streams = 3;
        assert_eq!(s.stream_ids(Flow::Up), 1..=3);
        assert_eq!(s.stream_ids(Flow::Down), 4..=6);
        assert_eq!(s.flow_of(5), Some(Flow::Down));
        assert_eq!(s.flow_of(7), None);
        assert_eq!(s.total_streams(), 6);
    }

    #[test]
    fn byte_budgets_add_up_exactly() {
        let mut s = TestSpec::tcp_default();
        s.streams = 3;
        s.end = EndCondition::Bytes(1_000_001);
        let sum: u64 = (1..=3).map(|id| s.byte_budget(id).unwrap()).sum();
        assert_eq!(sum, 1_000_001);
        assert_eq!(s.byte_budget(1), Some(333_334));
        assert_eq!(s.byte_budget(3), Some(333_333));
    }

    #[test]
    fn bursts_gaps_pauses_and_zero_rates_that_would_stall_or_panic_a_sender_are_invalid() {
        // A server's sender panicked on these (division by a burst of 0, a negative or NaN
        // duration) and held its test's slot for ever.
        let mut u = TestSpec::udp_default();
        u.block_bytes = 1472;
        assert_eq!(u.validate(), Ok(()));
        u.udp.as_mut().unwrap().pattern = Some(Pattern { sizes: vec![], burst: Some(0), gap_seconds: 0.01 });
        assert!(matches!(u.validate(), Err(SpecError::Pattern(_))));
        u.udp.as_mut().unwrap().pattern = Some(Pattern { sizes: vec![], burst: Some(10), gap_seconds: f64::NAN });
        assert!(matches!(u.validate(), Err(SpecError::Pattern(_))));
        u.udp.as_mut().unwrap().pattern = Some(Pattern { sizes: vec![], burst: Some(10), gap_seconds: -1.0 });
        assert!(matches!(u.validate(), Err(SpecError::Pattern(_))));
        let mut r = TestSpec::rr_default();
        r.rr.as_mut().unwrap().pause_every = Some(1);
        r.rr.as_mut().unwrap().pause_seconds = -1.0;
        assert!(matches!(r.validate(), Err(SpecError::Pattern(_))));
        r.rr.as_mut().unwrap().pause_every = Some(0);
        r.rr.as_mut().unwrap().pause_seconds = 0.1;
        assert!(matches!(r.validate(), Err(SpecError::Pattern(_))));
        let mut t = TestSpec::tcp_default();
        t.tcp.rate_bps_per_stream = Some(0);
        assert_eq!(t.validate(), Err(SpecError::TcpRate));
    }
}
