//! What a test produced. One model, read by every reporter (text, JSON, later CSV and HTML).
//!
//! The raw material is one [`StreamRecord`] per stream and end: its byte counter, its active
//! time and its interval samples. [`TestResult::assemble`] derives everything else (per-flow
//! summaries, summed intervals) from those records, so every figure can be recomputed from the
//! counters that are kept next to it.
//!
//! A result holds parts whose types stand below it ([`crate::loss`], [`crate::method`],
//! [`crate::target`]); what derives a part from a whole result is here, in a submodule named
//! after the part, so that the parts never reach back up to the result.

use crate::{bits_per_second, Flow, TestSpec};
use serde::{Deserialize, Serialize};

mod loss;
mod method;
mod target;
pub mod under_load;

/// Which end of a stream a record describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The end that wrote the data.
    Sender,
    /// The end that read it.
    Receiver,
}

/// Which program measured a figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Endpoint {
    /// The netchar client (the master).
    Client,
    /// The netchar server (the responder).
    Server,
}

/// A sender's exact totals for one stream, sent to the receiving end when it stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamTotal {
    /// Stream id.
    pub id: u32,
    /// Bytes written.
    pub bytes: u64,
    /// Datagrams accepted by the kernel (UDP; 0 for TCP).
    pub packets: u64,
}

/// Round-trip latency percentiles, in microseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyUs {
    /// Fastest round trip.
    pub min: f64,
    /// Mean.
    pub mean: f64,
    /// Standard deviation.
    pub stddev: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Slowest round trip.
    pub max: f64,
}

/// Request/response figures of a stream, an interval, or the whole test.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RrFigures {
    /// Completed transactions (a response received in time).
    pub transactions: u64,
    /// transactions / seconds.
    pub transactions_per_second: f64,
    /// UDP: requests without a response within the timeout.
    pub lost: u64,
    /// UDP: responses that came after their request's timeout.
    pub late: u64,
    /// Round-trip latency of the completed transactions (HDR histogram, ≤ 0.1% value error).
    pub latency_us: LatencyUs,
    /// crr: time to establish each connection (connect() until it returned).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub connect_latency_us: Option<LatencyUs>,
    /// UDP rr: of each round trip, the time from the kernel's receive timestamp of the answer
    /// (SO_TIMESTAMPNS) to the requester having it: mostly the wakeup of a sleeping thread.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub receive_wakeup_us: Option<LatencyUs>,
    /// The whole test's round trips as points of their CDF, read from the HDR histogram (about
    /// 150, denser in the tail; the last is the maximum), so the CDF can be drawn from a saved
    /// result. Empty in intervals and per-stream records, and in results of an older netchar.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub latency_cdf: Vec<CdfPoint>,
    /// UDP rr against a peer whose answers carry its own stamps and counts (irtt): each round
    /// trip's one-way halves and which way its lost transactions were lost.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub one_way: Option<OneWayFigures>,
}

/// The one-way halves of UDP round trips, from the peer's receive and send stamps in each
/// answer, and the lost round trips split by the peer's count of the requests it received.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OneWayFigures {
    /// The clock both ends stamped with: `wall` (each host's realtime clock, the only one two
    /// hosts can share; between hosts their offset is in every delay, with opposite signs).
    pub clock: String,
    /// Request sent to the peer's receive stamp, µs.
    pub send_delay_us: LatencyUs,
    /// The peer's send stamp to the answer read, µs.
    pub receive_delay_us: LatencyUs,
    /// Requests the peer said it received (the highest count its answers carried).
    pub peer_received: u64,
    /// Lost round trips whose request never reached the peer.
    pub lost_up: u64,
    /// Lost round trips whose request the peer received, and whose answer never came.
    pub lost_down: u64,
    /// Lost round trips with no later answer to tell which way (the last ones of a test).
    pub lost_unknown: u64,
}

/// One point of a latency CDF: `quantile` of the round trips took at most `us`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CdfPoint {
    /// Fraction of round trips, 0 to 1.
    pub quantile: f64,
    /// Round-trip latency at that fraction, µs.
    pub us: f64,
}

/// How a `--zerocopy` TCP sender actually sent (the kernel may copy anyway).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ZeroCopyReport {
    /// The method in use at the end: `zerocopy` (MSG_ZEROCOPY), `splice` (vmsplice + splice of
    /// page references, after the kernel reported copying the MSG_ZEROCOPY sends), or `copy`.
    pub method: String,
    /// MSG_ZEROCOPY send calls.
    pub zerocopy_sends: u64,
    /// Of those, completions the kernel reported.
    pub completed: u64,
    /// Of those, completions flagged "copied anyway" (the rule on loopback and veth).
    pub copied: u64,
    /// splice calls after falling back.
    pub splice_sends: u64,
    /// Plain copying sends after falling back.
    pub copy_sends: u64,
    /// Every method the sender measured before choosing, in the order tried, with its rate;
    /// the chosen one is `method`. Empty when the test was too short to measure.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tried: Vec<MethodRate>,
}

/// One send method a `--zerocopy` sender measured, and how fast it went.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MethodRate {
    /// `zerocopy`, `splice` or `copy`.
    pub method: String,
    /// Bytes the socket took during the measurement.
    pub bytes: u64,
    /// Seconds the measurement took.
    pub seconds: f64,
    /// `bytes` over `seconds`, bits per second.
    pub bits_per_second: f64,
    /// MSG_ZEROCOPY only: of the sends confirmed during the measurement, those the kernel
    /// reported it copied anyway (SO_EE_CODE_ZEROCOPY_COPIED).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copied_share: Option<f64>,
}

/// What a UDP sender counted, over a stream or an interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UdpSent {
    /// Datagrams the kernel accepted. Refused sends are not counted here.
    pub packets: u64,
    /// Sends the kernel refused (ENOBUFS, EAGAIN, ...): counted, never counted as sent.
    pub send_errors: u64,
    /// `send_errors` by the errno the kernel gave (`ENOBUFS`, `EPERM` from a firewall,
    /// `ECONNREFUSED` after an ICMP port unreachable, ...): whole stream only (absent from
    /// intervals, and from a summary after a warm-up), left out when none was refused.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub send_errors_by_errno: std::collections::BTreeMap<String, u64>,
    /// Mean gap between consecutive datagrams, µs (whole stream only).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub gap_mean_us: Option<f64>,
    /// 99th percentile of that gap, µs (whole stream only).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub gap_p99_us: Option<f64>,
    /// Datagrams were sent with UDP GSO (one syscall for many datagrams).
    #[serde(default)]
    pub gso: bool,
    /// Kernel sends that carried them (whole stream only; 0 when not counted): packets / sends
    /// is the batch size, the burst a paced sender emits at once.
    #[serde(default)]
    pub sends: u64,
    /// Paced senders, whole stream: datagrams the schedule had due before the end that were
    /// never sent because the sender ran behind it (it did not get the CPU in time, and gave
    /// up slots more than 500 ms late or still owed at the deadline). 0 when it kept up: a rate
    /// short of the target by this much is the sender's, not the network's.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub behind_schedule: Option<u64>,
    /// Paced senders, whole stream: the longest any datagram went out after its slot in the
    /// schedule, ms. A stall (the sender did not get the CPU); what it owed then went out at
    /// up to twice the rate, a burst the path saw that the schedule did not ask for.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub late_max_ms: Option<f64>,
}

