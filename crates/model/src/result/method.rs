//! A result's method: [`Method::of`] reads what each end did from the result's spec, stream
//! records and hosts; the type and its comparison are [`crate::method`]'s.

use crate::{Endpoint, Method, Role, TestKind, TestResult};

impl Method {
    /// The method of `result`, read from its spec and from what its stream records say each
    /// end did.
    pub fn of(result: &TestResult) -> Self {
        let spec = &result.test.spec;
        let rr = spec.rr.as_ref();
        let test = match (spec.kind, rr) {
            (TestKind::Rr, Some(o)) if o.connect_per_transaction => "crr",
            (TestKind::Rr, Some(o)) if o.udp => "rr_udp",
            (kind, _) => kind.name(),
        };
        let direction = match spec.direction {
            crate::Direction::Up => "up",
            crate::Direction::Down => "down",
            crate::Direction::Bidir => "bidir",
        };
        let senders = || result.streams.iter().filter(|s| s.role == Role::Sender);
        let receivers = || result.streams.iter().filter(|s| s.role == Role::Receiver);
        let mut m = Method {
            protocol: result.test.protocol.clone(),
            test: test.to_string(),
            direction: direction.to_string(),
            streams: spec.streams,
            block_bytes: spec.block_bytes,
            response_bytes: rr.map(|o| o.response_bytes),
            inflight: rr.map(|o| o.inflight),
            payload: spec.payload.map_or_else(|| "constant".to_string(), |p| p.describe()),
            verify: spec.verify,
            busy_poll: busy_poll(result),
            cpu_placement: cpu_placement(result),
            ip_options: ip_options(spec),
            server_load: spec
                .server_load
                .map_or_else(|| "none".to_string(), |(pct, threads)| format!("{pct}% of a CPU × {threads} threads")),
            ..Method::default()
        };
        if let (TestKind::Udp, Some(u)) = (spec.kind, spec.udp.as_ref()) {
            m.udp_checksum = Some(!u.no_checksum);
            // Only netchar's own senders count their send calls: a peer's report says nothing
            // of GSO, and reads as not reported rather than as "off".
            let counted: Vec<&crate::UdpSent> =
                senders().filter_map(|s| s.udp_sent.as_ref()).filter(|u| u.sends > 0).collect();
            if !counted.is_empty() {
                m.gso = Some(counted.iter().all(|u| u.gso));
                let packets: u64 = counted.iter().map(|u| u.packets).sum();
                let sends: u64 = counted.iter().map(|u| u.sends).sum();
                m.datagrams_per_send = Some(packets as f64 / sends as f64);
            }
            // The send path: an AF_XDP run measured a different sender from the socket's, so
            // `compare` names it as a difference rather than comparing the two silently.
            m.send = match &u.xdp {
                Some(x) if x.live => Some("xdp_live".to_string()),
                Some(_) => Some("af_xdp".to_string()),
                None => (!counted.is_empty()).then(|| "socket".to_string()),
            };
            let received: Vec<&crate::UdpReceived> = receivers().filter_map(|s| s.udp_received.as_ref()).collect();
            if !received.is_empty() {
                m.gro = Some(received.iter().any(|r| r.coalesced));
            }
            let paced = !matches!(u.rate, crate::UdpRate::Unlimited) || u.pattern.is_some();
            m.paced = Some(paced);
            if paced {
                m.pacing_quantum_us = Some(u.pacing_quantum_seconds * 1e6);
            }
        }
        if spec.kind == TestKind::Tcp {
            let mut sends: Vec<String> = senders()
                .map(|s| s.zerocopy.as_ref().map_or_else(|| "copy".to_string(), |z| z.method.clone()))
                .collect();
            sends.sort();
            sends.dedup();
            m.send = (!sends.is_empty()).then(|| sends.join("+"));
            let mut receives: Vec<String> = receivers().filter_map(|s| s.receive_method.clone()).collect();
            receives.sort();
            receives.dedup();
            m.receive = (!receives.is_empty()).then(|| receives.join("+"));
            m.congestion = Some(congestion(result));
            m.tcp_options = Some(tcp_options(&spec.tcp));
        }
        m
    }
}

