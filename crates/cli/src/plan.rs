//! From flags to a runnable test: parses units, checks ranges, applies defaults. Pure; every
//! error names the flag and the value, and is raised before any traffic.

use crate::args::{CommonArgs, ConsoleArgs, EchoArgs, RrArgs, TcpArgs, TrafficArgs, UdpArgs};
use crate::flags::usage;
pub(crate) use crate::flags::{seconds, UsageError};
use crate::metrics::Expectation;
use netchar_engine::client::{ClientConfig, Family};
use netchar_engine::jobs::under_load::LoadPlan;
use netchar_engine::protocols::Command;
use netchar_model::units::{parse_bit_rate, parse_bytes, RateFormat};
use netchar_model::{
    parse_duration, Direction, EndCondition, Pattern, RrOptions, TestKind, TestSpec, UdpRate, MAX_SECONDS,
    PACED_TCP_BLOCK_BYTES, UDP_HEADER_BYTES,
};
use netchar_sys::console::ConsoleSource;
use std::path::PathBuf;
use std::time::Duration;

/// `--psk-file FILE [--psk-user USER]`: the credentials to authenticate with.
fn client_key(a: &CommonArgs) -> Result<Option<netchar_wire::auth::Credentials>, UsageError> {
    let Some(path) = &a.psk_file else { return Ok(None) };
    let text =
        crate::serve::read_small_file(path).map_err(|e| UsageError(format!("--psk-file {}: {e}", path.display())))?;
    let creds = netchar_wire::auth::parse_key_file(&text)
        .map_err(|e| UsageError(format!("--psk-file {}: {e}", path.display())))?;
    let chosen = match &a.psk_user {
        None => creds.into_iter().next(),
        Some(u) => creds.into_iter().find(|c| &c.user == u),
    };
    chosen.map(Some).ok_or_else(|| {
        UsageError(format!("--psk-user {}: no such user in {}", a.psk_user.as_deref().unwrap_or(""), path.display()))
    })
}

/// A serial console's speed when `--console` gives none: the usual one of boards' UARTs.
const DEFAULT_BAUD: u32 = 115_200;

/// `--console DEVICE[:BAUD]` or `--console-cmd CMD`.
pub(crate) fn console_source(a: &ConsoleArgs) -> Result<Option<ConsoleSource>, UsageError> {
    if let Some(cmd) = &a.console_cmd {
        if cmd.trim().is_empty() {
            return usage("--console-cmd: give the command that prints the console, e.g. 'ssh board dmesg -w'".into());
        }
        return Ok(Some(ConsoleSource::Command(cmd.clone())));
    }
    let Some(given) = &a.console else { return Ok(None) };
    let (device, baud) = match given.rsplit_once(':') {
        Some((device, baud)) => match baud.parse::<u32>() {
            Ok(b) if b > 0 => (device, b),
            _ => {
                return usage(format!(
                "--console {given}: {baud:?} is not a baud rate; give DEVICE or DEVICE:BAUD, e.g. /dev/ttyUSB0:115200"
            ))
            }
        },
        None => (given.as_str(), DEFAULT_BAUD),
    };
    if device.is_empty() {
        return usage(format!("--console {given}: no device; give DEVICE or DEVICE:BAUD, e.g. /dev/ttyUSB0:115200"));
    }
    Ok(Some(ConsoleSource::Serial { device: device.to_string(), baud }))
}

/// `--reset-cmd` and `--reset-timeout`.
fn reset_command(a: &crate::args::CommonArgs) -> Result<Option<crate::hooks::ResetCommand>, UsageError> {
    let command = crate::hooks::UserCommand::from_flags(
        "--reset-cmd",
        a.reset_cmd.as_deref(),
        "--reset-timeout",
        &a.reset_timeout,
    )
    .map_err(|e| UsageError(e.to_string()))?;
    Ok(command.map(|c| crate::hooks::ResetCommand { ready_timeout: c.timeout, command: c }))
}

/// How the result is shown and saved.
#[derive(Debug, Clone)]
pub(crate) struct Output {
    pub(crate) json: bool,
    pub(crate) json_out: Option<PathBuf>,
    pub(crate) format: RateFormat,
    /// Counted runs (`--repeat`) and uncounted ones before them (`--warmup`).
    pub(crate) repeat: u32,
    pub(crate) warmup: u32,
    pub(crate) save: Option<PathBuf>,
    pub(crate) expect: Vec<Expectation>,
    /// (baseline file, largest allowed regression in percent).
    pub(crate) baseline: Option<(PathBuf, f64)>,
    /// `--accept-difference`: the fields of the method in which the runs may differ from the
    /// baseline's (crate::same_method).
    pub(crate) accept_difference: Vec<&'static str>,
    /// `--reset-cmd`: before each run.
    pub(crate) reset: Option<crate::hooks::ResetCommand>,
}

