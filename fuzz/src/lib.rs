//! netchar's fuzz targets (cargo-fuzz layout; `bench/fuzz.sh` runs them). Each target in
//! `fuzz_targets/` is one line that hands libFuzzer's input to a body here:
//! - [`bodies`]: every decoder and state machine of `netchar-wire`, and the test request's
//!   `TestSpec`; netchar-testkit's `fuzz_bodies`, shared with the stable-Rust tests CI runs
//!   (`crates/wire/tests/arbitrary_bytes.rs`, `netperf_props.rs`).
//!
//! `netchar run`'s plan files are not fuzzed here: their planner fills the commands' clap
//! flags inside the cli binary, which has no library target to link; a property test over
//! generated plans checks them instead (`crates/cli/src/plans.rs`, `generated_plans`).
pub use netchar_testkit::fuzz_bodies as bodies;
