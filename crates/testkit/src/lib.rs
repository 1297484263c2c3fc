//! What the workspace's tests share across crates: the one switch for a test that cannot run
//! here ([`require`]: it skips, or fails under `NETCHAR_REQUIRE_ALL=1`, which .ci/run sets), the
//! network-namespace test bed ([`netns`]: namespaces joined by veth pairs or a bridge, nft
//! and tc inside them, child processes that die with the test), and, with the `fuzz-bodies`
//! feature, the fuzz targets' bodies (`fuzz_bodies`), which netchar-wire's tests and the
//! libFuzzer targets in fuzz/ both run. A dev-dependency only.
#![forbid(unsafe_code)]

#[cfg(feature = "fuzz-bodies")]
pub mod fuzz_bodies;
pub mod netns;
pub mod ports;
pub mod require;
