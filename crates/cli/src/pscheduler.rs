//! `netchar pscheduler METHOD`: the methods of a perfSONAR pScheduler tool plugin for the
//! `throughput` test. Each reads the JSON pScheduler gives on stdin and writes the JSON it
//! expects on stdout, as pScheduler's own iperf3 tool does (pscheduler-tool-iperf3): the spec
//! keys map to netchar's flags as that tool maps them to iperf3's, participant 1 runs a one-off
//! `netchar server` that only accepts a per-run random key, participant 0 runs the client, and
//! merged-results hands on participant 0's result, which holds both ends' figures.
//!
//! The runs themselves are child processes of this same executable (or `netchar_cmd` of the
//! configuration file), so a run is exactly the command line in its `diags`.
//! What the methods hand pScheduler is `netchar_report::pscheduler`'s: this module reads the
//! methods' input, runs the children and reads what they print ([`TestOutput`], [`ServerLine`]).

use anyhow::{anyhow, bail, Context, Result};
use netchar_model::Flow;
use netchar_report::mesh::TestOutput;
use netchar_report::pscheduler::{self as report, failure, ServerLine};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// `netchar pscheduler METHOD`.
#[derive(Debug, clap::Args)]
pub(crate) struct PschedulerArgs {
    /// The method pScheduler calls: enumerate, can-run, duration, participant-data, run,
    /// merged-results.
    #[arg(value_enum)]
    pub(crate) method: Method,
}

/// The pScheduler tool methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Method {
    Enumerate,
    CanRun,
    Duration,
    ParticipantData,
    Run,
    MergedResults,
}

/// Newest throughput spec schema this tool knows (pscheduler-test-throughput's MAX_SCHEMA).
const MAX_SPEC_SCHEMA: u64 = 7;
/// Test length when the spec has none (pScheduler's iperf3 tool uses the same).
const DEFAULT_DURATION_SECS: u64 = 10;
/// Link RTT assumed when the spec has no `link-rtt`: about the longest terrestrial path.
const DEFAULT_LINK_RTT_SECS: f64 = 0.2;
/// Seconds the client waits after the slot starts, for the server on the other host to listen.
/// netchar's server listens within milliseconds of starting; two seconds covers a busy host.
const CLIENT_START_DELAY_SECS: u64 = 2;
/// Seconds for both ends to exchange results and exit after the test.
const SHUTDOWN_SECS: u64 = 2;
/// The server port when neither the configuration file nor the spec name one.
const DEFAULT_SERVER_PORT: u16 = 5300;
/// Where the configuration file is unless NETCHAR_PSCHEDULER_CONFIG names another.
const CONFIG_FILE: &str = "/etc/pscheduler/tool/netchar.conf";
/// The user name of the per-run key (any name does: the key file has only this one).
const PSK_USER: &str = "pscheduler";

/// Spec keys netchar runs, as pScheduler's iperf3 tool maps them. `source`, `source-node`,
/// `dest-node` only name the participants; `link-rtt` only lengthens the slot.
const SUPPORTED_KEYS: &[&str] = &[
    "schema",
    "source",
    "source-node",
    "dest",
    "dest-node",
    "duration",
    "interval",
    "link-rtt",
    "parallel",
    "bandwidth",
    "udp",
    "reverse",
    "omit",
    "window-size",
    "mss",
    "buffer-length",
    "congestion",
    "ip-version",
    "zero-copy",
    "single-ended",
    "single-ended-port",
    "loopback",
];

/// Spec keys that only TCP tests take (`netchar udp` has no such flag).
const TCP_ONLY_KEYS: &[&str] = &["window-size", "mss", "congestion", "zero-copy"];

