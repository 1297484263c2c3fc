//! This end's counters and settings around a test (issue 23): a snapshot of the interface the
//! route to the peer leaves by, and of the namespace's stack, before the test's clocks start
//! (the client's when the test is admitted, the server's when its data streams are all in)
//! and another after the workers end; their delta is the result's [`Evidence`], with the
//! test's own receiving sockets' drops; and the host's identity with that interface described.
//!
//! The snapshots read the namespace of the thread that takes them, so the probe is opened,
//! started and finished on one thread: the client's driver, or a server session's control
//! thread. A snapshot costs 0.2 to 0.35 ms, outside the test's time; deltas are of the whole
//! test, not of intervals, whose counters and lost datagrams would not be of the same
//! datagrams (docs/json.md, `evidence`). What cannot be read is absent from the evidence, with
//! why: the probe never fails a test.

use netchar_model::{Endpoint, Evidence, HostIdentity, Role, StreamRecord};
use netchar_sys::counters::{interface_to, Sampler, Snapshot};
use std::net::IpAddr;

/// The snapshots of one end of one test.
pub(crate) struct EvidenceProbe {
    /// The interface towards the peer and its sampler, or why there is none.
    sampler: Result<(String, Sampler), String>,
    before: Option<Snapshot>,
    after: Option<Snapshot>,
}

impl EvidenceProbe {
    /// A probe of the interface the route to `peer` leaves by, in the calling thread's
    /// namespace (an IPv4 peer of a dual-stack socket is looked up as IPv4).
    pub(crate) fn open(peer: IpAddr) -> Self {
        let sampler = interface_to(peer.to_canonical())
            .and_then(|iface| Sampler::open(&iface).map(|s| (iface, s)))
            .map_err(|e| e.to_string());
        Self { sampler, before: None, after: None }
    }

    /// The snapshot before the workers start; only the first call takes one.
    pub(crate) fn start(&mut self) {
        if let (Ok((_, sampler)), None) = (&mut self.sampler, &self.before) {
            self.before = Some(sampler.take());
        }
    }

    /// The snapshot after the workers end; only the first call after [`Self::start`] takes one.
    pub(crate) fn stop(&mut self) {
        if let (Ok((_, sampler)), Some(_), None) = (&mut self.sampler, &self.before, &self.after) {
            self.after = Some(sampler.take());
        }
    }

    /// What moved between the snapshots, `socket_drops` being the drops of the UDP receivers
    /// among `records` that `by` measured (None when it received no UDP); and this host's
    /// identity with the probed interface described.
    pub(crate) fn finish(mut self, records: &[StreamRecord], by: Endpoint) -> (Evidence, HostIdentity) {
        self.stop();
        let interface = self.sampler.as_ref().ok().map(|(name, _)| name.as_str());
        let identity = netchar_sys::identity::describe(interface.as_slice());
        let evidence = match (&self.sampler, &self.before, &self.after) {
            (Ok(_), Some(before), Some(after)) => {
                let mut e = before.delta(after);
                e.socket_drops = socket_drops(records, by);
                e
            }
            (Err(why), _, _) => unread(interface.unwrap_or_default(), why),
            (Ok((name, _)), _, _) => unread(name, "the test's workers never started"),
        };
        (evidence, identity)
    }
}

/// Evidence of no counters, saying why.
fn unread(interface: &str, why: &str) -> Evidence {
    let mut e = Evidence { interface: interface.to_string(), ..Evidence::default() };
    e.unavailable.insert("interface".into(), why.to_string());
    e
}

/// The kernel drops of the UDP receivers `by` measured, summed; None when it had none.
fn socket_drops(records: &[StreamRecord], by: Endpoint) -> Option<u64> {
    records
        .iter()
        .filter(|r| r.measured_by == by && r.role == Role::Receiver)
        .filter_map(|r| r.udp_received.as_ref())
        .map(|u| u.kernel_drops)
        .reduce(|a, b| a + b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use netchar_model::{Flow, UdpReceived};

    #[test]
    fn a_loopback_probe_sees_its_own_datagrams_and_its_sockets_drops() {
        let mut probe = EvidenceProbe::open("127.0.0.1".parse().unwrap());
        probe.start();
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        socket.send_to(&[0; 10], socket.local_addr().unwrap()).unwrap();
        let mut rx = StreamRecord::bare(1, Flow::Up, Role::Receiver, Endpoint::Server, 10, 1.0);
        rx.udp_received = Some(UdpReceived { kernel_drops: 3, ..UdpReceived::default() });
        let mut other = rx.clone();
        other.measured_by = Endpoint::Client;
        let (e, id) = probe.finish(&[rx.clone(), rx, other], Endpoint::Server);
        assert_eq!(e.interface, "lo");
        assert!(e.link.is_some_and(|l| l.tx_packets >= 1), "{e:?}");
        assert_eq!(e.socket_drops, Some(6), "this end's receivers only");
        assert_eq!(id.interfaces.len(), 1);
        assert_eq!(id.interfaces[0].name, "lo");
    }

    #[test]
    fn a_probe_that_cannot_read_says_why_and_never_fails() {
        let mut probe = EvidenceProbe { sampler: Err("no route".into()), before: None, after: None };
        probe.start();
        let (e, id) = probe.finish(&[], Endpoint::Client);
        assert_eq!(e.unavailable["interface"], "no route");
        assert!(e.link.is_none() && e.socket_drops.is_none());
        assert!(id.interfaces.is_empty());
        let never_started = EvidenceProbe::open("127.0.0.1".parse().unwrap());
        let (e, _) = never_started.finish(&[], Endpoint::Client);
        assert_eq!(
            (e.interface.as_str(), e.unavailable["interface"].as_str()),
            ("lo", "the test's workers never started")
        );
    }
}
