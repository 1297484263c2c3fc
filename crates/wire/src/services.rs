//! The simple services, sans-IO: echo (RFC 862), discard (RFC 863) and chargen (RFC 864), over
//! TCP and UDP.
//!
//! None has a control message: the protocol is the data itself. What this module holds is what
//! both roles must agree on or check:
//! - [`Service`]: the three services, their well-known ports and names;
//! - [`ChargenSource`]: RFC 864's suggested pattern (the 95 printable ASCII characters, 72 per
//!   line plus CR LF, each line starting one character later), for the server's stream;
//! - [`ChargenCheck`]: what a client makes of a chargen stream: bytes, whether every byte is
//!   printable or a line end, and whether the stream is RFC 864's pattern exactly (lwIP's
//!   contrib chargen differs: it is counted, not rejected);
//! - [`udp_reply_len`]: how long a server's UDP answer may be, so that a netchar server is
//!   never an amplifier (an answer is never longer than the datagram that caused it).
//!
//! UDP echo tests carry netchar's own datagram header ([`crate::datagram`]) in the payload: an
//! echo server returns it unchanged, so the client's receiver counts loss, reordering and
//! duplicates by sequence number exactly, and the send stamp gives the round trip.

use crate::datagram::{DatagramFormat, NativeFormat, Received};

/// RFC 864's line: 72 characters, then CR LF.
pub const CHARGEN_LINE: usize = 72;
/// The printable ASCII characters the pattern cycles through (32..=126).
pub const CHARGEN_CHARS: usize = 95;
/// The largest UDP chargen answer RFC 864 allows (0 to 512 characters).
pub const CHARGEN_UDP_MAX: usize = 512;

/// One of the three services.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Service {
    /// RFC 862: returns what it receives.
    Echo,
    /// RFC 863: throws away what it receives.
    Discard,
    /// RFC 864: sends characters regardless of input.
    Chargen,
}

impl Service {
    /// Every service.
    pub const ALL: [Service; 3] = [Service::Echo, Service::Discard, Service::Chargen];

    /// The well-known port (7, 9, 19).
    pub fn default_port(self) -> u16 {
        match self {
            Self::Echo => 7,
            Self::Discard => 9,
            Self::Chargen => 19,
        }
    }

    /// The name on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Self::Echo => "echo",
            Self::Discard => "discard",
            Self::Chargen => "chargen",
        }
    }

    /// Parses a name as [`Self::name`] prints it.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|x| x.name() == s)
    }
}

/// The character at `position` of line `line` of RFC 864's pattern (position 72 and 73 are CR
/// and LF).
fn chargen_byte(line: usize, position: usize) -> u8 {
    match position {
        CHARGEN_LINE => b'\r',
        p if p > CHARGEN_LINE => b'\n',
        p => 32 + ((line + p) % CHARGEN_CHARS) as u8,
    }
}

/// Bytes after which RFC 864's pattern repeats: 95 lines of 72 characters and CR LF.
pub const CHARGEN_CYCLE: usize = CHARGEN_CHARS * (CHARGEN_LINE + 2);

/// RFC 864's pattern as an endless stream, resumable at any byte.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChargenSource {
    /// The line being written, modulo the 95-line cycle.
    line: usize,
    /// The next byte's position in its line (0..74).
    position: usize,
}

impl ChargenSource {
    /// A source starting at the first line.
    pub fn new() -> Self {
        Self::default()
    }

    /// Fills `buf` with the next bytes of the pattern.
    pub fn fill(&mut self, buf: &mut [u8]) {
        for b in buf {
            *b = chargen_byte(self.line, self.position);
            self.position += 1;
            if self.position == CHARGEN_LINE + 2 {
                self.position = 0;
                self.line = (self.line + 1) % CHARGEN_CHARS;
            }
        }
    }

    /// A UDP answer of `len` bytes: whole lines from the current one (the last cut short),
    /// as the pattern runs on across datagrams.
    pub fn datagram(&mut self, len: usize) -> Vec<u8> {
        let mut out = vec![0u8; len];
        self.fill(&mut out);
        out
    }
}

