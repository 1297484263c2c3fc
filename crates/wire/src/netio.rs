//! netio (Kai Uwe Rommel's network benchmark, 1.26 to 1.34; the protocol the MDK netio server
//! speaks), sans-IO: the CONTROL message, the block framing with its in-band end marker, the
//! client's and the server's state machines, and netio's own output line.
//!
//! The wire, as netio.c does it:
//! - CONTROL: 8 bytes, `cmd` then `data`, both u32 big-endian (since rev 1.23; older builds send
//!   host order, which [`Control::decode`] recognises): QUIT 0, C2S 1 (client sends blocks of
//!   `data` bytes), S2C 2 (server sends), RES 3 (UDP: a datagram count).
//! - TCP (port 18767): after C2S the client writes whole `data`-byte blocks whose first byte is
//!   0 for 6 s, then one block whose first byte is 1 (the end marker, counted as data). After S2C
//!   the server does the same. Both ends read whole blocks and look at byte 0 only.
//! - UDP (TCP control on port+1, datagrams between port+1 and port+1): C2S is echoed back, then
//!   the client sends one datagram per block for 6 s; RES is answered with the datagrams
//!   received since C2S; S2C makes the server send datagrams for 6 s to the client's address at
//!   port+1, then RES with the number it sent.
//!
//! Times are netio's: 1/1024 s ([`t1024`]); rates in binary units chosen from the total bytes
//! ([`rate_text`]).

use std::time::{Duration, Instant};

/// The TCP test port ("IO").
pub const TCP_PORT: u16 = 0x494F;
/// The UDP test's control (TCP) and data (UDP) port, on both ends: the TCP port plus one.
pub const UDP_PORT: u16 = TCP_PORT + 1;
/// Seconds each direction runs.
pub const INTERVAL: Duration = Duration::from_secs(6);
/// The stock client's block sizes (the last is 32767, printed "32k").
pub const SIZES: [u32; 6] = [1024, 2048, 4096, 8192, 16384, 32767];
/// The largest block netio handles (its buffer).
pub const MAX_BLOCK: u32 = 65536;
/// Bytes in a CONTROL message.
pub const CONTROL_LEN: usize = 8;

/// A CONTROL command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmd {
    /// End of the session.
    Quit = 0,
    /// The client sends.
    C2S = 1,
    /// The server sends.
    S2C = 2,
    /// UDP: a count of datagrams.
    Res = 3,
}

impl Cmd {
    fn from_u32(v: u32) -> Option<Self> {
        Some(match v {
            0 => Self::Quit,
            1 => Self::C2S,
            2 => Self::S2C,
            3 => Self::Res,
            _ => return None,
        })
    }
}

/// A CONTROL message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Control {
    /// The command as sent (unknown values are kept: the server closes on them).
    pub cmd: u32,
    /// Block size (C2S, S2C) or datagram count (RES).
    pub data: u32,
}

impl Control {
    /// A message.
    pub fn new(cmd: Cmd, data: u32) -> Self {
        Self { cmd: cmd as u32, data }
    }

    /// The command, if known.
    pub fn command(&self) -> Option<Cmd> {
        Cmd::from_u32(self.cmd)
    }

    /// The 8 bytes on the wire (big-endian).
    pub fn encode(&self) -> [u8; CONTROL_LEN] {
        let mut b = [0u8; CONTROL_LEN];
        b[..4].copy_from_slice(&self.cmd.to_be_bytes());
        b[4..].copy_from_slice(&self.data.to_be_bytes());
        b
    }

    /// The 8 bytes in the byte order a peer used: `little` for builds before rev 1.23.
    pub fn encode_in(&self, little: bool) -> [u8; CONTROL_LEN] {
        if !little {
            return self.encode();
        }
        let mut b = [0u8; CONTROL_LEN];
        b[..4].copy_from_slice(&self.cmd.to_le_bytes());
        b[4..].copy_from_slice(&self.data.to_le_bytes());
        b
    }