/// What a UDP receiver counted, over a stream or an interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UdpReceived {
    /// Distinct datagrams received (duplicates not counted).
    pub packets: u64,
    /// Datagrams sent but never received; exact once the sender's total is known.
    pub lost: u64,
    /// 100 · lost / (packets + lost).
    pub loss_percent: f64,
    /// Datagrams that arrived after a higher sequence number: reordered, not lost.
    pub out_of_order: u64,
    /// Datagrams received more than once (extra copies).
    pub duplicates: u64,
    /// Largest RFC 4737 reordering extent.
    pub reorder_extent_max: u64,
    /// RFC 3550 interarrival jitter at the end, ms.
    pub jitter_ms: f64,
    /// Median of the per-datagram transit-time variation |D|, ms.
    pub jitter_p50_ms: f64,
    /// 99th percentile of |D|, ms.
    pub jitter_p99_ms: f64,
    /// Datagrams the receiving socket's queue dropped (sk_drops, the counter SO_RXQ_OVFL reports,
    /// read with SO_MEMINFO): drops inside the receiving host, apart from network loss. Included
    /// in `lost`.
    pub kernel_drops: u64,
    /// The receiver used UDP GRO: the kernel delivered coalesced datagrams.
    #[serde(default)]
    pub coalesced: bool,
    /// Datagrams that were not this stream's (no netchar header, or another stream's id):
    /// ignored, counted so a stray sender on the port shows.
    #[serde(default)]
    pub foreign: u64,
}

impl UdpReceived {
    /// Sets `lost` and derives `loss_percent`.
    pub fn set_lost(&mut self, lost: u64) {
        self.lost = lost;
        let total = self.packets + lost;
        self.loss_percent = if total > 0 { 100.0 * lost as f64 / total as f64 } else { 0.0 };
    }
}

/// One stream's figures over one interval, measured at one end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamInterval {
    /// Interval start, seconds since that end started the test.
    pub start: f64,
    /// Interval end, seconds since that end started the test.
    pub end: f64,
    /// Bytes written (sender) or read (receiver) in the interval.
    pub bytes: u64,
    /// 8 · bytes / (end − start).
    pub bits_per_second: f64,
    /// True while the interval lies in the warm-up (`-O`).
    pub omitted: bool,
    /// TCP retransmits in the interval (Linux TCP sender only).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub retransmits: Option<u64>,
    /// Congestion window at the interval's end, in bytes (TCP sender).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cwnd_bytes: Option<u64>,
    /// Smoothed RTT at the interval's end, in microseconds (TCP sender).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rtt_us: Option<u32>,
    /// RTT variance at the interval's end, in microseconds (TCP sender).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rttvar_us: Option<u32>,
    /// UDP sender counts in the interval.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub udp_sent: Option<UdpSent>,
    /// UDP receiver counts in the interval.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub udp_received: Option<UdpReceived>,
    /// Request/response figures in the interval (the requesting end).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rr: Option<RrFigures>,
}

impl StreamInterval {
    /// An interval of `bytes` over [start, end] with no protocol-specific figures; `omitted`
    /// when it ends inside a warm-up of `omit_seconds`.
    pub fn bare(start: f64, end: f64, bytes: u64, omit_seconds: f64) -> Self {
        Self {
            start,
            end,
            bytes,
            bits_per_second: bits_per_second(bytes, end - start),
            omitted: omit_seconds > 0.0 && end <= omit_seconds + 1e-9,
            retransmits: None,
            cwnd_bytes: None,
            rtt_us: None,
            rttvar_us: None,
            udp_sent: None,
            udp_received: None,
            rr: None,
        }
    }
}

/// Everything one end measured of one stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamRecord {
    /// Stream id, from 1 (see [`TestSpec::stream_ids`]).
    pub id: u32,
    /// Which way the stream's data flows.
    pub flow: Flow,
    /// Which end of the stream this is.
    pub role: Role,
    /// Who measured it.
    pub measured_by: Endpoint,
    /// Every byte written or read, warm-up included.
    pub bytes: u64,
    /// Seconds from the start to the last byte written or read.
    pub seconds: f64,
    /// Bytes written or read during the warm-up (`-O`).
    pub omitted_bytes: u64,
    /// TCP retransmits over the whole stream (sender with TCP_INFO only).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub retransmits: Option<u64>,
    /// Retransmits during the warm-up.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub omitted_retransmits: Option<u64>,
    /// When the warm-up counts were taken, seconds since the start (at or just after `-O`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub omitted_seconds: Option<f64>,
    /// When the stream's first connection came in, seconds since the start, for a stream that
    /// began later than the test (an iperf2 `-r` dial-back); absent: at the start.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub started_seconds: Option<f64>,
    /// UDP sender counts over the whole stream.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub udp_sent: Option<UdpSent>,
    /// UDP receiver counts over the whole stream.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub udp_received: Option<UdpReceived>,
    /// Request/response figures over the whole stream (the requesting end).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rr: Option<RrFigures>,
    /// The CPU the stream's worker last ran on.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cpu: Option<usize>,
    /// `--zerocopy` TCP senders: how the data was actually sent.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub zerocopy: Option<ZeroCopyReport>,
    /// TCP receivers: how the payload left the socket, `read` (copied out to a buffer) or
    /// `msg_trunc` (`--skip-rx-copy`: discarded in the kernel, bytes still counted).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub receive_method: Option<String>,
    /// TCP receivers: the largest `SO_RCVLOWAT` the reader set to be woken once per batch of
    /// this many bytes instead of per segment (about 0.5 ms of data at the rate read, at most
    /// one read); absent when it was woken per segment (slow streams, an end running two or
    /// more TCP streams and as many as it may use CPUs, `--rx-wake-per-segment`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub receive_low_water: Option<u64>,
    /// `--df`: the path MTU the kernel held for the stream's destination after the test
    /// (IP_MTU, IPV6_MTU): the route's MTU, lowered by what path MTU discovery learned.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub path_mtu: Option<u32>,
    /// `--verify` receivers (and rr requesters, of the answers): what they found when they
    /// compared every byte read with the sender's generator.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub verify: Option<crate::Integrity>,
    /// Interval samples in time order.
    pub intervals: Vec<StreamInterval>,
}

