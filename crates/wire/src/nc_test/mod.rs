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
//! Quirks of the stock programs this module keeps (observed in captures, see
//! `crates/wire/tests/fixtures/nc_test/`): the first test carries seq 2 (`test_seq` starts at 1
//! and is incremented before each test); SET_LOAD, START/STOP_IDLE and DISCONNECT reuse the
//! current seq; fields the master does not set are stack garbage (ignored here); the slave
//! resynchronises its expected seq to what it received, the master only in receive-only
//! tests; echo does not copy the payload (each side sends its own zeros); stock slaves NAK
//! with reason 1 for everything they do not know, including SET_LOAD and idle on host builds.

use std::time::{Duration, Instant};

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

/// What the master measured in one test.
#[derive(Debug, Clone, PartialEq)]
pub struct MasterReport {
    /// The test.
    pub kind: Kind,
    /// Its seq.
    pub seq: u32,
    /// Buffers asked for.
    pub nbufs: u32,
    /// Payload bytes per buffer.
    pub buflen: u32,
    /// The pause used.
    pub pause: Pause,
    /// The slave denied the test (NAK or no reply).
    pub denied: bool,
    /// Buffers the master sent.
    pub sent: u32,
    /// Buffers the master received.
    pub received: u32,
    /// Buffers sent + received (the stock "bufs" figure).
    pub total_packets: u32,
    /// Receive timeouts.
    pub lost: u32,
    /// Out-of-sequence buffers.
    pub seq_errors: u32,
    /// Buffers with bad keys.
    pub bad: u32,
    /// Datagrams or TCP bytes that arrived after the loop ended (before the results).
    pub late: u32,
    /// From the first buffer to the last (the stock timing).
    pub elapsed: Duration,
    /// Echo round-trip times, one per answered buffer (netchar's own figure).
    pub rtts: Vec<Duration>,
    /// The slave's results record, when one came.
    pub results: Option<Results>,
    /// Every line the stock master would have printed for this test.
    pub lines: Vec<String>,
}

impl MasterReport {
    /// Payload bytes moved, as the stock master counts them (headers excluded, echo both ways).
    pub fn bytes(&self) -> u64 {
        u64::from(self.total_packets) * u64::from(self.buflen)
    }
}

/// The stock result line: `"%s - %d bufs of %d bytes in %d.%02d seconds - %.2f KB/S - %.4f
/// Mbit/S (M = 10^6)"` (+ lost, + out of sequence). The time is truncated to 10 ms.
pub fn result_line(
    name: &str,
    total_packets: u32,
    buflen: u32,
    elapsed: Duration,
    lost: u32,
    seq_errors: u32,
) -> String {
    let secs = elapsed.as_secs();
    let centis = elapsed.subsec_micros() / 10_000;
    let real = secs as f64 + f64::from(centis) * 0.01;
    let thru = (i64::from(total_packets) * i64::from(buflen)) as f64 / real;
    let mut s = format!(
        "{name} - {total_packets} bufs of {buflen} bytes in {secs}.{centis:02} seconds - {:.2} KB/S - {:.4} Mbit/S (M = 10^6)",
        thru / 1024.0,
        thru * 8.0 / 1_000_000.0
    );
    if lost > 0 {
        s.push_str(&format!(", {lost} lost"));
    }
    if seq_errors > 0 {
        s.push_str(&format!(", {seq_errors} out of sequence"));
    }
    s
}

