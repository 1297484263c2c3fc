//! The peers netchar can tell from their first answer to its hello. Below both the hello that
//! recognises them and the crate's error that names them, so neither stands on the other.

/// A protocol netchar also speaks whose server can be told from its first bytes on a
/// connection that sent netchar's hello ([`crate::hello::recognised_protocol`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KnownProtocol {
    /// An iperf3 server: it asks for parameters (PARAM_EXCHANGE).
    Iperf3,
    /// An echo server (RFC 862): it sends netchar's own hello back.
    Echo,
    /// A chargen server (RFC 864): printable characters, unasked.
    Chargen,
}

impl KnownProtocol {
    /// Its name as `--proto` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Iperf3 => "iperf3",
            Self::Echo => "echo",
            Self::Chargen => "chargen",
        }
    }
}

impl std::fmt::Display for KnownProtocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