impl Output {
    /// How a test given by `a` is shown, saved, repeated and judged; every flag checked.
    pub(crate) fn from_args(a: &CommonArgs) -> Result<Self, UsageError> {
        let format = match &a.format {
            Some(f) => {
                RateFormat::from_letter(f).ok_or_else(|| UsageError(format!("-f {f}: use one of k m g K M G")))?
            }
            None => RateFormat::AutoBits,
        };
        Ok(Self {
            json: a.json,
            json_out: a.json_out.clone(),
            format,
            repeat: match count("--repeat", &a.repeat)? {
                0 => return usage("--repeat 0: run at least once".into()),
                n => n,
            },
            warmup: count("--warmup", &a.warmup)?,
            save: a.save.clone(),
            expect: a
                .expect
                .iter()
                .map(|e| Expectation::parse(e).map_err(|m| UsageError(format!("--expect {m}"))))
                .collect::<Result<_, _>>()?,
            baseline: match (&a.baseline, &a.max_regression) {
                (Some(f), Some(r)) => {
                    let pct = r.trim().trim_end_matches('%').parse::<f64>().ok().filter(|p| p.is_finite() && *p >= 0.0);
                    Some((
                        f.clone(),
                        pct.ok_or_else(|| UsageError(format!("--max-regression {r}: expected a percentage like 5%")))?,
                    ))
                }
                (Some(_), None) => return usage("--baseline: give --max-regression too (e.g. 5%)".into()),
                (None, Some(r)) => return usage(format!("--max-regression {r}: give --baseline FILE too")),
                (None, None) => None,
            },
            accept_difference: crate::same_method::accepted_fields(&a.accept_difference).map_err(UsageError)?,
            reset: reset_command(a)?,
        })
    }

    /// Every gate names a figure a test of `spec` will have, or it fails now, not after the
    /// test.
    pub(crate) fn check_expectations(&self, spec: &TestSpec) -> Result<(), UsageError> {
        for e in &self.expect {
            netchar_model::figures::check_path(spec, &e.path)
                .map_err(|why| UsageError(format!("--expect '{}': {why}", e.text)))?;
        }
        Ok(())
    }
}

/// A test ready to run.
#[derive(Debug, Clone)]
pub(crate) struct TcpPlan {
    pub(crate) client: ClientConfig,
    pub(crate) output: Output,
    /// rr only: measure idle, then under this load.
    pub(crate) under_load: Option<LoadPlan>,
    /// UDP: -b or --pps was given (a search then uses it as its ceiling).
    pub(crate) explicit_rate: bool,
    /// `--console`, `--console-cmd`: the target's console, read around each run.
    pub(crate) console: Option<ConsoleSource>,
    /// `--nft-counter`: chains of the client's host whose counters each run reads around it.
    pub(crate) nft_chains: Vec<[String; 3]>,
    /// `--step-cmd` of the sweep, suite or plan the test is a step of, and the job's step count.
    pub(crate) step: crate::hooks::StepCommand,
}

fn bytes(flag: &str, value: &str) -> Result<u64, UsageError> {
    parse_bytes(value).or_else(|e| usage(format!("{flag} {value}: {e}")))
}

fn count(flag: &str, value: &str) -> Result<u32, UsageError> {
    value.trim().parse::<u32>().or_else(|_| usage(format!("{flag} {value}: not a whole number")))
}

/// Splits `HOST`, `HOST:PORT`, `[V6]:PORT` and bare IPv6 addresses.
pub(crate) fn split_host(input: &str) -> Result<(String, Option<u16>), UsageError> {
    let bad = || UsageError(format!("{input:?}: expected HOST, HOST:PORT or [IPV6]:PORT"));
    if input.is_empty() {
        return Err(bad());
    }
    if let Some(rest) = input.strip_prefix('[') {
        let (host, tail) = rest.split_once(']').ok_or_else(bad)?;
        let port = match tail.strip_prefix(':') {
            Some(p) => Some(p.parse().map_err(|_| bad())?),
            None if tail.is_empty() => None,
            None => return Err(bad()),
        };
        return Ok((host.to_string(), port));
    }
    if input.matches(':').count() > 1 {
        return split_unbracketed_ipv6(input);
    }
    match input.split_once(':') {
        Some((h, p)) if !h.is_empty() => Ok((h.to_string(), Some(p.parse().map_err(|_| bad())?))),
        Some(_) => Err(bad()),
        None => Ok((input.to_string(), None)),
    }
}

/// An unbracketed HOST with two or more colons can only be an IPv6 address: no host name has
/// a colon. `::1:5608` is both the address ::1:5608 and ::1 with port 5608, so it is refused
/// with both spellings rather than guessed; anything else that is not an address would fail
/// later as "cannot resolve", after the header, without saying how to write a port.
fn split_unbracketed_ipv6(input: &str) -> Result<(String, Option<u16>), UsageError> {
    let (head, last) = input.rsplit_once(':').unwrap_or((input, ""));
    let digits = !last.is_empty() && last.bytes().all(|b| b.is_ascii_digit());
    let port = last.parse::<u16>().ok().filter(|_| digits);
    match (is_ipv6(input), is_ipv6(head) && digits, port) {
        (true, true, Some(_)) => usage(format!(
            "{input}: ambiguous; write [{head}]:{last} or {head} -p {last} for port {last}, or [{input}] for the address {input}"
        )),
        (true, _, _) => Ok((input.to_string(), None)),
        (false, true, Some(_)) => {
            usage(format!("{input}: not an IPv6 address; write [{head}]:{last} or {head} -p {last} for port {last}"))
        }
        (false, true, None) => usage(format!("{input}: {last} is not a port number (1-65535); write [{head}]:PORT")),
        (false, false, _) => {
            usage(format!("{input}: not an IPv6 address or a host name; write [IPV6]:PORT for a port, or -p PORT"))
        }
    }
}

