//! `netchar server`: settings from flags and `--config`, binds, logs one line per test, exits 0
//! on SIGINT/SIGTERM.

use crate::args::{PeerServerArgs, ServerArgs};
use anyhow::{bail, Context, Result};
use netchar_engine::admission::{DataPathPolicy, Limits};
use netchar_engine::protocols::{ListenerDef, LISTENERS};
use netchar_engine::reflection::{GuardCounts, PeerPolicy};
use netchar_engine::server::{Server, ServerConfig, ServerLog};
use netchar_engine::StopFlag;
use serde::Deserialize;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Reads a key file or a server settings file (crate::files).
pub(crate) fn read_small_file(path: &Path) -> std::result::Result<String, String> {
    crate::files::read_text(path, crate::files::SMALL_FILE_CAP)
}

/// The settings of `--config FILE`: the flags' names, every one optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct ConfigFile {
    bind: Option<String>,
    port: Option<u16>,
    one_off: Option<bool>,
    max_concurrent: Option<u32>,
    max_duration: Option<toml::Value>,
    max_rate: Option<toml::Value>,
    max_streams: Option<u32>,
    idle_timeout: Option<toml::Value>,
    max_starts_per_minute: Option<u32>,
    max_per_source: Option<usize>,
    max_connections: Option<usize>,
    allow_data_from: Option<Vec<String>>,
    allow_peers: Option<Vec<String>>,
    psk_file: Option<PathBuf>,
    json: Option<bool>,
}

/// A TOML number or string, as the flag would take it.
fn as_flag_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The server's settings, flags over the config file over the defaults.
pub(crate) struct Settings {
    cfg: ServerConfig,
    json: bool,
    /// Peer protocols served beside netchar's own, each on its port.
    peers: PeerPorts,
}

