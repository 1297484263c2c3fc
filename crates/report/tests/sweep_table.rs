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

/// The knee the table marks at `--knee-loss` `pct`, per direction: the first row whose own
/// loss column is above it, over a fixture that loses more at each higher rate.
#[test]
fn the_knee_is_the_first_rate_losing_more_than_the_threshold() {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let text = std::fs::read_to_string(tests.join("fixtures-plots/suite-bwsweep-knee.json")).unwrap();
    let saved = parse_saved(&text, "suite-bwsweep-knee.json").unwrap();
    let losses: Vec<f64> = saved.iter().map(|s| netchar_report::sweep::step_loss_percent(&s.result)).collect();
    let mut marked_any = 0;
    for pct in [0.0, 0.1, 1.0, 5.0, 50.0] {
        let table = SweepTableReporter::new(6_000_000_000).with_knee_loss(pct).on_results(&saved);
        let rows: Vec<&str> = table.lines().filter(|l| l.contains("bit/s") && !l.starts_with("no loss")).collect();
        assert_eq!(rows.len(), saved.len(), "{table}");
        let mut knee_found = [false; 2];
        for ((row, s), loss) in rows.iter().zip(&saved).zip(&losses) {
            // The row shows the step's own loss.
            let shown: f64 = row.split_whitespace().nth(7).unwrap().parse().unwrap();
            assert!((shown - loss).abs() < 5e-5, "{row}: {loss}");
            let d = usize::from(s.result.test.spec.direction == netchar_model::Direction::Down);
            let knee = !knee_found[d] && *loss > pct;
            knee_found[d] |= knee;
            assert_eq!(row.contains("<- knee: loss above"), knee, "--knee-loss {pct}: {row}");
            marked_any += usize::from(knee);
        }
        for (d, found) in knee_found.iter().enumerate() {
            if !found {
                assert!(table.contains(&format!("no loss above {pct}% up to")), "direction {d}: {table}");
            }
        }
    }
    assert!(marked_any >= 4, "the fixture has knees at the low thresholds");
}