pub(crate) fn run(method: Method) -> Result<u8> {
    let input = if method == Method::Enumerate { Value::Null } else { read_stdin_json()? };
    let out = match method {
        Method::Enumerate => enumerate(),
        Method::CanRun => can_run(&input),
        Method::Duration => duration(&input)?,
        Method::ParticipantData => participant_data(&input)?,
        Method::Run => run_participant(&input)?,
        Method::MergedResults => merged_results(&input)?,
    };
    let mut stdout = std::io::stdout().lock();
    serde_json::to_writer(&mut stdout, &out)?;
    writeln!(stdout)?;
    Ok(0)
}

fn read_stdin_json() -> Result<Value> {
    let mut text = String::new();
    std::io::stdin().take(16 << 20).read_to_string(&mut text).context("reading the method's input on stdin")?;
    serde_json::from_str(&text).context("the input on stdin is not JSON; pScheduler passes each method a JSON object")
}

fn enumerate() -> Value {
    json!({
        "schema": 1,
        "name": "netchar",
        "description": "Measure network throughput with netchar",
        "version": env!("CARGO_PKG_VERSION"),
        "tests": ["throughput"],
        // Below iperf3 (10) and nuttcp (5): a host's existing tasks keep their tool unless
        // a task asks for netchar by name.
        "preference": 0,
        "maintainer": {
            "name": "netchar developers",
            "href": "https://example.invalid/netchar"
        }
    })
}

/// `{"can-run": true}`, or false with every reason the spec cannot run.
fn can_run(input: &Value) -> Value {
    let reasons = match input.get("type").and_then(Value::as_str) {
        None => vec!["Missing test type".to_string()],
        Some(t) if t != "throughput" => vec![format!("Unsupported test type {t}; netchar runs throughput tests")],
        Some(_) => match input.get("spec") {
            None => vec!["Missing test specification".to_string()],
            Some(spec) => spec_problems(spec),
        },
    };
    if reasons.is_empty() {
        json!({"can-run": true})
    } else {
        json!({"can-run": false, "reasons": reasons})
    }
}

/// Every reason netchar cannot run `spec`: unknown keys, bad values, combinations netchar lacks.
fn spec_problems(spec: &Value) -> Vec<String> {
    let Some(obj) = spec.as_object() else { return vec!["The test specification is not a JSON object".into()] };
    let mut problems = Vec::new();
    for key in obj.keys() {
        if !SUPPORTED_KEYS.contains(&key.as_str()) {
            problems.push(format!("netchar does not support the {key} option"));
        }
    }
    match obj.get("schema") {
        None => {}
        Some(Value::Number(n)) if n.as_u64().is_some_and(|s| (1..=MAX_SPEC_SCHEMA).contains(&s)) => {}
        Some(other) => problems.push(format!("Unsupported spec schema {other}; netchar knows 1 to {MAX_SPEC_SCHEMA}")),
    }
    if !obj.get("dest").is_some_and(Value::is_string) {
        problems.push("The spec has no dest host".into());
    }
    for key in ["duration", "interval", "omit", "link-rtt"] {
        if let Some(v) = obj.get(key) {
            if v.as_str().and_then(parse_iso8601_duration).is_none() {
                problems.push(format!("{key} {v} is not an ISO 8601 duration such as PT10S"));
            }
        }
    }
    for key in ["parallel", "bandwidth", "window-size", "mss", "buffer-length", "single-ended-port"] {
        if let Some(v) = obj.get(key) {
            if v.as_u64().is_none_or(|n| n < 1) {
                problems.push(format!("{key} {v} must be a whole number of at least 1"));
            }
        }
    }
    for key in ["udp", "reverse", "zero-copy", "single-ended", "loopback"] {
        if let Some(v) = obj.get(key) {
            if !v.is_boolean() {
                problems.push(format!("{key} {v} must be true or false"));
            }
        }
    }
    if let Some(v) = obj.get("ip-version") {
        if !matches!(v.as_u64(), Some(4 | 6)) {
            problems.push(format!("ip-version {v} must be 4 or 6"));
        }
    }
    if let Some(v) = obj.get("congestion") {
        if v.as_str().is_none_or(|s| s.is_empty()) {
            problems.push(format!("congestion {v} must name an algorithm"));
        }
    }
    if flag(spec, "udp") {
        for key in TCP_ONLY_KEYS {
            if obj.contains_key(*key) {
                problems.push(format!("{key} applies to TCP tests only in netchar"));
            }
        }
    }
    if flag(spec, "single-ended") && flag(spec, "loopback") {
        problems.push("single-ended and loopback cannot both be set".into());
    }
    problems
}

