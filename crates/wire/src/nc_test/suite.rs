//! The master's whole sequence ([`MasterSuite`]): `nc_test_master`'s or
//! `nc6_test_master`'s requests, their replies, the tests they start and the lines between.

use super::lines::{
    slave_load_line, start_line, MASTER_LOADS_HEADING, NOTE_PREFIX, NO_LOAD_HEADING, SLAVE_LOADS_HEADING,
};
use super::master::{MasterReport, MasterTest};
use super::{Kind, Pause, Reply, Request, IDLE_TEST_TIME};
use std::time::Duration;

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

/// The sizes of a master's sequence: the stock master's, or the short form of `suite ecos
/// --quick`. The native eCos suite (`netchar suite ecos` over netchar's own protocol) runs the
/// same shape, so both modes run the same tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SuiteShape {
    /// The slave's background loads of the slave-load section, in percent.
    pub loads: &'static [u32],
    /// Buffers of 1024 bytes per test of the two load sections.
    pub load_bufs: u32,
    /// The master's idle calibration before the master-load section.
    pub idle_time: Duration,
    /// The master's pauses of the master-load section, in its order.
    pub pauses: &'static [Pause],
    /// The short form: the line that says so comes first.
    pub quick: bool,
}

impl SuiteShape {
    /// The stock master's sizes (`quick` false) or the short form: loads of 0 and 50% where
    /// the stock master steps 0-50% by 10, 256 buffers where it sends 2048, a 1 s idle
    /// calibration instead of 10 s, and the first two of its five pause patterns (the last
    /// three pause for 10-20 s each).
    pub fn new(quick: bool) -> Self {
        const fn p(ticks: u32, threshold: u32) -> Pause {
            Pause { ticks, threshold }
        }
        const STOCK: [Pause; 5] = [p(0, 0), p(1, 10), p(5, 10), p(10, 10), p(1, 1)];
        if quick {
            SuiteShape {
                loads: &[0, 50],
                load_bufs: 256,
                idle_time: Duration::from_secs(1),
                pauses: &STOCK[..2],
                quick,
            }
        } else {
            SuiteShape {
                loads: &[0, 10, 20, 30, 40, 50],
                load_bufs: 2048,
                idle_time: IDLE_TEST_TIME,
                pauses: &STOCK,
                quick,
            }
        }
    }

    /// The line the short form starts with (netchar's note).
    pub fn quick_note(&self) -> String {
        format!(
            "{NOTE_PREFIX}--quick: loads {:?}%, {} buffers per load test, a {} s idle calibration, {} pause patterns",
            self.loads,
            self.load_bufs,
            self.idle_time.as_secs(),
            self.pauses.len()
        )
    }

    /// The no-load section's tests (kind, buffers, bytes per buffer), in the master's order:
    /// nc6_test_master's UDP and TCP echo, send and recv of 640 × 1024 (those it runs), then
    /// both masters' TCP echo of 64 × 10240.
    pub fn no_load_tests(sequence: Sequence) -> Vec<(Kind, u32, u32)> {
        let mut tests = Vec::new();
        let (tcp, udp) = match sequence {
            Sequence::Nc => (true, false),
            Sequence::Nc6 { tcp, udp, .. } => (tcp, udp),
        };
        if udp {
            tests.extend([Kind::UdpEcho, Kind::UdpSend, Kind::UdpRecv].map(|k| (k, 640, 1024)));
        }
        if tcp && matches!(sequence, Sequence::Nc6 { .. }) {
            tests.extend([Kind::TcpEcho, Kind::TcpSend, Kind::TcpRecv].map(|k| (k, 640, 1024)));
        }
        if tcp {
            tests.push((Kind::TcpEcho, 64, 10240));
        }
        tests
    }
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
    /// Send this request on the control socket and wait up to [`REPLY_TIMEOUT`](super::REPLY_TIMEOUT) for a reply;
    /// then call [`MasterSuite::reply`].
    Request(Request),
    /// The slave ACKed this test: open the data channel (UDP: bind the master data port; TCP:
    /// wait [`TCP_CONNECT_DELAY`](super::TCP_CONNECT_DELAY), connect), run the loop, then call [`MasterSuite::test_done`]
    /// (with `None` when the data channel could not be opened).
    RunTest(Box<MasterTest>),
    /// Sleep this long (the idle calibration).
    Sleep(Duration),
    /// The sequence is over.
    Done,
}

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
        let shape = SuiteShape::new(quick);
        let (loads, load_bufs, idle_time) = (shape.loads, shape.load_bufs, shape.idle_time);
        let (tcp, udp, slave_loads, master_loads, disconnect) = match sequence {
            Sequence::Nc => (true, true, true, true, true),
            Sequence::Nc6 { tcp, udp, slave_loads, master_loads } => (tcp, udp, slave_loads, master_loads, false),
        };
        let mut ops = Vec::new();
        if quick {
            ops.push(Op::Print(shape.quick_note()));
        }
        ops.push(Op::Print(NO_LOAD_HEADING.into()));
        ops.extend(SuiteShape::no_load_tests(sequence).into_iter().map(|(k, n, len)| test(k, n, len)));
        if slave_loads {
            let mut then = vec![Op::Print(SLAVE_LOADS_HEADING.into())];
            for &load in loads {
                then.push(Op::Print(slave_load_line(load)));
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
                Op::Print(MASTER_LOADS_HEADING.into()),
                Op::Print(format!("Testing IDLE for {} seconds", idle_time.as_secs())),
                Op::Sleep(idle_time),
                Op::StopIdle { calibrate: true },
            ];
            for &pause in shape.pauses {
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

    /// The pause of the test whose request is outstanding (none for a control request): the
    /// driver that runs each request on its own (netchar's client sessions) runs the test's
    /// data loop with it.
    pub fn pending_pause(&self) -> Pause {
        match &self.waiting {
            Some(Op::Test { pause, .. }) => *pause,
            _ => Pause::default(),
        }
    }

    /// The reply to the last [`SuiteStep::Request`] (`None`: none within [`REPLY_TIMEOUT`](super::REPLY_TIMEOUT), or
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
