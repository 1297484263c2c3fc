//! `netchar`: flags → plan → engine → reporters. No protocol logic lives here.
#![forbid(unsafe_code)]

mod args;
mod plan;
mod quick;
mod serve;

use anyhow::Result;
use clap::Parser;
use netchar_engine::client::{self, ClientError};
use netchar_engine::StopFlag;
use netchar_report::text::TextReporter;
use netchar_report::Reporter;
use std::io::Write;
use std::process::ExitCode;

/// Exit status: the test ran and every figure was reported.
const EXIT_OK: u8 = 0;
/// Exit status: bad usage, no connection, a protocol error, or a test that failed part way.
const EXIT_ERROR: u8 = 2;
/// Exit status: interrupted (Ctrl-C / SIGTERM); what was measured was still reported.
const EXIT_INTERRUPTED: u8 = 130;

fn main() -> ExitCode {
    let cli = args::Cli::parse();
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            if is_broken_pipe(&e) {
                return ExitCode::from(EXIT_OK);
            }
            eprintln!("netchar: error: {e:#}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().filter_map(|c| c.downcast_ref::<std::io::Error>()).any(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}

fn run(cli: args::Cli) -> Result<u8> {
    let stop = install_signal_handlers()?;
    match cli.command {
        None => quick::run(&cli.time, cli.json, &stop),
        Some(args::Command::Server(a)) => serve::run(&a, &stop),
        Some(args::Command::Tcp(a)) => {
            let plan = plan::TcpPlan::from_args(&a)?;
            run_tcp(&plan, &stop)
        }
        Some(args::Command::Udp(a)) => {
            let plan = plan::TcpPlan::from_udp_args(&a)?;
            run_tcp(&plan, &stop)
        }
        Some(args::Command::Echo(a)) => {
            let plans = plan::TcpPlan::from_echo_args(&a)?;
            run_echo(&plans, &stop)
        }
        Some(args::Command::Crr(a)) => {
            let plan = plan::TcpPlan::from_crr_args(&a)?;
            run_tcp(&plan, &stop)
        }
        Some(args::Command::Rr(a)) => {
            let plan = plan::TcpPlan::from_rr_args(&a)?;
            run_tcp(&plan, &stop)
        }
    }
}

/// SIGINT and SIGTERM raise the stop flag; a second one ends the process at once.
fn install_signal_handlers() -> Result<StopFlag> {
    let stop = StopFlag::new();
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, i32::from(EXIT_INTERRUPTED), stop.as_arc())?;
        signal_hook::flag::register(sig, stop.as_arc())?;
    }
    Ok(stop)
}

fn run_tcp(plan: &plan::TcpPlan, stop: &StopFlag) -> Result<u8> {
    let out = &plan.output;
    let mut text = TextReporter::new(out.format);
    let mut stdout = std::io::stdout().lock();
    if !out.json {
        let info = netchar_model::TestInfo {
            spec: plan.client.spec.clone(),
            remote: format!("{}:{}", plan.client.host, plan.client.port),
            family: match plan.client.family {
                Some(client::Family::V6) => "ipv6".into(),
                Some(client::Family::V4) => "ipv4".into(),
                None => "any".into(),
            },
            title: plan.client.title.clone(),
            client_cpu: plan.client.client_cpu,
            concurrent_tests: 1,
        };
        stdout.write_all(text.on_start(&info).as_bytes())?;
        stdout.flush()?;
    }
    let mut print_error = None;
    let mut on_interval = |iv: &netchar_model::IntervalRecord| {
        if !out.json && print_error.is_none() {
            if let Err(e) = stdout.write_all(text.on_interval(iv).as_bytes()).and_then(|_| stdout.flush()) {
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
    if let Some(result) = &run.result {
        save_json(out, result)?;
        if out.json {
            stdout.write_all(netchar_report::json::to_json(result).as_bytes())?;
        } else {
            stdout.write_all(text.on_finish(result).as_bytes())?;
        }
    } else if out.json {
        // Valid JSON even when no test ran: the error inside it.
        let doc = serde_json::json!({ "schema_version": netchar_model::SCHEMA_VERSION, "error": run.error.as_ref().map(|e| e.to_string()) });
        writeln!(stdout, "{doc:#}")?;
    }
    stdout.flush()?;
    Ok(match &run.error {
        None => EXIT_OK,
        Some(ClientError::Interrupted) => {
            eprintln!("netchar: interrupted; partial figures reported above");
            EXIT_INTERRUPTED
        }
        Some(e) => {
            eprintln!("netchar: error: {e}");
            EXIT_ERROR
        }
    })
}

/// Writes `--json-out` atomically: a temporary file beside it, then a rename.
fn save_json(out: &plan::Output, result: &netchar_model::TestResult) -> Result<()> {
    use anyhow::Context;
    let Some(path) = &out.json_out else {
        return Ok(());
    };
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, netchar_report::json::to_json(result))
        .with_context(|| format!("--json-out: cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("--json-out: cannot rename to {}", path.display()))?;
    Ok(())
}

/// Runs each echo group in turn and prints one eCos-style line per group (or a JSON array).
fn run_echo(plans: &[plan::TcpPlan], stop: &StopFlag) -> Result<u8> {
    let mut stdout = std::io::stdout().lock();
    let json = plans.first().is_some_and(|p| p.output.json);
    let mut results = Vec::new();
    let mut code = EXIT_OK;
    for plan in plans {
        if stop.is_raised() {
            code = EXIT_INTERRUPTED;
            break;
        }
        let run = client::run(&plan.client, stop, &mut |_| {});
        if let Some(r) = &run.result {
            save_json(&plan.output, r)?;
            if !json {
                stdout.write_all(netchar_report::text::echo_line(r).as_bytes())?;
                stdout.flush()?;
            }
            results.push(r.clone());
        }
        if let Some(e) = run.error {
            eprintln!("netchar: error: {e}");
            code = if matches!(e, ClientError::Interrupted) { EXIT_INTERRUPTED } else { EXIT_ERROR };
            break;
        }
    }
    if json {
        stdout.write_all(netchar_report::json::many_to_json(&results).as_bytes())?;
    }
    Ok(code)
}
