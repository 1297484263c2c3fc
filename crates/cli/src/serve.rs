//! `netchar server`: binds, logs one line per test, exits 0 on SIGINT/SIGTERM.

use crate::args::ServerArgs;
use anyhow::{Context, Result};
use netchar_engine::server::{Server, ServerConfig, ServerLog};
use netchar_engine::StopFlag;
use netchar_model::{Flow, Role};
use netchar_wire::session::Timeouts;
use std::net::{IpAddr, SocketAddr};

pub(crate) fn run(a: &ServerArgs, stop: &StopFlag) -> Result<u8> {
    let ip: IpAddr = a
        .bind
        .trim_matches(|c| c == '[' || c == ']')
        .parse()
        .map_err(|_| anyhow::anyhow!("--bind {}: not an IP address (use e.g. 0.0.0.0, ::, 127.0.0.1)", a.bind))?;
    if a.max_concurrent == 0 {
        anyhow::bail!("--max-concurrent 0: at least one test must be admitted");
    }
    let cfg = ServerConfig {
        bind: SocketAddr::new(ip, a.port),
        one_off: a.one_off,
        max_concurrent: a.max_concurrent,
        timeouts: Timeouts::default(),
    };
    let server = Server::bind(cfg).with_context(|| format!("cannot listen on {}", SocketAddr::new(ip, a.port)))?;
    let addr = server.local_addr()?;
    eprintln!("netchar server {} listening on {addr}", env!("CARGO_PKG_VERSION"));
    let json = a.json;
    server.run(stop, move |entry| eprintln!("{}", log_line(&entry, json)))?;
    eprintln!("netchar server stopped");
    Ok(0)
}

/// One log line per event: text, or a JSON object with `--json`.
fn log_line(entry: &ServerLog, json: bool) -> String {
    match entry {
        ServerLog::Rejected { peer, reason } => {
            if json {
                serde_json::json!({"event": "rejected", "peer": peer.to_string(), "reason": reason}).to_string()
            } else {
                format!("rejected {peer}: {reason}")
            }
        }
        ServerLog::Test(t) => {
            let mut flows = Vec::new();
            for flow in t.spec.direction.flows() {
                let mine: Vec<_> = t.streams.iter().filter(|s| s.flow == *flow).collect();
                let bytes: u64 = mine.iter().map(|s| s.bytes).sum();
                let seconds = mine.iter().map(|s| s.seconds).fold(0.0, f64::max);
                let role = if *flow == Flow::Up { Role::Receiver } else { Role::Sender };
                flows.push((flow.name(), role, bytes, seconds, netchar_model::bits_per_second(bytes, seconds)));
            }
            if json {
                let f: Vec<_> = flows
                    .iter()
                    .map(|(n, r, b, s, bps)| serde_json::json!({"flow": n, "role": r, "bytes": b, "seconds": s, "bits_per_second": bps}))
                    .collect();
                serde_json::json!({"event": "test", "peer": t.peer.to_string(), "kind": t.spec.kind, "direction": t.spec.direction,
                    "streams": t.spec.streams, "concurrent_tests": t.concurrent_tests, "flows": f, "error": t.error})
                .to_string()
            } else {
                let parts: Vec<String> = flows
                    .iter()
                    .map(|(n, r, b, s, bps)| {
                        let role = if *r == Role::Sender { "sent" } else { "received" };
                        format!(
                            "{n}: {role} {b} bytes in {s:.3} s = {}",
                            netchar_model::units::format_si(*bps, "bit/s")
                        )
                    })
                    .collect();
                let err = t.error.as_ref().map(|e| format!(" (error: {e})")).unwrap_or_default();
                let kind = t.spec.kind.name();
                format!("test from {}: {kind} x{} {}{err}", t.peer, t.spec.streams, parts.join("; "))
            }
        }
    }
}
