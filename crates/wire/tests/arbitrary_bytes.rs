//! The fuzz targets' bodies (netchar_testkit::fuzz_bodies) over random and mutated inputs on
//! stable Rust: what CI runs of the fuzzing, in a few seconds (bench/fuzz.sh runs libFuzzer on
//! the same bodies for as long as it is given).
//!
//! Byte decoders get random bytes and mutated seeds (valid inputs with bytes replaced, inserted
//! or removed); the frame decoder gets random chunks and a valid stream cut anywhere; the
//! session bodies get random scripts and a whole test's script with steps removed, repeated,
//! replaced or inserted. The RNG seed is fixed so that a failure in CI reproduces anywhere;
//! `PROPTEST_RNG_SEED=N` explores other inputs.

use bodies::script::*;
use netchar_model::{Pattern, RrOptions, TestSpec, UdpOptions};
use netchar_testkit::fuzz_bodies as bodies;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::RngSeed;

type Body = fn(&[u8]);

/// The bodies that take bytes, by target name.
const BYTE_BODIES: &[(&str, Body)] = &[
    ("hello", bodies::hello),
    ("control_messages", bodies::control_messages),
    ("datagram", bodies::datagram),
    ("spec", bodies::spec),
    ("key_file", bodies::key_file),
    ("iperf3_client", bodies::iperf3_client),
    ("iperf2", bodies::iperf2),
    ("iperf3_server", bodies::iperf3_server),
    ("netio_server", bodies::netio_server),
    ("netio_client", bodies::netio_client),
    ("nc_test", bodies::nc_test),
];
fn config(cases: u32) -> ProptestConfig {
    let default = ProptestConfig::default();
    // Fixed unless PROPTEST_RNG_SEED says otherwise.
    let rng_seed = match default.rng_seed {
        RngSeed::Random => RngSeed::Fixed(0x006e_6574_6368_6172),
        seed => seed,
    };
    // No regressions file: with a fixed seed a failure comes back by itself.
    ProptestConfig { cases, rng_seed, failure_persistence: None, ..default }
}

/// Applies edits to a list: each removes, repeats, replaces or inserts at a position.
fn mutate<T: Clone>(mut items: Vec<T>, edits: Vec<(usize, u8, T)>) -> Vec<T> {
    for (at, op, item) in edits {
        let i = at % (items.len() + 1);
        match op % 4 {
            0 if i < items.len() => {
                items.remove(i);
            }
            1 if i < items.len() => items.insert(i, items[i].clone()),
            2 if i < items.len() => items[i] = item,
            _ => items.insert(i, item),
        }
    }
    items
}

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..max)
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof!["[0-9a-f+]{0,70}", "\\PC{0,24}"]
}

fn millis() -> impl Strategy<Value = u32> {
    prop_oneof![0..3000u32, any::<u32>()]
}

fn timeouts() -> impl Strategy<Value = Option<[u16; 4]>> {
    prop_oneof![Just(None), any::<[u16; 4]>().prop_map(Some)]
}

fn delivery() -> impl Strategy<Value = Delivery> {
    prop_oneof![
        Just(Delivery::Whole),
        any::<u16>().prop_map(Delivery::Split),
        (any::<u16>(), any::<u8>()).prop_map(|(at, byte)| Delivery::Corrupt { at, byte }),
    ]
}

fn client_pick() -> impl Strategy<Value = ClientPick> {
    let spec = prop_oneof![
        Just(SpecPick::Tcp),
        Just(SpecPick::Udp),
        Just(SpecPick::Rr),
        any::<u8>().prop_map(SpecPick::Bidir),
        text().prop_map(SpecPick::Json),
    ];
    let proof = prop_oneof![
        Just(ProofPick::Missing),
        Just(ProofPick::Valid),
        Just(ProofPick::WrongKey),
        Just(ProofPick::UnknownUser),
        (text(), text(), text()).prop_map(|(user, nonce, proof)| ProofPick::Garbage { user, nonce, proof }),
    ];
    prop_oneof![
        (spec, proof, any::<Option<[u8; 16]>>()).prop_map(|(spec, proof, companion)| ClientPick::Request {
            spec,
            proof,
            companion
        }),
        Just(ClientPick::Start),
        any::<u8>().prop_map(ClientPick::SenderDone),
        Just(ClientPick::Stop),
        Just(ClientPick::Keepalive),
        bytes(64).prop_map(ClientPick::Payload),
    ]
}

