//! Pre-shared-key authentication of the control connection, and the tags that bind data
//! streams and UDP setup datagrams to an authenticated test. Pure functions: the caller
//! brings the randomness (nonces, the server's token key).
//!
//! The exchange (docs/protocol.md, "Authentication"):
//!
//! ```text
//! S→C hello(server): nonce_s (16 random bytes), flag "authentication required"
//! C→S request{..., auth: {user, nonce_c, proof_c}}   proof_c = HMAC(key, "netchar-client" | nonce_s | nonce_c | user)
//! S→C accepted{..., server_proof}                   proof_s = HMAC(key, "netchar-server" | nonce_s | nonce_c | user)
//! data hello / UDP confirm: tag = HMAC(session, "netchar-data" | cookie | stream id)[..8]
//!                           session = HMAC(key, "netchar-session" | nonce_s | nonce_c | user)
//! ```
//!
//! The key never crosses the wire; the server's fresh nonce makes a recorded proof useless on
//! another connection; the server's proof tells the client it reached a holder of the key; and
//! a data connection whose tag does not verify is refused, so a cookie seen on the wire is not
//! enough to join a test. The control connection is not encrypted: this authenticates who may
//! run tests, it does not hide what they run.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::collections::HashMap;
use std::net::SocketAddr;

type HmacSha256 = Hmac<Sha256>;

/// The shortest secret accepted: 16 bytes (128 bits), e.g. `openssl rand -hex 32`.
pub const MIN_SECRET_LEN: usize = 16;

/// One user's name and pre-shared secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The user name the server looks the key up by.
    pub user: String,
    /// The secret, as bytes.
    pub secret: Vec<u8>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the secret, not even in a debug dump.
        f.debug_struct("Credentials").field("user", &self.user).finish_non_exhaustive()
    }
}

/// The keys a server accepts, by user.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct KeyTable {
    users: HashMap<String, Vec<u8>>,
}

impl std::fmt::Debug for KeyTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut users: Vec<&String> = self.users.keys().collect();
        users.sort();
        f.debug_struct("KeyTable").field("users", &users).finish()
    }
}

/// A key file that cannot be used; the message names the line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct KeyFileError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong with it.
    pub message: String,
}

/// Parses a key file: one `USER:SECRET` per line; blank lines and lines starting with `#` are
/// skipped. The secret is everything after the first colon, taken as bytes, at least
/// [`MIN_SECRET_LEN`] long.
pub fn parse_key_file(text: &str) -> Result<Vec<Credentials>, KeyFileError> {
    let mut out: Vec<Credentials> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let err = |message: String| KeyFileError { line: i + 1, message };
        let (user, secret) = line.split_once(':').ok_or_else(|| err("expected USER:SECRET".into()))?;
        let user = user.trim();
        if user.is_empty() || user.len() > 64 || !user.chars().all(|c| c.is_ascii_alphanumeric() || "-_.@".contains(c))
        {
            return Err(err(format!("user name {user:?}: 1-64 characters of letters, digits, - _ . @")));
        }
        if secret.len() < MIN_SECRET_LEN {
            return Err(err(format!(
                "the secret of {user} has {} bytes, at least {MIN_SECRET_LEN} are needed (make one with `openssl rand -hex 32`)",
                secret.len()
            )));
        }
        if out.iter().any(|c| c.user == user) {
            return Err(err(format!("user {user} appears twice")));
        }
        out.push(Credentials { user: user.to_string(), secret: secret.as_bytes().to_vec() });
    }
    if out.is_empty() {
        return Err(KeyFileError { line: 0, message: "no USER:SECRET line in the file".into() });
    }
    Ok(out)
}

impl KeyTable {
    /// A table of these users' keys.
    pub fn new(creds: Vec<Credentials>) -> Self {
        Self { users: creds.into_iter().map(|c| (c.user, c.secret)).collect() }
    }

    /// The key of `user`.
    pub fn key(&self, user: &str) -> Option<&[u8]> {
        self.users.get(user).map(Vec::as_slice)
    }

