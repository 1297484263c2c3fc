//! `netchar exporter`: a Prometheus exporter in the multi-target style of the blackbox
//! exporter. `/probe?target=HOST:PORT&proto=tcp|udp|rr` runs one netchar test against that
//! server and answers with its figures; `/metrics` has the exporter's own counters.
//!
//! A probe sends traffic where a scraper asks, so the exporter refuses to start without
//! `--allow-target` and answers 403 for any target outside it before a packet goes out. One
//! probe runs at a time (a second would measure the first); others are answered 503. A probe's
//! time is bounded by Prometheus's `X-Prometheus-Scrape-Timeout-Seconds` minus a margin, and by
//! `--max-duration`. The test itself is a child `netchar` client, the command a user would run.

use crate::pscheduler::run_with_limit;
use anyhow::{bail, Context, Result};
use netchar_engine::admission::DataPathPolicy;
use netchar_engine::StopFlag;
use netchar_model::TestResult;
use netchar_report::prometheus::Exposition;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What `netchar --json` prints when no test could start.
#[derive(serde::Deserialize)]
struct NoResult {
    error: String,
}

/// `netchar exporter`.
#[derive(Debug, clap::Args)]
pub(crate) struct ExporterArgs {
    /// Address to serve HTTP on, e.g. 127.0.0.1:9300 or [::]:9300 (port 0 picks one, printed).
    #[arg(long, value_name = "ADDR")]
    pub(crate) listen: String,
    /// Networks probes may go to (CIDR or address, repeatable). Required: without it the
    /// exporter would send traffic wherever a scraper asks.
    #[arg(long = "allow-target", value_name = "CIDR", num_args = 1..)]
    pub(crate) allow_target: Vec<String>,
    /// Longest test a probe runs, in seconds; a scrape timeout below it shortens the test.
    #[arg(long = "max-duration", value_name = "SECS", default_value = "10")]
    pub(crate) max_duration: f64,
    /// Seconds kept back from the scrape timeout, so the answer arrives before Prometheus gives up.
    #[arg(long = "timeout-offset", value_name = "SECS", default_value = "0.5")]
    pub(crate) timeout_offset: f64,
    /// Authenticate probes to servers that require a key (lines USER:SECRET).
    #[arg(long = "psk-file", value_name = "FILE")]
    pub(crate) psk_file: Option<PathBuf>,
    /// The user of --psk-file to authenticate as.
    #[arg(long = "psk-user", value_name = "USER", requires = "psk_file")]
    pub(crate) psk_user: Option<String>,
}

/// Seconds a probe needs besides sending: connecting, the control exchange, the results.
const PROBE_SETUP_SECS: f64 = 1.0;
/// Shortest test worth running.
const MIN_TEST_SECS: f64 = 0.2;
/// Requests served at once (probes beyond the one running are answered 503 at once).
const MAX_IN_FLIGHT: usize = 32;

struct Exporter {
    args: ExporterArgs,
    allowed: DataPathPolicy,
    netchar: PathBuf,
    probing: AtomicBool,
    in_flight: AtomicU64,
    probes_ok: AtomicU64,
    probes_failed: AtomicU64,
    refused_busy: AtomicU64,
    refused_forbidden: AtomicU64,
    refused_bad_request: AtomicU64,
}

