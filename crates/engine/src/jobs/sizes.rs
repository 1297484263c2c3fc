//! `netchar suite sizes`: stackthru's block-size sweep, TCP then UDP, the client sending; per
//! block size an ordinary test, timed or a transfer of a fixed number of bytes (the last block
//! shorter where the size does not divide it: stackthru's X-Block). Which sizes run is
//! [`size_lists`]: a list given, or the default one with the full-frame payloads of the path.

use super::sink::{JobError, JobEvent, JobSink};
use crate::StopFlag;
use netchar_model::{Direction, EndCondition, Pattern, TestKind, TestResult, TestSpec, UdpRate};

/// The default block sizes besides the full-frame payloads: small writes, and large ones.
const SIZES: [u64; 7] = [64, 256, 512, 1024, 4096, 16384, 65507];
/// A standard Ethernet MTU, and a jumbo frame's.
const MTUS: [u32; 2] = [1500, 9000];

/// The block sizes the suite runs over each protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SizeLists {
    /// TCP's.
    pub tcp: Vec<u64>,
    /// UDP's: those whose datagrams fit the path's MTU.
    pub udp: Vec<u64>,
    /// UDP sizes left out: their datagrams are larger than the path's MTU (they would leave
    /// fragmented).
    pub udp_above_mtu: Vec<u64>,
}

/// `listed` (-b), or the default list with the payloads of full frames: TCP's (with
/// timestamps, 32 bytes of TCP header) and UDP's, for a 1500-byte MTU and, where the path
/// `mtu` takes one, a 9000-byte jumbo frame. UDP sizes whose datagram is larger than `mtu`
/// are left out. `ipv6`: 40 bytes of IP header rather than 20.
pub fn size_lists(listed: Option<&[u64]>, mtu: Option<u32>, ipv6: bool) -> SizeLists {
    let ip: u64 = if ipv6 { 40 } else { 20 };
    let sizes = match listed {
        Some(l) => l.to_vec(),
        None => {
            let mut v = SIZES.to_vec();
            for frame in MTUS.into_iter().filter(|&m| m == MTUS[0] || mtu.is_some_and(|p| p >= m)) {
                v.extend([u64::from(frame) - ip - 32, u64::from(frame) - ip - 8]);
            }
            v.sort_unstable();
            v
        }
    };
    let fits = |s: &u64| mtu.is_none_or(|m| s + ip + 8 <= u64::from(m));
    let (udp, udp_above_mtu) = sizes.iter().partition(|s| fits(s));
    SizeLists { tcp: sizes, udp, udp_above_mtu }
}

/// A UDP transfer that cannot be cut into datagrams: what is left after its whole blocks is
/// shorter than netchar's datagram header, so it cannot be sent as a datagram of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("-n leaves a last block of {rest} bytes, under netchar's {header}-byte datagram header")]
pub struct ShortLastBlock {
    /// The bytes left after the whole blocks.
    pub rest: u64,
    /// netchar's datagram header, the shortest datagram it sends.
    pub header: u64,
}

/// The datagrams of a UDP transfer of `total` bytes in blocks of `size`: the whole blocks,
/// then one datagram of what is left (stackthru's X-Block).
pub fn transfer_datagrams(total: u64, size: u64) -> Result<Pattern, ShortLastBlock> {
    let (blocks, rest) = (total / size, total % size);
    let header = netchar_model::spec::UDP_HEADER_BYTES;
    if rest > 0 && rest < header {
        return Err(ShortLastBlock { rest, header });
    }
    let sizes = [(blocks, size), (1, rest)].into_iter().filter(|&(n, s)| n > 0 && s > 0).collect();
    Ok(Pattern { sizes, ..Default::default() })
}

/// The test of one block size: `base` (TCP or UDP) sending up, unpaced, no interval reports;
/// the reason instead for a UDP transfer that cannot be cut into datagrams.
pub fn step_spec(base: &TestSpec, size: u64) -> Result<TestSpec, ShortLastBlock> {
    let mut spec = base.clone();
    spec.interval_seconds = 0.0;
    spec.block_bytes = size;
    spec.direction = Direction::Up;
    if let Some(u) = spec.udp.as_mut() {
        u.rate = UdpRate::Unlimited;
        u.pattern = match base.end {
            EndCondition::Bytes(n) => Some(transfer_datagrams(n, size)?),
            EndCondition::Seconds(_) => None,
        };
    }
    Ok(spec)
}

