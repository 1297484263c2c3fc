//! The AF_XDP sender (`--xdp IFACE[:QUEUE]`): the UDP sender's schedule, sequence numbers and
//! figures, with each datagram built as a whole Ethernet frame (Ethernet, IPv4 or IPv6, UDP,
//! the format's header and payload) straight into an AF_XDP socket's UMEM
//! (netchar_sys::xdp), past the kernel's socket, UDP, IP, neighbour and qdisc layers.
//!
//! The frames carry the addresses and ports of the stream's own connected UDP socket, so the
//! peer takes them for that socket's datagrams and its ordinary receiver counts loss, jitter
//! and reordering from the sequence numbers exactly as for the kernel's path. The kernel's
//! socket stays open (nothing is sent on it) so the port stays this host's. The destination
//! MAC is the neighbour table's entry for the route's next hop; where there is none yet, one
//! empty datagram through the socket makes the kernel resolve it (an empty datagram is no
//! data to any of netchar's formats).
//!
//! What the driver does with a frame is its business: a frame dropped by the driver after it
//! left the socket (a veth whose peer's backlog is full) counts as sent, and its receiver as
//! lost, as on a wire.

use super::integrity::UdpPayload;
use super::pacing::{pause, Schedule};
use super::sender_figures::{GapMeter, SenderIntervals};
use super::{Controls, StreamShared};
use netchar_model::{TestSpec, UdpSent, XdpSend};
use netchar_sys::netlink::Rtnetlink;
use netchar_sys::xdp::{checksum_add, checksum_fold, interface_index, interface_mac, XdpTx, FRAME_SIZE};
use netchar_sys::xdp_live::{StampAt, XdpLive};
use netchar_wire::datagram::DatagramFormat;
use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Frames queued per transmit call, at most: two of copy mode's 32-frame kicks.
const BATCH: usize = 64;
/// How long the sender waits for the neighbour table to learn the next hop's MAC.
const RESOLVE_WAIT: Duration = Duration::from_secs(1);
/// How long the sender waits at the end for the driver to hand back the last frames.
const DRAIN_WAIT: Duration = Duration::from_secs(1);
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const ETH_LEN: usize = 14;
const UDP_LEN: usize = 8;
const IPPROTO_UDP: u8 = 17;
const TTL: u8 = 64;

/// The addresses every frame of one stream carries.
struct Addresses {
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    local: SocketAddr,
    peer: SocketAddr,
}

/// Finds the MACs of the stream's frames: the interface's own, and the next hop's from the
/// neighbour table (resolved by one empty datagram when it is not there yet).
fn addresses(xdp: &XdpSend, socket: &UdpSocket) -> io::Result<Addresses> {
    let local = socket.local_addr()?;
    let peer = socket.peer_addr()?;
    let ifindex = interface_index(&xdp.interface).map_err(|e| io::Error::other(e.to_string()))?;
    let netlink_error = |e: netchar_sys::netlink::NetlinkError| io::Error::other(format!("--xdp: {e}"));
    let mut netlink = Rtnetlink::open().map_err(netlink_error)?;
    let (oif, hop) = netlink.next_hop(peer.ip()).map_err(netlink_error)?;
    if oif != ifindex {
        return Err(io::Error::other(format!(
            "--xdp {}: the route to {} leaves by another interface (index {oif}); give that interface",
            xdp.interface,
            peer.ip()
        )));
    }
    let src_mac = interface_mac(&xdp.interface)?;
    let mut dst_mac = netlink.neighbour_mac(ifindex, hop).map_err(netlink_error)?;
    if dst_mac.is_none() {
        let _ = socket.send(&[]);
        let until = Instant::now() + RESOLVE_WAIT;
        while dst_mac.is_none() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
            dst_mac = netlink.neighbour_mac(ifindex, hop).map_err(netlink_error)?;
        }
    }
    let dst_mac = dst_mac.ok_or_else(|| {
        io::Error::other(format!(
            "--xdp {}: no neighbour entry for the next hop {hop} (it did not answer); add one with `ip neigh replace {hop} lladdr MAC dev {}`",
            xdp.interface, xdp.interface
        ))
    })?;
    Ok(Addresses { src_mac, dst_mac, local, peer })
}

/// One datagram size's frame: its headers and payload as the first datagram of the stream
/// has them, copied into each UMEM frame and then stamped.
struct Template {
    frame: Vec<u8>,
    /// Where the UDP header starts, and with it the pseudo-header's sum (addresses, protocol,
    /// UDP length) for the checksum.
    udp_at: usize,
    pseudo_sum: u64,
    checksum: bool,
}