impl StreamRecord {
    /// A record of `bytes` over `seconds` with no optional figures and no intervals: the
    /// start of a record the collector fills, or a peer's report that carries no more.
    pub fn bare(id: u32, flow: Flow, role: Role, measured_by: Endpoint, bytes: u64, seconds: f64) -> Self {
        Self {
            id,
            flow,
            role,
            measured_by,
            bytes,
            seconds,
            omitted_bytes: 0,
            retransmits: None,
            omitted_retransmits: None,
            omitted_seconds: None,
            started_seconds: None,
            udp_sent: None,
            udp_received: None,
            rr: None,
            cpu: None,
            zerocopy: None,
            receive_method: None,
            receive_low_water: None,
            path_mtu: None,
            verify: None,
            intervals: Vec::new(),
        }
    }
}

/// CPU used during a test by one end: its own process, and the whole machine.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuUsage {
    /// Process user time as a percentage of one CPU over the test's wall time.
    pub user_pct: f64,
    /// Process system time as a percentage of one CPU.
    pub system_pct: f64,
    /// user_pct + system_pct.
    pub total_pct: f64,
    /// total_pct divided by the number of CPUs: the share of the whole machine.
    pub total_pct_of_all_cpus: f64,
    /// Whole-machine busy share from /proc/stat (user, nice, system, irq, softirq, steal), % of all CPUs.
    pub host_busy_pct: f64,
    /// Whole-machine softirq share from /proc/stat, % of all CPUs (on loopback the receive path runs here).
    pub host_softirq_pct: f64,
    /// Process user seconds.
    pub user_seconds: f64,
    /// Process system seconds.
    pub system_seconds: f64,
    /// Wall seconds the figures cover.
    pub wall_seconds: f64,
    /// CPUs online.
    pub cpus: u32,
    /// Idle headroom left during the test, % of all CPUs, from idle-priority counters
    /// calibrated on an unloaded interval (`--idle`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub idle_pct: Option<f64>,
    /// The background load actually achieved (`--server-load`), % of one CPU per thread.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub background_load_pct: Option<f64>,
}

/// The machine one end ran on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostInfo {
    /// Host name.
    pub hostname: String,
    /// Kernel name and release, e.g. `Linux 6.18.0`.
    pub kernel: String,
    /// CPU model name from /proc/cpuinfo.
    pub cpu_model: String,
    /// CPUs online.
    pub cores: u32,
    /// Network interfaces other than loopback: name, driver, link speed, MTU.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<NicInfo>,
    /// Settings that shape results: congestion control, buffer limits, default qdisc, busy poll.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub sysctls: std::collections::BTreeMap<String, String>,
    /// The settings of this end that shape a test (kernel command line, the test's interface's
    /// driver, firmware, offloads and coalescing, CPU frequency governors), read after the
    /// test; absent where the end did not report them (peers, older netchar).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<crate::HostIdentity>,
}

/// One network interface, as far as /sys tells.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NicInfo {
    /// Interface name.
    pub name: String,
    /// Kernel driver (e.g. `virtio_net`, `veth`), if known.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub driver: Option<String>,
    /// Link speed in Mbit/s, if the driver reports one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub speed_mbps: Option<u64>,
    /// MTU in bytes.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub mtu: Option<u32>,
}

/// The test as it ran, for the result file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestInfo {
    /// The spec both ends ran.
    #[serde(flatten)]
    pub spec: TestSpec,
    /// The server's address as `host:port`.
    pub remote: String,
    /// `ipv4` or `ipv6`.
    pub family: String,
    /// Free text from `--title`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub title: Option<String>,
    /// Client CPU the data workers were pinned to (`-A`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub client_cpu: Option<usize>,
    /// How many tests the server was running at once, this one included.
    pub concurrent_tests: u32,
    /// The control protocol the test ran over: `netchar`, or a peer's (`iperf3`). With a
    /// peer's, the far end's figures are the peer's own report, by the peer's rules.
    #[serde(default = "netchar_protocol")]
    pub protocol: String,
    /// The far end's software and version as it told them (`netchar 0.1.0`), when it did.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub peer_software: Option<String>,
    /// How the far end takes part in the figures, by its protocol's rules (set from the
    /// protocol registry, so that no report needs to know a protocol by name).
    #[serde(skip_serializing_if = "FarEnd::is_reports", default)]
    pub far_end: FarEnd,
    /// What the protocol's figures mean beyond the numbers: sentences the reports print
    /// under a flow's figures, each when its condition holds.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub caveats: Vec<Caveat>,
}

impl TestInfo {
    /// A netchar test of `spec` towards `remote` (`host:port`), as the client knows it before
    /// anything is known of the far end: the native protocol, one test at a time, no title, no
    /// pinning, a far end that reports.
    pub fn new(spec: TestSpec, remote: impl Into<String>) -> Self {
        let remote = remote.into();
        let family = if remote.starts_with('[') { "ipv6" } else { "ipv4" };
        Self {
            spec,
            remote,
            family: family.into(),
            title: None,
            client_cpu: None,
            concurrent_tests: 1,
            protocol: crate::NATIVE_PROTOCOL.into(),
            peer_software: None,
            far_end: FarEnd::Reports,
            caveats: Vec::new(),
        }
    }
}

/// Where the client binds its control and data sockets (`-B ADDR[:PORT]`, `--bind-dev IF`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalBinding {
    /// The source address of every socket (`-B ADDR`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub address: Option<std::net::IpAddr>,
    /// The first data stream's source port (`-B ADDR:PORT`); stream n sends from PORT + n − 1.
    /// The control connection takes a port of the kernel's choosing.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub port: Option<u16>,
    /// The interface every socket sends and receives through (`--bind-dev`, SO_BINDTODEVICE).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub device: Option<String>,
}

/// The name of netchar's own protocol in `test.protocol`.
pub const NATIVE_PROTOCOL: &str = "netchar";

fn netchar_protocol() -> String {
    NATIVE_PROTOCOL.into()
}