fn server_pick() -> impl Strategy<Value = ServerPick> {
    let proof =
        prop_oneof![Just(ServerProofPick::Missing), Just(ServerProofPick::Valid), Just(ServerProofPick::WrongKey)];
    prop_oneof![
        any::<bool>().prop_map(|auth_required| ServerPick::Hello { auth_required }),
        (any::<u16>(), any::<u8>(), any::<u8>()).prop_map(|(version, role, flags)| ServerPick::OddHello {
            version,
            role,
            flags
        }),
        (any::<bool>(), proof, any::<Option<u16>>()).prop_map(|(cookie_ok, proof, data_port)| ServerPick::Accepted {
            cookie_ok,
            proof,
            data_port
        }),
        any::<bool>().prop_map(|reason| ServerPick::Busy { reason }),
        Just(ServerPick::Rejected),
        Just(ServerPick::Ready),
        any::<u8>().prop_map(ServerPick::SenderDone),
        any::<bool>().prop_map(|error| ServerPick::Results { error }),
        Just(ServerPick::Keepalive),
        Just(ServerPick::Error),
        bytes(64).prop_map(ServerPick::Payload),
    ]
}

fn server_step() -> impl Strategy<Value = ServerStep> {
    prop_oneof![
        bytes(64).prop_map(ServerStep::Bytes),
        (client_pick(), delivery()).prop_map(|(m, d)| ServerStep::Send(m, d)),
        millis().prop_map(ServerStep::Wait),
        millis().prop_map(ServerStep::Advance),
        Just(ServerStep::WaitForDeadline),
        any::<Option<u16>>().prop_map(ServerStep::Admit),
        any::<bool>().prop_map(ServerStep::Busy),
        Just(ServerStep::Reject),
        Just(ServerStep::StreamsConnected),
        any::<u8>().prop_map(ServerStep::SendersDone),
        any::<bool>().prop_map(ServerStep::Finish),
        Just(ServerStep::Error),
        Just(ServerStep::Eof),
    ]
}

fn client_step() -> impl Strategy<Value = ClientStep> {
    prop_oneof![
        bytes(64).prop_map(ClientStep::Bytes),
        (server_pick(), delivery()).prop_map(|(m, d)| ClientStep::Send(m, d)),
        millis().prop_map(ClientStep::Wait),
        millis().prop_map(ClientStep::Advance),
        Just(ClientStep::WaitForDeadline),
        any::<u8>().prop_map(ClientStep::SendersDone),
        Just(ClientStep::Stop),
        Just(ClientStep::Eof),
    ]
}

fn server_input() -> impl Strategy<Value = ServerInput> {
    let hello = prop_oneof![Just(HelloPick::Control), any::<u16>().prop_map(HelloPick::Version), Just(HelloPick::Data)];
    (any::<bool>(), hello, timeouts(), vec(server_step(), 0..24))
        .prop_map(|(auth, hello, timeouts, steps)| ServerInput { auth, hello, timeouts, steps })
}

fn client_input() -> impl Strategy<Value = ClientInput> {
    (any::<bool>(), timeouts(), vec(client_step(), 0..24)).prop_map(|(auth, timeouts, steps)| ClientInput {
        auth,
        timeouts,
        steps,
    })
}

proptest! {
    #![proptest_config(config(2000))]

    #[test]
    fn byte_decoders_take_random_bytes(data in bytes(512)) {
        for (_, body) in BYTE_BODIES {
            body(&data);
        }
    }

    #[test]
    fn byte_decoders_take_mutated_seeds(
        seed in any::<usize>(),
        edits in vec((any::<usize>(), any::<u8>(), any::<u8>()), 0..8),
    ) {
        for (name, body) in BYTE_BODIES {
            let seeds = bodies::seeds(name);
            body(&mutate(seeds[seed % seeds.len()].clone(), edits.clone()));
        }
    }

    #[test]
    fn frames_take_random_chunks(cap in prop_oneof![0..64u16, any::<u16>()], chunks in vec(bytes(64), 0..16)) {
        bodies::frame(&bodies::FrameInput { cap, chunks });
    }

    #[test]
    fn frames_take_a_valid_stream_cut_anywhere(
        cap in 0..256u16,
        payloads in vec(bytes(300), 0..6),
        cuts in vec(any::<usize>(), 0..12),
        edits in vec((any::<usize>(), any::<u8>(), any::<u8>()), 0..2),
    ) {
        let mut stream = Vec::new();
        for p in &payloads {
            netchar_wire::codec::encode_frame(p, &mut stream);
        }
        let mut stream = mutate(stream, edits);
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (stream.len() + 1)).collect();
        cuts.sort_unstable();
        let mut chunks = Vec::new();
        for &c in cuts.iter().rev() {
            chunks.push(stream.split_off(c));
        }
        chunks.push(stream);
        chunks.reverse();
        bodies::frame(&bodies::FrameInput { cap, chunks });
    }
}

