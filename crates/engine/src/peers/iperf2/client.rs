//! The client role: netchar as the client of an iperf2 or lwiperf server ([`Iperf2Control`]),
//! the settings each stream carries, and what the far end reports.

use crate::control::{
    AnswerEnd, ClientControl, ControlConnection, ControlEvent, NoUdpSetup, OpenStream, Opening, PeerAnswer, PeerInfo,
    Transport, UdpOutcome,
};
use crate::dataplane::{DatagramFormatKind, PeerDatagrams, UdpWorker};
use crate::registry::SessionError;
use netchar_model::{
    CpuUsage, Direction, EndCondition, Endpoint, Flow, Role, StreamRecord, StreamTotal, TestKind, TestSpec, UdpReceived,
};
use netchar_wire::iperf2::{self as wire, Amount, ClientHeader, DialBack, Extension, Layout, ServerReport, UdpFormat};
use netchar_wire::ProtocolError;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The start of iperf 2.1's acknowledgement of a client's settings header: type 2, 28 bytes.
const IPERF2_HEADER_ACK: [u8; 8] = [0, 0, 0, 2, 0, 0, 0, 0x1c];

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
pub fn check_spec(flavour: Flavour, spec: &TestSpec, dial_back: Option<DialBack>) -> Result<(), SessionError> {
    let proto = flavour.flag();
    let no = |what: &str| Err(SessionError::Unsupported(format!("{proto}: {what}")));
    let refuse = |flag: &'static str, what: &str| Err(SessionError::option(flag, format!("{proto}: {what}")));
    if let Some(d) = dial_back {
        let opt = if d == DialBack::Dual { "-d" } else { "-r" };
        return if flavour == Flavour::Lwiperf {
            refuse(
                opt,
                &format!("{opt}: lwiperf's dial-back is not supported (its server re-checks the header every 128 KiB)"),
            )
        } else if spec.kind != TestKind::Tcp {
            refuse(opt, &format!("{opt}: the dial-back runs over TCP only here (UDP dial-back is not implemented)"))
        } else if spec.streams != 1 {
            refuse(opt, &format!("{opt}: the dial-back runs with one stream each way (drop -P)"))
        } else if !matches!(spec.end, EndCondition::Seconds(_)) {
            refuse(opt, &format!("{opt}: the server's direction ends by time only here; use -t"))
        } else if spec.server_load.is_some() || spec.measure_idle || spec.server_cpu.is_some() || spec.tcp.zerocopy {
            refuse(opt, &format!("{opt}: --server-load, --idle, a server CPU in -A and --zerocopy do not apply"))
        } else {
            Ok(())
        };
    }
    if let Some(flag) = crate::registry::netchar_server_feature(spec) {
        return refuse(flag, "--server-load, --idle and a server CPU in -A are netchar server features");
    }
    if spec.tcp.zerocopy {
        return refuse("--zerocopy", "--zerocopy is not supported here; drop it");
    }
    if spec.tcp.skip_rx_copy {
        return refuse("--skip-rx-copy", "--skip-rx-copy is not supported here; drop it");
    }
    match (flavour, spec.kind, spec.direction) {
        (_, TestKind::Rr, _) => no("iperf2 has no request/response test (use tcp or udp)"),
        (Flavour::Lwiperf, TestKind::Udp, _) => no("lwiperf speaks TCP only (lwIP has no UDP iperf yet)"),
        (Flavour::Lwiperf, _, Direction::Down | Direction::Bidir) => {
            no("an lwiperf server only receives; its -d/-r dial-back tests are not supported (the board would \
             connect back to this host)")
        }
        (_, _, Direction::Bidir) => refuse(
            "--bidir",
            "--bidir is not supported with iperf2 (its --full-duplex is not implemented); -d runs both ways at once \
             with the server connecting back to this host",
        ),
        (_, _, Direction::Down) if matches!(spec.end, EndCondition::Bytes(_)) => {
            refuse("-n", "-n with -R: an iperf2 server sends for a time; use -t")
        }
        _ => Ok(()),
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
    reports: Vec<(u32, ServerReport, Layout)>,
    /// `-d`/`-r`: the server connects back to this port of ours (None until it is open).
    dial_back: Option<(DialBack, Option<u16>)>,
    listen_asked: bool,
    /// UDP: why the far end's figures are missing (its reports did not come back).
    reports_missing: Option<String>,
    /// UDP: an end datagram came back exactly as this end sent it (an echo service's answer,
    /// not an iperf2 server's report).
    end_echoed: bool,
    /// How long the driver waits for a `-R` stream's first bytes (the client's hello timeout).
    opening_wait: Duration,
}

impl Iperf2Control {
    /// A session for `spec` against a server on `port`, or why the peer cannot run it.
    /// `dial_back`: iperf2's `-d`/`-r` (the spec's direction is then both ways).
    pub fn new(
        now: Instant,
        flavour: Flavour,
        spec: &TestSpec,
        port: u16,
        dial_back: Option<DialBack>,
    ) -> Result<Self, SessionError> {
        check_spec(flavour, spec, dial_back)?;
        let mut spec = spec.clone();
        if dial_back.is_some() {
            spec.direction = Direction::Bidir;
        }
        // The server's sending (-R, or -d's at once) ends by its own clock; -r's deadline is set
        // when this end's sending is over.
        let down_deadline = match (spec.direction, spec.end, dial_back) {
            (Direction::Down, EndCondition::Seconds(s), _) | (_, EndCondition::Seconds(s), Some(DialBack::Dual)) => {
                Some(now + Duration::from_secs_f64(s) + DOWN_GRACE)
            }
            _ => None,
        };
        Ok(Self {
            flavour,
            spec,
            port,
            events: VecDeque::new(),
            admitted: false,
            reported: false,
            down_deadline,
            reports: Vec::new(),
            dial_back: dial_back.map(|d| (d, None)),
            listen_asked: false,
            reports_missing: None,
            end_echoed: false,
            opening_wait: netchar_wire::session::Timeouts::default().hello,
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
        if let Some((d, listen_port)) = self.dial_back {
            // 2.0.5's 24-byte header with VERSION1 (and RUN_NOW for -d), the port to dial back
            // in mPort: what iperf 2.0.5 to 2.1.x clients send for -d/-r (2.1 adds an extension
            // a server does not need for it). Every iperf2 server takes all 24 bytes.
            let mut h = ClientHeader::new(self.amount(), self.spec.block_bytes as u32, listen_port.unwrap_or(0));
            h.flags = wire::HEADER_VERSION1 | if d == DialBack::Dual { wire::RUN_NOW } else { 0 };
            return h.encode(Layout::V205);
        }
        match (self.flavour, self.spec.direction) {
            (Flavour::Lwiperf, _) => wire::lwiperf::client_preamble(self.amount(), self.port),
            (Flavour::Iperf2, Direction::Down) => {
                let mut h = ClientHeader::new(self.amount(), self.spec.block_bytes as u32, self.port);
                h.flags = wire::HEADER_VERSION2;
                h.num_threads = self.spec.streams as i32;
                let (version_u, version_l) = (0x0002_0001, 0x0008_0003);
                let tos = self.spec.ip.tos.map_or(0, u16::from);
                h.ext = Some(Extension {
                    upper_flags: wire::UPPER_REVERSE,
                    version_u,
                    version_l,
                    tos,
                    ..Default::default()
                });
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
        if self.dial_back.is_some() {
            return vec![
                OpenStream { id: 1, flow: Flow::Up, transport: Transport::Tcp { preamble: self.tcp_preamble() } },
                OpenStream { id: 2, flow: Flow::Down, transport: Transport::DialBack },
            ];
        }
        let flow = if self.spec.direction == Direction::Down { Flow::Down } else { Flow::Up };
        self.spec
            .stream_ids(flow)
            .map(|id| {
                // UDP -R: the receiving worker sends the request itself until data comes
                // (netchar_wire::iperf2::UdpFormat::with_request).
                let transport = if self.spec.uses_udp() {
                    Transport::Udp { handshake: Box::new(NoUdpSetup) }
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
            .map(|(id, r, layout)| {
                let mut record =
                    StreamRecord::bare(*id, Flow::Up, Role::Receiver, Endpoint::Server, r.bytes, r.seconds());
                let (received, lost) = if *layout == Layout::V205 {
                    // A 2.0.5 server numbers from 0: it counts netchar's never-sent 0 as lost,
                    // and leaves the FIN (which it answered, so received) out of its datagrams.
                    (r.datagrams.saturating_sub(r.lost) + 1, r.lost.saturating_sub(1))
                } else {
                    (r.datagrams.saturating_sub(r.lost), r.lost)
                };
                let mut u = UdpReceived {
                    packets: received,
                    out_of_order: r.out_of_order,
                    jitter_ms: r.jitter_seconds() * 1000.0,
                    ..UdpReceived::default()
                };
                u.set_lost(lost);
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
        if let Some((_, None)) = self.dial_back {
            // The header carries the port the server dials back to: listen first.
            if !self.listen_asked {
                self.listen_asked = true;
                return Some(ControlEvent::Listen);
            }
            return None;
        }
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
        // An iperf2 server answers the end datagram with its header and then its report; an
        // echo service returns it as sent, this end's settings after the header (which
        // parse_reply would take for a report).
        let settings = sender_settings(&self.spec, self.port);
        for (id, bytes) in replies {
            if bytes.get(UDP_HEADER_LEN..UDP_HEADER_LEN + settings.len()) == Some(&settings[..]) {
                self.end_echoed = true;
                continue;
            }
            if let Some((r, layout)) = ServerReport::parse_reply(&bytes) {
                self.reports.push((id, r, layout));
            }
        }
    }
    fn listening(&mut self, _now: Instant, port: u16) {
        if let Some((d, _)) = self.dial_back {
            self.dial_back = Some((d, Some(port)));
        }
    }
    fn local_senders_done(&mut self, now: Instant, totals: Vec<StreamTotal>) {
        if let (Some((DialBack::Tradeoff, _)), EndCondition::Seconds(s)) = (self.dial_back, self.spec.end) {
            // -r: the server dials back once this end's stream closed, and sends for the time.
            self.down_deadline = Some(now + Duration::from_secs_f64(s) + DOWN_GRACE);
        }
        let missing = self.spec.uses_udp() && self.reports.len() < totals.len();
        let error = missing.then(|| {
            if self.end_echoed {
                return "not an iperf2 server: the end datagram came back exactly as sent, as an echo \
                        service does (--proto echo)"
                    .to_string();
            }
            format!(
                "{} of {} iperf2 server reports did not come back within 2 s of the FIN (is the server \
                 running with -u? a firewall in the way?); the far end's figures are missing",
                totals.len() - self.reports.len(),
                totals.len()
            )
        });
        self.reports_missing.clone_from(&error);
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
    fn awaits_opening(&self) -> bool {
        // `-R` over TCP: an iperf2 server sends its payload as soon as it has read the
        // header, so its first bytes tell it from another kind of server before the test.
        self.dial_back.is_none() && self.spec.direction == Direction::Down && !self.spec.uses_udp()
    }
    fn opening_answer(&mut self, _id: u32, answer: PeerAnswer<'_>) -> Result<Opening, ProtocolError> {
        // iperf 2's payload, `0123456789` over and over from the stream's start (iperf 2.1.8
        // and netchar's own --iperf2 listener on loopback), taken as data.
        let b = answer.bytes;
        let digits = b.iter().enumerate().all(|(i, &c)| c == b'0' + (i % 10) as u8);
        let what = match answer.end {
            _ if digits && b.len() >= 10 => return Ok(Opening::Take(0)),
            AnswerEnd::Open if digits => return Ok(Opening::Wait),
            AnswerEnd::Silent if b.is_empty() => format!(
                "nothing came within {:.0} s of the request to send (-R), and an iperf2 server sends at once: \
                 the peer waits for more of its client's bytes, as netperf's netserver (--proto netperf), a \
                 netio server (suite netio --proto netio) or a discard service (--proto discard) does",
                self.opening_wait.as_secs_f64(),
            ),
            // Its own header sent back.
            _ if self.tcp_preamble().starts_with(b) && !b.is_empty() => {
                "an echo server answered (it sent the client's bytes back); add --proto echo".to_string()
            }
            _ => netchar_wire::hello::identify_peer(b),
        };
        Err(ProtocolError::Peer(format!("not an iperf2 server: {what}")))
    }
    fn unread_answer(&mut self, _id: u32, answer: PeerAnswer<'_>, failed: bool) -> Result<(), ProtocolError> {
        // An iperf2 or lwiperf server reads a client's stream and says nothing on it (iperf
        // 2.1 acknowledges a header that asks for one; netchar's up streams ask for none, and
        // its -d/-r dial-back streams are left alone): what came back was another server's.
        if self.dial_back.is_some() || answer.bytes.starts_with(&IPERF2_HEADER_ACK) {
            return Ok(());
        }
        let expected = match self.flavour {
            Flavour::Iperf2 => "an iperf2 server",
            Flavour::Lwiperf => "an lwiperf server",
        };
        let closed_early = failed && answer.end == AnswerEnd::Closed;
        match netchar_wire::hello::not_a_silent_server(expected, &self.tcp_preamble(), answer.bytes, closed_early) {
            Some(wrong) => Err(ProtocolError::Peer(wrong)),
            None => Ok(()),
        }
    }
    fn udp_unanswered(&mut self, outcome: &UdpOutcome) -> Option<String> {
        if self.spec.direction == Direction::Down {
            // `-R`: an iperf2 server starts sending as soon as its request arrives (it is
            // re-sent until data comes); not one datagram back in the whole test is another
            // kind of server, or none.
            if outcome.received > 0 {
                return None;
            }
            return Some(match outcome.refusal() {
                Some(refusal) => format!("not an iperf2 server: {refusal}"),
                None => format!(
                    "not an iperf2 server: not one datagram came back for the -R request at UDP port {}",
                    outcome.port
                ),
            });
        }
        match outcome.refusal() {
            Some(refusal) => Some(format!("not an iperf2 server: {refusal}")),
            None => self.reports_missing.clone(),
        }
    }
    fn datagrams(&self) -> DatagramFormatKind {
        DatagramFormatKind::Peer(PeerDatagrams { protocol: "iperf2", variant: 0, run: udp_worker })
    }
    fn connection(&self) -> ControlConnection {
        ControlConnection::None
    }
}

/// One UDP worker of the client over iperf 2.1's datagrams: a sender's carry the test's
/// settings after the 16-byte header (an iperf2 server reads them from any datagram); a `-R`
/// receiver asks the server to send, until data comes.
fn udp_worker(worker: UdpWorker<'_>) -> std::io::Result<()> {
    let format = udp_format(&worker);
    worker.run(&format)
}

/// The layout of the client's UDP datagrams (iperf 2.1's), and the length of their header.
const UDP_LAYOUT: Layout = Layout::V21;
const UDP_HEADER_LEN: usize = 16;

/// The whole test's amount (as iperf2 clients send it on each stream), the block and the rate
/// in bit/s that a UDP sender's settings carry.
fn udp_settings_of(spec: &TestSpec) -> (Amount, u32, u64) {
    let amount = match spec.end {
        EndCondition::Seconds(s) => Amount::Seconds(s),
        EndCondition::Bytes(b) => Amount::Bytes(b),
    };
    let rate = spec.udp_pps_per_stream().map_or(0, |pps| (pps * spec.block_bytes as f64 * 8.0) as u64);
    (amount, spec.block_bytes as u32, rate)
}

/// The settings a UDP sender carries after each datagram's header, to a server on `port`.
fn sender_settings(spec: &TestSpec, port: u16) -> Vec<u8> {
    let (amount, block, rate) = udp_settings_of(spec);
    ClientHeader::udp_settings(UDP_LAYOUT, amount, block, rate, port)
}

/// The format of [`udp_worker`].
fn udp_format(worker: &UdpWorker<'_>) -> UdpFormat {
    let spec = worker.spec();
    let (amount, block, rate) = udp_settings_of(spec);
    let port = worker.socket().peer_addr().map_or(wire::DEFAULT_PORT, |a| a.port());
    let settings = if worker.is_sender() { sender_settings(spec, port) } else { Vec::new() };
    let format = UdpFormat::new(UDP_LAYOUT, worker.realtime_start_ns(), settings);
    if worker.is_sender() || spec.direction != Direction::Down {
        return format;
    }
    // UDP -R (iperf 2.1+): the request names the client's wall clock at the start.
    let wall = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let request = ClientHeader::udp_reverse_request(amount, block, rate, port, wall.as_nanos() as u64);
    format.with_request(match spec.ip.tos {
        Some(tos) => ClientHeader::with_tos(request, tos),
        None => request,
    })
}

/// The IP options an iperf2 server applies: the TOS of a `-R` test, which its 2.1+ server
/// reads from the request's extension (`-S`) and sets on the socket it sends from. The other
/// tests' headers carry no extension (2.0.5's layout, which every iperf2 server reads), and
/// iperf2 has no flow label, don't-fragment or checksum setting to ask for.
pub(crate) fn far_end_applies(spec: &TestSpec) -> crate::registry::FarEndApplies {
    if spec.direction == Direction::Down {
        crate::registry::FarEndApplies::TOS
    } else {
        crate::registry::FarEndApplies::NONE
    }
}

/// The registry's client constructor for iperf2 (crate::protocols).
pub(crate) fn iperf2_session(a: &crate::registry::SessionArgs<'_>) -> Result<Box<dyn ClientControl>, SessionError> {
    let mut control = Iperf2Control::new(a.now, Flavour::Iperf2, a.spec, a.cfg.port, a.cfg.dial_back)?;
    control.opening_wait = a.cfg.timeouts.hello;
    Ok(Box::new(control))
}

/// The registry's client constructor for lwiperf (crate::protocols).
pub(crate) fn lwiperf_session(a: &crate::registry::SessionArgs<'_>) -> Result<Box<dyn ClientControl>, SessionError> {
    Ok(Box::new(Iperf2Control::new(a.now, Flavour::Lwiperf, a.spec, a.cfg.port, a.cfg.dial_back)?))
}

/// What an iperf2 server reports: nothing over TCP, nor for what it sends over UDP (its FIN
/// carries only its datagram count); over UDP up, its report after the FIN.
pub(crate) fn measurement(spec: &TestSpec) -> (netchar_model::FarEnd, Vec<netchar_model::Caveat>) {
    silent_far_end("iperf2", spec)
}

/// What an lwiperf server reports: nothing (it reports to its own callback).
pub(crate) fn measurement_lwiperf(spec: &TestSpec) -> (netchar_model::FarEnd, Vec<netchar_model::Caveat>) {
    silent_far_end("lwiperf", spec)
}

fn silent_far_end(name: &str, spec: &TestSpec) -> (netchar_model::FarEnd, Vec<netchar_model::Caveat>) {
    use netchar_model::{Caveat, FarEnd, TestKind};
    let udp = spec.kind == TestKind::Udp;
    let flows = if udp { vec![Flow::Down] } else { vec![Flow::Up, Flow::Down] };
    let mut caveats = Vec::new();
    for &flow in &flows {
        let text = if udp {
            format!(
                "{name} reports nothing back for what it sent: these are netchar's figures, the loss counted \
                 against the total its FIN datagram gives ({name} counts the FIN as one more datagram)"
            )
        } else {
            // A 2.1+ server counts the settings header after its flags word; with -d/-r (both
            // ways) the 24-byte header that asked for the dial-back.
            let extra = match (name, flow, spec.direction) {
                ("iperf2", Flow::Up, Direction::Bidir) => {
                    " (iperf2 counts 24 bytes more: the settings header that asked for the dial-back)"
                }
                ("iperf2", Flow::Up, _) => {
                    " (iperf2 counts 20 bytes more per stream: the settings header after its flags word)"
                }
                _ => "",
            };
            format!(
                "{name} reports nothing back over TCP: these are netchar's figures; the server's own count is in \
                 its output{extra}"
            )
        };
        caveats.push(Caveat::always(Some(flow), text));
    }
    (FarEnd::SilentOn(flows), caveats)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_the_peers_cannot_run() {
        let now = Instant::now();
        let mut udp_down = TestSpec::udp_default();
        udp_down.direction = Direction::Down;
        assert!(Iperf2Control::new(now, Flavour::Iperf2, &udp_down, 5001, None).is_ok());
        udp_down.end = EndCondition::Bytes(1000);
        let e = Iperf2Control::new(now, Flavour::Iperf2, &udp_down, 5001, None).err().unwrap();
        assert!(e.flag() == Some("-n") && e.to_string().contains("-n with -R"), "{e:?}");
        let e = Iperf2Control::new(now, Flavour::Lwiperf, &TestSpec::udp_default(), 5001, None).err().unwrap();
        assert!(matches!(&e, SessionError::Unsupported(m) if m.contains("TCP only")), "{e:?}");
        let mut down = TestSpec::tcp_default();
        down.direction = Direction::Down;
        let e = Iperf2Control::new(now, Flavour::Lwiperf, &down, 5001, None).err().unwrap();
        assert!(e.to_string().contains("dial-back"), "{e}");
        let e = Iperf2Control::new(now, Flavour::Lwiperf, &TestSpec::tcp_default(), 5001, Some(DialBack::Dual));
        assert_eq!(e.err().unwrap().flag(), Some("-d"));
        assert!(Iperf2Control::new(now, Flavour::Iperf2, &down, 5001, None).is_ok());
    }

    #[test]
    fn server_reports_become_the_far_end_of_each_layout() {
        let now = Instant::now();
        let mut c = Iperf2Control::new(now, Flavour::Iperf2, &TestSpec::udp_default(), 5001, None).unwrap();
        // 2.1: 448 data datagrams and the FIN, 2 lost: the report counts the FIN.
        let r21 = ServerReport { bytes: 447 * 1470, datagrams: 449, lost: 2, ..ServerReport::default() };
        // 2.0.5: netchar's 426 data datagrams (numbered from 1) and the FIN: the server counts
        // the 0 it expected as lost and leaves the FIN out.
        let r205 = ServerReport { bytes: 426 * 1470, datagrams: 427, lost: 1, ..ServerReport::default() };
        c.end_replies(now, vec![(1, r21.reply(Layout::V21, &[])), (2, r205.reply(Layout::V205, &[0xFF; 12]))]);
        c.local_senders_done(now, Vec::new());
        let records = c.report_records();
        let u1 = records[0].udp_received.as_ref().unwrap();
        assert_eq!((u1.packets, u1.lost), (447, 2), "sent 449 = 447 received + 2 lost");
        let u2 = records[1].udp_received.as_ref().unwrap();
        assert_eq!((u2.packets, u2.lost), (427, 0), "sent 427 (the FIN included) = 427 received");
    }

    #[test]
    fn the_far_end_is_silent_over_tcp_and_for_what_it_sends_over_udp() {
        use netchar_model::FarEnd;
        let (far, notes) = measurement(&TestSpec::tcp_default());
        assert_eq!(far, FarEnd::SilentOn(vec![Flow::Up, Flow::Down]));
        assert!(notes[0].text.contains("iperf2 counts 20 bytes more per stream"), "{notes:?}");
        let mut both = TestSpec::tcp_default();
        both.direction = Direction::Bidir;
        assert!(measurement(&both).1[0].text.contains("24 bytes more"));
        let (far, notes) = measurement(&TestSpec::udp_default());
        assert_eq!(far, FarEnd::SilentOn(vec![Flow::Down]), "UDP up has the server's report");
        assert!(notes[0].text.contains("its FIN datagram"), "{notes:?}");
        let (_, notes) = measurement_lwiperf(&TestSpec::tcp_default());
        assert!(notes.iter().all(|n| n.text.starts_with("lwiperf reports nothing") && !n.text.contains("20 bytes")));
    }

    #[test]
    fn tcp_preambles() {
        let now = Instant::now();
        let up = Iperf2Control::new(now, Flavour::Iperf2, &TestSpec::tcp_default(), 5001, None).unwrap();
        let p = up.tcp_preamble();
        assert_eq!(p.len(), 24);
        assert_eq!(&p[..4], &[0, 0, 0, 0]);
        let mut spec = TestSpec::tcp_default();
        spec.direction = Direction::Down;
        let down = Iperf2Control::new(now, Flavour::Iperf2, &spec, 5001, None).unwrap();
        let (h, len) = ClientHeader::decode(&down.tcp_preamble()).unwrap().unwrap();
        assert_eq!(len, 60);
        assert!(h.reverse());
        let lw = Iperf2Control::new(now, Flavour::Lwiperf, &TestSpec::tcp_default(), 5001, None).unwrap();
        assert_eq!(lw.tcp_preamble().len(), 48);
    }

    #[test]
    fn a_dial_back_listens_first_and_names_its_port() {
        let now = Instant::now();
        for (d, flags) in [(DialBack::Dual, 0x8000_0001u32), (DialBack::Tradeoff, 0x8000_0000)] {
            let mut c = Iperf2Control::new(now, Flavour::Iperf2, &TestSpec::tcp_default(), 5001, Some(d)).unwrap();
            assert!(matches!(c.poll_event(), Some(ControlEvent::Listen)));
            assert!(c.poll_event().is_none(), "nothing opens before the listener's port is known");
            c.listening(now, 40_123);
            let Some(ControlEvent::Admitted { streams, .. }) = c.poll_event() else { panic!("admitted expected") };
            assert_eq!(streams.len(), 2);
            assert!(matches!(streams[1].transport, Transport::DialBack));
            let Transport::Tcp { preamble } = &streams[0].transport else { panic!("TCP expected") };
            let (h, len) = ClientHeader::decode(preamble).unwrap().unwrap();
            assert_eq!((len, h.flags, h.port), (24, flags, 40_123));
            assert_eq!(h.dial_back(), Some(d));
        }
        let mut udp = TestSpec::udp_default();
        udp.direction = Direction::Bidir;
        assert!(Iperf2Control::new(now, Flavour::Iperf2, &udp, 5001, Some(DialBack::Dual)).is_err());
    }

    #[test]
    fn an_up_streams_answer_names_the_server_that_was_not_iperf2() {
        let now = Instant::now();
        let mut c = Iperf2Control::new(now, Flavour::Iperf2, &TestSpec::tcp_default(), 5001, None).unwrap();
        fn answer(bytes: &[u8], end: AnswerEnd) -> PeerAnswer<'_> {
            PeerAnswer { bytes, end }
        }
        assert_eq!(c.unread_answer(1, answer(&[], AnswerEnd::Closed), false), Ok(()));
        // iperf 2.1's acknowledgement of a header is an iperf2 server's own answer.
        assert_eq!(c.unread_answer(1, answer(&IPERF2_HEADER_ACK, AnswerEnd::Open), false), Ok(()));
        let e = c.unread_answer(1, answer(&[0x09], AnswerEnd::Open), false).unwrap_err().to_string();
        assert!(e.starts_with("not an iperf2 server: an iperf3 server answered"), "{e}");
        let preamble = c.tcp_preamble();
        let e = c.unread_answer(1, answer(&preamble, AnswerEnd::Open), false).unwrap_err().to_string();
        assert!(e.contains("an echo server answered"), "{e}");
        let e = c.unread_answer(1, answer(&[], AnswerEnd::Closed), true).unwrap_err().to_string();
        assert!(e.contains("as a netio server does"), "{e}");
        // Over UDP: the host's refusals, or the reports that did not come back.
        let mut udp = Iperf2Control::new(now, Flavour::Iperf2, &TestSpec::udp_default(), 5001, None).unwrap();
        let outcome = UdpOutcome { sent: 87, refused: 0, received: 0, port: 5001 };
        assert_eq!(udp.udp_unanswered(&outcome), None, "its report came back");
        udp.local_senders_done(now, vec![StreamTotal { id: 1, bytes: 1470, packets: 1 }]);
        assert!(udp.udp_unanswered(&outcome).unwrap().starts_with("1 of 1 iperf2 server reports did not come back"));
        let refused = UdpOutcome { refused: 43, ..outcome };
        assert!(udp
            .udp_unanswered(&refused)
            .unwrap()
            .starts_with("not an iperf2 server: nothing takes UDP at port 5001"));
        // -R: the server's payload of digits at once, or another server's answer.
        let mut down = TestSpec::tcp_default();
        down.direction = Direction::Down;
        let mut r = Iperf2Control::new(now, Flavour::Iperf2, &down, 5001, None).unwrap();
        assert!(r.awaits_opening() && !c.awaits_opening());
        assert_eq!(r.opening_answer(1, answer(b"01234", AnswerEnd::Open)), Ok(Opening::Wait));
        assert_eq!(r.opening_answer(1, answer(b"0123456789012", AnswerEnd::Open)), Ok(Opening::Take(0)));
        let e = r.opening_answer(1, answer(&[0x09], AnswerEnd::Open)).unwrap_err().to_string();
        assert!(e.starts_with("not an iperf2 server: an iperf3 server answered"), "{e}");
        let e = r.opening_answer(1, answer(&r.tcp_preamble()[..16], AnswerEnd::Open)).unwrap_err().to_string();
        assert!(e.contains("an echo server answered"), "{e}");
        let e = r.opening_answer(1, answer(&[], AnswerEnd::Silent)).unwrap_err().to_string();
        assert!(e.contains("an iperf2 server sends at once"), "{e}");
        let mut lw = Iperf2Control::new(now, Flavour::Lwiperf, &TestSpec::tcp_default(), 5001, None).unwrap();
        let e = lw.unread_answer(1, answer(&[0x09], AnswerEnd::Open), false).unwrap_err().to_string();
        assert!(e.starts_with("not an lwiperf server: "), "{e}");
    }
}