    /// Decodes 8 bytes in a byte order already known (`little` for a pre-1.23 peer).
    pub fn decode_in(b: &[u8; CONTROL_LEN], little: bool) -> Self {
        let r = |x: &[u8]| [x[0], x[1], x[2], x[3]];
        if little {
            Self { cmd: u32::from_le_bytes(r(&b[..4])), data: u32::from_le_bytes(r(&b[4..])) }
        } else {
            Self { cmd: u32::from_be_bytes(r(&b[..4])), data: u32::from_be_bytes(r(&b[4..])) }
        }
    }

    /// Decodes 8 bytes; the flag is true when they were little-endian (a pre-1.23 build: the
    /// big-endian command is not one of the four, the little-endian one is).
    pub fn decode(b: &[u8; CONTROL_LEN]) -> (Self, bool) {
        let be = |r: &[u8]| u32::from_be_bytes([r[0], r[1], r[2], r[3]]);
        let le = |r: &[u8]| u32::from_le_bytes([r[0], r[1], r[2], r[3]]);
        let (cmd_be, cmd_le) = (be(&b[..4]), le(&b[..4]));
        if cmd_be > 3 && cmd_le <= 3 {
            (Self { cmd: cmd_le, data: le(&b[4..]) }, true)
        } else {
            (Self { cmd: cmd_be, data: be(&b[4..]) }, false)
        }
    }
}

/// netio's label for a block size: `" 1k"`, `"32k"` (32767 too), or the plain number.
pub fn packet_size(n: u32) -> String {
    if n.is_multiple_of(1024) || n % 1024 == 1023 {
        format!("{:2}k", (n + 512) / 1024)
    } else {
        n.to_string()
    }
}

/// A duration in netio's timer units (1/1024 s, truncated as its `StopTimer` does from
/// seconds and microseconds).
pub fn t1024(d: Duration) -> u64 {
    d.as_secs() * 1024 + u64::from(d.subsec_micros()) * 1024 / 1_000_000
}

/// A rate as netio prints it, with its leading space: the unit from the total bytes (below
/// 61,440 B: Byte/s; below 60 MiB: KByte/s; below 6 GiB: MByte/s; else GByte/s), the value from
/// bytes and the time in 1/1024 s. `None` for a zero time (netio would divide by zero).
pub fn rate_text(bytes: u64, t1024: u64) -> Option<String> {
    if t1024 == 0 {
        return None;
    }
    let (b, t) = (bytes as f64, t1024 as f64);
    let secs = INTERVAL.as_secs();
    Some(if bytes < 10 * 1024 * secs {
        format!(" {:.0} Byte/s", b * 1024.0 / t)
    } else if bytes < 10 * 1024 * 1024 * secs {
        format!(" {:.2} KByte/s", b / t)
    } else if bytes < 1024 * 1024 * 1024 * secs {
        format!(" {:.2} MByte/s", b / t / 1024.0)
    } else {
        format!(" {:.3} GByte/s", b / t / 1024.0 / 1024.0)
    })
}

/// One direction of one block size, as this end measured it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Leg {
    /// Bytes netio counts: blocks written or read (the marker included), or for UDP Tx the
    /// datagrams the server says it received times the size.
    pub bytes: u64,
    /// The time in 1/1024 s.
    pub t1024: u64,
    /// UDP: datagrams sent by the sending end.
    pub sent: Option<u64>,
    /// UDP: datagrams received by the receiving end.
    pub received: Option<u64>,
}

impl Leg {
    /// UDP loss in whole percent as netio computes it (integer division), if known.
    pub fn loss_percent(&self) -> Option<u64> {
        match (self.sent, self.received) {
            (Some(s), Some(r)) if s > 0 => Some(s.saturating_sub(r) * 100 / s),
            _ => None,
        }
    }

    fn text(&self) -> String {
        let mut s = rate_text(self.bytes, self.t1024).unwrap_or_else(|| " (failed)".into());
        if let Some(l) = self.loss_percent() {
            s.push_str(&format!(" ({l}%)"));
        }
        s
    }
}

/// The figures of one block size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SizeResult {
    /// The block size.
    pub size: u32,
    /// Client to server.
    pub tx: Option<Leg>,
    /// Server to client (None in Tx-only mode or when it failed).
    pub rx: Option<Leg>,
    /// Why a leg is missing, when one is.
    pub note: Option<String>,
}