/// Runs the sweep: every TCP size over `tcp`, then every UDP size over `udp`, each as
/// [`JobEvent::TestStart`] and [`JobEvent::Result`]; a UDP size whose transfer cannot be cut
/// into datagrams as [`JobEvent::Skipped`].
pub fn run<E: From<JobError>>(
    tcp: &TestSpec,
    udp: &TestSpec,
    lists: &SizeLists,
    stop: &StopFlag,
    mut run_test: impl FnMut(&TestSpec) -> Result<TestResult, E>,
    sink: &mut impl JobSink<E>,
) -> Result<(), E> {
    for (name, base, sizes) in [("TCP", tcp, &lists.tcp), ("UDP", udp, &lists.udp)] {
        let kind = if name == "TCP" { TestKind::Tcp } else { TestKind::Udp };
        if base.kind != kind {
            return Err(JobError::Invalid(format!("suite sizes: the {name} sizes need a {name} test")).into());
        }
        for &size in sizes {
            if stop.is_raised() {
                return Err(JobError::Interrupted.into());
            }
            let spec = match step_spec(base, size) {
                Ok(spec) => spec,
                Err(why) => {
                    sink.event(JobEvent::Skipped(&format!("suite sizes: {name} {size} bytes skipped: {why}")))?;
                    continue;
                }
            };
            spec.validate().map_err(|e| JobError::Invalid(format!("suite sizes: {name} {size} bytes: {e}")))?;
            sink.event(JobEvent::Progress(&format!("{name}, {size} bytes")))?;
            sink.event(JobEvent::TestStart(&spec))?;
            let result = run_test(&spec)?;
            if result.summary.up.is_none() {
                return Err(JobError::NoFigures(format!("suite sizes: {name} {size} bytes: no up flow")).into());
            }
            sink.event(JobEvent::Result(&result))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::testing::{udp_result, Recorded};

    #[test]
    fn the_size_list_follows_the_paths_mtu() {
        // A standard Ethernet path: the full-frame payloads of 1500, no jumbo sizes, and the
        // UDP sizes whose datagrams would leave fragmented left out.
        let eth = size_lists(None, Some(1500), false);
        assert_eq!(eth.tcp, [64, 256, 512, 1024, 1448, 1472, 4096, 16384, 65507]);
        assert_eq!(eth.udp, [64, 256, 512, 1024, 1448, 1472]);
        assert_eq!(eth.udp_above_mtu, [4096, 16384, 65507]);
        // Jumbo frames: their payloads join the list; IPv6 has 20 bytes more of header.
        let jumbo = size_lists(None, Some(9000), true);
        assert_eq!(jumbo.tcp, [64, 256, 512, 1024, 1428, 1452, 4096, 8928, 8952, 16384, 65507]);
        assert_eq!(jumbo.udp_above_mtu, [16384, 65507]);
        // Loopback (65536) takes every size; an unknown MTU leaves the list as it is.
        assert!(size_lists(None, Some(65536), false).udp_above_mtu.is_empty());
        let unknown = size_lists(Some(&[100, 70000]), None, false);
        assert_eq!((unknown.tcp.len(), unknown.udp.len()), (2, 2));
    }

    #[test]
    fn a_udp_transfer_is_its_whole_blocks_and_the_rest() {
        let p = transfer_datagrams(256 << 20, 1448).unwrap();
        assert_eq!(p.sizes, [(185_383, 1448), (1, 872)]);
        assert_eq!(transfer_datagrams(4096, 1024).unwrap().sizes, [(4, 1024)]);
        assert_eq!(transfer_datagrams(100, 1024).unwrap().sizes, [(1, 100)]);
        let short = transfer_datagrams(1034, 1024).unwrap_err();
        assert_eq!(short, ShortLastBlock { rest: 10, header: netchar_model::spec::UDP_HEADER_BYTES });
        assert_eq!(short.to_string(), "-n leaves a last block of 10 bytes, under netchar's 24-byte datagram header");
    }

    #[test]
    fn each_size_runs_once_per_protocol_and_a_transfer_that_cannot_be_cut_is_skipped() {
        let mut tcp = TestSpec::tcp_default();
        let mut udp = TestSpec::udp_default();
        udp.direction = Direction::Down;
        tcp.end = EndCondition::Bytes(1034);
        udp.end = EndCondition::Bytes(1034);
        let lists = size_lists(Some(&[500, 1024]), None, false);
        let mut seen = Recorded::default();
        let echo = |spec: &TestSpec| {
            let mut r = udp_result(0, 1e6, 0.0, Direction::Up);
            r.test.spec = spec.clone();
            Ok::<_, JobError>(r)
        };
        run(&tcp, &udp, &lists, &StopFlag::new(), echo, &mut seen.sink()).unwrap();
        let ran: Vec<(TestKind, u64)> =
            seen.results.iter().map(|r| (r.test.spec.kind, r.test.spec.block_bytes)).collect();
        // 1034 bytes in 1024-byte datagrams leaves 10, under the datagram header: skipped.
        assert_eq!(ran, [(TestKind::Tcp, 500), (TestKind::Tcp, 1024), (TestKind::Udp, 500)]);
        assert_eq!(seen.skipped.len(), 1);
        assert!(seen.skipped[0].contains("UDP 1024 bytes skipped: -n leaves a last block of 10 bytes"));
        // The client sends, flat out, the transfer cut into whole blocks and the rest.
        let u = &seen.results[2].test.spec;
        assert_eq!(u.direction, Direction::Up);
        let o = u.udp.as_ref().unwrap();
        assert_eq!((o.rate, o.pattern.as_ref().unwrap().sizes.clone()), (UdpRate::Unlimited, vec![(2, 500), (1, 34)]));
    }
}
