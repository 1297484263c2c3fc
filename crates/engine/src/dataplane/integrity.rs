//! The test's payload generators, built once per test end and shared by its workers (a UDP
//! worker holds its stream's share, [`UdpPayload`]), and a receiver's tally of what it found
//! when it compared the bytes it read with them (`--verify`).
//!
//! The generators themselves are netchar_wire::payload's: what a worker writes and what it
//! compares with are slices of a ring laid out here, at the start, never per byte.

use netchar_model::{Integrity, TestKind, TestSpec};
use netchar_wire::payload::{DatagramPayload, Mismatch, StreamPayload};
use std::sync::Arc;

/// The generator key of an rr test's responses: the stream's id with this bit set, so a
/// stream's answers are not its requests (an echo's are: its requester compares them with the
/// requests).
pub(super) const RESPONSE_KEY: u32 = 1 << 31;

/// The longest slice an rr worker takes at once: longer requests and responses are written and
/// checked in pieces of this.
pub(super) const RR_SLICE: usize = 1 << 20;

/// What a test end's workers write and compare with.
#[derive(Debug, Clone)]
pub(super) struct TestPayload {
    /// TCP tests and TCP rr: the stream generator (the default pattern is its constant kind).
    /// Every end that sends or verifies has one; a TCP end that only receives and does not
    /// verify has none (it would be a block and more of memory read by nobody, per test).
    pub(super) stream: Option<Arc<StreamPayload>>,
    /// UDP tests and UDP rr.
    pub(super) datagrams: Option<Arc<DatagramPayload>>,
    /// Receivers compare what they read (`--verify`).
    pub(super) verify: bool,
    /// rr: the spec asked for a payload; without one, requests and responses keep their
    /// constant bytes.
    pub(super) rr_generated: bool,
}

impl TestPayload {
    /// The generators `spec` needs at an end where some stream sends (`sends`) or none does.
    pub(super) fn for_spec(spec: &TestSpec, sends: bool) -> Self {
        let kind = spec.payload.unwrap_or_default();
        let block = spec.block_bytes as usize;
        let mut out = Self { stream: None, datagrams: None, verify: spec.verify, rr_generated: spec.payload.is_some() };
        match (spec.kind, spec.rr.as_ref()) {
            (TestKind::Tcp, _) if sends || spec.verify => {
                out.stream = Some(Arc::new(StreamPayload::new(kind, block, block)))
            }
            (TestKind::Tcp, _) => {}
            (TestKind::Udp, _) => out.datagrams = Some(Arc::new(DatagramPayload::new(kind, largest_datagram(spec)))),
            (TestKind::Rr, Some(r)) if out.rr_generated => {
                let longest = r.request_bytes.max(r.response_bytes) as usize;
                if r.udp {
                    out.datagrams = Some(Arc::new(DatagramPayload::new(kind, longest)));
                } else {
                    out.stream = Some(Arc::new(StreamPayload::new(kind, block, longest.min(RR_SLICE))));
                }
            }
            (TestKind::Rr, _) => {}
        }
        out
    }
}

/// The largest datagram a UDP test sends: `-l`, or the largest of a `--pattern` size list.
pub(super) fn largest_datagram(spec: &TestSpec) -> usize {
    let listed = spec.udp.as_ref().and_then(|u| u.pattern.as_ref()).map(|p| p.sizes.iter().map(|&(_, s)| s).max());
    listed.flatten().unwrap_or(0).max(spec.block_bytes) as usize
}

/// A receiver's running tally: bytes and datagrams compared and what differed.
#[derive(Debug, Default)]
pub(super) struct IntegrityMeter {
    record: Integrity,
}

impl IntegrityMeter {
    /// A tally for a TCP stream.
    pub(super) fn stream() -> Self {
        Self::default()
    }

    /// A tally for UDP datagrams.
    pub(super) fn datagrams() -> Self {
        Self { record: Integrity { checked_datagrams: Some(0), corrupted_datagrams: Some(0), ..Integrity::default() } }
    }

