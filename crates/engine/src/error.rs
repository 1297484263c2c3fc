//! The engine's errors, as kinds a caller can match: a silent peer, a busy server, an option
//! refused, a peer of another kind, a protocol error, an I/O error with its context. Each one's
//! text is one line that says what went wrong and what to do; callers decide on the kind, never
//! on the words.
//!
//! The bottom of the engine's layers: nothing here names another module of the engine, so every
//! module may name these types (crate::client re-exports [`ClientError`], crate::registry and
//! crate::protocols [`SessionError`]).

use netchar_wire::hello::KnownProtocol;
use netchar_wire::ProtocolError;
use std::io;
use std::time::Duration;

/// Why a protocol's client session cannot run a test, said before any traffic: what a
/// session constructor of the registry returns.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// An option the protocol's far end does not carry or honour in this test.
    #[error("{message}")]
    OptionRefused {
        /// The option, as the command line spells it (`--tos`, `--psk-file`, `-d/-r`).
        flag: &'static str,
        /// The whole line: which protocol, why, and what to do.
        message: String,
    },
    /// The protocol cannot run this test (its kind, direction, end condition, ...).
    #[error("{0}")]
    Unsupported(String),
}

impl SessionError {
    /// [`Self::OptionRefused`]: `flag` cannot run with this protocol, as `message` says.
    pub fn option(flag: &'static str, message: impl Into<String>) -> Self {
        Self::OptionRefused { flag, message: message.into() }
    }

    /// The option refused, when the error is one's.
    pub fn flag(&self) -> Option<&'static str> {
        match self {
            Self::OptionRefused { flag, .. } => Some(flag),
            Self::Unsupported(_) => None,
        }
    }
}

/// What `--proto auto` adds to a silent peer's error when the port is a peer protocol's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortHint {
    /// The port the client connected to.
    pub port: u16,
    /// The protocol whose servers listen there by default (`--proto` name).
    pub protocol: &'static str,
    /// What to do if that protocol's server runs there.
    pub how: String,
}

impl std::fmt::Display for PortHint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Self { port, protocol: p, how } = self;
        write!(f, "; port {port} is {p}'s: if {p} runs there, {how}")
    }
}

fn hint_text(hint: &Option<PortHint>) -> String {
    hint.as_ref().map(PortHint::to_string).unwrap_or_default()
}

fn busy_text(running: u32, max: u32, reason: &Option<String>) -> String {
    reason.clone().unwrap_or_else(|| format!("{running} of {max} tests running"))
}

