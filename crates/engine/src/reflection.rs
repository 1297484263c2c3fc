//! The reflection guard: what every UDP listener of the server (the native one and each peer
//! protocol's) may send, and to whom, when the address it sends to has not proved that it
//! asked.
//!
//! UDP carries no proof of its source. The native protocol proves a return route with a
//! challenge (crate::server); iperf3 and netio send only to their TCP control connection's
//! address, which the handshake proved. The legacy protocols cannot: an iperf2 `-u -R`
//! request, an nc_test `UDP_SEND`, an echo or chargen datagram all arrive over UDP alone, so
//! a forged source would aim the answer at a victim. Their answers follow three rules:
//!
//! 1. **Loops and service ports.** A datagram from a source port below 1024 (echo 7, chargen
//!    19, DNS 53, NTP 123, ...: no client of these tools sends from one) or from a port this
//!    server itself listens on with UDP (another netchar server's answer) is dropped and
//!    counted, never answered: a forged 7 → 7 or 19 → 7 datagram would otherwise bounce
//!    between two services, or two servers, for ever.
//! 2. **Unprompted traffic only to allowed networks.** A test that makes the server send a
//!    stream of datagrams to an address that did not prove itself (iperf2 UDP `-R`, nc_test
//!    `UDP_SEND`) runs only for `--allow-peers` networks (by default loopback, which a
//!    datagram from another host cannot claim: the kernel drops it as a martian).
//! 3. **Answers never amplify.** To any other address, an answer is sent only while the bytes
//!    sent to it stay within the bytes received from it (amplification at most 1), and within
//!    a rate budget per destination and one for all of them together, as DNS servers limit
//!    their responses; what does not fit is dropped and counted, never queued.
//!
//! Refusals are logged once per source and kind (with the flag that would allow it), and
//! the counters are in [`GuardCounts`] for the server's last line.

use crate::admission::{canonical, DataPathPolicy};
use crate::error::UnpromptedRefused;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Answers to one address outside the allowed networks: bytes per second.
pub const PER_DESTINATION_RATE: u64 = 1_250_000;
/// Answers to all addresses outside the allowed networks together: bytes per second.
pub const TOTAL_RATE: u64 = 6_250_000;
/// What a token bucket holds when full: bytes.
pub const BURST: u64 = 64 * 1024;
/// Addresses whose received and sent bytes are kept: beyond this, the quietest goes.
const LEDGER_CAP: usize = 4096;
/// An address quiet this long is forgotten (and its credit with it).
const LEDGER_IDLE: Duration = Duration::from_secs(60);
/// A refusal of one kind from one source is logged once in this period.
const LOG_PERIOD: Duration = Duration::from_secs(600);
/// Sources remembered for [`LOG_PERIOD`]; beyond this, refusals are only counted.
const LOGGED_CAP: usize = 4096;

/// Who may receive unprompted UDP from the peer protocols (`--allow-peers`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerPolicy {
    /// (network, prefix length) pairs.
    pub allowed: Vec<(IpAddr, u8)>,
}

impl Default for PeerPolicy {
    /// Loopback only: a datagram with a loopback source cannot arrive from another host.
    fn default() -> Self {
        Self { allowed: vec![(IpAddr::V4([127, 0, 0, 0].into()), 8), (IpAddr::V6(Ipv6Addr::LOCALHOST), 128)] }
    }
}

impl PeerPolicy {
    /// The operator's list (it replaces the default), each `ADDR/LEN` or a bare address.
    pub fn parse(nets: &[String]) -> Result<Self, crate::error::NetworkError> {
        let allowed = nets.iter().map(|n| DataPathPolicy::parse_net(n)).collect::<Result<_, _>>()?;
        Ok(Self { allowed })
    }

    /// True when `ip` is in an allowed network.
    pub fn allows(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        self.allowed.iter().any(|&(net, len)| crate::admission::in_network(ip, canonical(net), len))
    }

    /// The networks as the start-up line names them.
    pub fn describe(&self) -> String {
        if self.allowed.is_empty() {
            return "no network".into();
        }
        self.allowed.iter().map(|(ip, len)| format!("{}/{len}", canonical(*ip))).collect::<Vec<_>>().join(", ")
    }
}