/// What a client makes of a chargen stream, fed in pieces of any size.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChargenCheck {
    /// Bytes seen.
    pub bytes: u64,
    /// Bytes that are neither printable ASCII nor CR or LF.
    pub unprintable: u64,
    /// Line ends (LF) seen.
    pub lines: u64,
    /// The RFC 864 state once synchronised on the first full line: (line, position). `None`
    /// until then, or for good once the stream left the pattern.
    rfc: Option<(usize, usize)>,
    /// True while still looking for the first line end to synchronise on.
    syncing: bool,
    /// Bytes of the first line seen so far, to find where in the cycle the stream started.
    first: Vec<u8>,
    /// Set once the stream departed from RFC 864's pattern.
    departed: bool,
}

impl ChargenCheck {
    /// A check before any byte.
    pub fn new() -> Self {
        Self { syncing: true, ..Self::default() }
    }

    /// Feeds received bytes.
    pub fn feed(&mut self, data: &[u8]) {
        for &b in data {
            self.bytes += 1;
            if !(b == b'\r' || b == b'\n' || (32..=126).contains(&b)) {
                self.unprintable += 1;
            }
            if b == b'\n' {
                self.lines += 1;
            }
            if self.departed {
                continue;
            }
            if self.syncing {
                // Everything up to the first LF may be a partial line; from then on the
                // stream must be whole RFC lines, each one character later.
                if b == b'\n' {
                    self.syncing = false;
                    self.first.clear();
                } else if self.first.len() < CHARGEN_LINE + 2 {
                    self.first.push(b);
                }
                continue;
            }
            match self.rfc {
                None => {
                    // The first byte of the first whole line fixes the line number.
                    if (32..=126).contains(&b) {
                        self.rfc = Some(((b - 32) as usize, 1));
                    } else {
                        self.departed = true;
                    }
                }
                Some((line, position)) => {
                    if chargen_byte(line, position) != b {
                        self.departed = true;
                        continue;
                    }
                    let next = position + 1;
                    self.rfc =
                        Some(if next == CHARGEN_LINE + 2 { ((line + 1) % CHARGEN_CHARS, 0) } else { (line, next) });
                }
            }
        }
    }

    /// True when every whole line seen so far is RFC 864's suggested pattern (false before
    /// the first whole line).
    pub fn is_rfc864(&self) -> bool {
        self.rfc.is_some() && !self.departed
    }
}

/// The UDP echo payload: netchar's own header ([`crate::datagram`]) as the sender writes it;
/// what comes back is credited to the stream `offset` ids above the one that sent it (the
/// stream that reads the echoes on the sender's socket), so the receiver settles loss,
/// reordering and duplicates against the sender's exact count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EchoFormat {
    /// How far the echo stream's id is above its sender's.
    pub offset: u32,
}

impl DatagramFormat for EchoFormat {
    fn header_len(&self) -> usize {
        NativeFormat.header_len()
    }
    fn emit(&self, buf: &mut [u8], stream_id: u32, sequence: u64, sent_ns: u64) {
        NativeFormat.emit(buf, stream_id, sequence, sent_ns);
    }
    fn stamp(&self, buf: &mut [u8], sequence: u64, sent_ns: u64) {
        NativeFormat.stamp(buf, sequence, sent_ns);
    }
    fn classify(&self, buf: &[u8]) -> Received {
        match NativeFormat.classify(buf) {
            Received::Data { stream_id, sequence, sent_ns } => match stream_id.checked_add(self.offset) {
                Some(stream_id) => Received::Data { stream_id, sequence, sent_ns },
                None => Received::Foreign,
            },
            other => other,
        }
    }
}

