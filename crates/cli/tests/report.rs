//! `netchar report` end to end over the result files in crates/report/tests/fixtures (a
//! single test, `--repeat` and suite arrays, a `--save` directory): the same tables as the
//! report crate's golden files, `-o`, and one-line errors.

use assert_cmd::Command;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../report/tests/fixtures")
}

fn netchar() -> Command {
    let mut c = Command::cargo_bin("netchar").unwrap();
    c.current_dir(fixtures());
    c
}

/// Every fixture named as the golden tests name them, in the same order.
fn all_args() -> Vec<&'static str> {
    vec![
        "rr.json",
        "saved",
        "suite-bwsweep.json",
        "tcp-bidir-p2.json",
        "tcp-p2-intervals.json",
        "tcp-reverse-repeat3.json",
        "tcp.json",
        "udp-reverse-intervals.json",
        "udp.json",
    ]
}

fn expected(name: &str) -> String {
    std::fs::read_to_string(fixtures().join("../expected").join(name)).unwrap()
}

#[test]
fn formats_equal_the_golden_files() {
    for (format, extra, golden) in [
        ("text", None, "report.txt"),
        ("markdown", None, "report.md"),
        ("csv", None, "summaries.csv"),
        ("csv", Some("--intervals"), "intervals.csv"),
    ] {
        let mut c = netchar();
        c.arg("report").args(all_args()).args(["--format", format]);
        if let Some(x) = extra {
            c.arg(x);
        }
        let out = c.output().unwrap();
        assert!(out.status.success(), "{format}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(String::from_utf8(out.stdout).unwrap(), expected(golden), "--format {format} {extra:?}");
    }
}

#[test]
fn output_file_and_json_round_trip() {
    let dir = std::env::temp_dir().join(format!("netchar-report-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("out.csv");
    netchar().args(["report", "tcp.json", "udp.json", "--format", "csv", "-o"]).arg(&csv).assert().success().stdout("");
    let text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(text.starts_with("source,protocol,kind,flow,streams,sender_bytes,"));
    // --format json writes every result as one array, which reads back as the same rows.
    let json = dir.join("all.json");
    netchar()
        .args(["report", "saved", "tcp-reverse-repeat3.json", "--format", "json", "-o"])
        .arg(&json)
        .assert()
        .success();
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc.as_array().unwrap().len(), 5);
    let again = netchar().args(["report", "--format", "csv"]).arg(&json).output().unwrap();
    assert_eq!(String::from_utf8(again.stdout).unwrap().lines().count(), 6);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn bad_inputs_fail_with_one_line() {
    let dir = std::env::temp_dir().join(format!("netchar-report-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let not_json = dir.join("notes.json");
    std::fs::write(&not_json, "hello").unwrap();
    let other_json = dir.join("other.json");
    std::fs::write(&other_json, "{\"a\": 1}").unwrap();
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    for (args, says) in [
        (vec![not_json.to_str().unwrap()], "not JSON"),
        (vec![other_json.to_str().unwrap()], "not a netchar result"),
        (vec![empty.to_str().unwrap()], "holds no *.json results"),
        (vec!["/dev/zero"], "a device, not a regular file"),
        (vec!["tcp.json", "--intervals"], "--intervals: only with --format csv"),
        (vec!["tcp.json", "--format", "svg"], "-o DIR"),
    ] {
        let out = netchar().arg("report").args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn svg_writes_one_plot_per_result_into_the_directory() {
    let dir = std::env::temp_dir().join(format!("netchar-report-svg-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    netchar().args(["report", "tcp-p2-intervals.json", "saved", "--format", "svg", "-o"]).arg(&dir).assert().success();
    let mut names: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "001-tcp-p2-intervals_json.svg",
            "002-20261123T081245Z-tcp-001_json.svg",
            "003-20261123T081246Z-tcp-002_json.svg",
            "compare-tcp.svg"
        ]
    );
    let svg = std::fs::read_to_string(dir.join(&names[0])).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains("up sum") && svg.contains("throughput (Gbit/s)"));
    let _ = std::fs::remove_dir_all(dir);
}
