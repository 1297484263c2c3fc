//! irtt (the isochronous round-trip tester), the server role: `netchar server --irtt`
//! answering an unmodified `irtt client` (protocol version 1, Debian's irtt 0.9). The codec is
//! netchar_wire::irtt.
//!
//! Server ([`IrttListener`]): one UDP socket. A client's open request names its test
//! (duration, interval, length, the stats and timestamps each reply carries). Each connection,
//! from its open to its end, is a session (session.rs, `IrttSession`) on the one server driver
//! (crate::server_session), like every other protocol's test: the driver admits it as a UDP rr
//! test (so `--max-concurrent` and every limit hold across protocols, and one address's
//! connections are one test, as for iperf2's sources), and logs it; the session grants it
//! within `--max-duration` and `--max-rate` (irtt's own way: the open reply carries the
//! restricted parameters, and a stock client stops unless run with `--loose`) and answers with
//! a fresh token. A close (or `--idle-timeout` of silence, or the granted duration and 5 s
//! more, or the server stopping) ends the test, logged with the requests received and the
//! replies sent.
//!
//! The shape: the session owns the open, the close and the limits; the listener's loop is the
//! connection's data-plane worker. It hands a source's opens and closes to its session through
//! the source's link (crate::server_session::DatagramLink, whose answers pass the reflection
//! guard), and answers each data request of an admitted token itself, where it read it, through
//! the connection state the two share (session.rs, `Connection`): at exactly the request's
//! length, with the count of requests received, the window of the last 64 and the server's
//! receive stamp (taken at the read) and send stamp (taken just before the send). irtt measures
//! round trips: a data request never waits for another thread.
//!
//! What it never does: answer more bytes than the source sent. A data reply is the request's
//! own length (a request too short for its reply is dropped, as irtt's server drops it). An
//! open reply is 8 bytes longer than its request (the token), so a source's session starts
//! only once its opens add up to the reply (a stock client repeats its open after 1 s: its
//! test starts 1 s later), and the session answers a repeated open only while its open replies
//! stay within the opens' bytes; every answer also passes the reflection guard
//! (crate::reflection) and the requests beyond the granted interval (with irtt's burst of 5)
//! are dropped unanswered. At most `MAX_CONNECTIONS` connections are open at once, and
//! `MAX_OPENING` sources' unanswered opens are remembered.
//!
//! HMAC: when the server's `--psk-file` has a line for the user `irtt`, its secret (`0x...`
//! as hex, as irtt reads `--hmac`) is the key: only packets signed under it are answered, and
//! every answer is signed, as `irtt server --hmac` does; otherwise signed packets are dropped.

mod session;

use session::grant;
#[cfg(test)]
pub(crate) use session::Answered;
pub(crate) use session::{Connection, IrttSession, ReplyPath};

use crate::peers::{PeerContext, PeerListener};
use crate::server_control::TestsByAddress;
use crate::server_session::{DatagramLink, DatagramSource, SessionDriver};
use netchar_wire::irtt::{self, Request, Stamp};
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::Arc;
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
        Listener {
            socket: self.socket,
            key,
            ctx,
            tests: TestsByAddress::default(),
            sources: HashMap::new(),
            opening: HashMap::new(),
            zero: Instant::now(),
        }
        .run();
    }
}

/// A source with a connection: its session's thread and link, and the state the loop answers
/// its data requests from.
struct Source {
    link: DatagramSource,
    thread: std::thread::JoinHandle<()>,
    conn: Arc<Connection>,
    /// The bytes of its opens that started the session (given back to the source's count if
    /// the session is turned away, so its next open asks again at once, as before).
    opens: usize,
}

/// The listener's loop: the demultiplexer of the one socket, and every connection's
/// data-plane worker.
struct Listener {
    socket: UdpSocket,
    /// The HMAC key every packet must be signed with (the `irtt` user's secret), if any.
    key: Option<Vec<u8>>,
    ctx: PeerContext,
    tests: TestsByAddress,
    sources: HashMap<SocketAddr, Source>,
    /// Bytes of unanswered opens per source without a session, since when.
    opening: HashMap<SocketAddr, (usize, Instant)>,
    /// The monotonic stamps' zero.
    zero: Instant,
}

fn wall_ns() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64)
}

/// A reply's way out from the listener's socket.
struct SocketReply<'a> {
    socket: &'a UdpSocket,
    ctx: &'a PeerContext,
    to: SocketAddr,
    zero: Instant,
}

