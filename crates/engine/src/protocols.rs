//! The one table of the protocols netchar speaks.
//!
//! Everything the rest of the program knows about a protocol is a field of its entry here:
//! its names, its servers' default port, the commands that run it, how netchar runs as its
//! client (a session behind the client seam, crate::control, or its own runner), what its far
//! end reports and the caveats of its figures (recorded on every result, so that no reporter
//! matches a protocol by name), and what `--proto auto` says when a silent server sits on its
//! port. The servers netchar runs for other tools' clients are the [`LISTENERS`] table: the
//! flags that turn each on, its ports, how it binds, and its [`ListenerKind`] (its tests
//! sessions on the one server driver, or answered in its own loops).
//!
//! The table lists the adapters (crate::peers), so it stands above them; what an entry is
//! ([`ProtocolDef`], [`ClientRole`], [`SessionArgs`], ...) is crate::registry's, below them,
//! and re-exported here. An adapter names those types and never this table, and the drivers
//! (crate::client, crate::server) read the table: the registry's layers run one way.
//!
//! Adding a protocol: its wire module (netchar_wire), its adapter (crate::peers), and an entry
//! in each table that applies.

use crate::control::{ClientControl, NativeClient};
use crate::peers::PeerListener;
/// The registry's types, defined below the adapters (crate::registry) and re-exported here,
/// beside the table of them.
pub use crate::registry::{
    far_end_options, payload_options, ClientRole, Command, FarEndApplies, OptionReach, ProtoChoice, Protocol,
    ProtocolDef, SessionArgs, SessionCtor, SessionError, ShapeSpec,
};
use netchar_model::{Caveat, FarEnd, TestSpec};
use netchar_wire::hello::KnownProtocol;
use std::net::IpAddr;

fn applies_all(_: &TestSpec) -> FarEndApplies {
    FarEndApplies::ALL
}

fn applies_none(_: &TestSpec) -> FarEndApplies {
    FarEndApplies::NONE
}

/// netperf's request carries a TOS for netserver's data socket (its `-Y`).
fn applies_tos(_: &TestSpec) -> FarEndApplies {
    FarEndApplies::TOS
}

fn native_session(a: &SessionArgs<'_>) -> Result<Box<dyn ClientControl>, SessionError> {
    let auth = a.cfg.auth.clone().map(|c| {
        let mut nonce = [0u8; 16];
        let _ = getrandom::getrandom(&mut nonce);
        (c, nonce)
    });
    Ok(Box::new(NativeClient::new(a.now, a.spec.clone(), a.cfg.timeouts, a.cfg.companion, auth)))
}

fn reports(_: &TestSpec) -> (FarEnd, Vec<Caveat>) {
    (FarEnd::Reports, Vec::new())
}