    /// Users in the table.
    pub fn len(&self) -> usize {
        self.users.len()
    }

    /// True when no user is in the table.
    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }
}

fn mac(key: &[u8], label: &[u8], parts: &[&[u8]]) -> HmacSha256 {
    let mut m = HmacSha256::new_from_slice(key).expect("HMAC takes keys of any length");
    m.update(label);
    for p in parts {
        // Length-prefixed, so that no two different part lists feed the same bytes.
        m.update(&(p.len() as u32).to_be_bytes());
        m.update(p);
    }
    m
}

fn digest(key: &[u8], label: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    mac(key, label, parts).finalize().into_bytes().into()
}

/// The inputs both proofs are computed over.
#[derive(Debug, Clone, Copy)]
pub struct Exchange<'a> {
    /// The server's nonce, from its hello.
    pub server_nonce: &'a [u8; 16],
    /// The client's nonce, from its request.
    pub client_nonce: &'a [u8; 16],
    /// The user name.
    pub user: &'a str,
}

impl Exchange<'_> {
    fn parts(&self) -> [&[u8]; 3] {
        [self.server_nonce, self.client_nonce, self.user.as_bytes()]
    }

    /// The client's proof that it holds `key`.
    pub fn client_proof(&self, key: &[u8]) -> [u8; 32] {
        digest(key, b"netchar-client", &self.parts())
    }

    /// The server's proof that it holds `key`.
    pub fn server_proof(&self, key: &[u8]) -> [u8; 32] {
        digest(key, b"netchar-server", &self.parts())
    }

    /// The key that tags this test's data streams.
    pub fn session_key(&self, key: &[u8]) -> [u8; 32] {
        digest(key, b"netchar-session", &self.parts())
    }

    /// Checks a client proof in constant time.
    pub fn verify_client(&self, key: &[u8], proof: &[u8]) -> bool {
        mac(key, b"netchar-client", &self.parts()).verify_slice(proof).is_ok()
    }

    /// Checks a server proof in constant time.
    pub fn verify_server(&self, key: &[u8], proof: &[u8]) -> bool {
        mac(key, b"netchar-server", &self.parts()).verify_slice(proof).is_ok()
    }
}

/// The 8-byte tag of one data stream of an authenticated test.
pub fn data_tag(session_key: &[u8; 32], cookie: &[u8; 16], stream_id: u32) -> [u8; 8] {
    let d = digest(session_key, b"netchar-data", &[cookie, &stream_id.to_be_bytes()]);
    d[..8].try_into().expect("8 of 32 bytes")
}

/// Checks a data stream's tag in constant time.
pub fn verify_data_tag(session_key: &[u8; 32], cookie: &[u8; 16], stream_id: u32, tag: &[u8]) -> bool {
    mac(session_key, b"netchar-data", &[cookie, &stream_id.to_be_bytes()]).verify_truncated_left(tag).is_ok()
}

/// The return-routability token the server sends to the address a UDP setup datagram claims
/// (docs/protocol.md, "UDP setup"): only a host that receives at that address can echo it.
/// Computed from a key only the server knows, so the server keeps no state per claim.
pub fn routability_token(server_key: &[u8; 32], cookie: &[u8; 16], stream_id: u32, addr: &SocketAddr) -> [u8; 16] {
    let ip = match addr.ip() {
        std::net::IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        std::net::IpAddr::V6(v6) => v6.octets(),
    };
    let d =
        digest(server_key, b"netchar-udp-route", &[cookie, &stream_id.to_be_bytes(), &ip, &addr.port().to_be_bytes()]);
    d[..16].try_into().expect("16 of 32 bytes")
}

