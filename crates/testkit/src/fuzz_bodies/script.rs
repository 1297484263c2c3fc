//! Session scripts: what the peer sends, how time passes, what the driver does; the well-formed
//! messages a script can ask for by name; and a whole test as a script.

use netchar_model::{CpuUsage, HostInfo, StreamTotal, TestSpec};
use netchar_wire::auth::{self, Credentials, Exchange};
use netchar_wire::codec::encode_frame;
use netchar_wire::hello::Hello;
use netchar_wire::message::{cookie_to_hex, AuthProof, ClientMessage, ServerMessage};
use netchar_wire::session::Timeouts;
use std::time::{Duration, Instant};

/// The user, key and nonces of the scripts' authenticated runs.
pub(super) const USER: &str = "lab";
pub(super) const SECRET: &[u8] = b"0123456789abcdef";
pub(super) const SERVER_NONCE: [u8; 16] = [0x5e; 16];
pub(super) const CLIENT_NONCE: [u8; 16] = [0xc1; 16];

/// Output a script step may add besides what answers input (a driver's message, a keepalive).
pub(super) const STEP_OUTPUT: usize = 4096;
/// Output per byte of input: an answer may quote the input, escaped (a `Rejected` reason names
/// the user as `{:?}`, and Debug-escaping then JSON-escaping a DEL takes 7 bytes).
pub(super) const OUTPUT_PER_INPUT_BYTE: usize = 8;

/// How the test's bytes reach the session.
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Debug, Clone)]
pub enum Delivery {
    /// In one read.
    Whole,
    /// In two reads, cut after this many bytes (modulo the length).
    Split(u16),
    /// In one read, with the byte at this offset (modulo the length) replaced.
    Corrupt {
        /// Offset.
        at: u16,
        /// The new byte.
        byte: u8,
    },
}

/// A request's authentication, as the client presents it.
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Debug, Clone)]
pub enum ProofPick {
    /// No proof.
    Missing,
    /// The right proof for the script's user and key.
    Valid,
    /// A proof made with another key.
    WrongKey,
    /// A user the server does not know.
    UnknownUser,
    /// Whatever the fuzzer writes.
    Garbage {
        /// User.
        user: String,
        /// Client nonce.
        nonce: String,
        /// Proof.
        proof: String,
    },
}

/// The spec of a request.
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Debug, Clone)]
pub enum SpecPick {
    /// `netchar tcp` defaults.
    Tcp,
    /// `netchar udp` defaults with a 1200-byte payload.
    Udp,
    /// `netchar rr` defaults.
    Rr,
    /// TCP both ways with this many streams per way.
    Bidir(u8),
    /// Any JSON in place of the spec.
    Json(String),
}

/// A message from the client, built well-formed so scripts reach the later states.
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Debug, Clone)]
pub enum ClientPick {
    /// `request`.
    Request {
        /// The test.
        spec: SpecPick,
        /// Authentication.
        proof: ProofPick,
        /// A companion cookie.
        companion: Option<[u8; 16]>,
    },
    /// `start`.
    Start,
    /// `sender_done` with this many totals (modulo 16).
    SenderDone(u8),
    /// `stop`.
    Stop,
    /// `keepalive`.
    Keepalive,
    /// Any payload in a well-formed frame.
    Payload(Vec<u8>),
}

/// What the server accepts with, as the client sees it.
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Debug, Clone)]
pub enum ServerProofPick {
    /// No server proof.
    Missing,
    /// The right proof for the script's key and nonces.
    Valid,
    /// A proof made with another key.
    WrongKey,
}

