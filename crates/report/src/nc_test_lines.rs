//! netchar as the master of an eCos `nc_test_slave` (`--proto nc-test`): the stock master's
//! lines as it printed them (`Start TCP echo [64,10240] - no delays`, `TCP echo - 128 bufs of
//! 10240 bytes in ...`, `   slave sent 64, recvd 64`), each as the run prints it, and under
//! each test netchar's own figures (`    netchar: rtt us min ...; buffers: ...; out of
//! sequence 0`).
//!
//! The stock lines come from the protocol's state machine as it runs, so they reach the
//! reporters through [`crate::Reporter::on_master_output`]; the figures line is formatted here
//! from [`MasterFigures`]. [`NcTestLinesReporter`] shows them (and the eCos suite's lines its
//! section headings): the JSON reporters write the results, which carry the same counts.

use netchar_model::TestResult;

/// What the nc_test master prints as it runs.
#[derive(Debug, Clone, Copy)]
pub enum MasterOutput<'a> {
    /// A line the stock master prints (or netchar's note, starting with `netchar: `).
    Line(&'a str),
    /// A test ended: netchar's own figures of it.
    Figures(&'a MasterFigures),
}

/// netchar's own figures of one nc_test test, counted by the master (netchar).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MasterFigures {
    /// Echo round-trip times in microseconds, one per answered buffer (empty for one-way tests).
    pub rtts_us: Vec<f64>,
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
}

/// The figures line under a test's stock lines, with its newline.
pub fn figures_line(f: &MasterFigures) -> String {
    let mut parts = Vec::new();
    if !f.rtts_us.is_empty() {
        let mut v = f.rtts_us.clone();
        v.sort_by(f64::total_cmp);
        // Nearest rank on the raw times: every echo is kept, no histogram in between.
        let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
        parts.push(format!(
            "rtt us min {:.0} p50 {:.0} p90 {:.0} p99 {:.0} max {:.0}",
            v[0],
            q(0.5),
            q(0.9),
            q(0.99),
            v[v.len() - 1]
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
    format!("    netchar: {}\n", parts.join("; "))
}

fn pct(a: u32, b: u32) -> f64 {
    if b == 0 {
        0.0
    } else {
        100.0 * f64::from(a) / f64::from(b)
    }
}

/// The master's lines and netchar's figures, as they come; nothing more when a test ends (its
/// lines are out by then).
#[derive(Debug, Default)]
pub struct NcTestLinesReporter;

impl crate::Reporter for NcTestLinesReporter {
    fn on_master_output(&mut self, output: MasterOutput<'_>) -> String {
        match output {
            MasterOutput::Line(l) => format!("{l}\n"),
            MasterOutput::Figures(f) => figures_line(f),
        }
    }
    fn on_finish(&mut self, _: &TestResult) -> String {
        String::new()
    }
    /// Saved results keep no master lines: netchar's own line per test, as `netchar echo`
    /// prints them.
    fn on_results(&mut self, results: &[crate::Saved]) -> String {
        crate::ecos_lines::EcosLinesReporter::new(false).on_results(results)
    }
}
