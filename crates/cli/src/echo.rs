//! `netchar echo`: each `--pattern` group run in turn, one eCos-style line per group (or the
//! results as one JSON array).

use crate::figure_files::FigureFiles;
use crate::progress::Progress;
use crate::reporters::Reporters;
use anyhow::Result;
use netchar_engine::client::{self, ClientError};
use netchar_engine::StopFlag;
use netchar_report::ecos_lines::EcosLinesReporter;
use netchar_report::json::JobJsonReporter;

/// Runs each echo group in turn and prints one eCos-style line per group (or a JSON array).
pub(crate) fn run(plans: &[crate::plan::TcpPlan], figures: &FigureFiles, stop: &StopFlag) -> Result<u8> {
    let json = plans.first().is_some_and(|p| p.output.json);
    let mut reporters =
        if json { Reporters::of(Box::new(JobJsonReporter)) } else { Reporters::of(Box::new(EcosLinesReporter)) }
            .with_figures(figures);
    // Short tests, one after another: no progress line.
    let progress = Progress::hidden();
    let mut results = Vec::new();
    let mut code = crate::exit::OK;
    for plan in plans {
        if stop.is_raised() {
            code = crate::exit::INTERRUPTED;
            break;
        }
        let run = crate::console::around(plan, stop, || client::run(&plan.client, stop, &mut |_| {}))?;
        if let Some(r) = &run.result {
            crate::save::save_json(&plan.output, r)?;
            reporters.emit(&progress, |rep| rep.on_finish(r))?;
            results.push(r.clone());
        }
        if let Some(e) = run.error {
            eprintln!("netchar: error: {e}");
            code = if matches!(e, ClientError::Interrupted) { crate::exit::INTERRUPTED } else { crate::exit::ERROR };
            break;
        }
    }
    reporters.emit(&progress, |rep| rep.on_job_end(&results))?;
    Ok(code)
}

/// `echo -t`: the pattern sets what is echoed, so a duration cannot apply; the command that
/// runs request/response for a time is named.
pub(crate) fn refuse_time(a: &crate::args::EchoArgs) -> Result<u8> {
    let t = a.common.time.as_deref().unwrap_or_default();
    anyhow::bail!(
        "echo -t {t}: echo runs its --pattern ({}), not for a time; for timed request/response use netchar rr HOST -t {t} -l SIZE",
        a.pattern
    )
}
