//! The eCos nc_test master's line of one test from its result, for `netchar echo` as it ends
//! and for saved results of either eCos mode (`netchar report`): `UDP echo - 640 bufs of 1024
//! bytes in ...` or `TCP send - ...`.
//!
//! The words are nc_test's, named from the server's ("slave's") side: in "send" the server
//! sends (the client's `-R`, the result's down flow) and in "recv" it receives (up). The
//! suites print the stock lines as they run ([`crate::nc_test_lines`]).

use crate::hooks::hook_text;
use crate::text::{echo_line, transfer_line};
use netchar_model::{Direction, TestResult};

/// nc_test's name of a one-way test: "send" when the server sends, "recv" when it receives.
pub fn one_way_name(r: &TestResult) -> String {
    let way = if r.test.spec.direction == Direction::Down { "send" } else { "recv" };
    format!("{} {way}", r.test.spec.kind.name().to_uppercase())
}

/// The master's line of each test.
#[derive(Debug, Default)]
pub struct EcosLinesReporter;

impl EcosLinesReporter {
    /// The test's line, then the user's commands around it (`--step-cmd`), a line each.
    fn lines(r: &TestResult) -> String {
        let line = match (&r.summary.rr, &r.test.spec.rr) {
            (Some(_), _) => echo_line(r),
            // An echo test without its figures has no line, as echo_line says.
            (None, Some(_)) => String::new(),
            (None, None) => transfer_line(r, &one_way_name(r)),
        };
        line + &hook_text(r)
    }
}

impl crate::Reporter for EcosLinesReporter {
    fn on_finish(&mut self, result: &TestResult) -> String {
        Self::lines(result)
    }
    fn on_results(&mut self, results: &[crate::Saved]) -> String {
        results.iter().map(|s| Self::lines(&s.result)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same words as nc_test's: "send" is the server sending (down), "recv" receiving.
    #[test]
    fn one_way_tests_are_named_from_the_servers_side() {
        let mut r: TestResult = serde_json::from_str(include_str!("../tests/fixtures/tcp.json")).unwrap();
        r.test.spec.direction = Direction::Down;
        assert_eq!(one_way_name(&r), "TCP send");
        r.test.spec.direction = Direction::Up;
        assert_eq!(one_way_name(&r), "TCP recv");
    }
}
