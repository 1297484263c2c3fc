//! The result: this end's records and both ends' figures, counters and identities assembled
//! into one [`TestResult`], with the rr summary and the loss breakdowns derived from them.

use super::Driver;
use crate::measure::{host_info, now_rfc3339};
use netchar_model::{
    CpuReport, CpuUsage, Endpoint, Evidence, EvidenceReport, HostIdentity, HostInfo, ResultHeader, RrFigures,
    StreamRecord, TargetFigures, TargetReport, TestInfo, TestKind, TestResult,
};

/// What both ends told and measured, gathered for the result.
pub(super) struct Figures {
    /// When the test started (RFC 3339).
    pub(super) started_at: String,
    /// Tests the server ran at once, this one included.
    pub(super) concurrent_tests: u32,
    /// The far end's software and version, as it told them.
    pub(super) peer_software: Option<String>,
    pub(super) remote_host: Option<HostInfo>,
    /// The far end's records, CPU and error.
    pub(super) remote: Option<(Vec<StreamRecord>, CpuUsage, Option<String>)>,
    /// The far end's figures about itself, when it is a target that sends them.
    pub(super) target: Option<TargetFigures>,
    /// The far end's counters and settings, when it sent them.
    pub(super) remote_evidence: Option<(Option<Evidence>, Option<HostIdentity>)>,
    /// This end's records.
    pub(super) local_records: Vec<StreamRecord>,
    /// The records the session counted itself (ControlEvent::Measured).
    pub(super) session_records: Vec<StreamRecord>,
    /// What the test left out, by the session's word: the result's error line when none other.
    pub(super) note: Option<String>,
    /// rr: every round trip of this end's connections.
    pub(super) latency: Option<netchar_stats::distribution::Distribution>,
    /// crr: every connect of this end.
    pub(super) connect_latency: Option<netchar_stats::distribution::Distribution>,
    /// UDP rr: every answer's kernel-stamp-to-requester time.
    pub(super) wakeups: Option<netchar_stats::distribution::Distribution>,
}

impl Figures {
    /// Nothing heard yet.
    pub(super) fn new() -> Self {
        Self {
            started_at: now_rfc3339(),
            concurrent_tests: 1,
            peer_software: None,
            remote_host: None,
            remote: None,
            target: None,
            remote_evidence: None,
            local_records: Vec::new(),
            session_records: Vec::new(),
            note: None,
            latency: None,
            connect_latency: None,
            wakeups: None,
        }
    }
}

