//! irtt (the isochronous round-trip tester), the server role: `netchar server --irtt`
//! answering an unmodified `irtt client` (protocol version 1, Debian's irtt 0.9). The codec is
//! netchar_wire::irtt.
//!
//! Server ([`IrttListener`]): one UDP socket. A client's open request names its test
//! (duration, interval, length, the stats and timestamps each reply carries); the server
//! admits it as a UDP rr test through the shared admission (so `--max-concurrent` and every
//! limit hold across protocols), grants it within `--max-duration` and `--max-rate` (irtt's
//! own way: the open reply carries the restricted parameters, and a stock client stops
//! unless run with `--loose`), and answers with a fresh token. Each data request of that
//! token from that address is answered in place, at exactly its length, with the count of
//! requests received, the window of the last 64 and the server's receive and send stamps; a
//! close (or `--idle-timeout` of silence, or the granted duration and 5 s more) ends the test
//! and logs it, with the requests received and the replies sent.
//!
//! What it never does: answer more bytes than the source sent. A data reply is the request's
//! own length (a request too short for its reply is dropped, as irtt's server drops it). An
//! open reply is 8 bytes longer than its request (the token), so an open is answered only
//! once the opens of that source address add up to the reply (a stock client repeats its open
//! after 1 s: its test starts 1 s later); every answer also passes the reflection guard
//! (crate::reflection) and the requests beyond the granted interval (with irtt's burst of 5)
//! are dropped unanswered.
//!
//! HMAC: when the server's `--psk-file` has a line for the user `irtt`, its secret (`0x...`
//! as hex, as irtt reads `--hmac`) is the key: only packets signed under it are answered, and
//! every answer is signed, as `irtt server --hmac` does; otherwise signed packets are dropped.

use crate::peers::{AddressTests, Joined, PeerContext, PeerListener};
use crate::server_shared::ServerLog;
use netchar_model::{EndCondition, Endpoint, Flow, Role, RrFigures, StreamRecord, TestSpec};
use netchar_wire::irtt::{self, Params, ReplyFields, Request, Stamp};
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// irtt's port.
pub const DEFAULT_PORT: u16 = irtt::DEFAULT_PORT;
/// The name the log and the start-up line give it.
const NAME: &str = "irtt";
/// Connections open at once (beyond this, opens are dropped until one ends).
const MAX_CONNECTIONS: usize = 64;
/// Sources whose unanswered opens are remembered, and for how long.
const MAX_OPENING: usize = 1024;
const OPENING_FOR: Duration = Duration::from_secs(20);
/// The shortest interval granted (irtt's server default `-i 10ms`).
const MIN_INTERVAL_NS: i64 = 10_000_000;
/// Requests allowed faster than the interval (irtt's server default `--pburst 5`).
const BURST: f64 = 5.0;
/// How long a connection outlives its granted duration (the client's wait for late replies).
const AFTER_DURATION: Duration = Duration::from_secs(5);
/// The longest wait before the stop flag is checked again.
const POLL: Duration = Duration::from_millis(100);

/// The irtt server, bound.
pub struct IrttListener {
    socket: UdpSocket,
}

impl IrttListener {
    /// Binds `ip`:`port` (dual-stack on `::`); a port in use fails here.
    pub fn bind(ip: IpAddr, port: u16) -> io::Result<Self> {
        use socket2::{Domain, Socket, Type};
        let addr = SocketAddr::new(ip, port);
        let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, None)?;
        if addr.is_ipv6() {
            socket.set_only_v6(false)?;
        }
        socket.bind(&addr.into()).map_err(|e| io::Error::new(e.kind(), format!("irtt UDP {addr}: {e}")))?;
        Ok(Self { socket: socket.into() })
    }
}

/// The registry's binder (crate::protocols::LISTENERS): `ports` is irtt's.
pub(crate) fn bind_listener(ip: IpAddr, ports: &[u16]) -> io::Result<Box<dyn PeerListener>> {
    Ok(Box::new(IrttListener::bind(ip, ports[0])?))
}