/// A message from the server (or its hello), built well-formed.
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Debug, Clone)]
pub enum ServerPick {
    /// The server's hello with the script's nonce.
    Hello {
        /// The flag "authentication required".
        auth_required: bool,
    },
    /// A 40-byte hello with the magic and these version, role and flags bytes.
    OddHello {
        /// Version.
        version: u16,
        /// Role byte.
        role: u8,
        /// Flags byte.
        flags: u8,
    },
    /// `accepted`.
    Accepted {
        /// A valid cookie, or "not hex".
        cookie_ok: bool,
        /// The server's proof.
        proof: ServerProofPick,
        /// A crr listener.
        data_port: Option<u16>,
    },
    /// `busy`.
    Busy {
        /// With a reason.
        reason: bool,
    },
    /// `rejected`.
    Rejected,
    /// `ready`.
    Ready,
    /// `sender_done` with this many totals (modulo 16).
    SenderDone(u8),
    /// `results`.
    Results {
        /// With an error.
        error: bool,
    },
    /// `keepalive`.
    Keepalive,
    /// `error`.
    Error,
    /// Any payload in a well-formed frame.
    Payload(Vec<u8>),
}

/// The hello a server session starts from.
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Debug, Clone)]
pub enum HelloPick {
    /// A control hello of our version.
    Control,
    /// A control hello of another version.
    Version(u16),
    /// A data hello.
    Data,
}

/// One step of a server session's script.
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Debug, Clone)]
pub enum ServerStep {
    /// Raw bytes from the client.
    Bytes(Vec<u8>),
    /// A message from the client.
    Send(ClientPick, Delivery),
    /// Time passes by this many ms, then the timer fires.
    Wait(u32),
    /// Time passes by this many ms, with no timer call.
    Advance(u32),
    /// Time jumps to the session's deadline and the timer fires.
    WaitForDeadline,
    /// The driver admits the test.
    Admit(Option<u16>),
    /// The driver refuses it for now, with or without a reason.
    Busy(bool),
    /// The driver refuses it for good.
    Reject,
    /// Every data connection arrived.
    StreamsConnected,
    /// The server's senders finished (totals modulo 16).
    SendersDone(u8),
    /// The driver sends the results, with or without an error.
    Finish(bool),
    /// The driver ends the session with an error.
    Error,
    /// The client closed the connection.
    Eof,
}

/// A server session's run: its configuration and its script.
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Debug, Clone)]
pub struct ServerInput {
    /// The server requires authentication (one user, the script's).
    pub auth: bool,
    /// The client's hello.
    pub hello: HelloPick,
    /// Hello, phase, silence and keepalive timeouts in ms (at least 1); defaults if absent.
    pub timeouts: Option<[u16; 4]>,
    /// The script.
    pub steps: Vec<ServerStep>,
}

/// One step of a client session's script.
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Debug, Clone)]
pub enum ClientStep {
    /// Raw bytes from the server.
    Bytes(Vec<u8>),
    /// A message (or hello) from the server.
    Send(ServerPick, Delivery),
    /// Time passes by this many ms, then the timer fires.
    Wait(u32),
    /// Time passes by this many ms, with no timer call.
    Advance(u32),
    /// Time jumps to the session's deadline and the timer fires.
    WaitForDeadline,
    /// The client's senders finished (totals modulo 16).
    SendersDone(u8),
    /// The client stops the test (Ctrl-C).
    Stop,
    /// The server closed the connection.
    Eof,
}

/// A client session's run: its configuration and its script.
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Debug, Clone)]
pub struct ClientInput {
    /// The client authenticates (with the script's user and key).
    pub auth: bool,
    /// Hello, phase, silence and keepalive timeouts in ms (at least 1); defaults if absent.
    pub timeouts: Option<[u16; 4]>,
    /// The script.
    pub steps: Vec<ClientStep>,
}

pub(super) fn timeouts_of(ms: Option<[u16; 4]>) -> Timeouts {
    let Some(ms) = ms else { return Timeouts::default() };
    let d = |i: usize| Duration::from_millis(u64::from(ms[i].max(1)));
    Timeouts { hello: d(0), phase: d(1), silence: d(2), keepalive: d(3) }
}

pub(super) fn longest(t: &Timeouts) -> Duration {
    t.hello.max(t.phase).max(t.silence).max(t.keepalive)
}