impl Driver<'_> {
    pub(super) fn assemble(&mut self, error: Option<String>) -> TestResult {
        let family = if self.addr.is_ipv4() { "ipv4" } else { "ipv6" };
        let def = self.cfg.protocol.protocol().def();
        let (far_end, mut caveats) = (def.measurement)(&self.spec);
        caveats.extend(crate::protocols::far_end_options(def, &self.spec).caveats);
        let header = ResultHeader {
            test: TestInfo {
                spec: self.spec.clone(),
                remote: self.addr.to_string(),
                family: family.to_string(),
                title: self.cfg.title.clone(),
                client_cpu: self.cfg.client_cpu,
                concurrent_tests: self.figures.concurrent_tests,
                protocol: self.cfg.protocol.name().to_string(),
                peer_software: self.figures.peer_software.clone(),
                far_end,
                caveats,
            },
            started_at: self.figures.started_at.clone(),
            host: host_info(),
            remote_host: self.figures.remote_host.clone(),
        };
        let mut streams = std::mem::take(&mut self.figures.local_records);
        self.workers.mtu_probes.fill(&mut streams, Endpoint::Client);
        streams.append(&mut self.figures.session_records);
        let mut remote_cpu = None;
        if let Some((remote_streams, cpu, _)) = self.figures.remote.take() {
            streams.extend(remote_streams);
            // A protocol without a control connection has no far end that reports its CPU.
            remote_cpu = (self.control.is_some() && self.session.reports_peer_cpu()).then_some(cpu);
        }
        let mut header = header;
        if header.test.title.is_none() {
            header.test.title = self.session.title(&streams);
        }
        let cpu = CpuReport { local: self.workers.local_cpu.clone(), remote: remote_cpu };
        let error = error.or_else(|| self.figures.note.take());
        let mut result = TestResult::assemble(header, streams, cpu, error);
        result.bind = self.cfg.bind.clone();
        if self.spec.kind == TestKind::Rr {
            result.summary.rr = Some(self.rr_summary(&result.streams));
            result.summary.placement = Some(self.placement(&result.streams));
        }
        // Derived last: the cost per transaction needs the rr summary.
        result.target =
            self.figures.target.take().map(|t| TargetReport::derive(t, &result, self.cfg.target_ns_per_instruction));
        self.add_evidence(&mut result);
        result
    }

    /// Both ends' counters and identities into the result, and the loss breakdowns that
    /// follow from them (and from a target's figures).
    pub(super) fn add_evidence(&mut self, result: &mut TestResult) {
        let Some(probe) = self.workers.evidence.take() else { return };
        let (local, identity) = probe.finish(&result.streams, Endpoint::Client);
        result.host.identity = Some(identity);
        let mut evidence = EvidenceReport { local: Some(local), ..EvidenceReport::default() };
        let (remote, remote_identity) = self.figures.remote_evidence.take().unwrap_or_default();
        if let (Some(host), Some(id)) = (result.remote_host.as_mut(), remote_identity) {
            host.identity = Some(id);
        }
        match remote {
            Some(e) => evidence.remote = Some(e),
            None => {
                let why = match self.cfg.protocol.name() {
                    netchar_model::NATIVE_PROTOCOL => {
                        "the server sent none (a netchar server older than this client, or the C responder)".to_string()
                    }
                    peer => format!("{peer}'s server sends none"),
                };
                evidence.unavailable.insert("remote".into(), why);
            }
        }
        result.evidence = Some(evidence);
        result.fill_loss_breakdowns();
    }

    /// Every transaction of every connection: counts from the records, percentiles from the
    /// merged histogram of all round trips.
    pub(super) fn rr_summary(&self, streams: &[StreamRecord]) -> RrFigures {
        let mine: Vec<&RrFigures> =
            streams.iter().filter(|s| s.measured_by == Endpoint::Client).filter_map(|s| s.rr.as_ref()).collect();
        let transactions = mine.iter().map(|r| r.transactions).sum::<u64>();
        let seconds =
            streams.iter().filter(|s| s.measured_by == Endpoint::Client).map(|s| s.seconds).fold(0.0, f64::max);
        RrFigures {
            transactions,
            transactions_per_second: if seconds > 0.0 { transactions as f64 / seconds } else { 0.0 },
            lost: mine.iter().map(|r| r.lost).sum(),
            late: mine.iter().map(|r| r.late).sum(),
            latency_us: self.figures.latency.as_ref().map(crate::dataplane::latency_us).unwrap_or_default(),
            connect_latency_us: self.figures.connect_latency.as_ref().map(crate::dataplane::latency_us),
            receive_wakeup_us: self
                .figures
                .wakeups
                .as_ref()
                .filter(|d| d.count() > 0)
                .map(crate::dataplane::latency_us),
            latency_cdf: self.figures.latency.as_ref().map(crate::dataplane::latency_cdf).unwrap_or_default(),
            one_way: mine.iter().find_map(|r| r.one_way.clone()),
        }
    }

    /// Where each end's workers ran: latency on a VM depends on it (a cross-core wakeup costs
    /// tens of microseconds), so it is printed with every latency figure.
    pub(super) fn placement(&self, streams: &[StreamRecord]) -> String {
        let side = |who: Endpoint, pinned: Option<usize>| {
            let mut cpus: Vec<usize> = streams.iter().filter(|s| s.measured_by == who).filter_map(|s| s.cpu).collect();
            cpus.sort_unstable();
            cpus.dedup();
            let seen = cpus.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",");
            match pinned {
                Some(c) => format!("pinned to CPU {c}"),
                None if seen.is_empty() => "not pinned".to_string(),
                None => format!("not pinned (last ran on CPU {seen})"),
            }
        };
        format!(
            "client {}, server {}",
            side(Endpoint::Client, self.cfg.client_cpu),
            side(Endpoint::Server, self.spec.server_cpu)
        )
    }
}