/// The receivers' way of waiting: netchar's own spinning, or the kernel's busy polling on
/// either end.
fn busy_poll(result: &TestResult) -> String {
    if result.test.spec.rr.as_ref().is_some_and(|o| o.busy_poll) {
        return "spin".to_string();
    }
    let mut on = Vec::new();
    let ends = [("client", Some(&result.host)), ("server", result.remote_host.as_ref())];
    for (end, host) in ends {
        let Some(host) = host else { continue };
        for key in ["net.core.busy_read", "net.core.busy_poll"] {
            if let Some(v) = host.sysctls.get(key).filter(|v| v.trim() != "0") {
                on.push(format!("{key}={v} on the {end}"));
            }
        }
    }
    if on.is_empty() {
        "sleep".to_string()
    } else {
        on.join(", ")
    }
}

/// The CPUs the data workers were pinned to (`-A`), or `unpinned`: where an unpinned worker
/// runs is the scheduler's choice, not the method's.
fn cpu_placement(result: &TestResult) -> String {
    let pinned = [("client", result.test.client_cpu), ("server", result.test.spec.server_cpu)];
    let parts: Vec<String> = pinned.iter().filter_map(|(end, cpu)| cpu.map(|c| format!("{end} CPU {c}"))).collect();
    if parts.is_empty() {
        "unpinned".to_string()
    } else {
        parts.join(", ")
    }
}

fn ip_options(spec: &crate::TestSpec) -> String {
    let mut parts = Vec::new();
    if let Some(t) = spec.ip.tos {
        parts.push(format!("tos {t:#04x}"));
    }
    if let Some(l) = spec.ip.flowlabel {
        parts.push(format!("flowlabel {l}"));
    }
    if spec.ip.dont_fragment {
        parts.push("df".to_string());
    }
    if parts.is_empty() {
        "none".to_string()
    } else {
        parts.join(", ")
    }
}

/// `-C`, or the default congestion control of the ends that send.
fn congestion(result: &TestResult) -> String {
    if let Some(c) = &result.test.spec.tcp.congestion {
        return c.clone();
    }
    let default_of = |host: Option<&crate::HostInfo>| {
        host.and_then(|h| h.sysctls.get("net.ipv4.tcp_congestion_control").cloned())
            .unwrap_or_else(|| "not reported".to_string())
    };
    let mut ends = Vec::new();
    for s in result.streams.iter().filter(|s| s.role == Role::Sender) {
        let end = s.measured_by;
        if !ends.contains(&end) {
            ends.push(end);
        }
    }
    ends.sort_by_key(|e| *e == Endpoint::Server);
    let names: Vec<String> = ends
        .iter()
        .map(|e| match e {
            Endpoint::Client => default_of(Some(&result.host)),
            Endpoint::Server => default_of(result.remote_host.as_ref()),
        })
        .collect();
    let mut distinct = names.clone();
    distinct.dedup();
    if distinct.len() == 1 {
        distinct.remove(0)
    } else if names.is_empty() {
        "not reported".to_string()
    } else {
        format!("{} (client), {} (server)", names[0], names[1])
    }
}