/// A literal IPv6 address, with or without a `%scope` (`fe80::1%eth0`, which the resolver
/// takes but [`std::net::Ipv6Addr`] does not).
fn is_ipv6(s: &str) -> bool {
    let (addr, scope) = s.split_once('%').unwrap_or((s, "x"));
    !scope.is_empty() && !scope.contains(':') && addr.parse::<std::net::Ipv6Addr>().is_ok()
}

fn affinity(value: &str) -> Result<(Option<usize>, Option<usize>), UsageError> {
    let cpus = netchar_engine::measure::host_info().cores as usize;
    let one = |s: &str| -> Result<usize, UsageError> {
        match s.trim().parse::<usize>() {
            Ok(c) if c < cpus => Ok(c),
            Ok(c) => usage(format!("-A {value}: CPU {c} does not exist here (CPUs 0 to {})", cpus - 1)),
            Err(_) => usage(format!("-A {value}: expected CPU or CPU,SERVERCPU")),
        }
    };
    match value.split_once(',') {
        Some((c, s)) => {
            Ok((Some(one(c)?), Some(s.trim().parse().or_else(|_| usage(format!("-A {value}: bad SERVERCPU")))?)))
        }
        None => Ok((Some(one(value)?), None)),
    }
}

impl TcpPlan {
    /// Validates every `netchar tcp` flag and builds the plan.
    pub(crate) fn from_args(a: &TcpArgs) -> Result<Self, UsageError> {
        let mut spec = TestSpec::tcp_default();
        spec.tcp.rate_bps_per_stream = match &a.bitrate {
            Some(b) => Some(parse_bit_rate(b).or_else(|e| usage(format!("-b {b}: {e}")))?).filter(|&r| r > 0),
            None => None,
        };
        // The write length, and the one to switch to if `--proto auto` finds a peer's server
        // (engine::client::run): the peer's default, as `--proto PEER` writes, unless -l chose.
        let peer_block_bytes;
        (spec.block_bytes, peer_block_bytes) = match &a.length {
            Some(l) => (bytes("-l", l)?, None),
            // A peer tool's own default, and short writes between a paced sender's pauses.
            None if spec.tcp.rate_bps_per_stream.is_some() || a.common.proto.peer().is_some() => {
                (PACED_TCP_BLOCK_BYTES, None)
            }
            None => (spec.block_bytes, Some(PACED_TCP_BLOCK_BYTES)),
        };
        spec.tcp.window_bytes = a.window.as_deref().map(|w| bytes("-w", w)).transpose()?;
        spec.tcp.mss = a.mss.as_deref().map(|m| count("-M", m)).transpose()?;
        spec.tcp.nodelay = a.nodelay;
        spec.tcp.congestion = a.congestion.clone();
        spec.tcp.zerocopy = a.zerocopy;
        spec.tcp.skip_rx_copy = a.skip_rx_copy;
        spec.tcp.wake_per_segment = a.rx_wake_per_segment;
        let mut plan = Self::with_common(spec, &a.common, Command::Tcp)?;
        plan.client.peer_block_bytes = peer_block_bytes;
        Ok(plan)
    }

    /// Validates every `netchar udp` flag and builds the plan.
    pub(crate) fn from_udp_args(a: &UdpArgs) -> Result<Self, UsageError> {
        let mut spec = TestSpec::udp_default();
        if let Some(l) = &a.length {
            spec.block_bytes = bytes("-l", l)?;
            if spec.block_bytes < UDP_HEADER_BYTES {
                return usage(format!(
                    "-l {l}: a UDP payload must be at least {UDP_HEADER_BYTES} bytes (netchar's datagram header)"
                ));
            }
        }
        let u = spec.udp.as_mut().expect("udp_default has UDP options");
        u.rate = match (&a.bitrate, &a.pps) {
            (Some(b), _) => match parse_bit_rate(b).or_else(|e| usage(format!("-b {b}: {e}")))? {
                0 => UdpRate::Unlimited,
                r => UdpRate::BitsPerSecond(r),
            },
            (None, Some(p)) => match parse_bytes(p).or_else(|e| usage(format!("--pps {p}: {e}")))? {
                0 => return usage(format!("--pps {p}: use -b 0 for as fast as possible")),
                r => UdpRate::PacketsPerSecond(r),
            },
            (None, None) => UdpRate::BitsPerSecond(1_000_000),
        };
        u.per_stream = a.per_stream;
        u.pattern = match &a.pattern {
            Some(p) => Some(Pattern::parse(p).or_else(|e| usage(format!("--pattern {p}: {e}")))?),
            None => None,
        };
        u.grace_seconds = parse_duration(&a.grace)
            .ok_or_else(|| UsageError(format!("--grace {}: expected a duration like 250ms or 1s", a.grace)))?;
        u.pacing_quantum_seconds = match a.pacing_quantum.as_str() {
            "0" => 0.0,
            q => parse_duration(q).filter(|&s| s <= netchar_model::spec::MAX_PACING_QUANTUM_SECONDS).ok_or_else(
                || UsageError(format!("--pacing-quantum {q}: expected a duration up to 10ms, like 100us")),
            )?,
        };
        // Linux refuses to segment datagrams that carry no checksum (EINVAL): plain sends.
        u.gso = !a.no_gso && !a.no_udp_checksum;
        u.gro = a.gro;
        u.no_checksum = a.no_udp_checksum;
        u.xdp = a.xdp.as_deref().map(crate::flags::xdp_send).transpose()?;
        if let Some(x) = u.xdp.as_mut().filter(|_| a.xdp_live) {
            // The program stamps two header fields and leaves the rest of the frame as built.
            if !a.no_udp_checksum {
                return usage(
                    "--xdp-live: the XDP program does not recompute the UDP checksum; add --no-udp-checksum (IPv4)"
                        .into(),
                );
            }
            if a.pattern.is_some() || a.common.payload.given() {
                return usage("--xdp-live: every frame is one template of one length and netchar's constant payload; not with --pattern, --payload or --verify".into());
            }
            // Each call into the kernel's live-frames mode sets up and tears down a page pool
            // (milliseconds): it sends in large calls and cannot keep a schedule.
            if !matches!(u.rate, UdpRate::Unlimited) {
                return usage("--xdp-live: sends flat out in large calls into the kernel; give -b 0".into());
            }
            x.live = true;
        }
        let mut plan = Self::with_common(spec, &a.common, Command::Udp)?;
        if a.xdp.is_some() {
            crate::flags::xdp_fits(plan.client.spec.direction, a.common.proto.protocol().name())?;
        }
        plan.explicit_rate = a.bitrate.is_some() || a.pps.is_some();
        if a.step.step_cmd.is_some() && !a.find_max_rate {
            return usage("--step-cmd: only with --find-max-rate (its trials are the steps); for one test, run the command before it".into());
        }
        plan.step = crate::hooks::StepCommand::new(
            crate::hooks::UserCommand::of_step(&a.step).map_err(|e| UsageError(e.to_string()))?,
        );
        if a.find_max_rate && a.common.time.is_none() {
            plan.client.spec.end = EndCondition::Seconds(2.0);
        }
        // A fixed datagram list ends the test by itself: it is not cut off by the default 10 s.
        let spec = &mut plan.client.spec;
        if a.common.time.is_none() && a.common.bytes.is_none() {
            if let Some(p) = spec.udp.as_ref().and_then(|u| u.pattern.as_ref()).filter(|p| !p.sizes.is_empty()) {
                let _ = p;
                spec.end = EndCondition::Seconds(MAX_SECONDS);
            }
        }
        Ok(plan)
    }