impl Template {
    fn new<F: DatagramFormat>(
        a: &Addresses,
        checksum: bool,
        format: &F,
        id: u32,
        size: usize,
        payload: &UdpPayload,
        generator: &netchar_wire::payload::DatagramPayload,
    ) -> io::Result<Self> {
        let ip_len = if a.peer.is_ipv4() { 20 } else { 40 };
        let udp_at = ETH_LEN + ip_len;
        let total = udp_at + UDP_LEN + size;
        if total > FRAME_SIZE as usize {
            return Err(io::Error::other(format!(
                "--xdp: a {size}-byte datagram makes a {total}-byte frame, more than an AF_XDP frame's {FRAME_SIZE}"
            )));
        }
        let mut f = vec![0u8; total];
        f[0..6].copy_from_slice(&a.dst_mac);
        f[6..12].copy_from_slice(&a.src_mac);
        let udp_len = (UDP_LEN + size) as u16;
        let mut pseudo_sum = 0u64;
        match (a.local.ip(), a.peer.ip()) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => {
                f[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
                let ip = &mut f[ETH_LEN..udp_at];
                ip[0] = 0x45;
                ip[2..4].copy_from_slice(&((20 + UDP_LEN + size) as u16).to_be_bytes());
                // Don't fragment, identification 0: as the kernel sends a DF datagram.
                ip[6] = 0x40;
                ip[8] = TTL;
                ip[9] = IPPROTO_UDP;
                ip[12..16].copy_from_slice(&src.octets());
                ip[16..20].copy_from_slice(&dst.octets());
                let sum = checksum_fold(checksum_add(0, ip));
                ip[10..12].copy_from_slice(&sum.to_be_bytes());
                pseudo_sum = checksum_add(pseudo_sum, &src.octets());
                pseudo_sum = checksum_add(pseudo_sum, &dst.octets());
            }
            (IpAddr::V6(src), IpAddr::V6(dst)) => {
                f[12..14].copy_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
                let ip = &mut f[ETH_LEN..udp_at];
                ip[0] = 0x60;
                ip[4..6].copy_from_slice(&udp_len.to_be_bytes());
                ip[6] = IPPROTO_UDP;
                ip[7] = TTL;
                ip[8..24].copy_from_slice(&src.octets());
                ip[24..40].copy_from_slice(&dst.octets());
                pseudo_sum = checksum_add(pseudo_sum, &src.octets());
                pseudo_sum = checksum_add(pseudo_sum, &dst.octets());
            }
            _ => return Err(io::Error::other("--xdp: the socket's two addresses are of different families")),
        }
        pseudo_sum += u64::from(IPPROTO_UDP) + u64::from(udp_len);
        let udp = &mut f[udp_at..udp_at + UDP_LEN];
        udp[0..2].copy_from_slice(&a.local.port().to_be_bytes());
        udp[2..4].copy_from_slice(&a.peer.port().to_be_bytes());
        udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
        let datagram = &mut f[udp_at + UDP_LEN..];
        generator.fill(payload.key, 0, datagram, format.header_len());
        format.emit(datagram, id, 0, 0);
        // IPv6 requires the checksum (RFC 8200); IPv4 makes it optional (RFC 768).
        Ok(Self { frame: f, udp_at, pseudo_sum, checksum: checksum || a.peer.is_ipv6() })
    }

    /// Writes datagram `seq`, sent at `stamp`, into `frame`; returns the frame's length.
    fn write<F: DatagramFormat>(
        &self,
        frame: &mut [u8],
        format: &F,
        seq: u64,
        stamp: u64,
        payload: &UdpPayload,
        generator: &netchar_wire::payload::DatagramPayload,
    ) -> usize {
        let len = self.frame.len();
        let frame = &mut frame[..len];
        frame.copy_from_slice(&self.frame);
        let udp_at = self.udp_at;
        let datagram = &mut frame[udp_at + UDP_LEN..];
        if !generator.is_constant() {
            generator.fill(payload.key, seq, datagram, format.header_len());
        }
        format.stamp(datagram, seq, stamp);
        if self.checksum {
            // The UDP header with its checksum field still zero, then the datagram.
            let sum = checksum_add(self.pseudo_sum, &frame[udp_at..]);
            let sum = match checksum_fold(sum) {
                0 => 0xffff, // a computed zero goes out as all ones (RFC 768)
                s => s,
            };
            frame[udp_at + 6..udp_at + 8].copy_from_slice(&sum.to_be_bytes());
        }
        len
    }
}

