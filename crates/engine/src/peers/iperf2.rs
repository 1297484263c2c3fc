//! iperf2 and lwIP's lwiperf, both roles. The codecs are netchar_wire::iperf2.
//!
//! Client ([`Iperf2Control`]): iperf2 has no control connection (`ControlConnection::None`);
//! each data stream carries the test's settings itself:
//! - TCP up: a 24-byte 2.0.5-style header with flags 0 (no dial-back, no version ack to
//!   read), then netchar's data; the server counts every byte, the header's included. iperf2
//!   sends no TCP report back, so every figure is netchar's;
//! - TCP down (`-R`): 2.1's header with VERSION2 and the REVERSE flag (iperf 2.1+ servers):
//!   the server sends on the client's connection for `-t` and closes;
//! - UDP up: every datagram carries iperf2's 16-byte header (64-bit sequence numbers, wall
//!   clock stamps) and 2.1's UDP client header; the sender ends with the FIN, repeated until the
//!   server's report comes back on the same socket (the sender's end exchange,
//!   netchar_wire::datagram::DatagramFormat::end_datagram). The report's bytes, loss,
//!   out-of-order count and jitter are the far end's figures;
//! - lwiperf (`--proto lwiperf`): TCP up only, the 24-byte header twice as lwiperf's own client
//!   sends it; lwiperf reports nothing back.
//!
//! Server ([`Iperf2Listener`]): `netchar server --iperf2` answers `iperf -c` over TCP (each
//! connection a stream, its header read and counted as iperf2 counts it) and UDP (a socket per
//! client source, the FIN answered with the server report built from netchar's own counters).

use crate::control::{ClientControl, ControlConnection, ControlEvent, OpenStream, PeerInfo, Transport, UdpHandshake};
use crate::dataplane::DatagramFormatKind;
use netchar_model::{
    CpuUsage, Direction, EndCondition, Endpoint, Flow, Role, StreamRecord, StreamTotal, TestKind, TestSpec, UdpReceived,
};
use netchar_wire::iperf2::{self as wire, Amount, ClientHeader, Extension, Layout, ServerReport};
use netchar_wire::ProtocolError;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How long after a `-R` test's time a silent server is given before the receivers stop.
const DOWN_GRACE: Duration = Duration::from_secs(10);

/// Which of the two peers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    /// iperf 2.0.5 to 2.2 (`iperf -s`, `iperf -s -u`).
    Iperf2,
    /// lwIP's lwiperf (TCP server, receive only).
    Lwiperf,
}

impl Flavour {
    fn flag(self) -> &'static str {
        match self {
            Self::Iperf2 => "--proto iperf2",
            Self::Lwiperf => "--proto lwiperf",
        }
    }
}

/// The spec an iperf2 or lwiperf test runs with, or the one line saying what the peer cannot do.
pub fn check_spec(flavour: Flavour, spec: &TestSpec) -> Result<(), String> {
    let flag = flavour.flag();
    let no = |what: &str| Err(format!("{flag}: {what}"));
    if spec.server_load.is_some() || spec.measure_idle || spec.server_cpu.is_some() {
        return no("--server-load, --idle and a server CPU in -A are netchar server features");
    }
    if spec.tcp.zerocopy {
        return no("--zerocopy is not supported here; drop it");
    }
    match (flavour, spec.kind, spec.direction) {
        (_, TestKind::Rr, _) => no("iperf2 has no request/response test (use tcp or udp)"),
        (Flavour::Lwiperf, TestKind::Udp, _) => no("lwiperf speaks TCP only (lwIP has no UDP iperf yet)"),
        (Flavour::Lwiperf, _, Direction::Down | Direction::Bidir) => {
            no("an lwiperf server only receives; its -d/-r dial-back tests are not supported (the board would \
             connect back to this host)")
        }
        (_, _, Direction::Bidir) => no("--bidir is not supported with iperf2 (its --full-duplex is not implemented)"),
        (_, TestKind::Udp, Direction::Down) => no("UDP -R is not supported with iperf2 yet; run the UDP test up"),
        (_, TestKind::Tcp, Direction::Down) if matches!(spec.end, EndCondition::Bytes(_)) => {
            no("-n with -R: an iperf2 server sends for a time; use -t")
        }
        _ => Ok(()),
    }
}