    /// Counts a TCP read of `len` bytes at stream `offset`; `at` (seconds since the start) is
    /// asked only for the first corruption.
    pub(super) fn on_stream(&mut self, m: Mismatch, offset: u64, len: usize, at: impl FnOnce() -> f64) {
        let r = &mut self.record;
        r.checked_bytes += len as u64;
        if m.bytes == 0 {
            return;
        }
        r.corrupted_bytes += m.bytes;
        if r.first_bad_offset.is_none() {
            r.first_bad_offset = m.first.map(|i| offset + i as u64);
            r.first_bad_seconds = Some(at());
        }
    }

    /// Counts datagram `number`, whose payload after `header_len` bytes was compared.
    pub(super) fn on_datagram(
        &mut self,
        m: Mismatch,
        number: u64,
        datagram_len: usize,
        header_len: usize,
        at: impl FnOnce() -> f64,
    ) {
        let r = &mut self.record;
        r.checked_bytes += datagram_len.saturating_sub(header_len) as u64;
        *r.checked_datagrams.get_or_insert(0) += 1;
        if m.bytes == 0 {
            return;
        }
        r.corrupted_bytes += m.bytes;
        *r.corrupted_datagrams.get_or_insert(0) += 1;
        if r.first_bad_offset.is_none() {
            r.first_bad_offset = m.first.map(|i| i as u64);
            r.first_bad_datagram = Some(number);
            r.first_bad_seconds = Some(at());
        }
    }

    /// The tally, for the stream's record.
    pub(super) fn finish(self) -> Integrity {
        self.record
    }
}

/// Compares TCP bytes read from stream `key` as they come, offset by offset.
#[derive(Debug)]
pub(super) struct StreamCheck {
    payload: Arc<StreamPayload>,
    key: u32,
    meter: IntegrityMeter,
}

impl StreamCheck {
    pub(super) fn new(payload: Arc<StreamPayload>, key: u32) -> Self {
        Self { payload, key, meter: IntegrityMeter::stream() }
    }

    /// Checks `data`, read at stream `offset`.
    pub(super) fn check(&mut self, offset: u64, data: &[u8], at: impl FnOnce() -> f64) {
        let m = self.payload.check(self.key, offset, data);
        self.meter.on_stream(m, offset, data.len(), at);
    }

    pub(super) fn finish(self) -> Integrity {
        self.meter.finish()
    }
}

/// Compares UDP datagrams of stream `key` as they come.
#[derive(Debug)]
pub(super) struct DatagramCheck {
    payload: Arc<DatagramPayload>,
    key: u32,
    header_len: usize,
    meter: IntegrityMeter,
}

impl DatagramCheck {
    pub(super) fn new(payload: Arc<DatagramPayload>, key: u32, header_len: usize) -> Self {
        Self { payload, key, header_len, meter: IntegrityMeter::datagrams() }
    }

    /// Checks `datagram`, number `number` of the stream (header included).
    pub(super) fn check(&mut self, number: u64, datagram: &[u8], at: impl FnOnce() -> f64) {
        let m = self.payload.check(self.key, number, datagram, self.header_len);
        self.meter.on_datagram(m, number, datagram.len(), self.header_len, at);
    }

    pub(super) fn finish(self) -> Integrity {
        self.meter.finish()
    }
}

/// What a UDP worker writes behind each datagram's header (`--payload`) and, with `--verify`,
/// compares what it reads with.
#[derive(Debug, Clone, Default)]
pub(crate) struct UdpPayload {
    /// The test's generator (None: netchar's constant pattern, built by the worker).
    generator: Option<Arc<DatagramPayload>>,
    pub(super) verify: bool,
    /// The generator key of the stream's bytes: its own id, or the echoed sender's.
    pub(super) key: u32,
}

impl UdpPayload {
    /// The payload of a worker of the test whose bytes are stream `key`'s.
    pub(super) fn of(payload: &TestPayload, key: u32) -> Self {
        Self { generator: payload.datagrams.clone(), verify: payload.verify, key }
    }

    pub(super) fn generator(&self, largest: usize) -> Arc<DatagramPayload> {
        self.generator.clone().unwrap_or_else(|| Arc::new(DatagramPayload::new(Default::default(), largest)))
    }
}