/// How the far end of a test takes part in its figures.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FarEnd {
    /// It measures and reports its end of every stream (netchar, iperf3, nc_test).
    #[default]
    Reports,
    /// It reports nothing for these flows: only this end's figures exist for them (iperf2
    /// over TCP and for what it sends over UDP, lwiperf).
    SilentOn(Vec<Flow>),
    /// It returns what it receives and reports nothing: both figures are this end's (echo).
    Echoes,
    /// It takes what comes and reports nothing: only the sender's figures exist (discard).
    Sink,
    /// It sends until the client closes and reports nothing: only what arrived (chargen).
    Source,
}

impl FarEnd {
    /// The default: the far end reports.
    pub fn is_reports(&self) -> bool {
        *self == Self::Reports
    }

    /// True when nothing of `flow`'s far end is known.
    pub fn silent_on(&self, flow: Flow) -> bool {
        match self {
            Self::Reports => false,
            Self::SilentOn(flows) => flows.contains(&flow),
            Self::Echoes | Self::Sink | Self::Source => true,
        }
    }
}

/// A sentence about a protocol's figures, printed under a flow's figures (or the test's)
/// when its condition holds. Its text may name figures of that flow: `{sent}` (the sender's
/// total bytes, or datagrams for [`CaveatWhen::DatagramsShort`]), `{counted}` (the receiver's)
/// and `{missing}` (their difference).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Caveat {
    /// The flow it is about; none: the whole test.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub flow: Option<Flow>,
    /// When it applies.
    #[serde(default)]
    pub when: CaveatWhen,
    /// The sentence.
    pub text: String,
}

/// When a [`Caveat`] is printed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CaveatWhen {
    /// Always.
    #[default]
    Always,
    /// When the receiver counted fewer bytes than the sender wrote.
    ReceiverShort,
    /// When the receiver's received + lost datagrams are fewer than the sender sent.
    DatagramsShort,
}

impl Caveat {
    /// A caveat printed always.
    pub fn always(flow: Option<Flow>, text: impl Into<String>) -> Self {
        Self { flow, when: CaveatWhen::Always, text: text.into() }
    }

    /// The text with `{sent}`, `{counted}` and `{missing}` filled in.
    pub fn render(&self, sent: u64, counted: u64) -> String {
        self.text
            .replace("{sent}", &sent.to_string())
            .replace("{counted}", &counted.to_string())
            .replace("{missing}", &sent.saturating_sub(counted).to_string())
    }
}

/// One end's totals of a flow, after the warm-up.
///
/// UDP counts sit at the same level as `bytes` (`packets`, `lost`, ...). Reading them back goes
/// through [`SideTotalsWire`], because serde's flatten cannot tell two flattened structs that
/// share a field name (`packets`) apart.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(from = "SideTotalsWire")]
pub struct SideTotals {
    /// Bytes after the warm-up, all streams of the flow.
    pub bytes: u64,
    /// Seconds after the warm-up: the longest stream's active time less `-O`.
    pub seconds: f64,
    /// 8 · bytes / seconds.
    pub bits_per_second: f64,
    /// Every byte including the warm-up; sender and receiver totals must be equal for TCP.
    pub total_bytes: u64,
    /// TCP retransmits after the warm-up (sender with TCP_INFO only).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub retransmits: Option<u64>,
    /// UDP: datagrams after the warm-up (sent by the kernel's count, or received distinct)
    /// per second of `seconds`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub packets_per_second: Option<f64>,
    /// UDP sender counts (UDP senders only).
    #[serde(flatten, skip_serializing_if = "Option::is_none", default)]
    pub udp_sent: Option<UdpSent>,
    /// UDP receiver counts (UDP receivers only).
    #[serde(flatten, skip_serializing_if = "Option::is_none", default)]
    pub udp_received: Option<UdpReceived>,
}

/// The JSON shape of [`SideTotals`], every UDP field optional.
#[derive(Deserialize)]
struct SideTotalsWire {
    bytes: u64,
    seconds: f64,
    bits_per_second: f64,
    total_bytes: u64,
    #[serde(default)]
    retransmits: Option<u64>,
    #[serde(default)]
    packets_per_second: Option<f64>,
    #[serde(default)]
    packets: Option<u64>,
    #[serde(default)]
    send_errors: Option<u64>,
    #[serde(default)]
    send_errors_by_errno: std::collections::BTreeMap<String, u64>,
    #[serde(default)]
    gap_mean_us: Option<f64>,
    #[serde(default)]
    gap_p99_us: Option<f64>,
    #[serde(default)]
    gso: Option<bool>,
    #[serde(default)]
    sends: Option<u64>,
    #[serde(default)]
    behind_schedule: Option<u64>,
    #[serde(default)]
    late_max_ms: Option<f64>,
    #[serde(default)]
    lost: Option<u64>,
    #[serde(default)]
    loss_percent: Option<f64>,
    #[serde(default)]
    out_of_order: Option<u64>,
    #[serde(default)]
    duplicates: Option<u64>,
    #[serde(default)]
    reorder_extent_max: Option<u64>,
    #[serde(default)]
    jitter_ms: Option<f64>,
    #[serde(default)]
    jitter_p50_ms: Option<f64>,
    #[serde(default)]
    jitter_p99_ms: Option<f64>,
    #[serde(default)]
    kernel_drops: Option<u64>,
    #[serde(default)]
    coalesced: Option<bool>,
    #[serde(default)]
    foreign: Option<u64>,
}

impl From<SideTotalsWire> for SideTotals {
    fn from(w: SideTotalsWire) -> Self {
        let packets = w.packets.unwrap_or(0);
        let udp_sent = w.send_errors.map(|send_errors| UdpSent {
            packets,
            send_errors,
            send_errors_by_errno: w.send_errors_by_errno,
            gap_mean_us: w.gap_mean_us,
            gap_p99_us: w.gap_p99_us,
            gso: w.gso.unwrap_or(false),
            sends: w.sends.unwrap_or(0),
            behind_schedule: w.behind_schedule,
            late_max_ms: w.late_max_ms,
        });
        let udp_received = w.lost.map(|lost| UdpReceived {
            packets,
            lost,
            loss_percent: w.loss_percent.unwrap_or(0.0),
            out_of_order: w.out_of_order.unwrap_or(0),
            duplicates: w.duplicates.unwrap_or(0),
            reorder_extent_max: w.reorder_extent_max.unwrap_or(0),
            jitter_ms: w.jitter_ms.unwrap_or(0.0),
            jitter_p50_ms: w.jitter_p50_ms.unwrap_or(0.0),
            jitter_p99_ms: w.jitter_p99_ms.unwrap_or(0.0),
            kernel_drops: w.kernel_drops.unwrap_or(0),
            coalesced: w.coalesced.unwrap_or(false),
            foreign: w.foreign.unwrap_or(0),
        });
        Self {
            bytes: w.bytes,
            seconds: w.seconds,
            bits_per_second: w.bits_per_second,
            total_bytes: w.total_bytes,
            retransmits: w.retransmits,
            packets_per_second: w.packets_per_second,
            udp_sent,
            udp_received,
        }
    }
}

