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

/// Valid JSON where a test produced no result: the error inside it.
pub fn no_result_json(error: Option<&str>) -> String {
    let doc = serde_json::json!({ "schema_version": netchar_model::SCHEMA_VERSION, "error": error });
    format!("{doc:#}\n")
}

/// The JSON reporter of one test: silent while it runs, the whole document at the end.
#[derive(Debug, Default)]
pub struct JsonReporter;

impl crate::Reporter for JsonReporter {
    fn on_finish(&mut self, result: &TestResult) -> String {
        to_json(result)
    }
    fn on_no_result(&mut self, error: Option<&str>) -> String {
        no_result_json(error)
    }
    fn on_results(&mut self, results: &[crate::Saved]) -> String {
        let all: Vec<TestResult> = results.iter().map(|s| s.result.clone()).collect();
        many_to_json(&all)
    }
}

/// The JSON reporter of a job of several tests (`--repeat`): silent while they run, one
/// array of the counted results at the end. A test without any result still says why at
/// once, as [`JsonReporter`] does, so a failed run is not silent.
#[derive(Debug, Default)]
pub struct JobJsonReporter;

impl crate::Reporter for JobJsonReporter {
    fn on_finish(&mut self, _: &TestResult) -> String {
        String::new()
    }
    fn on_no_result(&mut self, error: Option<&str>) -> String {
        no_result_json(error)
    }
    fn on_job_end(&mut self, results: &[TestResult]) -> String {
        many_to_json(results)
    }
    fn on_results(&mut self, results: &[crate::Saved]) -> String {
        let all: Vec<TestResult> = results.iter().map(|s| s.result.clone()).collect();
        many_to_json(&all)
    }
}