impl PeerListener for IrttListener {
    fn name(&self) -> &'static str {
        NAME
    }
    fn local_addr(&self) -> SocketAddr {
        self.socket.local_addr().unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)))
    }
    fn describe(&self) -> String {
        format!("answering irtt clients on {} (UDP), under the same limits", self.local_addr())
    }
    fn udp_ports(&self) -> Vec<u16> {
        vec![self.local_addr().port()]
    }
    fn run(self: Box<Self>, ctx: PeerContext) {
        let key = ctx.shared.cfg.keys.as_ref().and_then(|k| k.key(NAME)).and_then(|k| irtt::hmac_key(k).ok());
        Server {
            socket: self.socket,
            key,
            ctx,
            tests: AddressTests::default(),
            conns: HashMap::new(),
            opening: HashMap::new(),
        }
        .run();
    }
}

/// One open connection: a test admitted for its client.
struct Conn {
    token: [u8; 8],
    params: Params,
    spec: TestSpec,
    test: Joined,
    started: Instant,
    last: Instant,
    /// Requests answered faster than the interval may use: irtt's burst.
    credit: f64,
    received: (u64, u64),
    sent: (u64, u64),
    dropped: u64,
    highest: Option<u32>,
    window: u64,
}

struct Server {
    socket: UdpSocket,
    /// The HMAC key every packet must be signed with (the `irtt` user's secret), if any.
    key: Option<Vec<u8>>,
    ctx: PeerContext,
    tests: AddressTests,
    conns: HashMap<SocketAddr, Conn>,
    /// Bytes of unanswered opens per source, since when.
    opening: HashMap<SocketAddr, (usize, Instant)>,
}

fn wall_ns() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64)
}

impl Server {
    fn run(mut self) {
        let _ = self.socket.set_read_timeout(Some(POLL));
        let zero = Instant::now();
        let mut buf = vec![0u8; irtt::MAX_PACKET + 1];
        loop {
            let now = Instant::now();
            let stopping = self.ctx.stop().is_raised();
            let idle = self.ctx.limits().idle_timeout;
            let over: Vec<SocketAddr> = self
                .conns
                .iter()
                .filter(|(_, c)| stopping || now - c.last >= idle || now - c.started >= c.granted() + AFTER_DURATION)
                .map(|(a, _)| *a)
                .collect();
            for a in over {
                let why = if stopping { "the server is stopping" } else { "no close from the client" };
                self.finish(a, Some(why.to_string()));
            }
            if stopping {
                return;
            }
            self.opening.retain(|_, (_, at)| now - *at < OPENING_FOR);
            let (n, from) = match self.socket.recv_from(&mut buf) {
                Ok(x) => x,
                Err(_) => continue,
            };
            let stamp = Stamp { wall: wall_ns(), mono: zero.elapsed().as_nanos() as i64 };
            if !self.ctx.inbound(NAME, from, n) {
                continue;
            }
            match irtt::parse_request_keyed(&buf[..n], self.key.as_deref()) {
                Ok(Request::Open(params)) => self.open(from, n, params),
                Ok(Request::Data { token, sequence }) => self.data(from, &mut buf[..n], token, sequence, stamp, zero),
                Ok(Request::Close { token }) => {
                    if self.conns.get(&from).is_some_and(|c| c.token == token) {
                        self.finish(from, None);
                    }
                }
                // Not irtt's, signed, malformed: dropped unanswered.
                Err(_) => {}
            }
        }
    }

