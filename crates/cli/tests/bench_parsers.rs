//! The benchmark scripts' parsers and reports (bench/netchar_bench/, Python) against the raw
//! outputs saved in bench/results/raw/: runs `python3 -m unittest discover -s bench/tests` from
//! the repository root, so that a peer tool whose output format changes fails `cargo test`
//! instead of producing a wrong figure in a benchmark.

#[path = "support/require.rs"]
mod require;

use std::path::Path;
use std::process::Command;

#[test]
fn bench_python_unit_tests_pass() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = Command::new("python3").arg("--version").output();
    if !python.as_ref().is_ok_and(|o| o.status.success()) {
        let why = match python {
            Ok(o) => format!("`python3 --version` failed ({})", o.status),
            Err(e) => format!("`python3` cannot be run ({e})"),
        };
        require::unavailable("the bench parser tests", &format!("{why}; apt-get install python3"));
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
