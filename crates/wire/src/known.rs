//! The peers netchar can tell from their first bytes: a server by its first answer to
//! netchar's hello, a client by the first bytes it sends to netchar's server. Below both the
//! hello that recognises them and the crate's error that names them, so neither stands on the
//! other.

/// The servers of protocols netchar speaks that wait for their client without a word, each with
/// the flag that talks to it: what a server that accepts netchar's hello and says nothing may
/// be. Their clients' first bytes are what tells them apart ([`crate::hello::recognised_client`]),
/// and netchar's hello is none of them, so the silence itself is all a client learns.
pub const SILENT_SERVERS: &str = "an iperf2 server (--proto iperf2), netperf's netserver (--proto netperf), a netio \
                                  server (suite netio --proto netio) or a discard service (--proto discard)";

/// A protocol netchar also speaks whose server can be told from its first bytes on a
/// connection that sent netchar's hello ([`crate::hello::recognised_protocol`]), or whose
/// client can be told from the first bytes it sends ([`crate::hello::recognised_client`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KnownProtocol {
    /// iperf3: its server asks for parameters (PARAM_EXCHANGE); its client opens with a
    /// 37-byte cookie.
    Iperf3,
    /// An echo server (RFC 862): it sends netchar's own hello back.
    Echo,
    /// A chargen server (RFC 864): printable characters, unasked.
    Chargen,
    /// iperf 2: its client opens with its settings header (a flags word with the header bits)
    /// or, without one, with its payload of ASCII digits. Its server says nothing first.
    Iperf2,
    /// netperf: its client opens with a 656-byte request (a small request type, then -1). Its
    /// `netserver` says nothing first.
    Netperf,
    /// netio: its client opens with an 8-byte CONTROL (command 1-3, a block size). Its server
    /// says nothing first.
    Netio,
    /// irtt (UDP): every packet starts with its 3-byte magic.
    Irtt,
}

impl KnownProtocol {
    /// Its name as `--proto` spells it (irtt, which netchar serves only, as `netchar server`
    /// spells its listener).
    pub fn name(self) -> &'static str {
        match self {
            Self::Iperf3 => "iperf3",
            Self::Echo => "echo",
            Self::Chargen => "chargen",
            Self::Iperf2 => "iperf2",
            Self::Netperf => "netperf",
            Self::Netio => "netio",
            Self::Irtt => "irtt",
        }
    }

    /// The `netchar server` flag whose listener answers this protocol's clients, and its
    /// default port. Written out rather than taken from the protocols' modules, which stand on
    /// the crate's error and so on this module; crates/cli/tests/wrong_server.rs checks them against
    /// `netchar server`'s listeners.
    pub fn listener(self) -> (&'static str, u16) {
        match self {
            Self::Iperf3 => ("--iperf3", 5201),
            Self::Echo => ("--services", 7),
            Self::Chargen => ("--services", 19),
            Self::Iperf2 => ("--iperf2", 5001),
            Self::Netperf => ("--netperf", 12865),
            Self::Netio => ("--netio", 18767),
            Self::Irtt => ("--irtt", 2112),
        }
    }

    /// What this protocol's client is called in a server's log.
    pub fn client_name(self) -> &'static str {
        match self {
            Self::Iperf3 => "an iperf3 client",
            Self::Echo => "an echo client",
            Self::Chargen => "a chargen client",
            Self::Iperf2 => "an iperf2 client",
            Self::Netperf => "a netperf client",
            Self::Netio => "a netio client",
            Self::Irtt => "an irtt client",
        }
    }
}

impl std::fmt::Display for KnownProtocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