    /// Validates every `netchar rr` flag and builds the plan. `-n` counts transactions.
    pub(crate) fn from_rr_args(a: &RrArgs) -> Result<Self, UsageError> {
        Self::rr_plan(a, Command::Rr)
    }

    fn rr_plan(a: &RrArgs, command: Command) -> Result<Self, UsageError> {
        let mut spec = TestSpec::rr_default();
        let request = bytes("-l", &a.length)?;
        let response = match &a.response {
            Some(r) => bytes("--response", r)?,
            None => request,
        };
        let timeout = parse_duration(&a.timeout)
            .ok_or_else(|| UsageError(format!("--timeout {}: expected a duration like 1s or 200ms", a.timeout)))?;
        spec.block_bytes = request;
        spec.rr = Some(RrOptions {
            udp: a.udp,
            request_bytes: request,
            response_bytes: response,
            inflight: count("--inflight", &a.inflight)?,
            timeout_seconds: timeout,
            busy_poll: a.busy_poll,
            wakeup_stamps: a.wakeup_stamps,
            connect_per_transaction: false,
            pause_every: None,
            pause_seconds: 0.0,
        });
        if a.common.reverse || a.common.bidir {
            return usage("-R/--bidir: a request/response test always goes both ways".into());
        }
        if command == Command::Crr && a.common.payload.given() {
            return usage(
                "crr: --payload and --verify apply to rr (one connection), not to a connection per transaction".into(),
            );
        }
        if a.wakeup_stamps && !a.udp {
            return usage("--wakeup-stamps: UDP only (add --udp); TCP answers carry no kernel receive stamp".into());
        }
        let mut plan = Self::with_common(spec, &a.common, command)?;
        if let Some(l) = &a.under_load {
            plan.under_load = Some(LoadPlan::parse(l).map_err(|e| UsageError(format!("--under-load {l}: {e}")))?);
            if a.common.bytes.is_some() {
                return usage("--under-load: give a duration (-t), not a transaction count (-n)".into());
            }
        }
        Ok(plan)
    }

    /// `netchar crr`: an rr test with a new TCP connection per transaction.
    pub(crate) fn from_crr_args(a: &RrArgs) -> Result<Self, UsageError> {
        if a.udp || a.busy_poll || a.under_load.is_some() || a.inflight != "1" {
            return usage("crr: --udp, --busy-poll, --under-load and --inflight do not apply".into());
        }
        if a.common.traffic.given() {
            // Its requester connects once per transaction, outside the data streams' setup.
            return usage("crr: --tos, --dscp, --flowlabel, --df, -B and --bind-dev are not applied to its per-transaction connections; measure them with rr".into());
        }
        let mut plan = Self::rr_plan(a, Command::Crr)?;
        if let Some(r) = plan.client.spec.rr.as_mut() {
            r.connect_per_transaction = true;
        }
        Ok(plan)
    }