/// Why a client run failed. Each message is one line that says what to do.
///
/// The control protocol's errors ([`ProtocolError`]) arrive through `From`, which lifts the
/// kinds a caller decides on into their own variants ([`Self::SilentPeer`],
/// [`Self::WrongPeer`], [`Self::Rejected`]); [`Self::Protocol`] holds the others (a malformed
/// or unexpected message, a version or authentication mismatch, a timeout, the peer's error).
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The host name did not resolve.
    #[error("cannot resolve {host}: {message}")]
    Resolve {
        /// As given.
        host: String,
        /// The resolver's words.
        message: String,
    },
    /// Nothing listens there.
    #[error("{}", refused_line(addr, peer))]
    Refused {
        /// Where.
        addr: String,
        /// The peer protocol whose server was asked for; None for netchar's own.
        peer: Option<&'static str>,
    },
    /// No answer to the connect.
    #[error("could not reach {addr} within {secs:.0} s (host down, wrong address or filtered?); raise --connect-timeout if the path is slow{hint}")]
    Unreachable {
        /// Where.
        addr: String,
        /// The limit.
        secs: f64,
        /// What this host knows of why: its connection-tracking table full, or nothing.
        hint: String,
    },
    /// Another connect failure.
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        /// Where.
        addr: String,
        /// Why.
        source: io::Error,
    },
    /// The server is running as many tests as it admits, or is at another limit that frees
    /// up (too many connections from this address, test starts per minute, rate in use).
    #[error("the server at {addr} is busy ({}); retry later, or wait with --busy-wait SECS", busy_text(*running, *max, reason))]
    Busy {
        /// Where.
        addr: String,
        /// Tests running.
        running: u32,
        /// Admitted at once.
        max: u32,
        /// The limit reached, when it is not the number of tests.
        reason: Option<String>,
    },
    /// The peer accepted the connection and said nothing within the hello's deadline.
    #[error(
        "the peer is not a netchar server: no netchar hello within {:.0} s: the peer accepted the connection and \
         said nothing, as {} does{}",
        waited.as_secs_f64(),
        netchar_wire::known::SILENT_SERVERS,
        hint_text(hint)
    )]
    SilentPeer {
        /// How long it was given.
        waited: Duration,
        /// Which protocol's port it is, when `--proto auto` knows one.
        hint: Option<PortHint>,
    },
    /// Another kind of server answered: one of a protocol netchar also speaks, or one it
    /// does not know.
    #[error("the peer is not a netchar server: {what}")]
    WrongPeer {
        /// The protocol it speaks, when netchar speaks it too.
        protocol: Option<KnownProtocol>,
        /// What it answered, and what to do.
        what: String,
    },
    /// `--proto auto` found a peer protocol's server, and that protocol cannot run the test.
    #[error("{what}; {why}")]
    PeerCannotRun {
        /// The protocol found.
        protocol: KnownProtocol,
        /// What it answered.
        what: String,
        /// Why its session cannot run the test.
        why: SessionError,
    },
    /// The server turned the test down (an option it lacks, a limit the test exceeds).
    #[error("the server rejected the test: {reason}")]
    Rejected {
        /// The server's reason, as it gave it.
        reason: String,
    },
    /// The protocol cannot run the test, or an option is refused for it (before any traffic).
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The control protocol failed otherwise (malformed, unexpected, timed out, ...).
    #[error("{0}")]
    Protocol(ProtocolError),
    /// A socket option was refused.
    #[error("{flag}: {message}")]
    SocketOption {
        /// The flag that asked for it.
        flag: &'static str,
        /// What failed.
        message: String,
    },
    /// A data stream failed.
    #[error("{0}")]
    Stream(String),
    /// A socket or thread of this end failed while setting up the test (a data stream's
    /// socket, the dial-back listener, the data workers): what was being done, and the error.
    #[error("{context}: {source}")]
    Io {
        /// What this end was doing (`cannot open UDP stream 2`).
        context: String,
        /// Why it failed.
        source: io::Error,
    },
    /// The control connection failed.
    #[error("control connection to {addr} failed: {source}")]
    Control {
        /// Where.
        addr: String,
        /// Why.
        source: io::Error,
    },
    /// The test cannot run as asked, for a reason found while connecting (no TCP listener
    /// but an eCos nc_test slave on UDP).
    #[error("{0}")]
    Unsupported(String),
    /// Ctrl-C.
    #[error("interrupted; the figures measured so far are reported")]
    Interrupted,
    /// The server closed the control connection while the test ran (it stopped, crashed or
    /// lost the path): what this end measured until then is kept.
    #[error(
        "the server at {addr} closed the control connection during the test; the figures measured so far are reported"
    )]
    PeerGone {
        /// Where.
        addr: String,
    },
    /// The server ended the test and said why.
    #[error("the server ended the test: {0}")]
    Server(String),
}

impl From<ProtocolError> for ClientError {
    fn from(e: ProtocolError) -> Self {
        match e {
            ProtocolError::Silent { waited } => Self::SilentPeer { waited, hint: None },
            ProtocolError::PeerProtocol { protocol, what } => Self::WrongPeer { protocol: Some(protocol), what },
            ProtocolError::NotNetchar(what) => Self::WrongPeer { protocol: None, what },
            ProtocolError::Rejected(reason) => Self::Rejected { reason },
            e => Self::Protocol(e),
        }
    }
}

/// A network given to the server (`--allow-data-from`, `--allow-peers`, `--allow-target`)
/// that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetworkError {
    /// Neither an address nor `ADDR/LEN`.
    #[error("{given}: not an address or network (write e.g. 192.0.2.0/24, 2001:db8::/32, 10.1.2.3)")]
    NotAnAddress {
        /// As given.
        given: String,
    },
    /// A prefix length longer than the address, or not a number.
    #[error("{given}: prefix length must be 0-{max}")]
    BadPrefix {
        /// As given.
        given: String,
        /// The address family's longest prefix (32 or 128).
        max: u8,
    },
}

