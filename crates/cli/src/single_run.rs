//! One run of a client test: its reporters told of the start, each interval and the result
//! (or the missing result), and the run's exit status.

use crate::progress::Progress;
use crate::reporters::Reporters;
use anyhow::Result;
use netchar_engine::client::{self, ClientError};
use netchar_engine::StopFlag;

/// The counted rules of each `--nft-counter` chain, with the chain's name.
fn nft_counters(chains: &[[String; 3]]) -> Result<Vec<(String, Vec<netchar_sys::nft::RuleCounter>)>, String> {
    chains.iter().map(|c| Ok((c.join(" "), netchar_sys::nft::chain_counters(c)?))).collect()
}

/// One run: start, live intervals, end, through `reporters`; returns the result and the
/// run's exit status. `reset`: the `--reset-cmd` before the run, for its result.
pub(crate) fn run(
    plan: &crate::plan::TcpPlan,
    stop: &StopFlag,
    reporters: &mut Reporters,
    progress: &Progress,
    reset: Option<netchar_model::ResetRecord>,
) -> Result<(Option<netchar_model::TestResult>, u8)> {
    let info = test_info(plan);
    // Before the header: a console that cannot be read stops the command before any test.
    let console = crate::console::start(plan.console.as_ref())?;
    reporters.emit(progress, |r| r.on_start(&info))?;
    let mut print_error = None;
    let mut on_interval = |iv: &netchar_model::IntervalRecord| {
        if print_error.is_none() {
            if let Err(e) = reporters.emit(progress, |r| r.on_interval(iv)) {
                print_error = Some(e);
            }
        }
    };
    // --nft-counter: a chain that cannot be read stops the run before its traffic.
    let nft_before = nft_counters(&plan.nft_chains).map_err(|e| anyhow::anyhow!("--nft-counter {e}"))?;
    // `netchar run --step-cmd`: each test of the plan is a step.
    let step = plan.step.command.is_some().then(|| plan.step.begin(&plan.client));
    let mut run = match &plan.under_load {
        Some(load) => netchar_engine::jobs::under_load::run(&plan.client, load, stop, &mut on_interval),
        None => client::run(&plan.client, stop, &mut on_interval),
    };
    if let Some(c) = console {
        c.finish_into(&mut run, stop);
    }
    if let Some(step) = step {
        step.end(run.result.as_mut());
    }
    if let Some(r) = run.result.as_mut().filter(|_| !plan.nft_chains.is_empty()) {
        let evidence = r.evidence.get_or_insert_with(Default::default);
        match nft_counters(&plan.nft_chains) {
            Ok(after) => {
                for ((chain, before), (_, after)) in nft_before.iter().zip(&after) {
                    evidence.nft.extend(netchar_sys::nft::deltas(before, after).into_iter().map(|d| {
                        netchar_model::NftCounter {
                            chain: chain.clone(),
                            handle: d.handle,
                            rule: d.rule,
                            packets: d.packets,
                            bytes: d.bytes,
                        }
                    }));
                }
            }
            Err(e) => {
                evidence.unavailable.insert("nft".into(), e);
            }
        }
    }
    if let (Some(r), Some(reset)) = (run.result.as_mut(), reset) {
        r.reset = Some(reset);
    }
    if let Some(e) = print_error {
        return Err(e.into());
    }
    if let Some(r) = run.result.as_ref().filter(|r| r.test.protocol != plan.client.protocol.name()) {
        // The header above gave the planned write length; say when the peer's default replaced it.
        let block = if r.test.spec.block_bytes != plan.client.spec.block_bytes {
            format!(" and its default write length, {} bytes (-l sets another)", r.test.spec.block_bytes)
        } else {
            String::new()
        };
        progress.suspend(|| {
            eprintln!(
                "netchar: {}:{} answered as an {} server, not netchar: the test ran with --proto {}{block}",
                plan.client.host, plan.client.port, r.test.protocol, r.test.protocol
            )
        });
    }
    match &run.result {
        Some(result) => {
            crate::save::save_json(&plan.output, result)?;
            reporters.emit(progress, |r| r.on_finish(result))?;
        }
        None => {
            let error = run.error.as_ref().map(|e| e.to_string());
            reporters.emit(progress, |r| r.on_no_result(error.as_deref()))?;
        }
    }
    let code = match &run.error {
        None => crate::exit::OK,
        Some(ClientError::Interrupted) => {
            progress.suspend(|| eprintln!("netchar: interrupted; partial figures reported above"));
            crate::exit::INTERRUPTED
        }
        Some(e) => {
            progress.suspend(|| eprintln!("netchar: error: {e}"));
            crate::exit::ERROR
        }
    };
    Ok((run.result, code))
}

/// What the text header says before the test connects.
pub(crate) fn test_info(plan: &crate::plan::TcpPlan) -> netchar_model::TestInfo {
    client_test_info(&plan.client)
}

/// [`test_info`] of a client configuration.
pub(crate) fn client_test_info(client: &client::ClientConfig) -> netchar_model::TestInfo {
    let (far_end, caveats) = (client.protocol.protocol().def().measurement)(&client.spec);
    netchar_model::TestInfo {
        spec: client.spec.clone(),
        // Brackets around an IPv6 literal, so "::1" and port 1 do not read as "::1:1".
        remote: if client.host.contains(':') {
            format!("[{}]:{}", client.host, client.port)
        } else {
            format!("{}:{}", client.host, client.port)
        },
        // Not connected yet: the family is the flag's, or the literal address's.
        family: match (client.family, client.host.parse::<std::net::IpAddr>()) {
            (Some(client::Family::V6), _) | (None, Ok(std::net::IpAddr::V6(_))) => "ipv6".into(),
            (Some(client::Family::V4), _) | (None, Ok(std::net::IpAddr::V4(_))) => "ipv4".into(),
            (None, Err(_)) => "any".into(),
        },
        title: client.title.clone(),
        client_cpu: client.client_cpu,
        concurrent_tests: 1,
        protocol: client.protocol.name().to_string(),
        peer_software: None,
        far_end,
        caveats,
    }
}
