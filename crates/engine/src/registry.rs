//! The registry's floor: what a protocol is to netchar, with no protocol in it. Every adapter
//! (crate::peers) stands on these types, the table of protocols (crate::protocols) lists the
//! adapters in them, and the drivers (crate::client, crate::server) read the table; nothing
//! here names an adapter or a driver, so no cycle runs through the registry.
//!
//! Here are a protocol's entry ([`ProtocolDef`]: how netchar runs as its client, its
//! [`ClientRole`], what its far end reports and applies), the commands that run one
//! ([`Command`]), the checks of a test against an entry ([`far_end_options`],
//! [`payload_options`]), and the client's settings a session is made from ([`ClientConfig`],
//! [`Family`]). The settings are here, not in crate::client, because the types are one knot:
//! an entry's session constructor is given the settings ([`SessionArgs`]), and the settings
//! name the protocol chosen ([`ProtoChoice`], a [`Protocol`], which is an entry). What needs
//! the table itself (finding a protocol by name, `--proto auto`'s default) is in
//! crate::protocols, beside the table; crate::protocols and crate::client re-export these
//! types, so their paths there stay.

use crate::control::ClientControl;
/// Why a session cannot run a test: the error of every constructor here.
pub use crate::error::SessionError;
use netchar_model::{Caveat, CaveatWhen, Direction, FarEnd, Flow, LocalBinding, TestKind, TestSpec};
use netchar_wire::auth::Credentials;
use netchar_wire::session::Timeouts;
use std::sync::mpsc;
use std::time::{Duration, Instant};

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
pub type SessionCtor = fn(&SessionArgs<'_>) -> Result<Box<dyn ClientControl>, SessionError>;

/// The test a protocol's server runs, from the one asked for.
pub type ShapeSpec = fn(&TestSpec) -> Result<TestSpec, SessionError>;

/// How netchar runs as a protocol's client: every protocol's client is a session (a peer
/// program's sequence of tests, netio's or nc_test's master, is a job over sessions in
/// crate::jobs). An enum of one kind, so that a kind of client that is no session has a
/// place to be named should one come.
#[derive(Clone, Copy)]
pub enum ClientRole {
    /// A sans-IO session behind the client seam (crate::control), driven by crate::client.
    Session(SessionCtor),
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
    /// How its server answers netchar's hello, when it is recognised by that answer
    /// (netchar_wire::hello::recognised_protocol): `--proto auto` then runs the test with it.
    pub answers_hello: Option<netchar_wire::hello::KnownProtocol>,
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

/// What a test's IP options come to with a protocol: the one line refusing it, when its far
/// end sends data in the test but would not apply an option asked for, or the caveats that
/// say which options are this end's alone.
#[derive(Debug, Default)]
pub struct OptionReach {
    /// Why the test cannot run (before any traffic): [`SessionError::OptionRefused`].
    pub refusal: Option<SessionError>,
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
            reach.refusal = Some(SessionError::OptionRefused {
                flag,
                message: format!(
                    "--proto {name}: {flag} is not carried to the {name} server, which sends data in this test; its \
                     packets would go out without it (run the test up only, or without {flag})",
                    name = def.name
                ),
            });
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

/// The first of netchar's own server features the test asks for (`--server-load`, `--idle`, a
/// server CPU in `-A`), which no peer's server has: the flag a peer's adapter refuses.
pub(crate) fn netchar_server_feature(spec: &TestSpec) -> Option<&'static str> {
    if spec.server_load.is_some() {
        Some("--server-load")
    } else if spec.measure_idle {
        Some("--idle")
    } else {
        spec.server_cpu.map(|_| "-A")
    }
}

/// `--payload` and `--verify` against `def`'s far end: netchar's generator is netchar's own,
/// so a peer's server neither writes it nor checks it. A peer that returns what it is sent (the
/// echo service) returns the generator's bytes, and `--verify` compares them with what was
/// sent. Elsewhere `--payload pattern` (what netchar's senders write anyway) is the only one.
pub fn payload_options(def: &ProtocolDef, spec: &TestSpec) -> Result<(), SessionError> {
    if def.name == netchar_model::NATIVE_PROTOCOL || (def.measurement)(spec).0 == FarEnd::Echoes {
        return Ok(());
    }
    let name = def.name;
    if let Some(p) = spec.payload.filter(|p| p.kind != netchar_model::PayloadKind::Pattern) {
        return Err(SessionError::OptionRefused {
            flag: "--payload",
            message: format!(
                "--proto {name}: --payload {} is netchar's own generator, which the {name} server neither sends \
                 nor checks (leave --payload out)",
                p.kind.name()
            ),
        });
    }
    if spec.verify {
        return Err(SessionError::OptionRefused {
            flag: "--verify",
            message: format!(
                "--proto {name}: --verify compares with netchar's generator, which the {name} server does not \
                 send; of the peers only an echo server (--proto echo) returns it to compare"
            ),
        });
    }
    Ok(())
}

impl std::fmt::Debug for ProtocolDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// A protocol of the table (crate::protocols::PROTOCOLS): finding one by its name
/// ([`Protocol::find`]) is beside the table, in crate::protocols.
#[derive(Clone, Copy)]
pub struct Protocol(pub(crate) &'static ProtocolDef);

impl Protocol {
    /// Its entry.
    pub fn def(self) -> &'static ProtocolDef {
        self.0
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        self.0.name
    }

    /// Whether `command` runs it.
    pub fn runs(self, command: Command) -> bool {
        self.0.commands.contains(&command)
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

/// Which address family to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// IPv4 only (`-4`).
    V4,
    /// IPv6 only (`-6`).
    V6,
}

/// Everything the client needs to run one test.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Server host name or address.
    pub host: String,
    /// Server port.
    pub port: u16,
    /// Restrict to one family.
    pub family: Option<Family>,
    /// The test.
    pub spec: TestSpec,
    /// Limit for each TCP connect.
    pub connect_timeout: Duration,
    /// How long to keep retrying a busy server.
    pub busy_wait: Duration,
    /// CPU for this end's workers (`-A`).
    pub client_cpu: Option<usize>,
    /// Free text for the result.
    pub title: Option<String>,
    /// Control protocol timeouts.
    pub timeouts: Timeouts,
    /// The cookie of a running test of ours this one accompanies (latency under load).
    pub companion: Option<[u8; 16]>,
    /// Where to announce this test's cookie once the server admits it.
    pub cookie_tx: Option<mpsc::Sender<[u8; 16]>>,
    /// The user and pre-shared key to authenticate with (`--psk-file`).
    pub auth: Option<Credentials>,
    /// The control protocol the server speaks (`--proto`; crate::protocols).
    pub protocol: ProtoChoice,
    /// iperf2's `-d`/`-r`: the server connects back for its direction.
    pub dial_back: Option<netchar_wire::iperf2::DialBack>,
    /// Where this end's control and data sockets are bound (`-B`, `--bind-dev`); None: where
    /// the kernel chooses.
    pub bind: Option<LocalBinding>,
    /// The far end's nanoseconds per instruction (`--target-ns-per-instruction`; 32 for a
    /// board under QEMU's `-icount shift=5`): a target's busy time per unit of work is then
    /// also given in instructions.
    pub target_ns_per_instruction: Option<f64>,
    /// The TCP write length to run with when `--proto auto` finds a peer protocol's server
    /// and `-l` was not given: the peer tools' own default (netchar's is longer), so that
    /// finding iperf3 runs the test `--proto iperf3` would. None keeps the spec's.
    pub peer_block_bytes: Option<u64>,
}

impl ClientConfig {
    /// A test of `spec` against `host`:`port` over `protocol`, as a job or a test runs it
    /// unless it says otherwise: either address family, 10 s for each connect (a loaded
    /// machine's loopback or a slow board's stack is given time), no waiting for a busy server, no title, the control protocol's default
    /// timeouts, no companion, authentication, dial-back or binding, netchar's own block size.
    pub fn new(host: impl Into<String>, port: u16, spec: TestSpec, protocol: ProtoChoice) -> Self {
        Self {
            host: host.into(),
            port,
            family: None,
            spec,
            connect_timeout: Duration::from_secs(10),
            busy_wait: Duration::ZERO,
            client_cpu: None,
            title: None,
            timeouts: Timeouts::default(),
            companion: None,
            cookie_tx: None,
            auth: None,
            protocol,
            dial_back: None,
            bind: None,
            target_ns_per_instruction: None,
            peer_block_bytes: None,
        }
    }

    /// [`Self::new`] against the server at `server` (its address as the host, its port).
    pub fn to_server(server: std::net::SocketAddr, spec: TestSpec, protocol: ProtoChoice) -> Self {
        Self::new(server.ip().to_string(), server.port(), spec, protocol)
    }
}
