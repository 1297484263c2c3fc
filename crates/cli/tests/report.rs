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

/// The quick characterization's tests, in the order it runs them (their `test.title`).
const QUICK_TESTS: [&str; 7] = ["tcp up", "tcp down", "tcp bidir", "udp 1G", "udp max", "tcp rr", "udp rr"];

#[test]
fn quick_mode_prints_its_tables_or_one_json_array_and_plots_every_test() {
    // Text, as README's first command shows it: a row per test and flow, the latency table,
    // the loopback note.
    let out = Command::cargo_bin("netchar").unwrap().args(["-t", "0.3"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("test       flow           sender        receiver"), "{text}");
    for name in QUICK_TESTS {
        assert!(text.lines().any(|l| l.starts_with(name)), "no row for {name}: {text}");
    }
    assert!(text.contains("\nlatency "), "{text}");
    assert!(text.trim_end().ends_with("see `netchar tcp --help` for real tests)"), "{text}");

    let dir = tempfile::tempdir().unwrap();
    let plots = dir.path().join("plots");
    let html = dir.path().join("quick.html");
    let out = Command::cargo_bin("netchar")
        .unwrap()
        .args(["-t", "0.4", "--json", "--plot"])
        .arg(&plots)
        .arg("--report")
        .arg(&html)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is one JSON document");
    let results = v.as_array().expect("an array of the results");
    let titles: Vec<&str> = results.iter().map(|r| r["test"]["title"].as_str().unwrap()).collect();
    assert_eq!(titles, QUICK_TESTS);
    for r in &results[..3] {
        // TCP on loopback: what was sent arrived, byte for byte, each flow of the test.
        for flow in ["up", "down"].iter().filter(|f| r["summary"][**f].is_object()) {
            let s = &r["summary"][*flow];
            assert_eq!(s["sender"]["bytes"], s["receiver"]["bytes"], "{}: {s}", r["test"]["title"]);
            assert!(s["receiver"]["bytes"].as_u64().unwrap() > 0);
        }
    }
    assert!(results[2]["summary"]["up"].is_object() && results[2]["summary"]["down"].is_object());
    let udp = &results[3]["summary"]["up"];
    assert_eq!(
        udp["sender"]["packets"].as_u64().unwrap(),
        udp["receiver"]["packets"].as_u64().unwrap() + udp["receiver"]["lost"].as_u64().unwrap(),
        "sent = received + lost: {udp}"
    );
    for r in &results[5..] {
        assert!(r["summary"]["rr"]["transactions"].as_u64().unwrap() > 0, "{}", r["summary"]);
    }

    // --plot: each result's chart, each a well-formed SVG with the result's own series.
    let svg_texts = |name: &str| -> Vec<String> {
        let svg = std::fs::read_to_string(plots.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let doc = roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("{name}: {e}"));
        doc.descendants().filter(|n| n.has_tag_name("text")).filter_map(|n| n.text()).map(|t| t.trim().into()).collect()
    };
    for (n, flows) in [(1, &["up"][..]), (2, &["down"]), (3, &["up", "down"]), (4, &["up"]), (5, &["up"])] {
        let t = svg_texts(&format!("00{n}-quick_{n}.svg"));
        assert!(t.iter().any(|x| x == "time (s)"), "{n}: {t:?}");
        for flow in flows {
            // Streams are numbered across the test: bidir's down stream is stream 2.
            assert!(t.iter().any(|x| x.starts_with(&format!("{flow} stream "))), "{n}: no {flow} stream in {t:?}");
        }
    }
    for n in [6, 7] {
        let t = svg_texts(&format!("00{n}-quick_{n}-latency.svg"));
        assert!(t.iter().any(|x| x == "p99"), "{n}: {t:?}");
        svg_texts(&format!("00{n}-quick_{n}-latency-cdf.svg"));
    }
    // Its tests differ in more than their block size: no block-size curve of them.
    assert!(!plots.join("blocks-quick.svg").exists());
    let report = std::fs::read_to_string(&html).unwrap();
    assert!(report.contains("tcp bidir") && report.contains("<svg"), "the HTML report names the tests and draws them");
}