/// Why a datagram was dropped before any protocol read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// Its source port is a well-known service's (below 1024).
    ServicePort(u16),
    /// Its source port is one this server listens on.
    OwnPort(u16),
}

/// What the guard refused since the server started.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct GuardCounts {
    /// Datagrams dropped for their source port below 1024.
    pub service_port: u64,
    /// Datagrams dropped for coming from one of this server's own UDP ports.
    pub own_port: u64,
    /// Unprompted tests refused (their destination not in `--allow-peers`).
    pub unprompted_refused: u64,
    /// Answers not sent: over the bytes received or a rate budget.
    pub answers_withheld: u64,
    /// Their bytes.
    pub answer_bytes_withheld: u64,
}

/// A token bucket of bytes.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn full(now: Instant) -> Self {
        Self { tokens: BURST as f64, at: now }
    }

    fn refill(&mut self, rate: u64, now: Instant) {
        let dt = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + dt * rate as f64).min(BURST as f64);
        self.at = now;
    }
}

/// One address outside the allowed networks.
#[derive(Debug, Clone, Copy)]
struct Ledger {
    received: u64,
    sent: u64,
    bucket: Bucket,
    last: Instant,
}

#[derive(Debug)]
struct Books {
    ledgers: HashMap<IpAddr, Ledger>,
    total: Bucket,
    /// (source, kind, protocol) → when it was last logged.
    logged: HashMap<(IpAddr, u8, &'static str), Instant>,
}

/// The server's one guard, shared by every UDP listener.
#[derive(Debug)]
pub struct ReflectionGuard {
    policy: PeerPolicy,
    own_ports: Vec<u16>,
    books: Mutex<Books>,
    service_port: AtomicU64,
    own_port: AtomicU64,
    unprompted_refused: AtomicU64,
    answers_withheld: AtomicU64,
    answer_bytes_withheld: AtomicU64,
}

/// Kinds of refusal, each logged once per source and period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalKind {
    /// A datagram from a service port or one of ours.
    Source = 0,
    /// An unprompted test to an address outside `--allow-peers`.
    Unprompted = 1,
    /// Answers held back by the amplification or rate budget.
    Budget = 2,
    /// Another protocol's client's datagram (an irtt client at netchar's port), unanswered.
    Foreign = 3,
}

impl ReflectionGuard {
    /// A guard for a server whose UDP listeners hold `own_ports`.
    pub fn new(policy: PeerPolicy, own_ports: Vec<u16>) -> Self {
        let now = Instant::now();
        Self {
            policy,
            own_ports,
            books: Mutex::new(Books { ledgers: HashMap::new(), total: Bucket::full(now), logged: HashMap::new() }),
            service_port: AtomicU64::new(0),
            own_port: AtomicU64::new(0),
            unprompted_refused: AtomicU64::new(0),
            answers_withheld: AtomicU64::new(0),
            answer_bytes_withheld: AtomicU64::new(0),
        }
    }

    /// The policy it enforces.
    pub fn policy(&self) -> &PeerPolicy {
        &self.policy
    }

    /// Checks a datagram's source before anything reads it: `Err` (counted) when it must be
    /// dropped unanswered.
    pub fn check_source(&self, from: SocketAddr) -> Result<(), Dropped> {
        let port = from.port();
        if port < 1024 {
            self.service_port.fetch_add(1, Ordering::Relaxed);
            return Err(Dropped::ServicePort(port));
        }
        if self.own_ports.contains(&port) {
            self.own_port.fetch_add(1, Ordering::Relaxed);
            return Err(Dropped::OwnPort(port));
        }
        Ok(())
    }

    /// The service-port rule alone, for a socket that only counts what it receives and
    /// never answers (netio's UDP test: its clients send from the same port number as the
    /// server's, so the own-port rule would drop every one).
    pub fn check_service_port(&self, from: SocketAddr) -> Result<(), Dropped> {
        if from.port() < 1024 {
            self.service_port.fetch_add(1, Ordering::Relaxed);
            return Err(Dropped::ServicePort(from.port()));
        }
        Ok(())
    }

