//! The target's console in the HTML report: a table of its lines under the plots, flagged
//! lines in the trouble style, and the flagged lines within the test marked on the
//! throughput chart's time axis.

use netchar_model::{ConsoleLine, ConsoleLog};
use netchar_report::{html, parse_saved, plots, Saved};
mod support;
use support::dir;

/// A TCP result with intervals over 0–2 s and a console: a line before the test, two
/// flagged ones within it, an unflagged one, and a flagged one after the last interval.
fn with_console() -> Saved {
    let text = std::fs::read_to_string(dir("fixtures-plots").join("tcp-p3-intervals.json")).unwrap();
    let mut s = parse_saved(&text, "tcp").unwrap().remove(0);
    let end = s.result.intervals.last().expect("intervals").end;
    let lines = [
        (-0.5, "booting"),
        (0.5, "sendto UDP data: No buffer space available"),
        (1.0, "link up <eth0>"),
        (1.5, "recvfrom timeout, giving up"),
        (end + 0.5, "tcp: connection reset"),
    ];
    s.result.console = Some(ConsoleLog {
        source: "serial /dev/ttyUSB0 115200".into(),
        lines: lines.iter().map(|&(t, l)| ConsoleLine::new(t, l.into())).collect(),
        dropped: 2,
        ended: None,
    });
    s
}

#[test]
fn flagged_console_lines_within_the_test_are_marked_on_the_throughput_chart() {
    let s = with_console();
    let chart = plots::throughput_chart(0, &s).expect("a throughput chart");
    let marks: Vec<(f64, &str)> = chart.markers.iter().map(|m| (m.x, m.label.as_str())).collect();
    assert_eq!(marks, vec![(0.5, "console: no_buffers"), (1.5, "console: giving_up")]);
}

#[test]
fn the_html_report_lists_every_console_line_with_its_time_and_flag() {
    let doc = html::document(&[with_console()], Default::default());
    let at = doc.find("<h2>Console</h2>").expect("a console section");
    assert!(doc[..at].contains("<h2>Plots</h2>"), "the console comes under the plots");
    let table = &doc[at..doc[at..].find("</table>").map(|e| at + e).unwrap()];
    assert!(table.contains("serial /dev/ttyUSB0 115200; 5 lines, 3 flagged, 2 more dropped"), "{table}");
    assert_eq!(table.matches("<tr").count(), 6, "a header and five lines: {table}");
    assert!(
        table.contains("<tr class=\"trouble\"><td class=\"n\">0.500</td><td>no_buffers</td><td><code>sendto UDP data: No buffer space available</code>"),
        "{table}"
    );
    assert!(table.contains("<tr><td class=\"n\">1.000</td><td></td><td><code>link up &lt;eth0&gt;</code>"), "{table}");
    assert!(table.contains("<td class=\"n\">-0.500</td>"), "{table}");
}
