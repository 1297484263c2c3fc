//! The bytes netchar's senders write (`--payload`) and the check its receivers make of them
//! (`--verify`), both from the spec's kind and seed alone.
//!
//! Every byte is a function of (seed, stream, position): over TCP its offset in the stream
//! ([`StreamPayload`]), over UDP its datagram's number and its place in that datagram
//! ([`DatagramPayload`]). A receiver checks any byte from its position alone, without state
//! of the sender's or of the bytes before it.
//!
//! Nothing is generated per byte once a test runs. Each generator lays out one buffer at the
//! start, a *ring*: one period of the payload followed by as many bytes again as the longest
//! slice a caller takes, so the bytes from any position are one contiguous slice. A TCP sender
//! writes slices of it (no copy; for `zeros` and `pattern` the ring is one block and a few
//! bytes, the same buffer written over and over), a UDP sender of `random` copies one slice
//! behind each datagram's header, and a receiver compares what it read with a slice (memcmp;
//! bytes are counted one by one only when that finds a difference).
//!
//! | kind | period | byte |
//! |---|---|---|
//! | `zeros` | 1 | 0 |
//! | `pattern` | 10 | `0123456789`: TCP by stream offset, UDP by place in the datagram |
//! | `random` | [`RING_BYTES`] | a splitmix64 stream of the seed, entered at a point drawn from the seed and the stream (TCP) or the stream and the datagram (UDP) |
//! | `stackthru` | [`RING_BYTES`] rounded up to whole blocks | stackthru's blocks: `##### BEGIN #####`, random bytes 32–255, `##### END #####`; TCP: a block every `-l` bytes of the stream, UDP: every datagram is a block |
//!
//! stackthru fills its write buffer with random values 32 to 255 between those two markers
//! ("as an eyecatcher (for sniffing)"); a block shorter than both markers keeps what of the
//! BEGIN marker fits.

use netchar_model::{PayloadKind, PayloadSpec};

/// Bytes of a random payload's period: large enough that a misplaced segment or datagram is
/// caught unless it moved by a whole period, small enough to stay in the cache of a core.
pub const RING_BYTES: usize = 256 * 1024;
/// stackthru's marker at the start of each block.
pub const STACKTHRU_BEGIN: &[u8] = b"##### BEGIN #####";
/// stackthru's marker at the end of each block.
pub const STACKTHRU_END: &[u8] = b"##### END #####";
const DIGITS: &[u8; 10] = b"0123456789";

/// What a comparison found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Mismatch {
    /// Bytes that differed.
    pub bytes: u64,
    /// The index (in the compared data) of the first that differed.
    pub first: Option<usize>,
}

impl Mismatch {
    fn add(&mut self, expected: &[u8], got: &[u8], at: usize) {
        if expected == got {
            return;
        }
        for (i, (e, g)) in expected.iter().zip(got).enumerate() {
            if e != g {
                self.bytes += 1;
                self.first.get_or_insert(at + i);
            }
        }
    }
}

/// splitmix64's output function: a bijective mix of 64 bits.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Fills `out` with the splitmix64 stream of `seed`.
fn fill_random(out: &mut [u8], seed: u64) {
    let mut state = seed;
    for chunk in out.chunks_mut(8) {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        chunk.copy_from_slice(&mix(state).to_le_bytes()[..chunk.len()]);
    }
}

/// Maps random bytes onto 32..=255, stackthru's range (multiply-shift: no division per byte).
fn to_stackthru_range(bytes: &mut [u8]) {
    for b in bytes {
        *b = 32 + ((u16::from(*b) * 224) >> 8) as u8;
    }
}

/// One period of `kind`, laid out `len` bytes long (the period repeated).
fn lay_out(spec: PayloadSpec, period: usize, len: usize, stackthru_block: Option<usize>) -> Vec<u8> {
    let mut ring = vec![0u8; len];
    match spec.kind {
        PayloadKind::Zeros => {}
        PayloadKind::Pattern => ring.iter_mut().enumerate().for_each(|(i, b)| *b = DIGITS[i % 10]),
        PayloadKind::Random | PayloadKind::Stackthru => {
            fill_random(&mut ring[..period], spec.seed);
            if spec.kind == PayloadKind::Stackthru {
                to_stackthru_range(&mut ring[..period]);
                if let Some(block) = stackthru_block {
                    for b in ring[..period].chunks_mut(block) {
                        mark_block(b);
                    }
                }
            }
            for i in period..len {
                ring[i] = ring[i - period];
            }
        }
    }
    ring
}

