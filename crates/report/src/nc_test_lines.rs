//! The eCos nc_test master's lines, from netchar as the master of an eCos `nc_test_slave`
//! (`--proto nc-test`) or from the native `suite ecos` (the same lines made from netchar's
//! own tests): the stock master's lines as it printed them (`Start TCP echo [64,10240] - no
//! delays`, `TCP echo - 128 bufs of 10240 bytes in ...`, `   slave sent 64, recvd 64`), each
//! as the run prints it, and under each test netchar's own figures (`    netchar: rtt us min
//! ...; buffers: ...; out of sequence 0`).
//!
//! The stock lines come from the protocol's state machine as it runs (or from the native
//! suite as each test ends), so they reach the reporters as the job's lines
//! ([`crate::Reporter::on_line`]), as does the figures line, formatted here from
//! [`MasterFigures`] ([`figures_line`]). [`NcTestLinesReporter`] shows them (and the eCos
//! suite's lines its section headings): the JSON reporters write the results, which carry the
//! same counts.

use netchar_model::TestResult;

/// Round-trip times of a test's echoes, in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RttUs {
    /// The fastest.
    pub min: f64,
    /// The median.
    pub p50: f64,
    /// The 90th percentile.
    pub p90: f64,
    /// The 99th percentile.
    pub p99: f64,
    /// The slowest.
    pub max: f64,
}

impl RttUs {
    /// The figures of every echo's time, by nearest rank on the raw times (every echo is
    /// kept, no histogram in between); None without any.
    pub fn of_samples(rtts_us: &[f64]) -> Option<Self> {
        if rtts_us.is_empty() {
            return None;
        }
        let mut v = rtts_us.to_vec();
        v.sort_by(f64::total_cmp);
        let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
        Some(RttUs { min: v[0], p50: q(0.5), p90: q(0.9), p99: q(0.99), max: v[v.len() - 1] })
    }
}

/// netchar's own figures of one test of the eCos sequence, counted by the master (netchar):
/// from the nc_test master's loop (`--proto nc-test`), or from a test over netchar's own
/// protocol (the native `suite ecos`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MasterFigures {
    /// Echo round-trip times (None for one-way tests).
    pub rtt_us: Option<RttUs>,
    /// Buffers the master sent.
    pub sent: u32,
    /// Buffers the master received.
    pub received: u32,
    /// The test sends buffers to the slave (recv and echo tests, named from the slave's side).
    pub slave_receives: bool,
    /// The slave sends buffers (send and echo tests).
    pub slave_sends: bool,
    /// The slave's results record: (buffers it sent, buffers it received), when one came.
    pub slave_counts: Option<(u32, u32)>,
    /// Buffers that arrived out of sequence.
    pub out_of_sequence: u32,
    /// Buffers with bad keys.
    pub bad: u32,
    /// The slave's background load as achieved, in percent (native: `--server-load`, measured
    /// by the server; an nc_test slave reports none).
    pub slave_load_pct: Option<f64>,
    /// Idle shares during the test, in percent: the slave's and the master's (native: `--idle`;
    /// with nc_test the slave's idle is the stock `IDLE - ticks` line).
    pub idle_pct: (Option<f64>, Option<f64>),
}

/// The figures line under a test's stock lines, without its newline (a job's line).
pub fn figures_line(f: &MasterFigures) -> String {
    let mut parts = Vec::new();
    if let Some(r) = f.rtt_us {
        parts.push(format!(
            "rtt us min {:.0} p50 {:.0} p90 {:.0} p99 {:.0} max {:.0}",
            r.min, r.p50, r.p90, r.p99, r.max
        ));
    }
    let (sent, recvd) = (f.sent, f.received);
    match (f.slave_receives, f.slave_sends, f.slave_counts) {
        (true, true, Some((ns, nr))) => parts.push(format!(
            "buffers: sent {sent}, slave received {nr}, slave sent {ns}, received {recvd}; lost {} (to the slave {}, from it {})",
            sent.saturating_sub(recvd),
            sent.saturating_sub(nr),
            ns.saturating_sub(recvd)
        )),
        (true, false, Some((_, nr))) => parts.push(format!(
            "buffers: sent {sent}, slave received {nr}: lost {} ({:.2}%)",
            sent.saturating_sub(nr),
            pct(sent.saturating_sub(nr), sent)
        )),
        (false, true, Some((ns, _))) => parts.push(format!(
            "buffers: slave sent {ns}, received {recvd}: lost {} ({:.2}%)",
            ns.saturating_sub(recvd),
            pct(ns.saturating_sub(recvd), ns)
        )),
        _ => parts.push(format!("buffers: sent {sent}, received {recvd}, no results record from the slave")),
    }
    parts.push(format!("out of sequence {}", f.out_of_sequence));
    if f.bad > 0 {
        parts.push(format!("bad {}", f.bad));
    }
    if let Some(l) = f.slave_load_pct {
        parts.push(format!("slave background load {l:.0}%"));
    }
    let idle: Vec<String> = [("slave", f.idle_pct.0), ("master", f.idle_pct.1)]
        .iter()
        .filter_map(|(end, p)| p.map(|p| format!("{end} {p:.0}%")))
        .collect();
    if !idle.is_empty() {
        parts.push(format!("idle {}", idle.join(", ")));
    }
    format!("    netchar: {}", parts.join("; "))
}

fn pct(a: u32, b: u32) -> f64 {
    if b == 0 {
        0.0
    } else {
        100.0 * f64::from(a) / f64::from(b)
    }
}

/// The job's lines (the master's, netchar's figures under them), as they come; nothing more
/// when a test ends (its lines are out by then).
#[derive(Debug, Default)]
pub struct NcTestLinesReporter;

impl crate::Reporter for NcTestLinesReporter {
    fn on_line(&mut self, line: &str) -> String {
        format!("{line}\n")
    }
    /// A run of `--repeat` or `--warmup`, headed as the text reporter heads it.
    fn on_section(&mut self, title: &str) -> String {
        format!("=== {title}\n")
    }
    /// The user's commands around the test (`--step-cmd`), a line each, and the target's
    /// console read around it (`--console`), as the text reporter shows it.
    fn on_finish(&mut self, result: &TestResult) -> String {
        let mut out = crate::hooks::hook_text(result);
        if let Some(c) = &result.console {
            out.push_str(&crate::console::console_lines(c));
        }
        out
    }
    /// Saved results keep no master lines: netchar's own line per test, as `netchar echo`
    /// prints them.
    fn on_results(&mut self, results: &[crate::Saved]) -> String {
        crate::ecos_lines::EcosLinesReporter.on_results(results)
    }
}
