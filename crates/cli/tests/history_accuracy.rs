//! How well `netchar history` finds a change, on noise measured on a real machine: the 60 runs
//! of tests/history/noise-udp-paced.txt (its header says how they were made), drawn with
//! replacement into series of 60, each with a 2% drop inserted from run 40 on, and the same
//! series without it. The change must be found at 40 ± 1 in at least 95 of 100 draws, and no
//! change in at least 95 of 100 series without one (docs/history.md, "Accuracy").
//!
//! The draws come from a seeded generator, so the figures are the same on every run; the
//! permutation test of each series is seeded with the draw's number.

#[path = "support/noise_draws.rs"]
mod noise_draws;

use netchar_stats::changepoint::{e_divisive, Options};
use noise_draws::{measured_noise, series};

#[test]
fn a_two_percent_step_in_measured_noise_is_found_and_noise_alone_is_left_alone() {
    let sample = measured_noise();
    assert_eq!(sample.len(), 60);
    let (mut found, mut only_there, mut quiet) = (0, 0, 0);
    for seed in 0..100u64 {
        let options = Options { seed, ..Options::default() };
        let stepped = e_divisive(&series(&sample, seed, 0.02), &options);
        let at_40 = stepped.iter().any(|c| c.index.abs_diff(40) <= 1);
        found += usize::from(at_40);
        only_there += usize::from(at_40 && stepped.len() == 1);
        quiet += usize::from(e_divisive(&series(&sample, seed, 0.0), &options).is_empty());
    }
    eprintln!(
        "2% step found at 40±1: {found}/100 (the only change: {only_there}/100); no step, no change: {quiet}/100"
    );
    assert!(found >= 95, "the 2% step was found at 40±1 in {found} of 100 draws");
    assert!(quiet >= 95, "noise alone showed no change in only {quiet} of 100 draws");
}
