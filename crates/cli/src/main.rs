//! `netchar`: flags → plan → engine → reporters. No protocol logic lives here.
#![forbid(unsafe_code)]

mod args;
mod exporter;
mod files;
mod generate;
mod mesh;
mod metrics;
mod nc_test;
mod plan;
mod plans;
mod pscheduler;
mod quick;
mod report;
mod serve;
mod suites;

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
    let cli = match args::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
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

/// Help and version print as clap prints them; every usage error is one line, `netchar:
/// error: <what is wrong>; see netchar SUBCOMMAND --help`, because clap's usage block after
/// the message buries it, and scripts reading stderr expect one line per error.
fn usage_error(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            return ExitCode::from(EXIT_OK);
        }
        // Help in place of an error is still a usage error (clap exits 2 there too).
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            return ExitCode::from(EXIT_ERROR);
        }
        _ => {}
    }
    let sub = match e.kind() {
        ErrorKind::InvalidSubcommand => String::new(),
        _ => subcommand_named().map(|s| format!(" {s}")).unwrap_or_default(),
    };
    eprintln!("netchar: error: {}; see netchar{sub} --help", usage_message(e));
    ExitCode::from(EXIT_ERROR)
}

/// What is wrong, on one line: `FLAG VALUE: reason` for a bad value, else clap's first
/// paragraph with its "did you mean" suggestion.
fn usage_message(e: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let text = |kind| match e.get(kind) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        Some(ContextValue::Strings(v)) if !v.is_empty() => Some(v.join("', '")),
        _ => None,
    };
    let bad_value = matches!(e.kind(), ErrorKind::ValueValidation | ErrorKind::InvalidValue);
    if let (true, Some(arg), Some(value)) = (bad_value, text(ContextKind::InvalidArg), text(ContextKind::InvalidValue))
    {
        // "--port <PORT>" names the flag and its placeholder; the user knows the flag.
        let flag = arg.split_whitespace().next().unwrap_or(&arg);
        let reason = if arg.ends_with("<PORT>") {
            "not a port number (0-65535)".to_string()
        } else if let Some(valid) = text(ContextKind::ValidValue) {
            format!("expected one of '{valid}'")
        } else {
            value_problem(e, &value)
        };
        let shown = if value.is_empty() { "''" } else { &value };
        return format!("{flag} {shown}: {reason}");
    }
    // clap's first paragraph; "... not provided:" continues on the lines after it.
    let rendered = e.render().to_string();
    let lines: Vec<&str> = rendered.lines().take_while(|l| !l.trim().is_empty()).map(str::trim).collect();
    let joined = lines.join(" ");
    let mut what = joined.strip_prefix("error: ").unwrap_or(&joined).to_string();
    for kind in [ContextKind::SuggestedArg, ContextKind::SuggestedSubcommand, ContextKind::SuggestedValue] {
        if let Some(s) = text(kind) {
            what.push_str(&format!(" (did you mean '{s}'?)"));
        }
    }
    what
}

/// Why a value was refused, in words rather than Rust's ("invalid digit found in string").
fn value_problem(e: &clap::Error, value: &str) -> String {
    use std::num::IntErrorKind;
    let Some(source) = std::error::Error::source(e) else { return "invalid value".into() };
    if let Some(int) = source.downcast_ref::<std::num::ParseIntError>() {
        return match int.kind() {
            IntErrorKind::PosOverflow => "too large",
            IntErrorKind::NegOverflow => "too small",
            _ => "not a whole number",
        }
        .into();
    }
    if source.is::<std::num::ParseFloatError>() {
        return "not a number".into();
    }
    let text = source.to_string();
    // clap's range message repeats the value ("70000 is not in 0..=65535").
    text.strip_prefix(&format!("{value} is ")).map(str::to_string).unwrap_or(text)
}

