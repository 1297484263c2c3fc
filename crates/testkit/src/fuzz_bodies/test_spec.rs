//! The test request's `TestSpec`: as JSON from the network (`spec`), and as valid specs with
//! fields set to the edges of validate()'s ranges (`spec_fields`), which libFuzzer seldom
//! reaches by mutating JSON text.

use netchar_model::{Direction, EndCondition, TestKind, TestSpec, UdpRate, MAX_SECONDS, MAX_STREAMS};
use std::time::Duration;

/// A test request's spec: JSON from anyone on the network. `validate` never panics, and a spec
/// it accepts gives the engine figures it can use as they are: stream ids and byte budgets
/// that add up, no divisor of 0, and every number of seconds a `Duration`. Each check names
/// the engine code that relies on it.
pub fn spec(data: &[u8]) {
    if let Ok(spec) = serde_json::from_slice::<TestSpec>(data) {
        check(&spec);
    }
}

/// What the engine may rely on in a spec that `validate` accepts.
fn check(spec: &TestSpec) {
    if spec.validate().is_err() {
        return;
    }
    check_streams(spec);
    // engine/src/dataplane/{mod,udp,rr}.rs and client.rs/server.rs turn these into Durations
    // with Duration::from_secs_f64, which panics on a negative, NaN or too large number. The
    // receive grace is read for every kind of test (server.rs udp_grace), from whichever
    // options the spec carries; the rest only for the kind that uses them.
    let mut seconds = vec![
        ("omit", spec.omit_seconds),
        ("interval", spec.interval_seconds),
        ("receive grace", spec.receive_grace_seconds()),
    ];
    if let EndCondition::Seconds(s) = spec.end {
        seconds.push(("duration", s));
    }
    if let (TestKind::Udp, Some(u)) = (spec.kind, &spec.udp) {
        seconds.extend([("grace", u.grace_seconds), ("pacing quantum", u.pacing_quantum_seconds)]);
        if let Some(p) = &u.pattern {
            seconds.push(("pattern gap", p.gap_seconds));
            // udp.rs Schedule::due divides sequence numbers by the burst.
            assert_ne!(p.burst, Some(0), "a valid spec has a pattern with bursts of 0 datagrams");
            // The datagram count of a size list must not overflow (Pattern::total_datagrams).
            let total = p.sizes.iter().try_fold(0u64, |sum, (count, _)| sum.checked_add(*count));
            assert!(total.is_some(), "a valid spec's size list holds more than 2^64 datagrams");
            assert_eq!(p.total_datagrams(), total.filter(|_| !p.sizes.is_empty()));
        }
        if let Some(pps) = spec.udp_pps_per_stream() {
            assert!(pps.is_finite() && pps > 0.0, "a valid spec paces at {pps} datagrams/s");
        }
    }
    if let (TestKind::Rr, Some(r)) = (spec.kind, &spec.rr) {
        seconds.extend([("rr timeout", r.timeout_seconds), ("echo pause", r.pause_seconds)]);
        // rr.rs Pauses::before takes the request count modulo pause_every.
        assert_ne!(r.pause_every, Some(0), "a valid spec pauses after every 0 transactions");
    }
    // Every figure validate() bounds is at most MAX_SECONDS; the others must be too, or
    // `started + Duration` (an Instant) can overflow even where the Duration does not.
    for (what, s) in seconds {
        let ok = Duration::try_from_secs_f64(s).is_ok() && s <= MAX_SECONDS;
        assert!(ok, "a valid spec's {what} of {s} s is not a Duration of at most {MAX_SECONDS} s");
    }
    // The client validates the spec it sends; the server must read the very same one.
    let json = serde_json::to_vec(spec).expect("specs serialise");
    let again: TestSpec = serde_json::from_slice(&json).expect("a spec reads back");
    assert_eq!(&again, spec, "a valid spec changed on its way through JSON");
}

/// Stream ids number 1..=total with no gap or overlap, and `-n` budgets add up exactly.
fn check_streams(spec: &TestSpec) {
    let total = spec.total_streams();
    assert!((1..=2 * MAX_STREAMS).contains(&total), "{total} streams");
    let mut next = 1;
    for &flow in spec.direction.flows() {
        let ids = spec.stream_ids(flow);
        assert_eq!(*ids.start(), next, "stream ids of {flow:?} leave a gap or overlap");
        next = ids.end() + 1;
        for id in ids.clone() {
            assert_eq!(spec.flow_of(id), Some(flow));
        }
        if let EndCondition::Bytes(n) = spec.end {
            let budgets: Vec<u64> =
                ids.map(|id| spec.byte_budget(id).expect("-n gives every stream a budget")).collect();
            assert!(budgets.iter().all(|&b| b >= 1), "a stream of a valid -n {n} test has no byte to send");
            assert_eq!(budgets.iter().try_fold(0u64, |s, b| s.checked_add(*b)), Some(n), "budgets do not add up");
        }
    }
    assert_eq!(next, total + 1, "total_streams disagrees with the stream ids");
    assert_eq!((spec.flow_of(0), spec.flow_of(total + 1)), (None, None));
}

