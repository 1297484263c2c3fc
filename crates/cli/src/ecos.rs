//! `netchar suite ecos`: the eCos nc6_test_master sequence over netchar's own protocol,
//! printed as the master printed it.

use crate::figure_files::FigureFiles;
use crate::progress::Progress;
use crate::reporters::Reporters;
use anyhow::Result;
use clap::Parser;
use netchar_engine::client;
use netchar_engine::StopFlag;
use netchar_report::ecos_lines::EcosLinesReporter;
use netchar_report::json::JobJsonReporter;
use netchar_report::nc_test_lines::MasterOutput;

/// `netchar suite ecos`: the eCos nc6_test_master sequence, printed as it printed it: no load
/// (UDP and TCP echo, send, receive), then the server ("slave") under 0-50% compute load, then
/// the client's ("master") idle share during echo tests with delay patterns.
pub(crate) fn run(a: &crate::args::SuiteArgs, figures: &FigureFiles, stop: &StopFlag) -> Result<u8> {
    let host = match a.port {
        Some(p) => {
            format!("{}:{p}", crate::plan::split_host(&a.host).map(|(h, _)| h).unwrap_or_else(|_| a.host.clone()))
        }
        None => a.host.clone(),
    };
    // The buffer counts of nc6_test_master; --quick divides them by 10.
    let scale = |n: u64| if a.quick { (n / 10).max(10) } else { n };
    let (small, big) = (scale(640), scale(2048));
    // Untimed: the tests run counts of buffers.
    let progress = Progress::start(a.json, true, None);
    let reporters = std::cell::RefCell::new(
        if a.json {
            Reporters::of(Box::new(JobJsonReporter))
        } else {
            Reporters::of(Box::new(EcosLinesReporter::new(true)))
        }
        .with_figures(figures),
    );
    // The master's section headings, for the formats that show its lines.
    let section =
        |line: &str| reporters.borrow_mut().emit(&progress, |rep| rep.on_master_output(MasterOutput::Line(line)));
    let mut results: Vec<netchar_model::TestResult> = Vec::new();
    let argv =
        |v: &[&str]| -> Vec<String> { std::iter::once("netchar").chain(v.iter().copied()).map(String::from).collect() };
    let mut run = |v: Vec<String>, label: &str| -> Result<()> {
        let cli = crate::args::Cli::try_parse_from(&v)
            .map_err(|e| anyhow::anyhow!("{}", e.to_string().lines().next().unwrap_or("")))?;
        let plans = match cli.command {
            Some(crate::args::Command::Echo(x)) => crate::plan::TcpPlan::from_echo_args(&x)?,
            Some(crate::args::Command::Tcp(x)) => vec![crate::plan::TcpPlan::from_args(&x)?],
            Some(crate::args::Command::Udp(x)) => vec![crate::plan::TcpPlan::from_udp_args(&x)?],
            _ => anyhow::bail!("internal: not a test"),
        };
        progress.set_current(label);
        for mut p in plans {
            p.client.busy_wait = std::time::Duration::from_secs(5);
            let run = client::run(&p.client, stop, &mut |_| {});
            if let Some(e) = run.error {
                anyhow::bail!("{label}: {e}");
            }
            let r = run.result.ok_or_else(|| anyhow::anyhow!("{label}: no result"))?;
            reporters.borrow_mut().emit(&progress, |rep| rep.on_finish(&r))?;
            results.push(r);
        }
        Ok(())
    };
    let pat = |n: u64, size: u64| format!("{n}x{size}");
    section("================== No load, master at 100% ========================")?;
    let p640 = pat(small, 1024);
    let bytes640 = (small * 1024).to_string();
    run(argv(&["echo", &host, "--udp", "--pattern", &p640]), "UDP echo")?;
    run(argv(&["udp", &host, "--pattern", &p640, "-b", "0", "-i", "0"]), "UDP send")?;
    run(argv(&["udp", &host, "--pattern", &p640, "-b", "0", "-i", "0", "-R"]), "UDP recv")?;
    run(argv(&["echo", &host, "--pattern", &p640]), "TCP echo")?;
    run(argv(&["tcp", &host, "-n", &bytes640, "-l", "1024", "-i", "0"]), "TCP send")?;
    run(argv(&["tcp", &host, "-n", &bytes640, "-l", "1024", "-i", "0", "-R"]), "TCP recv")?;
    run(argv(&["echo", &host, "--pattern", &pat(scale(64), 10240)]), "TCP echo")?;
    section("====================== Various slave compute loads ===================")?;
    let p2048 = pat(big, 1024);
    for load in ["0", "10", "20", "30", "40", "50"] {
        section(&format!(">>>>>>>>>>>> slave processing load at {load}%"))?;
        run(argv(&["echo", &host, "--udp", "--pattern", &p2048, "--server-load", load]), "UDP echo")?;
        run(argv(&["echo", &host, "--pattern", &p2048, "--server-load", load]), "TCP echo")?;
    }
    section("====================== Various master loads ===================")?;
    for delay in ["", ",10@10ms", ",10@50ms", ",10@100ms", ",1@10ms"] {
        let delay = if a.quick { delay.replace("100ms", "20ms").replace("50ms", "20ms") } else { delay.to_string() };
        let p = format!("{p2048}{delay}");
        run(argv(&["echo", &host, "--udp", "--pattern", &p, "--idle"]), "UDP echo")?;
        run(argv(&["echo", &host, "--pattern", &p, "--idle"]), "TCP echo")?;
    }
    reporters.borrow_mut().emit(&progress, |rep| rep.on_job_end(&results))?;
    Ok(crate::EXIT_OK)
}