pub(crate) fn run(args: ExporterArgs, stop: &StopFlag) -> Result<u8> {
    if args.allow_target.is_empty() {
        bail!("--allow-target CIDR is required: name the networks probes may measure (e.g. --allow-target 10.0.0.0/8)");
    }
    if !(args.max_duration > 0.0 && args.max_duration <= 3600.0) {
        bail!("--max-duration {}: must be more than 0 and at most 3600 seconds", args.max_duration);
    }
    if !(0.0..60.0).contains(&args.timeout_offset) {
        bail!("--timeout-offset {}: must be 0 to 60 seconds", args.timeout_offset);
    }
    let allowed = DataPathPolicy {
        allowed: args
            .allow_target
            .iter()
            .map(|n| DataPathPolicy::parse_net(n).map_err(|e| anyhow::anyhow!("--allow-target {e}")))
            .collect::<Result<_>>()?,
    };
    let listen: SocketAddr = args
        .listen
        .to_socket_addrs()
        .with_context(|| format!("--listen {}: not an address and port", args.listen))?
        .next()
        .with_context(|| format!("--listen {}: resolves to no address", args.listen))?;
    let server = tiny_http::Server::http(listen).map_err(|e| anyhow::anyhow!("--listen {listen}: {e}"))?;
    let bound = server.server_addr().to_ip().map(|a| a.to_string()).unwrap_or_else(|| listen.to_string());
    eprintln!("netchar exporter {} listening on {bound}", env!("CARGO_PKG_VERSION"));
    eprintln!(
        "probes to {} only; tests at most {} s, {} s kept back from the scrape timeout; one probe at a time",
        args.allow_target.join(", "),
        args.max_duration,
        args.timeout_offset
    );
    let exporter = Arc::new(Exporter {
        args,
        allowed,
        netchar: std::env::current_exe().context("finding the netchar executable")?,
        probing: AtomicBool::new(false),
        in_flight: AtomicU64::new(0),
        probes_ok: AtomicU64::new(0),
        probes_failed: AtomicU64::new(0),
        refused_busy: AtomicU64::new(0),
        refused_forbidden: AtomicU64::new(0),
        refused_bad_request: AtomicU64::new(0),
    });
    while !stop.is_raised() {
        let request = match server.recv_timeout(Duration::from_millis(200)) {
            Ok(Some(r)) => r,
            Ok(None) => continue,
            Err(e) => {
                eprintln!("netchar exporter: accepting a request failed: {e}");
                continue;
            }
        };
        if exporter.in_flight.load(Ordering::SeqCst) >= MAX_IN_FLIGHT as u64 {
            let _ = request.respond(text_response(503, "too many requests at once; try again\n"));
            continue;
        }
        exporter.in_flight.fetch_add(1, Ordering::SeqCst);
        let exporter = Arc::clone(&exporter);
        std::thread::spawn(move || {
            let response = exporter.handle(&request);
            let _ = request.respond(response);
            exporter.in_flight.fetch_sub(1, Ordering::SeqCst);
        });
    }
    eprintln!("netchar exporter stopped");
    Ok(0)
}

type Response = tiny_http::Response<std::io::Cursor<Vec<u8>>>;

fn text_response(status: u16, body: &str) -> Response {
    tiny_http::Response::from_string(body)
        .with_status_code(status)
        .with_header(tiny_http::Header::from_bytes("Content-Type", "text/plain; charset=utf-8").expect("static header"))
}

