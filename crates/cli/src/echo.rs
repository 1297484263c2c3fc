//! `netchar echo`: each `--pattern` group run in turn, one eCos-style line per group (or the
//! results as one JSON array).

use anyhow::Result;
use netchar_engine::client::{self, ClientError};
use netchar_engine::StopFlag;
use std::io::Write;

/// Runs each echo group in turn and prints one eCos-style line per group (or a JSON array).
pub(crate) fn run(plans: &[crate::plan::TcpPlan], stop: &StopFlag) -> Result<u8> {
    let mut stdout = std::io::stdout().lock();
    let json = plans.first().is_some_and(|p| p.output.json);
    let mut results = Vec::new();
    let mut code = crate::EXIT_OK;
    for plan in plans {
        if stop.is_raised() {
            code = crate::EXIT_INTERRUPTED;
            break;
        }
        let run = client::run(&plan.client, stop, &mut |_| {});
        if let Some(r) = &run.result {
            crate::save::save_json(&plan.output, r)?;
            if !json {
                stdout.write_all(netchar_report::text::echo_line(r).as_bytes())?;
                stdout.flush()?;
            }
            crate::report::keep(r);
            results.push(r.clone());
        }
        if let Some(e) = run.error {
            eprintln!("netchar: error: {e}");
            code = if matches!(e, ClientError::Interrupted) { crate::EXIT_INTERRUPTED } else { crate::EXIT_ERROR };
            break;
        }
    }
    if json {
        stdout.write_all(netchar_report::json::many_to_json(&results).as_bytes())?;
    }
    Ok(code)
}