/// The stock "Start ..." line.
pub fn start_line(kind: Kind, nbufs: u32, buflen: u32, pause: Pause) -> String {
    if pause.ticks > 0 {
        format!(
            "Start {} [{nbufs},{buflen}] - {}ms delay after {} packet{}",
            kind.name(),
            pause.ticks * 10,
            pause.threshold,
            if pause.threshold > 1 { "s" } else { "" }
        )
    } else {
        format!("Start {} [{nbufs},{buflen}] - no delays", kind.name())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MPhase {
    Send,
    Recv,
    Report,
    Results,
    Done,
}

/// The master's data loop of one ACKed test (`do_udp_test` / `do_tcp_test` from the first
/// buffer on). The driver opens the data channel first (binds UDP 8771, or waits
/// [`TCP_CONNECT_DELAY`] and connects) and prints [`start_line`].
#[derive(Debug)]
pub struct MasterTest {
    report: MasterReport,
    i: u32,
    seq: u32,
    pkt_ctr: u32,
    phase: MPhase,
    start: Option<Instant>,
    sent_at: Option<Instant>,
    td_len: usize,
    queue: std::collections::VecDeque<Step>,
    silent: u32,
}

impl MasterTest {
    /// A test of `kind` with `nbufs` × `buflen`, request seq `seq`, from `now`.
    pub fn new(kind: Kind, seq: u32, nbufs: u32, buflen: u32, pause: Pause) -> Self {
        MasterTest {
            report: MasterReport {
                kind,
                seq,
                nbufs,
                buflen,
                pause,
                denied: false,
                sent: 0,
                received: 0,
                total_packets: 0,
                lost: 0,
                seq_errors: 0,
                bad: 0,
                late: 0,
                elapsed: Duration::ZERO,
                rtts: Vec::new(),
                results: None,
                lines: Vec::new(),
            },
            i: 0,
            seq: 0,
            pkt_ctr: 0,
            phase: MPhase::Send,
            start: None,
            sent_at: None,
            td_len: buflen as usize + DATA_HEADER_LEN,
            queue: Default::default(),
            silent: 0,
        }
    }

    fn need_send(&self) -> bool {
        self.report.kind.slave_receives()
    }

    fn need_recv(&self) -> bool {
        self.report.kind.slave_sends()
    }

    fn print(&mut self, line: String) {
        self.report.lines.push(line.clone());
        self.queue.push_back(Step::Print(line));
    }

    /// What to do next. `now` is when the driver asks (the start and end of the loop are
    /// taken from it).
    pub fn next_step(&mut self, now: Instant) -> Step {
        if self.start.is_none() {
            self.start = Some(now);
        }
        loop {
            if let Some(step) = self.queue.pop_front() {
                return step;
            }
            match self.phase {
                MPhase::Send => {
                    if self.i >= self.report.nbufs {
                        self.phase = MPhase::Report;
                        self.report.elapsed = now.saturating_duration_since(self.start.unwrap_or(now));
                        continue;
                    }
                    self.phase = MPhase::Recv;
                    if self.need_send() {
                        self.report.sent += 1;
                        self.report.total_packets += 1;
                        self.sent_at = Some(now);
                        return Step::Send(data_buffer(self.i, self.report.buflen));
                    }
                }
                MPhase::Recv => {
                    if self.need_recv() {
                        return Step::Recv { len: self.td_len, timeout: TEST_TIMEOUT };
                    }
                    self.i += 1;
                    self.phase = MPhase::Send;
                }
                MPhase::Report => {
                    self.phase = MPhase::Results;
                    let r = &self.report;
                    let line = result_line(r.kind.name(), r.total_packets, r.buflen, r.elapsed, r.lost, r.seq_errors);
                    self.print(line);
                }
                MPhase::Results => {
                    if let Some(r) = self.report.results {
                        self.phase = MPhase::Done;
                        self.print(format!("   slave sent {}, recvd {}", r.nsent as i32, r.nrecvd as i32));
                        continue;
                    }
                    return Step::Recv { len: RESULTS_LEN, timeout: RESULTS_TIMEOUT };
                }
                MPhase::Done => return Step::Done,
            }
        }
    }

    /// The answer to the last [`Step::Recv`]: the bytes, or `None` (timeout, short read, EOF).
    pub fn received(&mut self, data: Option<&[u8]>, now: Instant) {
        match self.phase {
            MPhase::Recv => self.received_buffer(data, now),
            MPhase::Results => self.received_results(data),
            _ => {}
        }
    }

    fn received_buffer(&mut self, data: Option<&[u8]>, now: Instant) {
        // The slave's results record in place of a buffer: the slave is done, the buffers
        // still expected will not come. (The stock master takes it for a bad buffer and then
        // waits 3 s for each missing one.)
        if let Some(r) = data.and_then(|b| Results::decode(b).ok()).filter(|r| r.seq == self.report.seq) {
            let missing = self.report.nbufs.saturating_sub(self.seq);
            self.report.lost += missing;
            self.report.results = Some(r);
            self.print(format!(
                "{NOTE_PREFIX}the slave's results came with {missing} buffer(s) still expected: counted as lost"
            ));
            self.i = self.report.nbufs;
            self.phase = MPhase::Send;
            return;
        }
        let mut out = Vec::new();
        match data {
            None => {
                out.push(format!("Slave timed out after {} buffers", self.i));
                self.report.lost += 1;
                self.silent += 1;
                if self.silent > MAX_ERRORS {
                    // The stock master would wait 3 s for every buffer still due (half an hour
                    // for 640); like the stock slave, this one gives up.
                    let missing = self.report.nbufs.saturating_sub(self.seq.wrapping_add(1));
                    self.report.lost += missing;
                    for l in out {
                        self.print(l);
                    }
                    self.print(format!(
                        "{NOTE_PREFIX}{} timeouts in a row: giving up, the {missing} buffer(s) still due are counted as lost",
                        self.silent
                    ));
                    self.i = self.report.nbufs;
                    self.phase = MPhase::Send;
                    return;
                }
            }
            Some(b) => {
                self.silent = 0;
                match DataHeader::decode(b) {
                    Ok(h) => {
                        if h.seq != self.seq {
                            out.push(format!(
                                "Packets out of sequence - recvd: {}, expected: {}",
                                h.seq as i32, self.seq as i32
                            ));
                            self.report.seq_errors += 1;
                            if !self.need_send() {
                                self.seq = h.seq;
                            }
                        }
                        if let Some(t) = self.sent_at.take() {
                            self.report.rtts.push(now.saturating_duration_since(t));
                        }
                    }
                    Err(_) => {
                        let w = |at: usize| if b.len() >= at + 4 { be(b, at) } else { 0 };
                        out.push(format!("Bad data packet - key: {:x}/{:x}, seq: {}", w(0), w(12), w(4) as i32));
                        self.report.bad += 1;
                    }
                }
                self.report.received += 1;
                self.report.total_packets += 1;
            }
        }
        self.seq = self.seq.wrapping_add(1);
        self.i += 1;
        self.phase = MPhase::Send;
        let mut pause = None;
        if self.seq == self.report.nbufs {
            // The stock loop ends as soon as the expected seq reaches nbufs.
            self.i = self.report.nbufs;
        } else if self.report.pause.ticks > 0 {
            self.pkt_ctr += 1;
            if self.pkt_ctr == self.report.pause.threshold {
                self.pkt_ctr = 0;
                pause = Some(TICK * self.report.pause.ticks);
            }
        }
        for l in out {
            self.print(l);
        }
        if let Some(p) = pause {
            self.queue.push_back(Step::Pause(p));
        }
    }

    fn received_results(&mut self, data: Option<&[u8]>) {
        let line = match data {
            None => "No results record sent".to_string(),
            Some(b) => {
                if b.len() >= 4 && be(b, 0) == DATA_KEY1 {
                    // A data buffer that arrived after the loop ended: keep waiting.
                    self.report.late += 1;
                    return;
                }
                let w = |at: usize| if b.len() >= at + 4 { be(b, at) } else { 0 };
                match Results::decode(b) {
                    Ok(r) if r.seq == self.report.seq => {
                        self.report.results = Some(r);
                        format!("   slave sent {}, recvd {}", r.nsent as i32, r.nrecvd as i32)
                    }
                    _ => format!(
                        "   ... invalid results - keys: {:x}/{:x}, seq: {}/{}",
                        w(0),
                        w(16),
                        w(4) as i32,
                        self.report.seq as i32
                    ),
                }
            }
        };
        self.phase = MPhase::Done;
        self.print(line);
    }

    /// The report so far (complete after [`Step::Done`]).
    pub fn report(&self) -> &MasterReport {
        &self.report
    }

    /// The report.
    pub fn into_report(self) -> MasterReport {
        self.report
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SPhase {
    Recv,
    Send,
    Results,
    Done,
}

/// The slave's data loop of one ACKed test (`do_udp_test` / `do_tcp_test` of the slave). The
/// driver has the data channel ready (UDP bound to the data port, sending to the master's
/// address and `master_port`; or the accepted TCP connection).
#[derive(Debug)]
pub struct SlaveTest {
    req: Request,
    kind: Kind,
    i: u32,
    seq: u32,
    nsent: u32,
    nrecvd: u32,
    lost: u32,
    seq_errors: u32,
    phase: SPhase,
    queue: std::collections::VecDeque<Step>,
}

impl SlaveTest {
    /// The loop for an accepted test request (`None` when the request is not a data test).
    pub fn new(req: Request) -> Option<Self> {
        let kind = req.kind().filter(|k| k.is_test())?;
        Some(SlaveTest {
            req,
            kind,
            i: 0,
            seq: 0,
            nsent: 0,
            nrecvd: 0,
            lost: 0,
            seq_errors: 0,
            phase: SPhase::Recv,
            queue: Default::default(),
        })
    }

    fn td_len(&self) -> usize {
        self.req.buflen as usize + DATA_HEADER_LEN
    }

    fn print(&mut self, line: String) {
        self.queue.push_back(Step::Print(line));
    }

    /// What to do next.
    pub fn next_step(&mut self) -> Step {
        loop {
            if let Some(step) = self.queue.pop_front() {
                return step;
            }
            match self.phase {
                SPhase::Recv => {
                    if self.i >= self.req.nbufs {
                        self.phase = SPhase::Results;
                        continue;
                    }
                    self.phase = SPhase::Send;
                    if self.kind.slave_receives() {
                        return Step::Recv { len: self.td_len(), timeout: TEST_TIMEOUT };
                    }
                }
                SPhase::Send => {
                    let seq = self.seq;
                    self.seq = self.seq.wrapping_add(1);
                    self.i += 1;
                    self.phase = SPhase::Recv;
                    if self.kind.slave_sends() {
                        self.nsent += 1;
                        return Step::Send(data_buffer(seq, self.req.buflen));
                    }
                }
                SPhase::Results => {
                    self.phase = SPhase::Done;
                    return Step::Send(self.results().encode().to_vec());
                }
                SPhase::Done => return Step::Done,
            }
        }
    }

    /// The last data [`Step::Send`] failed (the stock slave does not count it).
    pub fn send_failed(&mut self) {
        if self.phase != SPhase::Done {
            self.nsent = self.nsent.saturating_sub(1);
        }
    }

    /// The answer to the last [`Step::Recv`].
    pub fn received(&mut self, data: Option<&[u8]>) {
        if self.phase != SPhase::Send {
            return;
        }
        match data {
            None => {
                self.print(format!("recvfrom timeout, expecting seq #{}", self.seq as i32));
                self.lost += 1;
                if self.lost > MAX_ERRORS {
                    self.print("... giving up".to_string());
                    self.phase = SPhase::Results;
                }
            }
            Some(b) => {
                self.nrecvd += 1;
                match DataHeader::decode(b) {
                    Ok(h) => {
                        if h.seq != self.seq {
                            self.print(format!(
                                "Packets out of sequence - recvd: {}, expected: {}",
                                h.seq as i32, self.seq as i32
                            ));
                            self.seq = h.seq;
                            self.seq_errors += 1;
                        }
                    }
                    Err(_) => {
                        let w = |at: usize| if b.len() >= at + 4 { be(b, at) } else { 0 };
                        self.print(format!("Bad data packet - key: {:x}/{:x}, seq: {}", w(0), w(12), w(4) as i32));
                    }
                }
            }
        }
    }

    /// The results record as it stands.
    pub fn results(&self) -> Results {
        Results { seq: self.req.seq, nsent: self.nsent, nrecvd: self.nrecvd }
    }

    /// Receive timeouts so far.
    pub fn lost(&self) -> u32 {
        self.lost
    }

    /// Out-of-sequence buffers so far (the stock slave does not report them back).
    pub fn seq_errors(&self) -> u32 {
        self.seq_errors
    }

    /// The request.
    pub fn request(&self) -> &Request {
        &self.req
    }
}

/// What the slave's driver must do after replying to a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlaveAction {
    /// Nothing (a NAK, or a request that needs nothing more).
    None,
    /// Run this data test ([`SlaveTest::new`]).
    Test(Request),
    /// Set the background load to this % (0 = off). Already done when the reply goes out.
    SetLoad(u32),
    /// Start idle counting (before the reply goes out).
    StartIdle,
    /// Stop idle counting and put the figures in the reply ([`Reply::elapsed_ticks`],
    /// [`Reply::count_hi`], [`Reply::count_lo`]) before sending it.
    StopIdle,
    /// The master is done: end the session.
    Disconnect,
}

/// The slave's answer to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlaveDecision {
    /// The reply to send (after the action's preparation, see [`SlaveAction`]).
    pub reply: Reply,
    /// What to do.
    pub action: SlaveAction,
    /// The line the stock slave prints, if any.
    pub line: Option<String>,
}

/// The slave's request handling (`nc_slave`'s loop body), with this implementation's checks.
#[derive(Debug, Clone)]
pub struct Slave {
    /// The data port this slave serves (requests naming another `slave_port` are refused).
    pub data_port: u16,
    /// Can it run a background load (SET_LOAD)?
    pub load: bool,
    /// Can it count idle (START_IDLE/STOP_IDLE)?
    pub idle: bool,
    /// The largest `nbufs` it accepts.
    pub max_nbufs: u32,
    /// The most bytes it sends unprompted in a UDP_SEND test (the request could come from a
    /// forged address: without a limit, 28 bytes would buy megabytes towards a victim).
    pub max_udp_send_bytes: u64,
}

impl Default for Slave {
    fn default() -> Self {
        Slave {
            data_port: DATA_SLAVE_PORT,
            load: true,
            idle: true,
            max_nbufs: 1_000_000,
            max_udp_send_bytes: DEFAULT_MAX_UDP_SEND_BYTES,
        }
    }
}

impl Slave {
    /// Decides on one request datagram; `None` when it is not a request (too short: the
    /// stock slave would run on stale fields; this one ignores it).
    pub fn handle(&self, bytes: &[u8]) -> Option<SlaveDecision> {
        let req = Request::decode(bytes).ok()?;
        let nak = |reason: u32, line: String| SlaveDecision {
            reply: Reply::nak(req.seq, reason),
            action: SlaveAction::None,
            line: Some(line),
        };
        let ack =
            |action: SlaveAction, line: Option<String>| SlaveDecision { reply: Reply::ack(req.seq), action, line };
        let Some(kind) = req.kind() else {
            return Some(nak(NAK_UNKNOWN_REQUEST, format!("Unrecognized request: {}", req.code as i32)));
        };
        Some(match kind {
            Kind::Disconnect => ack(SlaveAction::Disconnect, Some("Master has issued disconnect - I quit!".into())),
            k if k.is_test() => {
                let line = format!("{} - {} buffers, {} bytes", k.name(), req.nbufs as i32, req.buflen as i32);
                if req.buflen > MAX_BUFLEN
                    || req.nbufs > self.max_nbufs
                    || req.slave_port != u32::from(self.data_port)
                    || req.master_port == 0
                    || req.master_port > 65535
                    || (k == Kind::UdpSend
                        && u64::from(req.nbufs) * (u64::from(req.buflen) + DATA_HEADER_LEN as u64)
                            > self.max_udp_send_bytes)
                {
                    nak(NAK_BAD_REQUEST, format!("{line}: refused (buffer, count or ports out of range)"))
                } else {
                    ack(SlaveAction::Test(req), Some(line))
                }
            }
            Kind::SetLoad if self.load => {
                if req.nbufs > 100 {
                    nak(NAK_BAD_REQUEST, format!("Set background load = {}%: refused", req.nbufs as i32))
                } else {
                    ack(SlaveAction::SetLoad(req.nbufs), Some(format!("Set background load = {}%", req.nbufs)))
                }
            }
            Kind::StartIdle if self.idle => ack(SlaveAction::StartIdle, Some("Start IDLE thread".into())),
            Kind::StopIdle if self.idle => ack(SlaveAction::StopIdle, Some("Stop IDLE thread".into())),
            Kind::SetLoad | Kind::StartIdle | Kind::StopIdle => {
                nak(NAK_NO_BACKGROUND, format!("Unrecognized request: {}", req.code as i32))
            }
            _ => nak(NAK_UNKNOWN_REQUEST, format!("Unrecognized request: {}", req.code as i32)),
        })
    }
}

/// [`Slave::max_udp_send_bytes`] by default: 4 MiB, six times the stock master's 640×1024.
pub const DEFAULT_MAX_UDP_SEND_BYTES: u64 = 4 << 20;

/// Which stock master's sequence [`MasterSuite`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sequence {
    /// `nc_test_master <host>`: TCP echo 64×10240, the slave-load section, the master-load
    /// (idle) section, DISCONNECT.
    Nc,
    /// `nc6_test_master <host> [-t] [-u] [-s] [-m]`: UDP echo/send/recv and TCP
    /// echo/send/recv at 640×1024, TCP echo 64×10240, the load sections; no DISCONNECT.
    Nc6 {
        /// Run the TCP tests (not `-t`).
        tcp: bool,
        /// Run the UDP tests (not `-u`).
        udp: bool,
        /// Run the slave-load section (not `-s`).
        slave_loads: bool,
        /// Run the master-load section (not `-m`).
        master_loads: bool,
    },
}

#[derive(Debug, Clone)]
enum Op {
    Print(String),
    Test { kind: Kind, nbufs: u32, buflen: u32, pause: Pause },
    Control { kind: Kind, nbufs: u32 },
    StopIdle { calibrate: bool },
    Gate { kind: Kind, then: Vec<Op>, skipped: String },
    Sleep(Duration),
}

/// What the master's driver must do next.
#[derive(Debug)]
pub enum SuiteStep {
    /// Print this line.
    Print(String),
    /// Send this request on the control socket and wait up to [`REPLY_TIMEOUT`] for a reply;
    /// then call [`MasterSuite::reply`].
    Request(Request),
    /// The slave ACKed this test: open the data channel (UDP: bind the master data port; TCP:
    /// wait [`TCP_CONNECT_DELAY`], connect), run the loop, then call [`MasterSuite::test_done`]
    /// (with `None` when the data channel could not be opened).
    RunTest(Box<MasterTest>),
    /// Sleep this long (the idle calibration).
    Sleep(Duration),
    /// The sequence is over.
    Done,
}

/// A line netchar adds to the stock output starts with this.
pub const NOTE_PREFIX: &str = "netchar: ";

/// The master's whole sequence, as a stock master runs it, plus notes where netchar adds one.
#[derive(Debug)]
pub struct MasterSuite {
    ops: std::collections::VecDeque<Op>,
    test_seq: u32,
    waiting: Option<Op>,
    idle_count: u64,
    idle_ticks: u32,
    reports: Vec<MasterReport>,
    idle_lines: Vec<String>,
    disconnected: bool,
}

fn test(kind: Kind, nbufs: u32, buflen: u32) -> Op {
    Op::Test { kind, nbufs, buflen, pause: Pause::default() }
}

impl MasterSuite {
    /// A stock master's sequence.
    pub fn new(sequence: Sequence) -> Self {
        Self::build(sequence, false)
    }

    /// The same sections in a short form (`suite ecos --quick`): loads of 0 and 50% where the
    /// stock master steps 0–50% by 10, 256 buffers where it sends 2048, a 1 s idle calibration
    /// instead of 10 s, and the first two of its five pause patterns (the last three pause for
    /// 10–20 s each). Each TCP test still waits the master's 3 s before it connects.
    pub fn quick(sequence: Sequence) -> Self {
        Self::build(sequence, true)
    }

    fn build(sequence: Sequence, quick: bool) -> Self {
        type Plan = (&'static [u32], u32, Duration, &'static [(u32, u32)]);
        let (loads, load_bufs, idle_time, pauses): Plan = if quick {
            (&[0, 50], 256, Duration::from_secs(1), &[(0, 0), (1, 10)])
        } else {
            (&[0, 10, 20, 30, 40, 50], 2048, IDLE_TEST_TIME, &[(0, 0), (1, 10), (5, 10), (10, 10), (1, 1)])
        };
        let (tcp, udp, slave_loads, master_loads, disconnect) = match sequence {
            Sequence::Nc => (true, true, true, true, true),
            Sequence::Nc6 { tcp, udp, slave_loads, master_loads } => (tcp, udp, slave_loads, master_loads, false),
        };
        let mut ops = Vec::new();
        if quick {
            ops.push(Op::Print(format!(
                "{NOTE_PREFIX}--quick: loads {loads:?}%, {load_bufs} buffers per load test, a {} s idle calibration, {} pause patterns",
                idle_time.as_secs(),
                pauses.len()
            )));
        }
        ops.push(Op::Print("================== No load, master at 100% ========================".into()));
        if matches!(sequence, Sequence::Nc6 { .. }) {
            if udp {
                ops.extend([Kind::UdpEcho, Kind::UdpSend, Kind::UdpRecv].map(|k| test(k, 640, 1024)));
            }
            if tcp {
                ops.extend([Kind::TcpEcho, Kind::TcpSend, Kind::TcpRecv].map(|k| test(k, 640, 1024)));
            }
        }
        if tcp {
            ops.push(test(Kind::TcpEcho, 64, 10240));
        }
        if slave_loads {
            let mut then =
                vec![Op::Print("\n====================== Various slave compute loads ===================".into())];
            for &load in loads {
                then.push(Op::Print(format!(">>>>>>>>>>>> slave processing load at {load}%")));
                then.push(Op::Control { kind: Kind::SetLoad, nbufs: load });
                if udp {
                    then.push(test(Kind::UdpEcho, load_bufs, 1024));
                }
                if tcp {
                    then.push(test(Kind::TcpEcho, load_bufs, 1024));
                }
            }
            ops.push(Op::Gate {
                kind: Kind::SetLoad,
                then,
                skipped: format!("{NOTE_PREFIX}the slave refused SET_LOAD: the slave compute load section is skipped"),
            });
        }
        if master_loads {
            let mut then = vec![
                Op::Print("\n====================== Various master loads ===================".into()),
                Op::Print(format!("Testing IDLE for {} seconds", idle_time.as_secs())),
                Op::Sleep(idle_time),
                Op::StopIdle { calibrate: true },
            ];
            for &(ticks, threshold) in pauses {
                let pause = Pause { ticks, threshold };
                for (kind, on) in [(Kind::UdpEcho, udp), (Kind::TcpEcho, tcp)] {
                    if on {
                        then.push(Op::Control { kind: Kind::StartIdle, nbufs: 0 });
                        then.push(Op::Test { kind, nbufs: load_bufs, buflen: 1024, pause });
                        then.push(Op::StopIdle { calibrate: false });
                    }
                }
            }
            ops.push(Op::Gate {
                kind: Kind::StartIdle,
                then,
                skipped: format!(
                    "{NOTE_PREFIX}the slave refused START_IDLE: the master load (idle) section is skipped"
                ),
            });
        }
        if disconnect {
            ops.push(Op::Control { kind: Kind::Disconnect, nbufs: 0 });
        }
        Self::from_ops(ops)
    }

    /// One test, as `do_udp_test` / `do_tcp_test` runs it (no DISCONNECT after it).
    pub fn single(kind: Kind, nbufs: u32, buflen: u32, pause: Pause) -> Self {
        Self::from_ops(vec![Op::Test { kind, nbufs, buflen, pause }])
    }

    fn from_ops(ops: Vec<Op>) -> Self {
        MasterSuite {
            ops: ops.into(),
            test_seq: 1,
            waiting: None,
            idle_count: 0,
            idle_ticks: 0,
            reports: Vec::new(),
            idle_lines: Vec::new(),
            disconnected: false,
        }
    }

    fn control_request(kind: Kind, seq: u32, nbufs: u32) -> Request {
        // The stock master sets only type, seq and (SET_LOAD) nbufs; the rest is stack garbage.
        Request { code: kind.code(), seq, nbufs, buflen: 0, slave_port: 0, master_port: 0, timeout: 0 }
    }

    /// What to do next (call again after each step is done).
    pub fn next_step(&mut self) -> SuiteStep {
        if self.waiting.is_some() {
            // A reply or a test is outstanding; the driver must answer it first.
            return SuiteStep::Done;
        }
        let Some(op) = self.ops.pop_front() else {
            return SuiteStep::Done;
        };
        match &op {
            Op::Print(s) => SuiteStep::Print(s.clone()),
            Op::Sleep(d) => SuiteStep::Sleep(*d),
            Op::Test { kind, nbufs, buflen, .. } => {
                self.test_seq = self.test_seq.wrapping_add(1);
                let req = Request::new(*kind, self.test_seq, *nbufs, *buflen);
                self.waiting = Some(op);
                SuiteStep::Request(req)
            }
            Op::Control { kind, nbufs } => {
                let req = Self::control_request(*kind, self.test_seq, *nbufs);
                self.waiting = Some(op);
                SuiteStep::Request(req)
            }
            Op::Gate { kind, .. } => {
                let req = Self::control_request(*kind, self.test_seq, 0);
                self.waiting = Some(op);
                SuiteStep::Request(req)
            }
            Op::StopIdle { .. } => {
                let req = Self::control_request(Kind::StopIdle, self.test_seq, 0);
                self.waiting = Some(op);
                SuiteStep::Request(req)
            }
        }
    }

    /// The reply to the last [`SuiteStep::Request`] (`None`: none within [`REPLY_TIMEOUT`], or
    /// not a valid reply). Returns the lines to print now and, for an ACKed test, the step
    /// that runs it.
    pub fn reply(&mut self, reply: Option<&[u8]>) -> (Vec<String>, Option<SuiteStep>) {
        let Some(op) = self.waiting.take() else {
            return (Vec::new(), None);
        };
        let mut lines = Vec::new();
        let reply = match reply.map(Reply::decode) {
            None => {
                lines.push("No response to command".to_string());
                None
            }
            Some(Err(e)) => {
                lines.push(format!("{NOTE_PREFIX}{e}"));
                None
            }
            Some(Ok(r)) => {
                if r.seq != self.test_seq {
                    lines.push(format!(
                        "Response out of order - sent: {}, recvd: {}",
                        self.test_seq as i32, r.seq as i32
                    ));
                }
                Some(r)
            }
        };
        let acked = reply.map(|r| r.is_ack()).unwrap_or(false);
        let mut run = None;
        match op {
            Op::Test { kind, nbufs, buflen, pause } => {
                if acked {
                    lines.push(start_line(kind, nbufs, buflen, pause));
                    let mut t = MasterTest::new(kind, self.test_seq, nbufs, buflen, pause);
                    t.report.lines.extend(lines.iter().cloned());
                    self.waiting = Some(Op::Test { kind, nbufs, buflen, pause });
                    run = Some(SuiteStep::RunTest(Box::new(t)));
                } else {
                    lines.push(format!("Slave denied {} [{nbufs},{buflen}] test", kind.name()));
                    let mut t = MasterTest::new(kind, self.test_seq, nbufs, buflen, pause);
                    t.report.denied = true;
                    t.report.lines = lines.clone();
                    self.reports.push(t.into_report());
                }
            }
            Op::Gate { then, skipped, .. } => {
                if acked {
                    for o in then.into_iter().rev() {
                        self.ops.push_front(o);
                    }
                } else {
                    lines.push(skipped);
                }
            }
            Op::Control { kind: Kind::Disconnect, .. } => self.disconnected = acked,
            Op::Control { .. } => {}
            Op::StopIdle { calibrate } => match reply.filter(|r| r.is_ack()) {
                Some(r) => {
                    let ticks = r.elapsed_ticks;
                    let count = r.idle_count();
                    let mut l = format!("IDLE - ticks: {}, count: {count}", ticks as i32);
                    if calibrate {
                        self.idle_count = count;
                        self.idle_ticks = ticks;
                    } else if ticks > 0 && self.idle_count > 0 {
                        let adj = (count / u64::from(ticks)).saturating_mul(u64::from(self.idle_ticks));
                        l.push_str(&format!(", {}% idle", adj.saturating_mul(100) / self.idle_count));
                    }
                    lines.push(l.clone());
                    self.idle_lines.push(l);
                }
                None => lines.push("Slave failed on IDLE".to_string()),
            },
            Op::Print(_) | Op::Sleep(_) => {}
        }
        (lines, run)
    }

    /// The outcome of the last [`SuiteStep::RunTest`] (`None`: the data channel failed; the
    /// driver has printed why).
    pub fn test_done(&mut self, report: Option<MasterReport>) {
        if let Some(Op::Test { .. }) = self.waiting.take() {
            if let Some(r) = report {
                self.reports.push(r);
            }
        }
    }

    /// The reports of the tests run so far (denied ones included).
    pub fn reports(&self) -> &[MasterReport] {
        &self.reports
    }

    /// The IDLE lines so far.
    pub fn idle_lines(&self) -> &[String] {
        &self.idle_lines
    }

    /// Did the slave ACK a DISCONNECT?
    pub fn disconnected(&self) -> bool {
        self.disconnected
    }
}
