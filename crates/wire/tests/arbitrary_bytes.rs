//! The fuzz targets' bodies (fuzz/src/bodies.rs) over random and mutated inputs, on stable
//! Rust: what CI runs of the fuzzing (bench/fuzz.sh runs the real fuzzer for a set time).
//! Seeds include real traffic (hellos, frames, datagrams of every kind) so mutations reach
//! the deeper states.

#[path = "../../../fuzz/src/bodies.rs"]
mod bodies;

use netchar_model::TestSpec;
use netchar_wire::codec::encode_frame;
use netchar_wire::datagram::DatagramHeader;
use netchar_wire::hello::Hello;
use netchar_wire::message::{ClientMessage, ServerMessage};
use proptest::prelude::*;

fn seeds() -> Vec<Vec<u8>> {
    let request = ClientMessage::Request {
        spec: TestSpec::udp_default(),
        client_version: "0.1.0".into(),
        companion: None,
        auth: None,
    };
    let mut framed = Vec::new();
    encode_frame(&request.encode(), &mut framed);
    encode_frame(&ClientMessage::Start.encode(), &mut framed);
    let mut server = Hello::server_with_nonce([3; 16], false).encode().to_vec();
    encode_frame(&ServerMessage::Ready.encode(), &mut server);
    vec![
        Hello::control().encode().to_vec(),
        Hello::data_tagged([1; 16], 2, [3; 8]).encode().to_vec(),
        framed.clone(),
        // A script for the session bodies: mode byte, then a step that feeds the frames.
        [vec![0u8, 60], framed].concat(),
        [vec![2u8, 60], server].concat(),
        request.encode(),
        serde_json::to_vec(&TestSpec::rr_default()).unwrap(),
        DatagramHeader::setup(1, &[9; 16]).to_vec(),
        DatagramHeader::confirm(1, &[9; 16], &[8; 16], &[7; 8]).to_vec(),
        DatagramHeader::challenge(1, &[8; 16]).to_vec(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        for (_, body) in bodies::TARGETS {
            body(&data);
        }
    }

    #[test]
    fn mutated_seeds(
        seed in 0usize..10,
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..8),
        cut in any::<usize>(),
    ) {
        let mut data = seeds()[seed].clone();
        for (at, byte) in flips {
            if !data.is_empty() {
                let i = at % data.len();
                data[i] = byte;
            }
        }
        data.truncate(cut % (data.len() + 1) + data.len() / 2);
        for (_, body) in bodies::TARGETS {
            body(&data);
        }
    }
}

#[test]
fn every_seed_runs_through_every_body() {
    for s in seeds() {
        for (_, body) in bodies::TARGETS {
            body(&s);
        }
    }
}
