//! eCos "network characterization" (`nc_test_master` / `nc_test_slave` and the IPv6 `nc6_`
//! pair), sans-IO: the records, the master's test loop and suite, and the slave's replies and
//! test loop, as the public eCos sources (`packages/net/common/current/tests/`) run them.
//!
//! ```text
//! master UDP 7776 → slave UDP 7777   request (28 bytes)      type, seq, nbufs, buflen, ports
//! slave → master                     reply (24 bytes)        ACK/NAK, seq echoed (idle counts)
//! data: UDP 8771 ↔ 8770, or TCP to the slave's 8770 listener (the master waits 3 s first)
//!   each buffer = 16-byte header (0xC0DEADC0, seq, len, 0xC0DEADC1) + buflen bytes
//! slave → master on the data channel  results (20 bytes)     0xDEADC0DE, seq, nsent, nrecvd, 0xDEADC1DE
//! ```
//!
//! The layout is ILP32, as the 32-bit targets (and the hosts of 2000) use it: every field is a
//! big-endian 32-bit word. A slave or master built for a 64-bit host is not wire compatible
//! (its `long` fields grow: reply 40, data header 24, results 32 bytes); [`Reply::decode`]
//! recognises such a 40-byte reply and says so.
//!
//! The pieces are "pull" state machines for a lock-step protocol: the driver asks
//! [`MasterTest::next_step`] / [`SlaveTest::next_step`] what to do (send these bytes, receive a buffer of
//! this length within this time, pause, done), does it, and reports back what it received (or
//! that the wait timed out). Time only comes in as `Instant` arguments. [`MasterSuite`] is the
//! master's whole sequence (`nc_test_master` or `nc6_test_master`), including its conditional
//! SET_LOAD and idle sections; [`Slave`] answers requests.
//!
//! This file holds the constants and the records' codecs both roles share; `master.rs` the
//! master's test loop, `suite.rs` its sequence, `slave.rs` the slave's answers and test loop,
//! `lines.rs` the lines the stock programs print. Every item is re-exported here.
//!
//! Quirks of the stock programs this module keeps (observed in captures, see
//! `crates/wire/tests/fixtures/nc_test/`): the first test carries seq 2 (`test_seq` starts at 1
//! and is incremented before each test); SET_LOAD, START/STOP_IDLE and DISCONNECT reuse the
//! current seq; fields the master does not set are stack garbage (ignored here); the slave
//! resynchronises its expected seq to what it received, the master only in receive-only
//! tests; echo does not copy the payload (each side sends its own zeros); stock slaves NAK
//! with reason 1 for everything they do not know, including SET_LOAD and idle on host builds.

mod lines;
mod master;
mod slave;
mod suite;

pub use lines::{
    result_line, slave_counts_line, slave_load_line, start_line, under_one_tick_line, MASTER_LOADS_HEADING,
    NOTE_PREFIX, NO_LOAD_HEADING, SLAVE_LOADS_HEADING,
};
pub use master::{MasterReport, MasterTest};
pub use slave::{Slave, SlaveAction, SlaveDecision, SlaveTest, DEFAULT_MAX_UDP_SEND_BYTES};
pub use suite::{MasterSuite, Sequence, SuiteShape, SuiteStep};

use std::time::Duration;