/// A stream of datagrams a listener will not send to an address that did not prove it asked
/// for it (crate::reflection): the address, and the networks `--allow-peers` allows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "not sent to {to}: this test's traffic goes only to --allow-peers networks ({allowed}), as nothing proves \
     that {to} asked for it (add --allow-peers {to}/{} to allow it)",
    if to.is_ipv4() { 32 } else { 128 }
)]
pub struct UnpromptedRefused {
    /// Where the stream would have gone (IPv4 as IPv4, also when mapped).
    pub to: std::net::IpAddr,
    /// The networks allowed, as the start-up line names them.
    pub allowed: String,
}

/// Why the server's driver ended a test session before its end, as kinds: what the server's
/// log says of the test, and what the engine's tests match on.
#[derive(Debug, thiserror::Error)]
pub enum ServerSessionError {
    /// The control connection failed (a write that could not finish, a reset).
    #[error("control connection failed: {0}")]
    Control(io::Error),
    /// The client broke the control protocol (a malformed or unexpected message, a version
    /// or authentication mismatch) or fell silent past a deadline.
    #[error("{0}")]
    Protocol(#[from] ProtocolError),
    /// The server is stopping (SIGINT/SIGTERM).
    #[error("the server is shutting down")]
    ShuttingDown,
    /// No test request within `--idle-timeout` of connecting.
    #[error("no test request within {:.0} s (--idle-timeout)", .limit.as_secs_f64())]
    NoRequest {
        /// The server's limit.
        limit: Duration,
    },
    /// The test ran to the server's `--max-duration` (a `-n` test, or a client that ends the
    /// test itself).
    #[error("stopped after {:.0} s, the server's limit (--max-duration)", .limit.as_secs_f64())]
    MaxDuration {
        /// The server's limit.
        limit: Duration,
    },
    /// The client closed the control connection while its test ran; what this end measured
    /// until then is logged.
    #[error("the client closed the control connection during the test")]
    ClientGone,
    /// The client asked to stop before the test started, with its reason.
    #[error("stopped by the client: {0}")]
    StoppedByClient(String),
    /// The client's session ended the test, with the protocol's reason.
    #[error("{0}")]
    Ended(String),
    /// A data stream failed, or the client's data did not arrive: the client is gone or the
    /// path lost it.
    #[error("{0}")]
    Data(String),
    /// The client's data streams are not the test's (one too many, a stream id it does not
    /// have, two connections for one stream).
    #[error("{0}")]
    Streams(String),
    /// A socket or thread of this end failed: what was being done, and the error.
    #[error("{context}: {source}")]
    Io {
        /// What this end was doing.
        context: String,
        /// Why it failed.
        source: io::Error,
    },
}

impl ServerSessionError {
    /// [`Self::Io`], saying what was being done.
    pub fn io(context: impl Into<String>) -> impl FnOnce(io::Error) -> Self {
        let context = context.into();
        move |source| Self::Io { context, source }
    }
}

/// Why a peer protocol's listener turned a connection away: the cap it hit. Both free up
/// as connections close.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ConnectionLimit {
    /// The client's address has `--max-per-source` connections open.
    #[error("too many connections from {ip} ({open} open, the server's --max-per-source); close some and retry")]
    PerSource {
        /// The client's address (IPv4 as IPv4, also when mapped).
        ip: std::net::IpAddr,
        /// Its connections open.
        open: usize,
    },
    /// The server has `--max-connections` connections open.
    #[error("the server has {open} connections open, its limit (--max-connections); retry later")]
    Total {
        /// Its connections open.
        open: usize,
    },
}

/// Why netchar's server refuses a peer client's request (an iperf3 or netperf client's): the
/// line its log gives, and the client hears where its protocol carries words.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum PeerRequestError {
    /// The request maps to a test outside netchar's ranges (200 streams, a 0-byte block).
    #[error("{asker} asked for {source}")]
    OutOfRange {
        /// Who asked, as the line names it (`the iperf3 client`, `netperf's TCP_RR`).
        asker: String,
        /// The value, and the range it must be in.
        source: netchar_model::SpecError,
    },
    /// netperf's `-l 0`: a test that never ends.
    #[error("a test length of 0 (netperf -l 0) runs without end")]
    Endless,
    /// A request/response test whose sizes are negative.
    #[error("{test} with a request of {request} and a response of {response} bytes")]
    TransactionSizes {
        /// The test's name (`TCP_RR`).
        test: &'static str,
        /// The request size asked for.
        request: i32,
        /// The response size asked for.
        response: i32,
    },
}