pub(super) fn later(now: Instant, ms: u32) -> Instant {
    now.checked_add(Duration::from_millis(u64::from(ms))).unwrap_or(now)
}

/// The chunks `bytes` arrive in.
pub(super) fn deliver(mut bytes: Vec<u8>, how: &Delivery) -> Vec<Vec<u8>> {
    match *how {
        Delivery::Whole => vec![bytes],
        Delivery::Split(at) => {
            let tail = bytes.split_off(usize::from(at) % (bytes.len() + 1));
            vec![bytes, tail]
        }
        Delivery::Corrupt { at, byte } => {
            if !bytes.is_empty() {
                let i = usize::from(at) % bytes.len();
                bytes[i] = byte;
            }
            vec![bytes]
        }
    }
}

pub(super) fn framed(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_frame(payload, &mut out);
    out
}

pub(super) fn totals(n: u8) -> Vec<StreamTotal> {
    (1..=u32::from(n % 16)).map(|id| StreamTotal { id, bytes: u64::from(id) << 20, packets: u64::from(id) }).collect()
}

pub(super) fn credentials() -> Credentials {
    Credentials { user: USER.into(), secret: SECRET.to_vec() }
}

pub(super) fn exchange() -> Exchange<'static> {
    Exchange { server_nonce: &SERVER_NONCE, client_nonce: &CLIENT_NONCE, user: USER }
}

pub(super) fn spec_json(pick: &SpecPick) -> String {
    let spec = match pick {
        SpecPick::Tcp => TestSpec::tcp_default(),
        SpecPick::Udp => TestSpec { block_bytes: 1200, ..TestSpec::udp_default() },
        SpecPick::Rr => TestSpec::rr_default(),
        SpecPick::Bidir(n) => {
            TestSpec { direction: netchar_model::Direction::Bidir, streams: u32::from(*n), ..TestSpec::tcp_default() }
        }
        SpecPick::Json(s) => return s.clone(),
    };
    serde_json::to_string(&spec).expect("specs serialise")
}

pub(super) fn proof_of(pick: &ProofPick) -> Option<AuthProof> {
    let client_proof = |user: &str, key: &[u8]| {
        let ex = Exchange { user, ..exchange() };
        AuthProof { user: user.into(), nonce: auth::to_hex(&CLIENT_NONCE), proof: auth::to_hex(&ex.client_proof(key)) }
    };
    match pick {
        ProofPick::Missing => None,
        ProofPick::Valid => Some(client_proof(USER, SECRET)),
        ProofPick::WrongKey => Some(client_proof(USER, b"not the key of the lab user")),
        ProofPick::UnknownUser => Some(client_proof("nobody", SECRET)),
        ProofPick::Garbage { user, nonce, proof } => {
            Some(AuthProof { user: user.clone(), nonce: nonce.clone(), proof: proof.clone() })
        }
    }
}