    /// An open request of `n` bytes: admitted and answered once the source's opens add up
    /// to the reply.
    fn open(&mut self, from: SocketAddr, n: usize, asked: Params) {
        if asked.protocol_version != irtt::PROTOCOL_VERSION {
            return;
        }
        if let Some(c) = self.conns.get(&from) {
            // A repeated open whose reply was lost: the same answer, within the same rule.
            let reply = irtt::open_reply_keyed(c.token, &c.params, self.key.as_deref());
            if reply.len() <= n && self.ctx.may_answer(NAME, from, reply.len()) {
                let _ = self.socket.send_to(&reply, from);
            }
            return;
        }
        if self.conns.len() >= MAX_CONNECTIONS
            || (self.opening.len() >= MAX_OPENING && !self.opening.contains_key(&from))
        {
            return;
        }
        let granted = self.grant(&asked);
        let mut token = [0u8; 8];
        if getrandom::getrandom(&mut token).is_err() {
            return;
        }
        let reply = irtt::open_reply_keyed(token, &granted, self.key.as_deref());
        let now = Instant::now();
        let (bytes, _) = self.opening.entry(from).or_insert((0, now));
        *bytes += n;
        if *bytes < reply.len() || !self.ctx.may_answer(NAME, from, reply.len()) {
            return;
        }
        let spec = self.spec_of(&granted);
        let test = match self.tests.join(&self.ctx, &spec, from) {
            Ok(t) => t,
            Err(r) => {
                self.ctx.log(ServerLog::Rejected { peer: from, reason: format!("{NAME} (UDP): {}", r.reason) });
                return;
            }
        };
        self.opening.remove(&from);
        if self.socket.send_to(&reply, from).is_err() {
            return;
        }
        self.conns.insert(
            from,
            Conn {
                token,
                params: granted,
                spec,
                test,
                started: now,
                last: now,
                credit: BURST,
                received: (0, 0),
                sent: (0, 0),
                dropped: 0,
                highest: None,
                window: 0,
            },
        );
    }

    /// The parameters granted: the asked ones within the server's limits.
    fn grant(&self, asked: &Params) -> Params {
        let limits = self.ctx.limits();
        let mut p = asked.clone();
        if let Some(max) = limits.max_duration {
            let max = i64::try_from(max.as_nanos()).unwrap_or(i64::MAX);
            if p.duration_ns == 0 || p.duration_ns > max {
                p.duration_ns = max;
            }
        }
        p.interval_ns = p.interval_ns.max(MIN_INTERVAL_NS);
        if let Some(rate) = limits.max_rate.filter(|&r| r > 0) {
            // Both ways carry the packet: its bits per interval within the rate.
            let len = (p.length as u64).max(p.min_data_len(false) as u64);
            let ns = (len * 8).saturating_mul(1_000_000_000) / rate;
            p.interval_ns = p.interval_ns.max(i64::try_from(ns).unwrap_or(i64::MAX));
        }
        // The server sets no DSCP on its replies and pads with zeros.
        p.dscp = 0;
        p.server_fill = None;
        p
    }

    /// The test admitted for a connection: a UDP rr test of the packet's length.
    fn spec_of(&self, p: &Params) -> TestSpec {
        let mut spec = TestSpec::rr_default();
        let len = (p.length.max(0) as u64).max(p.min_data_len(false) as u64);
        spec.block_bytes = len;
        if let Some(rr) = spec.rr.as_mut() {
            rr.udp = true;
            rr.request_bytes = len;
            rr.response_bytes = len;
        }
        spec.end = EndCondition::Seconds(if p.duration_ns > 0 {
            p.duration_ns as f64 / 1e9
        } else {
            self.ctx.limits().max_duration.map_or(0.0, |d| d.as_secs_f64())
        });
        spec
    }