/// Every protocol, netchar's own first.
pub static PROTOCOLS: &[ProtocolDef] = &[
    ProtocolDef {
        name: netchar_model::NATIVE_PROTOCOL,
        aliases: &[],
        about: "netchar's own (a `netchar server` or `netchar-responder`)",
        default_port: crate::DEFAULT_PORT,
        commands: &[
            Command::Tcp,
            Command::Udp,
            Command::Rr,
            Command::Crr,
            Command::Echo,
            Command::SuiteNetio,
            Command::SuiteEcos,
        ],
        client: ClientRole::Session(native_session),
        authenticates: true,
        dial_back: false,
        udp_payload: None,
        shape: None,
        silent_hint: None,
        answers_hello: None,
        measurement: reports,
        far_end_applies: applies_all,
    },
    ProtocolDef {
        name: "iperf3",
        aliases: &[],
        about: "an `iperf3 -s`",
        default_port: crate::peers::iperf3::DEFAULT_PORT,
        commands: &[Command::Tcp, Command::Udp],
        client: ClientRole::Session(crate::peers::iperf3::client_session),
        authenticates: false,
        dial_back: false,
        udp_payload: None,
        shape: None,
        silent_hint: None,
        answers_hello: Some(KnownProtocol::Iperf3),
        measurement: crate::peers::iperf3::measurement,
        far_end_applies: crate::peers::iperf3::far_end_applies,
    },
    ProtocolDef {
        name: "iperf2",
        aliases: &["iperf"],
        about: "an `iperf -s` (iperf 2; `-s -u` for UDP)",
        default_port: netchar_wire::iperf2::DEFAULT_PORT,
        commands: &[Command::Tcp, Command::Udp],
        client: ClientRole::Session(crate::peers::iperf2::iperf2_session),
        authenticates: false,
        dial_back: true,
        // iperf2's default -l: its servers read 1470 bytes, cutting longer datagrams.
        udp_payload: Some(1470),
        shape: None,
        silent_hint: Some("add --proto iperf2 (or --proto lwiperf for lwIP's)"),
        answers_hello: None,
        measurement: crate::peers::iperf2::measurement,
        far_end_applies: crate::peers::iperf2::far_end_applies,
    },
    ProtocolDef {
        name: "lwiperf",
        aliases: &[],
        about: "lwIP's lwiperf server (TCP)",
        default_port: netchar_wire::iperf2::DEFAULT_PORT,
        commands: &[Command::Tcp],
        client: ClientRole::Session(crate::peers::iperf2::lwiperf_session),
        authenticates: false,
        dial_back: false,
        udp_payload: None,
        shape: None,
        silent_hint: None,
        answers_hello: None,
        measurement: crate::peers::iperf2::measurement_lwiperf,
        far_end_applies: applies_none,
    },
    ProtocolDef {
        name: "echo",
        aliases: &[],
        about: "an RFC 862 echo service",
        default_port: 7,
        commands: &[Command::Tcp, Command::Udp, Command::Rr, Command::Echo],
        client: ClientRole::Session(crate::peers::services::echo_session),
        authenticates: false,
        dial_back: false,
        udp_payload: None,
        shape: Some(crate::peers::services::echo_shape),
        silent_hint: None,
        answers_hello: Some(KnownProtocol::Echo),
        measurement: crate::peers::services::echo_measurement,
        far_end_applies: applies_none,
    },
    ProtocolDef {
        name: "discard",
        aliases: &[],
        about: "an RFC 863 discard service",
        default_port: 9,
        commands: &[Command::Tcp, Command::Udp],
        client: ClientRole::Session(crate::peers::services::discard_session),
        authenticates: false,
        dial_back: false,
        udp_payload: None,
        shape: Some(crate::peers::services::discard_shape),
        silent_hint: Some("add --proto discard"),
        answers_hello: None,
        measurement: crate::peers::services::discard_measurement,
        far_end_applies: applies_none,
    },
    ProtocolDef {
        name: "sink",
        aliases: &["send-only"],
        about: "no server: UDP sent into any address (a discard interface, a veth whose peer drops), the sending \
                stack alone",
        default_port: 9,
        commands: &[Command::Udp],
        client: ClientRole::Session(crate::peers::sink::session),
        authenticates: false,
        dial_back: false,
        udp_payload: None,
        shape: Some(crate::peers::sink::shape),
        silent_hint: None,
        answers_hello: None,
        measurement: crate::peers::sink::measurement,
        far_end_applies: applies_none,
    },
    ProtocolDef {
        name: "chargen",
        aliases: &[],
        about: "an RFC 864 chargen service (TCP: its UDP answers carry no sequence number to count loss by)",
        default_port: 19,
        commands: &[Command::Tcp],
        client: ClientRole::Session(crate::peers::services::chargen_session),
        authenticates: false,
        dial_back: false,
        udp_payload: None,
        shape: Some(crate::peers::services::chargen_shape),
        silent_hint: None,
        answers_hello: Some(KnownProtocol::Chargen),
        measurement: crate::peers::services::chargen_measurement,
        far_end_applies: applies_none,
    },
    ProtocolDef {
        name: "netperf",
        aliases: &["netserver"],
        about: "a netperf `netserver` (2.5 or later: TCP_STREAM, TCP_MAERTS with -R, UDP_STREAM, TCP_RR, UDP_RR \
                with rr --udp, TCP_CRR)",
        default_port: crate::peers::netperf::DEFAULT_PORT,
        commands: &[Command::Tcp, Command::Udp, Command::Rr, Command::Crr],
        client: ClientRole::Session(crate::peers::netperf::client_session),
        authenticates: false,
        dial_back: false,
        udp_payload: None,
        shape: None,
        silent_hint: Some("add --proto netperf"),
        answers_hello: None,
        measurement: crate::peers::netperf::measurement,
        far_end_applies: applies_tos,
    },
    ProtocolDef {
        name: "netio",
        aliases: &[],
        about: "a netio server (`netio -s`, Keil MDK's or lwIP's)",
        default_port: netchar_wire::netio::TCP_PORT,
        commands: &[Command::SuiteNetio],
        client: ClientRole::Session(crate::peers::netio::client_session),
        authenticates: false,
        dial_back: false,
        udp_payload: None,
        shape: None,
        silent_hint: Some("run `netchar suite netio {host} --proto netio`"),
        answers_hello: None,
        measurement: reports,
        far_end_applies: applies_none,
    },
    ProtocolDef {
        name: "nc-test",
        aliases: &["nc_test"],
        about: "an eCos nc_test_slave",
        default_port: netchar_wire::nc_test::SLAVE_PORT,
        commands: &[Command::Tcp, Command::Udp, Command::Echo, Command::SuiteEcos],
        client: ClientRole::Session(crate::peers::nc_test::client_session),
        authenticates: false,
        dial_back: false,
        udp_payload: None,
        shape: None,
        silent_hint: None,
        answers_hello: None,
        measurement: reports,
        far_end_applies: applies_none,
    },
    ProtocolDef {
        name: "nc6-test",
        aliases: &["nc6_test"],
        about: "an eCos nc6_test_slave (nc6_test_master's sequence)",
        default_port: netchar_wire::nc_test::SLAVE_PORT,
        commands: &[Command::SuiteEcos],
        client: ClientRole::Session(crate::peers::nc_test::client_session),
        authenticates: false,
        dial_back: false,
        udp_payload: None,
        shape: None,
        silent_hint: None,
        answers_hello: None,
        measurement: reports,
        far_end_applies: applies_none,
    },
    ProtocolDef {
        name: "irtt",
        aliases: &[],
        about: "an `irtt server` (rr --udp: round trips, one-way delays, loss up and down; --psk-file's secret as \
                its --hmac key)",
        default_port: crate::peers::irtt::DEFAULT_PORT,
        commands: &[Command::Rr],
        client: ClientRole::Session(crate::peers::irtt_client::client_session),
        authenticates: true,
        dial_back: false,
        udp_payload: None,
        shape: Some(crate::peers::irtt_client::shape),
        silent_hint: None,
        answers_hello: None,
        measurement: crate::peers::irtt_client::measurement,
        far_end_applies: crate::peers::irtt_client::far_end_applies,
    },
];

