//! netperf's control messages: round trips of every layout for any field values, and the fuzz
//! target's body (netchar_testkit::fuzz_bodies::netperf: the codec and both roles' sessions fed
//! anything, with their invariants) over random bytes and mutated seeds, on stable Rust. The
//! RNG seed is fixed so that a failure in CI reproduces anywhere; `PROPTEST_RNG_SEED=N`
//! explores other inputs.

use netchar_testkit::fuzz_bodies as bodies;
use netchar_wire::netperf::omni::{OmniRequest, OmniResponse, OmniResults};
use netchar_wire::netperf::{Message, MESSAGE_LEN};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::RngSeed;

fn config(cases: u32) -> ProptestConfig {
    let default = ProptestConfig::default();
    let rng_seed = match default.rng_seed {
        RngSeed::Random => RngSeed::Fixed(0x6e65_7470_6572_6600),
        seed => seed,
    };
    ProptestConfig { cases, rng_seed, failure_persistence: None, ..default }
}

/// Any 656 bytes whose character fields are what a layout holds.
fn message() -> impl Strategy<Value = Message> {
    (any::<i32>(), any::<i32>(), vec(any::<u8>(), MESSAGE_LEN - 8)).prop_map(|(kind, status, data)| {
        let mut m = Message::new(kind, status);
        m.set_bytes(0, &data);
        m
    })
}

/// Applies edits to bytes: each removes, repeats, replaces or inserts at a position.
fn mutate(mut items: Vec<u8>, edits: Vec<(usize, u8, u8)>) -> Vec<u8> {
    for (at, op, byte) in edits {
        let i = at % (items.len() + 1);
        match op % 4 {
            0 if i < items.len() => {
                items.remove(i);
            }
            1 if i < items.len() => items.insert(i, items[i]),
            2 if i < items.len() => items[i] = byte,
            _ => items.insert(i, byte),
        }
    }
    items
}

proptest! {
    #![proptest_config(config(512))]

    /// Each layout's fields come back from their own encoding, word for word (floats by their
    /// bits: a NaN is carried as it is).
    #[test]
    fn layouts_round_trip(m in message()) {
        let req = OmniRequest::decode(&m);
        prop_assert_eq!(OmniRequest::decode(&req.encode()).encode(), req.encode());
        prop_assert_eq!(req.encode().data[..200].to_vec(), m.data[..200].to_vec());
        let rsp = OmniResponse::decode(&m);
        prop_assert_eq!(OmniResponse::decode(&rsp.encode()).encode(), rsp.encode());
        prop_assert_eq!(rsp.encode().data[..201].to_vec(), m.data[..201].to_vec());
        let res = OmniResults::decode(&m);
        prop_assert_eq!(OmniResults::decode(&res.encode()).encode(), res.encode());
        prop_assert_eq!(res.encode().data[..284].to_vec(), m.data[..284].to_vec());
        prop_assert_eq!(Message::decode(&m.encode()), Ok(m));
    }

    /// Finite values survive as values, not only as bits.
    #[test]
    fn results_figures_round_trip(bytes in any::<[u64; 2]>(), calls in any::<[u32; 3]>(), secs in 0f32..1e6, retrans in -1i32..i32::MAX) {
        let mut r = OmniResults::decode(&Message::new(98, 0));
        r.bytes_received = bytes[0];
        r.bytes_sent = bytes[1];
        r.recv_calls = calls[0];
        r.send_calls = calls[1];
        r.trans_received = calls[2];
        r.elapsed_time = secs;
        r.transport_retrans = retrans;
        prop_assert_eq!(OmniResults::decode(&r.encode()), r);
    }

    #[test]
    fn the_body_takes_random_bytes(data in vec(any::<u8>(), 0..2048)) {
        bodies::netperf::netperf(&data);
    }

    #[test]
    fn the_body_takes_mutated_seeds(seed in any::<usize>(), edits in vec((any::<usize>(), any::<u8>(), any::<u8>()), 0..8)) {
        let seeds = bodies::seeds("netperf");
        bodies::netperf::netperf(&mutate(seeds[seed % seeds.len()].clone(), edits));
    }
}

#[test]
fn every_seed_passes_unchanged() {
    let seeds = bodies::seeds("netperf");
    assert_eq!(seeds.len(), 3);
    seeds.iter().for_each(|s| bodies::netperf::netperf(s));
}
