//! What the workspace's tests share across crates: the one switch for a test that cannot run
//! here ([`require`]: it skips, or fails under `NETCHAR_REQUIRE_ALL=1`, which .ci/run sets), and
//! the network-namespace test bed ([`netns`]: namespaces joined by veth pairs or a bridge, nft
//! and tc inside them, child processes that die with the test). A dev-dependency only.
#![forbid(unsafe_code)]

pub mod netns;
pub mod ports;
pub mod require;
