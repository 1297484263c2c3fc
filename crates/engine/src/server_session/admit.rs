//! The request phase: the test a client asks for is admitted under the server's limits (or
//! turned away, saying why), and what admission granted is kept for the rest of the session.

use super::streams::{OwnSocket, ROUTE_QUEUE};
use super::SessionDriver;
use crate::admission::{Refusal, Rejection, Request, JOB_PROTOCOLS};
use crate::dataplane::{DataSocket, DataStream, PeerFilter};
use crate::error::ServerSessionError;
use crate::server_control::{Admission, ServerRequest, TestsByAddress};
use netchar_model::{Flow, Role, TestSpec};
use std::net::SocketAddr;
use std::sync::{mpsc, Arc};
use std::time::Instant;

/// The test a client asked for and what admission granted it.
#[derive(Default)]
pub(super) struct AdmittedTest {
    /// The test as asked and logged; `None` until a request came.
    pub(super) spec: Option<TestSpec>,
    /// What the workers run (the spec, unless the protocol runs it otherwise).
    pub(super) run: Option<TestSpec>,
    /// The client's software and version, as it told them.
    pub(super) peer_software: Option<String>,
    /// The authenticated user.
    pub(super) user: Option<String>,
    /// The test's place in the admission registry, until released.
    pub(super) cookie: Option<[u8; 16]>,
    /// Tests running when it was admitted, this one included; 0 if it never was.
    pub(super) concurrent: u32,
    /// The table of the address's test this session joined, when its protocol groups a
    /// client's sessions into one test (ServerControl::tests_by_address).
    pub(super) by_address: Option<TestsByAddress>,
}

impl SessionDriver<'_> {
    /// Admits the request under the server's limits, or says why not.
    pub(super) fn admit(&mut self, req: ServerRequest, now: Instant) -> Result<(), ServerSessionError> {
        self.test.peer_software = req.peer_software;
        let (tx, rx) = mpsc::sync_channel(ROUTE_QUEUE);
        let request = Request {
            spec: &req.spec,
            companion: req.companion,
            client_ip: self.peer.ip(),
            session_key: req.auth.as_ref().map(|a| a.1),
            route: tx.clone(),
        };
        self.test.user = req.auth.map(|a| a.0);
        // netperf's tests from one client are one job (crate::admission, "Jobs").
        let protocol = self.session.protocol();
        let group = JOB_PROTOCOLS.iter().copied().find(|p| *p == protocol);
        let by_address = self.session.tests_by_address();
        let admitted = match &by_address {
            Some(tests) => tests.join(&self.shared.registry, request, &self.shared.cfg.limits, now),
            None => self.shared.registry.admit_in_job(request, group, &self.shared.cfg.limits, now),
        };
        let admitted = match admitted {
            Ok(a) => a,
            Err(refusal) => {
                self.outcome.error = Some(match &refusal {
                    Refusal::Busy { reason: Some(reason), .. } => format!("turned away as busy: {reason}"),
                    Refusal::Busy { running, max, reason: None } => {
                        // Who holds the places, so that the log says why in words (a netperf
                        // client only prints "remote error 16").
                        let holders = self.shared.registry.lock().holders();
                        let joining = if group.is_some() {
                            format!(
                                "; a {protocol} test joins a running job only from the job's address and when \
                                 planned to end by the end of the job's first test"
                            )
                        } else {
                            String::new()
                        };
                        format!(
                            "turned away as busy: the server's {max} place(s) (--max-concurrent) are held by \
                             {holders} ({running} test(s) running){joining}; retry when they end"
                        )
                    }
                    Refusal::Rejected(reason) => format!("refused: {reason}"),
                });
                self.session.turned_away(now, &refusal);
                return Ok(());
            }
        };
        let spec = req.spec;
        self.test.cookie = Some(admitted.cookie);
        self.test.by_address = by_address;
        self.arrivals.data_rx = Some(rx);
        self.test.concurrent = admitted.running;
        if spec.measure_idle {
            self.workers.idle = Some((crate::load::IdleMeter::start(), None));
        }
        let crr = spec.rr.as_ref().is_some_and(|r| r.connect_per_transaction);
        let (udp, window) = (spec.uses_udp(), spec.tcp.window_bytes);
        self.test.spec = Some(spec);
        self.test.run = req.run;
        let (mut data_port, mut data_buffers) = (None, None);
        if crr || req.own_data_port.is_some() {
            // crr connects once per transaction, and some protocols name a data port of the
            // test's own: a socket of its own, not the routing of the main port.
            let local = self.link.local_addr().map_err(ServerSessionError::io("the control connection's address"))?;
            let at = SocketAddr::new(local.ip(), req.own_data_port.unwrap_or(0));
            let (own, port, buffers) = match OwnSocket::bind(at, udp && !crr, window) {
                Ok(bound) => bound,
                Err(e) => {
                    let why = format!("cannot open the test's data socket on {at}: {e}");
                    self.release();
                    self.outcome.error = Some(why.clone());
                    self.session.turned_away(now, &Refusal::Rejected(Rejection::other(why)));
                    return Ok(());
                }
            };
            (data_port, data_buffers) = (Some(port), Some(buffers));
            match own {
                // crr's responder waits in accept() itself.
                OwnSocket::Tcp(listener) if crr => {
                    listener.set_nonblocking(false).map_err(ServerSessionError::io("the crr listener"))?;
                    self.arrivals.streams.push(DataStream {
                        id: 1,
                        flow: Flow::Up,
                        role: Role::Receiver,
                        socket: DataSocket::CrrListener(listener, {
                            let (policy, client) = (self.shared.cfg.data_paths.clone(), self.peer.ip());
                            PeerFilter(Arc::new(move |ip| policy.allows(client, ip)))
                        }),
                    })
                }
                own => self.arrivals.own = Some(own),
            }
        }
        if self.session.reports_evidence() {
            self.workers.evidence = Some(crate::evidence::EvidenceProbe::open(self.peer.ip()));
        }
        let admission =
            Admission { cookie: admitted.cookie, running: admitted.running, data_port, data_buffers, route: &tx };
        self.session.admitted(now, &admission);
        if crr {
            self.arrivals.data_rx = None;
            self.arrivals.ready_at = Some(now);
            self.session.streams_connected(now);
        }
        Ok(())
    }
}
