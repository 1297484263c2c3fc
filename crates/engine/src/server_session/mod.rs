//! The one driver of every protocol's server session, netchar's and the peers' (iperf3's,
//! netperf's, iperf2's): from its control connection's thread it admits the test under the server's
//! limits, takes the test's data streams as they are routed to it, runs the workers and hands
//! the session (crate::server_control) this end's records to report.
//!
//! It is its own module, below crate::server and crate::peers, because both start sessions:
//! the listener for netchar's clients, a peer adapter for its protocol's. A peer adapter thus
//! stands on the driver of its sessions, never on the listener that started it.
//!
//! A session goes through phases, each with its state and its file: the request (`admit`:
//! what was asked and granted), the arrival of the data streams (`streams`), the workers
//! (`workers`: running them, settling, reporting). This file holds the loop that drives them
//! from the control connection, and the end (the log, the slot released).
//!
//! A session without a control connection of its own is driven the same way: over the test's
//! own TCP connection, handed to the workers after the request
//! ([`SessionDriver::serve_data_connection`]), or over one UDP source's datagrams, which its
//! listener demultiplexes onto a [`DatagramLink`].

mod admit;
mod datagram_link;
mod own_stream;
mod streams;
mod workers;

pub(crate) use datagram_link::{DatagramLink, DatagramSource};

use crate::control_link::ControlLink;
use crate::error::ServerSessionError;
use crate::server_control::{ServerControl, ServerControlEvent};
use crate::server_shared::{ServerLog, Shared, TestLog};
use crate::StopFlag;
use admit::AdmittedTest;
use netchar_model::StreamRecord;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};
use streams::StreamArrivals;
use workers::Workers;

/// One client's test, driven from its control connection's thread: the one driver of every
/// protocol's server session (crate::server_control), netchar's and iperf3's.
pub(crate) struct SessionDriver<'a> {
    /// The control connection.
    link: Box<dyn ControlLink + 'a>,
    peer: SocketAddr,
    session: Box<dyn ServerControl>,
    shared: &'a Shared,
    /// The test must have been asked for by then (`--idle-timeout`, from accept).
    request_deadline: Instant,
    /// What was asked and granted (crate::server_session::admit).
    test: AdmittedTest,
    /// The test's data streams as they come in (crate::server_session::streams).
    arrivals: StreamArrivals,
    /// This end's workers and what is measured around them (crate::server_session::workers).
    workers: Workers,
    /// How the test ended, for the log.
    outcome: Outcome,
}

/// How a test ended, for the log.
#[derive(Default)]
struct Outcome {
    /// Why it ended early, if it did (the first reason wins).
    error: Option<String>,
    /// This end's records, as reported.
    records_for_log: Vec<StreamRecord>,
    /// The session has been given this end's figures.
    finished: bool,
}

/// Whatever ends a session, a panic in its thread included, its test's slot is freed and its
/// workers are stopped: a slot held for ever would make the server busy for everyone.
impl Drop for SessionDriver<'_> {
    fn drop(&mut self) {
        if let Some(plane) = self.workers.plane.take() {
            plane.abort();
        }
        if let Some(own) = self.workers.own_stream.take() {
            own.stop();
        }
        self.release();
    }
}

impl<'a> SessionDriver<'a> {
    /// Serves one control connection with `session` until the session is over, then logs it.
    pub(crate) fn serve(
        stream: TcpStream,
        peer: SocketAddr,
        session: Box<dyn ServerControl>,
        shared: &'a Shared,
        request_deadline: Instant,
    ) {
        let _ = stream.set_nodelay(true);
        // A client that stops reading must not hold this thread (and its slots) in a write:
        // a write that cannot finish within a phase ends the session.
        let _ = stream.set_write_timeout(Some(shared.cfg.timeouts.phase));
        Self::serve_over(Box::new(stream), peer, session, shared, request_deadline);
    }

    /// [`Self::serve`] over any control link (the engine's tests use an in-memory one);
    /// returns why the session ended early, if it did (the log has it too).
    pub(crate) fn serve_over(
        link: Box<dyn ControlLink + 'a>,
        peer: SocketAddr,
        session: Box<dyn ServerControl>,
        shared: &'a Shared,
        request_deadline: Instant,
    ) -> Option<ServerSessionError> {
        Self::drive(link, None, peer, session, shared, request_deadline)
    }