    fn data(&mut self, from: SocketAddr, packet: &mut [u8], token: [u8; 8], sequence: u32, at: Stamp, zero: Instant) {
        let Some(c) = self.conns.get_mut(&from) else { return };
        if c.token != token {
            return;
        }
        let now = Instant::now();
        c.received.0 += 1;
        c.received.1 += packet.len() as u64;
        let interval = Duration::from_nanos(c.params.interval_ns as u64).as_secs_f64();
        c.credit = (c.credit + (now - c.last).as_secs_f64() / interval).min(BURST);
        c.last = now;
        match c.highest {
            Some(h) if sequence > h => {
                let d = sequence - h;
                c.window = if d >= 64 { 1 } else { (c.window << d) | 1 };
                c.highest = Some(sequence);
            }
            Some(h) if h - sequence < 64 => c.window |= 1 << (h - sequence),
            Some(_) => {}
            None => (c.highest, c.window) = (Some(sequence), 1),
        }
        if c.credit < 1.0 || now - c.started > c.granted() + AFTER_DURATION {
            c.dropped += 1;
            return;
        }
        c.credit -= 1.0;
        let fields = ReplyFields { received: c.received.0 as u32, window: c.window, received_at: at, sent_at: at };
        if irtt::write_data_reply(packet, &c.params, &fields).is_none() {
            c.dropped += 1;
            return;
        }
        if !self.ctx.may_answer(NAME, from, packet.len()) {
            c.dropped += 1;
            return;
        }
        irtt::restamp_send(packet, &c.params, Stamp { wall: wall_ns(), mono: zero.elapsed().as_nanos() as i64 });
        if let Some(k) = &self.key {
            irtt::sign(packet, k);
        }
        if self.socket.send_to(packet, from).is_ok() {
            c.sent.0 += 1;
            c.sent.1 += packet.len() as u64;
        }
    }

    /// Ends `from`'s connection and logs its test: the requests received (up) and the replies
    /// sent (down), their counts as the rr figures' transactions.
    fn finish(&mut self, from: SocketAddr, error: Option<String>) {
        let Some(c) = self.conns.remove(&from) else { return };
        let seconds = c.last.saturating_duration_since(c.started).as_secs_f64();
        let mut up = StreamRecord::bare(1, Flow::Up, Role::Receiver, Endpoint::Server, c.received.1, seconds);
        up.rr = Some(RrFigures { transactions: c.received.0, ..RrFigures::default() });
        let mut down = StreamRecord::bare(2, Flow::Down, Role::Sender, Endpoint::Server, c.sent.1, seconds);
        down.rr = Some(RrFigures { transactions: c.sent.0, lost: c.dropped, ..RrFigures::default() });
        let error = match (error, c.dropped) {
            (e, 0) => e,
            (e, n) => Some(format!(
                "{}{n} request(s) dropped unanswered (faster than the granted interval, too short for their \
                 reply, or over the reflection guard's budget)",
                e.map(|e| format!("{e}; ")).unwrap_or_default()
            )),
        };
        // The log shows both what came and what went.
        let mut spec = c.spec;
        spec.direction = netchar_model::Direction::Bidir;
        c.test.test.log(&self.ctx, NAME, from, spec, vec![up, down], error);
    }
}

impl Conn {
    /// The granted duration (a year for a client that named none, on a server without
    /// `--max-duration`: its `--idle-timeout` still ends it).
    fn granted(&self) -> Duration {
        match self.params.duration_ns {
            d if d > 0 => Duration::from_nanos(d as u64),
            _ => Duration::from_secs(365 * 86_400),
        }
    }
}

#[cfg(test)]
mod tests {
    use netchar_wire::irtt::{self, Params};

    #[test]
    fn an_open_reply_outgrows_its_request_by_the_token_only() {
        let p =
            Params { protocol_version: 1, duration_ns: 1_000_000_000, interval_ns: 10_000_000, ..Params::default() };
        let request = irtt::open_request(&p, None);
        assert_eq!(irtt::open_reply([0; 8], &p).len(), request.len() + irtt::TOKEN_LEN);
        // Two opens of a source cover the reply: the listener answers the second.
        assert!(2 * request.len() >= irtt::open_reply([0; 8], &p).len());
    }
}