/// No UDP setup: an iperf2 server takes the first datagram as the test's start.
struct NoSetup;

impl UdpHandshake for NoSetup {
    fn datagram(&self) -> Vec<u8> {
        Vec::new()
    }
    fn on_datagram(&mut self, _bytes: &[u8]) -> bool {
        false
    }
    fn answered(&self) -> bool {
        true
    }
}

/// netchar as the client of an iperf2 server or an lwiperf server.
pub struct Iperf2Control {
    flavour: Flavour,
    spec: TestSpec,
    port: u16,
    events: VecDeque<ControlEvent>,
    admitted: bool,
    reported: bool,
    /// `-R`: when the receivers stop if the server has not closed by then.
    down_deadline: Option<Instant>,
    /// UDP: the servers' reports by stream id.
    reports: Vec<(u32, ServerReport)>,
}

impl Iperf2Control {
    /// A session for `spec` against a server on `port`, or why the peer cannot run it.
    pub fn new(now: Instant, flavour: Flavour, spec: &TestSpec, port: u16) -> Result<Self, String> {
        check_spec(flavour, spec)?;
        let down_deadline = match (spec.direction, spec.end) {
            (Direction::Down, EndCondition::Seconds(s)) => Some(now + Duration::from_secs_f64(s) + DOWN_GRACE),
            _ => None,
        };
        Ok(Self {
            flavour,
            spec: spec.clone(),
            port,
            events: VecDeque::new(),
            admitted: false,
            reported: false,
            down_deadline,
            reports: Vec::new(),
        })
    }

    fn amount(&self) -> Amount {
        match self.spec.end {
            EndCondition::Seconds(s) => Amount::Seconds(s),
            EndCondition::Bytes(b) => Amount::Bytes(b / u64::from(self.spec.streams.max(1))),
        }
    }

    /// The bytes a TCP stream starts with.
    fn tcp_preamble(&self) -> Vec<u8> {
        match (self.flavour, self.spec.direction) {
            (Flavour::Lwiperf, _) => wire::lwiperf::client_preamble(self.amount(), self.port),
            (Flavour::Iperf2, Direction::Down) => {
                let mut h = ClientHeader::new(self.amount(), self.spec.block_bytes as u32, self.port);
                h.flags = wire::HEADER_VERSION2;
                h.num_threads = self.spec.streams as i32;
                let (version_u, version_l) = (0x0002_0001, 0x0008_0003);
                h.ext =
                    Some(Extension { upper_flags: wire::UPPER_REVERSE, version_u, version_l, ..Default::default() });
                h.encode(Layout::V21)
            }
            (Flavour::Iperf2, _) => {
                // flags 0: the server reads the flags word and counts the rest as data.
                let mut h = ClientHeader::new(self.amount(), self.spec.block_bytes as u32, self.port);
                h.num_threads = self.spec.streams as i32;
                h.encode(Layout::V205)
            }
        }
    }

    fn streams(&self) -> Vec<OpenStream> {
        let flow = if self.spec.direction == Direction::Down { Flow::Down } else { Flow::Up };
        self.spec
            .stream_ids(flow)
            .map(|id| {
                let transport = if self.spec.uses_udp() {
                    Transport::Udp { handshake: Box::new(NoSetup) }
                } else {
                    Transport::Tcp { preamble: self.tcp_preamble() }
                };
                OpenStream { id, flow, transport }
            })
            .collect()
    }

    /// The servers' reports as netchar's records of the server's end of each stream.
    fn report_records(&self) -> Vec<StreamRecord> {
        self.reports
            .iter()
            .map(|(id, r)| {
                let mut record =
                    StreamRecord::bare(*id, Flow::Up, Role::Receiver, Endpoint::Server, r.bytes, r.seconds());
                let received = r.datagrams.saturating_sub(r.lost);
                let mut u = UdpReceived {
                    packets: received,
                    out_of_order: r.out_of_order,
                    jitter_ms: r.jitter_seconds() * 1000.0,
                    ..UdpReceived::default()
                };
                u.set_lost(r.lost);
                record.udp_received = Some(u);
                record
            })
            .collect()
    }

    fn report(&mut self, error: Option<String>) {
        if !self.reported {
            self.reported = true;
            let streams = self.report_records();
            self.events.push_back(ControlEvent::PeerReport { streams, cpu: CpuUsage::default(), error });
        }
    }
}