/// The slave's control port (`NC_SLAVE_PORT`).
pub const SLAVE_PORT: u16 = 7777;
/// The master's control port (`NC_MASTER_PORT`), bound by the stock master.
pub const MASTER_PORT: u16 = 7776;
/// The slave's data port (`NC_TESTING_SLAVE_PORT`).
pub const DATA_SLAVE_PORT: u16 = 8770;
/// The master's UDP data port (`NC_TESTING_MASTER_PORT`).
pub const DATA_MASTER_PORT: u16 = 8771;
/// Give up after more than this many timeouts (`MAX_ERRORS`).
pub const MAX_ERRORS: u32 = 5;
/// The wait for a reply to a request (`NC_REPLY_TIMEOUT`).
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(10);
/// The wait for one buffer (`NC_TEST_TIMEOUT`).
pub const TEST_TIMEOUT: Duration = Duration::from_secs(3);
/// The wait for the results record (`NC_RESULTS_TIMEOUT`, (MAX_ERRORS+2)×3 s).
pub const RESULTS_TIMEOUT: Duration = Duration::from_secs(21);
/// The master's pause between the ACK of a TCP test and its connect (`test_delay(3*100)`).
pub const TCP_CONNECT_DELAY: Duration = Duration::from_secs(3);
/// One eCos tick (pauses and idle times are counted in them).
pub const TICK: Duration = Duration::from_millis(10);
/// The master's idle calibration period (`IDLE_TEST_TIME`).
pub const IDLE_TEST_TIME: Duration = Duration::from_secs(10);

/// Bytes of a request.
pub const REQUEST_LEN: usize = 28;
/// Bytes of a reply.
pub const REPLY_LEN: usize = 24;
/// Bytes of a reply from a slave built for a 64-bit (LP64) host.
pub const REPLY_LEN_LP64: usize = 40;
/// Bytes of the header in front of each buffer.
pub const DATA_HEADER_LEN: usize = 16;
/// Bytes of the results record.
pub const RESULTS_LEN: usize = 20;
/// The largest buffer (payload) this implementation accepts in a request: the stock master
/// uses at most 10240 (its buffers are 32 KiB); this bounds what a request can make us hold.
pub const MAX_BUFLEN: u32 = 65_000;

/// First key of a data header.
pub const DATA_KEY1: u32 = 0xC0DE_ADC0;
/// Second key of a data header.
pub const DATA_KEY2: u32 = 0xC0DE_ADC1;
/// First key of a results record.
pub const RESULT_KEY1: u32 = 0xDEAD_C0DE;
/// Second key of a results record.
pub const RESULT_KEY2: u32 = 0xDEAD_C1DE;

/// ACK in a reply.
pub const REPLY_ACK: u32 = 1;
/// NAK in a reply.
pub const REPLY_NAK: u32 = 0;
/// NAK reason: unknown request (the only one stock slaves send).
pub const NAK_UNKNOWN_REQUEST: u32 = 1;
/// NAK reason: the slave cannot handle the request.
pub const NAK_BAD_REQUEST: u32 = 2;
/// NAK reason: no background load / idle support.
pub const NAK_NO_BACKGROUND: u32 = 3;

/// Request codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `NC_REQUEST_DISCONNECT` (0x0001).
    Disconnect,
    /// `NC_REQUEST_UDP_SEND` (0x0010): the slave sends.
    UdpSend,
    /// `NC_REQUEST_UDP_RECV` (0x0011): the slave receives.
    UdpRecv,
    /// `NC_REQUEST_UDP_ECHO` (0x0012).
    UdpEcho,
    /// `NC_REQUEST_TCP_SEND` (0x0020): the slave sends.
    TcpSend,
    /// `NC_REQUEST_TCP_RECV` (0x0021): the slave receives.
    TcpRecv,
    /// `NC_REQUEST_TCP_ECHO` (0x0022).
    TcpEcho,
    /// `NC_REQUEST_START_IDLE` (0x0100).
    StartIdle,
    /// `NC_REQUEST_STOP_IDLE` (0x0101).
    StopIdle,
    /// `NC_REQUEST_SET_LOAD` (0x0200): load % in `nbufs`.
    SetLoad,
}

impl Kind {
    /// The code on the wire.
    pub fn code(self) -> u32 {
        match self {
            Kind::Disconnect => 0x0001,
            Kind::UdpSend => 0x0010,
            Kind::UdpRecv => 0x0011,
            Kind::UdpEcho => 0x0012,
            Kind::TcpSend => 0x0020,
            Kind::TcpRecv => 0x0021,
            Kind::TcpEcho => 0x0022,
            Kind::StartIdle => 0x0100,
            Kind::StopIdle => 0x0101,
            Kind::SetLoad => 0x0200,
        }
    }