/// The frame a client would send for `pick`.
pub fn client_bytes(pick: &ClientPick) -> Vec<u8> {
    let payload = match pick {
        ClientPick::Request { spec, proof, companion } => {
            // Built as JSON text so that `SpecPick::Json` can put anything in the spec's place.
            let mut request = format!(r#"{{"type":"request","client_version":"fuzz","spec":{}"#, spec_json(spec));
            if let Some(c) = companion {
                request += &format!(r#","companion":"{}""#, cookie_to_hex(c));
            }
            if let Some(p) = proof_of(proof) {
                request += &format!(r#","auth":{}"#, serde_json::to_string(&p).expect("proofs serialise"));
            }
            (request + "}").into_bytes()
        }
        ClientPick::Start => ClientMessage::Start.encode(),
        ClientPick::SenderDone(n) => ClientMessage::SenderDone { totals: totals(*n) }.encode(),
        ClientPick::Stop => ClientMessage::Stop { reason: "fuzz".into() }.encode(),
        ClientPick::Keepalive => ClientMessage::Keepalive.encode(),
        ClientPick::Payload(p) => p.clone(),
    };
    framed(&payload)
}

/// The bytes a server would send for `pick`.
pub fn server_bytes(pick: &ServerPick) -> Vec<u8> {
    let message = match pick {
        ServerPick::Hello { auth_required } => {
            return Hello::server_with_nonce(SERVER_NONCE, *auth_required).encode().to_vec();
        }
        ServerPick::OddHello { version, role, flags } => {
            let mut b = Hello::server_with_nonce(SERVER_NONCE, false).encode();
            b[8..10].copy_from_slice(&version.to_be_bytes());
            b[10] = *role;
            b[11] = *flags;
            return b.to_vec();
        }
        ServerPick::Accepted { cookie_ok, proof, data_port } => ServerMessage::Accepted {
            cookie: if *cookie_ok { cookie_to_hex(&[0xc0; 16]) } else { "not hex".into() },
            concurrent_tests: 1,
            host: HostInfo::default(),
            server_version: "fuzz".into(),
            data_port: *data_port,
            server_proof: match proof {
                ServerProofPick::Missing => None,
                ServerProofPick::Valid => Some(auth::to_hex(&exchange().server_proof(SECRET))),
                ServerProofPick::WrongKey => Some(auth::to_hex(&exchange().server_proof(b"another key entirely"))),
            },
        },
        ServerPick::Busy { reason } => {
            ServerMessage::Busy { running: 1, max: 1, reason: reason.then(|| "--max-per-source".into()) }
        }
        ServerPick::Rejected => ServerMessage::Rejected { reason: "fuzz".into() },
        ServerPick::Ready => ServerMessage::Ready,
        ServerPick::SenderDone(n) => ServerMessage::SenderDone { totals: totals(*n) },
        ServerPick::Results { error } => ServerMessage::Results {
            streams: Vec::new(),
            cpu: CpuUsage::default(),
            target: None,
            evidence: None,
            identity: None,
            error: error.then(|| "fuzz".into()),
        },
        ServerPick::Keepalive => ServerMessage::Keepalive,
        ServerPick::Error => ServerMessage::Error { message: "fuzz".into() },
        ServerPick::Payload(p) => return framed(p),
    };
    framed(&message.encode())
}

/// A whole test as the client sends it, and the driver's calls, for a server session.
pub fn server_script(auth: bool) -> ServerInput {
    use ServerStep::*;
    let proof = if auth { ProofPick::Valid } else { ProofPick::Missing };
    let request = ClientPick::Request { spec: SpecPick::Tcp, proof, companion: None };
    ServerInput {
        auth,
        hello: HelloPick::Control,
        timeouts: None,
        steps: vec![
            Send(request, Delivery::Split(7)),
            Admit(None),
            StreamsConnected,
            Send(ClientPick::Start, Delivery::Whole),
            Wait(1500),
            Send(ClientPick::Keepalive, Delivery::Whole),
            Send(ClientPick::SenderDone(2), Delivery::Whole),
            SendersDone(2),
            Finish(false),
            Eof,
        ],
    }
}

/// A whole test as the server sends it, and the driver's calls, for a client session.
pub fn client_script(auth: bool) -> ClientInput {
    use ClientStep::*;
    let proof = if auth { ServerProofPick::Valid } else { ServerProofPick::Missing };
    ClientInput {
        auth,
        timeouts: None,
        steps: vec![
            Send(ServerPick::Hello { auth_required: auth }, Delivery::Split(20)),
            Send(ServerPick::Accepted { cookie_ok: true, proof, data_port: None }, Delivery::Whole),
            Send(ServerPick::Ready, Delivery::Whole),
            Wait(1500),
            SendersDone(1),
            Send(ServerPick::SenderDone(1), Delivery::Whole),
            Send(ServerPick::Results { error: false }, Delivery::Split(3)),
            Eof,
        ],
    }
}