// Finding a protocol needs the table, so these methods of the registry's types live beside it.
impl Protocol {
    /// netchar's own.
    pub fn native() -> Self {
        Self(&PROTOCOLS[0])
    }

    /// The protocol named `name` (or one of its aliases).
    pub fn find(name: &str) -> Option<Self> {
        PROTOCOLS.iter().find(|p| p.name == name || p.aliases.contains(&name)).map(Self)
    }

    /// The protocol whose server answers netchar's hello as `known` does.
    pub fn answering(known: KnownProtocol) -> Self {
        PROTOCOLS
            .iter()
            .find(|p| p.answers_hello == Some(known))
            .map(Self)
            .expect("every protocol recognised by its answer is in the table")
    }

    /// True for netchar's own.
    pub fn is_native(self) -> bool {
        std::ptr::eq(self.0, &PROTOCOLS[0])
    }

    /// The protocols that `command` runs, as a list for an error or help text.
    pub fn names_for(command: Command) -> String {
        PROTOCOLS.iter().filter(|p| p.commands.contains(&command)).map(|p| p.name).collect::<Vec<_>>().join(", ")
    }
}

/// A `--proto` value that names no protocol: the line lists every name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--proto {given}: one of {}", ProtoChoice::all_names())]
pub struct UnknownProtocol {
    /// As given.
    pub given: String,
}

impl ProtoChoice {
    /// Parses `--proto`: `auto` or a protocol's name.
    pub fn parse(s: &str) -> Result<Self, UnknownProtocol> {
        if s == "auto" {
            return Ok(Self::Auto);
        }
        Protocol::find(s).map(Self::Only).ok_or_else(|| UnknownProtocol { given: s.to_string() })
    }

    /// `auto` and every protocol's name.
    pub fn all_names() -> String {
        std::iter::once("auto").chain(PROTOCOLS.iter().map(|p| p.name)).collect::<Vec<_>>().join(", ")
    }