    /// The kind of a wire code.
    pub fn from_code(code: u32) -> Option<Kind> {
        Some(match code {
            0x0001 => Kind::Disconnect,
            0x0010 => Kind::UdpSend,
            0x0011 => Kind::UdpRecv,
            0x0012 => Kind::UdpEcho,
            0x0020 => Kind::TcpSend,
            0x0021 => Kind::TcpRecv,
            0x0022 => Kind::TcpEcho,
            0x0100 => Kind::StartIdle,
            0x0101 => Kind::StopIdle,
            0x0200 => Kind::SetLoad,
            _ => return None,
        })
    }

    /// A data test (UDP or TCP)?
    pub fn is_test(self) -> bool {
        self.is_udp() || self.is_tcp()
    }

    /// A UDP test?
    pub fn is_udp(self) -> bool {
        matches!(self, Kind::UdpSend | Kind::UdpRecv | Kind::UdpEcho)
    }

    /// A TCP test?
    pub fn is_tcp(self) -> bool {
        matches!(self, Kind::TcpSend | Kind::TcpRecv | Kind::TcpEcho)
    }

    /// Does the slave send data in this test?
    pub fn slave_sends(self) -> bool {
        matches!(self, Kind::UdpSend | Kind::UdpEcho | Kind::TcpSend | Kind::TcpEcho)
    }

    /// Does the slave receive data in this test?
    pub fn slave_receives(self) -> bool {
        matches!(self, Kind::UdpRecv | Kind::UdpEcho | Kind::TcpRecv | Kind::TcpEcho)
    }

    /// The master's name for the test (named from the slave's side: in "UDP recv" the master
    /// sends).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Disconnect => "DISCONNECT",
            Kind::UdpSend => "UDP send",
            Kind::UdpRecv => "UDP recv",
            Kind::UdpEcho => "UDP echo",
            Kind::TcpSend => "TCP send",
            Kind::TcpRecv => "TCP recv",
            Kind::TcpEcho => "TCP echo",
            Kind::StartIdle => "START_IDLE",
            Kind::StopIdle => "STOP_IDLE",
            Kind::SetLoad => "SET_LOAD",
        }
    }
}

/// What can be wrong with received bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NcError {
    /// Fewer bytes than the record needs.
    #[error("nc_test {what}: {got} bytes, at least {need} expected")]
    Short {
        /// The record.
        what: &'static str,
        /// Bytes received.
        got: usize,
        /// Bytes needed.
        need: usize,
    },
    /// A 40-byte reply: the slave was built for a 64-bit host.
    #[error("the nc_test slave sent a 40-byte reply: it was built for a 64-bit (LP64) host, whose records are not those of the 32-bit targets; rebuild it with gcc -m32")]
    Lp64,
    /// Keys do not match.
    #[error("nc_test {what}: bad keys {key1:#x}/{key2:#x}")]
    BadKeys {
        /// The record.
        what: &'static str,
        /// First key received.
        key1: u32,
        /// Second key received.
        key2: u32,
    },
}

fn be(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// `struct nc_request`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Request code (see [`Kind`]); unknown codes are kept.
    pub code: u32,
    /// Sequence number (the master's `test_seq`).
    pub seq: u32,
    /// Buffers, or the load % for SET_LOAD.
    pub nbufs: u32,
    /// Payload bytes per buffer (the 16-byte header excluded).
    pub buflen: u32,
    /// The slave's data port.
    pub slave_port: u32,
    /// The master's data port.
    pub master_port: u32,
    /// Unused (uninitialised in the stock master).
    pub timeout: u32,
}