/// Both ends of one flow.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowSummary {
    /// What the sending end measured.
    pub sender: SideTotals,
    /// What the receiving end measured.
    pub receiver: SideTotals,
    /// True when the receiver got every byte the sender wrote (the TCP invariant).
    pub bytes_match: bool,
    /// UDP: true when, on every stream, datagrams sent = distinct datagrams received + lost.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub packets_accounted: Option<bool>,
    /// UDP: where the lost datagrams went, by the counters of both ends (crate::loss).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub loss_breakdown: Option<crate::LossBreakdown>,
    /// `--verify`: the receivers' comparison of every byte with the sender's generator, summed
    /// over the flow's streams.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub verify: Option<crate::Integrity>,
}

/// Per-flow summaries. A flow the test did not run is absent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Client to server.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub up: Option<FlowSummary>,
    /// Server to client.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub down: Option<FlowSummary>,
    /// Request/response tests: every transaction of every connection.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rr: Option<RrFigures>,
    /// Latency under load: the request/response figures before the load started.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rr_idle: Option<RrFigures>,
    /// Latency under load: the request/response figures while the load ran.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rr_loaded: Option<RrFigures>,
    /// Latency under load: what the load test achieved meanwhile (its per-flow summaries).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub load: Option<Box<Summary>>,
    /// Latency under load: every load flow and latency probe, on one time axis.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub under_load: Option<Box<crate::UnderLoad>>,
    /// Where the requesting and responding workers ran, as `client CPU x, server CPU y`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub placement: Option<String>,
    /// rr tests with `--verify`: the requests as the responders found them and the responses
    /// as the requesters did.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rr_verify: Option<crate::RrIntegrity>,
}

impl Summary {
    /// The summary of `flow`, if the test ran it.
    pub fn flow(&self, flow: Flow) -> Option<&FlowSummary> {
        match flow {
            Flow::Up => self.up.as_ref(),
            Flow::Down => self.down.as_ref(),
        }
    }
}

/// The sum over all streams of one flow and role in one interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalSum {
    /// Which way.
    pub flow: Flow,
    /// Which end measured it.
    pub role: Role,
    /// Bytes of all streams.
    pub bytes: u64,
    /// 8 · bytes / interval length.
    pub bits_per_second: f64,
    /// Retransmits of all streams (TCP sender only).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub retransmits: Option<u64>,
    /// UDP sender counts of all streams.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub udp_sent: Option<UdpSent>,
    /// UDP receiver counts of all streams.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub udp_received: Option<UdpReceived>,
}

/// One stream's sample inside an [`IntervalRecord`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalStream {
    /// Stream id.
    pub id: u32,
    /// Which way.
    pub flow: Flow,
    /// Which end.
    pub role: Role,
    /// The sample.
    #[serde(flatten)]
    pub sample: StreamInterval,
}

/// The k-th interval of the test, from both ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalRecord {
    /// Start, seconds since the test started.
    pub start: f64,
    /// End, seconds since the test started.
    pub end: f64,
    /// In the warm-up.
    pub omitted: bool,
    /// Every stream at both ends.
    pub streams: Vec<IntervalStream>,
    /// Sums per flow and role.
    pub sum: Vec<IntervalSum>,
}

/// CPU of both ends.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuReport {
    /// The client.
    pub local: Option<CpuUsage>,
    /// The server.
    pub remote: Option<CpuUsage>,
}

/// The whole result of one test: written as JSON (schema in docs/json.md), printed as text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestResult {
    /// [`crate::SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Version of the netchar that wrote the file.
    pub netchar_version: String,
    /// The test.
    pub test: TestInfo,
    /// Wall-clock start, RFC 3339 UTC.
    pub started_at: String,
    /// The client's machine.
    pub host: HostInfo,
    /// The server's machine, as it reported it.
    pub remote_host: Option<HostInfo>,
    /// Interval figures from both ends.
    pub intervals: Vec<IntervalRecord>,
    /// Per-flow totals.
    pub summary: Summary,
    /// Raw per-stream records from both ends: every summary figure derives from these.
    pub streams: Vec<StreamRecord>,
    /// CPU of both ends.
    pub cpu: CpuReport,
    /// Where the client bound its sockets (`-B`, `--bind-dev`); absent when it left that to
    /// the kernel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bind: Option<LocalBinding>,
    /// The far end's own figures over the test, when it is a target that reports them (the C
    /// responder on a board): its stack's counters, its idle loop, its cost per unit of work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<crate::TargetReport>,
    /// Both ends' interface, qdisc and stack counters over the test, as deltas; absent in
    /// results of an older netchar.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<crate::EvidenceReport>,
    /// The target's console over the test (`--console`, `--console-cmd`); absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub console: Option<crate::ConsoleLog>,
    /// The result's place in a sweep, suite or plan, with the `--step-cmd` runs around it;
    /// absent for a test run on its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<crate::StepRecord>,
    /// `--reset-cmd` before this iteration, and how long the server took to answer again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset: Option<crate::ResetRecord>,
    /// How the test actually sent and received (crate::method), read from the stream records
    /// when the result was assembled; absent in results of an older netchar, whose method
    /// [`TestResult::method`] derives the same way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<crate::Method>,
    /// Null, or the one-line reason the test failed; the figures measured until then stay.
    pub error: Option<String>,
}

/// The inputs of [`TestResult::assemble`] that are not stream records.
#[derive(Debug, Clone)]
pub struct ResultHeader {
    /// The test.
    pub test: TestInfo,
    /// Wall-clock start.
    pub started_at: String,
    /// The client's machine.
    pub host: HostInfo,
    /// The server's machine.
    pub remote_host: Option<HostInfo>,
}

impl ResultHeader {
    /// The header of `test`, with nothing known yet of when it started or of either host.
    pub fn new(test: TestInfo) -> Self {
        Self { test, started_at: String::new(), host: HostInfo::default(), remote_host: None }
    }
}

