//! The benchmark scripts' parsers and reports (bench/netchar_bench/, Python) against the raw
//! outputs saved in bench/results/raw/: runs `python3 -m unittest discover -s bench/tests` from
//! the repository root, so that a peer tool whose output format changes fails `cargo test`
//! instead of producing a wrong figure in a benchmark.

use std::path::Path;
use std::process::Command;

#[test]
fn bench_python_unit_tests_pass() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = Command::new("python3").arg("--version").output();
    if !python.map(|o| o.status.success()).unwrap_or(false) {
        // CI installs python3 (.ci/run), so there a missing one is a failure, not a skip.
        assert!(
            std::env::var("CI").map(|v| v != "true").unwrap_or(true),
            "python3 is not installed but CI=true requires the bench parser tests"
        );
        eprintln!("skipping the bench parser tests: python3 is not installed (apt-get install python3)");
        return;
    }
    let out = Command::new("python3")
        .args(["-m", "unittest", "discover", "-s", "bench/tests"])
        .current_dir(&root)
        // No __pycache__ in the source tree from a test run.
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("run python3 -m unittest");
    let report = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "bench/tests failed ({}):\n{}{report}",
        out.status,
        String::from_utf8_lossy(&out.stdout)
    );
    // The last lines of unittest's report: "Ran N tests in Xs" and "OK".
    let ran = report.lines().find(|l| l.starts_with("Ran ")).unwrap_or("Ran ? tests");
    eprintln!("bench/tests: {ran}");
}