/// The subcommand on the command line, for the `--help` to point to. Scanned rather than
/// taken from the error, because clap's value errors do not say which subcommand they are in.
fn subcommand_named() -> Option<String> {
    use clap::CommandFactory;
    let cli = args::Cli::command();
    let known: Vec<&str> = cli.get_subcommands().map(|c| c.get_name()).collect();
    // args_os: std::env::args panics on an argument that is not UTF-8 (a file name).
    std::env::args_os().skip(1).filter_map(|a| a.into_string().ok()).find(|a| known.contains(&a.as_str()))
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().filter_map(|c| c.downcast_ref::<std::io::Error>()).any(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}

fn run(cli: args::Cli) -> Result<u8> {
    let stop = install_signal_handlers()?;
    match cli.command {
        None => quick::run(&cli.time, cli.json, &stop),
        Some(args::Command::Server(a)) => serve::run(&a, &stop),
        Some(args::Command::Tcp(a)) if nc_test::wanted(&a.common.proto) => nc_test::tcp(&a, &stop),
        Some(args::Command::Udp(a)) if nc_test::wanted(&a.common.proto) => nc_test::udp(&a, &stop),
        Some(args::Command::Echo(a)) if nc_test::wanted(&a.common.proto) => nc_test::echo(&a, &stop),
        Some(args::Command::Suite(a)) if nc_test::wanted(&a.proto) => nc_test::suite(&a, &stop),
        Some(args::Command::Tcp(a)) => {
            let plan = plan::TcpPlan::from_args(&a)?;
            run_tcp(&plan, &stop)
        }
        Some(args::Command::Udp(a)) => {
            let plan = plan::TcpPlan::from_udp_args(&a)?;
            if a.find_max_rate {
                return suites::find_max_rate(&plan, a.loss, &stop);
            }
            run_tcp(&plan, &stop)
        }
        Some(args::Command::Suite(a)) => run_suite(&a, &stop),
        Some(args::Command::Run(a)) => run_plan(&a, &stop),
        Some(args::Command::Compare(a)) => run_compare(&a),
        Some(args::Command::Report(a)) => report::run(&a),
        Some(args::Command::Completions(a)) => generate::completions(&a),
        Some(args::Command::Man(a)) => generate::man(&a),
        Some(args::Command::Pscheduler(a)) => pscheduler::run(a.method),
        Some(args::Command::Exporter(a)) => exporter::run(a, &stop),
        Some(args::Command::Mesh(a)) => mesh::run(a),
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

/// Exit status: a `--expect` or `--baseline` gate was not met.
const EXIT_GATE: u8 = 1;

/// Runs a client test: `--warmup` uncounted runs, `--repeat` counted ones (each printed and
/// saved as it finishes, so nothing measured is lost if a later run fails), then the
/// statistics and the gates.
fn run_tcp(plan: &plan::TcpPlan, stop: &StopFlag) -> Result<u8> {
    run_collecting(plan, stop, None)
}

/// [`run_tcp`], handing the counted results to `sink` instead of printing JSON (plans print
/// every test's results as one array at the end).
fn run_collecting(
    plan: &plan::TcpPlan,
    stop: &StopFlag,
    mut sink: Option<&mut Vec<netchar_model::TestResult>>,
) -> Result<u8> {
    let out = &plan.output;
    let total = out.warmup + out.repeat;
    let mut plan_owned;
    let plan = if total > 1 && plan.client.busy_wait.is_zero() {
        // Back to back runs: the server may still be closing the previous one.
        plan_owned = plan.clone();
        plan_owned.client.busy_wait = std::time::Duration::from_secs(5);
        &plan_owned
    } else {
        plan
    };
    let mut kept = Vec::new();
    let mut code = EXIT_OK;
    for i in 0..total {
        if stop.is_raised() {
            code = EXIT_INTERRUPTED;
            break;
        }
        if total > 1 && !out.json {
            let what = if i < out.warmup {
                format!("warm-up run {} of {}", i + 1, out.warmup)
            } else {
                format!("run {} of {}", i + 1 - out.warmup, out.repeat)
            };
            println!("=== {what}");
        }
        let (result, run_code) = run_once(plan, stop, sink.is_none())?;
        if let Some(r) = result {
            if i >= out.warmup {
                if let Some(dir) = &out.save {
                    save_run(dir, &r, i + 1 - out.warmup)?;
                }
                kept.push(r);
            }
        }
        if run_code != EXIT_OK {
            code = run_code;
            break;
        }
    }
    let mut stdout = std::io::stdout().lock();
    if out.json && total > 1 && sink.is_none() {
        stdout.write_all(netchar_report::json::many_to_json(&kept).as_bytes())?;
    }
    let docs: Vec<serde_json::Value> = kept.iter().filter_map(|r| serde_json::to_value(r).ok()).collect();
    if let Some(sink) = sink.as_mut() {
        sink.extend(kept.iter().cloned());
    }
    if out.repeat > 1 && !out.json && !docs.is_empty() {
        stdout.write_all(repeat_statistics(&docs).as_bytes())?;
    }
    stdout.flush()?;
    if code == EXIT_OK && !docs.is_empty() && !gates_hold(out, &docs)? {
        code = EXIT_GATE;
    }
    Ok(code)
}

/// Mean ± 95% confidence interval (Student's t) of the headline figures over the counted runs.
fn repeat_statistics(docs: &[serde_json::Value]) -> String {
    use netchar_stats::compare::{format_g, mean_interval, SetStats};
    let mut paths = vec![metrics::headline(&docs[0])];
    if paths[0].starts_with("rr.") {
        paths.push("rr.latency_us.p50");
        paths.push("rr.latency_us.p99");
    }
    let mut out = format!("=== {} runs: mean ± 95% confidence interval (Student's t)\n", docs.len());
    for path in paths {
        let values = metrics::collect(docs, path);
        if let Some(s) = SetStats::of(&values) {
            let ci = mean_interval(&s, 95.0);
            let pct = if s.mean != 0.0 { 100.0 * ci / s.mean.abs() } else { 0.0 };
            out.push_str(&format!(
                "{path}: {} ± {} ({pct:.2}%), min {}, max {}, stddev {}\n",
                format_g(s.mean, 6),
                format_g(ci, 6),
                format_g(s.min, 6),
                format_g(s.max, 6),
                format_g(s.stddev, 6)
            ));
        }
    }
    out
}

/// Checks `--expect` (on the mean of the counted runs) and `--baseline`; prints one line per
/// miss with the measured value. Returns whether every gate held.
fn gates_hold(out: &plan::Output, docs: &[serde_json::Value]) -> Result<bool> {
    let mean = |path: &str| {
        let v = metrics::collect(docs, path);
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
        use anyhow::Context;
        let text = files::read_text(file, files::RESULT_FILE_CAP)
            .map_err(|e| anyhow::anyhow!("--baseline {}: {e}", file.display()))?;
        let base: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("--baseline: {} is not a netchar JSON result", file.display()))?;
        let path = metrics::headline(&docs[0]);
        let old = metrics::collect(std::slice::from_ref(&base), path);
        let (Some(now), false) = (mean(path), old.is_empty()) else {
            anyhow::bail!("--baseline: {} has no {path}", file.display());
        };
        let was = old.iter().sum::<f64>() / old.len() as f64;
        let change = if was != 0.0 { 100.0 * (now - was) / was.abs() } else { 0.0 };
        let regression = if metrics::higher_is_better(path) { -change } else { change };
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

/// One run: header, live intervals, summary; returns the result and the run's exit status.
fn run_once(
    plan: &plan::TcpPlan,
    stop: &StopFlag,
    print_json: bool,
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
    if let Some(r) = run.result.as_ref().filter(|r| r.test.protocol != plan.client.protocol.name()) {
        eprintln!(
            "netchar: {}:{} answered as an {} server, not netchar: the test ran with --proto {}",
            plan.client.host, plan.client.port, r.test.protocol, r.test.protocol
        );
    }
    if let Some(result) = &run.result {
        save_json(out, result)?;
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
        None => EXIT_OK,
        Some(ClientError::Interrupted) => {
            eprintln!("netchar: interrupted; partial figures reported above");
            EXIT_INTERRUPTED
        }
        Some(e) => {
            eprintln!("netchar: error: {e}");
            EXIT_ERROR
        }
    };
    Ok((run.result, code))
}

/// `--save DIR`: one file per counted run, written to a temporary name and renamed.
fn save_run(dir: &std::path::Path, r: &netchar_model::TestResult, index: u32) -> Result<()> {
    use anyhow::Context;
    std::fs::create_dir_all(dir).with_context(|| format!("--save: cannot create {}", dir.display()))?;
    let stamp: String = r.started_at.chars().filter(|c| c.is_ascii_alphanumeric()).collect();
    let path = dir.join(format!("{stamp}-{}-{index:03}.json", r.test.spec.kind.name()));
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, netchar_report::json::to_json(r))
        .with_context(|| format!("--save: cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("--save: cannot rename to {}", path.display()))?;
    Ok(())
}

/// `netchar compare`: ministat's report over result files or plain number files.
fn run_compare(a: &args::CompareArgs) -> Result<u8> {
    use anyhow::Context;
    if !netchar_stats::compare::CONFIDENCES.contains(&a.confidence) {
        anyhow::bail!("-c {}: use one of 80, 90, 95, 98, 99, 99.5", a.confidence);
    }
    let mut sets = Vec::new();
    let mut metric = a.metric.clone();
    for file in &a.files {
        if file.is_dir() {
            // A directory written by --save: every JSON result in it is one run of the set.
            let mut docs = Vec::new();
            let mut entries: Vec<_> = std::fs::read_dir(file)
                .with_context(|| format!("cannot read {}", file.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .collect();
            entries.sort();
            for p in entries {
                let text = files::read_text(&p, files::RESULT_FILE_CAP)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
                docs.push(
                    serde_json::from_str::<serde_json::Value>(&text)
                        .with_context(|| format!("{} is not JSON", p.display()))?,
                );
            }
            let Some(first) = docs.first() else { anyhow::bail!("{} holds no JSON results", file.display()) };
            let path = metric.get_or_insert_with(|| metrics::headline(first).to_string()).clone();
            let values = metrics::collect(&docs, &path);
            if values.len() < 3 {
                anyhow::bail!("{} has {} values of {path}: a set needs at least 3", file.display(), values.len());
            }
            sets.push((file.display().to_string(), values));
            continue;
        }
        let text =
            files::read_text(file, files::RESULT_FILE_CAP).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
        let values = match serde_json::from_str::<serde_json::Value>(&text) {
            Ok(doc) if doc.is_object() || doc.is_array() => {
                let first = if doc.is_array() { doc[0].clone() } else { doc.clone() };
                let path = metric.get_or_insert_with(|| metrics::headline(&first).to_string()).clone();
                let v = metrics::collect(std::slice::from_ref(&doc), &path);
                if v.is_empty() {
                    anyhow::bail!("{}: no {path} in it (choose one with --metric)", file.display());
                }
                v
            }
            _ => plain_numbers(&text)
                .with_context(|| format!("{}: neither a netchar result nor numbers", file.display()))?,
        };
        if values.len() < 3 {
            // As ministat: too few points for a meaningful interval.
            anyhow::bail!("{} has {} values: a set needs at least 3", file.display(), values.len());
        }
        sets.push((file.display().to_string(), values));
    }
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(netchar_stats::compare::report(&sets, a.confidence, a.welch).as_bytes())?;
    Ok(EXIT_OK)
}

/// ministat's input: the first number of each line; blank lines and `#` comments skipped.
fn plain_numbers(text: &str) -> Result<Vec<f64>> {
    let mut v = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let first = line.split_whitespace().next().unwrap_or("");
        v.push(first.parse::<f64>().map_err(|_| anyhow::anyhow!("line {}: {first:?} is not a number", n + 1))?);
    }
    Ok(v)
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

/// `netchar suite NAME HOST ...`.
fn run_suite(a: &args::SuiteArgs, stop: &StopFlag) -> Result<u8> {
    use netchar_model::units::parse_bit_rate;
    match a.suite.as_str() {
        "bwsweep" => {
            let rate = |flag: &str, v: &str| parse_bit_rate(v).map_err(|e| anyhow::anyhow!("{flag} {v}: {e}"));
            let (from, to, step) = (rate("--from", &a.from)?, rate("--to", &a.to)?, rate("--step", &a.step)?);
            let secs = plan::seconds("--duration", &a.duration)?;
            let udp = args::UdpArgs::for_suite(&a.host, a.port, secs);
            let plan = plan::TcpPlan::from_udp_args(&udp)?;
            suites::bwsweep(&plan, from, to, step, a.json, stop)
        }
        "netio" if a.proto == "netio" => suites::netio_peer(a, stop),
        "netio" if !matches!(a.proto.as_str(), "auto" | "netchar") => {
            anyhow::bail!("suite netio --proto {}: one of auto, netchar, netio", a.proto)
        }
        "netio" | "sizes" => {
            let secs = plan::seconds("--duration", &a.duration)?;
            let udp = plan::TcpPlan::from_udp_args(&args::UdpArgs::for_suite(&a.host, a.port, secs))?;
            let mut tcp = udp.clone();
            tcp.client.spec = netchar_model::TestSpec {
                end: udp.client.spec.end,
                interval_seconds: 0.0,
                ..netchar_model::TestSpec::tcp_default()
            };
            if a.suite == "netio" {
                suites::netio(&tcp, &udp, a.json, stop)
            } else {
                suites::sizes(&tcp, &udp, a.json, stop)
            }
        }
        "ecos" => ecos_suite(a, stop),
        other => anyhow::bail!("suite {other:?}: known suites: ecos, bwsweep, netio, sizes"),
    }
}

/// `netchar run PLAN [HOST]`: every test of the plan validated first, then run in order.
fn run_plan(a: &args::RunArgs, stop: &StopFlag) -> Result<u8> {
    let file = a.plan.display().to_string();
    let text = files::read_text(&a.plan, files::SMALL_FILE_CAP).map_err(|e| anyhow::anyhow!("the plan {file}: {e}"))?;
    let tests = plans::expand(&text, &file, a.host.as_deref())?;
    // Validate every test before any traffic.
    let mut planned = Vec::new();
    for t in &tests {
        let mut argv = t.argv.clone();
        if a.json {
            argv.push("--json".into());
        }
        let where_ = || format!("{file}:{}: {}", t.line, t.name);
        let cli = args::Cli::try_parse_from(&argv).map_err(|e| {
            let first = e.to_string().lines().next().unwrap_or("").trim_start_matches("error: ").to_string();
            anyhow::anyhow!("{}: {first}", where_())
        })?;
        let plans = match cli.command {
            Some(args::Command::Tcp(x)) => plan::TcpPlan::from_args(&x).map(|p| vec![p]),
            Some(args::Command::Udp(x)) => plan::TcpPlan::from_udp_args(&x).map(|p| vec![p]),
            Some(args::Command::Rr(x)) => plan::TcpPlan::from_rr_args(&x).map(|p| vec![p]),
            Some(args::Command::Crr(x)) => plan::TcpPlan::from_crr_args(&x).map(|p| vec![p]),
            Some(args::Command::Echo(x)) => plan::TcpPlan::from_echo_args(&x),
            _ => anyhow::bail!("{}: not a test", where_()),
        }
        .map_err(|e| anyhow::anyhow!("{}: {e}", where_()))?;
        planned.extend(plans.into_iter().map(|p| (t, p)));
    }
    let mut results = Vec::new();
    let mut worst = EXIT_OK;
    for (i, (t, plan)) in planned.iter().enumerate() {
        if stop.is_raised() {
            worst = EXIT_INTERRUPTED;
            break;
        }
        if !a.json {
            println!("=== {} of {}: {}", i + 1, planned.len(), t.name);
        }
        let code = run_collecting(plan, stop, Some(&mut results))?;
        if code == EXIT_INTERRUPTED {
            worst = code;
            break;
        }
        worst = worst.max(code);
        if t.pause_seconds > 0.0 && i + 1 < planned.len() {
            std::thread::sleep(std::time::Duration::from_secs_f64(t.pause_seconds));
        }
    }
    if a.json {
        std::io::stdout().lock().write_all(netchar_report::json::many_to_json(&results).as_bytes())?;
    }
    Ok(worst)
}

/// `netchar suite ecos`: the eCos nc6_test_master sequence, printed as it printed it: no load
/// (UDP and TCP echo, send, receive), then the server ("slave") under 0-50% compute load, then
/// the client's ("master") idle share during echo tests with delay patterns.
fn ecos_suite(a: &args::SuiteArgs, stop: &StopFlag) -> Result<u8> {
    let host = match a.port {
        Some(p) => format!("{}:{p}", plan::split_host(&a.host).map(|(h, _)| h).unwrap_or_else(|_| a.host.clone())),
        None => a.host.clone(),
    };
    // The buffer counts of nc6_test_master; --quick divides them by 10.
    let scale = |n: u64| if a.quick { (n / 10).max(10) } else { n };
    let (small, big) = (scale(640), scale(2048));
    let mut out = std::io::stdout().lock();
    let mut results: Vec<netchar_model::TestResult> = Vec::new();
    let argv =
        |v: &[&str]| -> Vec<String> { std::iter::once("netchar").chain(v.iter().copied()).map(String::from).collect() };
    let mut run = |v: Vec<String>, label: &str, out: &mut std::io::StdoutLock<'_>| -> Result<()> {
        let cli = args::Cli::try_parse_from(&v)
            .map_err(|e| anyhow::anyhow!("{}", e.to_string().lines().next().unwrap_or("")))?;
        let plans = match cli.command {
            Some(args::Command::Echo(x)) => plan::TcpPlan::from_echo_args(&x)?,
            Some(args::Command::Tcp(x)) => vec![plan::TcpPlan::from_args(&x)?],
            Some(args::Command::Udp(x)) => vec![plan::TcpPlan::from_udp_args(&x)?],
            _ => anyhow::bail!("internal: not a test"),
        };
        for mut p in plans {
            p.client.busy_wait = std::time::Duration::from_secs(5);
            let run = client::run(&p.client, stop, &mut |_| {});
            if let Some(e) = run.error {
                anyhow::bail!("{label}: {e}");
            }
            let r = run.result.ok_or_else(|| anyhow::anyhow!("{label}: no result"))?;
            if !a.json {
                let line = if r.summary.rr.is_some() {
                    netchar_report::text::echo_line(&r)
                } else {
                    netchar_report::text::transfer_line(&r, label)
                };
                out.write_all(line.as_bytes())?;
                if let Some(i) = r.cpu.local.as_ref().and_then(|c| c.idle_pct) {
                    writeln!(out, "    master {i:.0}% idle")?;
                }
                if let Some(l) = r.cpu.remote.as_ref().and_then(|c| c.background_load_pct) {
                    writeln!(out, "    slave background load achieved {l:.0}%")?;
                }
                out.flush()?;
            }
            results.push(r);
        }
        Ok(())
    };
    let pat = |n: u64, size: u64| format!("{n}x{size}");
    if !a.json {
        writeln!(out, "================== No load, master at 100% ========================")?;
    }
    let p640 = pat(small, 1024);
    let bytes640 = (small * 1024).to_string();
    run(argv(&["echo", &host, "--udp", "--pattern", &p640]), "UDP echo", &mut out)?;
    run(argv(&["udp", &host, "--pattern", &p640, "-b", "0", "-i", "0"]), "UDP send", &mut out)?;
    run(argv(&["udp", &host, "--pattern", &p640, "-b", "0", "-i", "0", "-R"]), "UDP recv", &mut out)?;
    run(argv(&["echo", &host, "--pattern", &p640]), "TCP echo", &mut out)?;
    run(argv(&["tcp", &host, "-n", &bytes640, "-l", "1024", "-i", "0"]), "TCP send", &mut out)?;
    run(argv(&["tcp", &host, "-n", &bytes640, "-l", "1024", "-i", "0", "-R"]), "TCP recv", &mut out)?;
    run(argv(&["echo", &host, "--pattern", &pat(scale(64), 10240)]), "TCP echo", &mut out)?;
    if !a.json {
        writeln!(out, "====================== Various slave compute loads ===================")?;
    }
    let p2048 = pat(big, 1024);
    for load in ["0", "10", "20", "30", "40", "50"] {
        if !a.json {
            writeln!(out, ">>>>>>>>>>>> slave processing load at {load}%")?;
        }
        run(argv(&["echo", &host, "--udp", "--pattern", &p2048, "--server-load", load]), "UDP echo", &mut out)?;
        run(argv(&["echo", &host, "--pattern", &p2048, "--server-load", load]), "TCP echo", &mut out)?;
    }
    if !a.json {
        writeln!(out, "====================== Various master loads ===================")?;
    }
    for delay in ["", ",10@10ms", ",10@50ms", ",10@100ms", ",1@10ms"] {
        let delay = if a.quick { delay.replace("100ms", "20ms").replace("50ms", "20ms") } else { delay.to_string() };
        let p = format!("{p2048}{delay}");
        run(argv(&["echo", &host, "--udp", "--pattern", &p, "--idle"]), "UDP echo", &mut out)?;
        run(argv(&["echo", &host, "--pattern", &p, "--idle"]), "TCP echo", &mut out)?;
    }
    if a.json {
        out.write_all(netchar_report::json::many_to_json(&results).as_bytes())?;
    }
    Ok(EXIT_OK)
}
