//! The master's side of one test: its data loop ([`MasterTest`]) and what it measured
//! ([`MasterReport`]). The requests that start each test are [`super::suite`]'s.

use super::lines::{result_line, slave_counts_line, under_one_tick_line, NOTE_PREFIX};
use super::{
    be, data_buffer, DataHeader, Kind, Pause, Results, Step, DATA_HEADER_LEN, DATA_KEY1, MAX_ERRORS, RESULTS_LEN,
    RESULTS_TIMEOUT, TEST_TIMEOUT, TICK,
};
use std::time::{Duration, Instant};

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
/// [`TCP_CONNECT_DELAY`](super::TCP_CONNECT_DELAY) and connects) and prints [`start_line`](super::start_line).
#[derive(Debug)]
pub struct MasterTest {
    /// What it measured so far (the suite adds the lines before the test, or marks it denied).
    pub(super) report: MasterReport,
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
                    let note = under_one_tick_line(r.total_packets, r.buflen, r.elapsed);
                    self.print(line);
                    if let Some(note) = note {
                        self.print(note);
                    }
                }
                MPhase::Results => {
                    if let Some(r) = self.report.results {
                        self.phase = MPhase::Done;
                        self.print(slave_counts_line(r.nsent, r.nrecvd));
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
                        slave_counts_line(r.nsent, r.nrecvd)
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