impl SizeResult {
    /// The line netio prints: `Packet size  1k bytes:  52.23 MByte/s Tx,  55.97 MByte/s Rx.`
    pub fn line(&self) -> String {
        let leg = |l: &Option<Leg>| l.map_or_else(|| " (failed)".to_string(), |l| l.text());
        format!("Packet size {} bytes: {} Tx, {} Rx.", packet_size(self.size), leg(&self.tx), leg(&self.rx))
    }
}

/// Reads whole blocks of one size and stops after the end-marker block (byte 0 not 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockReader {
    size: usize,
    offset: usize,
    marker: bool,
    done: bool,
    /// Bytes of whole blocks read (the marker included once complete).
    pub bytes: u64,
}

impl BlockReader {
    /// A reader for blocks of `size` (1..=[`MAX_BLOCK`]) bytes.
    pub fn new(size: u32) -> Self {
        Self { size: size.clamp(1, MAX_BLOCK) as usize, offset: 0, marker: false, done: false, bytes: 0 }
    }

    /// Takes bytes; returns how many belonged to the blocks (all of them, or up to the end of
    /// the marker block).
    pub fn feed(&mut self, data: &[u8]) -> usize {
        let mut used = 0;
        while used < data.len() && !self.done {
            if self.offset == 0 {
                self.marker = data[used] != 0;
            }
            let take = (self.size - self.offset).min(data.len() - used);
            self.offset += take;
            used += take;
            if self.offset == self.size {
                self.offset = 0;
                self.bytes += self.size as u64;
                self.done = self.marker;
            }
        }
        used
    }

    /// True once the marker block is complete.
    pub fn done(&self) -> bool {
        self.done
    }
}

/// One fixed-size buffer of CONTROL bytes, filled across reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct ControlBuf {
    buf: [u8; CONTROL_LEN],
    len: usize,
}

impl ControlBuf {
    /// Takes bytes until a message is whole; returns bytes used and the message.
    fn feed(&mut self, data: &[u8]) -> (usize, Option<[u8; CONTROL_LEN]>) {
        let take = (CONTROL_LEN - self.len).min(data.len());
        self.buf[self.len..self.len + take].copy_from_slice(&data[..take]);
        self.len += take;
        if self.len == CONTROL_LEN {
            self.len = 0;
            (take, Some(self.buf))
        } else {
            (take, None)
        }
    }
}

/// What a netio server must do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerEvent {
    /// C2S: the client starts sending blocks of this size (TCP); for UDP: zero the datagram
    /// counters (the C2S echo is queued already).
    Receive {
        /// Block size.
        size: u32,
    },
    /// TCP: the client's blocks ended with the marker; these bytes came.
    Received {
        /// Block size.
        size: u32,
        /// Bytes of whole blocks, the marker included.
        bytes: u64,
    },
    /// S2C: send blocks (TCP) or datagrams (UDP) of this size for the interval, then the
    /// marker block (TCP, [`Server::sent`]) or RES with the count (UDP, [`Server::udp_sent`]).
    Send {
        /// Block size.
        size: u32,
    },
    /// UDP: RES asks for the datagrams received since C2S ([`Server::udp_count`]).
    CountRequested,
    /// QUIT, or the end of the connection: close.
    Quit,
}

/// Why a netio server closes a connection early.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetioError {
    /// A command that is none of the four.
    #[error("netio: unknown command {0} (the stock server closes the connection on it)")]
    UnknownCommand(u32),
    /// A block size netio cannot have asked for.
    #[error("netio: block size {0} out of range (1 to 65536)")]
    BadSize(u32),
    /// A message where none may come.
    #[error("netio: unexpected {0} now")]
    Unexpected(&'static str),
    /// The connection ended in the middle of a block or message.
    #[error("netio: the connection ended in the middle of a {0}")]
    Truncated(&'static str),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum ServerState {
    /// Waiting for a CONTROL message.
    Control,
    /// TCP: reading the client's blocks.
    Receiving(BlockReader),
    /// Sending (TCP blocks or UDP datagrams) until the driver says it is done.
    Sending,
    /// UDP: waiting for the driver's count to answer RES.
    Counting,
    /// Closed.
    Closed,
}

/// The server side of one netio connection (TCP test on 18767, or the UDP test's control
/// connection on 18768), sans-IO.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    udp: bool,
    state: ServerState,
    control: ControlBuf,
    little: bool,
    out: Vec<u8>,
    events: std::collections::VecDeque<ServerEvent>,
    /// Input that came while sending (the next CONTROL), at most a few messages.
    held: Vec<u8>,
}