/// The UDP sender's loop over an AF_XDP socket (udp::send's, without GSO or refusals: the
/// socket takes every frame it has room for).
#[allow(clippy::too_many_arguments)]
pub(super) fn send<F: DatagramFormat>(
    format: &F,
    shared: &StreamShared,
    controls: &Controls,
    spec: &TestSpec,
    started: Instant,
    socket: &UdpSocket,
    payload: &UdpPayload,
    xdp: &XdpSend,
) -> io::Result<()> {
    let opts = spec.udp.clone().unwrap_or_default();
    let a = addresses(xdp, socket)?;
    // One AF_XDP socket per queue: with -P N, stream k sends on queue QUEUE + k - 1.
    let queue = xdp.queue + shared.id.saturating_sub(1);
    let mut tx = Transmitter::open(xdp, &a, queue)?;
    let mut schedule = Schedule::new(spec, started);
    if schedule.pps.is_some() {
        // Best effort: without it sleeps overshoot more and the sender spins more.
        let _ = netchar_sys::cpu::set_current_thread_timer_slack(1);
    }
    let max_size = schedule.default_size.max(spec.block_bytes as usize);
    let generator = payload.generator(max_size);
    let deadline = super::send_deadline(spec, started);
    let budget = spec.byte_budget(shared.id);
    let mut template: Option<(usize, Template)> = None;
    let (mut seq, mut bytes, mut sends): (u64, u64, u64) = (0, 0, 0);
    let mut gaps = GapMeter::default();
    let mut intervals = SenderIntervals::new(spec);
    let mut end = Instant::now();
    let mut behind: u64 = 0;
    let mut late_max = Duration::ZERO;
    let mut live_started: Option<Instant> = None;
    let outcome: io::Result<()> = loop {
        if controls.stop_senders.load(Ordering::Relaxed) {
            break Ok(());
        }
        let now = Instant::now();
        if let Some(d) = deadline.filter(|&d| now >= d) {
            if schedule.pps.is_some() {
                end = end.max(d);
                behind += schedule.slots_before(seq, d);
            }
            break Ok(());
        }
        if budget.is_some_and(|b| bytes >= b) {
            break Ok(());
        }
        let Some(size) = schedule.size_of(seq) else { break Ok(()) };
        let due = schedule.due(seq);
        if due > now {
            let wait = due - now;
            pause(deadline.map_or(wait, |d| wait.min(d.saturating_duration_since(now))));
            continue;
        }
        if schedule.pps.is_some() {
            late_max = late_max.max(now.saturating_duration_since(schedule.slot(seq)));
        }
        behind += schedule.restart_if_behind(seq, due, now);
        let horizon = match deadline {
            Some(d) => now.min(d - Duration::from_nanos(1)).max(now),
            None => now,
        };
        // The datagrams the byte budget (-n) has left, the last one whole.
        let budget_left = budget.map(|b| (b - bytes).div_ceil(size as u64));
        let mut n = schedule.due_count(seq, horizon, BATCH);
        if let Some(left) = budget_left {
            n = n.min(left as usize).max(1);
        }
        intervals.close_due(now.saturating_duration_since(started).as_secs_f64(), (bytes, seq, 0), Some(shared));
        if template.as_ref().is_none_or(|(s, _)| *s != size) {
            let t = Template::new(&a, !opts.no_checksum, format, shared.id, size, payload, &generator)?;
            template = Some((size, t));
        }
        let t = &template.as_ref().expect("laid out above").1;
        let stamp = now.saturating_duration_since(started).as_nanos() as u64;
        let first = seq;
        let queued = match &mut tx {
            Transmitter::Socket(tx) => {
                tx.transmit(n, |i, frame| t.write(frame, format, first + i as u64, stamp, payload, &generator))?.queued
            }
            Transmitter::Live(live) => {
                if live.is_none() {
                    *live = Some(live_sender(&xdp.interface, t, format, payload, &generator, started)?);
                    live_started = Some(now);
                }
                let n = live_batch(seq, live_started.map(|s| now - s), deadline.map(|d| d - now), budget_left);
                live.as_ref().expect("made above").send(n as u32)?;
                n
            }
        };
        if queued == 0 {
            // Every frame is in flight: the driver has not handed any back yet.
            std::thread::yield_now();
            continue;
        }
        seq += queued as u64;
        sends += 1;
        schedule.last = Some((seq, now));
        bytes += (queued * size) as u64;
        shared.bytes.store(bytes, Ordering::Release);
        shared.packets.store(seq, Ordering::Release);
        let sent_at = Instant::now();
        gaps.record(sent_at, queued);
        end = sent_at;
        if schedule.pps.is_some() {
            end = end.max(schedule.due(seq - 1));
        }
    };
    // Frames still queued when the driver stops taking them never left: the last sequence
    // numbers, taken back so the receiver does not count them lost.
    let never_left = tx.never_left(seq)?;
    if never_left > 0 {
        let size = schedule.default_size as u64;
        seq = seq.saturating_sub(never_left);
        bytes = bytes.saturating_sub(never_left * size);
        shared.bytes.store(bytes, Ordering::Release);
        shared.packets.store(seq, Ordering::Release);
    }
    if outcome.is_ok() {
        // Formats whose streams end with empty datagrams nobody answers: through the socket.
        for _ in 0..format.end_marks() {
            let _ = socket.send(&[]);
        }
    }
    let end_s = end.saturating_duration_since(started);
    shared.end_ns.store(end_s.as_nanos() as u64, Ordering::Release);
    let total = UdpSent {
        packets: seq,
        gap_mean_us: gaps.mean_us(seq),
        gap_p99_us: gaps.p99_us(),
        gso: false,
        sends,
        behind_schedule: schedule.pps.is_some().then_some(behind),
        late_max_ms: schedule.pps.is_some().then_some(late_max.as_secs_f64() * 1e3),
        ..UdpSent::default()
    };
    let intervals = intervals.finish(end_s.as_secs_f64(), (bytes, seq, 0), shared);
    shared.set_udp_final(Some(total), None, Some(intervals));
    outcome
}

