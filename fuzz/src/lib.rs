//! netchar's fuzz targets (cargo-fuzz layout; `bench/fuzz.sh` runs them). Each target in
//! `fuzz_targets/` is one line that hands libFuzzer's input to a body here:
//! - [`bodies`]: every decoder and state machine of `netchar-wire`, and the test request's
//!   `TestSpec`; shared with the stable-Rust test CI runs (`crates/wire/tests/arbitrary_bytes.rs`);
//! - [`plan_file`]: `netchar run` plan files, whose parser lives in the cli binary.
pub mod bodies;
pub mod plan_file;