    /// `netchar echo`: one plan per `COUNTxSIZE` group of the pattern, each an rr test whose
    /// request and response are the buffer, `COUNT` transactions, one at a time, with the
    /// pattern's pauses between bursts (the eCos nc_test echo tests).
    pub(crate) fn from_echo_args(a: &EchoArgs) -> Result<Vec<Self>, UsageError> {
        if a.common.time.is_some() || a.common.reverse || a.common.bidir || a.common.parallel != "1" {
            return usage("echo: the pattern sets the test (-t, -R, --bidir and -P do not apply)".into());
        }
        if a.common.reset_cmd.is_some() {
            return usage("echo: --reset-cmd is for tcp, udp, rr and crr (run the command before netchar echo)".into());
        }
        let pattern = Pattern::parse(&a.pattern).or_else(|e| usage(format!("--pattern {}: {e}", a.pattern)))?;
        if pattern.sizes.is_empty() {
            return usage(format!("--pattern {}: name the buffers, e.g. 640x1024 or 2048x1024,10@10ms", a.pattern));
        }
        let timeout = parse_duration(&a.timeout)
            .ok_or_else(|| UsageError(format!("--timeout {}: expected a duration like 1s or 200ms", a.timeout)))?;
        let mut plans = Vec::new();
        for &(count, size) in &pattern.sizes {
            let mut spec = TestSpec::rr_default();
            spec.block_bytes = size;
            spec.rr = Some(RrOptions {
                udp: a.udp,
                request_bytes: size,
                response_bytes: size,
                inflight: 1,
                timeout_seconds: timeout,
                busy_poll: false,
                wakeup_stamps: false,
                connect_per_transaction: false,
                pause_every: pattern.burst,
                pause_seconds: pattern.gap_seconds,
            });
            let mut plan = Self::with_common(spec, &a.common, Command::Echo)?;
            plan.client.spec.end = EndCondition::Bytes(count);
            plans.push(plan);
        }
        Ok(plans)
    }

    fn with_common(spec: TestSpec, a: &CommonArgs, command: Command) -> Result<Self, UsageError> {
        let protocol = a.proto.protocol();
        if !protocol.runs(command) {
            let runs: Vec<&str> = protocol.def().commands.iter().map(|c| c.name()).collect();
            return usage(format!(
                "--proto {}: not with `{}` ({} runs with {}); `{}` runs {}",
                protocol.name(),
                command.name(),
                protocol.name(),
                runs.join(", "),
                command.name(),
                netchar_engine::protocols::Protocol::names_for(command)
            ));
        }
        let plan = Self::with_common_unchecked(spec, a)?;
        // The test as the client will run it: shaped by its protocol (a service decides the
        // direction; a sink refuses what needs a server).
        let shaped = match plan.client.protocol.peer().and_then(|p| p.def().shape) {
            Some(shape) => shape(&plan.client.spec).map_err(|e| UsageError(e.to_string()))?,
            None => plan.client.spec.clone(),
        };
        // A peer protocol says what it cannot run now, before any connection.
        if let Some(p) = plan.client.protocol.peer() {
            netchar_engine::client::session(p, std::time::Instant::now(), &shaped, &plan.client)
                .map_err(|e| UsageError(e.to_string()))?;
        }
        plan.output.check_expectations(&shaped)?;
        Ok(plan)
    }

    fn with_common_unchecked(mut spec: TestSpec, a: &CommonArgs) -> Result<Self, UsageError> {
        let (host, host_port) = split_host(&a.host)?;
        // Each protocol's servers listen on their own port (crate netchar_engine::protocols).
        let port = a.port.or(host_port).unwrap_or(a.proto.protocol().def().default_port);
        if port == 0 {
            return usage("-p 0: the server port must be between 1 and 65535".into());
        }
        spec.direction = if a.bidir || a.dualtest || a.tradeoff {
            Direction::Bidir
        } else if a.reverse {
            Direction::Down
        } else {
            Direction::Up
        };
        spec.streams = count("-P", &a.parallel)?;
        spec.end = match (&a.time, &a.bytes) {
            (_, Some(n)) => EndCondition::Bytes(bytes("-n", n)?),
            (Some(t), None) => EndCondition::Seconds(seconds("-t", t)?),
            (None, None) => EndCondition::Seconds(10.0),
        };
        spec.interval_seconds = seconds("-i", &a.interval)?;
        spec.omit_seconds = seconds("-O", &a.omit)?;
        let (client_cpu, server_cpu) = match &a.affinity {
            Some(v) => affinity(v)?,
            None => (None, None),
        };
        spec.server_cpu = server_cpu;
        spec.server_load = a.server_load.map(|p| (p, a.server_load_threads));
        spec.measure_idle = a.idle;
        spec.ip = ip_options(&a.traffic)?;
        spec.payload = payload(&a.payload)?;
        spec.verify = a.payload.verify;
        // UDP payload defaults depend on the family; validate with a stand-in until then.
        let mut check = spec.clone();
        if check.kind == TestKind::Udp && check.block_bytes == 0 {
            check.block_bytes = 1452;
        }
        check.validate().or_else(|e| usage(e.to_string()))?;
        let connect_timeout = seconds("--connect-timeout", &a.connect_timeout)?;
        if !(connect_timeout > 0.0 && connect_timeout <= 3600.0) {
            return usage(format!("--connect-timeout {connect_timeout}: must be more than 0 and at most 3600 seconds"));
        }
        let busy_wait = seconds("--busy-wait", &a.busy_wait)?;
        if !(0.0..=86_400.0).contains(&busy_wait) {
            return usage(format!("--busy-wait {busy_wait}: must be between 0 and 86400 seconds"));
        }
        let target_ns_per_instruction = match a.target_ns_per_instruction {
            Some(ns) if !(ns.is_finite() && ns > 0.0) => {
                return usage(format!("--target-ns-per-instruction {ns}: must be a number of nanoseconds above 0"))
            }
            ns => ns,
        };
        let bind = binding(&a.traffic)?;
        let family = family(a, &spec, &host, bind.as_ref())?;
        Ok(Self {
            client: ClientConfig {
                family,
                connect_timeout: Duration::from_secs_f64(connect_timeout),
                busy_wait: Duration::from_secs_f64(busy_wait),
                client_cpu,
                title: a.title.clone(),
                auth: client_key(a)?,
                dial_back: dial_back(a)?,
                bind,
                target_ns_per_instruction,
                ..ClientConfig::new(host, port, spec, a.proto)
            },
            output: Output::from_args(a)?,
            under_load: None,
            explicit_rate: false,
            console: console_source(&a.console_args)?,
            nft_chains: a
                .nft_counter
                .iter()
                .map(|c| netchar_sys::nft::parse_chain(c).map_err(|e| UsageError(format!("--nft-counter {e}"))))
                .collect::<Result<_, _>>()?,
            step: crate::hooks::StepCommand::new(None),
        })
    }
}