impl ReplyPath for SocketReply<'_> {
    fn may_answer(&mut self, bytes: usize) -> bool {
        self.ctx.may_answer(NAME, self.to, bytes)
    }
    fn stamp(&mut self) -> Stamp {
        Stamp { wall: wall_ns(), mono: self.zero.elapsed().as_nanos() as i64 }
    }
    fn send(&mut self, reply: &[u8]) -> bool {
        self.socket.send_to(reply, self.to).is_ok()
    }
}

impl Listener {
    fn run(mut self) {
        let _ = self.socket.set_read_timeout(Some(POLL));
        let mut buf = vec![0u8; irtt::MAX_PACKET + 1];
        while !self.ctx.stop().is_raised() {
            let now = Instant::now();
            self.reap(now);
            self.opening.retain(|_, (_, at)| now - *at < OPENING_FOR);
            let (n, from) = match self.socket.recv_from(&mut buf) {
                Ok(x) => x,
                Err(_) => continue,
            };
            let stamp = Stamp { wall: wall_ns(), mono: self.zero.elapsed().as_nanos() as i64 };
            if !self.ctx.inbound(NAME, from, n) {
                continue;
            }
            let packet = &mut buf[..n];
            match irtt::parse_request_keyed(packet, self.key.as_deref()) {
                Ok(Request::Data { token, sequence }) => {
                    let Some(s) = self.sources.get(&from) else { continue };
                    let mut path = SocketReply { socket: &self.socket, ctx: &self.ctx, to: from, zero: self.zero };
                    s.conn.answer(packet, (token, sequence), stamp, Instant::now(), self.key.as_deref(), &mut path);
                }
                Ok(Request::Open(asked)) => self.open(from, packet, asked),
                Ok(Request::Close { .. }) => {
                    if let Some(s) = self.sources.get(&from) {
                        let _ = s.link.hand(SystemTime::now(), packet);
                    }
                }
                // Not irtt's, signed, malformed: dropped unanswered.
                Err(_) => {}
            }
        }
        // Stopping: each session sees the flag, ends its connection and logs it.
        for (_, s) in self.sources.drain() {
            let _ = s.thread.join();
        }
    }

    /// Joins the sessions that ended; a source turned away keeps the bytes of its opens.
    fn reap(&mut self, now: Instant) {
        let ended: Vec<SocketAddr> =
            self.sources.iter().filter(|(_, s)| s.thread.is_finished()).map(|(a, _)| *a).collect();
        for from in ended {
            let Some(s) = self.sources.remove(&from) else { continue };
            let _ = s.thread.join();
            if !s.conn.was_opened() && self.opening.len() < MAX_OPENING {
                self.opening.insert(from, (s.opens, now));
            }
        }
    }

    /// An open from `from`: its session's if it has one (a repeated open); otherwise counted
    /// with the source's earlier opens, and a session started once they add up to the reply.
    fn open(&mut self, from: SocketAddr, packet: &[u8], asked: irtt::Params) {
        if asked.protocol_version != irtt::PROTOCOL_VERSION {
            return;
        }
        if let Some(s) = self.sources.get(&from) {
            let _ = s.link.hand(SystemTime::now(), packet);
            return;
        }
        if self.sources.len() >= MAX_CONNECTIONS
            || (self.opening.len() >= MAX_OPENING && !self.opening.contains_key(&from))
        {
            return;
        }
        let (bytes, _) = self.opening.entry(from).or_insert((0, Instant::now()));
        let earlier = *bytes;
        *bytes += packet.len();
        // The token's bytes do not change the reply's length.
        let reply = irtt::open_reply_keyed([0; 8], &grant(&asked, self.ctx.limits()), self.key.as_deref());
        if *bytes < reply.len() {
            return;
        }
        let opens = *bytes;
        self.opening.remove(&from);
        let Ok(answers) = self.socket.try_clone() else { return };
        let answer_ctx = self.ctx.clone();
        let (link, source) =
            DatagramLink::new(answers, from, Box::new(move |bytes| answer_ctx.may_answer(NAME, from, bytes)));
        let conn = Arc::new(Connection::default());
        let session = IrttSession::new(
            from,
            earlier,
            self.key.clone(),
            self.ctx.limits().clone(),
            self.tests.clone(),
            conn.clone(),
        );
        let _ = source.hand(SystemTime::now(), packet);
        let ctx = self.ctx.clone();
        let spawned = std::thread::Builder::new().name("netchar-irtt".into()).spawn(move || {
            let deadline = Instant::now() + ctx.limits().idle_timeout;
            SessionDriver::serve_over(Box::new(link), from, Box::new(session), &ctx.shared, deadline);
        });
        if let Ok(thread) = spawned {
            self.sources.insert(from, Source { link: source, thread, conn, opens });
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
