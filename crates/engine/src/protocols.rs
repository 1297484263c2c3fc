//! The one table of the protocols netchar speaks.
//!
//! Everything the rest of the program knows about a protocol is a field of its entry here:
//! its names, its servers' default port, the commands that run it, how netchar runs as its
//! client (a session behind the client seam, crate::control, or its own runner), what its far
//! end reports and the caveats of its figures (recorded on every result, so that no reporter
//! matches a protocol by name), and what `--proto auto` says when a silent server sits on its
//! port. The servers netchar runs for other tools' clients are the [`LISTENERS`] table: the
//! flags that turn each on, its ports, and how it binds.
//!
//! Adding a protocol: its wire module (netchar_wire), its adapter (crate::peers), and an entry
//! in each table that applies.

use crate::client::ClientConfig;
use crate::control::{ClientControl, NativeClient};
use crate::peers::PeerListener;
use netchar_model::{Caveat, CaveatWhen, Direction, FarEnd, Flow, TestKind, TestSpec};
use std::net::IpAddr;
use std::time::Instant;

/// The client commands (`netchar tcp`, ..., `netchar suite netio`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// `netchar tcp`.
    Tcp,
    /// `netchar udp`.
    Udp,
    /// `netchar rr`.
    Rr,
    /// `netchar crr`.
    Crr,
    /// `netchar echo`.
    Echo,
    /// `netchar suite netio`.
    SuiteNetio,
    /// `netchar suite ecos`.
    SuiteEcos,
}

impl Command {
    /// As the command line spells it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Tcp => "tcp",
            Self::Udp => "udp",
            Self::Rr => "rr",
            Self::Crr => "crr",
            Self::Echo => "echo",
            Self::SuiteNetio => "suite netio",
            Self::SuiteEcos => "suite ecos",
        }
    }
}

/// What a client session constructor gets.
pub struct SessionArgs<'a> {
    /// Now.
    pub now: Instant,
    /// The test, as the protocol's server will run it (after [`ProtocolDef::shape`]).
    pub spec: &'a TestSpec,
    /// The client's settings.
    pub cfg: &'a ClientConfig,
}

/// Makes a protocol's client session, or says why it cannot run the test (before any traffic).
pub type SessionCtor = fn(&SessionArgs<'_>) -> Result<Box<dyn ClientControl>, String>;

/// The test a protocol's server runs, from the one asked for.
pub type ShapeSpec = fn(&TestSpec) -> Result<TestSpec, String>;

/// How netchar runs as a protocol's client.
#[derive(Clone, Copy)]
pub enum ClientRole {
    /// A sans-IO session behind the client seam (crate::control), driven by crate::client.
    Session(SessionCtor),
    /// nc_test's master (crate::peers::nc_test::run_master): its control is UDP and its data
    /// lock-step, so it has its own runner; `v6` runs nc6_test_master's sequence.
    NcTestMaster {
        /// nc6_test_master's sequence rather than nc_test_master's.
        v6: bool,
    },
    /// netio's client (crate::peers::netio::run_client): its block-size sequence.
    NetioClient,
}

/// One protocol.
pub struct ProtocolDef {
    /// Its `--proto` name, and `test.protocol` in results.
    pub name: &'static str,
    /// Other names `--proto` takes for it.
    pub aliases: &'static [&'static str],
    /// What it is, for `--proto`'s help and errors.
    pub about: &'static str,
    /// The port its servers listen on: the client's `-p` when none is given.
    pub default_port: u16,
    /// The commands that run it.
    pub commands: &'static [Command],
    /// How netchar runs as its client.
    pub client: ClientRole,
    /// Whether netchar's `--psk-file` authentication applies.
    pub authenticates: bool,
    /// Whether iperf2's `-d`/`-r` (the server dialing back) apply.
    pub dial_back: bool,
    /// The UDP payload a client sends when `-l` is not given; none: the largest that fits a
    /// 1500-byte frame (1472 B over IPv4, 1452 B over IPv6).
    pub udp_payload: Option<u64>,
    /// The test its server runs, from the one asked for (a service decides the direction).
    pub shape: Option<ShapeSpec>,
    /// `--proto auto` against a server on this protocol's port that says nothing to netchar's
    /// hello: what to do (`{host}` is the server).
    pub silent_hint: Option<&'static str>,
    /// How its far end takes part in a test's figures, and the caveats of its figures.
    pub measurement: fn(&TestSpec) -> (FarEnd, Vec<Caveat>),
    /// Which of a test's IP options its far end applies to its own sockets, its requests
    /// carrying them ([`far_end_options`] checks a test against it).
    pub far_end_applies: fn(&TestSpec) -> FarEndApplies,
}

/// Which of a test's IP options (`--tos`, `--flowlabel`, `--df`, `--no-udp-checksum`) a
/// protocol carries to its far end, which then sets them on its own data sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FarEndApplies {
    /// The TOS byte / traffic class (iperf3's `TOS`, iperf2's header, netperf's socket_tos).
    pub tos: bool,
    /// The IPv6 flow label.
    pub flowlabel: bool,
    /// Don't-fragment.
    pub dont_fragment: bool,
    /// UDP checksums of zero.
    pub no_udp_checksum: bool,
}