    /// Serves a session whose control connection is the test's own data stream (iperf2's TCP
    /// test: its request is the connection's first bytes): once the session says so
    /// (ServerControlEvent::ControlIsData), the connection is the workers' stream 1. Returns
    /// why the session ended early, if it did.
    pub(crate) fn serve_data_connection(
        stream: TcpStream,
        peer: SocketAddr,
        session: Box<dyn ServerControl>,
        shared: &'a Shared,
        request_deadline: Instant,
    ) -> Option<ServerSessionError> {
        let _ = stream.set_write_timeout(Some(shared.cfg.timeouts.phase));
        let data = match stream.try_clone() {
            Ok(s) => s,
            Err(e) => return Some(ServerSessionError::io("the test's connection")(e)),
        };
        Self::drive(Box::new(stream), Some(data), peer, session, shared, request_deadline)
    }

    fn drive(
        link: Box<dyn ControlLink + 'a>,
        control_stream: Option<TcpStream>,
        peer: SocketAddr,
        session: Box<dyn ServerControl>,
        shared: &'a Shared,
        request_deadline: Instant,
    ) -> Option<ServerSessionError> {
        let mut me = SessionDriver {
            link,
            peer,
            session,
            shared,
            request_deadline,
            test: AdmittedTest::default(),
            arrivals: StreamArrivals { control_stream, ..StreamArrivals::default() },
            workers: Workers::default(),
            outcome: Outcome::default(),
        };
        let outcome = me.pump(&shared.stop).err();
        me.finish(outcome.as_ref().map(|e| e.to_string()));
        me.release();
        me.link.close_gently();
        let protocol = me.session.protocol();
        match me.test.spec.take() {
            Some(spec) if me.test.concurrent > 0 => (shared.log)(ServerLog::Test(Box::new(TestLog {
                protocol,
                peer_software: me.test.peer_software.clone(),
                peer,
                data_paths: std::mem::take(&mut me.arrivals.data_paths),
                user: me.test.user.clone(),
                spec,
                streams: std::mem::take(&mut me.outcome.records_for_log),
                concurrent_tests: me.test.concurrent,
                refused_data: me.arrivals.refused_data + me.session.refused_data(),
                error: me.outcome.error.clone(),
            }))),
            _ => {
                if let Some(e) = me.outcome.error.clone() {
                    let reason =
                        if protocol == netchar_model::NATIVE_PROTOCOL { e } else { format!("{protocol}: {e}") };
                    (shared.log)(ServerLog::Rejected { peer, reason });
                }
            }
        }
        outcome
    }

