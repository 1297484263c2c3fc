//! The gates of a test: `--expect` on the mean of the counted runs and `--baseline` against a
//! saved result. A miss is one line on stderr with the measured value; the exit status is 1.

use anyhow::Result;

/// The exit status of a job that ended with `code` once its gates judged `runs`: a job that
/// ran well and missed a gate exits [`crate::exit::GATE`]; any other keeps its own.
pub(crate) fn judged(out: &crate::plan::Output, runs: &[netchar_model::TestResult], code: u8) -> Result<u8> {
    if code == crate::exit::OK && !runs.is_empty() && !gates_hold(out, runs)? {
        return Ok(crate::exit::GATE);
    }
    Ok(code)
}

/// Checks `--expect` (on the mean of the counted runs) and `--baseline`; prints one line per
/// miss with the measured value. Returns whether every gate held.
pub(crate) fn gates_hold(out: &crate::plan::Output, runs: &[netchar_model::TestResult]) -> Result<bool> {
    use netchar_model::figures::{figures, higher_is_better};
    let mean = |path: &str| {
        let v = figures(runs, path);
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let mut ok = true;
    for e in &out.expect {
        match mean(&e.path) {
            Some(m) if e.holds(m) => {}
            Some(m) => {
                eprintln!(
                    "netchar: expectation not met: {} (measured {})",
                    e.text,
                    netchar_stats::compare::format_g(m, 8)
                );
                ok = false;
            }
            None => {
                eprintln!("netchar: expectation not met: {} ({} is not in the result)", e.text, e.path);
                ok = false;
            }
        }
    }
    if let Some((file, max_pct)) = &out.baseline {
        let text = crate::files::read_text(file, crate::files::RESULT_FILE_CAP)
            .map_err(|e| anyhow::anyhow!("--baseline {}: {e}", file.display()))?;
        let base: Vec<netchar_model::TestResult> =
            netchar_report::parse_saved(&text, &format!("--baseline {}", file.display()))
                .map_err(anyhow::Error::msg)?
                .into_iter()
                .map(|s| s.result)
                .collect();
        // A baseline measured another way is no reference for this run: refused before any
        // figure is judged, unless the user named the difference.
        let verdict = crate::same_method::check(
            &[
                (format!("--baseline {}", file.display()), base.iter().map(|r| r.method()).collect()),
                ("this run".to_string(), runs.iter().map(|r| r.method()).collect()),
            ],
            &out.accept_difference,
        );
        if let Some(refusal) = verdict.refused {
            anyhow::bail!(refusal);
        }
        for difference in verdict.accepted {
            eprintln!("netchar: note: this run differs from the baseline in {difference}, as accepted");
        }
        let path = runs[0].headline_path();
        let old = figures(&base, path);
        let (Some(now), false) = (mean(path), old.is_empty()) else {
            anyhow::bail!("--baseline: {} has no {path}", file.display());
        };
        let was = old.iter().sum::<f64>() / old.len() as f64;
        let change = if was != 0.0 { 100.0 * (now - was) / was.abs() } else { 0.0 };
        let regression = if higher_is_better(path) { -change } else { change };
        if regression > *max_pct {
            eprintln!(
                "netchar: regression beyond {max_pct}%: {path} {} now, {} in {} ({change:+.2}%)",
                netchar_stats::compare::format_g(now, 8),
                netchar_stats::compare::format_g(was, 8),
                file.display()
            );
            ok = false;
        }
    }
    Ok(ok)
}