    /// The protocol a test runs with: netchar's own for auto, until the server says otherwise.
    pub fn protocol(self) -> Protocol {
        match self {
            Self::Auto => Protocol::native(),
            Self::Only(p) => p,
        }
    }

    /// The name results carry.
    pub fn name(self) -> &'static str {
        self.protocol().name()
    }

    /// The peer protocol asked for, if one was (not auto, not netchar's own).
    pub fn peer(self) -> Option<Protocol> {
        match self {
            Self::Only(p) if !p.is_native() => Some(p),
            _ => None,
        }
    }
}

/// One port of a listener.
#[derive(Debug)]
pub struct PortDef {
    /// Its `netchar server` flag (`iperf3-port`) and `--config` key.
    pub flag: &'static str,
    /// Its default.
    pub default: u16,
    /// What it carries, for the flag's help.
    pub about: &'static str,
}

/// Binds a listener on an address with its ports (in [`ListenerDef::ports`]' order).
pub type BindListener = fn(IpAddr, &[u16]) -> std::io::Result<Box<dyn PeerListener>>;

/// How a listener serves its clients: through the one server driver or in loops of its own.
///
/// Every listener's tests are admitted under the server's one admission registry and limits
/// (crate::peers::PeerContext); the kind says who does the rest: the driver, which admits a
/// session from its request, runs its streams, reports, logs it and frees its slot whatever
/// ends it, or the listener's own loops, which must do each of those themselves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListenerKind {
    /// Each test (a connection, a request datagram, a source's opens) is a session on the one
    /// server driver (crate::server_session's `SessionDriver`); the listener only accepts and
    /// demultiplexes.
    Sessions,
    /// Answered in place by the listener's own serve loops, with no session: there is no
    /// request to map and no report to give, the connection or UDP source is the test. Each is
    /// still admitted as a test of the listener's making, under the same limits, and a UDP
    /// answer still passes the reflection guard.
    StatelessService,
}

/// A server netchar runs beside its own, for another tool's clients.
pub struct ListenerDef {
    /// The `netchar server` flag (`--iperf3`) and `--config` key that turn it on.
    pub flag: &'static str,
    /// Whether its tests are sessions on the one server driver or answered in its own loops.
    pub kind: ListenerKind,
    /// What it answers, for the flag's help.
    pub about: &'static str,
    /// Its ports; giving one turns the listener on.
    pub ports: &'static [PortDef],
    /// Binds it.
    pub bind: BindListener,
    /// What to check when binding fails.
    pub bind_hint: &'static str,
}

impl std::fmt::Debug for ListenerDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.flag)
    }
}

