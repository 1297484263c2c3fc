//! What a test does when something it needs is missing here: a tool (iperf3, make, chromium,
//! ...), a privilege (root) or a host capability (network namespaces, an IPv6 loopback).
//!
//! Every such test goes through [`unavailable`]. By default it prints "skipping WHAT: REASON"
//! and the test returns and passes, so `cargo test` runs on any machine. With
//! `NETCHAR_REQUIRE_ALL=1`, which .ci/run sets, it panics instead: a CI machine that lacks
//! something fails, rather than passing a test that never ran.
//!
//! Use from a test with `use netchar_testkit::require;` (netns uses it for its own
//! `skip_or_fail`; the netchar crate's tests include `support/require.rs`, which re-exports
//! it). crates/cli/tests/skips.rs fails when a test skips some other way.

#![allow(dead_code, unreachable_pub)]

use std::process::{Command, Stdio};

/// The environment variable that turns every skip into a failure (set to 1 by .ci/run).
pub const REQUIRE_ENV: &str = "NETCHAR_REQUIRE_ALL";

/// Whether `NETCHAR_REQUIRE_ALL=1` is set.
pub fn required() -> bool {
    std::env::var(REQUIRE_ENV).is_ok_and(|v| v == "1")
}

/// Call when `what` (a test, or one check of it) cannot run here because of `reason`, then
/// return (or leave that check out). Prints "skipping WHAT: REASON", or panics under
/// `NETCHAR_REQUIRE_ALL=1`.
pub fn unavailable(what: &str, reason: &str) {
    if required() {
        panic!("{what} cannot run here, and {REQUIRE_ENV}=1 (set by .ci/run) requires it: {reason}");
    }
    eprintln!("skipping {what}: {reason}");
}

/// Whether `program` can be started (with `args`, its exit status not looked at: some tools
/// answer their version flag with a non-zero code). When it cannot, [`unavailable`] has said so
/// for `what`, with `install` (how to get it) in the reason.
pub fn tool(what: &str, program: &str, args: &[&str], install: &str) -> bool {
    let started =
        Command::new(program).args(args).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).status();
    match started {
        Ok(_) => true,
        Err(e) => {
            unavailable(what, &format!("`{program}` cannot be run ({e}); {install}"));
            false
        }
    }
}

/// Whether this machine has an IPv6 loopback (`::1` can be bound). When it has none,
/// [`unavailable`] has said so for `what`.
pub fn ipv6_loopback(what: &str) -> bool {
    match std::net::UdpSocket::bind("[::1]:0") {
        Ok(_) => true,
        Err(e) => {
            unavailable(what, &format!("no IPv6 loopback (::1 cannot be bound: {e})"));
            false
        }
    }
}
