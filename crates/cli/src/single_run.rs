//! One run of a client test: the header, the live interval lines, the summary (or the JSON
//! document), and the run's exit status.

use anyhow::Result;
use netchar_engine::client::{self, ClientError};
use netchar_engine::StopFlag;
use netchar_report::text::TextReporter;
use netchar_report::Reporter;
use std::io::Write;

/// One run: header, live intervals, summary; returns the result and the run's exit status.
pub(crate) fn run(
    plan: &crate::plan::TcpPlan,
    stop: &StopFlag,
    print_json: bool,
    progress: &crate::progress::Progress,
) -> Result<(Option<netchar_model::TestResult>, u8)> {
    let out = &plan.output;
    let single = out.warmup + out.repeat == 1 && print_json;
    let mut text = TextReporter::new(out.format);
    let mut stdout = std::io::stdout().lock();
    if !out.json {
        let info = netchar_model::TestInfo {
            spec: plan.client.spec.clone(),
            // Brackets around an IPv6 literal, so "::1" and port 1 do not read as "::1:1".
            remote: if plan.client.host.contains(':') {
                format!("[{}]:{}", plan.client.host, plan.client.port)
            } else {
                format!("{}:{}", plan.client.host, plan.client.port)
            },
            // Not connected yet: the family is the flag's, or the literal address's.
            family: match (plan.client.family, plan.client.host.parse::<std::net::IpAddr>()) {
                (Some(client::Family::V6), _) | (None, Ok(std::net::IpAddr::V6(_))) => "ipv6".into(),
                (Some(client::Family::V4), _) | (None, Ok(std::net::IpAddr::V4(_))) => "ipv4".into(),
                (None, Err(_)) => "any".into(),
            },
            title: plan.client.title.clone(),
            client_cpu: plan.client.client_cpu,
            concurrent_tests: 1,
            protocol: plan.client.protocol.name().to_string(),
            peer_software: None,
        };
        progress.suspend(|| stdout.write_all(text.on_start(&info).as_bytes()).and_then(|_| stdout.flush()))?;
    }
    let mut print_error = None;
    let mut on_interval = |iv: &netchar_model::IntervalRecord| {
        if !out.json && print_error.is_none() {
            let line = text.on_interval(iv);
            if let Err(e) = progress.suspend(|| stdout.write_all(line.as_bytes()).and_then(|_| stdout.flush())) {
                print_error = Some(e);
            }
        }
    };
    let run = match plan.under_load {
        Some(load) => netchar_engine::under_load::run(&plan.client, load, stop, &mut on_interval),
        None => client::run(&plan.client, stop, &mut on_interval),
    };
    if let Some(e) = print_error {
        return Err(e.into());
    }
    // What ends the run prints under the progress line of the job around it.
    let code = progress.suspend(|| -> Result<u8> {
        if let Some(r) = run.result.as_ref().filter(|r| r.test.protocol != plan.client.protocol.name()) {
            eprintln!(
                "netchar: {}:{} answered as an {} server, not netchar: the test ran with --proto {}",
                plan.client.host, plan.client.port, r.test.protocol, r.test.protocol
            );
        }
        if let Some(result) = &run.result {
            crate::save::save_json(out, result)?;
            if out.json && single {
                stdout.write_all(netchar_report::json::to_json(result).as_bytes())?;
            } else if !out.json {
                stdout.write_all(text.on_finish(result).as_bytes())?;
            }
        } else if out.json && print_json {
            // Valid JSON even when no test ran: the error inside it.
            let doc = serde_json::json!({ "schema_version": netchar_model::SCHEMA_VERSION, "error": run.error.as_ref().map(|e| e.to_string()) });
            writeln!(stdout, "{doc:#}")?;
        }
        stdout.flush()?;
        let code = match &run.error {
            None => crate::EXIT_OK,
            Some(ClientError::Interrupted) => {
                eprintln!("netchar: interrupted; partial figures reported above");
                crate::EXIT_INTERRUPTED
            }
            Some(e) => {
                eprintln!("netchar: error: {e}");
                crate::EXIT_ERROR
            }
        };
        Ok(code)
    })?;
    Ok((run.result, code))
}