impl Server {
    /// A server for a TCP test connection (`udp` false) or a UDP test's control connection.
    pub fn new(udp: bool) -> Self {
        Self {
            udp,
            state: ServerState::Control,
            control: ControlBuf::default(),
            little: false,
            out: Vec::new(),
            events: Default::default(),
            held: Vec::new(),
        }
    }

    /// Feeds bytes read from the connection.
    pub fn handle_input(&mut self, mut data: &[u8]) -> Result<(), NetioError> {
        while !data.is_empty() {
            match &mut self.state {
                ServerState::Closed => return Ok(()),
                ServerState::Sending | ServerState::Counting => {
                    // The stock client sends nothing before the server's answer; keep a few
                    // messages' worth, refuse a flood.
                    if self.held.len() + data.len() > 4 * CONTROL_LEN {
                        return Err(NetioError::Unexpected("data while the server is sending"));
                    }
                    self.held.extend_from_slice(data);
                    return Ok(());
                }
                ServerState::Receiving(r) => {
                    let used = r.feed(data);
                    data = &data[used..];
                    if r.done() {
                        let (size, bytes) = (r.size as u32, r.bytes);
                        self.events.push_back(ServerEvent::Received { size, bytes });
                        self.state = ServerState::Control;
                    }
                }
                ServerState::Control => {
                    let (used, msg) = self.control.feed(data);
                    data = &data[used..];
                    if let Some(b) = msg {
                        self.on_control(&b)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn on_control(&mut self, b: &[u8; CONTROL_LEN]) -> Result<(), NetioError> {
        // A peer once seen sending little-endian stays so (QUIT's zero reads the same either way).
        let (c, little) = if self.little { (Control::decode_in(b, true), true) } else { Control::decode(b) };
        self.little = little;
        let size_ok = |s: u32| if (1..=MAX_BLOCK).contains(&s) { Ok(s) } else { Err(NetioError::BadSize(s)) };
        match c.command() {
            Some(Cmd::C2S) => {
                let size = size_ok(c.data)?;
                self.events.push_back(ServerEvent::Receive { size });
                if self.udp {
                    self.out.extend_from_slice(&c.encode_in(little));
                } else {
                    self.state = ServerState::Receiving(BlockReader::new(size));
                }
            }
            Some(Cmd::S2C) => {
                let size = size_ok(c.data)?;
                self.events.push_back(ServerEvent::Send { size });
                self.state = ServerState::Sending;
            }
            Some(Cmd::Res) if self.udp => {
                self.events.push_back(ServerEvent::CountRequested);
                self.state = ServerState::Counting;
            }
            Some(Cmd::Res) => return Err(NetioError::Unexpected("RES on the TCP test connection")),
            Some(Cmd::Quit) => {
                self.events.push_back(ServerEvent::Quit);
                self.state = ServerState::Closed;
            }
            None => return Err(NetioError::UnknownCommand(c.cmd)),
        }
        Ok(())
    }

    /// The connection ended (EOF).
    pub fn handle_eof(&mut self) -> Result<(), NetioError> {
        let was = std::mem::replace(&mut self.state, ServerState::Closed);
        self.events.push_back(ServerEvent::Quit);
        match was {
            ServerState::Receiving(_) => Err(NetioError::Truncated("block")),
            ServerState::Control if self.control.len > 0 => Err(NetioError::Truncated("control message")),
            _ => Ok(()),
        }
    }

    /// The next thing to do.
    pub fn poll_event(&mut self) -> Option<ServerEvent> {
        self.events.pop_front()
    }

    /// Bytes to write to the connection.
    pub fn poll_output(&mut self, out: &mut Vec<u8>) {
        out.append(&mut self.out);
    }

    /// The block that ends a TCP S2C phase (byte 0 is 1); the driver writes it after its
    /// blocks, then calls [`Self::sent`].
    pub fn marker(size: u32) -> Vec<u8> {
        let mut b = vec![0u8; size.clamp(1, MAX_BLOCK) as usize];
        b[0] = 1;
        b
    }

    /// TCP: the S2C phase is over (blocks and marker written).
    pub fn sent(&mut self) -> Result<(), NetioError> {
        if self.state != ServerState::Sending || self.udp {
            return Err(NetioError::Unexpected("end of sending"));
        }
        self.resume()
    }

    /// UDP: the S2C phase is over with `datagrams` sent; queues RES with the count.
    pub fn udp_sent(&mut self, datagrams: u32) -> Result<(), NetioError> {
        if self.state != ServerState::Sending || !self.udp {
            return Err(NetioError::Unexpected("end of sending"));
        }
        self.out.extend_from_slice(&Control::new(Cmd::Res, datagrams).encode_in(self.little));
        self.resume()
    }

    /// UDP: answers RES with the datagrams received since C2S.
    pub fn udp_count(&mut self, datagrams: u32) -> Result<(), NetioError> {
        if self.state != ServerState::Counting {
            return Err(NetioError::Unexpected("count"));
        }
        self.out.extend_from_slice(&Control::new(Cmd::Res, datagrams).encode_in(self.little));
        self.resume()
    }

    fn resume(&mut self) -> Result<(), NetioError> {
        self.state = ServerState::Control;
        let held = std::mem::take(&mut self.held);
        self.handle_input(&held)
    }

    /// True once closed.
    pub fn is_closed(&self) -> bool {
        self.state == ServerState::Closed
    }
}

/// What the netio client's driver must do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientStep {
    /// Write these bytes (CONTROL messages, a marker block) to the control connection.
    Write(Vec<u8>),
    /// Send blocks (TCP: on the connection, byte 0 = 0; UDP: datagrams) of `size` until
    /// `until`, then call [`Client::transmitted`].
    Transmit {
        /// Block size.
        size: u32,
        /// When to stop.
        until: Instant,
    },
    /// TCP: read blocks and feed them to [`Client::handle_input`] until this step changes.
    Receive {
        /// Block size.
        size: u32,
    },
    /// Read a CONTROL message and feed it to [`Client::handle_input`] (UDP; for the Rx phase
    /// the driver counts the datagrams meanwhile and reports them with
    /// [`Client::udp_received`] before feeding the RES).
    AwaitControl,
    /// Every size is done (QUIT written).
    Done,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum ClientPhase {
    Start,
    /// UDP: C2S written, its echo awaited.
    C2SEcho,
    Transmitting {
        started: Instant,
    },
    /// UDP: RES written, the count awaited.
    TxCount {
        sent: u64,
        t: u64,
    },
    Receiving {
        started: Instant,
        reader: BlockReader,
    },
    /// UDP: S2C written, RES {sent} awaited.
    RxCount {
        started: Instant,
    },
    Quit,
    Done,
}

/// The netio client, sans-IO: the stock sequence over `sizes` (TCP or UDP), with an optional
/// Tx-only mode for sink servers (lwIP's contrib netio discards and never sends).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Client {
    udp: bool,
    tx_only: bool,
    sizes: Vec<u32>,
    index: usize,
    phase: ClientPhase,
    interval: Duration,
    control: ControlBuf,
    pending: Vec<u8>,
    current: Option<SizeResult>,
    udp_rx: Option<(u64, u64)>,
    /// The finished sizes.
    pub results: Vec<SizeResult>,
}

impl Client {
    /// A client for `sizes` (each 1..=65536), each direction `interval` long (netio: 6 s).
    pub fn new(sizes: &[u32], udp: bool, tx_only: bool, interval: Duration) -> Self {
        Self {
            udp,
            tx_only,
            sizes: sizes.iter().map(|&s| s.clamp(1, MAX_BLOCK)).collect(),
            index: 0,
            phase: ClientPhase::Start,
            interval,
            control: ControlBuf::default(),
            pending: Vec::new(),
            current: None,
            udp_rx: None,
            results: Vec::new(),
        }
    }

    fn size(&self) -> u32 {
        self.sizes[self.index]
    }

    /// The next step at `now`.
    pub fn step(&mut self, now: Instant) -> ClientStep {
        if !self.pending.is_empty() {
            return ClientStep::Write(std::mem::take(&mut self.pending));
        }
        match &self.phase {
            ClientPhase::Start => {
                if self.index >= self.sizes.len() {
                    self.phase = ClientPhase::Quit;
                    return ClientStep::Write(Control::new(Cmd::Quit, 0).encode().to_vec());
                }
                let size = self.size();
                self.current = Some(SizeResult { size, tx: None, rx: None, note: None });
                self.phase = if self.udp { ClientPhase::C2SEcho } else { ClientPhase::Transmitting { started: now } };
                ClientStep::Write(Control::new(Cmd::C2S, size).encode().to_vec())
            }
            ClientPhase::Transmitting { started } => {
                ClientStep::Transmit { size: self.size(), until: *started + self.interval }
            }
            ClientPhase::C2SEcho | ClientPhase::TxCount { .. } | ClientPhase::RxCount { .. } => {
                ClientStep::AwaitControl
            }
            ClientPhase::Receiving { .. } => ClientStep::Receive { size: self.size() },
            ClientPhase::Quit => {
                self.phase = ClientPhase::Done;
                ClientStep::Done
            }
            ClientPhase::Done => ClientStep::Done,
        }
    }

    /// The Tx phase ended at `now` with `blocks` whole blocks (TCP) or datagrams (UDP) sent.
    pub fn transmitted(&mut self, now: Instant, blocks: u64) {
        let ClientPhase::Transmitting { started } = self.phase else { return };
        let size = u64::from(self.size());
        let t = t1024(now.saturating_duration_since(started));
        if self.udp {
            self.phase = ClientPhase::TxCount { sent: blocks, t };
            // The stock client sends RES with whatever `data` its buffer held (the size).
            self.pending = Control::new(Cmd::Res, self.size()).encode().to_vec();
            return;
        }
        if let Some(c) = self.current.as_mut() {
            c.tx = Some(Leg { bytes: blocks * size, t1024: t, sent: None, received: None });
        }
        self.pending = Server::marker(self.size());
        self.after_tx(now);
    }

    fn after_tx(&mut self, now: Instant) {
        if self.tx_only {
            if let Some(c) = self.current.as_mut() {
                c.note = Some("Tx only (--tx-only): the server is a sink".into());
            }
            self.finish_size();
            return;
        }
        self.pending.extend_from_slice(&Control::new(Cmd::S2C, self.size()).encode());
        self.phase = if self.udp {
            self.udp_rx = None;
            ClientPhase::RxCount { started: now }
        } else {
            ClientPhase::Receiving { started: now, reader: BlockReader::new(self.size()) }
        };
    }

    fn finish_size(&mut self) {
        if let Some(c) = self.current.take() {
            self.results.push(c);
        }
        self.index += 1;
        self.phase = ClientPhase::Start;
    }

    /// UDP Rx: the datagrams (and their bytes) received since S2C, before the RES is fed.
    pub fn udp_received(&mut self, datagrams: u64, bytes: u64) {
        self.udp_rx = Some((datagrams, bytes));
    }

    /// The Rx phase gave up at `now` (no data for too long: a sink server): the size is
    /// recorded with Tx only, and the rest of the run is Tx-only.
    pub fn receive_timed_out(&mut self, _now: Instant) {
        if matches!(self.phase, ClientPhase::Receiving { .. } | ClientPhase::RxCount { .. }) {
            if let Some(c) = self.current.as_mut() {
                c.note = Some("no data from the server: Rx skipped, the rest runs Tx only".into());
            }
            self.tx_only = true;
            self.finish_size();
        }
    }

    /// Bytes read from the control connection at `now`; returns how many were used (the rest
    /// belongs to later steps).
    pub fn handle_input(&mut self, now: Instant, data: &[u8]) -> Result<usize, NetioError> {
        match &mut self.phase {
            ClientPhase::Receiving { started, reader } => {
                let used = reader.feed(data);
                if reader.done() {
                    let bytes = reader.bytes;
                    let t = t1024(now.saturating_duration_since(*started));
                    if let Some(c) = self.current.as_mut() {
                        c.rx = Some(Leg { bytes, t1024: t, sent: None, received: None });
                    }
                    self.finish_size();
                }
                Ok(used)
            }
            ClientPhase::C2SEcho | ClientPhase::TxCount { .. } | ClientPhase::RxCount { .. } => {
                let (used, msg) = self.control.feed(data);
                if let Some(b) = msg {
                    self.on_control(now, &b)?;
                }
                Ok(used)
            }
            _ => Err(NetioError::Unexpected("data from the server")),
        }
    }

    fn on_control(&mut self, now: Instant, b: &[u8; CONTROL_LEN]) -> Result<(), NetioError> {
        let (c, _) = Control::decode(b);
        let size = self.size();
        match (&self.phase, c.command()) {
            (ClientPhase::C2SEcho, Some(Cmd::C2S)) => {
                self.phase = ClientPhase::Transmitting { started: now };
            }
            (&ClientPhase::TxCount { sent, t }, Some(Cmd::Res)) => {
                let received = u64::from(c.data);
                if let Some(r) = self.current.as_mut() {
                    r.tx = Some(Leg {
                        bytes: received * u64::from(size),
                        t1024: t,
                        sent: Some(sent),
                        received: Some(received),
                    });
                }
                self.after_tx(now);
            }
            (&ClientPhase::RxCount { started }, Some(Cmd::Res)) => {
                let (got, bytes) = self.udp_rx.unwrap_or((0, 0));
                if let Some(r) = self.current.as_mut() {
                    r.rx = Some(Leg {
                        bytes,
                        t1024: t1024(now.saturating_duration_since(started)),
                        sent: Some(u64::from(c.data)),
                        received: Some(got),
                    });
                }
                self.finish_size();
            }
            (_, None) => return Err(NetioError::UnknownCommand(c.cmd)),
            _ => return Err(NetioError::Unexpected("CONTROL message")),
        }
        Ok(())
    }

    /// True once QUIT was written.
    pub fn is_done(&self) -> bool {
        self.phase == ClientPhase::Done
    }
}

/// netio's UDP datagrams as a [`crate::datagram::DatagramFormat`]: one block each, its
/// first byte 0 (netio looks at byte 0 of a block only; a UDP datagram carries no sequence
/// number or time), so a receiver counts them in arrival order. A sender's datagrams end with
/// nothing: its count goes in RES on the control connection. One per stream: the arrival
/// count is the format's.
#[derive(Debug, Default)]
pub struct BlockDatagrams {
    arrived: std::cell::Cell<u64>,
}

impl crate::datagram::DatagramFormat for BlockDatagrams {
    const STREAM_IDS: bool = false;
    const SEND_TIMES: bool = false;

    fn header_len(&self) -> usize {
        1
    }

    fn emit(&self, buf: &mut [u8], _stream_id: u32, _sequence: u64, _sent_ns: u64) {
        buf[0] = 0;
    }

    fn stamp(&self, _buf: &mut [u8], _sequence: u64, _sent_ns: u64) {}

    fn classify(&self, _buf: &[u8]) -> crate::datagram::Received {
        let sequence = self.arrived.get();
        self.arrived.set(sequence + 1);
        crate::datagram::Received::Data { stream_id: 0, sequence, sent_ns: 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udp_blocks_lead_with_a_zero_and_count_in_arrival_order() {
        use crate::datagram::{DatagramFormat, Received};
        let f = BlockDatagrams::default();
        let mut b = [7u8; 32];
        f.emit(&mut b, 1, 5, 99);
        f.stamp(&mut b, 6, 100);
        assert_eq!((b[0], b[1]), (0, 7), "byte 0 is netio's, the rest the payload");
        assert_eq!(f.classify(&b), Received::Data { stream_id: 0, sequence: 0, sent_ns: 0 });
        assert_eq!(f.classify(&b), Received::Data { stream_id: 0, sequence: 1, sent_ns: 0 });
    }

    #[test]
    fn labels_and_rates_are_netios() {
        assert_eq!(packet_size(1024), " 1k");
        assert_eq!(packet_size(32767), "32k");
        assert_eq!(packet_size(16384), "16k");
        assert_eq!(packet_size(1500), "1500");
        assert_eq!(t1024(Duration::from_millis(6000)), 6144);
        assert_eq!(t1024(Duration::from_micros(1_999_999)), 1024 + 1023);
        // 6 s of 52.23 MiB/s.
        let bytes = (52.23 * 1024.0 * 1024.0 * 6.0) as u64;
        assert_eq!(rate_text(bytes, 6144).unwrap(), " 52.23 MByte/s");
        assert_eq!(rate_text(61_439, 6144).unwrap(), " 10240 Byte/s");
        assert_eq!(rate_text(61_440, 6144).unwrap(), " 10.00 KByte/s");
        assert_eq!(rate_text(7 << 30, 6144).unwrap(), " 1.167 GByte/s");
        assert_eq!(rate_text(1, 0), None);
    }

    #[test]
    fn control_round_trips_and_old_byte_order_is_recognised() {
        let c = Control::new(Cmd::C2S, 1024);
        assert_eq!(c.encode(), [0, 0, 0, 1, 0, 0, 4, 0]);
        assert_eq!(Control::decode(&c.encode()), (c, false));
        assert_eq!(Control::decode(&c.encode_in(true)), (c, true));
        assert_eq!(Control::decode(&[0; 8]), (Control::new(Cmd::Quit, 0), false));
    }

    #[test]
    fn the_block_reader_stops_after_the_marker_block() {
        let mut r = BlockReader::new(4);
        let mut data = vec![0u8; 8];
        data.extend([1, 9, 9, 9]);
        data.extend([0, 0, 0, 1]);
        assert_eq!(r.feed(&data[..6]), 6);
        assert!(!r.done());
        assert_eq!(r.feed(&data[6..]), 6);
        assert!(r.done());
        assert_eq!(r.bytes, 12);
    }

    #[test]
    fn a_tcp_server_answers_the_stock_sequence() {
        let mut s = Server::new(false);
        let mut input = Control::new(Cmd::C2S, 1024).encode().to_vec();
        input.extend(vec![0u8; 3 * 1024]);
        input.extend(Server::marker(1024));
        input.extend(Control::new(Cmd::S2C, 1024).encode());
        s.handle_input(&input).unwrap();
        assert_eq!(s.poll_event(), Some(ServerEvent::Receive { size: 1024 }));
        assert_eq!(s.poll_event(), Some(ServerEvent::Received { size: 1024, bytes: 4096 }));
        assert_eq!(s.poll_event(), Some(ServerEvent::Send { size: 1024 }));
        s.handle_input(&Control::new(Cmd::Quit, 0).encode()).unwrap();
        assert_eq!(s.poll_event(), None, "held until the sending ends");
        s.sent().unwrap();
        assert_eq!(s.poll_event(), Some(ServerEvent::Quit));
        assert!(s.is_closed());
    }

    #[test]
    fn a_server_refuses_what_netio_never_sends() {
        let mut s = Server::new(false);
        assert_eq!(s.handle_input(&[0, 0, 0, 9, 0, 0, 0, 0]), Err(NetioError::UnknownCommand(9)));
        let mut s = Server::new(false);
        assert_eq!(s.handle_input(&Control::new(Cmd::C2S, 70000).encode()), Err(NetioError::BadSize(70000)));
        let mut s = Server::new(false);
        s.handle_input(&Control::new(Cmd::C2S, 100).encode()).unwrap();
        s.handle_input(&[0; 50]).unwrap();
        assert_eq!(s.handle_eof(), Err(NetioError::Truncated("block")));
    }

    #[test]
    fn a_tx_only_client_never_asks_the_sink_to_send() {
        let t0 = Instant::now();
        let mut c = Client::new(&[1024, 2048], false, true, INTERVAL);
        let mut written = Vec::new();
        loop {
            match c.step(t0) {
                ClientStep::Write(b) => written.extend(b),
                ClientStep::Transmit { .. } => c.transmitted(t0 + INTERVAL, 10),
                ClientStep::Done => break,
                other => panic!("{other:?}"),
            }
        }
        let mut s = Server::new(false);
        s.handle_input(&written).unwrap();
        let events: Vec<_> = std::iter::from_fn(|| s.poll_event()).collect();
        assert!(!events.iter().any(|e| matches!(e, ServerEvent::Send { .. })), "{events:?}");
        assert_eq!(c.results.len(), 2);
        assert_eq!(c.results[0].tx.unwrap().bytes, 10 * 1024);
    }
}