/// Checks a routability token in constant time.
pub fn verify_routability_token(
    server_key: &[u8; 32],
    cookie: &[u8; 16],
    stream_id: u32,
    addr: &SocketAddr,
    token: &[u8],
) -> bool {
    let want = routability_token(server_key, cookie, stream_id, addr);
    token.len() == want.len() && token.iter().zip(want.iter()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

/// Lower-case hex of any bytes.
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses hex of exactly `N` bytes.
pub fn from_hex<const N: usize>(hex: &str) -> Option<[u8; N]> {
    // from_str_radix alone would take "+7" as a byte.
    if hex.len() != 2 * N || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut out = [0u8; N];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_sha256_matches_rfc_4231_case_2() {
        // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
        let mut m = HmacSha256::new_from_slice(b"Jefe").unwrap();
        m.update(b"what do ya want for nothing?");
        assert_eq!(
            to_hex(&m.finalize().into_bytes()),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn proofs_verify_only_with_the_same_key_and_nonces() {
        let (s, c) = ([1u8; 16], [2u8; 16]);
        let ex = Exchange { server_nonce: &s, client_nonce: &c, user: "lab" };
        let key = b"0123456789abcdef0123";
        let p = ex.client_proof(key);
        assert!(ex.verify_client(key, &p));
        assert!(!ex.verify_client(b"another key of enough length", &p));
        let other_nonce = [3u8; 16];
        let replay = Exchange { server_nonce: &other_nonce, ..ex };
        assert!(!replay.verify_client(key, &p), "a proof is bound to the server's nonce");
        assert!(!ex.verify_server(key, &p), "client and server proofs differ");
        assert!(ex.verify_server(key, &ex.server_proof(key)));
    }

    #[test]
    fn data_tags_bind_cookie_and_stream() {
        let sk = [7u8; 32];
        let t = data_tag(&sk, &[1; 16], 3);
        assert!(verify_data_tag(&sk, &[1; 16], 3, &t));
        assert!(!verify_data_tag(&sk, &[1; 16], 4, &t));
        assert!(!verify_data_tag(&sk, &[2; 16], 3, &t));
        assert!(!verify_data_tag(&[8; 32], &[1; 16], 3, &t));
    }

    #[test]
    fn tokens_bind_the_claimed_address() {
        let k = [9u8; 32];
        let a: SocketAddr = "192.0.2.1:4000".parse().unwrap();
        let b: SocketAddr = "192.0.2.2:4000".parse().unwrap();
        let mapped: SocketAddr = "[::ffff:192.0.2.1]:4000".parse().unwrap();
        let t = routability_token(&k, &[1; 16], 1, &a);
        assert!(verify_routability_token(&k, &[1; 16], 1, &a, &t));
        assert!(verify_routability_token(&k, &[1; 16], 1, &mapped, &t), "v4 and v4-mapped are one address");
        assert!(!verify_routability_token(&k, &[1; 16], 1, &b, &t));
        assert!(!verify_routability_token(&k, &[1; 16], 2, &a, &t));
        assert!(!verify_routability_token(&k, &[1; 16], 1, &a, &t[..8]));
    }

    #[test]
    fn key_files_parse_and_name_bad_lines() {
        let creds = parse_key_file("# lab keys\n\nalice:0123456789abcdef\nbob: secret with spaces!\n").unwrap();
        assert_eq!(creds.len(), 2);
        assert_eq!(creds[1].secret, b" secret with spaces!");
        assert_eq!(parse_key_file("alice:short").unwrap_err().line, 1);
        assert!(parse_key_file("x\n").unwrap_err().message.contains("USER:SECRET"));
        assert!(parse_key_file("a:0123456789abcdef\na:0123456789abcdef").unwrap_err().message.contains("twice"));
        assert!(parse_key_file("# nothing\n").is_err());
        assert!(!format!("{:?}", creds[0]).contains("0123"), "debug output hides the secret");
    }

    #[test]
    fn hex_round_trips() {
        assert_eq!(from_hex::<2>("0aff"), Some([10, 255]));
        assert_eq!(from_hex::<2>("0af"), None);
        assert_eq!(from_hex::<1>("zz"), None);
        assert_eq!(from_hex::<1>("é"), None);
    }
}