/// The peer-protocol servers that are on: their registry entry and ports.
type PeerPorts = Vec<(&'static ListenerDef, Vec<u16>)>;

/// Which peer listeners run, and on which ports: the flags over `--config`'s keys (the same
/// names) over the registry's defaults. A port given turns its listener on.
fn peer_ports(a: &PeerServerArgs, file: &toml::Table) -> Result<PeerPorts> {
    let mut on = Vec::new();
    for (i, l) in LISTENERS.iter().enumerate() {
        let (flag, ports) = a.given.get(i).cloned().unwrap_or_default();
        let in_file = |key: &str| file.get(key);
        let file_on = match in_file(l.flag) {
            None => false,
            Some(toml::Value::Boolean(b)) => *b,
            Some(v) => bail!("--config: {} = {v}: expected true or false", l.flag),
        };
        let mut chosen = Vec::new();
        let mut any_port = false;
        for (j, p) in l.ports.iter().enumerate() {
            let from_file = match in_file(p.flag) {
                None => None,
                Some(toml::Value::Integer(n)) => {
                    Some(u16::try_from(*n).map_err(|_| anyhow::anyhow!("--config: {} = {n}: not a port", p.flag))?)
                }
                Some(v) => bail!("--config: {} = {v}: expected a port number", p.flag),
            };
            let port = ports.get(j).copied().flatten().or(from_file);
            any_port |= port.is_some();
            chosen.push(port.unwrap_or(p.default));
        }
        if flag || file_on || any_port {
            on.push((l, chosen));
        }
    }
    Ok(on)
}

fn seconds(flag: &str, text: &str) -> Result<Duration> {
    let secs: f64 = text.trim().parse().map_err(|_| anyhow::anyhow!("{flag} {text}: not a number of seconds"))?;
    if !(secs > 0.0 && secs <= 86_400.0) {
        bail!("{flag} {text}: must be more than 0 and at most 86400 seconds");
    }
    Ok(Duration::from_secs_f64(secs))
}

pub(crate) fn settings(a: &ServerArgs) -> Result<Settings> {
    // The peer listeners' keys are the registry's (LISTENERS); the rest are the flags'.
    let (file, peer_keys): (ConfigFile, toml::Table) = match &a.config {
        None => (ConfigFile::default(), toml::Table::new()),
        Some(path) => {
            let text = read_small_file(path).map_err(|e| anyhow::anyhow!("--config {}: {e}", path.display()))?;
            let bad = |e: toml::de::Error| {
                anyhow::anyhow!("--config {}: {}", path.display(), e.message().lines().next().unwrap_or("invalid TOML"))
            };
            let mut table: toml::Table = toml::from_str(&text).map_err(bad)?;
            let mut peers = toml::Table::new();
            for key in LISTENERS.iter().flat_map(|l| std::iter::once(l.flag).chain(l.ports.iter().map(|p| p.flag))) {
                if let Some(v) = table.remove(key) {
                    peers.insert(key.to_string(), v);
                }
            }
            (toml::Value::Table(table).try_into().map_err(bad)?, peers)
        }
    };
    let bind = a.bind.clone().or(file.bind).unwrap_or_else(|| "::".into());
    let ip: IpAddr = bind
        .trim_matches(|c| c == '[' || c == ']')
        .parse()
        .map_err(|_| anyhow::anyhow!("--bind {bind}: not an IP address (use e.g. 0.0.0.0, ::, 127.0.0.1)"))?;
    let port = a.port.or(file.port).unwrap_or(5300);
    let defaults = Limits::default();
    let max_concurrent = a.max_concurrent.or(file.max_concurrent).unwrap_or(defaults.max_concurrent);
    if max_concurrent == 0 {
        bail!("--max-concurrent 0: at least one test must be admitted");
    }
    let text = |flag: &Option<String>, file: &Option<toml::Value>| flag.clone().or(file.as_ref().map(as_flag_text));
    let max_duration = text(&a.max_duration, &file.max_duration).map(|t| seconds("--max-duration", &t)).transpose()?;
    let max_rate = match text(&a.max_rate, &file.max_rate) {
        None => None,
        Some(t) => match netchar_model::units::parse_bit_rate(&t) {
            Ok(0) => bail!("--max-rate {t}: must be more than 0"),
            Ok(r) => Some(r),
            Err(e) => bail!("--max-rate {t}: {e}"),
        },
    };
    let idle_timeout = match text(&a.idle_timeout, &file.idle_timeout) {
        None => defaults.idle_timeout,
        Some(t) => seconds("--idle-timeout", &t)?,
    };
    let positive = |flag: &str, v: Option<usize>, default: usize| -> Result<usize> {
        match v {
            Some(0) => bail!("{flag} 0: must be at least 1"),
            Some(n) => Ok(n),
            None => Ok(default),
        }
    };
    let limits = Limits {
        max_concurrent,
        max_duration,
        max_rate,
        max_streams: positive(
            "--max-streams",
            a.max_streams.or(file.max_streams).map(|n| n as usize),
            defaults.max_streams as usize,
        )? as u32,
        max_starts_per_minute: match a.max_starts_per_minute.or(file.max_starts_per_minute) {
            Some(0) => bail!("--max-starts-per-minute 0: must be at least 1"),
            n => n,
        },
        max_per_source: positive(
            "--max-per-source",
            a.max_per_source.or(file.max_per_source),
            defaults.max_per_source,
        )?,
        max_connections: positive(
            "--max-connections",
            a.max_connections.or(file.max_connections),
            defaults.max_connections,
        )?,
        idle_timeout,
    };
    let nets =
        if a.allow_data_from.is_empty() { file.allow_data_from.unwrap_or_default() } else { a.allow_data_from.clone() };
    let allowed = nets
        .iter()
        .map(|n| DataPathPolicy::parse_net(n).map_err(|e| anyhow::anyhow!("--allow-data-from {e}")))
        .collect::<Result<Vec<_>>>()?;
    let peer_nets = if a.allow_peers.is_empty() { file.allow_peers } else { Some(a.allow_peers.clone()) };
    let peer_policy = match peer_nets {
        None => PeerPolicy::default(),
        Some(nets) if nets.iter().any(|n| n.trim() == "none") => {
            if nets.len() > 1 {
                bail!("--allow-peers none: takes no networks beside it");
            }
            PeerPolicy { allowed: Vec::new() }
        }
        Some(nets) => PeerPolicy::parse(&nets).map_err(|e| anyhow::anyhow!("--allow-peers {e}"))?,
    };
    let keys = match a.psk_file.clone().or(file.psk_file) {
        None => None,
        Some(path) => {
            let text = read_small_file(&path).map_err(|e| anyhow::anyhow!("--psk-file {}: {e}", path.display()))?;
            let creds = netchar_wire::auth::parse_key_file(&text)
                .map_err(|e| anyhow::anyhow!("--psk-file {}: {e}", path.display()))?;
            Some(Arc::new(netchar_wire::auth::KeyTable::new(creds)))
        }
    };
    let mut cfg = ServerConfig::new(SocketAddr::new(ip, port));
    cfg.one_off = a.one_off || file.one_off.unwrap_or(false);
    cfg.limits = limits;
    cfg.keys = keys;
    cfg.data_paths = DataPathPolicy { allowed };
    cfg.peer_policy = peer_policy;
    let peers = peer_ports(&a.peers, &peer_keys)?;
    Ok(Settings { cfg, json: a.json || file.json.unwrap_or(false), peers })
}

pub(crate) fn run(a: &ServerArgs, stop: &StopFlag) -> Result<u8> {
    // Before any thread starts: a long-running server returns its tests' large buffers to the
    // kernel (netchar_sys::alloc says why).
    netchar_sys::alloc::keep_large_buffers_unmapped();
    let Settings { cfg, json, peers } = settings(a)?;
    let bind = cfg.bind;
    let mut server = Server::bind(cfg.clone()).with_context(|| format!("cannot listen on {bind}"))?;
    let addr = server.local_addr()?;
    eprintln!("netchar server {} listening on {addr}", env!("CARGO_PKG_VERSION"));
    // Each peer listener bound before the native server's line (a busy port fails here, at
    // start), from the registry (netchar_engine::protocols::LISTENERS).
    for (def, ports) in &peers {
        let listener = (def.bind)(bind.ip(), ports).with_context(|| {
            let shown: Vec<String> = ports.iter().map(u16::to_string).collect();
            format!("--{}: cannot listen on port(s) {} ({})", def.flag, shown.join(", "), def.bind_hint)
        })?;
        eprintln!("{}", listener.describe());
        server = server.with_peer(listener);
    }
    eprintln!("{}", describe(&cfg));
    if !peers.is_empty() {
        eprintln!("{}", describe_peers(&cfg.peer_policy));
    }
    // Text or JSON lines, chosen once.
    let format = netchar_report::server_log::for_output(json);
    let refused = server.run(stop, move |entry| eprintln!("{}", log_line(format.as_ref(), &entry)))?;
    if let Some(line) = describe_refused(&refused) {
        eprintln!("{line}");
    }
    eprintln!("netchar server stopped");
    Ok(0)
}

/// The start-up line that says who may run what.
fn describe(cfg: &ServerConfig) -> String {
    let l = &cfg.limits;
    let who = match &cfg.keys {
        Some(k) => format!("tests only for the {} user(s) of --psk-file", k.len()),
        None => "no authentication: anyone who reaches this port can run tests (use --psk-file)".to_string(),
    };
    let mut limits = vec![
        format!("{} test(s) at once", l.max_concurrent),
        format!("{} streams per test", l.max_streams),
        format!("{} connections per source", l.max_per_source),
    ];
    if let Some(d) = l.max_duration {
        limits.push(format!("{} s per test", d.as_secs_f64()));
    }
    if let Some(r) = l.max_rate {
        limits.push(format!("{} in total", netchar_model::units::format_si(r as f64, "bit/s")));
    }
    if let Some(n) = l.max_starts_per_minute {
        limits.push(format!("{n} starts per source per minute"));
    }
    let data = if cfg.data_paths.allowed.is_empty() {
        "data streams only from the control connection's address".to_string()
    } else {
        format!(
            "data streams from the control connection's address and {} allowed network(s)",
            cfg.data_paths.allowed.len()
        )
    };
    format!("{who}; limits: {}; {data}", limits.join(", "))
}

/// The start-up line that says who may receive UDP the server was not proven to be asked for.
fn describe_peers(policy: &PeerPolicy) -> String {
    format!(
        "UDP answers: unprompted test traffic (iperf2 -u -R, nc_test UDP_SEND) only to --allow-peers ({}); to \
         anyone else no more bytes than they sent, at most {} kB/s each and {} kB/s in all; never to a source \
         port below 1024 or one of this server's",
        policy.describe(),
        netchar_engine::reflection::PER_DESTINATION_RATE / 1000,
        netchar_engine::reflection::TOTAL_RATE / 1000,
    )
}

/// The last line: what the reflection guard refused, when it refused anything.
fn describe_refused(c: &GuardCounts) -> Option<String> {
    if *c == GuardCounts::default() {
        return None;
    }
    Some(format!(
        "reflection guard: {} datagram(s) from service ports and {} from this server's own ports dropped, {} \
         unprompted test(s) refused, {} answer(s) ({} bytes) held back",
        c.service_port, c.own_port, c.unprompted_refused, c.answers_withheld, c.answer_bytes_withheld
    ))
}

/// The report crate's view of one log event (crates/report/src/server_log.rs formats it).
fn log_line(format: &dyn netchar_report::server_log::ServerLogFormat, entry: &ServerLog) -> String {
    use netchar_report::server_log::{LogEntry, TestEntry};
    match entry {
        ServerLog::Rejected { peer, reason } => format.line(LogEntry::Rejected { peer: *peer, reason }),
        ServerLog::Test(t) => format.line(LogEntry::Test(&TestEntry {
            protocol: t.protocol,
            peer_software: t.peer_software.as_deref(),
            peer: t.peer,
            data_paths: &t.data_paths,
            user: t.user.as_deref(),
            spec: &t.spec,
            streams: &t.streams,
            concurrent_tests: t.concurrent_tests,
            refused_data: t.refused_data,
            error: t.error.as_deref(),
        })),
    }
}