proptest! {
    #![proptest_config(config(1000))]

    #[test]
    fn server_sessions_take_random_scripts(input in server_input()) {
        bodies::server_session(&input);
    }

    #[test]
    fn server_sessions_take_a_whole_test_mutated(
        auth in any::<bool>(),
        timeouts in timeouts(),
        edits in vec((any::<usize>(), any::<u8>(), server_step()), 0..4),
    ) {
        let test = server_script(auth);
        bodies::server_session(&ServerInput { timeouts, steps: mutate(test.steps, edits), ..test });
    }

    #[test]
    fn client_sessions_take_random_scripts(input in client_input()) {
        bodies::client_session(&input);
    }

    #[test]
    fn client_sessions_take_a_whole_test_mutated(
        auth in any::<bool>(),
        timeouts in timeouts(),
        edits in vec((any::<usize>(), any::<u8>(), client_step()), 0..4),
    ) {
        let test = client_script(auth);
        bodies::client_session(&ClientInput { timeouts, steps: mutate(test.steps, edits), ..test });
    }
}

#[test]
fn every_seed_and_whole_test_passes_unchanged() {
    for (name, body) in BYTE_BODIES {
        let seeds = bodies::seeds(name);
        assert!(!seeds.is_empty(), "{name} has no seeds");
        seeds.iter().for_each(|s| body(s));
    }
    for auth in [false, true] {
        bodies::server_session(&server_script(auth));
        bodies::client_session(&client_script(auth));
    }
}

// Open findings of the fuzz targets, each skipped until fixed: run them with
// `cargo test -p netchar-wire --test arbitrary_bytes -- --ignored`, and remove the `ignore` of
// each that passes.

proptest! {
    #![proptest_config(config(2000))]

    /// Valid specs with fields set to the edges of validate()'s ranges: finds every finding
    /// below about the spec within a few cases.
    #[test]
    fn spec_fields_take_random_edits(data in bytes(64)) {
        bodies::spec_fields(&data);
    }
}

fn spec_json(spec: &TestSpec) -> Vec<u8> {
    serde_json::to_vec(spec).expect("specs serialise")
}

#[test]
fn a_valid_spec_survives_json_exactly() {
    bodies::spec(&spec_json(&TestSpec { interval_seconds: 986.041_060_439_311_1, ..TestSpec::tcp_default() }));
}

#[test]
fn a_spec_carries_no_udp_grace_the_server_cannot_wait() {
    for grace_seconds in [-1.0, 1e300] {
        let udp = UdpOptions { grace_seconds, ..UdpOptions::default() };
        bodies::spec(&spec_json(&TestSpec { udp: Some(udp), ..TestSpec::tcp_default() }));
    }
}

#[test]
fn a_spec_carries_no_rr_timeout_the_server_cannot_wait() {
    let rr = RrOptions { udp: true, timeout_seconds: 1e300, ..RrOptions::default() };
    bodies::spec(&spec_json(&TestSpec { rr: Some(rr), ..TestSpec::tcp_default() }));
}

#[test]
fn a_size_list_holds_at_most_2_64_datagrams() {
    let pattern = Pattern { sizes: vec![(u64::MAX, 1024), (1, 1024)], burst: None, gap_seconds: 0.0 };
    let udp = UdpOptions { pattern: Some(pattern), ..UdpOptions::default() };
    bodies::spec(&spec_json(&TestSpec { block_bytes: 1200, udp: Some(udp), ..TestSpec::udp_default() }));
}

#[test]
fn cookies_and_proofs_are_exactly_hex_digits() {
    bodies::control_messages(b"0707070707070707070707+707070707");
    bodies::control_messages(&[b"+0".repeat(32), b"+1".repeat(32)].concat()[..64]);
}
