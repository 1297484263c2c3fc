//! What a test's senders write (`--payload`) and what its receivers found of it (`--verify`).
//!
//! The spec names the payload's kind and seed, so both ends build the same generator
//! (netchar_wire::payload); with `verify` every receiver compares each byte it reads against
//! that generator and reports an [`Integrity`] record. The summaries of a flow and of an rr
//! test's two directions are [`Integrity::sum`]s of those records.

use serde::{Deserialize, Serialize};

/// The bytes senders write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PayloadKind {
    /// Every byte 0.
    Zeros,
    /// `0123456789` repeated: netchar's constant pattern (TCP by stream offset, UDP by place
    /// in the datagram).
    #[default]
    Pattern,
    /// Pseudo-random bytes from the seed.
    Random,
    /// stackthru's blocks: `##### BEGIN #####`, pseudo-random bytes 32 to 255 from the seed,
    /// `##### END #####`.
    Stackthru,
}

impl PayloadKind {
    /// As `--payload` names it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Zeros => "zeros",
            Self::Pattern => "pattern",
            Self::Random => "random",
            Self::Stackthru => "stackthru",
        }
    }

    /// Whether every datagram's payload (and every stream's bytes) is the same whatever the
    /// stream and position: a sender writes one buffer over and over.
    pub fn is_constant(self) -> bool {
        matches!(self, Self::Zeros | Self::Pattern)
    }
}

/// `--payload KIND[:SEED]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PayloadSpec {
    /// What the bytes are.
    pub kind: PayloadKind,
    /// The seed of `random` and `stackthru` (the client draws one when none is given, so a
    /// run can be repeated byte for byte); 0 and unused for the constant kinds.
    #[serde(default)]
    pub seed: u64,
}

impl PayloadSpec {
    /// Parses `zeros`, `pattern`, `random`, `random:SEED`, `stackthru`, `stackthru:SEED`; a
    /// random kind without a seed gets `draw_seed()`.
    pub fn parse(s: &str, draw_seed: impl FnOnce() -> u64) -> Result<Self, String> {
        let (name, seed) = match s.trim().split_once(':') {
            Some((n, seed)) => (n, Some(seed)),
            None => (s.trim(), None),
        };
        let kind = match name.to_ascii_lowercase().as_str() {
            "zeros" => PayloadKind::Zeros,
            "pattern" => PayloadKind::Pattern,
            "random" => PayloadKind::Random,
            "stackthru" => PayloadKind::Stackthru,
            _ => return Err("expected zeros, pattern, random[:SEED] or stackthru[:SEED]".into()),
        };
        let seed = match (kind.is_constant(), seed) {
            (true, Some(_)) => return Err(format!("{} takes no seed", kind.name())),
            (true, None) => 0,
            (false, Some(v)) => {
                let v = v.trim();
                let parsed = match v.strip_prefix("0x") {
                    Some(hex) => u64::from_str_radix(hex, 16),
                    None => v.parse(),
                };
                parsed.map_err(|_| format!("seed {v:?}: expected a whole number below 2^64 (decimal or 0x hex)"))?
            }
            (false, None) => draw_seed(),
        };
        Ok(Self { kind, seed })
    }

    /// `random:SEED` as the flag would take it back (the constant kinds: their name).
    pub fn describe(&self) -> String {
        if self.kind.is_constant() {
            self.kind.name().to_string()
        } else {
            format!("{}:{}", self.kind.name(), self.seed)
        }
    }
}

/// What a receiver found when it compared the bytes it read with the sender's generator
/// (`--verify`): one per receiving stream record, and summed per flow (and, for rr tests, per
/// direction of the transactions).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Integrity {
    /// Payload bytes compared (UDP: after each datagram's header, or an rr datagram's sequence
    /// key).
    pub checked_bytes: u64,
    /// Of those, bytes that differed from what the sender's generator made.
    pub corrupted_bytes: u64,
    /// UDP: datagrams compared.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub checked_datagrams: Option<u64>,
    /// UDP: datagrams with at least one byte that differed.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub corrupted_datagrams: Option<u64>,
    /// Summaries: the stream of the first corruption seen (the earliest across streams).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub first_bad_stream: Option<u32>,
    /// The first byte that differed: TCP, its offset in the stream; UDP, its offset in its
    /// datagram (from the start of the UDP payload, netchar's header included).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub first_bad_offset: Option<u64>,
    /// UDP: the number of the datagram that held it (its sequence number; rr: its key).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub first_bad_datagram: Option<u64>,
    /// When it was read, seconds since the receiving end's start.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub first_bad_seconds: Option<f64>,
}

