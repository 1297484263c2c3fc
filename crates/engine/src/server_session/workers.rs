//! The running phase: this end's workers on the test's streams, the CPU, idle and load
//! figures around them, and the report of what they measured.

use super::own_stream::OwnStreamRun;
use super::SessionDriver;
use crate::dataplane::{DataPlane, DataPlaneConfig};
use crate::error::ServerSessionError;
use crate::measure::CpuMeter;
use crate::server_control::OwnStream;
use netchar_model::{Endpoint, StreamRecord, StreamTotal};
use std::time::{Duration, Instant};

/// After a client says its test is over, how long receivers may take to read what it says it
/// sent (iperf3's results come before the server's).
const SETTLE_WAIT: Duration = Duration::from_secs(3);

/// This end's workers and what is measured around them.
#[derive(Default)]
pub(super) struct Workers {
    /// The running workers; `None` before the start and once joined.
    pub(super) plane: Option<DataPlane>,
    pub(super) meter: Option<CpuMeter>,
    /// `--server-load`: the running background load.
    pub(super) load: Option<crate::load::BackgroundLoad>,
    /// `--idle`: the idle counters and the mark taken at the start.
    pub(super) idle: Option<(crate::load::IdleMeter, Option<crate::load::IdleMark>)>,
    /// This end's counters around the workers, for a session that reports them.
    pub(super) evidence: Option<crate::evidence::EvidenceProbe>,
    /// `--df`: this end's data sockets, for their path MTU after the test.
    pub(super) mtu_probes: crate::tcp_setup::PathMtuProbes,
    /// This end's senders' totals went to the session.
    pub(super) senders_reported: bool,
    /// The client's senders' totals, and when they came.
    pub(super) peer_totals: Option<(Instant, Vec<StreamTotal>)>,
    /// The bytes the workers had moved when last looked at, and since when (a test whose
    /// control connection is its data has only this to tell a silent client by).
    pub(super) last_moved: Option<(u64, Instant)>,
    /// A stream of this end's own the session asked for, running apart from the workers.
    pub(super) own_stream: Option<OwnStreamRun>,
    /// The session was told the workers are all done (ServerControl::workers_done).
    pub(super) done_told: bool,
}

impl SessionDriver<'_> {
    /// Starts this end's workers on the test's streams: the clocks start.
    pub(super) fn start_workers(&mut self, now: Instant) -> Result<(), ServerSessionError> {
        let spec = self
            .test
            .run
            .clone()
            .or_else(|| self.test.spec.clone())
            .ok_or_else(|| ServerSessionError::Streams("start before a request".into()))?;
        let cfg = DataPlaneConfig {
            spec: spec.clone(),
            datagrams: self.session.datagrams(),
            endpoint: Endpoint::Server,
            cpu: spec.server_cpu,
            interleave_senders: false,
        };
        self.workers.meter = Some(CpuMeter::start());
        if let Some((pct, threads)) = spec.server_load {
            self.workers.load = Some(crate::load::BackgroundLoad::start(pct, threads));
        }
        if let Some((meter, mark)) = self.workers.idle.as_mut() {
            *mark = Some(meter.mark());
        }
        // Taken when the streams were in, or now (crr, whose clock starts at admission).
        if let Some(p) = &mut self.workers.evidence {
            p.start();
        }
        let streams = std::mem::take(&mut self.arrivals.streams);
        self.workers.mtu_probes = crate::tcp_setup::PathMtuProbes::of(&streams, &spec);
        // The clock started when every stream was in: the client cannot send before
        // that, so a late `start` here (a busy CPU) never shortens the receiver's time.
        let started = self.arrivals.ready_at.unwrap_or(now);
        self.workers.plane = Some(
            DataPlane::start(cfg, streams, None, started).map_err(ServerSessionError::io("cannot start workers"))?,
        );
        Ok(())
    }

    /// Starts the stream of this end's own the session asks for (one at a time).
    pub(super) fn start_own_stream(&mut self, request: OwnStream, now: Instant) -> Result<(), ServerSessionError> {
        if self.workers.own_stream.is_some() {
            return Err(ServerSessionError::Streams(format!(
                "a stream of this end's own for {} while another runs",
                request.purpose
            )));
        }
        self.workers.own_stream = Some(OwnStreamRun::start(request, now));
        Ok(())
    }

    /// The client says the test is over (iperf3's results came): the receivers get until
    /// [`SETTLE_WAIT`] to read what the client says it sent, then the workers stop and the
    /// session reports this end's figures.
    pub(super) fn settle(&mut self) {
        let Some(plane) = self.workers.plane.take() else { return };
        let tcp = self.test.spec.as_ref().is_some_and(|s| s.kind == netchar_model::TestKind::Tcp);
        let totals = self.workers.peer_totals.as_ref().map(|(_, t)| t.clone());
        let deadline = Instant::now() + SETTLE_WAIT;
        while Instant::now() < deadline {
            let received = plane.received();
            let tcp_in = tcp
                && totals.as_ref().is_some_and(|totals| {
                    totals.iter().all(|t| received.iter().any(|&(id, b)| id == t.id && b >= t.bytes))
                });
            // Without the client's exact totals a TCP receiver has nothing to wait for.
            if plane.all_done() || tcp_in || (tcp && totals.is_none()) {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        plane.abort();
        self.report(plane.join());
    }

    /// Hands the session this end's records and CPU, once.
    pub(super) fn report(&mut self, mut records: Vec<StreamRecord>) {
        self.workers.mtu_probes.fill(&mut records, Endpoint::Server);
        let mut cpu = self.workers.meter.take().map(|m| m.finish()).unwrap_or_default();
        cpu.background_load_pct = self.workers.load.take().map(|l| l.finish());
        cpu.idle_pct = self.workers.idle.take().and_then(|(meter, mark)| mark.and_then(|m| meter.idle_since(&m)));
        if let Some(probe) = self.workers.evidence.take() {
            let (evidence, identity) = probe.finish(&records, Endpoint::Server);
            self.session.evidence(evidence, identity);
        }
        // A stream of this end's own still running ends with the test: what it sent counts.
        if let Some(own) = self.workers.own_stream.take() {
            let (record, error) = own.abort();
            self.session.own_stream_done(Instant::now(), record, error);
        }
        // What the session measured itself, or ran beside the workers, joins the records.
        let mut paths = std::mem::take(&mut self.arrivals.data_paths);
        if let Some(e) = self.session.complete_records(Instant::now(), &mut records, &mut paths) {
            self.outcome.error.get_or_insert(e);
        }
        self.arrivals.data_paths = paths;
        // The slot goes back before the results: a client that starts its next test as soon
        // as it has them (--repeat, suites, echo patterns) must never find this one counted.
        self.release();
        self.session.finish(Instant::now(), &records, cpu, self.outcome.error.clone());
        self.outcome.records_for_log = records;
        self.outcome.finished = true;
    }
}