impl TestResult {
    /// Builds a result from the raw stream records of both ends.
    pub fn assemble(
        header: ResultHeader,
        mut streams: Vec<StreamRecord>,
        cpu: CpuReport,
        error: Option<String>,
    ) -> Self {
        streams.sort_by_key(|s| (s.id, s.role == Role::Receiver));
        let omit = header.test.spec.omit_seconds;
        // Request/response tests report transactions (summary.rr), not one-way flows.
        let flows = if header.test.spec.kind == crate::TestKind::Rr { &[] } else { header.test.spec.direction.flows() };
        let mut summary = Summary::default();
        for &flow in flows {
            let sender = side_totals(&streams, flow, Role::Sender, omit);
            let receiver = side_totals(&streams, flow, Role::Receiver, omit);
            let fs = FlowSummary {
                bytes_match: sender.total_bytes == receiver.total_bytes,
                packets_accounted: udp_accounted(&streams, flow),
                loss_breakdown: None,
                verify: verify_of(&streams, |s| s.flow == flow && s.role == Role::Receiver),
                sender,
                receiver,
            };
            match flow {
                Flow::Up => summary.up = Some(fs),
                Flow::Down => summary.down = Some(fs),
            }
        }
        if header.test.spec.kind == crate::TestKind::Rr {
            let requests = verify_of(&streams, |s| s.role == Role::Receiver);
            let responses = verify_of(&streams, |s| s.role == Role::Sender);
            summary.rr_verify =
                (requests.is_some() || responses.is_some()).then_some(crate::RrIntegrity { requests, responses });
        }
        let intervals = merge_intervals(&streams);
        let mut result = Self {
            schema_version: crate::SCHEMA_VERSION,
            netchar_version: env!("CARGO_PKG_VERSION").to_string(),
            test: header.test,
            started_at: header.started_at,
            host: header.host,
            remote_host: header.remote_host,
            intervals,
            summary,
            streams,
            cpu,
            bind: None,
            target: None,
            evidence: None,
            console: None,
            step: None,
            reset: None,
            method: None,
            error,
        };
        result.method = Some(crate::Method::of(&result));
        result
    }

    /// How the test sent and received: the recorded method, or, for a result of an older
    /// netchar, the one its spec and stream records give.
    pub fn method(&self) -> crate::Method {
        self.method.clone().unwrap_or_else(|| crate::Method::of(self))
    }
}

/// The sum of the `--verify` records of the streams `of` picks (None when none has one).
fn verify_of(streams: &[StreamRecord], of: impl Fn(&StreamRecord) -> bool) -> Option<crate::Integrity> {
    crate::Integrity::sum(streams.iter().filter(|s| of(s)).filter_map(|s| s.verify.as_ref().map(|v| (s.id, v))))
}

fn side_totals(streams: &[StreamRecord], flow: Flow, role: Role, omit: f64) -> SideTotals {
    let mine = streams.iter().filter(|s| s.flow == flow && s.role == role);
    let mut t = SideTotals::default();
    let mut longest: f64 = 0.0;
    let mut warm_up_end = omit;
    // A side whose streams all began late (a dial-back after the other direction) is timed
    // from its first stream's start.
    let mut first_start = f64::INFINITY;
    for s in mine {
        first_start = first_start.min(s.started_seconds.unwrap_or(0.0));
        if let Some(at) = s.omitted_seconds {
            warm_up_end = warm_up_end.max(at);
        }
        t.total_bytes += s.bytes;
        t.bytes += s.bytes - s.omitted_bytes.min(s.bytes);
        longest = longest.max(s.seconds);
        if let Some(r) = s.retransmits {
            let before = s.omitted_retransmits.unwrap_or(0);
            *t.retransmits.get_or_insert(0) += r.saturating_sub(before);
        }
    }
    if first_start.is_finite() {
        warm_up_end = warm_up_end.max(first_start);
    }
    t.seconds = (longest - warm_up_end).max(0.0);
    t.bits_per_second = bits_per_second(t.bytes, t.seconds);
    let mine: Vec<&StreamRecord> = streams.iter().filter(|s| s.flow == flow && s.role == role).collect();
    t.udp_sent =
        sum_sent(mine.iter().filter_map(|s| udp_part(s, omit, |x| x.udp_sent.clone(), |r| r.udp_sent.clone())));
    t.udp_received = sum_received(
        mine.iter().filter_map(|s| udp_part(s, omit, |x| x.udp_received.clone(), |r| r.udp_received.clone())),
    );
    let packets = t.udp_sent.as_ref().map(|u| u.packets).or(t.udp_received.as_ref().map(|u| u.packets));
    t.packets_per_second = packets.map(|p| if t.seconds > 0.0 { p as f64 / t.seconds } else { 0.0 });
    t
}

/// A stream's UDP counts after the warm-up: the sum of its non-omitted intervals when a
/// warm-up was asked for and intervals exist, else the whole-stream counts.
fn udp_part<T>(
    s: &StreamRecord,
    omit: f64,
    of_interval: impl Fn(&StreamInterval) -> Option<T>,
    of_record: impl Fn(&StreamRecord) -> Option<T>,
) -> Option<Vec<T>> {
    let whole = of_record(s)?;
    if omit > 0.0 && !s.intervals.is_empty() {
        Some(s.intervals.iter().filter(|i| !i.omitted).filter_map(&of_interval).collect())
    } else {
        Some(vec![whole])
    }
}

fn sum_sent(parts: impl Iterator<Item = Vec<UdpSent>>) -> Option<UdpSent> {
    let mut total: Option<UdpSent> = None;
    for p in parts.flatten() {
        let t = total.get_or_insert_with(UdpSent::default);
        t.packets += p.packets;
        t.send_errors += p.send_errors;
        for (errno, n) in &p.send_errors_by_errno {
            *t.send_errors_by_errno.entry(errno.clone()).or_default() += n;
        }
        t.gso |= p.gso;
        t.sends += p.sends;
        t.gap_mean_us = p.gap_mean_us.or(t.gap_mean_us);
        t.gap_p99_us = match (t.gap_p99_us, p.gap_p99_us) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        t.behind_schedule = match (t.behind_schedule, p.behind_schedule) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        t.late_max_ms = match (t.late_max_ms, p.late_max_ms) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }
    total
}

