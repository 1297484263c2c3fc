//! The slave's side: its answer to each request ([`Slave`]) and the data loop of a test it
//! ACKed ([`SlaveTest`]).

use super::{
    be, data_buffer, DataHeader, Kind, Reply, Request, Results, Step, DATA_HEADER_LEN, DATA_SLAVE_PORT, MAX_BUFLEN,
    MAX_ERRORS, NAK_BAD_REQUEST, NAK_NO_BACKGROUND, NAK_UNKNOWN_REQUEST, TEST_TIMEOUT,
};

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