impl ClientControl for Iperf2Control {
    fn handle_input(&mut self, _now: Instant, _bytes: &[u8]) -> Result<(), ProtocolError> {
        Ok(())
    }
    fn handle_eof(&mut self, _now: Instant) -> Result<(), ProtocolError> {
        Ok(())
    }
    fn poll_output(&mut self, _out: &mut Vec<u8>) {}
    fn poll_event(&mut self) -> Option<ControlEvent> {
        if !self.admitted {
            self.admitted = true;
            self.events.push_back(ControlEvent::Admitted {
                streams: self.streams(),
                peer: PeerInfo { concurrent_tests: 1, ..PeerInfo::default() },
                cookie: None,
            });
            self.events.push_back(ControlEvent::Start);
            if self.spec.direction == Direction::Down {
                // Nothing comes back but the data; the receivers end at the server's close.
                self.report(None);
            }
        }
        self.events.pop_front()
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.down_deadline
    }
    fn handle_timeout(&mut self, now: Instant) -> Result<(), ProtocolError> {
        if self.down_deadline.is_some_and(|d| now >= d) {
            self.down_deadline = None;
            self.events.push_back(ControlEvent::EndReceivers);
        }
        Ok(())
    }
    fn end_replies(&mut self, _now: Instant, replies: Vec<(u32, Vec<u8>)>) {
        for (id, bytes) in replies {
            if let Some((r, _)) = ServerReport::parse_reply(&bytes) {
                self.reports.push((id, r));
            }
        }
    }
    fn local_senders_done(&mut self, _now: Instant, totals: Vec<StreamTotal>) {
        let missing = self.spec.uses_udp() && self.reports.len() < totals.len();
        let error = missing.then(|| {
            format!(
                "{} of {} iperf2 server reports did not come back within 2 s of the FIN (is the server \
                 running with -u? a firewall in the way?); the far end's figures are missing",
                totals.len() - self.reports.len(),
                totals.len()
            )
        });
        self.report(error);
    }
    fn stop(&mut self, _now: Instant, _reason: &str) {
        if !self.reported {
            self.events.push_back(ControlEvent::EndReceivers);
        }
        self.report(None);
    }
    fn is_done(&self) -> bool {
        self.reported
    }
    fn datagrams(&self) -> DatagramFormatKind {
        DatagramFormatKind::Iperf2(Layout::V21)
    }
    fn connection(&self) -> ControlConnection {
        ControlConnection::None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_the_peers_cannot_run() {
        let now = Instant::now();
        let mut udp_down = TestSpec::udp_default();
        udp_down.direction = Direction::Down;
        assert!(Iperf2Control::new(now, Flavour::Iperf2, &udp_down, 5001).err().unwrap().contains("UDP -R"));
        assert!(Iperf2Control::new(now, Flavour::Lwiperf, &TestSpec::udp_default(), 5001)
            .err()
            .unwrap()
            .contains("TCP only"));
        let mut down = TestSpec::tcp_default();
        down.direction = Direction::Down;
        assert!(Iperf2Control::new(now, Flavour::Lwiperf, &down, 5001).err().unwrap().contains("dial-back"));
        assert!(Iperf2Control::new(now, Flavour::Iperf2, &down, 5001).is_ok());
    }

    #[test]
    fn tcp_preambles() {
        let now = Instant::now();
        let up = Iperf2Control::new(now, Flavour::Iperf2, &TestSpec::tcp_default(), 5001).unwrap();
        let p = up.tcp_preamble();
        assert_eq!(p.len(), 24);
        assert_eq!(&p[..4], &[0, 0, 0, 0]);
        let mut spec = TestSpec::tcp_default();
        spec.direction = Direction::Down;
        let down = Iperf2Control::new(now, Flavour::Iperf2, &spec, 5001).unwrap();
        let (h, len) = ClientHeader::decode(&down.tcp_preamble()).unwrap().unwrap();
        assert_eq!(len, 60);
        assert!(h.reverse());
        let lw = Iperf2Control::new(now, Flavour::Lwiperf, &TestSpec::tcp_default(), 5001).unwrap();
        assert_eq!(lw.tcp_preamble().len(), 48);
    }
}
