//! The SVG plots: each parses as XML, has the expected series (one line per stream and the
//! sum), the axis labels with their units, and its lines carry the result's own interval rates.

use netchar_report::svg::{plot, throughput_series};
use netchar_report::{parse_saved, Saved};
use std::path::Path;

fn load(name: &str) -> Vec<Saved> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
    parse_saved(&std::fs::read_to_string(path).unwrap(), name).unwrap()
}

/// The parsed SVG's text elements and its polylines' (stroke-width, point count).
fn parse(svg: &str) -> (Vec<String>, Vec<(String, usize)>) {
    let doc = roxmltree::Document::parse(svg).expect("the SVG is well-formed XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let texts = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| n.text().unwrap_or("").trim().to_string())
        .collect();
    let lines = doc
        .descendants()
        .filter(|n| n.has_tag_name("polyline"))
        .map(|n| {
            (
                n.attribute("stroke-width").unwrap_or("").to_string(),
                n.attribute("points").unwrap().split_whitespace().count(),
            )
        })
        .collect();
    (texts, lines)
}

#[test]
fn two_stream_tcp_plot_has_both_streams_and_their_sum() {
    let saved = load("tcp-p2-intervals.json");
    let r = &saved[0].result;
    let intervals = r.intervals.len();
    assert_eq!(intervals, 4, "the fixture: -t 2 -i 0.5");
    // The series are the receiver's interval rates, and the sum line is the result's interval
    // sums, whose bytes are the streams' bytes. (Its rate is over the interval's common span,
    // a stream's over its own: in the last interval, where streams stop apart, they differ.)
    let series = throughput_series(r);
    let names: Vec<&str> = series.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["up stream 1", "up stream 2", "up sum"]);
    for (i, iv) in r.intervals.iter().enumerate() {
        let sum = iv.sum.iter().find(|s| s.role == netchar_model::Role::Receiver).unwrap();
        let streams: u64 =
            iv.streams.iter().filter(|s| s.role == netchar_model::Role::Receiver).map(|s| s.sample.bytes).sum();
        assert_eq!(sum.bytes, streams, "interval {i}");
        assert_eq!(series[2].points[2 * i], (iv.start, sum.bits_per_second));
        assert_eq!(series[2].points[2 * i + 1], (iv.end, sum.bits_per_second));
    }
    let want: Vec<f64> = r
        .intervals
        .iter()
        .flat_map(|iv| &iv.streams)
        .filter(|s| s.id == 1 && s.role == netchar_model::Role::Receiver)
        .map(|s| s.sample.bits_per_second)
        .collect();
    let got: Vec<f64> = series[0].points.iter().step_by(2).map(|p| p.1).collect();
    assert_eq!(got, want);

    let (texts, lines) = parse(&plot(&saved).unwrap());
    for t in ["time (s)", "throughput (Gbit/s)", "up stream 1", "up stream 2", "up sum"] {
        assert!(texts.iter().any(|x| x == t), "no text {t:?} in {texts:?}");
    }
    assert!(texts.iter().any(|x| x.contains("tcp-p2-intervals.json") && x.contains("throughput over time")));
    // Each series is a step line: the start and end of every interval.
    let data: Vec<_> = lines.iter().filter(|(_, n)| *n == 2 * intervals).collect();
    assert_eq!(data.len(), 3, "{lines:?}");
    assert_eq!(data.iter().filter(|(w, _)| w == "3").count(), 1, "one thick sum line");
}

#[test]
fn udp_reverse_plot_is_in_mbits_and_down() {
    let saved = load("udp-reverse-intervals.json");
    let (texts, lines) = parse(&plot(&saved).unwrap());
    for t in ["time (s)", "throughput (Mbit/s)", "down stream 1"] {
        assert!(texts.iter().any(|x| x == t), "no text {t:?} in {texts:?}");
    }
    assert!(!texts.iter().any(|x| x.contains("sum")), "one stream: no sum line");
    let n = saved[0].result.intervals.len();
    assert_eq!(lines.iter().filter(|(_, c)| *c == 2 * n).count(), 1);
}

#[test]
fn several_results_stack_in_one_document_and_get_a_file_each() {
    use netchar_report::Reporter;
    let mut saved = load("tcp-reverse-repeat3.json");
    saved.extend(load("udp.json"));
    let (texts, _) = parse(&plot(&saved).unwrap());
    for label in ["tcp-reverse-repeat3.json#1", "tcp-reverse-repeat3.json#3", "udp.json"] {
        assert!(texts.iter().any(|t| t.starts_with(&format!("{label}:"))), "no chart for {label}");
    }
    let files = netchar_report::svg::SvgReporter::default().on_results_files(&saved).unwrap();
    let names: Vec<&str> = files.iter().map(|f| f.0.as_str()).collect();
    assert_eq!(
        names,
        [
            "001-tcp-reverse-repeat3_json_1.svg",
            "002-tcp-reverse-repeat3_json_2.svg",
            "003-tcp-reverse-repeat3_json_3.svg",
            "004-udp_json.svg",
            "compare-tcp.svg"
        ]
    );
    for (_, svg) in &files {
        parse(svg);
    }
}
