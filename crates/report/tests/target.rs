//! A target's own figures in the reports: the results in tests/fixtures-target, written by the
//! real client against the C responder on QEMU's mps2-an386 board (`-icount shift=5`,
//! `--target-ns-per-instruction 32`): TCP up `-n 4000000`, UDP up at 20 Mbit/s (more than the
//! board takes: its controller's FIFO ran nearly full), rr `-n 2000`. The text summary's and
//! the HTML report's target parts must equal tests/expected/target-*.

use netchar_model::units::RateFormat;
use netchar_model::TestResult;
use netchar_report::{html, parse_saved, text, Saved};
mod support;
use support::{check, dir};

fn fixture(name: &str) -> Saved {
    let text = std::fs::read_to_string(dir("fixtures-target").join(name)).unwrap();
    parse_saved(&text, name).unwrap().remove(0)
}

fn all() -> Vec<Saved> {
    ["board-tcp.json", "board-udp.json", "board-rr.json"].into_iter().map(fixture).collect()
}

/// The lines of the summary from `CPU  server:` on.
fn target_part(r: &TestResult) -> String {
    let s = text::summary(r, RateFormat::AutoBits);
    s[s.find("CPU  server:").expect("the server's CPU line")..].to_string()
}

#[test]
fn the_text_summary_says_the_targets_idle_share_cost_counters_and_drops() {
    let got: String = all().iter().map(|s| format!("{}:\n{}", s.label, target_part(&s.result))).collect();
    check("target-summary.txt", &got);
    // Drops only where a counter of trouble moved: the UDP run's nearly full FIFO.
    assert_eq!(got.matches("target drops:").count(), 1, "{got}");
    assert!(got.contains("target drops: nic_near_full 113\n"), "{got}");
}

#[test]
fn the_derived_figures_agree_with_the_raw_ones() {
    for s in all() {
        let r = &s.result;
        let t = r.target.as_ref().expect("a target");
        let cpu = r.cpu.remote.as_ref().unwrap();
        let busy = t.busy_seconds.unwrap();
        assert_eq!(busy, cpu.user_seconds + cpu.system_seconds, "{}", s.label);
        let per = t.busy_ns_per_unit().unwrap();
        assert!((per * t.units.unwrap() as f64 / 1e9 - busy).abs() < 1e-9, "{}", s.label);
        assert!((t.instructions_per_unit().unwrap() * 32.0 - per).abs() < 1e-9, "{}", s.label);
        let (count, per_second) = (t.figures.idle_count.unwrap(), t.figures.idle_per_second.unwrap());
        let idle = count as f64 / (per_second as f64 * cpu.wall_seconds) * 100.0;
        assert!((t.idle_pct.unwrap() - idle).abs() < 1e-9, "{}", s.label);
        assert_eq!(t.build.as_deref(), r.remote_host.as_ref().map(|h| h.kernel.as_str()));
    }
}

#[test]
fn the_html_report_has_a_target_table_per_result_with_its_build_and_drops_marked() {
    let mut saved = all();
    // A result from a far end that reports nothing of itself has no table.
    let text = std::fs::read_to_string(dir("fixtures").join("tcp.json")).unwrap();
    saved.extend(parse_saved(&text, "tcp.json").unwrap());
    let doc = html::document(&saved, RateFormat::AutoBits);
    let start = doc.find("<h2>Target</h2>").expect("a target section");
    let end = start + doc[start..].find("<h2>Plots</h2>").expect("the plots follow");
    check("target.html", &doc[start..end]);
    assert_eq!(doc.matches("<table id=\"target-").count(), 3);
    assert_eq!(doc.matches("<tr class=\"trouble\">").count(), 1);
}