fn flag(spec: &Value, key: &str) -> bool {
    spec.get(key).and_then(Value::as_bool).unwrap_or(false)
}

fn spec_of(input: &Value) -> Result<&Value> {
    input
        .get("spec")
        .or_else(|| input.get("test").and_then(|t| t.get("spec")))
        .ok_or_else(|| anyhow!("Missing test specification in the input"))
}

fn spec_seconds(spec: &Value, key: &str) -> Result<Option<f64>> {
    match spec.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_str()
            .and_then(parse_iso8601_duration)
            .map(Some)
            .ok_or_else(|| anyhow!("{key} {v} is not an ISO 8601 duration such as PT10S")),
    }
}

/// Whole seconds of sending: `duration`, rounded up, default 10.
fn test_seconds(spec: &Value) -> Result<u64> {
    Ok(spec_seconds(spec, "duration")?.map(|s| s.ceil().max(1.0) as u64).unwrap_or(DEFAULT_DURATION_SECS))
}

fn omit_seconds(spec: &Value) -> Result<u64> {
    Ok(spec_seconds(spec, "omit")?.map(|s| s.ceil() as u64).unwrap_or(0))
}

/// Seconds to set a test up: one per 50 ms of RTT, at least one (pScheduler's measurements for iperf3).
fn setup_seconds(spec: &Value) -> Result<u64> {
    let rtt = spec_seconds(spec, "link-rtt")?.unwrap_or(DEFAULT_LINK_RTT_SECS);
    Ok(((rtt * 1000.0 / 50.0).max(1.0)).ceil() as u64)
}

/// The slot: setup + omit + duration + the client's start delay + shutdown.
fn duration(input: &Value) -> Result<Value> {
    let spec = spec_of(input)?;
    let total =
        setup_seconds(spec)? + omit_seconds(spec)? + test_seconds(spec)? + CLIENT_START_DELAY_SECS + SHUTDOWN_SECS;
    Ok(json!({"duration": format!("PT{total}S")}))
}

/// Settings of the configuration file: `server_port` and `netchar_cmd`, `key = value` lines
/// (an INI `[netchar]` header and `#` comments allowed).
struct Config {
    server_port: u16,
    netchar_cmd: PathBuf,
}

fn config() -> Result<Config> {
    let path = std::env::var_os("NETCHAR_PSCHEDULER_CONFIG").map(PathBuf::from).unwrap_or_else(|| CONFIG_FILE.into());
    let mut cfg = Config {
        server_port: DEFAULT_SERVER_PORT,
        netchar_cmd: std::env::current_exe().context("finding the netchar executable")?,
    };
    let Ok(text) = std::fs::read_to_string(&path) else { return Ok(cfg) };
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') || line.starts_with('[') {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            bail!("{}: '{line}' is not key = value", path.display());
        };
        let value = value.trim();
        match key.trim() {
            "server_port" => {
                cfg.server_port =
                    value.parse().map_err(|_| anyhow!("{}: server_port {value}: not a port number", path.display()))?
            }
            "netchar_cmd" => cfg.netchar_cmd = value.into(),
            other => bail!("{}: unknown setting {other}; known: server_port, netchar_cmd", path.display()),
        }
    }
    Ok(cfg)
}