fn exposition_response(body: String) -> Response {
    tiny_http::Response::from_string(body).with_header(
        tiny_http::Header::from_bytes("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            .expect("static header"),
    )
}

/// A probe's parameters from the query string.
#[derive(Debug)]
struct Probe {
    host: String,
    port: u16,
    proto: &'static str,
    reverse: bool,
    rate: Option<String>,
    duration: Option<f64>,
}

impl Exporter {
    fn handle(&self, request: &tiny_http::Request) -> Response {
        let url = request.url();
        let (path, query) = url.split_once('?').unwrap_or((url, ""));
        match path {
            "/probe" => self.probe(request, query),
            "/metrics" => exposition_response(self.own_metrics()),
            "/" => text_response(
                200,
                "netchar exporter\n/probe?target=HOST:PORT&proto=tcp|udp|rr&reverse=0|1&rate=RATE&duration=SECS\n/metrics\n",
            ),
            _ => text_response(404, "not found; try /probe?target=HOST:PORT or /metrics\n"),
        }
    }

    fn probe(&self, request: &tiny_http::Request, query: &str) -> Response {
        let probe = match parse_probe(query) {
            Ok(p) => p,
            Err(e) => {
                self.refused_bad_request.fetch_add(1, Ordering::Relaxed);
                return text_response(400, &format!("{e}\n"));
            }
        };
        let header = request
            .headers()
            .iter()
            .find(|h| h.field.equiv("X-Prometheus-Scrape-Timeout-Seconds"))
            .map(|h| h.value.as_str().trim().to_string());
        let timeout = match header {
            Some(v) => match v.parse::<f64>() {
                Ok(s) if s.is_finite() && s > 0.0 => s - self.args.timeout_offset,
                _ => {
                    self.refused_bad_request.fetch_add(1, Ordering::Relaxed);
                    return text_response(
                        400,
                        &format!("X-Prometheus-Scrape-Timeout-Seconds {v}: not a number of seconds\n"),
                    );
                }
            },
            None => self.args.max_duration + PROBE_SETUP_SECS,
        };
        let test_secs = probe.duration.unwrap_or(f64::MAX).min(self.args.max_duration).min(timeout - PROBE_SETUP_SECS);
        if test_secs < MIN_TEST_SECS {
            self.refused_bad_request.fetch_add(1, Ordering::Relaxed);
            return text_response(
                400,
                &format!(
                    "a {timeout:.3} s probe budget leaves no time for a test ({PROBE_SETUP_SECS} s setup); raise scrape_timeout\n"
                ),
            );
        }
        // Every address the name stands for must be allowed: the client may use any of them.
        let addrs: Vec<IpAddr> = match (probe.host.as_str(), probe.port).to_socket_addrs() {
            Ok(a) => a.map(|s| s.ip()).collect(),
            Err(e) => {
                self.refused_bad_request.fetch_add(1, Ordering::Relaxed);
                return text_response(400, &format!("target {}: {e}\n", probe.host));
            }
        };
        let unspecified = IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED);
        if addrs.is_empty() || addrs.iter().any(|a| a.is_unspecified() || !self.allowed.allows(unspecified, *a)) {
            self.refused_forbidden.fetch_add(1, Ordering::Relaxed);
            return text_response(403, &format!("target {} is outside --allow-target\n", probe.host));
        }
        if self.probing.compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst).is_err() {
            self.refused_busy.fetch_add(1, Ordering::Relaxed);
            return text_response(
                503,
                "another probe is running; one at a time so that they do not measure each other\n",
            );
        }
        // The client gets the address checked here, not the name: a second lookup could answer
        // with an address outside the allow list.
        let body = self.run_probe(&probe, addrs[0], timeout, test_secs);
        self.probing.store(false, Ordering::SeqCst);
        exposition_response(body)
    }

    fn run_probe(&self, probe: &Probe, addr: IpAddr, timeout: f64, test_secs: f64) -> String {
        let mut args: Vec<String> = vec![probe.proto.into(), addr.to_string()];
        args.extend(["-p".into(), probe.port.to_string(), "-t".into(), format!("{test_secs:.3}")]);
        args.extend(["--json".into(), "--connect-timeout".into(), format!("{:.3}", (timeout / 2.0).max(0.1))]);
        if probe.reverse {
            args.push("-R".into());
        }
        if let Some(rate) = &probe.rate {
            args.extend(["-b".into(), rate.clone()]);
        }
        if let Some(f) = &self.args.psk_file {
            args.extend(["--psk-file".into(), f.display().to_string()]);
            if let Some(u) = &self.args.psk_user {
                args.extend(["--psk-user".into(), u.clone()]);
            }
        }
        let began = Instant::now();
        let out = run_with_limit(&self.netchar, &args, Duration::from_secs_f64(timeout.max(0.1)));
        let elapsed = began.elapsed().as_secs_f64();
        let (result, why): (Option<TestResult>, Option<String>) = match out {
            Ok(o) => {
                // A test that could not start prints `{"schema_version": 1, "error": ...}`,
                // which is no result; one that failed part way is a result with its error.
                let result: Option<TestResult> = serde_json::from_str(&o.stdout).ok();
                let err = match &result {
                    Some(r) => r.error.clone(),
                    None => serde_json::from_str::<NoResult>(&o.stdout).ok().map(|n| n.error),
                };
                let why = if o.timed_out {
                    Some(format!("no answer within the {timeout:.3} s probe budget"))
                } else if let Some(e) = err {
                    Some(e)
                } else if result.is_none() {
                    Some(o.stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no result").to_string())
                } else {
                    None
                };
                (result, why)
            }
            Err(e) => (None, Some(format!("{e:#}"))),
        };
        let success = why.is_none() && result.is_some();
        if success {
            self.probes_ok.fetch_add(1, Ordering::Relaxed);
        } else {
            self.probes_failed.fetch_add(1, Ordering::Relaxed);
        }
        eprintln!(
            "probe {} {}:{}{}: {} in {elapsed:.3} s",
            probe.proto,
            probe.host,
            probe.port,
            if probe.reverse { " reverse" } else { "" },
            why.as_deref().unwrap_or("ok")
        );
        let exposed = netchar_report::prometheus::Probe {
            target: &probe.host,
            port: probe.port,
            protocol: probe.proto,
            reverse: probe.reverse,
            success,
            elapsed_seconds: elapsed,
            timeout_seconds: timeout,
            test_seconds: test_secs,
        };
        netchar_report::prometheus::probe(&exposed, result.as_ref().filter(|_| success))
    }

    fn own_metrics(&self) -> String {
        let mut m = Exposition::default();
        m.family("netchar_exporter_build_info", "gauge", "netchar exporter version; always 1.");
        m.sample("netchar_exporter_build_info", &[("version", env!("CARGO_PKG_VERSION"))], 1.0);
        m.family("netchar_exporter_probes_total", "counter", "Probes run, by outcome.");
        m.sample(
            "netchar_exporter_probes_total",
            &[("outcome", "success")],
            self.probes_ok.load(Ordering::Relaxed) as f64,
        );
        m.sample(
            "netchar_exporter_probes_total",
            &[("outcome", "failure")],
            self.probes_failed.load(Ordering::Relaxed) as f64,
        );
        m.family(
            "netchar_exporter_refused_probes_total",
            "counter",
            "Probe requests refused before any traffic, by reason.",
        );
        for (reason, n) in [
            ("busy", &self.refused_busy),
            ("forbidden_target", &self.refused_forbidden),
            ("bad_request", &self.refused_bad_request),
        ] {
            m.sample("netchar_exporter_refused_probes_total", &[("reason", reason)], n.load(Ordering::Relaxed) as f64);
        }
        m.into_text()
    }
}