impl Integrity {
    /// True when every byte compared was what the sender wrote.
    pub fn intact(&self) -> bool {
        self.corrupted_bytes == 0 && self.corrupted_datagrams.unwrap_or(0) == 0
    }

    /// The sum of stream records `(id, record)`: counts added, and the first corruption the
    /// earliest of the streams' firsts (by time; the lower stream id on a tie). None when no
    /// record has one.
    pub fn sum<'a>(records: impl IntoIterator<Item = (u32, &'a Integrity)>) -> Option<Self> {
        let mut total: Option<Self> = None;
        let add = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(x), Some(y)) => Some(x + y),
            (x, y) => x.or(y),
        };
        for (id, r) in records {
            let t = total.get_or_insert_with(Self::default);
            t.checked_bytes += r.checked_bytes;
            t.corrupted_bytes += r.corrupted_bytes;
            t.checked_datagrams = add(t.checked_datagrams, r.checked_datagrams);
            t.corrupted_datagrams = add(t.corrupted_datagrams, r.corrupted_datagrams);
            let at = r.first_bad_seconds.unwrap_or(f64::INFINITY);
            let earlier = t.first_bad_seconds.is_none_or(|best| at < best);
            if r.first_bad_offset.is_some() && earlier {
                t.first_bad_stream = Some(id);
                t.first_bad_offset = r.first_bad_offset;
                t.first_bad_datagram = r.first_bad_datagram;
                t.first_bad_seconds = r.first_bad_seconds;
            }
        }
        total
    }
}

/// An rr test's `--verify` figures: what the responders found in the requests and what the
/// requesters found in the answers (against the responder's generator, or for a peer that
/// echoes, against the request).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RrIntegrity {
    /// Requests, as the responders read them (absent when the far end reports nothing).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub requests: Option<Integrity>,
    /// Responses, as the requesters read them.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub responses: Option<Integrity>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_parse_with_and_without_seeds() {
        let draw = || 42;
        assert_eq!(PayloadSpec::parse("zeros", draw).unwrap(), PayloadSpec { kind: PayloadKind::Zeros, seed: 0 });
        assert_eq!(PayloadSpec::parse("random", draw).unwrap().seed, 42);
        assert_eq!(PayloadSpec::parse("random:7", draw).unwrap().seed, 7);
        assert_eq!(
            PayloadSpec::parse("Stackthru:0x10", draw).unwrap(),
            PayloadSpec { kind: PayloadKind::Stackthru, seed: 16 }
        );
        assert!(PayloadSpec::parse("pattern:3", draw).is_err());
        assert!(PayloadSpec::parse("random:-1", draw).is_err());
        assert!(PayloadSpec::parse("noise", draw).is_err());
        assert_eq!(PayloadSpec::parse("random:9", draw).unwrap().describe(), "random:9");
    }

    #[test]
    fn sums_add_counts_and_keep_the_earliest_first_corruption() {
        let clean = Integrity { checked_bytes: 100, ..Integrity::default() };
        let late = Integrity {
            checked_bytes: 100,
            corrupted_bytes: 2,
            first_bad_offset: Some(50),
            first_bad_seconds: Some(2.0),
            ..Integrity::default()
        };
        let early = Integrity {
            checked_bytes: 100,
            corrupted_bytes: 1,
            first_bad_offset: Some(90),
            first_bad_seconds: Some(1.0),
            ..Integrity::default()
        };
        let s = Integrity::sum([(1, &clean), (2, &late), (3, &early)]).unwrap();
        assert_eq!((s.checked_bytes, s.corrupted_bytes), (300, 3));
        assert_eq!((s.first_bad_stream, s.first_bad_offset, s.first_bad_seconds), (Some(3), Some(90), Some(1.0)));
        assert!(!s.intact() && clean.intact());
        assert_eq!(Integrity::sum(std::iter::empty()), None);
        let v = serde_json::to_value(&clean).unwrap();
        assert_eq!(v, serde_json::json!({"checked_bytes": 100, "corrupted_bytes": 0}));
    }
}