/// The markers of one stackthru block, as they overlay its random bytes: (offset, marker).
fn markers(len: usize) -> [(usize, &'static [u8]); 2] {
    let begin = &STACKTHRU_BEGIN[..STACKTHRU_BEGIN.len().min(len)];
    if len >= STACKTHRU_BEGIN.len() + STACKTHRU_END.len() {
        [(0, begin), (len - STACKTHRU_END.len(), STACKTHRU_END)]
    } else {
        [(0, begin), (len, &[])]
    }
}

fn mark_block(block: &mut [u8]) {
    for (at, m) in markers(block.len()) {
        block[at..at + m.len()].copy_from_slice(m);
    }
}

/// A TCP stream's payload: byte `o` of stream `key` is `ring[(base(key) + o) % period]`.
#[derive(Debug, Clone)]
pub struct StreamPayload {
    ring: Vec<u8>,
    period: usize,
    /// stackthru: streams enter the ring at whole blocks, so markers fall on block boundaries.
    align: usize,
    seed: u64,
    constant: bool,
    max_len: usize,
}

impl StreamPayload {
    /// The payload of `spec` for slices of up to `max_len` bytes; `block` is `-l`, stackthru's
    /// block.
    pub fn new(spec: PayloadSpec, block: usize, max_len: usize) -> Self {
        let block = block.max(1);
        let (period, align) = match spec.kind {
            PayloadKind::Zeros => (1, 1),
            PayloadKind::Pattern => (10, 10),
            PayloadKind::Random => (RING_BYTES, 1),
            PayloadKind::Stackthru => (RING_BYTES.div_ceil(block) * block, block),
        };
        let max_len = max_len.max(1);
        let block_marks = (spec.kind == PayloadKind::Stackthru).then_some(block);
        Self {
            ring: lay_out(spec, period, period + max_len, block_marks),
            period,
            align,
            seed: spec.seed,
            constant: spec.kind.is_constant(),
            max_len,
        }
    }

    /// The longest slice [`Self::slice`] gives.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Where stream `key` enters the ring.
    fn base(&self, key: u32) -> usize {
        if self.constant {
            return 0;
        }
        let slots = (self.period / self.align) as u64;
        (mix(self.seed ^ mix(u64::from(key) << 32 | 0x5eed)) % slots) as usize * self.align
    }

    fn start(&self, key: u32, offset: u64) -> usize {
        ((self.base(key) as u64 + offset % self.period as u64) % self.period as u64) as usize
    }

    /// The `len` bytes of stream `key` from `offset` (`len` at most [`Self::max_len`]).
    pub fn slice(&self, key: u32, offset: u64, len: usize) -> &[u8] {
        let at = self.start(key, offset);
        &self.ring[at..at + len.min(self.max_len)]
    }

    /// Compares `data`, read from stream `key` at `offset`, with what the sender wrote.
    pub fn check(&self, key: u32, offset: u64, data: &[u8]) -> Mismatch {
        let mut m = Mismatch::default();
        let mut done = 0;
        for chunk in data.chunks(self.max_len) {
            m.add(self.slice(key, offset + done as u64, chunk.len()), chunk, done);
            done += chunk.len();
        }
        m
    }
}

/// A UDP datagram's payload after its header: byte `j` (counted from the end of the header)
/// of datagram `number` of stream `key`. For `random` the ring is entered at a point drawn
/// from (seed, key, number); `stackthru` overlays its markers on each datagram. The header's
/// length is the caller's (netchar's 24 bytes, or an rr request's sequence key): `pattern`
/// continues its digits from the header's end, so a datagram is `0123456789...` by place.
#[derive(Debug, Clone)]
pub struct DatagramPayload {
    ring: Vec<u8>,
    kind: PayloadKind,
    seed: u64,
    max_len: usize,
}

impl DatagramPayload {
    /// The payload of `spec` for datagrams of up to `max_len` bytes, header included.
    pub fn new(spec: PayloadSpec, max_len: usize) -> Self {
        let period = match spec.kind {
            PayloadKind::Zeros => 1,
            PayloadKind::Pattern => 10,
            PayloadKind::Random | PayloadKind::Stackthru => RING_BYTES,
        };
        let max_len = max_len.max(1);
        Self { ring: lay_out(spec, period, period + max_len, None), kind: spec.kind, seed: spec.seed, max_len }
    }

    /// Whether every datagram's payload is the same: a sender lays its buffer out once.
    pub fn is_constant(&self) -> bool {
        self.kind.is_constant()
    }

    fn start(&self, key: u32, number: u64, header_len: usize) -> usize {
        match self.kind {
            PayloadKind::Zeros => 0,
            PayloadKind::Pattern => header_len % 10,
            PayloadKind::Random | PayloadKind::Stackthru => {
                (mix(self.seed ^ mix(u64::from(key) << 40 ^ number)) % RING_BYTES as u64) as usize
            }
        }
    }

    /// Writes the payload of datagram `number` of stream `key` into `datagram` behind its
    /// first `header_len` bytes, which it leaves alone (as it does bytes beyond `max_len`).
    pub fn fill(&self, key: u32, number: u64, datagram: &mut [u8], header_len: usize) {
        let end = datagram.len().min(self.max_len);
        let Some(out) = datagram.get_mut(header_len..end) else { return };
        let at = self.start(key, number, header_len);
        out.copy_from_slice(&self.ring[at..at + out.len()]);
        if self.kind == PayloadKind::Stackthru {
            mark_block(out);
        }
    }

    /// Compares the payload of `datagram` (header included), number `number` of stream `key`,
    /// with what the sender wrote; `first` is the offset in the datagram.
    pub fn check(&self, key: u32, number: u64, datagram: &[u8], header_len: usize) -> Mismatch {
        let mut m = Mismatch::default();
        if datagram.len() <= header_len {
            return m;
        }
        // Bytes beyond the longest datagram of the test were never written.
        let (data, excess) = datagram.split_at(datagram.len().min(self.max_len).max(header_len));
        let data = &data[header_len..];
        let at = self.start(key, number, header_len);
        let expected = &self.ring[at..at + data.len()];
        if self.kind == PayloadKind::Stackthru {
            // The markers overlay the ring: each part is compared with its own.
            let [(_, begin), (end_at, end)] = markers(data.len());
            let middle = begin.len()..end_at;
            m.add(begin, &data[..begin.len()], header_len);
            m.add(&expected[middle.clone()], &data[middle.clone()], header_len + middle.start);
            m.add(end, &data[end_at..], header_len + end_at);
        } else {
            m.add(expected, data, header_len);
        }
        if !excess.is_empty() {
            m.bytes += excess.len() as u64;
            m.first.get_or_insert(self.max_len.max(header_len));
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(kind: PayloadKind, seed: u64) -> PayloadSpec {
        PayloadSpec { kind, seed }
    }

    const KINDS: [PayloadKind; 4] =
        [PayloadKind::Zeros, PayloadKind::Pattern, PayloadKind::Random, PayloadKind::Stackthru];

    /// The bytes from any offset, taken in pieces of any length, are the stream's: what a
    /// sender whose writes are cut anywhere sends, a receiver that reads from anywhere checks.
    #[test]
    fn a_streams_bytes_depend_only_on_their_offset() {
        for kind in KINDS {
            let p = StreamPayload::new(spec(kind, 7), 1448, 4096);
            let whole: Vec<u8> = p.slice(3, 0, 4096).iter().chain(p.slice(3, 4096, 4096)).copied().collect();
            let mut pieced = Vec::new();
            let mut off = 0u64;
            for len in [1usize, 999, 10, 4096, 3, 2083].iter().cycle().take(7) {
                let len = (*len).min(8192 - off as usize);
                pieced.extend_from_slice(p.slice(3, off, len));
                off += len as u64;
            }
            assert_eq!(&pieced[..], &whole[..off as usize], "{kind:?}");
            assert_eq!(p.check(3, 100, &whole[100..5000]), Mismatch::default(), "{kind:?}");
            // Far offsets wrap the period and stay the stream's.
            let far = (1u64 << 40) + 12345;
            let again = StreamPayload::new(spec(kind, 7), 1448, 4096);
            assert_eq!(p.slice(3, far, 2000), again.slice(3, far, 2000), "{kind:?} is deterministic");
        }
    }

    #[test]
    fn the_kinds_are_what_they_say() {
        let z = StreamPayload::new(spec(PayloadKind::Zeros, 0), 100, 100);
        assert!(z.slice(1, 77, 100).iter().all(|&b| b == 0));
        let p = StreamPayload::new(spec(PayloadKind::Pattern, 0), 100, 100);
        assert_eq!(p.slice(9, 13, 12), b"345678901234");
        // Random: different streams and seeds differ, and the bytes look random (each value
        // about equally often over the period).
        let r = StreamPayload::new(spec(PayloadKind::Random, 1), 1000, 1000);
        assert_ne!(r.slice(1, 0, 64), r.slice(2, 0, 64));
        assert_ne!(r.slice(1, 0, 64), StreamPayload::new(spec(PayloadKind::Random, 2), 1000, 1000).slice(1, 0, 64));
        let mut counts = [0u32; 256];
        for off in (0..RING_BYTES as u64).step_by(1000) {
            for &b in r.slice(1, off, 1000) {
                counts[b as usize] += 1;
            }
        }
        let mean = counts.iter().sum::<u32>() / 256;
        assert!(counts.iter().all(|&c| c > mean * 8 / 10 && c < mean * 12 / 10), "{counts:?}");
        // stackthru: a block every 1448 bytes of the stream, BEGIN ... END around 32..=255.
        let s = StreamPayload::new(spec(PayloadKind::Stackthru, 5), 1448, 1448 * 3);
        let blocks = s.slice(4, 1448 * 1000, 1448 * 3);
        for b in blocks.chunks(1448) {
            assert!(b.starts_with(STACKTHRU_BEGIN) && b.ends_with(STACKTHRU_END));
            assert!(b[17..1448 - 15].iter().all(|&c| c >= 32));
        }
    }

    #[test]
    fn a_check_counts_each_changed_byte_and_finds_the_first() {
        for kind in KINDS {
            let p = StreamPayload::new(spec(kind, 11), 1000, 1000);
            let mut data = p.slice(2, 5000, 1000).to_vec();
            data[400] ^= 0x20;
            data[401] ^= 0x01;
            data[999] ^= 0x80;
            assert_eq!(p.check(2, 5000, &data), Mismatch { bytes: 3, first: Some(400) }, "{kind:?}");
            // Read from elsewhere in the stream (a misplaced segment), the bytes are wrong
            // unless the payload is constant there.
            let wrong = p.check(2, 5001, p.slice(2, 5000, 1000));
            assert_eq!(wrong.bytes > 0, kind != PayloadKind::Zeros, "{kind:?}");
        }
    }

    #[test]
    fn a_datagrams_payload_depends_only_on_its_stream_and_number() {
        for kind in KINDS {
            let p = DatagramPayload::new(spec(kind, 3), 1472);
            let (mut a, mut b) = (vec![0u8; 1472], vec![0u8; 1472]);
            p.fill(1, 1_000_000, &mut a, 24);
            DatagramPayload::new(spec(kind, 3), 1500).fill(1, 1_000_000, &mut b, 24);
            assert_eq!(a, b, "{kind:?}");
            assert!(a[..24].iter().all(|&x| x == 0), "{kind:?}: the header is the caller's");
            assert_eq!(p.check(1, 1_000_000, &a, 24), Mismatch::default(), "{kind:?}");
            // A shorter datagram is checked by itself.
            let mut short = vec![0u8; 100];
            p.fill(1, 1_000_000, &mut short, 24);
            assert_eq!(p.check(1, 1_000_000, &short, 24), Mismatch::default(), "{kind:?}");
            if !kind.is_constant() {
                p.fill(1, 1_000_001, &mut b, 24);
                assert_ne!(a, b, "{kind:?}: the next datagram differs");
                assert!(p.check(2, 1_000_000, &a, 24).bytes > 0, "{kind:?}: another stream's datagram fails");
            }
            // The header is not compared; a payload byte is, and its offset counts the header.
            a[3] ^= 0xff;
            a[700] = a[700].wrapping_add(1);
            assert_eq!(p.check(1, 1_000_000, &a, 24), Mismatch { bytes: 1, first: Some(700) }, "{kind:?}");
        }
        // netchar's pattern is the digits by place in the datagram; stackthru marks each
        // datagram, and one too short for both markers keeps what of BEGIN fits.
        let p = DatagramPayload::new(spec(PayloadKind::Pattern, 0), 100);
        let mut d = [0u8; 30];
        p.fill(0, 0, &mut d, 24);
        assert_eq!(&d[24..], b"456789");
        let s = DatagramPayload::new(spec(PayloadKind::Stackthru, 1), 1472);
        let mut d = vec![0u8; 1472];
        s.fill(9, 9, &mut d, 24);
        assert!(d[24..].starts_with(STACKTHRU_BEGIN) && d.ends_with(STACKTHRU_END));
        assert!(d[24 + 17..1472 - 15].iter().all(|&c| c >= 32));
        let mut tiny = [0u8; 44];
        s.fill(9, 9, &mut tiny, 24);
        assert_eq!(&tiny[24..41], STACKTHRU_BEGIN);
        assert_eq!(s.check(9, 9, &tiny, 24), Mismatch::default());
        tiny[27] = b'x';
        assert_eq!(s.check(9, 9, &tiny, 24), Mismatch { bytes: 1, first: Some(27) });
        d[1460] = b'x';
        assert_eq!(s.check(9, 9, &d, 24), Mismatch { bytes: 1, first: Some(1460) });
        // Longer than any datagram the sender wrote: the excess is corrupt.
        assert_eq!(s.check(9, 9, &[&d[..], &[0u8; 8]].concat(), 24).bytes, 9);
    }
}