/// Every peer-protocol server, in the order `netchar server` starts them.
pub static LISTENERS: &[ListenerDef] = &[
    // Stateless: no request, no report, nothing to settle (a connection or UDP source is the
    // test), so a session would only wrap a copy loop.
    ListenerDef {
        flag: "services",
        kind: ListenerKind::StatelessService,
        about: "also offer echo, discard and chargen (RFC 862/863/864) over TCP and UDP, each connection or UDP \
                source admitted as a test under the same limits",
        ports: &[
            PortDef { flag: "echo-port", default: 7, about: "the echo port (TCP and UDP)" },
            PortDef { flag: "discard-port", default: 9, about: "the discard port (TCP and UDP)" },
            PortDef { flag: "chargen-port", default: 19, about: "the chargen port (TCP and UDP)" },
        ],
        bind: crate::peers::services::bind_listener,
        bind_hint: "ports below 1024 need root or CAP_NET_BIND_SERVICE; move them with --echo-port, \
                    --discard-port and --chargen-port",
    },
    // Each connection is a session on the one driver (crate::peers::netio_server) that measures
    // itself: netio's commands and TCP data share the connection, a phase after the other, and
    // the UDP test's datagrams come to one socket shared by every client, counted per source.
    ListenerDef {
        flag: "netio",
        kind: ListenerKind::Sessions,
        about: "also answer netio clients (`netio -t|-u HOST`): TCP on --netio-port, the UDP test on the port \
                after it (TCP control and UDP data)",
        ports: &[PortDef {
            flag: "netio-port",
            default: netchar_wire::netio::TCP_PORT,
            about: "the netio port (TCP; the UDP test uses this plus one)",
        }],
        bind: crate::peers::netio::bind_listener,
        bind_hint: "is a netio server running there?",
    },
    ListenerDef {
        flag: "iperf3",
        kind: ListenerKind::Sessions,
        about: "also answer iperf3 clients (TCP and UDP, -R, --bidir, -P) on --iperf3-port",
        ports: &[PortDef {
            flag: "iperf3-port",
            default: crate::peers::iperf3::DEFAULT_PORT,
            about: "port of the iperf3 server (TCP and UDP)",
        }],
        bind: crate::peers::iperf3::bind_listener,
        bind_hint: "is an iperf3 server running there?",
    },
    // iperf2 has no control connection: each test is a session on the one driver whose request
    // is the header on its own data connection or first datagram (crate::peers::iperf2,
    // session.rs), a client's sessions one test by its address.
    ListenerDef {
        flag: "iperf2",
        kind: ListenerKind::Sessions,
        about: "also answer iperf2 clients (`iperf -c`, TCP and UDP, -P, -R of 2.1+) on --iperf2-port",
        ports: &[PortDef {
            flag: "iperf2-port",
            default: netchar_wire::iperf2::DEFAULT_PORT,
            about: "port of the iperf2 server (TCP and UDP)",
        }],
        bind: crate::peers::iperf2::bind_listener,
        bind_hint: "is an iperf server running there?",
    },
    ListenerDef {
        flag: "irtt",
        kind: ListenerKind::Sessions,
        about: "also answer irtt clients (`irtt client HOST`: round trips, one-way delays, loss; --psk-file's \
                `irtt` line is the --hmac key) on --irtt-port, each client's test granted within --max-duration and \
                --max-rate",
        ports: &[PortDef { flag: "irtt-port", default: crate::peers::irtt::DEFAULT_PORT, about: "irtt's port (UDP)" }],
        bind: crate::peers::irtt::bind_listener,
        bind_hint: "is an irtt server running there?",
    },
    ListenerDef {
        flag: "netperf",
        kind: ListenerKind::Sessions,
        about: "also answer netperf clients (TCP_STREAM, TCP_MAERTS, UDP_STREAM, TCP_RR, UDP_RR, TCP_CRR) on \
                --netperf-port, each test's data on a port of its own",
        ports: &[PortDef {
            flag: "netperf-port",
            default: crate::peers::netperf::DEFAULT_PORT,
            about: "netserver's control port (TCP)",
        }],
        bind: crate::peers::netperf::bind_listener,
        bind_hint: "is a netserver running there?",
    },
    // The slave reads its UDP control requests itself (load and idle requests are answered
    // there); each test request is a session on the one driver (crate::peers::nc_test,
    // `SlaveSession`), opened by the request datagram and run in lock step on the data port.
    ListenerDef {
        flag: "nc-test",
        kind: ListenerKind::Sessions,
        about: "also answer eCos nc_test_master / nc6_test_master (UDP control on --nc-test-port, data on \
                --nc-test-data-port), including SET_LOAD and START_IDLE/STOP_IDLE",
        ports: &[
            PortDef {
                flag: "nc-test-port",
                default: netchar_wire::nc_test::SLAVE_PORT,
                about: "nc_test control port (UDP)",
            },
            PortDef {
                flag: "nc-test-data-port",
                default: netchar_wire::nc_test::DATA_SLAVE_PORT,
                about: "nc_test data port (TCP and UDP); stock masters always ask for 8770",
            },
        ],
        bind: crate::peers::nc_test::bind_listener,
        bind_hint: "is an nc_test_slave running?",
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use netchar_model::Direction;

    #[test]
    fn names_and_aliases_are_unique_and_found() {
        let mut seen = std::collections::HashSet::new();
        for p in PROTOCOLS {
            for n in std::iter::once(p.name).chain(p.aliases.iter().copied()) {
                assert!(seen.insert(n), "{n} twice in the table");
                assert_eq!(Protocol::find(n).map(Protocol::name), Some(p.name));
            }
            assert!(!p.commands.is_empty(), "{} runs with no command", p.name);
        }
        assert!(Protocol::find("auto").is_none(), "auto is a choice, not a protocol");
        assert!(Protocol::native().is_native() && Protocol::native().name() == "netchar");
    }

    #[test]
    fn proto_choice_errors_list_every_protocol() {
        let e = ProtoChoice::parse("sctp").unwrap_err();
        assert_eq!(e, UnknownProtocol { given: "sctp".into() });
        let line = e.to_string();
        assert!(line.starts_with("--proto sctp: one of auto, netchar, "), "{line}");
        for p in PROTOCOLS {
            assert!(line.contains(p.name), "{line}");
        }
        assert_eq!(ProtoChoice::parse("auto"), Ok(ProtoChoice::Auto));
        assert_eq!(ProtoChoice::parse("iperf").unwrap().name(), "iperf2");
    }

    #[test]
    fn an_ip_option_the_far_end_cannot_apply_is_refused_where_it_sends_and_a_caveat_elsewhere() {
        let echo = Protocol::find("echo").unwrap().def();
        let mut up = TestSpec::tcp_default();
        up.ip.tos = Some(0xb8);
        let reach = far_end_options(echo, &up);
        assert!(reach.refusal.is_none());
        assert!(reach.caveats[0].text.starts_with("--tos applies to this end's packets only: echo"), "{reach:?}");
        let mut down = up.clone();
        down.direction = Direction::Down;
        let e = far_end_options(echo, &down).refusal.unwrap();
        assert!(matches!(e, SessionError::OptionRefused { flag: "--tos", .. }), "{e:?}");
        assert!(e.to_string().starts_with("--proto echo: --tos is not carried to the echo server"), "{e}");
        // iperf3 carries the TOS and don't-fragment, not the flow label; iperf2 the TOS of -R only.
        let iperf3 = Protocol::find("iperf3").unwrap().def();
        down.ip.dont_fragment = true;
        assert!(far_end_options(iperf3, &down).refusal.is_none());
        down.ip.flowlabel = Some(5);
        assert!(matches!(
            far_end_options(iperf3, &down).refusal,
            Some(SessionError::OptionRefused { flag: "--flowlabel", .. })
        ));
        let iperf2 = Protocol::find("iperf2").unwrap().def();
        assert!(far_end_options(iperf2, &up).caveats.len() == 1);
        up.direction = Direction::Down;
        assert!(far_end_options(iperf2, &up).caveats.is_empty() && far_end_options(iperf2, &up).refusal.is_none());
        // netchar's own applies them all; only its TCP flow labels are the client's alone.
        let native = Protocol::native().def();
        assert!(far_end_options(native, &TestSpec::tcp_default()).caveats.is_empty());
        let reach = far_end_options(native, &down);
        assert!(reach.refusal.is_none() && reach.caveats.len() == 1, "{reach:?}");
    }

    #[test]
    fn each_recognised_answer_is_one_protocols_and_names_it() {
        for known in [KnownProtocol::Iperf3, KnownProtocol::Echo, KnownProtocol::Chargen] {
            assert_eq!(PROTOCOLS.iter().filter(|p| p.answers_hello == Some(known)).count(), 1, "{known}");
            assert_eq!(Protocol::answering(known).name(), known.name());
        }
    }

    #[test]
    fn payload_options_name_the_flag_they_refuse() {
        let iperf3 = Protocol::find("iperf3").unwrap().def();
        let mut spec = TestSpec::tcp_default();
        spec.verify = true;
        let e = payload_options(iperf3, &spec).unwrap_err();
        assert!(matches!(e, SessionError::OptionRefused { flag: "--verify", .. }), "{e:?}");
        assert!(payload_options(Protocol::find("echo").unwrap().def(), &spec).is_ok());
    }

    #[test]
    fn the_services_are_the_only_listener_without_sessions() {
        // A listener outside the driver must itself admit, log and free what the driver does
        // for every session: a new one should be a session unless it is as stateless as these.
        let stateless: Vec<&str> =
            LISTENERS.iter().filter(|l| l.kind == ListenerKind::StatelessService).map(|l| l.flag).collect();
        assert_eq!(stateless, ["services"]);
    }

    #[test]
    fn listener_flags_and_ports_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for l in LISTENERS {
            assert!(seen.insert(l.flag), "{} twice", l.flag);
            for p in l.ports {
                assert!(seen.insert(p.flag), "{} twice", p.flag);
            }
        }
    }
}