/// Frames in the next live-frames call: about 250 ms at the rate so far (each call costs the
/// kernel a page pool's set-up and tear-down, which took up to 18 ms here), between 64 Ki and
/// 4 Mi, and no more than the time or the byte budget left allows.
fn live_batch(sent: u64, since_first: Option<Duration>, left: Option<Duration>, budget_frames: Option<u64>) -> usize {
    const LEAST: u64 = 1 << 16;
    const MOST: u64 = 1 << 22;
    let rate = match since_first.map(|d| d.as_secs_f64()) {
        Some(s) if s > 0.0 && sent > 0 => sent as f64 / s,
        _ => 0.0,
    };
    let mut n = if rate > 0.0 { ((rate * 0.25) as u64).clamp(LEAST, MOST) } else { LEAST };
    if let (Some(left), true) = (left, rate > 0.0) {
        n = n.min(((left.as_secs_f64() * rate) as u64).max(1));
    }
    if let Some(b) = budget_frames {
        n = n.min(b.max(1));
    }
    n as usize
}

/// How the frames leave: an AF_XDP socket, or the kernel's live-frames mode (made once the
/// frame's template is laid out).
enum Transmitter {
    Socket(XdpTx),
    Live(Option<XdpLive>),
}

impl Transmitter {
    fn open(xdp: &XdpSend, a: &Addresses, queue: u32) -> io::Result<Self> {
        if !xdp.live {
            let tx = XdpTx::open(&xdp.interface, queue, false).map_err(|e| io::Error::other(e.to_string()))?;
            return Ok(Self::Socket(tx));
        }
        if !a.peer.is_ipv4() {
            return Err(io::Error::other(
                "--xdp-live: IPv4 only (IPv6 requires the UDP checksum the program does not write)",
            ));
        }
        Ok(Self::Live(None))
    }

    /// Of `sent` frames counted out, those that never left: still queued in the socket when
    /// the driver stopped taking them, or not run by the live program (its own count is the
    /// truth).
    fn never_left(&mut self, sent: u64) -> io::Result<u64> {
        Ok(match self {
            Self::Socket(tx) => {
                let _ = tx.drain(DRAIN_WAIT);
                tx.in_flight() as u64 + tx.invalid_descriptors().unwrap_or(0)
            }
            Self::Live(Some(live)) => sent.saturating_sub(live.sent()?),
            Self::Live(None) => 0,
        })
    }
}