impl FarEndApplies {
    /// A far end that is told none of them.
    pub const NONE: Self = Self { tos: false, flowlabel: false, dont_fragment: false, no_udp_checksum: false };
    /// netchar's own: the spec carries them all.
    pub const ALL: Self = Self { tos: true, flowlabel: true, dont_fragment: true, no_udp_checksum: true };
    /// The TOS byte only.
    pub const TOS: Self = Self { tos: true, ..Self::NONE };
}

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

/// What a test's IP options come to with a protocol: the one line refusing it, when its far
/// end sends data in the test but would not apply an option asked for, or the caveats that
/// say which options are this end's alone.
#[derive(Debug, Default)]
pub struct OptionReach {
    /// Why the test cannot run (before any traffic).
    pub refusal: Option<String>,
    /// Sentences for the result: what the far end's packets carry not.
    pub caveats: Vec<Caveat>,
}

/// Checks the test's IP options against what `def`'s far end applies. An option it does not
/// apply is refused when the far end sends the test's data (its packets would go out without
/// it), and otherwise applies to this end's packets only, which a caveat says.
pub fn far_end_options(def: &ProtocolDef, spec: &TestSpec) -> OptionReach {
    let far_sends = spec.kind == TestKind::Rr || spec.direction != Direction::Up;
    let a = (def.far_end_applies)(spec);
    let no_checksum = spec.udp.as_ref().is_some_and(|u| u.no_checksum);
    let asked = [
        (spec.ip.tos.is_some() && !a.tos, "--tos"),
        (spec.ip.flowlabel.is_some() && !a.flowlabel, "--flowlabel"),
        (spec.ip.dont_fragment && !a.dont_fragment, "--df"),
        (no_checksum && !a.no_udp_checksum, "--no-udp-checksum"),
    ];
    let mut reach = OptionReach::default();
    for (_, flag) in asked.iter().filter(|(missing, _)| *missing) {
        if far_sends {
            reach.refusal = Some(format!(
                "--proto {name}: {flag} is not carried to the {name} server, which sends data in this test; its \
                 packets would go out without it (run the test up only, or without {flag})",
                name = def.name
            ));
            return reach;
        }
        reach.caveats.push(Caveat::always(
            None,
            format!(
                "{flag} applies to this end's packets only: {} does not carry it to the far end, whose packets \
                 (acknowledgements, reports) go out without it",
                def.name
            ),
        ));
    }
    if a.flowlabel && spec.ip.flowlabel.is_some() && !spec.uses_udp() {
        reach.caveats.push(Caveat::always(
            None,
            "--flowlabel labels the client's packets; the server's TCP packets carry the label its kernel chose \
             (Linux takes a TCP connection's label only from the side that connects)",
        ));
    }
    reach
}

/// `--payload` and `--verify` against `def`'s far end: netchar's generator is netchar's own,
/// so a peer's server neither writes it nor checks it. A peer that returns what it is sent (the
/// echo service) returns the generator's bytes, and `--verify` compares them with what was
/// sent. Elsewhere `--payload pattern` (what netchar's senders write anyway) is the only one.
pub fn payload_options(def: &ProtocolDef, spec: &TestSpec) -> Result<(), String> {
    if def.name == netchar_model::NATIVE_PROTOCOL || (def.measurement)(spec).0 == FarEnd::Echoes {
        return Ok(());
    }
    let name = def.name;
    if let Some(p) = spec.payload.filter(|p| p.kind != netchar_model::PayloadKind::Pattern) {
        return Err(format!(
            "--proto {name}: --payload {} is netchar's own generator, which the {name} server neither sends nor \
             checks (leave --payload out)",
            p.kind.name()
        ));
    }
    if spec.verify {
        return Err(format!(
            "--proto {name}: --verify compares with netchar's generator, which the {name} server does not send; \
             of the peers only an echo server (--proto echo) returns it to compare"
        ));
    }
    Ok(())
}

impl std::fmt::Debug for ProtocolDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

fn native_session(a: &SessionArgs<'_>) -> Result<Box<dyn ClientControl>, String> {
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
        measurement: crate::peers::services::discard_measurement,
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
        measurement: crate::peers::netperf::measurement,
        far_end_applies: applies_tos,
    },
    ProtocolDef {
        name: "netio",
        aliases: &[],
        about: "a netio server (`netio -s`, Keil MDK's or lwIP's)",
        default_port: netchar_wire::netio::TCP_PORT,
        commands: &[Command::SuiteNetio],
        client: ClientRole::NetioClient,
        authenticates: false,
        dial_back: false,
        udp_payload: None,
        shape: None,
        silent_hint: Some("run `netchar suite netio {host} --proto netio`"),
        measurement: reports,
        far_end_applies: applies_none,
    },
    ProtocolDef {
        name: "nc-test",
        aliases: &["nc_test"],
        about: "an eCos nc_test_slave",
        default_port: netchar_wire::nc_test::SLAVE_PORT,
        commands: &[Command::Tcp, Command::Udp, Command::Echo, Command::SuiteEcos],
        client: ClientRole::NcTestMaster { v6: false },
        authenticates: false,
        dial_back: false,
        udp_payload: None,
        shape: None,
        silent_hint: None,
        measurement: reports,
        far_end_applies: applies_none,
    },
    ProtocolDef {
        name: "nc6-test",
        aliases: &["nc6_test"],
        about: "an eCos nc6_test_slave (nc6_test_master's sequence)",
        default_port: netchar_wire::nc_test::SLAVE_PORT,
        commands: &[Command::SuiteEcos],
        client: ClientRole::NcTestMaster { v6: true },
        authenticates: false,
        dial_back: false,
        udp_payload: None,
        shape: None,
        silent_hint: None,
        measurement: reports,
        far_end_applies: applies_none,
    },
];