impl Request {
    /// A request as the stock master fills it (unset fields zero here).
    pub fn new(kind: Kind, seq: u32, nbufs: u32, buflen: u32) -> Self {
        Request {
            code: kind.code(),
            seq,
            nbufs,
            buflen,
            slave_port: u32::from(DATA_SLAVE_PORT),
            master_port: u32::from(DATA_MASTER_PORT),
            timeout: 0,
        }
    }

    /// The request's kind, if known.
    pub fn kind(&self) -> Option<Kind> {
        Kind::from_code(self.code)
    }

    /// The 28 bytes.
    pub fn encode(&self) -> [u8; REQUEST_LEN] {
        let mut b = [0u8; REQUEST_LEN];
        for (i, v) in [self.code, self.seq, self.nbufs, self.buflen, self.slave_port, self.master_port, self.timeout]
            .iter()
            .enumerate()
        {
            b[i * 4..i * 4 + 4].copy_from_slice(&v.to_be_bytes());
        }
        b
    }

    /// Decodes the first 28 bytes (more are ignored, as `recvfrom` into the struct does).
    pub fn decode(b: &[u8]) -> Result<Self, NcError> {
        if b.len() < REQUEST_LEN {
            return Err(NcError::Short { what: "request", got: b.len(), need: REQUEST_LEN });
        }
        Ok(Request {
            code: be(b, 0),
            seq: be(b, 4),
            nbufs: be(b, 8),
            buflen: be(b, 12),
            slave_port: be(b, 16),
            master_port: be(b, 20),
            timeout: be(b, 24),
        })
    }
}

/// `struct nc_reply` (ILP32).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reply {
    /// [`REPLY_ACK`] or [`REPLY_NAK`].
    pub response: u32,
    /// The request's seq.
    pub seq: u32,
    /// NAK reason (garbage in a stock ACK).
    pub reason: u32,
    /// STOP_IDLE: elapsed ticks.
    pub elapsed_ticks: u32,
    /// STOP_IDLE: idle count, high word.
    pub count_hi: u32,
    /// STOP_IDLE: idle count, low word.
    pub count_lo: u32,
}

impl Reply {
    /// An ACK of `seq`.
    pub fn ack(seq: u32) -> Self {
        Reply { response: REPLY_ACK, seq, ..Default::default() }
    }

    /// A NAK of `seq`.
    pub fn nak(seq: u32, reason: u32) -> Self {
        Reply { response: REPLY_NAK, seq, reason, ..Default::default() }
    }

    /// An ACK?
    pub fn is_ack(&self) -> bool {
        self.response == REPLY_ACK
    }

    /// The 64-bit idle count.
    pub fn idle_count(&self) -> u64 {
        (u64::from(self.count_hi) << 32) | u64::from(self.count_lo)
    }

    /// The 24 bytes.
    pub fn encode(&self) -> [u8; REPLY_LEN] {
        let mut b = [0u8; REPLY_LEN];
        for (i, v) in
            [self.response, self.seq, self.reason, self.elapsed_ticks, self.count_hi, self.count_lo].iter().enumerate()
        {
            b[i * 4..i * 4 + 4].copy_from_slice(&v.to_be_bytes());
        }
        b
    }

    /// Decodes a reply datagram: exactly the 24 ILP32 bytes (more ignored), except a 40-byte
    /// datagram, which is an LP64 slave's.
    pub fn decode(b: &[u8]) -> Result<Self, NcError> {
        if b.len() == REPLY_LEN_LP64 {
            return Err(NcError::Lp64);
        }
        if b.len() < REPLY_LEN {
            return Err(NcError::Short { what: "reply", got: b.len(), need: REPLY_LEN });
        }
        Ok(Reply {
            response: be(b, 0),
            seq: be(b, 4),
            reason: be(b, 8),
            elapsed_ticks: be(b, 12),
            count_hi: be(b, 16),
            count_lo: be(b, 20),
        })
    }
}

