//! Results the formats' unit tests share.

use netchar_model::{Caveat, CaveatWhen, FarEnd, TestResult};

/// The TCP fixture, as a peer protocol's result with `far_end` and `caveats`.
pub(crate) fn peer_result(far_end: FarEnd, caveats: Vec<Caveat>) -> TestResult {
    let text = include_str!("../tests/fixtures/tcp.json");
    let mut r: TestResult = serde_json::from_str(text).unwrap();
    r.test.protocol = "some-peer".into();
    r.test.far_end = far_end;
    r.test.caveats = caveats;
    r
}

/// A caveat that applies when the peer counted fewer bytes than were written.
pub(crate) fn short_caveat() -> Caveat {
    Caveat {
        flow: None,
        when: CaveatWhen::ReceiverShort,
        text: "{sent} written, {counted} counted by the peer, {missing} in flight".into(),
    }
}