/// `--tos`/`--dscp`, `--flowlabel` and `--df`.
fn ip_options(t: &TrafficArgs) -> Result<netchar_model::IpOptions, UsageError> {
    use netchar_model::spec::{parse_dscp, parse_tos, MAX_FLOWLABEL};
    let tos = match (&t.tos, &t.dscp) {
        (Some(v), _) => Some(parse_tos(v).map_err(|e| UsageError(format!("--tos {v}: {e}")))?),
        (None, Some(v)) => Some(parse_dscp(v).map_err(|e| UsageError(format!("--dscp {v}: {e}")))? << 2),
        (None, None) => None,
    };
    let flowlabel = match &t.flowlabel {
        Some(v) => {
            let hex = v.trim().strip_prefix("0x").map(|h| u32::from_str_radix(h, 16));
            match hex.unwrap_or_else(|| v.trim().parse()) {
                Ok(l) if (1..=MAX_FLOWLABEL).contains(&l) => Some(l),
                _ => return usage(format!("--flowlabel {v}: a flow label is 1 to {MAX_FLOWLABEL} (0xFFFFF)")),
            }
        }
        None => None,
    };
    Ok(netchar_model::IpOptions { tos, flowlabel, dont_fragment: t.df })
}

/// `-B ADDR[:PORT]` and `--bind-dev IF`.
fn binding(t: &TrafficArgs) -> Result<Option<netchar_model::LocalBinding>, UsageError> {
    let (address, port) = match &t.bind {
        Some(b) => {
            let (host, port) = split_host(b).map_err(|e| UsageError(format!("-B {b}: {e}")))?;
            let ip = host.parse::<std::net::IpAddr>().map_err(|_| {
                UsageError(format!("-B {b}: expected an address of this host (ADDR, ADDR:PORT or [IPV6]:PORT)"))
            })?;
            (Some(ip), port.filter(|&p| p != 0))
        }
        None => (None, None),
    };
    let device = match &t.bind_dev {
        Some(d) if d.is_empty() || d.len() > 15 || d.contains(['/', ' ', '\0']) => {
            return usage(format!("--bind-dev {d:?}: an interface name is 1 to 15 characters"))
        }
        d => d.clone(),
    };
    Ok((address.is_some() || device.is_some()).then_some(netchar_model::LocalBinding { address, port, device }))
}

/// The address family: `-4`/`-6`, or the one family that the options asked for exist in
/// (`--flowlabel` IPv6, `--no-udp-checksum` IPv4, `-B`'s address); the server's address must
/// be of it too.
fn family(
    a: &CommonArgs,
    spec: &TestSpec,
    host: &str,
    bind: Option<&netchar_model::LocalBinding>,
) -> Result<Option<Family>, UsageError> {
    let name = |f: Family| if f == Family::V4 { "IPv4" } else { "IPv6" };
    let asked = [
        (a.ipv4.then_some(Family::V4), "-4".to_string()),
        (a.ipv6.then_some(Family::V6), "-6".to_string()),
        (spec.ip.flowlabel.map(|_| Family::V6), "--flowlabel (an IPv4 header has no flow label)".to_string()),
        (
            spec.udp.as_ref().filter(|u| u.no_checksum).map(|_| Family::V4),
            "--no-udp-checksum (the UDP checksum is mandatory over IPv6, RFC 8200)".to_string(),
        ),
        (
            bind.and_then(|b| b.address).map(|ip| if ip.is_ipv4() { Family::V4 } else { Family::V6 }),
            format!("-B {}", bind.and_then(|b| b.address).map(|ip| ip.to_string()).unwrap_or_default()),
        ),
    ];
    let mut chosen: Option<(Family, &str)> = None;
    for (f, why) in asked.iter().filter_map(|(f, why)| f.map(|f| (f, why.as_str()))) {
        match chosen {
            Some((c, first)) if c != f => {
                return usage(format!("{why} is {} only, and {first} is {}", name(f), name(c)))
            }
            _ => chosen = Some((f, why)),
        }
    }
    let host_family =
        host.parse::<std::net::IpAddr>().ok().map(|ip| if ip.is_ipv4() { Family::V4 } else { Family::V6 });
    match (chosen, host_family) {
        (Some((f, why)), Some(h)) if f != h => {
            usage(format!("{why} is {} only, and {host} is an {} address", name(f), name(h)))
        }
        (chosen, _) => Ok(chosen.map(|(f, _)| f)),
    }
}