    fn pump(&mut self, stop: &StopFlag) -> Result<(), ServerSessionError> {
        // A whole datagram of a session opened by one (DatagramLink), up to the largest UDP payload.
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            self.flush()?;
            while let Some(ev) = self.session.poll_event() {
                self.on_event(ev)?;
            }
            self.flush()?;
            if self.session.is_done() {
                return Ok(());
            }
            self.collect_streams()?;
            if stop.is_raised() {
                self.session.stopping(Instant::now());
                return Err(ServerSessionError::ShuttingDown);
            }
            if self.test.spec.is_none() && Instant::now() >= self.request_deadline {
                let limit = self.shared.cfg.limits.idle_timeout;
                let secs = limit.as_secs_f64();
                self.session.fail(Instant::now(), &format!("no test request within {secs:.0} s of connecting"));
                self.flush()?;
                return Err(ServerSessionError::NoRequest { limit });
            }
            if let (Some(max), Some(at)) = (self.shared.cfg.limits.max_duration, self.arrivals.ready_at) {
                // -n tests have no duration to check at admission, and a client that ends
                // the test itself may not: they stop at the limit. Timed tests end on their
                // own well before it; the margin covers the UDP grace and a slow start.
                // (A stream of this end's own keeps its own time: iperf2's -r runs after the
                // client's.)
                if self.workers.plane.is_some()
                    && self.workers.own_stream.is_none()
                    && at.elapsed() > max + self.udp_grace() + Duration::from_secs(2)
                {
                    self.session.stopping(Instant::now());
                    return Err(ServerSessionError::MaxDuration { limit: max });
                }
            }
            if let Some(own) = &mut self.workers.own_stream {
                if let Some((record, error)) = own.poll(Instant::now(), &self.shared.cfg.limits) {
                    self.workers.own_stream = None;
                    self.session.own_stream_done(Instant::now(), record, error);
                    continue;
                }
            }
            if let Some(plane) = &self.workers.plane {
                if !self.workers.senders_reported {
                    if let Some(totals) = plane.senders_done() {
                        self.workers.senders_reported = true;
                        if !totals.is_empty() {
                            self.session.local_senders_done(Instant::now(), totals);
                        }
                    }
                }
                // A data connection that fails while the test runs: the client is gone.
                if let Some(e) = plane.first_error().filter(|_| self.session.is_running()) {
                    return Err(ServerSessionError::Data(e));
                }
                // No control connection tells of a client that went silent on its test's own
                // connection: a stream that moves no byte for --idle-timeout ends the test.
                // (Once its data is all in, a stream of this end's own keeps its own limits.)
                if self.arrivals.control_is_data && !plane.all_done() {
                    let own = self.workers.own_stream.as_ref().map_or(0, |o| o.bytes_moved());
                    let (moved, now) = (plane.bytes_moved() + own, Instant::now());
                    let last = self.workers.last_moved.get_or_insert((moved, now));
                    if last.0 != moved {
                        *last = (moved, now);
                    } else if now - last.1 >= self.shared.cfg.limits.idle_timeout {
                        let secs = self.shared.cfg.limits.idle_timeout.as_secs_f64();
                        return Err(ServerSessionError::Data(format!(
                            "idle for {secs:.0} s (the server's --idle-timeout)"
                        )));
                    }
                }
                if plane.all_done() && self.session.ends_with_workers() {
                    if !self.workers.done_told {
                        // The session may have a stream of its own to run now (its request
                        // is taken at the top of the loop).
                        self.workers.done_told = true;
                        self.session.workers_done(Instant::now());
                        continue;
                    }
                    if self.workers.own_stream.is_none() {
                        return Ok(());
                    }
                }
                let phase = self.shared.cfg.timeouts.phase + self.udp_grace();
                if self.workers.peer_totals.as_ref().is_some_and(|(t, _)| t.elapsed() > phase)
                    && self.session.ends_with_workers()
                {
                    return Err(ServerSessionError::Data(
                        "the client finished sending but its data did not arrive in time".into(),
                    ));
                }
            }
            self.read_control(&mut buf)?;
            let now = Instant::now();
            if self.session.poll_timeout().is_some_and(|t| now >= t) {
                self.session.handle_timeout(now)?;
            }
        }
    }

    fn udp_grace(&self) -> Duration {
        Duration::from_secs_f64(self.test.spec.as_ref().map_or(0.0, |s| s.receive_grace_seconds()))
    }

    fn flush(&mut self) -> Result<(), ServerSessionError> {
        let mut out = Vec::new();
        self.session.poll_output(&mut out);
        if out.is_empty() {
            return Ok(());
        }
        self.link.send_all(&out).map_err(ServerSessionError::Control)
    }

    fn read_control(&mut self, buf: &mut [u8]) -> Result<(), ServerSessionError> {
        // While data connections are still arriving, look for them often: `ready` (and the
        // test's start) waits on this loop. While the test runs, a message from the client
        // ends the wait at once and only the data plane's state needs looking at: rarely until
        // near the planned end (quiet_wait), then every 20 ms to see the end soon.
        let wait = if self.arrivals.data_rx.is_some() {
            Duration::from_millis(2)
        } else {
            let (short, now) = (Duration::from_millis(20), Instant::now());
            match self.workers.plane.as_ref().filter(|_| self.session.is_running()) {
                Some(plane) => {
                    let quiet = crate::dataplane::quiet_wait(plane.planned_end(), now, short);
                    // (The session's own timer, if it has one, is not waited past by more
                    // than the short wait, as before.)
                    let timer = self.session.poll_timeout().map(|t| t.saturating_duration_since(now).max(short));
                    timer.map_or(quiet, |t| quiet.min(t))
                }
                // A session that measures itself runs on its own timer (netio's sending): the
                // wait ends when it is due, and a due timer is not kept waiting by a read.
                None if self.session.measures_itself() => {
                    self.session.poll_timeout().map_or(short, |t| t.saturating_duration_since(now).min(short))
                }
                None => short,
            }
        };
        // A stream of this end's own is looked at as often as a session's short turn: a
        // dial-back's next try, its end.
        let wait = if self.workers.own_stream.is_some() { wait.min(Duration::from_millis(20)) } else { wait };
        if wait.is_zero() && self.session.measures_itself() {
            return Ok(());
        }
        if self.arrivals.control_is_data {
            // The connection is the workers' now: only their state is looked at.
            std::thread::sleep(wait);
            return Ok(());
        }
        match self.link.read_within(buf, wait) {
            Ok(0) => {
                let running = self.workers.plane.is_some();
                // The protocol minded the close: during the test, the client is gone.
                self.session.handle_eof(Instant::now()).map_err(|e| {
                    if running {
                        ServerSessionError::ClientGone
                    } else {
                        e.into()
                    }
                })
            }
            Ok(n) => Ok(self.session.handle_input(Instant::now(), &buf[..n])?),
            Err(e) if crate::is_retry(&e) => Ok(()),
            Err(e) => Err(ServerSessionError::Control(e)),
        }
    }

    fn on_event(&mut self, ev: ServerControlEvent) -> Result<(), ServerSessionError> {
        let now = Instant::now();
        match ev {
            ServerControlEvent::Requested(req) => self.admit(*req, now)?,
            ServerControlEvent::Refused(reason) => self.outcome.error = Some(reason),
            ServerControlEvent::Start => self.start_workers(now)?,
            ServerControlEvent::PeerSendersDone(totals) => {
                if let Some(p) = &self.workers.plane {
                    p.peer_senders_done(&totals, self.udp_grace());
                }
                self.workers.peer_totals = Some((now, totals));
            }
            ServerControlEvent::StopSenders(reason) => {
                if let Some(reason) = reason {
                    self.outcome.error.get_or_insert(format!("stopped by the client: {reason}"));
                    if self.workers.plane.is_none() {
                        return Err(ServerSessionError::StoppedByClient(reason));
                    }
                }
                if let Some(p) = &self.workers.plane {
                    p.stop_senders();
                }
            }
            ServerControlEvent::Settle => self.settle(),
            ServerControlEvent::EndWorkers => {
                if let Some(plane) = self.workers.plane.take() {
                    plane.abort();
                    self.report(plane.join());
                }
            }
            ServerControlEvent::Ended(reason) => return Err(ServerSessionError::Ended(reason)),
            ServerControlEvent::ControlIsData => self.control_is_data()?,
            ServerControlEvent::OwnStream(request) => self.start_own_stream(*request, now)?,
        }
        Ok(())
    }

    /// Frees the test's slot, rate and routes. Called before the results go out: a client
    /// that starts its next test as soon as it has them (--repeat, suites, echo patterns)
    /// must never find the server still busy with this one.
    fn release(&mut self) {
        if let Some(cookie) = self.test.cookie.take() {
            self.arrivals.refused_data += match self.test.by_address.take() {
                Some(tests) => tests.leave(&self.shared.registry, self.peer.ip()),
                None => self.shared.registry.release(&cookie),
            };
        }
    }

    /// Ends the test: this end's figures to the session (with the error, if any), unless it
    /// has them already.
    fn finish(&mut self, error: Option<String>) {
        if let Some(e) = error {
            self.outcome.error.get_or_insert(e);
        }
        if self.outcome.finished {
            return;
        }
        match self.workers.plane.take() {
            Some(plane) => {
                if self.outcome.error.is_some() || !self.session.ends_with_workers() {
                    plane.abort();
                }
                let records = plane.join();
                self.report(records);
            }
            // A session that counted the test itself reports what it counted.
            None if self.session.measures_itself() && self.test.concurrent > 0 => self.report(Vec::new()),
            None => {
                self.release();
                if let Some(e) = self.outcome.error.clone() {
                    self.session.fail(Instant::now(), &e);
                }
            }
        }
        let _ = self.flush();
    }
}