/// [`ClientError::Refused`]'s line: what to start there, for netchar's own server.
fn refused_line(addr: &str, peer: &Option<&'static str>) -> String {
    match peer {
        None => format!("no netchar server at {addr} (connection refused); start one there with `netchar server`"),
        Some(p) => {
            format!("no {p} server at {addr} (connection refused); check the host and -p, and that it runs there")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_protocols_errors_arrive_as_kinds_with_their_words_unchanged() {
        let cases = [
            ProtocolError::Silent { waited: Duration::from_secs(5) },
            ProtocolError::PeerProtocol { protocol: KnownProtocol::Iperf3, what: "an iperf3 server answered".into() },
            ProtocolError::NotNetchar("an SSH server answered".into()),
            ProtocolError::Rejected("--idle (this build has no idle-counter hook)".into()),
            ProtocolError::Malformed("bad json".into()),
        ];
        for p in cases {
            let text = p.to_string();
            let e = ClientError::from(p);
            assert_eq!(e.to_string(), text, "{e:?}");
        }
        let e = ClientError::from(ProtocolError::Silent { waited: Duration::from_secs(5) });
        assert!(matches!(e, ClientError::SilentPeer { hint: None, .. }), "{e:?}");
        let e = ClientError::from(ProtocolError::PeerProtocol { protocol: KnownProtocol::Echo, what: "echo".into() });
        assert!(matches!(e, ClientError::WrongPeer { protocol: Some(KnownProtocol::Echo), .. }), "{e:?}");
        let e = ClientError::from(ProtocolError::NotNetchar("an HTTP server answered".into()));
        assert!(matches!(e, ClientError::WrongPeer { protocol: None, .. }), "{e:?}");
        let e = ClientError::from(ProtocolError::Rejected("-P 0".into()));
        assert!(matches!(&e, ClientError::Rejected { reason } if reason == "-P 0"), "{e:?}");
        let e = ClientError::from(ProtocolError::Malformed("bad json".into()));
        assert!(matches!(e, ClientError::Protocol(ProtocolError::Malformed(_))), "{e:?}");
    }

    #[test]
    fn a_silent_peer_on_a_peers_port_is_told_what_to_do() {
        let hint = PortHint { port: 5001, protocol: "iperf2", how: "add --proto iperf2".into() };
        let e = ClientError::SilentPeer { waited: Duration::from_secs(5), hint: Some(hint) };
        assert_eq!(
            e.to_string(),
            "the peer is not a netchar server: no netchar hello within 5 s: the peer accepted the connection and \
             said nothing, as an iperf2 server (--proto iperf2), netperf's netserver (--proto netperf), a netio server \
             (suite netio --proto netio) or a discard service (--proto discard) does; port 5001 is iperf2's: if iperf2 \
             runs there, add --proto iperf2"
        );
    }

    #[test]
    fn a_busy_server_says_its_limit_or_its_count() {
        let busy = |reason: Option<&str>| ClientError::Busy {
            addr: "192.0.2.1:5300".into(),
            running: 1,
            max: 1,
            reason: reason.map(String::from),
        };
        assert_eq!(
            busy(None).to_string(),
            "the server at 192.0.2.1:5300 is busy (1 of 1 tests running); retry later, or wait with --busy-wait SECS"
        );
        assert!(busy(Some("rate in use")).to_string().contains("busy (rate in use);"));
    }

    #[test]
    fn a_refused_option_names_its_flag_and_says_the_line() {
        let e: ClientError =
            SessionError::OptionRefused { flag: "--tos", message: "--proto x: --tos no".into() }.into();
        assert!(matches!(&e, ClientError::Session(SessionError::OptionRefused { flag: "--tos", .. })), "{e:?}");
        assert_eq!(e.to_string(), "--proto x: --tos no");
        let e = ClientError::PeerCannotRun {
            protocol: KnownProtocol::Iperf3,
            what: "an iperf3 server answered".into(),
            why: SessionError::Unsupported("--proto iperf3: no rr".into()),
        };
        assert_eq!(e.to_string(), "an iperf3 server answered; --proto iperf3: no rr");
    }

    #[test]
    fn an_io_error_keeps_its_kind_and_says_what_was_being_done() {
        let e = ClientError::Io {
            context: "cannot open UDP stream 2".into(),
            source: io::Error::from(io::ErrorKind::AddrInUse),
        };
        assert!(matches!(&e, ClientError::Io { source, .. } if source.kind() == io::ErrorKind::AddrInUse));
        assert!(e.to_string().starts_with("cannot open UDP stream 2: "), "{e}");
    }
}
