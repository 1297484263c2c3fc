//! The JSON result (schema in docs/json.md): valid JSON always, errors included, never NaN.

use netchar_model::TestResult;

/// The result as pretty-printed JSON with a trailing newline.
pub fn to_json(result: &TestResult) -> String {
    // TestResult holds only strings, numbers, options and vectors: serialising cannot fail.
    let mut s = serde_json::to_string_pretty(result).expect("results always serialise");
    s.push('\n');
    s
}

/// A list of results (the quick characterization) as one JSON document.
pub fn many_to_json(results: &[TestResult]) -> String {
    let mut s = serde_json::to_string_pretty(results).expect("results always serialise");
    s.push('\n');
    s
}

/// The JSON reporter: silent while the test runs, the whole document at the end.
#[derive(Debug, Default)]
pub struct JsonReporter;

impl crate::Reporter for JsonReporter {
    fn on_start(&mut self, _: &netchar_model::TestInfo) -> String {
        String::new()
    }
    fn on_interval(&mut self, _: &netchar_model::IntervalRecord) -> String {
        String::new()
    }
    fn on_finish(&mut self, result: &TestResult) -> String {
        to_json(result)
    }
    fn on_results(&mut self, results: &[crate::Saved]) -> String {
        let all: Vec<TestResult> = results.iter().map(|s| s.result.clone()).collect();
        many_to_json(&all)
    }
}