/// The 16-byte header of a data buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataHeader {
    /// Buffer seq.
    pub seq: u32,
    /// Total length, header included.
    pub len: u32,
}

impl DataHeader {
    /// The 16 bytes.
    pub fn encode(&self) -> [u8; DATA_HEADER_LEN] {
        let mut b = [0u8; DATA_HEADER_LEN];
        b[0..4].copy_from_slice(&DATA_KEY1.to_be_bytes());
        b[4..8].copy_from_slice(&self.seq.to_be_bytes());
        b[8..12].copy_from_slice(&self.len.to_be_bytes());
        b[12..16].copy_from_slice(&DATA_KEY2.to_be_bytes());
        b
    }

    /// Decodes and checks the keys.
    pub fn decode(b: &[u8]) -> Result<Self, NcError> {
        if b.len() < DATA_HEADER_LEN {
            return Err(NcError::Short { what: "data buffer", got: b.len(), need: DATA_HEADER_LEN });
        }
        let (key1, key2) = (be(b, 0), be(b, 12));
        if key1 != DATA_KEY1 || key2 != DATA_KEY2 {
            return Err(NcError::BadKeys { what: "data buffer", key1, key2 });
        }
        Ok(DataHeader { seq: be(b, 4), len: be(b, 8) })
    }
}

/// A whole data buffer: header + `buflen` zero bytes (the stock programs send their static,
/// zeroed buffers).
pub fn data_buffer(seq: u32, buflen: u32) -> Vec<u8> {
    let total = buflen as usize + DATA_HEADER_LEN;
    let mut b = vec![0u8; total];
    b[..DATA_HEADER_LEN].copy_from_slice(&DataHeader { seq, len: total as u32 }.encode());
    b
}

/// `struct nc_test_results` (ILP32).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Results {
    /// The test's seq.
    pub seq: u32,
    /// Buffers the slave sent.
    pub nsent: u32,
    /// Buffers the slave received.
    pub nrecvd: u32,
}

impl Results {
    /// The 20 bytes.
    pub fn encode(&self) -> [u8; RESULTS_LEN] {
        let mut b = [0u8; RESULTS_LEN];
        for (i, v) in [RESULT_KEY1, self.seq, self.nsent, self.nrecvd, RESULT_KEY2].iter().enumerate() {
            b[i * 4..i * 4 + 4].copy_from_slice(&v.to_be_bytes());
        }
        b
    }

    /// Decodes and checks the keys.
    pub fn decode(b: &[u8]) -> Result<Self, NcError> {
        if b.len() < RESULTS_LEN {
            return Err(NcError::Short { what: "results record", got: b.len(), need: RESULTS_LEN });
        }
        let (key1, key2) = (be(b, 0), be(b, 16));
        if key1 != RESULT_KEY1 || key2 != RESULT_KEY2 {
            return Err(NcError::BadKeys { what: "results record", key1, key2 });
        }
        Ok(Results { seq: be(b, 4), nsent: be(b, 8), nrecvd: be(b, 12) })
    }
}

/// What a test loop wants done next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Send these bytes on the data channel (a datagram, or a whole TCP write).
    Send(Vec<u8>),
    /// Receive one buffer of `len` bytes (a datagram truncated to `len`, or exactly `len`
    /// TCP bytes) within `timeout`; then call `received` with it, or with `None` on timeout,
    /// a short read or EOF.
    Recv {
        /// Bytes wanted.
        len: usize,
        /// The wait.
        timeout: Duration,
    },
    /// Sleep (the master's pause after `pause_threshold` buffers).
    Pause(Duration),
    /// Print this line (the stock program's output).
    Print(String),
    /// The loop is over.
    Done,
}

/// A master-side pause: `ticks` ticks after every `threshold` received buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pause {
    /// Ticks of 10 ms (0 = none).
    pub ticks: u32,
    /// After this many received buffers.
    pub threshold: u32,
}
