//! This end's workers: started when the session says so, watched until they and the peer are
//! done (senders reported, the drain limit, the first stream error), then joined.

use super::Driver;
use crate::dataplane::{DataPlane, DataPlaneConfig};
use crate::error::ClientError;
use crate::evidence::EvidenceProbe;
use crate::measure::{now_rfc3339, CpuMeter};
use crate::tcp_setup::PathMtuProbes;
use netchar_model::{CpuUsage, Endpoint, IntervalRecord, StreamTotal};
use std::sync::mpsc;
use std::time::Instant;

/// This end's workers and what is measured around them.
pub(super) struct Workers {
    /// The running workers; `None` before the start and once joined.
    pub(super) plane: Option<DataPlane>,
    /// The workers were started: from then on, a failure keeps what was measured.
    pub(super) plane_started: bool,
    /// When the data plane started: the zero of the test's clock.
    pub(super) clock_zero: Option<Instant>,
    pub(super) meter: Option<CpuMeter>,
    /// `--idle`: this end's idle counters and the mark taken at the start.
    pub(super) idle: Option<(crate::load::IdleMeter, Option<crate::load::IdleMark>)>,
    /// This end's counters around the workers, from admission on.
    pub(super) evidence: Option<EvidenceProbe>,
    /// This end's CPU over the workers, once they are done.
    pub(super) local_cpu: Option<CpuUsage>,
    /// This end's senders' totals went to the session.
    pub(super) senders_reported: bool,
    /// The peer's senders' totals, and when they came.
    pub(super) peer_totals: Option<(Instant, Vec<StreamTotal>)>,
    /// `--df`: this end's data sockets, for their path MTU after the test.
    pub(super) mtu_probes: PathMtuProbes,
    /// The workers' interval figures, for the caller's callback.
    pub(super) live_tx: mpsc::Sender<IntervalRecord>,
    pub(super) live_rx: mpsc::Receiver<IntervalRecord>,
}

impl Workers {
    /// Nothing started yet; with `measure_idle`, the idle counters already count.
    pub(super) fn new(measure_idle: bool) -> Self {
        let (live_tx, live_rx) = mpsc::channel();
        Self {
            plane: None,
            plane_started: false,
            clock_zero: None,
            meter: None,
            idle: measure_idle.then(|| (crate::load::IdleMeter::start(), None)),
            evidence: None,
            local_cpu: None,
            senders_reported: false,
            peer_totals: None,
            mtu_probes: PathMtuProbes::default(),
            live_tx,
            live_rx,
        }
    }
}

impl Driver<'_> {
    pub(super) fn start_plane(&mut self) -> Result<(), ClientError> {
        let streams = self.setup.pending_streams.take().unwrap_or_default();
        self.workers.mtu_probes = PathMtuProbes::of(&streams, &self.spec);
        let cfg = DataPlaneConfig {
            spec: self.spec.clone(),
            datagrams: self.session.datagrams(),
            endpoint: Endpoint::Client,
            cpu: self.cfg.client_cpu,
            interleave_senders: self.session.interleaves_senders(),
        };
        self.workers.meter = Some(CpuMeter::start());
        if let Some((meter, mark)) = self.workers.idle.as_mut() {
            *mark = Some(meter.mark());
        }
        self.figures.started_at = now_rfc3339();
        // The server starts its clock when it sends `ready`, before this; the client's clock
        // starts now, before it sends `start`: each end's clock starts before the other can send.
        let options = self.session.stream_options();
        let zero = Instant::now();
        self.workers.clock_zero = Some(zero);
        let plane = DataPlane::start_with(cfg, streams, Some(self.workers.live_tx.clone()), zero, options)
            .map_err(|source| ClientError::Io { context: "cannot start the data workers".into(), source })?;
        self.workers.plane = Some(plane);
        self.workers.plane_started = true;
        Ok(())
    }

    /// Reports finished senders, enforces the drain limit, and says whether the test is over.
    pub(super) fn check_plane(&mut self) -> Result<bool, ClientError> {
        let Some(plane) = &self.workers.plane else {
            return Ok(false);
        };
        if !self.workers.senders_reported {
            if let Some(totals) = plane.senders_done() {
                self.workers.senders_reported = true;
                let replies = plane.end_replies();
                if !replies.is_empty() {
                    self.session.end_replies(Instant::now(), replies);
                }
                if !totals.is_empty() {
                    self.session.local_senders_done(Instant::now(), totals);
                }
            }
        }
        if let Some(e) = plane.first_error() {
            if self.first_error.is_none() {
                self.first_error = Some(ClientError::Stream(e.clone()));
                plane.stop_senders();
                self.session.stop(Instant::now(), &e);
            }
        }
        if let Some((at, totals)) = &self.workers.peer_totals {
            if at.elapsed() > self.cfg.timeouts.phase + self.udp_grace() && !plane.all_done() {
                let got = plane.received();
                let short: Vec<String> = totals
                    .iter()
                    .filter_map(|t| {
                        let have = got.iter().find(|(i, _)| *i == t.id).map_or(0, |x| x.1);
                        (have != t.bytes).then(|| format!("stream {} got {have} of {} bytes", t.id, t.bytes))
                    })
                    .collect();
                plane.abort();
                return Err(ClientError::Stream(format!(
                    "the server finished sending but the data did not arrive within {:.0} s: {}",
                    self.cfg.timeouts.phase.as_secs_f64(),
                    short.join(", ")
                )));
            }
        }
        if plane.all_done() && self.workers.local_cpu.is_none() {
            self.workers.local_cpu = self.workers.meter.map(|m| m.finish());
            if let (Some(cpu), Some((meter, Some(mark)))) =
                (self.workers.local_cpu.as_mut(), self.workers.idle.as_ref())
            {
                cpu.idle_pct = meter.idle_since(mark);
            }
        }
        if plane.all_done() && self.figures.remote.is_some() {
            if let Some(plane) = self.workers.plane.take() {
                let joined = plane.join_all();
                self.figures.local_records = joined.records;
                self.figures.latency = joined.latency;
                self.figures.connect_latency = joined.connect_latency;
                self.figures.wakeups = joined.wakeups;
            }
            return Ok(true);
        }
        Ok(false)
    }
}