/// Sums receiver counts; jitter figures are the largest stream's (streams need not share a path).
pub fn sum_received(parts: impl Iterator<Item = Vec<UdpReceived>>) -> Option<UdpReceived> {
    let mut total: Option<UdpReceived> = None;
    let mut lost = 0;
    for p in parts.flatten() {
        let t = total.get_or_insert_with(UdpReceived::default);
        t.packets += p.packets;
        lost += p.lost;
        t.out_of_order += p.out_of_order;
        t.duplicates += p.duplicates;
        t.kernel_drops += p.kernel_drops;
        t.foreign += p.foreign;
        t.reorder_extent_max = t.reorder_extent_max.max(p.reorder_extent_max);
        t.jitter_ms = t.jitter_ms.max(p.jitter_ms);
        t.jitter_p50_ms = t.jitter_p50_ms.max(p.jitter_p50_ms);
        t.jitter_p99_ms = t.jitter_p99_ms.max(p.jitter_p99_ms);
        t.coalesced |= p.coalesced;
    }
    if let Some(t) = &mut total {
        t.set_lost(lost);
    }
    total
}

/// UDP only: whether every stream satisfies sent = received + lost.
fn udp_accounted(streams: &[StreamRecord], flow: Flow) -> Option<bool> {
    let senders: Vec<&StreamRecord> = streams.iter().filter(|s| s.flow == flow && s.role == Role::Sender).collect();
    if senders.iter().all(|s| s.udp_sent.is_none()) {
        return None;
    }
    Some(senders.iter().all(|tx| {
        let rx = streams.iter().find(|r| r.id == tx.id && r.role == Role::Receiver);
        match (tx.udp_sent.as_ref(), rx.and_then(|r| r.udp_received.as_ref())) {
            (Some(t), Some(r)) => t.packets == r.packets + r.lost,
            _ => false,
        }
    }))
}

fn merge_intervals(streams: &[StreamRecord]) -> Vec<IntervalRecord> {
    let count = streams.iter().map(|s| s.intervals.len()).max().unwrap_or(0);
    (0..count)
        .map(|k| {
            let members: Vec<IntervalStream> = streams
                .iter()
                .filter_map(|s| {
                    s.intervals.get(k).map(|iv| IntervalStream {
                        id: s.id,
                        flow: s.flow,
                        role: s.role,
                        sample: iv.clone(),
                    })
                })
                .collect();
            let start = members.iter().map(|m| m.sample.start).fold(f64::MAX, f64::min);
            let end = members.iter().map(|m| m.sample.end).fold(0.0, f64::max);
            IntervalRecord {
                start,
                end,
                omitted: members.iter().any(|m| m.sample.omitted),
                sum: TestResult::sum_streams(&members, end - start),
                streams: members,
            }
        })
        .collect()
}

impl TestResult {
    /// Sums per flow and role of one interval's stream samples, over `length` seconds.
    pub fn sum_streams(members: &[IntervalStream], length: f64) -> Vec<IntervalSum> {
        let mut sums: Vec<IntervalSum> = Vec::new();
        for m in members {
            let index = match sums.iter().position(|x| x.flow == m.flow && x.role == m.role) {
                Some(i) => i,
                None => {
                    sums.push(IntervalSum {
                        flow: m.flow,
                        role: m.role,
                        bytes: 0,
                        bits_per_second: 0.0,
                        retransmits: None,
                        udp_sent: None,
                        udp_received: None,
                    });
                    sums.len() - 1
                }
            };
            let sum = &mut sums[index];
            sum.bytes += m.sample.bytes;
            if let Some(r) = m.sample.retransmits {
                *sum.retransmits.get_or_insert(0) += r;
            }
            if let Some(u) = &m.sample.udp_sent {
                let s = sum.udp_sent.get_or_insert_with(UdpSent::default);
                s.packets += u.packets;
                s.send_errors += u.send_errors;
            }
            if let Some(u) = &m.sample.udp_received {
                let earlier: Vec<UdpReceived> = sum.udp_received.take().into_iter().collect();
                sum.udp_received = sum_received([earlier, vec![u.clone()]].into_iter());
            }
        }
        for sum in &mut sums {
            sum.bits_per_second = bits_per_second(sum.bytes, length);
        }
        sums
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Direction, TestSpec};

    fn record(id: u32, role: Role, bytes: u64, seconds: f64, omitted: u64) -> StreamRecord {
        StreamRecord {
            id,
            flow: Flow::Up,
            role,
            measured_by: if role == Role::Sender { Endpoint::Client } else { Endpoint::Server },
            bytes,
            seconds,
            omitted_bytes: omitted,
            retransmits: (role == Role::Sender).then_some(7),
            omitted_retransmits: (role == Role::Sender).then_some(2),
            omitted_seconds: None,
            started_seconds: None,
            udp_sent: None,
            udp_received: None,
            rr: None,
            cpu: None,
            zerocopy: None,
            receive_method: None,
            receive_low_water: None,
            path_mtu: None,
            verify: None,
            intervals: vec![StreamInterval {
                start: 0.0,
                end: 1.0,
                bytes: 1000,
                bits_per_second: 8000.0,
                omitted: false,
                retransmits: None,
                cwnd_bytes: None,
                rtt_us: None,
                rttvar_us: None,
                udp_sent: None,
                udp_received: None,
                rr: None,
            }],
        }
    }

    fn header(spec: TestSpec) -> ResultHeader {
        ResultHeader::new(TestInfo::new(spec, "127.0.0.1:5300"))
    }

    #[test]
    fn summary_is_derived_from_stream_records() {
        let mut spec = TestSpec::tcp_default();
        spec.streams = 2;
        spec.omit_seconds = 1.0;
        let streams = vec![
            record(1, Role::Sender, 10_000, 5.0, 1_000),
            record(2, Role::Sender, 20_000, 5.0, 2_000),
            record(1, Role::Receiver, 10_000, 5.5, 1_000),
            record(2, Role::Receiver, 20_000, 5.25, 2_000),
        ];
        let r = TestResult::assemble(header(spec), streams, CpuReport::default(), None);
        let up = r.summary.up.as_ref().unwrap();
        assert!(up.bytes_match);
        assert_eq!(up.sender.bytes, 27_000);
        assert_eq!(up.sender.total_bytes, 30_000);
        assert_eq!(up.sender.seconds, 4.0);
        assert_eq!(up.sender.bits_per_second, 27_000.0 * 8.0 / 4.0);
        assert_eq!(up.receiver.seconds, 4.5);
        assert_eq!(up.sender.retransmits, Some(10));
        assert_eq!(up.receiver.retransmits, None);
        assert!(r.summary.down.is_none());
        assert_eq!(r.intervals.len(), 1);
        assert_eq!(r.intervals[0].sum.len(), 2);
        assert_eq!(r.intervals[0].sum[0].bytes, 2000);
    }

