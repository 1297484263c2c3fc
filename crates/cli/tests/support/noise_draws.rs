//! The series the change-point tests draw (history_accuracy.rs, history_otava.rs): the UDP
//! receive rates measured on a real machine (tests/history/noise-udp-paced.txt; its header
//! says how they were made), drawn with replacement into series of 60 by a seeded generator,
//! so that every run of either test sees the same draws.

/// The measured rates.
pub(crate) fn measured_noise() -> Vec<f64> {
    include_str!("../history/noise-udp-paced.txt")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.trim().parse().unwrap())
        .collect()
}

/// Draw `seed`: 60 runs from `sample` (SplitMix64 of `seed`), with runs 40.. lowered by `step`.
pub(crate) fn series(sample: &[f64], seed: u64, step: f64) -> Vec<f64> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5EED;
    let mut next = || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    (0..60)
        .map(|i| {
            let v = sample[(next() % sample.len() as u64) as usize];
            if i >= 40 {
                v * (1.0 - step)
            } else {
                v
            }
        })
        .collect()
}