/// A protocol of [`PROTOCOLS`].
#[derive(Clone, Copy)]
pub struct Protocol(&'static ProtocolDef);

impl Protocol {
    /// netchar's own.
    pub fn native() -> Self {
        Self(&PROTOCOLS[0])
    }

    /// The protocol named `name` (or one of its aliases).
    pub fn find(name: &str) -> Option<Self> {
        PROTOCOLS.iter().find(|p| p.name == name || p.aliases.contains(&name)).map(Self)
    }

    /// Its entry.
    pub fn def(self) -> &'static ProtocolDef {
        self.0
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        self.0.name
    }

    /// True for netchar's own.
    pub fn is_native(self) -> bool {
        std::ptr::eq(self.0, &PROTOCOLS[0])
    }

    /// Whether `command` runs it.
    pub fn runs(self, command: Command) -> bool {
        self.0.commands.contains(&command)
    }

    /// The protocols that `command` runs, as a list for an error or help text.
    pub fn names_for(command: Command) -> String {
        PROTOCOLS.iter().filter(|p| p.commands.contains(&command)).map(|p| p.name).collect::<Vec<_>>().join(", ")
    }
}

impl PartialEq for Protocol {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

impl Eq for Protocol {}

impl std::fmt::Debug for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.name)
    }
}

/// What `--proto` asked for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ProtoChoice {
    /// netchar's own, unless the server answers as a peer netchar also speaks: then that
    /// peer's, where it can run the test (the default).
    #[default]
    Auto,
    /// This one only.
    Only(Protocol),
}

impl ProtoChoice {
    /// Parses `--proto`: `auto` or a protocol's name; the error lists every name.
    pub fn parse(s: &str) -> Result<Self, String> {
        if s == "auto" {
            return Ok(Self::Auto);
        }
        Protocol::find(s).map(Self::Only).ok_or_else(|| format!("--proto {s}: one of {}", Self::all_names()))
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

/// A server netchar runs beside its own, for another tool's clients.
pub struct ListenerDef {
    /// The `netchar server` flag (`--iperf3`) and `--config` key that turn it on.
    pub flag: &'static str,
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
    ListenerDef {
        flag: "services",
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
    ListenerDef {
        flag: "netio",
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
        about: "also answer iperf3 clients (TCP and UDP, -R, --bidir, -P) on --iperf3-port",
        ports: &[PortDef {
            flag: "iperf3-port",
            default: crate::peers::iperf3::DEFAULT_PORT,
            about: "port of the iperf3 server (TCP and UDP)",
        }],
        bind: crate::peers::iperf3::bind_listener,
        bind_hint: "is an iperf3 server running there?",
    },
    ListenerDef {
        flag: "iperf2",
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
        flag: "netperf",
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
    ListenerDef {
        flag: "nc-test",
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

/// The caveats every protocol whose far end stops counting early shares: what its receiver
/// counted against what was sent, said with the figures.
pub(crate) fn short_count_caveats(who: &str, flow: Option<Flow>) -> Vec<Caveat> {
    vec![
        Caveat {
            flow,
            when: CaveatWhen::ReceiverShort,
            text: format!(
                "{{sent}} written, {{counted}} counted by {who}: it stops counting at TEST_END, so the {{missing}} \
                 bytes in flight then are in no figure of its"
            ),
        },
        Caveat {
            flow,
            when: CaveatWhen::DatagramsShort,
            text: format!(
                "{{sent}} datagrams sent, {{counted}} received or lost by {who}'s count: it stops counting at \
                 TEST_END, so the {{missing}} still queued for it then are in no figure of its"
            ),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

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
        for p in PROTOCOLS {
            assert!(e.contains(p.name), "{e}");
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
        assert!(e.starts_with("--proto echo: --tos is not carried to the echo server"), "{e}");
        // iperf3 carries the TOS and don't-fragment, not the flow label; iperf2 the TOS of -R only.
        let iperf3 = Protocol::find("iperf3").unwrap().def();
        down.ip.dont_fragment = true;
        assert!(far_end_options(iperf3, &down).refusal.is_none());
        down.ip.flowlabel = Some(5);
        assert!(far_end_options(iperf3, &down).refusal.unwrap().contains("--flowlabel"));
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