    #[test]
    fn a_stream_that_starts_late_is_timed_from_its_start() {
        // iperf2 -r: 2 s up, then the server's dial-back from 2.1 s to 4.1 s.
        let spec = TestSpec::tcp_default();
        let mut late = record(2, Role::Receiver, 8_000, 4.1, 0);
        late.flow = Flow::Down;
        late.started_seconds = Some(2.1);
        let streams = vec![record(1, Role::Sender, 10_000, 2.0, 0), late];
        let mut h = header(spec);
        h.test.spec.direction = Direction::Bidir;
        let r = TestResult::assemble(h, streams, CpuReport::default(), None);
        assert_eq!(r.summary.up.as_ref().unwrap().sender.seconds, 2.0);
        let down = r.summary.down.as_ref().unwrap();
        assert!((down.receiver.seconds - 2.0).abs() < 1e-9, "{}", down.receiver.seconds);
        let json = serde_json::to_string(&r.streams[1]).unwrap();
        assert!(json.contains("\"started_seconds\":2.1"), "{json}");
        assert!(!serde_json::to_string(&r.streams[0]).unwrap().contains("started_seconds"));
    }

    #[test]
    fn udp_sides_carry_packets_per_second_over_their_own_time() {
        let mut spec = TestSpec::udp_default();
        spec.block_bytes = 1000;
        let mut tx = record(1, Role::Sender, 2_000_000, 2.0, 0);
        tx.udp_sent = Some(UdpSent { packets: 2000, ..UdpSent::default() });
        let mut rx = record(1, Role::Receiver, 1_990_000, 2.5, 0);
        rx.udp_received = Some(UdpReceived { packets: 1990, lost: 10, ..UdpReceived::default() });
        let r = TestResult::assemble(header(spec), vec![tx, rx], CpuReport::default(), None);
        let up = r.summary.up.as_ref().unwrap();
        assert_eq!(up.sender.packets_per_second, Some(1000.0));
        assert_eq!(up.receiver.packets_per_second, Some(796.0));
        let v = serde_json::to_value(&r.summary).unwrap();
        assert_eq!(v["up"]["receiver"]["packets_per_second"], 796.0, "{v}");
        assert_eq!(serde_json::from_value::<Summary>(v).unwrap(), r.summary);
        // TCP sides have none.
        let t = TestResult::assemble(
            header(TestSpec::tcp_default()),
            vec![record(1, Role::Sender, 10, 1.0, 0)],
            CpuReport::default(),
            None,
        );
        assert_eq!(t.summary.up.unwrap().sender.packets_per_second, None);
    }

    #[test]
    fn verify_summaries_sum_the_receivers_records() {
        let bad = |bytes, offset, at| crate::Integrity {
            checked_bytes: 1000,
            corrupted_bytes: bytes,
            first_bad_offset: offset,
            first_bad_seconds: at,
            ..crate::Integrity::default()
        };
        let mut spec = TestSpec::tcp_default();
        spec.streams = 2;
        spec.verify = true;
        let mut streams = vec![record(1, Role::Sender, 1000, 1.0, 0), record(2, Role::Sender, 1000, 1.0, 0)];
        for (id, v) in [(1, bad(0, None, None)), (2, bad(3, Some(512), Some(0.5)))] {
            let mut rx = record(id, Role::Receiver, 1000, 1.0, 0);
            rx.verify = Some(v);
            streams.push(rx);
        }
        let r = TestResult::assemble(header(spec), streams, CpuReport::default(), None);
        let v = r.summary.up.as_ref().unwrap().verify.clone().unwrap();
        assert_eq!(
            (v.checked_bytes, v.corrupted_bytes, v.first_bad_stream, v.first_bad_offset),
            (2000, 3, Some(2), Some(512))
        );
        assert_eq!(r.summary.rr_verify, None);
        // Without --verify there is nothing to sum, and nothing in the JSON.
        let plain = TestResult::assemble(
            header(TestSpec::tcp_default()),
            vec![record(1, Role::Receiver, 10, 1.0, 0)],
            CpuReport::default(),
            None,
        );
        assert!(!serde_json::to_string(&plain).unwrap().contains("verify"));
        // rr: the responders' records are the requests, the requesters' the answers.
        let mut rr = vec![record(1, Role::Sender, 10, 1.0, 0), record(1, Role::Receiver, 10, 1.0, 0)];
        rr[0].verify = Some(bad(1, Some(7), Some(0.1)));
        rr[1].verify = Some(bad(0, None, None));
        let r = TestResult::assemble(header(TestSpec::rr_default()), rr, CpuReport::default(), None);
        let v = r.summary.rr_verify.unwrap();
        assert_eq!((v.requests.unwrap().corrupted_bytes, v.responses.unwrap().corrupted_bytes), (0, 1));
    }

    #[test]
    fn a_short_receiver_is_flagged() {
        let mut spec = TestSpec::tcp_default();
        spec.direction = Direction::Up;
        let streams = vec![record(1, Role::Sender, 10_000, 5.0, 0), record(1, Role::Receiver, 9_999, 5.0, 0)];
        let r = TestResult::assemble(header(spec), streams, CpuReport::default(), None);
        assert!(!r.summary.up.unwrap().bytes_match);
    }

    #[test]
    fn json_never_contains_nan() {
        let r = TestResult::assemble(header(TestSpec::tcp_default()), vec![], CpuReport::default(), Some("x".into()));
        let text = serde_json::to_string(&r).unwrap();
        assert!(!text.contains("NaN"));
        assert!(text.contains("\"schema_version\":1"));
    }
}

#[cfg(test)]
mod udp_json_tests {
    use super::*;

    #[test]
    fn udp_fields_round_trip_through_json() {
        let iv = StreamInterval {
            start: 0.0,
            end: 1.0,
            bytes: 10,
            bits_per_second: 80.0,
            omitted: false,
            retransmits: None,
            cwnd_bytes: None,
            rtt_us: None,
            rttvar_us: None,
            udp_sent: None,
            udp_received: Some(UdpReceived { packets: 3, ..UdpReceived::default() }),
            rr: None,
        };
        let v = serde_json::to_value(&iv).unwrap();
        assert_eq!(v["udp_received"]["packets"], 3, "{v}");
        let back: StreamInterval = serde_json::from_value(v).unwrap();
        assert_eq!(back.udp_received.unwrap().packets, 3);
        // Summary sides carry the fields at their own level, and read back.
        let side = SideTotals {
            udp_received: Some(UdpReceived { packets: 5, ..UdpReceived::default() }),
            ..SideTotals::default()
        };
        let v = serde_json::to_value(&side).unwrap();
        assert_eq!(v["packets"], 5, "{v}");
        let back: SideTotals = serde_json::from_value(v).unwrap();
        assert_eq!(back.udp_received.map(|r| r.packets), Some(5));
        assert!(back.udp_sent.is_none());
    }
}
