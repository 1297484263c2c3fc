//! netchar's fuzz targets (cargo-fuzz layout; `bench/fuzz.sh` runs them). Each target in
//! `fuzz_targets/` is one line that hands libFuzzer's input to a body here:
//! - [`bodies`]: every decoder and state machine of `netchar-wire`, and the test request's
//!   `TestSpec`; netchar-testkit's `fuzz_bodies`, shared with the stable-Rust tests CI runs
//!   (`crates/wire/tests/arbitrary_bytes.rs`, `netperf_props.rs`);
//! - [`plan_file`]: `netchar run` plan files, whose parser lives in the cli binary.
pub use netchar_testkit::fuzz_bodies as bodies;
pub mod plan_file;
