//! Golden test of the bwsweep table (`netchar suite bwsweep`) over a sweep the real binary
//! saved (tests/fixtures/suite-bwsweep.json): it must equal tests/expected/bwsweep.txt.
//! `UPDATE_GOLDEN=1` rewrites the file after a deliberate change; review the diff.

use netchar_report::sweep::SweepTableReporter;
use netchar_report::{parse_saved, Reporter};
use std::path::Path;

#[test]
fn the_sweep_table_shows_each_rate_both_ways_and_where_loss_starts() {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let text = std::fs::read_to_string(tests.join("fixtures/suite-bwsweep.json")).unwrap();
    let saved = parse_saved(&text, "suite-bwsweep.json").unwrap();
    let to_bps = saved
        .iter()
        .filter_map(|s| match s.result.test.spec.udp.as_ref().map(|u| u.rate) {
            Some(netchar_model::UdpRate::BitsPerSecond(b)) => Some(b),
            _ => None,
        })
        .max()
        .unwrap();
    let got = SweepTableReporter::new(to_bps).on_results(&saved);
    let path = tests.join("expected/bwsweep.txt");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &got).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap();
    assert_eq!(got, want, "the bwsweep table changed; if on purpose, rerun with UPDATE_GOLDEN=1");
}