fn tcp_options(o: &crate::TcpOptions) -> String {
    let mut parts = Vec::new();
    if let Some(w) = o.window_bytes {
        parts.push(format!("buffer {w} bytes"));
    }
    if let Some(m) = o.mss {
        parts.push(format!("MSS {m}"));
    }
    if o.nodelay {
        parts.push("no-delay".to_string());
    }
    if let Some(r) = o.rate_bps_per_stream {
        parts.push(format!("capped at {r} bit/s per stream"));
    }
    if o.wake_per_segment {
        parts.push("woken per segment".to_string());
    }
    if parts.is_empty() {
        "defaults".to_string()
    } else {
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CpuReport, Flow, HostInfo, ResultHeader, StreamRecord, TestInfo, TestSpec, UdpSent};

    fn result(spec: TestSpec, streams: Vec<StreamRecord>) -> TestResult {
        let mut host = HostInfo::default();
        host.sysctls.insert("net.ipv4.tcp_congestion_control".into(), "cubic".into());
        let header = ResultHeader {
            host,
            ..ResultHeader::new(TestInfo { client_cpu: Some(0), ..TestInfo::new(spec, "127.0.0.1:5300") })
        };
        TestResult::assemble(header, streams, CpuReport::default(), None)
    }

    fn udp_sender(id: u32, packets: u64, sends: u64, gso: bool) -> StreamRecord {
        let mut r = StreamRecord::bare(id, Flow::Up, Role::Sender, Endpoint::Client, packets * 64, 1.0);
        r.udp_sent = Some(UdpSent { packets, sends, gso, ..UdpSent::default() });
        r
    }

    #[test]
    fn a_udp_method_is_what_the_senders_did_not_what_was_asked() {
        let mut spec = TestSpec::udp_default();
        spec.block_bytes = 64;
        spec.streams = 2;
        spec.udp.as_mut().unwrap().rate = crate::UdpRate::Unlimited;
        // GSO was asked for; the second stream's kernel refused it and it fell back.
        let r = result(spec.clone(), vec![udp_sender(1, 51_200, 100, true), udp_sender(2, 6_400, 100, false)]);
        let m = r.method.clone().unwrap();
        assert_eq!((m.gso, m.datagrams_per_send, m.udp_checksum), (Some(false), Some(288.0), Some(true)));
        assert_eq!((m.paced, m.pacing_quantum_us, m.block_bytes, m.streams), (Some(false), None, 64, 2));
        assert_eq!(m.cpu_placement, "client CPU 0");
        assert_eq!((m.send.as_deref(), &m.congestion), (Some("socket"), &None));
        // A result without a recorded method (an older netchar) derives the same one.
        let mut old = serde_json::to_value(&r).unwrap();
        old.as_object_mut().unwrap().remove("method");
        let old: TestResult = serde_json::from_value(old).unwrap();
        assert_eq!((old.method.is_none(), old.method()), (true, m.clone()));
        // Without checksums (and so without GSO, like the reference): the one difference.
        spec.udp.as_mut().unwrap().no_checksum = true;
        let n = result(spec, vec![udp_sender(1, 28_800, 100, false), udp_sender(2, 28_800, 100, false)]).method();
        let fields: Vec<&str> = m.differences(&n).iter().map(|d| d.field).collect();
        assert_eq!(fields, ["udp_checksum"]);
        assert_eq!(m.differences(&n)[0].to_string(), "udp_checksum: on vs off");
        // Sent through AF_XDP (--xdp): the send path differs even where every other field
        // matches, so no comparison takes it for the socket's.
        let mut xdp = r.test.spec.clone();
        xdp.udp.as_mut().unwrap().xdp = Some(crate::XdpSend { interface: "eth0".into(), queue: 0, live: false });
        let mut live = xdp.clone();
        let x = result(xdp, vec![udp_sender(1, 51_200, 100, false), udp_sender(2, 6_400, 100, false)]).method();
        assert_eq!(x.send.as_deref(), Some("af_xdp"));
        let fields: Vec<String> = m.differences(&x).iter().map(|d| d.to_string()).collect();
        assert_eq!(fields, ["send: socket vs af_xdp"]);
        // The kernel's live frames (--xdp-live) are a third send path.
        live.udp.as_mut().unwrap().xdp.as_mut().unwrap().live = true;
        let l = result(live, vec![udp_sender(1, 51_200, 100, false), udp_sender(2, 6_400, 100, false)]).method();
        assert_eq!(l.differences(&x).iter().map(|d| d.to_string()).collect::<Vec<_>>(), ["send: xdp_live vs af_xdp"]);
    }

    #[test]
    fn a_tcp_method_names_the_send_path_each_stream_took() {
        let mut spec = TestSpec::tcp_default();
        spec.streams = 2;
        spec.tcp.zerocopy = true;
        let mut a = StreamRecord::bare(1, Flow::Up, Role::Sender, Endpoint::Client, 1, 1.0);
        a.zerocopy = Some(crate::ZeroCopyReport { method: "splice".into(), ..Default::default() });
        let mut b = StreamRecord::bare(2, Flow::Up, Role::Sender, Endpoint::Client, 1, 1.0);
        b.zerocopy = Some(crate::ZeroCopyReport { method: "zerocopy".into(), ..Default::default() });
        let mut rx = StreamRecord::bare(1, Flow::Up, Role::Receiver, Endpoint::Server, 1, 1.0);
        rx.receive_method = Some("read".into());
        let m = result(spec.clone(), vec![a, b.clone(), rx]).method();
        assert_eq!(m.send.as_deref(), Some("splice+zerocopy"));
        assert_eq!((m.receive.as_deref(), m.congestion.as_deref()), (Some("read"), Some("cubic")));
        assert_eq!(m.tcp_options.as_deref(), Some("defaults"));
        let plain = result(spec, vec![b]).method();
        let d = m.differences(&plain);
        assert_eq!(d.iter().map(ToString::to_string).collect::<Vec<_>>(), ["send: splice+zerocopy vs zerocopy"]);
    }
}