/// Participant 1 (the server) names its port and mints the run's key; `_` keeps the key out
/// of everything pScheduler's API answers.
fn participant_data(input: &Value) -> Result<Value> {
    let participant = input.get("participant").and_then(Value::as_u64).ok_or_else(|| anyhow!("Missing participant"))?;
    let mut out = json!({"schema": 1, "netchar-version": env!("CARGO_PKG_VERSION")});
    match participant {
        0 => {}
        1 => {
            out["server_port"] = json!(config()?.server_port);
            out["_auth"] = json!({"user": PSK_USER, "psk": random_key()?});
        }
        n => bail!("Invalid participant number {n} for the throughput test (0 or 1)"),
    }
    Ok(out)
}

/// 32 random bytes as hex: the per-run pre-shared key.
fn random_key() -> Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::getrandom(&mut bytes).map_err(|e| anyhow!("no random numbers for the run's key: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// What one participant needs to run: parsed once from the runner's input.
struct RunInput<'a> {
    spec: &'a Value,
    participant: u64,
    start: SystemTime,
    loopback: bool,
    port: u16,
    psk: Option<String>,
    cfg: Config,
}

fn parse_run_input(input: &Value) -> Result<RunInput<'_>> {
    let participant = input
        .get("participant")
        .and_then(Value::as_u64)
        .ok_or_else(|| anyhow!("Missing participant in the run input"))?;
    let spec =
        input.get("test").and_then(|t| t.get("spec")).ok_or_else(|| anyhow!("Missing test.spec in the run input"))?;
    let data = input
        .get("participant-data")
        .and_then(Value::as_array)
        .ok_or_else(|| anyhow!("Missing participant-data in the run input"))?;
    let start_text = input
        .get("schedule")
        .and_then(|s| s.get("start"))
        .and_then(Value::as_str)
        .ok_or_else(|| anyhow!("Unable to find schedule.start in the run input"))?;
    let start = parse_iso8601_datetime(start_text)
        .ok_or_else(|| anyhow!("schedule.start {start_text} is not an ISO 8601 date and time"))?;
    let single_ended = flag(spec, "single-ended");
    let loopback = flag(spec, "loopback");
    let expected = if single_ended || loopback { 1 } else { 2 };
    if data.len() != expected && !(data.len() == 2 && (single_ended || loopback)) {
        bail!("netchar needs {expected} participant(s) for this test, got {}", data.len());
    }
    let cfg = config()?;
    let (port, psk) = if single_ended {
        let port = spec.get("single-ended-port").and_then(Value::as_u64).unwrap_or(u64::from(DEFAULT_SERVER_PORT));
        (u16::try_from(port).map_err(|_| anyhow!("single-ended-port {port} is not a port"))?, None)
    } else if loopback {
        (cfg.server_port, Some(random_key()?))
    } else {
        let p1 = &data[1];
        let port = p1
            .get("server_port")
            .and_then(Value::as_u64)
            .ok_or_else(|| anyhow!("participant 1's data has no server_port"))?;
        let psk = p1.get("_auth").and_then(|a| a.get("psk")).and_then(Value::as_str).map(str::to_string);
        (u16::try_from(port).map_err(|_| anyhow!("server_port {port} is not a port"))?, psk)
    };
    Ok(RunInput { spec, participant, start, loopback, port, psk, cfg })
}

fn run_participant(input: &Value) -> Result<Value> {
    let run = parse_run_input(input)?;
    let problems = spec_problems(run.spec);
    if !problems.is_empty() {
        return Ok(failure(&problems.join("; "), ""));
    }
    let keys = match &run.psk {
        Some(psk) => Some(KeyFile::write(psk)?),
        None => None,
    };
    let key_path = keys.as_ref().map(|k| k.path.as_path());
    Ok(match (run.participant, run.loopback) {
        (0, false) => run_client(&run, key_path),
        (0, true) => {
            let server = std::thread::scope(|s| {
                let server = s.spawn(|| run_server(&run, key_path));
                let client = run_client(&run, key_path);
                (client, server.join())
            });
            match server {
                (client, Ok(server)) => report::loopback(client, &server),
                (client, Err(_)) => client,
            }
        }
        (1, _) => run_server(&run, key_path),
        (n, _) => bail!("Invalid participant {n}"),
    })
}

