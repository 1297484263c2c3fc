//! The plan-file target: `netchar run PLAN.toml` expands a plan into command lines with
//! `expand` in `crates/cli/src/plans.rs`. The cli crate is a binary without a library target,
//! so the module is compiled in here by path; it needs only `anyhow` and `toml`. Should it come
//! to use other modules of the binary (`crate::...`), this target needs a library target (or
//! the planner moved to a library crate) instead; the flags each test expands to go through
//! `plan.rs` (clap `Args`, `TestPlan`), which already needs the whole binary and is not reached.

#[allow(dead_code, unreachable_pub, clippy::all)]
#[path = "../../crates/cli/src/plans.rs"]
mod plans;

use std::time::Duration;

/// Any text as a plan: errors name the file; every expanded test is a netchar command line of
/// a known kind with a host, and a pause that main.rs can sleep (`Duration::from_secs_f64`).
pub fn plan_file(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let tests = match plans::expand(text, "plan.toml", Some("host")) {
        Ok(tests) => tests,
        Err(e) => {
            assert!(e.to_string().starts_with("plan.toml"), "an error that does not name the file: {e}");
            return;
        }
    };
    for t in &tests {
        assert_eq!(t.argv[0], "netchar");
        assert!(matches!(t.argv[1].as_str(), "tcp" | "udp" | "rr" | "crr" | "echo"), "kind {:?}", t.argv[1]);
        assert!(t.argv.len() >= 3);
        let pause = Duration::try_from_secs_f64(t.pause_seconds);
        assert!(pause.is_ok(), "test {:?} pauses {} s, which is not a Duration", t.name, t.pause_seconds);
    }
}