/// Valid specs of every kind, the starting points of `spec_fields` and of the JSON seeds.
pub fn seed_specs() -> Vec<TestSpec> {
    let udp = TestSpec {
        block_bytes: 1200,
        udp: Some(netchar_model::UdpOptions {
            pattern: Some(netchar_model::Pattern::parse("640x1024,10@10ms").expect("a valid pattern")),
            ..netchar_model::UdpOptions::default()
        }),
        ..TestSpec::udp_default()
    };
    let bidir_bytes = TestSpec {
        direction: Direction::Bidir,
        streams: 3,
        end: EndCondition::Bytes(1_000_001),
        ..TestSpec::tcp_default()
    };
    let echo = TestSpec {
        rr: Some(netchar_model::RrOptions {
            udp: true,
            pause_every: Some(10),
            pause_seconds: 0.01,
            ..netchar_model::RrOptions::default()
        }),
        ..TestSpec::rr_default()
    };
    vec![TestSpec::tcp_default(), udp, TestSpec::rr_default(), bidir_bytes, echo]
}

/// Numbers at and around the bounds validate() checks, and beyond any of them.
const EDGES: &[f64] = &[
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    1e-9,
    0.01,
    0.010_000_1,
    0.1,
    0.099,
    7.0,
    8.0,
    23.0,
    24.0,
    60.0,
    60.001,
    64.0,
    65.0,
    87.0,
    88.0,
    100.0,
    100.5,
    128.0,
    129.0,
    1023.0,
    1024.0,
    3600.0,
    3600.5,
    4096.0,
    4097.0,
    65_507.0,
    65_508.0,
    65_535.0,
    65_536.0,
    86_400.0,
    86_400.5,
    16_777_216.0,
    16_777_217.0,
    1_073_741_824.0,
    1_073_741_825.0,
    4_294_967_295.0,
    9_007_199_254_740_993.0,
    1.8e19,
    1e300,
    -1e300,
    f64::MAX,
];

/// Reads one number: an edge value, or (selector past the table) the next 8 bytes as raw bits.
fn number(script: &mut &[u8]) -> Option<f64> {
    let (&pick, rest) = script.split_first()?;
    *script = rest;
    if let Some(&edge) = EDGES.get(usize::from(pick)) {
        return Some(edge);
    }
    let raw: [u8; 8] = script.get(..8)?.try_into().ok()?;
    *script = &script[8..];
    // As u64 bits when the f64 is not finite: JSON carries no NaN or infinity.
    let f = f64::from_bits(u64::from_le_bytes(raw));
    Some(if f.is_finite() { f } else { u64::from_le_bytes(raw) as f64 })
}

/// A valid spec (the first byte picks one) with fields set by the rest: each edit is a field
/// byte and a number (`number`). The edited spec goes through JSON, as a request would, and
/// then through `spec`'s checks.
pub fn spec_fields(data: &[u8]) {
    let Some((&pick, mut script)) = data.split_first() else { return };
    let seeds = seed_specs();
    let mut spec = seeds[usize::from(pick) % seeds.len()].clone();
    while let Some((&field, rest)) = script.split_first() {
        script = rest;
        let Some(v) = number(&mut script) else { break };
        set_field(&mut spec, field, v);
    }
    let Ok(json) = serde_json::to_vec(&spec) else { return };
    if let Ok(spec) = serde_json::from_slice::<TestSpec>(&json) {
        check(&spec);
    }
}

/// Sets field number `field` (modulo the fields) to `v`, as the field's type takes it (`as`
/// saturates for integers).
fn set_field(spec: &mut TestSpec, field: u8, v: f64) {
    let (u, n) = (v as u64, v as u32);
    match field % 30 {
        0 => spec.streams = n,
        1 => spec.block_bytes = u,
        2 => spec.omit_seconds = v,
        3 => spec.interval_seconds = v,
        4 => spec.end = EndCondition::Seconds(v),
        5 => spec.end = EndCondition::Bytes(u),
        6 => spec.direction = [Direction::Up, Direction::Down, Direction::Bidir][(u % 3) as usize],
        7 => spec.kind = [TestKind::Tcp, TestKind::Udp, TestKind::Rr][(u % 3) as usize],
        8 => spec.tcp.window_bytes = Some(u),
        9 => spec.tcp.mss = Some(n),
        10 => spec.tcp.rate_bps_per_stream = Some(u),
        11 => udp_of(spec).rate = UdpRate::BitsPerSecond(u),
        12 => udp_of(spec).rate = UdpRate::PacketsPerSecond(u),
        13 => udp_of(spec).rate = UdpRate::Unlimited,
        14 => udp_of(spec).per_stream = u % 2 == 1,
        15 => udp_of(spec).grace_seconds = v,
        16 => udp_of(spec).pacing_quantum_seconds = v,
        17 => pattern_of(spec).burst = Some(u),
        18 => pattern_of(spec).gap_seconds = v,
        19 => pattern_of(spec).sizes.push((u, 1024)),
        20 => pattern_of(spec).sizes.push((1, u)),
        21 => rr_of(spec).request_bytes = u,
        22 => rr_of(spec).response_bytes = u,
        23 => rr_of(spec).inflight = n,
        24 => rr_of(spec).timeout_seconds = v,
        25 => rr_of(spec).udp = u % 2 == 1,
        26 => rr_of(spec).pause_every = Some(u),
        27 => rr_of(spec).pause_seconds = v,
        28 => spec.server_load = Some((v, n)),
        _ => spec.server_cpu = Some(u as usize),
    }
}

fn udp_of(spec: &mut TestSpec) -> &mut netchar_model::UdpOptions {
    spec.udp.get_or_insert_with(Default::default)
}

fn pattern_of(spec: &mut TestSpec) -> &mut netchar_model::Pattern {
    udp_of(spec).pattern.get_or_insert_with(Default::default)
}

fn rr_of(spec: &mut TestSpec) -> &mut netchar_model::RrOptions {
    spec.rr.get_or_insert_with(Default::default)
}