/// The length of a netchar server's answer to a UDP datagram of `request` bytes: echo returns
/// exactly what came; chargen answers with `wanted` bytes (the RFC's random 0–512) but never
/// more than the request, so a spoofed source cannot be sent more than it was sent; discard
/// answers nothing.
pub fn udp_reply_len(service: Service, request: usize, wanted: usize) -> Option<usize> {
    match service {
        Service::Echo => Some(request),
        Service::Discard => None,
        Service::Chargen => Some(wanted.min(CHARGEN_UDP_MAX).min(request)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_pattern_is_rfc_864s() {
        let mut s = ChargenSource::new();
        let mut two = vec![0u8; 148];
        s.fill(&mut two);
        assert_eq!(&two[..4], b" !\"#");
        assert_eq!(&two[70..74], b"fg\r\n");
        assert_eq!(&two[74..77], b"!\"#");
        assert_eq!(&two[144..148], b"gh\r\n");
    }

    #[test]
    fn the_cycle_is_95_lines() {
        let mut s = ChargenSource::new();
        let mut all = vec![0u8; 74 * 96];
        s.fill(&mut all);
        assert_eq!(&all[..74], &all[74 * 95..]);
        assert_eq!(CHARGEN_CYCLE, 74 * 95);
    }

    #[test]
    fn a_check_recognises_the_pattern_from_any_start() {
        for skip in [0usize, 1, 73, 74, 500, 7000] {
            let mut s = ChargenSource::new();
            let mut all = vec![0u8; skip + 1000];
            s.fill(&mut all);
            let mut c = ChargenCheck::new();
            for piece in all[skip..].chunks(7) {
                c.feed(piece);
            }
            assert!(c.is_rfc864(), "skip {skip}");
            assert_eq!(c.unprintable, 0);
            assert_eq!(c.bytes, 1000);
        }
    }

    #[test]
    fn lwips_variant_is_counted_but_not_rfc() {
        // lwIP contrib: 59 characters from '!' then "\n\r".
        let mut data = Vec::new();
        for l in 0..5u8 {
            data.extend((0..59).map(|i| 0x21 + (l + i) % 94));
            data.extend(b"\n\r");
        }
        let mut c = ChargenCheck::new();
        c.feed(&data);
        assert!(!c.is_rfc864());
        assert_eq!(c.unprintable, 0);
        assert_eq!(c.lines, 5);
    }

    #[test]
    fn no_answer_is_larger_than_its_request() {
        assert_eq!(udp_reply_len(Service::Echo, 1000, 0), Some(1000));
        assert_eq!(udp_reply_len(Service::Chargen, 10, 400), Some(10));
        assert_eq!(udp_reply_len(Service::Chargen, 9000, 9000), Some(512));
        assert_eq!(udp_reply_len(Service::Discard, 10, 10), None);
        for s in Service::ALL {
            assert_eq!(Service::parse(s.name()), Some(s));
        }
    }

    #[test]
    fn echoes_are_credited_to_the_echo_stream() {
        let f = EchoFormat { offset: 2 };
        let mut d = vec![0u8; 100];
        f.emit(&mut d, 1, 7, 9);
        assert_eq!(f.classify(&d), Received::Data { stream_id: 3, sequence: 7, sent_ns: 9 });
        assert_eq!(f.classify(b"short"), Received::Foreign);
        f.emit(&mut d, u32::MAX, 7, 9);
        assert_eq!(f.classify(&d), Received::Foreign);
    }

    proptest! {
        #[test]
        fn echo_classify_never_panics(b in proptest::collection::vec(any::<u8>(), 0..80), off in any::<u32>()) {
            let _ = EchoFormat { offset: off }.classify(&b);
        }

        #[test]
        fn any_bytes_feed_without_panic(chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..20)) {
            let mut c = ChargenCheck::new();
            let mut n = 0u64;
            for ch in &chunks {
                c.feed(ch);
                n += ch.len() as u64;
            }
            prop_assert_eq!(c.bytes, n);
            prop_assert!(c.first.len() <= CHARGEN_LINE + 2);
        }

        #[test]
        fn the_source_resumes_anywhere(cuts in proptest::collection::vec(0usize..200, 1..20)) {
            let total: usize = cuts.iter().sum();
            let mut whole = vec![0u8; total];
            ChargenSource::new().fill(&mut whole);
            let mut s = ChargenSource::new();
            let mut pieces = Vec::new();
            for c in cuts {
                pieces.extend(s.datagram(c));
            }
            prop_assert_eq!(pieces, whole);
        }

        #[test]
        fn replies_never_amplify(req in 0usize..70000, wanted in 0usize..70000) {
            for s in Service::ALL {
                if let Some(n) = udp_reply_len(s, req, wanted) {
                    prop_assert!(n <= req);
                }
            }
        }
    }
}