    /// A datagram of `bytes` came from `from` and passed [`Self::check_source`]: the credit
    /// that answers to its address may spend.
    pub fn received(&self, from: SocketAddr, bytes: usize, now: Instant) {
        let ip = canonical(from.ip());
        if self.policy.allows(ip) {
            return;
        }
        let mut books = self.books.lock().unwrap_or_else(|p| p.into_inner());
        let ledger = books.ledger(ip, now);
        ledger.received = ledger.received.saturating_add(bytes as u64);
        ledger.last = now;
    }

    /// [`Self::check_source`] and, when it passes, [`Self::received`]: the one call a UDP
    /// listener makes for every datagram it reads.
    pub fn inbound(&self, from: SocketAddr, bytes: usize, now: Instant) -> Result<(), Dropped> {
        self.check_source(from)?;
        self.received(from, bytes, now);
        Ok(())
    }

    /// May the server answer `to` with `bytes` now? Always for an allowed network; for any
    /// other address only within what it sent and the rate budgets, and then the bytes are
    /// counted as sent. A `false` is counted as withheld.
    pub fn may_answer(&self, to: SocketAddr, bytes: usize, now: Instant) -> bool {
        let ip = canonical(to.ip());
        if self.policy.allows(ip) {
            return true;
        }
        let bytes = bytes as u64;
        let mut books = self.books.lock().unwrap_or_else(|p| p.into_inner());
        books.total.refill(TOTAL_RATE, now);
        let total_ok = books.total.tokens >= bytes as f64;
        let ledger = books.ledger(ip, now);
        ledger.bucket.refill(PER_DESTINATION_RATE, now);
        let ok = total_ok && ledger.sent + bytes <= ledger.received && ledger.bucket.tokens >= bytes as f64;
        if ok {
            ledger.sent += bytes;
            ledger.bucket.tokens -= bytes as f64;
            ledger.last = now;
            books.total.tokens -= bytes as f64;
        } else {
            self.answers_withheld.fetch_add(1, Ordering::Relaxed);
            self.answer_bytes_withheld.fetch_add(bytes, Ordering::Relaxed);
        }
        ok
    }

    /// May a test send a stream of datagrams to `to`, which did not prove it asked? Only an
    /// allowed network; the refusal (counted) says which flag would allow it.
    pub fn may_send_unprompted(&self, to: SocketAddr) -> Result<(), UnpromptedRefused> {
        if self.policy.allows(to.ip()) {
            return Ok(());
        }
        self.unprompted_refused.fetch_add(1, Ordering::Relaxed);
        Err(UnpromptedRefused { to: canonical(to.ip()), allowed: self.policy.describe() })
    }

    /// True the first time in a while that a refusal of `kind` by `protocol`'s listener
    /// concerning `ip` is seen: log it then, only count it otherwise.
    pub fn first_refusal(&self, ip: IpAddr, kind: RefusalKind, protocol: &'static str, now: Instant) -> bool {
        let ip = canonical(ip);
        let mut books = self.books.lock().unwrap_or_else(|p| p.into_inner());
        let key = (ip, kind as u8, protocol);
        if let Some(at) = books.logged.get_mut(&key) {
            if now.saturating_duration_since(*at) < LOG_PERIOD {
                return false;
            }
            *at = now;
            return true;
        }
        if books.logged.len() >= LOGGED_CAP {
            books.logged.retain(|_, at| now.saturating_duration_since(*at) < LOG_PERIOD);
            if books.logged.len() >= LOGGED_CAP {
                return false;
            }
        }
        books.logged.insert(key, now);
        true
    }

    /// What was refused so far.
    pub fn counts(&self) -> GuardCounts {
        GuardCounts {
            service_port: self.service_port.load(Ordering::Relaxed),
            own_port: self.own_port.load(Ordering::Relaxed),
            unprompted_refused: self.unprompted_refused.load(Ordering::Relaxed),
            answers_withheld: self.answers_withheld.load(Ordering::Relaxed),
            answer_bytes_withheld: self.answer_bytes_withheld.load(Ordering::Relaxed),
        }
    }
}

