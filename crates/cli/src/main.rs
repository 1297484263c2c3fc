//! `netchar`: flags → plan → engine → reporters. No protocol logic lives here: this file
//! parses the command line, picks what runs, and turns the outcome into an exit status.
#![forbid(unsafe_code)]

mod args;
mod compare;
mod console;
mod echo;
mod ecos;
mod exit;
mod exporter;
mod figure_files;
mod files;
mod flags;
mod gate;
mod generate;
mod history;
mod hooks;
mod mesh;
mod metrics;
mod nc_test;
mod netio;
mod plan;
mod plans;
mod progress;
mod pscheduler;
mod quick;
mod repeat;
mod report;
mod reporters;
mod same_method;
mod save;
mod serve;
mod single_run;
mod store;
mod suites;
mod usage;
mod xdp_count;

use anyhow::Result;
use clap::Parser;
use netchar_engine::StopFlag;
use std::process::ExitCode;

fn main() -> ExitCode {
    // The first reading the per-transaction clock calibrates against (netchar_sys::clock).
    netchar_sys::clock::begin();
    let cli = match args::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage::usage_error(&e),
    };
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        // A reader that went away (`| head`) saw what it wanted: not an error.
        Err(e) if is_broken_pipe(&e) => ExitCode::from(exit::OK),
        Err(e) => {
            eprintln!("netchar: error: {e:#}");
            ExitCode::from(exit::ERROR)
        }
    }
}

/// Flags → plan → run → report, one line per command; each module owns its command's story.
fn run(cli: args::Cli) -> Result<u8> {
    use args::{Command as C, SuiteCommand};
    let stop = install_signal_handlers()?;
    // --plot DIR, --report FILE: the results the command's reporters keep, drawn when it ends.
    let figures = figure_files::FigureFiles::for_command(&cli);
    store::check_args(figures.store_args())?;
    let code = match cli.command {
        None => quick::run(&cli.time, cli.json, &figures, &stop),
        Some(C::Server(a)) => serve::run(&a, &stop),
        Some(C::Tcp(a)) if nc_test::wanted(&a.common.proto) => nc_test::tcp(&a, &figures, &stop),
        Some(C::Udp(a)) if nc_test::wanted(&a.common.proto) => nc_test::udp(&a, &figures, &stop),
        Some(C::Echo(a)) if a.common.time.is_some() => echo::refuse_time(&a),
        Some(C::Echo(a)) if nc_test::wanted(&a.common.proto) => nc_test::echo(&a, &figures, &stop),
        Some(C::Tcp(a)) => repeat::run(&plan::TcpPlan::from_args(&a)?, &figures, &stop),
        Some(C::Udp(a)) if a.find_max_rate => {
            suites::find_max_rate(&plan::TcpPlan::from_udp_args(&a)?, a.loss, &figures, &stop)
        }
        Some(C::Udp(a)) => repeat::run(&plan::TcpPlan::from_udp_args(&a)?, &figures, &stop),
        Some(C::Rr(a)) => repeat::run(&plan::TcpPlan::from_rr_args(&a)?, &figures, &stop),
        Some(C::Crr(a)) => repeat::run(&plan::TcpPlan::from_crr_args(&a)?, &figures, &stop),
        Some(C::Echo(a)) => echo::run(&plan::TcpPlan::from_echo_args(&a)?, &figures, &stop),
        Some(C::Suite(s)) => match &s {
            SuiteCommand::Ecos(a) if nc_test::wanted(&a.proto) => nc_test::suite(a, &figures, &stop),
            SuiteCommand::Ecos(a) => ecos::run(a, &figures, &stop),
            SuiteCommand::Netio(a) => netio::run(a, &figures, &stop),
            SuiteCommand::Sizes(a) => suites::sizes_suite(a, &figures, &stop),
            SuiteCommand::Bwsweep(a) => suites::bwsweep_suite(a, &figures, &stop),
        },
        Some(C::Run(mut a)) => {
            // -p: the port of HOST, the server of the tests that do not name one.
            a.host = plans::default_host(&a);
            plans::run(&a, &figures, &stop)
        }
        Some(C::Compare(a)) => compare::run(&a),
        Some(C::Report(a)) => report::run(&a),
        Some(C::Completions(a)) => generate::completions(&a),
        Some(C::Man(a)) => generate::man(&a),
        Some(C::Pscheduler(a)) => pscheduler::run(a.method),
        Some(C::Exporter(a)) => exporter::run(a, &stop),
        Some(C::Mesh(a)) => mesh::run(a),
        Some(C::XdpCount(a)) => xdp_count::run(&a, &stop),
        Some(C::Store(a)) => store::run(&a),
        Some(C::History(a)) => history::run(&a),
    };
    // --store: the command's counted runs kept, and judged against their history.
    let code = store::after_command(figures.store_args(), &figures.labelled_results(), code);
    // Also after a failed or interrupted command: the figures so far.
    figures.write()?;
    code
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().filter_map(|c| c.downcast_ref::<std::io::Error>()).any(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}

/// SIGINT and SIGTERM raise the stop flag; a second one ends the process at once.
fn install_signal_handlers() -> Result<StopFlag> {
    let stop = StopFlag::new();
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, i32::from(exit::INTERRUPTED), stop.as_arc())?;
        signal_hook::flag::register(sig, stop.as_arc())?;
    }
    Ok(stop)
}