/// The live-frames sender of `t`'s frames: the template with the format's sequence number and
/// send time found by stamping it, send times counted from `started` on CLOCK_MONOTONIC (the
/// clock of `bpf_ktime_get_ns`).
fn live_sender<F: DatagramFormat>(
    interface: &str,
    t: &Template,
    format: &F,
    payload: &UdpPayload,
    generator: &netchar_wire::payload::DatagramPayload,
    started: Instant,
) -> io::Result<XdpLive> {
    if !generator.is_constant() {
        return Err(io::Error::other("--xdp-live: netchar's constant payload only"));
    }
    let mut frame = vec![0u8; FRAME_SIZE as usize];
    let (seq, sent) = (0x0102_0304_0506_0708u64, 0x1112_1314_1516_1718u64);
    let len = t.write(&mut frame, format, seq, sent, payload, generator);
    frame.truncate(len);
    let find = |v: u64| frame.windows(8).position(|w| w == v.to_be_bytes());
    let (Some(sequence), Some(sent_ns)) = (find(seq), find(sent)) else {
        return Err(io::Error::other("--xdp-live: this format carries no 64-bit sequence number and send time"));
    };
    let at = StampAt { sequence, sent_ns };
    let base_ns = netchar_sys::xdp_live::monotonic_ns().saturating_sub(started.elapsed().as_nanos() as u64);
    let ifindex = interface_index(interface).map_err(|e| io::Error::other(e.to_string()))?;
    XdpLive::new(ifindex, frame, at, base_ns).map_err(|e| io::Error::new(e.kind(), format!("--xdp-live: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use netchar_wire::datagram::NativeFormat;
    use netchar_wire::payload::DatagramPayload;

    /// A live-frames call is about a quarter second at the rate so far, 64 Ki before there is
    /// one, and never more than the time or the byte budget left.
    #[test]
    fn live_calls_are_a_quarter_second_and_stop_at_the_end() {
        let s = Duration::from_secs;
        assert_eq!(live_batch(0, None, Some(s(10)), None), 1 << 16);
        assert_eq!(live_batch(5_000_000, Some(s(1)), Some(s(10)), None), 1_250_000);
        assert_eq!(live_batch(5_000_000, Some(s(1)), Some(Duration::from_millis(10)), None), 50_000);
        assert_eq!(live_batch(50_000_000, Some(s(1)), None, None), 1 << 22);
        assert_eq!(live_batch(5_000_000, Some(s(1)), None, Some(1000)), 1000);
    }

    /// Frames are checked against the checksums computed from scratch the textbook way: the
    /// IPv4 header sums to 0xffff, and so do the pseudo-header and the UDP datagram.
    #[test]
    fn frames_carry_the_sockets_addresses_and_checksums_that_verify() {
        let a = Addresses {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            local: "10.1.2.3:40000".parse().unwrap(),
            peer: "10.1.2.4:5201".parse().unwrap(),
        };
        let payload = UdpPayload::default();
        let g = DatagramPayload::new(Default::default(), 64);
        let t = Template::new(&a, true, &NativeFormat, 7, 64, &payload, &g).unwrap();
        let mut frame = vec![0u8; FRAME_SIZE as usize];
        let len = t.write(&mut frame, &NativeFormat, 41, 123_456, &payload, &g);
        assert_eq!(len, 14 + 20 + 8 + 64);
        let f = &frame[..len];
        assert_eq!(&f[0..6], &a.dst_mac);
        assert_eq!(u16::from_be_bytes([f[12], f[13]]), ETHERTYPE_IPV4);
        assert_eq!(checksum_fold(checksum_add(0, &f[14..34])), 0, "IPv4 header checksum");
        let mut pseudo = checksum_add(0, &f[26..34]);
        pseudo += u64::from(IPPROTO_UDP) + (8 + 64);
        assert_eq!(checksum_fold(checksum_add(pseudo, &f[34..])), 0, "UDP checksum");
        assert_eq!(u16::from_be_bytes([f[34], f[35]]), 40000);
        assert_eq!(u16::from_be_bytes([f[36], f[37]]), 5201);
        match NativeFormat.classify(&f[42..]) {
            netchar_wire::datagram::Received::Data { stream_id, sequence, sent_ns } => {
                assert_eq!((stream_id, sequence, sent_ns), (7, 41, 123_456));
            }
            other => panic!("not a data datagram: {other:?}"),
        }
        // Without checksums (IPv4 only) the field is zero; IPv6 keeps it.
        let t = Template::new(&a, false, &NativeFormat, 7, 64, &payload, &g).unwrap();
        t.write(&mut frame, &NativeFormat, 41, 123_456, &payload, &g);
        assert_eq!(&frame[40..42], &[0, 0]);
        let a6 = Addresses { local: "[fd00::1]:40000".parse().unwrap(), peer: "[fd00::2]:5201".parse().unwrap(), ..a };
        let t = Template::new(&a6, false, &NativeFormat, 7, 64, &payload, &g).unwrap();
        let len = t.write(&mut frame, &NativeFormat, 41, 123_456, &payload, &g);
        let f = &frame[..len];
        assert_eq!(len, 14 + 40 + 8 + 64);
        let mut pseudo = checksum_add(0, &f[22..54]);
        pseudo += u64::from(IPPROTO_UDP) + (8 + 64);
        assert_eq!(checksum_fold(checksum_add(pseudo, &f[54..])), 0, "UDP checksum over IPv6");
        assert_ne!(&f[60..62], &[0, 0]);
    }
}