/// `--payload KIND[:SEED]`; `--verify` alone checks netchar's pattern (named in the spec, so
/// rr tests, whose bytes are constant without one, make it too).
fn payload(a: &crate::args::PayloadArgs) -> Result<Option<netchar_model::PayloadSpec>, UsageError> {
    let draw = || {
        let mut seed = [0u8; 8];
        // Without the kernel's random numbers the clock's nanoseconds still differ per run.
        if getrandom::getrandom(&mut seed).is_err() {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            seed = (now.as_nanos() as u64).to_le_bytes();
        }
        u64::from_le_bytes(seed)
    };
    match &a.payload {
        Some(p) => {
            netchar_model::PayloadSpec::parse(p, draw).map(Some).map_err(|e| UsageError(format!("--payload {p}: {e}")))
        }
        None if a.verify => Ok(Some(netchar_model::PayloadSpec::default())),
        None => Ok(None),
    }
}

/// iperf2's `-d`/`-r`: only where the protocol dials back (crate netchar_engine::protocols).
fn dial_back(a: &CommonArgs) -> Result<Option<netchar_wire::iperf2::DialBack>, UsageError> {
    use netchar_wire::iperf2::DialBack;
    let dial_back = match (a.dualtest, a.tradeoff) {
        (true, _) => DialBack::Dual,
        (_, true) => DialBack::Tradeoff,
        _ => return Ok(None),
    };
    let protocol = a.proto.protocol();
    if !protocol.def().dial_back {
        let opt = if dial_back == DialBack::Dual { "-d" } else { "-r" };
        let dialing: Vec<&str> =
            netchar_engine::protocols::PROTOCOLS.iter().filter(|p| p.dial_back).map(|p| p.name).collect();
        return usage(format!(
            "{opt}: the server dialing back is {}'s test (--proto {}), not {}'s; against netchar use --bidir{}",
            dialing.join(", "),
            dialing.join("|"),
            protocol.name(),
            if dial_back == DialBack::Dual { "" } else { ", or one run up and one with -R" }
        ));
    }
    Ok(Some(dial_back))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn console_takes_a_device_an_optional_baud_or_a_command() {
        let serial = |d: &str, baud| Some(ConsoleSource::Serial { device: d.into(), baud });
        assert_eq!(udp_plan(&["h", "--console", "/dev/ttyUSB0"]).unwrap().console, serial("/dev/ttyUSB0", 115_200));
        assert_eq!(udp_plan(&["h", "--console", "/dev/ttyACM1:9600"]).unwrap().console, serial("/dev/ttyACM1", 9600));
        let cmd = udp_plan(&["h", "--console-cmd", "ssh board dmesg -w"]).unwrap().console;
        assert_eq!(cmd, Some(ConsoleSource::Command("ssh board dmesg -w".into())));
        for bad in ["/dev/ttyUSB0:", "/dev/ttyUSB0:fast", "/dev/ttyUSB0:0", ":115200"] {
            let e = udp_plan(&["h", "--console", bad]).err().map(|e| e.0).unwrap_or_default();
            assert!(e.starts_with(&format!("--console {bad}:")) && e.contains("DEVICE:BAUD"), "{bad}: {e}");
        }
        assert!(udp_plan(&["h", "--console-cmd", " "]).is_err());
    }

    /// Without -l an unpaced netchar sender writes TCP_BLOCK_BYTES; a paced one, and one
    /// speaking a peer tool's protocol, that tool's 128 KiB; -l wins everywhere.
    #[test]
    fn the_tcp_write_length_defaults_by_pacing_and_protocol() {
        let block = |args: &[&str]| tcp_plan(args).unwrap().client.spec.block_bytes;
        assert_eq!(block(&["h"]), netchar_model::TCP_BLOCK_BYTES);
        assert_eq!(block(&["h", "--proto", "auto"]), netchar_model::TCP_BLOCK_BYTES);
        assert_eq!(block(&["h", "-b", "0"]), netchar_model::TCP_BLOCK_BYTES);
        assert_eq!(block(&["h", "-b", "10M"]), PACED_TCP_BLOCK_BYTES);
        assert_eq!(block(&["h", "--proto", "iperf3"]), PACED_TCP_BLOCK_BYTES);
        assert_eq!(block(&["h", "--proto", "iperf2"]), PACED_TCP_BLOCK_BYTES);
        assert_eq!(block(&["h", "-l", "64Ki"]), 64 * 1024);
        assert_eq!(block(&["h", "-l", "1Mi", "-b", "10M", "--proto", "iperf3"]), 1 << 20);
        // What `--proto auto` writes if it finds a peer's server: the peer's default, unless
        // -l chose (even netchar's own default, by name).
        let on_peer = |args: &[&str]| tcp_plan(args).unwrap().client.peer_block_bytes;
        assert_eq!(on_peer(&["h"]), Some(PACED_TCP_BLOCK_BYTES));
        assert_eq!(on_peer(&["h", "-l", "512Ki"]), None);
        assert_eq!(on_peer(&["h", "-b", "10M"]), None);
        assert_eq!(on_peer(&["h", "--proto", "iperf3"]), None);
    }

    /// The plan of `netchar tcp ARGS` or `netchar udp ARGS`.
    fn plan_of(command: &str, args: &[&str]) -> Result<TcpPlan, UsageError> {
        use clap::Parser;
        let argv = ["netchar", command].into_iter().chain(args.iter().copied());
        match crate::args::Cli::try_parse_from(argv).expect("parses").command {
            Some(crate::args::Command::Tcp(a)) => TcpPlan::from_args(&a),
            Some(crate::args::Command::Udp(a)) => TcpPlan::from_udp_args(&a),
            _ => unreachable!("a tcp or udp command"),
        }
    }

    fn tcp_plan(args: &[&str]) -> Result<TcpPlan, UsageError> {
        plan_of("tcp", args)
    }

    fn udp_plan(args: &[&str]) -> Result<TcpPlan, UsageError> {
        plan_of("udp", args)
    }

    #[test]
    fn traffic_options_fill_the_spec_the_binding_and_the_family() {
        let p = udp_plan(&["h", "--dscp", "ef", "--df", "-B", "10.0.0.3:7000", "--bind-dev", "eth1"]).unwrap();
        let ip = &p.client.spec.ip;
        assert_eq!((ip.tos, ip.flowlabel, ip.dont_fragment), (Some(0xb8), None, true));
        let b = p.client.bind.as_ref().unwrap();
        assert_eq!(
            (b.address, b.port, b.device.as_deref()),
            (Some("10.0.0.3".parse().unwrap()), Some(7000), Some("eth1"))
        );
        assert_eq!(p.client.family, Some(Family::V4));
        let p = udp_plan(&["h", "--tos", "0x10", "--flowlabel", "0xfffff"]).unwrap();
        assert_eq!((p.client.spec.ip.tos, p.client.spec.ip.flowlabel), (Some(0x10), Some(0xfffff)));
        assert_eq!(p.client.family, Some(Family::V6));
        let p = udp_plan(&["h", "--no-udp-checksum"]).unwrap();
        let u = p.client.spec.udp.as_ref().unwrap();
        assert!(u.no_checksum && !u.gso && p.client.family == Some(Family::V4));
        for (args, said) in [
            (&["h", "--dscp", "af44"][..], "--dscp af44: expected a DSCP name"),
            (&["h", "--tos", "256"], "--tos 256:"),
            (&["h", "--flowlabel", "0x100000"], "--flowlabel 0x100000: a flow label is 1 to"),
            (&["h", "--flowlabel", "5", "-4"], "--flowlabel (an IPv4 header has no flow label) is IPv6 only, and -4"),
            (&["::1", "--no-udp-checksum"], "is IPv4 only, and ::1 is an IPv6 address"),
            (&["h", "-B", "::1", "--no-udp-checksum"], "-B ::1 is IPv6 only"),
            (&["h", "-B", "host.example"], "-B host.example: expected an address of this host"),
            (&["h", "--bind-dev", "a-name-of-sixteen"], "--bind-dev \"a-name-of-sixteen\""),
        ] {
            let e = udp_plan(args).err().unwrap_or_else(|| panic!("{args:?} planned")).0;
            assert!(e.contains(said), "{args:?}: {e}");
        }
    }

    #[test]
    fn hosts_split_with_and_without_ports() {
        assert_eq!(split_host("example.org").unwrap(), ("example.org".into(), None));
        assert_eq!(split_host("10.0.0.1:5201").unwrap(), ("10.0.0.1".into(), Some(5201)));
        assert_eq!(split_host("[::1]:6000").unwrap(), ("::1".into(), Some(6000)));
        assert_eq!(split_host("::1").unwrap(), ("::1".into(), None));
        assert_eq!(split_host("[::1]").unwrap(), ("::1".into(), None));
        assert!(split_host("host:port").is_err());
        assert!(split_host(":80").is_err());
        assert!(split_host("").is_err());
    }

    #[test]
    fn unbracketed_ipv6_with_a_port_like_last_group_is_refused_with_both_spellings() {
        let err = split_host("::1:5608").unwrap_err().0;
        assert!(err.contains("write [::1]:5608 or ::1 -p 5608 for port 5608"), "{err}");
        assert!(err.contains("[::1:5608] for the address"), "{err}");
        assert_eq!(split_host("[::1:5608]").unwrap(), ("::1:5608".into(), None));
        // Not ambiguous: the last group is hex, or the head is no address.
        assert_eq!(split_host("fe80::1:ab").unwrap(), ("fe80::1:ab".into(), None));
        assert_eq!(split_host("1:2:3:4:5:6:7:8").unwrap(), ("1:2:3:4:5:6:7:8".into(), None));
        assert_eq!(split_host("fe80::1%eth0").unwrap(), ("fe80::1%eth0".into(), None));
        // Nine groups, a scope followed by a port, a port out of range, no address at all.
        assert!(split_host("1:2:3:4:5:6:7:8:80").unwrap_err().0.contains("write [1:2:3:4:5:6:7:8]:80"));
        assert!(split_host("fe80::1%eth0:80").unwrap_err().0.contains("write [fe80::1%eth0]:80"));
        assert!(split_host("::1:99999").unwrap_err().0.contains("99999 is not a port number"));
        assert!(split_host("foo:bar:80").unwrap_err().0.contains("write [IPV6]:PORT for a port, or -p PORT"));
    }
}