impl Books {
    /// `ip`'s ledger, made when new; the table stays within [`LEDGER_CAP`] by forgetting
    /// addresses quiet for [`LEDGER_IDLE`], then the quietest one (whose credit is lost:
    /// forgetting never lets more out).
    fn ledger(&mut self, ip: IpAddr, now: Instant) -> &mut Ledger {
        if !self.ledgers.contains_key(&ip) && self.ledgers.len() >= LEDGER_CAP {
            self.ledgers.retain(|_, l| now.saturating_duration_since(l.last) < LEDGER_IDLE);
            if self.ledgers.len() >= LEDGER_CAP {
                if let Some(quietest) = self.ledgers.iter().min_by_key(|(_, l)| l.last).map(|(ip, _)| *ip) {
                    self.ledgers.remove(&quietest);
                }
            }
        }
        self.ledgers.entry(ip).or_insert(Ledger { received: 0, sent: 0, bucket: Bucket::full(now), last: now })
    }
}

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dropped::ServicePort(p) => {
                write!(f, "port {p} is a service's (below 1024): answering it could start a loop between services")
            }
            Dropped::OwnPort(p) => {
                write!(f, "port {p} is one of this server's own: answering it could start a loop between servers")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ip: &str, port: u16) -> SocketAddr {
        SocketAddr::new(ip.parse().unwrap(), port)
    }

    fn guard(allowed: &[&str]) -> ReflectionGuard {
        let nets: Vec<String> = allowed.iter().map(|s| s.to_string()).collect();
        ReflectionGuard::new(PeerPolicy::parse(&nets).unwrap(), vec![5001, 7777])
    }

    #[test]
    fn service_ports_and_our_own_ports_are_dropped_from_anyone() {
        let g = guard(&["10.0.0.0/8"]);
        for port in [7, 9, 13, 17, 19, 37, 53, 123, 161, 1023] {
            assert_eq!(g.check_source(at("10.1.2.3", port)), Err(Dropped::ServicePort(port)));
        }
        assert_eq!(g.check_source(at("10.1.2.3", 5001)), Err(Dropped::OwnPort(5001)));
        assert_eq!(g.check_source(at("192.0.2.1", 7777)), Err(Dropped::OwnPort(7777)));
        assert_eq!(g.check_source(at("192.0.2.1", 1024)), Ok(()));
        assert_eq!(g.check_source(at("192.0.2.1", 40_000)), Ok(()));
        let c = g.counts();
        assert_eq!((c.service_port, c.own_port), (10, 2));
    }

    #[test]
    fn loopback_is_allowed_by_default_and_an_operators_list_replaces_it() {
        let d = PeerPolicy::default();
        assert!(d.allows("127.0.0.1".parse().unwrap()) && d.allows("::1".parse().unwrap()));
        assert!(d.allows("::ffff:127.0.0.5".parse().unwrap()), "IPv4-mapped loopback");
        assert!(!d.allows("10.0.0.1".parse().unwrap()));
        let p = PeerPolicy::parse(&["10.0.0.0/8".into()]).unwrap();
        assert!(p.allows("10.200.1.1".parse().unwrap()) && !p.allows("127.0.0.1".parse().unwrap()));
        assert!(PeerPolicy::parse(&["10.0.0.0/33".into()]).is_err());
    }

    #[test]
    fn unprompted_tests_go_only_to_allowed_networks() {
        let g = guard(&["10.0.0.0/8"]);
        assert!(g.may_send_unprompted(at("10.9.9.9", 40_000)).is_ok());
        let why = g.may_send_unprompted(at("192.0.2.7", 40_000)).unwrap_err();
        assert_eq!(why.to, "192.0.2.7".parse::<IpAddr>().unwrap());
        assert!(why.to_string().contains("--allow-peers 192.0.2.7/32"), "{why}");
        assert_eq!(g.counts().unprompted_refused, 1);
    }

    #[test]
    fn answers_to_an_unproven_address_never_exceed_what_it_sent() {
        let g = guard(&[]);
        let now = Instant::now();
        let victim = at("192.0.2.9", 40_000);
        assert!(!g.may_answer(victim, 1, now), "nothing received, nothing answered");
        g.received(victim, 100, now);
        assert!(g.may_answer(victim, 60, now));
        assert!(!g.may_answer(victim, 41, now), "60 + 41 > 100");
        assert!(g.may_answer(victim, 40, now));
        // Credit is per address, whatever the port.
        g.received(at("192.0.2.9", 50_000), 10, now);
        assert!(g.may_answer(victim, 10, now));
        let c = g.counts();
        assert_eq!((c.answers_withheld, c.answer_bytes_withheld), (2, 42));
    }

    #[test]
    fn answers_are_held_to_the_per_destination_and_total_rates() {
        let g = guard(&[]);
        let t0 = Instant::now();
        let a = at("192.0.2.1", 40_000);
        // A sender that sent plenty: the per-destination bucket is what limits it.
        g.received(a, 100_000_000, t0);
        let mut sent = 0u64;
        for i in 0..2_000u32 {
            let now = t0 + Duration::from_millis(u64::from(i));
            for _ in 0..10 {
                if g.may_answer(a, 1000, now) {
                    sent += 1000;
                }
            }
        }
        // 2 s at 1.25 MB/s plus one burst.
        let most = 2 * PER_DESTINATION_RATE + BURST;
        assert!(sent <= most && sent >= most - 20_000, "sent {sent}, limit {most}");
        // Many destinations: the total bucket binds.
        let g = guard(&[]);
        let mut sent = 0u64;
        for i in 0..2_000u32 {
            let now = t0 + Duration::from_millis(u64::from(i));
            for d in 0..20u8 {
                let to = at(&format!("192.0.2.{}", d + 1), 40_000);
                g.received(to, 2000, now);
                if g.may_answer(to, 1000, now) {
                    sent += 1000;
                }
            }
        }
        let most = 2 * TOTAL_RATE + BURST;
        assert!(sent <= most && sent >= most - 40_000, "sent {sent}, limit {most}");
    }

    #[test]
    fn allowed_networks_are_answered_without_budget() {
        let g = guard(&["10.0.0.0/8"]);
        let now = Instant::now();
        for _ in 0..1000 {
            assert!(g.may_answer(at("10.1.1.1", 40_000), 60_000, now));
        }
        assert_eq!(g.counts(), GuardCounts::default());
    }

    #[test]
    fn the_ledger_table_is_bounded_and_forgetting_never_lets_more_out() {
        let g = guard(&[]);
        let now = Instant::now();
        let victim = at("192.0.2.250", 40_000);
        g.received(victim, 1000, now);
        for i in 0..(LEDGER_CAP as u32 + 10) {
            let ip = std::net::Ipv4Addr::from(0x0a00_0000 + i);
            g.received(SocketAddr::new(ip.into(), 40_000), 1, now + Duration::from_millis(1));
        }
        assert!(g.books.lock().unwrap().ledgers.len() <= LEDGER_CAP);
        assert!(!g.may_answer(victim, 1000, now + Duration::from_millis(2)), "the victim's credit was forgotten");
    }

    #[test]
    fn a_refusal_is_logged_once_per_source_kind_and_listener_in_a_period() {
        let g = guard(&[]);
        let t0 = Instant::now();
        let ip: IpAddr = "192.0.2.3".parse().unwrap();
        assert!(g.first_refusal(ip, RefusalKind::Unprompted, "iperf2", t0));
        assert!(!g.first_refusal(ip, RefusalKind::Unprompted, "iperf2", t0 + Duration::from_secs(5)));
        assert!(g.first_refusal(ip, RefusalKind::Unprompted, "nc-test", t0), "each listener logs its own");
        assert!(g.first_refusal(ip, RefusalKind::Budget, "iperf2", t0));
        assert!(g.first_refusal(ip, RefusalKind::Unprompted, "iperf2", t0 + LOG_PERIOD));
    }
}