/// The key file for one run, in a directory only this user can open; removed on drop.
struct KeyFile {
    dir: PathBuf,
    path: PathBuf,
}

impl KeyFile {
    fn write(psk: &str) -> Result<KeyFile> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        let dir =
            std::env::temp_dir().join(format!("netchar-pscheduler-{}-{}", std::process::id(), &random_key()?[..16]));
        std::fs::DirBuilder::new().mode(0o700).create(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join("psk");
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path)?;
        writeln!(f, "{PSK_USER}:{psk}")?;
        Ok(KeyFile { dir, path })
    }
}

impl Drop for KeyFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The client's command line for the spec, as pScheduler's iperf3 tool builds iperf3's.
fn client_args(run: &RunInput<'_>, key: Option<&Path>) -> Result<Vec<String>> {
    let spec = run.spec;
    let udp = flag(spec, "udp");
    let dest = spec.get("dest").and_then(Value::as_str).ok_or_else(|| anyhow!("The spec has no dest"))?;
    let dest = if run.loopback { "localhost" } else { dest };
    let mut a: Vec<String> = vec![if udp { "udp" } else { "tcp" }.into(), dest.into()];
    let mut push = |flag: &str, value: String| {
        a.push(flag.into());
        a.push(value);
    };
    push("-p", run.port.to_string());
    push("-t", test_seconds(spec)?.to_string());
    if let Some(i) = spec_seconds(spec, "interval")? {
        push("-i", i.to_string());
    }
    let num = |key: &str| spec.get(key).and_then(Value::as_u64);
    if let Some(n) = num("parallel") {
        push("-P", n.to_string());
    }
    if let Some(n) = num("window-size") {
        push("-w", n.to_string());
    }
    if let Some(n) = num("mss") {
        push("-M", n.to_string());
    }
    let omit = omit_seconds(spec)?;
    if omit > 0 {
        push("-O", omit.to_string());
    }
    match (num("bandwidth"), udp) {
        (Some(b), _) => push("-b", b.to_string()),
        // iperf3's UDP default, which pScheduler's users expect.
        (None, true) => push("-b", "1M".into()),
        (None, false) => {}
    }
    if let Some(n) = num("buffer-length") {
        push("-l", n.to_string());
    }
    if let Some(c) = spec.get("congestion").and_then(Value::as_str) {
        push("-C", c.to_string());
    }
    if let Some(key) = key {
        push("--psk-file", key.display().to_string());
        push("--psk-user", PSK_USER.into());
    }
    match num("ip-version") {
        Some(4) => a.push("-4".into()),
        Some(6) => a.push("-6".into()),
        _ => {}
    }
    if udp && num("bandwidth").is_some() {
        // pScheduler's bandwidth is per stream, as iperf3's -b; netchar's UDP -b is the total.
        a.push("--per-stream".into());
    }
    if flag(spec, "zero-copy") {
        a.push("--zerocopy".into());
    }
    if flag(spec, "reverse") {
        a.push("-R".into());
    }
    a.push("--json".into());
    Ok(a)
}

fn server_args(run: &RunInput<'_>, key: Option<&Path>) -> Result<Vec<String>> {
    let spec = run.spec;
    let longest = test_seconds(spec)? + omit_seconds(spec)?;
    let mut a: Vec<String> =
        vec!["server".into(), "--one-off".into(), "--json".into(), "-p".into(), run.port.to_string()];
    a.extend(["--max-duration".into(), longest.to_string()]);
    if let Some(key) = key {
        a.extend(["--psk-file".into(), key.display().to_string()]);
    }
    match spec.get("ip-version").and_then(Value::as_u64) {
        Some(4) => a.extend(["-B".into(), "0.0.0.0".into()]),
        Some(6) => a.extend(["-B".into(), "::".into()]),
        _ => {}
    }
    Ok(a)
}

