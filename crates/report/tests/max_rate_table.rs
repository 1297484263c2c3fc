//! The `udp --find-max-rate` search's table and plot over a search the real binary saved
//! (tests/fixtures-search/udp-find-max-rate.json: `-b 6G -t 0.3 --json` on loopback, ten trials).
//! The table must equal tests/expected/find-max-rate.txt; `UPDATE_GOLDEN=1` rewrites the file
//! after a deliberate change (review the diff).

use netchar_model::{TestResult, UdpRate};
use netchar_report::max_rate::{verdict, MaxRateTableReporter, Verdict, KEEP_PACE};
use netchar_report::plots::{charts, search_charts};
use netchar_report::{parse_saved, Reporter, Saved};
use std::path::{Path, PathBuf};

fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

fn trials() -> Vec<Saved> {
    let text = std::fs::read_to_string(tests_dir().join("fixtures-search/udp-find-max-rate.json")).unwrap();
    parse_saved(&text, "find-max-rate").unwrap()
}

/// (offered, received, loss %) of a trial, read straight from the result.
fn figures(r: &TestResult) -> (f64, f64, f64) {
    let f = r.summary.up.as_ref().unwrap();
    let offered = match r.test.spec.udp.as_ref().unwrap().rate {
        UdpRate::BitsPerSecond(b) => b as f64,
        _ => panic!("a trial is paced"),
    };
    (offered, f.receiver.bits_per_second, f.receiver.udp_received.as_ref().unwrap().loss_percent)
}

#[test]
fn the_table_equals_the_golden_file() {
    let got = MaxRateTableReporter::new(0.0).on_results(&trials());
    let path = tests_dir().join("expected/find-max-rate.txt");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &got).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap();
    assert_eq!(got, want, "the find-max-rate table changed; if on purpose, rerun with UPDATE_GOLDEN=1");
}

#[test]
fn each_row_is_its_trial_and_the_rate_found_is_the_highest_that_passed() {
    let saved = trials();
    let table = MaxRateTableReporter::new(0.0).on_results(&saved);
    let rows: Vec<&str> = table.lines().filter(|l| l.trim_start().starts_with(char::is_numeric)).collect();
    assert_eq!(rows.len(), saved.len());
    let mut best: Option<(f64, f64)> = None;
    for (n, (row, s)) in rows.iter().zip(&saved).enumerate() {
        let (offered, received, loss) = figures(&s.result);
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[0], (n + 1).to_string(), "{row}");
        assert_eq!(cells[5].parse::<f64>().unwrap(), (loss * 1e4).round() / 1e4, "{row}");
        // The verdict from the figures, by the rule the search applies.
        let pass = loss <= 0.0 && received >= KEEP_PACE * offered;
        assert_eq!(cells[6] == "pass", pass, "{row}: offered {offered}, received {received}, loss {loss}");
        if pass && best.is_none_or(|b| offered > b.0) {
            best = Some((offered, received));
        }
    }
    let (offered, _) = best.expect("the fixture's search found a rate");
    let last = table.lines().last().unwrap();
    let want = netchar_model::units::format_si(offered, "bit/s");
    assert!(last.starts_with(&format!("highest rate with loss <= 0%: {want} offered")), "{last}");
    assert!(last.ends_with(&format!("({} trials)", saved.len())), "{last}");
}

#[test]
fn loss_over_the_threshold_fails_and_a_laxer_threshold_passes_it() {
    let mut r = trials().into_iter().map(|s| s.result).find(|r| verdict(r, 0.0) == Verdict::Pass).unwrap();
    r.summary.up.as_mut().unwrap().receiver.udp_received.as_mut().unwrap().loss_percent = 0.5;
    assert_eq!(verdict(&r, 0.0), Verdict::Loss);
    assert_eq!(verdict(&r, 1.0), Verdict::Pass);
    r.summary.up.as_mut().unwrap().receiver.bits_per_second = figures(&r).0 * 0.9;
    assert_eq!(verdict(&r, 1.0), Verdict::FellBehind);
}

#[test]
fn a_search_ended_by_its_first_trial_still_has_its_one_point_chart() {
    let first_pass = trials().into_iter().find(|s| verdict(&s.result, 0.0).passed()).unwrap();
    let (offered, received, loss) = figures(&first_pass.result);
    let one = vec![Saved { label: "find-max-rate#1".into(), result: first_pass.result }];
    assert!(charts(&one).is_empty(), "one paced UDP result without intervals is no sweep");
    let all = search_charts(&one);
    assert_eq!(all.len(), 1);
    let c = &all[0];
    assert_eq!(c.stem, "sweep-find-max-rate");
    let point = |name: &str| c.series.iter().find(|s| s.name == name).unwrap().points.clone();
    // Gbit/s on both rate axes for a rate of about 1 Gbit/s, loss % as measured.
    let (div, unit) = netchar_report::plots::rate_unit(offered.max(received));
    assert_eq!(point("up received"), [(offered / div, received / div)]);
    assert_eq!(point("up loss %"), [(offered / div, loss)]);
    let svg = netchar_report::chart::to_svg(c).unwrap();
    let doc = roxmltree::Document::parse(&svg).expect("the SVG is well-formed XML");
    let texts: Vec<&str> = doc.descendants().filter(|n| n.has_tag_name("text")).filter_map(|n| n.text()).collect();
    for want in [format!("offered rate ({unit})"), format!("received rate ({unit})"), "loss (%)".into()] {
        assert!(texts.iter().any(|t| t.trim() == want), "no {want:?} in {texts:?}");
    }
}