fn parse_probe(query: &str) -> Result<Probe, String> {
    let mut target = None;
    let mut proto = "tcp";
    let mut reverse = false;
    let mut rate = None;
    let mut duration = None;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let v = percent_decode(v).ok_or_else(|| format!("{k}: bad %-escape"))?;
        match k {
            "target" => target = Some(v),
            "proto" => {
                proto = match v.as_str() {
                    "tcp" => "tcp",
                    "udp" => "udp",
                    "rr" => "rr",
                    other => return Err(format!("proto {other}: expected tcp, udp or rr")),
                }
            }
            "reverse" => {
                reverse = match v.as_str() {
                    "" | "1" | "true" | "yes" => true,
                    "0" | "false" | "no" => false,
                    other => return Err(format!("reverse {other}: expected 1 or 0")),
                }
            }
            "rate" if !v.is_empty() => {
                netchar_model::units::parse_bit_rate(&v).map_err(|e| format!("rate {v}: {e}"))?;
                rate = Some(v)
            }
            "duration" if !v.is_empty() => {
                let secs: f64 = v.parse().map_err(|_| format!("duration {v}: not a number of seconds"))?;
                if !(secs > 0.0 && secs.is_finite()) {
                    return Err(format!("duration {v}: must be more than 0 seconds"));
                }
                duration = Some(secs)
            }
            "rate" | "duration" => {}
            other => return Err(format!("unknown parameter {other}; known: target, proto, reverse, rate, duration")),
        }
    }
    let target = target.filter(|t| !t.is_empty()).ok_or("target parameter is missing: /probe?target=HOST:PORT")?;
    let (host, port) = split_host_port(&target).ok_or_else(|| format!("target {target}: expected HOST:PORT"))?;
    if proto == "rr" && (reverse || rate.is_some()) {
        return Err("proto rr takes neither reverse nor rate".into());
    }
    Ok(Probe { host, port, proto, reverse, rate, duration })
}

/// `HOST:PORT` or `[IPV6]:PORT`.
fn split_host_port(target: &str) -> Option<(String, u16)> {
    let (host, port) = target.rsplit_once(':')?;
    let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    if host.is_empty() || host.contains(':') && !target.starts_with('[') {
        return None;
    }
    Some((host.to_string(), port.parse().ok()?))
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_parameters() {
        let p = parse_probe("target=10.0.0.1%3A5300&proto=udp&reverse=1&rate=100M&duration=2").unwrap();
        assert_eq!((p.host.as_str(), p.port, p.proto, p.reverse), ("10.0.0.1", 5300, "udp", true));
        assert_eq!(p.rate.as_deref(), Some("100M"));
        assert_eq!(p.duration, Some(2.0));
        let v6 = parse_probe("target=[2001:db8::1]:5300").unwrap();
        assert_eq!((v6.host.as_str(), v6.port), ("2001:db8::1", 5300));
        assert!(parse_probe("").unwrap_err().contains("target parameter is missing"));
        assert!(parse_probe("target=h").is_err());
        assert!(parse_probe("target=2001:db8::1:5300").is_err());
        assert!(parse_probe("target=h:1&proto=sctp").is_err());
        assert!(parse_probe("target=h:1&rate=fast").is_err());
        assert!(parse_probe("target=h:1&module=x").is_err());
        assert!(parse_probe("target=h:1&proto=rr&reverse=1").is_err());
    }
}
