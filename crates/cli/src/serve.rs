//! `netchar server`: settings from flags and `--config`, binds, logs one line per test, exits 0
//! on SIGINT/SIGTERM.

use crate::args::ServerArgs;
use anyhow::{bail, Context, Result};
use netchar_engine::admission::{DataPathPolicy, Limits};
use netchar_engine::peers::iperf3::Iperf3Listener;
use netchar_engine::peers::nc_test::NcTestListener;
use netchar_engine::peers::PeerListener;
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
    iperf3: Option<bool>,
    iperf3_port: Option<u16>,
    iperf2: Option<bool>,
    iperf2_port: Option<u16>,
    nc_test: Option<bool>,
    nc_test_port: Option<u16>,
    nc_test_data_port: Option<u16>,
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

/// The ports of the peer-protocol servers that are on.
#[derive(Debug, Default)]
struct PeerPorts {
    iperf3: Option<u16>,
    iperf2: Option<u16>,
    /// nc_test: (control, data).
    nc_test: Option<(u16, u16)>,
}

fn seconds(flag: &str, text: &str) -> Result<Duration> {
    let secs: f64 = text.trim().parse().map_err(|_| anyhow::anyhow!("{flag} {text}: not a number of seconds"))?;
    if !(secs > 0.0 && secs <= 86_400.0) {
        bail!("{flag} {text}: must be more than 0 and at most 86400 seconds");
    }
    Ok(Duration::from_secs_f64(secs))
}

pub(crate) fn settings(a: &ServerArgs) -> Result<Settings> {
    let file: ConfigFile = match &a.config {
        None => ConfigFile::default(),
        Some(path) => {
            let text = read_small_file(path).map_err(|e| anyhow::anyhow!("--config {}: {e}", path.display()))?;
            toml::from_str(&text).map_err(|e| {
                anyhow::anyhow!("--config {}: {}", path.display(), e.message().lines().next().unwrap_or("invalid TOML"))
            })?
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
    let peers = PeerPorts {
        iperf3: (a.iperf3 || a.iperf3_port.is_some() || file.iperf3.unwrap_or(false))
            .then(|| a.iperf3_port.or(file.iperf3_port).unwrap_or(netchar_engine::peers::iperf3::DEFAULT_PORT)),
        iperf2: (a.iperf2 || a.iperf2_port.is_some() || file.iperf2.unwrap_or(false))
            .then(|| a.iperf2_port.or(file.iperf2_port).unwrap_or(netchar_wire::iperf2::DEFAULT_PORT)),
        nc_test: (a.nc_test
            || a.nc_test_port.is_some()
            || a.nc_test_data_port.is_some()
            || file.nc_test.unwrap_or(false))
        .then(|| {
            (
                a.nc_test_port.or(file.nc_test_port).unwrap_or(netchar_wire::nc_test::SLAVE_PORT),
                a.nc_test_data_port.or(file.nc_test_data_port).unwrap_or(netchar_wire::nc_test::DATA_SLAVE_PORT),
            )
        }),
    };
    Ok(Settings { cfg, json: a.json || file.json.unwrap_or(false), peers })
}

pub(crate) fn run(a: &ServerArgs, stop: &StopFlag) -> Result<u8> {
    let Settings { cfg, json, peers } = settings(a)?;
    let bind = cfg.bind;
    let mut server = Server::bind(cfg.clone()).with_context(|| format!("cannot listen on {bind}"))?;
    let addr = server.local_addr()?;
    eprintln!("netchar server {} listening on {addr}", env!("CARGO_PKG_VERSION"));
    if a.services {
        use netchar_engine::peers::services::{ServicePorts, ServicesListener};
        let d = ServicePorts::default();
        let ports = ServicePorts {
            echo: a.echo_port.unwrap_or(d.echo),
            discard: a.discard_port.unwrap_or(d.discard),
            chargen: a.chargen_port.unwrap_or(d.chargen),
        };
        let services = ServicesListener::bind(bind.ip(), ports).with_context(|| {
            "cannot offer --services (ports below 1024 need root or CAP_NET_BIND_SERVICE; move them with \
             --echo-port/--discard-port/--chargen-port)"
                .to_string()
        })?;
        let p = services.ports();
        eprintln!("services: echo on {}, discard on {}, chargen on {} (TCP and UDP)", p.echo, p.discard, p.chargen);
        server = server.with_peer(Box::new(services));
    }
    if a.netio {
        use netchar_engine::peers::netio::NetioListener;
        let port = a.netio_port.unwrap_or(netchar_wire::netio::TCP_PORT);
        let netio = NetioListener::bind(bind.ip(), port)
            .with_context(|| format!("cannot offer --netio on ports {port} and {}", port.wrapping_add(1)))?;
        eprintln!("netio: TCP test on {}, UDP test on {} (TCP control and UDP)", netio.port(), netio.port() + 1);
        server = server.with_peer(Box::new(netio));
    }
    eprintln!("{}", describe(&cfg));
    if let Some(port) = peers.iperf3 {
        let at = SocketAddr::new(bind.ip(), port);
        let listener = Iperf3Listener::bind(at)
            .with_context(|| format!("--iperf3: cannot listen on {at} (is an iperf3 server running there?)"))?;
        eprintln!("answering iperf3 clients on {} (TCP and UDP), under the same limits", listener.local_addr());
        server = server.with_peer(Box::new(listener));
    }
    if let Some(port) = peers.iperf2 {
        let at = SocketAddr::new(bind.ip(), port);
        let listener = netchar_engine::peers::iperf2::Iperf2Listener::bind(at)
            .with_context(|| format!("--iperf2: cannot listen on {at} (is an iperf server running there?)"))?;
        eprintln!("answering iperf2 clients on {} (TCP and UDP), under the same limits", listener.local_addr());
        server = server.with_peer(Box::new(listener));
    }
    if let Some((port, data_port)) = peers.nc_test {
        let at = SocketAddr::new(bind.ip(), port);
        let listener = NcTestListener::bind(at, data_port).with_context(|| {
            format!("--nc-test: cannot listen on UDP {at} and TCP/UDP port {data_port} (is an nc_test_slave running?)")
        })?;
        eprintln!(
            "answering eCos nc_test masters on UDP {} (data on port {}), under the same limits",
            listener.local_addr(),
            listener.data_port()
        );
        server = server.with_peer(Box::new(listener));
    }
    if a.services || a.netio || peers.iperf3.is_some() || peers.iperf2.is_some() || peers.nc_test.is_some() {
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