fn sleep_until(when: SystemTime) {
    if let Ok(wait) = when.duration_since(SystemTime::now()) {
        std::thread::sleep(wait);
    }
}

/// Participant 0: waits for the slot and the server, runs the client, maps its result.
fn run_client(run: &RunInput<'_>, key: Option<&Path>) -> Value {
    let args = match client_args(run, key) {
        Ok(a) => a,
        Err(e) => return failure(&format!("{e:#}"), ""),
    };
    let command_line = show_command(&run.cfg.netchar_cmd, &args);
    sleep_until(run.start + Duration::from_secs(CLIENT_START_DELAY_SECS));
    let limit = match (test_seconds(run.spec), omit_seconds(run.spec), setup_seconds(run.spec)) {
        (Ok(t), Ok(o), Ok(s)) => Duration::from_secs(t + o + s + SHUTDOWN_SECS),
        _ => return failure("bad duration in the spec", &command_line),
    };
    let out = match run_with_limit(&run.cfg.netchar_cmd, &args, limit) {
        Ok(out) => out,
        Err(e) => return failure(&format!("{e:#}"), &command_line),
    };
    match serde_json::from_str::<TestOutput>(&out.stdout) {
        Ok(output) => {
            let diags = format!("{command_line}\n\n{}", output.to_json());
            if let Some(err) = output.error() {
                return failure(&format!("netchar: {err}"), &diags);
            }
            if out.timed_out {
                return failure(&format!("netchar did not finish within {} s", limit.as_secs()), &diags);
            }
            let Some(result) = output.result() else { return failure("netchar printed no result", &diags) };
            let flow = if flag(run.spec, "reverse") { Flow::Down } else { Flow::Up };
            report::throughput(result, flow, flag(run.spec, "udp"), &command_line)
        }
        Err(_) => {
            let diags = format!("{command_line}\n\n{}", out.stdout.trim_end());
            let err =
                out.stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("netchar printed no result").trim();
            let why = if out.timed_out {
                format!("netchar did not finish within {} s", limit.as_secs())
            } else {
                err.to_string()
            };
            failure(&why, &format!("{diags}\n{}", out.stderr.trim_end()))
        }
    }
}

/// Participant 1: a one-off server that takes only this run's key, from the slot's start
/// until the test is over or the slot has no room left for it.
fn run_server(run: &RunInput<'_>, key: Option<&Path>) -> Value {
    let args = match server_args(run, key) {
        Ok(a) => a,
        Err(e) => return failure(&format!("{e:#}"), ""),
    };
    let command_line = show_command(&run.cfg.netchar_cmd, &args);
    sleep_until(run.start);
    let limit = match (test_seconds(run.spec), omit_seconds(run.spec), setup_seconds(run.spec)) {
        (Ok(t), Ok(o), Ok(s)) => Duration::from_secs(t + o + s + CLIENT_START_DELAY_SECS + SHUTDOWN_SECS),
        _ => return failure("bad duration in the spec", &command_line),
    };
    let out = match run_with_limit(&run.cfg.netchar_cmd, &args, limit) {
        Ok(out) => out,
        Err(e) => return failure(&format!("{e:#}"), &command_line),
    };
    let diags = format!("{command_line}\n\n{}", out.stderr.trim_end());
    let Some(line) = ServerLine::find_test(&out.stderr) else {
        let why = if out.timed_out {
            format!("no test arrived from the client within {} s", limit.as_secs())
        } else {
            format!("the server ended without a test (exit status {})", out.status)
        };
        return failure(&why, &diags);
    };
    if let Some(err) = &line.error {
        return failure(&format!("netchar server: {err}"), &diags);
    }
    report::server(&line, &diags)
}

