//! Golden tests: the text, markdown and CSV reports of the result files in tests/fixtures
//! (written once by the real binary on loopback) must equal the files in tests/expected.
//! After a deliberate change of a format, `UPDATE_GOLDEN=1 cargo test -p netchar-report --test
//! golden` rewrites them; review the diff before committing it.

use netchar_model::units::RateFormat;
use netchar_report::{parse_saved, Format, Saved};
mod support;
use std::path::PathBuf;
use support::{check, dir};

/// Every fixture, as `netchar report` reads them: files in name order, then the --save
/// directory's files; labels are paths relative to tests/fixtures.
fn fixtures() -> Vec<Saved> {
    let root = dir("fixtures");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let mut all = Vec::new();
    for f in files {
        let mut inner = if f.is_dir() {
            let mut v: Vec<PathBuf> = std::fs::read_dir(&f).unwrap().map(|e| e.unwrap().path()).collect();
            v.sort();
            v
        } else {
            vec![f]
        };
        for p in inner.drain(..) {
            let label = p.strip_prefix(&root).unwrap().display().to_string();
            all.extend(parse_saved(&std::fs::read_to_string(&p).unwrap(), &label).unwrap());
        }
    }
    all
}

fn render(format: Format, intervals: bool) -> String {
    format.reporter(RateFormat::AutoBits, intervals).on_results(&fixtures())
}

#[test]
fn text_table() {
    check("report.txt", &render(Format::Text, false));
}

#[test]
fn markdown_table() {
    check("report.md", &render(Format::Markdown, false));
}

#[test]
fn csv_summaries() {
    check("summaries.csv", &render(Format::Csv, false));
}

#[test]
fn csv_intervals() {
    check("intervals.csv", &render(Format::Csv, true));
}

#[test]
fn text_table_in_fixed_units() {
    let got = Format::Text.reporter(RateFormat::Mbits, false).on_results(&fixtures());
    check("report-mbits.txt", &got);
}

/// The CSV carries the result's own counters: each summary row's bytes are the sum of the
/// stream records of that flow and end after the warm-up, as the JSON holds them.
#[test]
fn csv_bytes_are_the_stream_records_totals() {
    let saved = fixtures();
    let csv = Format::Csv.reporter(RateFormat::AutoBits, false).on_results(&saved);
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let mut checked = 0;
    for line in lines {
        let cells: Vec<&str> = line.split(',').collect();
        let s = saved.iter().find(|s| s.label == cells[col("source")]).unwrap();
        let flow = match cells[col("flow")] {
            "up" => netchar_model::Flow::Up,
            "down" => netchar_model::Flow::Down,
            _ => continue,
        };
        for (role, name) in
            [(netchar_model::Role::Sender, "sender_bytes"), (netchar_model::Role::Receiver, "receiver_bytes")]
        {
            let want: u64 = s
                .result
                .streams
                .iter()
                .filter(|r| r.flow == flow && r.role == role)
                .map(|r| r.bytes - r.omitted_bytes)
                .sum();
            assert_eq!(cells[col(name)], want.to_string(), "{} {name}", s.label);
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} figures checked");
}

/// The HTML report of a TCP and a request/response result (tables, the two latency plots,
/// hosts, the embedded JSON), as a whole: any change to the document shows in review.
#[test]
fn html_report() {
    let saved: Vec<Saved> = fixtures().into_iter().filter(|s| s.label == "tcp.json" || s.label == "rr.json").collect();
    assert_eq!(saved.len(), 2);
    check("report.html", &Format::Html.reporter(RateFormat::AutoBits, false).on_results(&saved));
}