fn show_command(cmd: &Path, args: &[String]) -> String {
    std::iter::once(cmd.display().to_string()).chain(args.iter().cloned()).collect::<Vec<_>>().join(" ")
}

/// What a child printed, how it ended, and whether it was killed at its time limit.
pub(crate) struct ChildOutput {
    pub(crate) stdout: String,
    pub(crate) stderr: String,
    pub(crate) status: String,
    pub(crate) timed_out: bool,
}

/// Runs `cmd args`, killing it at `limit`; what it printed so far is kept either way.
pub(crate) fn run_with_limit(cmd: &Path, args: &[String], limit: Duration) -> Result<ChildOutput> {
    let mut child = Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", cmd.display()))?;
    let reader = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_string(&mut text);
            }
            text
        })
    };
    let out = reader(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let err = reader(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let deadline = std::time::Instant::now() + limit;
    let mut timed_out = false;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if std::time::Instant::now() >= deadline {
            timed_out = true;
            let _ = child.kill();
            break child.wait()?;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ok(ChildOutput {
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
        status: status.to_string(),
        timed_out,
    })
}

/// The test's result from the participants' (report::merged).
fn merged_results(input: &Value) -> Result<Value> {
    let results = input
        .get("results")
        .and_then(Value::as_array)
        .ok_or_else(|| anyhow!("Missing required key in merged-results input: results"))?;
    let spec = input.get("test").and_then(|t| t.get("spec")).cloned().unwrap_or(json!({}));
    let one = flag(&spec, "single-ended") || flag(&spec, "loopback");
    report::merged(results, one).map_err(|e| anyhow!(e))
}

/// Seconds of an ISO 8601 duration as pScheduler writes them (`PT10S`, `P1DT2H`, `PT0.5S`;
/// no years or months, which are inexact).
pub(crate) fn parse_iso8601_duration(text: &str) -> Option<f64> {
    let rest = text.strip_prefix('P')?;
    if rest.is_empty() {
        return None;
    }
    let (date, time) = match rest.split_once('T') {
        Some((d, t)) if !t.is_empty() => (d, Some(t)),
        Some(_) => return None,
        None => (rest, None),
    };
    let mut total = 0.0;
    let mut parse_part = |part: &str, units: &[(char, f64)]| -> Option<()> {
        let mut number = String::new();
        let mut next_unit = 0;
        for c in part.chars() {
            if c.is_ascii_digit() || c == '.' {
                number.push(c);
                continue;
            }
            let idx = units.iter().position(|(u, _)| *u == c)?;
            if idx < next_unit || number.is_empty() {
                return None;
            }
            total += number.parse::<f64>().ok()? * units[idx].1;
            number.clear();
            next_unit = idx + 1;
        }
        number.is_empty().then_some(())
    };
    parse_part(date, &[('W', 604_800.0), ('D', 86_400.0)])?;
    if let Some(t) = time {
        parse_part(t, &[('H', 3600.0), ('M', 60.0), ('S', 1.0)])?;
    }
    Some(total)
}

/// An ISO 8601 date and time (`2026-05-19T12:00:00+00:00`, `...Z`, fractions allowed); one
/// without an offset is taken as UTC.
pub(crate) fn parse_iso8601_datetime(text: &str) -> Option<SystemTime> {
    let (date, time) = text.split_once(['T', ' '])?;
    let mut d = date.split('-');
    let (y, mo, day): (i64, i64, i64) = (d.next()?.parse().ok()?, d.next()?.parse().ok()?, d.next()?.parse().ok()?);
    if d.next().is_some() || !(1..=12).contains(&mo) || !(1..=31).contains(&day) {
        return None;
    }
    let (clock, offset_secs) = if let Some(c) = time.strip_suffix('Z') {
        (c, 0i64)
    } else if let Some(pos) = time.rfind(['+', '-']) {
        let (c, off) = time.split_at(pos);
        let sign = if off.starts_with('-') { -1 } else { 1 };
        let off = &off[1..];
        let (h, m) = off.split_once(':').unwrap_or((&off[..off.len().min(2)], off.get(2..).unwrap_or("0")));
        (c, sign * (h.parse::<i64>().ok()? * 3600 + m.parse::<i64>().ok()? * 60))
    } else {
        (time, 0)
    };
    let mut t = clock.split(':');
    let h: i64 = t.next()?.parse().ok()?;
    let mi: i64 = t.next()?.parse().ok()?;
    let s: f64 = t.next().unwrap_or("0").parse().ok()?;
    if h > 23 || mi > 59 || !(0.0..61.0).contains(&s) {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y_adj = if mo <= 2 { y - 1 } else { y };
    let era = y_adj.div_euclid(400);
    let yoe = y_adj - era * 400;
    let doy = (153 * (if mo > 2 { mo - 3 } else { mo + 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 - offset_secs;
    let whole = u64::try_from(secs).ok()?;
    Some(UNIX_EPOCH + Duration::from_secs(whole) + Duration::from_secs_f64(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_durations() {
        assert_eq!(parse_iso8601_duration("PT10S"), Some(10.0));
        assert_eq!(parse_iso8601_duration("PT0.5S"), Some(0.5));
        assert_eq!(parse_iso8601_duration("P1DT1H1M1S"), Some(90_061.0));
        assert_eq!(parse_iso8601_duration("P1W"), Some(604_800.0));
        assert_eq!(parse_iso8601_duration("P0D"), Some(0.0));
        for bad in ["", "P", "PT", "10S", "PT10", "PTS", "PT1S1M", "P1Y"] {
            assert_eq!(parse_iso8601_duration(bad), None, "{bad}");
        }
    }

    #[test]
    fn iso_datetimes() {
        let at = |s| parse_iso8601_datetime(s).map(|t| t.duration_since(UNIX_EPOCH).unwrap().as_secs_f64());
        assert_eq!(at("1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(at("2026-05-19T12:00:00+00:00"), Some(1_779_192_000.0));
        assert_eq!(at("2026-05-19T14:00:00+02:00"), Some(1_779_192_000.0));
        assert_eq!(at("2026-05-19T12:00:00"), Some(1_779_192_000.0));
        assert_eq!(at("2026-05-19T12:00:00.25Z"), Some(1_779_192_000.25));
        assert_eq!(at("2026-13-19T12:00:00Z"), None);
        assert_eq!(at("yesterday"), None);
    }

    #[test]
    fn can_run_refuses_unknown_keys_and_tcp_only_keys_on_udp() {
        let ok = can_run(&json!({"type": "throughput", "spec": {"schema": 1, "dest": "b", "duration": "PT5S"}}));
        assert_eq!(ok, json!({"can-run": true}));
        let bad = can_run(
            &json!({"type": "throughput", "spec": {"schema": 1, "dest": "b", "ip-tos": 8, "udp": true, "mss": 1400}}),
        );
        assert_eq!(bad["can-run"], json!(false));
        let reasons = bad["reasons"].to_string();
        assert!(reasons.contains("ip-tos") && reasons.contains("mss"), "{reasons}");
        assert_eq!(can_run(&json!({"type": "rtt", "spec": {}}))["can-run"], json!(false));
    }

    #[test]
    fn slot_is_setup_plus_omit_plus_duration_plus_margins() {
        let d = duration(&json!({"type": "throughput", "spec": {"dest": "b", "duration": "PT10S", "omit": "PT2S"}}))
            .unwrap();
        // setup 4 s (default 200 ms RTT), omit 2, duration 10, start delay 2, shutdown 2.
        assert_eq!(d, json!({"duration": "PT20S"}));
        let d = duration(&json!({"spec": {"dest": "b", "link-rtt": "PT0.01S"}})).unwrap();
        assert_eq!(d, json!({"duration": "PT15S"}));
    }
}
