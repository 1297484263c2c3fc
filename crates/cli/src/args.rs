//! The command line, flag for flag (clap derive). Values that carry units stay strings here
//! and are parsed in `plan.rs`, so every bad value gets a message naming its flag.

use clap::{Args, Parser, Subcommand};
use netchar_engine::protocols::{ProtoChoice, LISTENERS, PROTOCOLS};

/// netchar: network performance characterization. With no command, runs a quick
/// characterization against an in-process server on loopback.
#[derive(Debug, Parser)]
#[command(name = "netchar", version, about, long_about = None, args_conflicts_with_subcommands = true)]
pub(crate) struct Cli {
    /// What to run; none runs the quick characterization on loopback.
    #[command(subcommand)]
    pub(crate) command: Option<Command>,
    /// Quick characterization only: print the results as JSON instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
    /// Quick characterization only: seconds per test.
    #[arg(short = 't', long = "time", default_value = "2", allow_negative_numbers = true)]
    pub(crate) time: String,
    /// Quick characterization only: its plots and HTML report.
    #[command(flatten)]
    pub(crate) finish: FinishArgs,
}

/// The commands.
// Parsed once per process; boxing the large variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run the responder: answers netchar clients on TCP port 5300 by default.
    Server(ServerArgs),
    /// TCP throughput test against a netchar server.
    Tcp(TcpArgs),
    /// UDP test: paced or unpaced streams, packets per second, loss, jitter, reordering.
    Udp(UdpArgs),
    /// Request/response: transactions per second and round-trip latency percentiles.
    Rr(RrArgs),
    /// A new TCP connection per transaction: connections/s, connect and transaction latency.
    Crr(RrArgs),
    /// Echo buffers and receive them back, the eCos nc_test way: --pattern 640x1024,10@10ms.
    Echo(EchoArgs),
    /// Compare sets of results or plain number files, as ministat does (Student's t).
    Compare(CompareArgs),
    /// Built-in characterizations, each its own command: ecos, netio, sizes, bwsweep.
    #[command(subcommand)]
    Suite(SuiteCommand),
    /// Run a test plan (TOML, docs/plans.md) against HOST.
    Run(RunArgs),
    /// Tables, CSV or SVG plots of saved results: `--json` files, `--repeat` arrays, `--save` directories.
    Report(ReportArgs),
    /// Print a shell completion script: bash, zsh, fish, elvish or powershell.
    Completions(CompletionsArgs),
    /// Print the man page (roff): netchar(1), or with COMMAND that command's page.
    Man(ManArgs),
    /// perfSONAR pScheduler tool methods (JSON on stdin and stdout), for pscheduler-tool-netchar.
    Pscheduler(crate::pscheduler::PschedulerArgs),
    /// Prometheus exporter: /probe?target=HOST:PORT&proto=tcp|udp|rr runs a test, /metrics.
    Exporter(crate::exporter::ExporterArgs),
    /// Every ordered pair of a set of nodes, round by round: render Kubernetes manifests, run a node's tests, build the matrix.
    Mesh(crate::mesh::MeshArgs),
    /// Count and drop a UDP port's datagrams at an interface's driver (XDP): a sink's ground truth.
    XdpCount(crate::xdp_count::XdpCountArgs),
    /// The results store: `netchar store import DIR|FILE...` loads saved results into it.
    #[command(subcommand)]
    Store(crate::store::StoreCommand),
    /// A figure of the stored runs across builds or time, series by series, with its change points.
    History(crate::history::HistoryArgs),
}

/// `netchar server`. Every setting may also come from `--config FILE` (TOML, the same names
/// as the flags: `max-concurrent = 4`); a flag given on the command line wins.
#[derive(Debug, Args)]
pub(crate) struct ServerArgs {
    /// Address to listen on; `::` (the default) takes IPv4 and IPv6.
    #[arg(short = 'B', long)]
    pub(crate) bind: Option<String>,
    /// TCP port for control and data connections (default 5300); 0 picks a free one (printed at start).
    #[arg(short = 'p', long)]
    pub(crate) port: Option<u16>,
    /// Exit after the first test.
    #[arg(short = '1', long)]
    pub(crate) one_off: bool,
    /// Tests admitted at once (default 1); others get a "busy" answer.
    #[arg(long)]
    pub(crate) max_concurrent: Option<u32>,
    /// Longest test in seconds; longer -t is refused, -n tests are stopped there.
    #[arg(long, value_name = "SECS")]
    pub(crate) max_duration: Option<String>,
    /// Total rate of all running tests (e.g. 500M); tests without -b are refused.
    #[arg(long, value_name = "RATE")]
    pub(crate) max_rate: Option<String>,
    /// Data streams per test, both directions together (default 256).
    #[arg(long, value_name = "N")]
    pub(crate) max_streams: Option<u32>,
    /// Seconds a connection has to present its hello and test request (default 10).
    #[arg(long, value_name = "SECS")]
    pub(crate) idle_timeout: Option<String>,
    /// Test starts per client address per minute (default: no limit).
    #[arg(long, value_name = "N")]
    pub(crate) max_starts_per_minute: Option<u32>,
    /// Connections open at once from one address (default 128).
    #[arg(long, value_name = "N")]
    pub(crate) max_per_source: Option<usize>,
    /// Connections served at once in total (default 512).
    #[arg(long, value_name = "N")]
    pub(crate) max_connections: Option<usize>,
    /// Also take data streams from this network (CIDR, repeatable); by default only from the
    /// control connection's own address.
    #[arg(long, value_name = "CIDR")]
    pub(crate) allow_data_from: Vec<String>,
    /// Networks the peer protocols may send unprompted UDP to (iperf2 `-u -R`, nc_test
    /// UDP_SEND), CIDR, repeatable or comma-separated; `none` for none. Replaces the default,
    /// loopback (127.0.0.0/8, ::1). Elsewhere an answer is never more bytes than its address
    /// sent, within a rate budget.
    #[arg(long, value_name = "CIDR", value_delimiter = ',')]
    pub(crate) allow_peers: Vec<String>,
    /// Run tests only for clients holding a key in FILE (lines USER:SECRET).
    #[arg(long, value_name = "FILE")]
    pub(crate) psk_file: Option<std::path::PathBuf>,
    /// Read settings from a TOML file (flags given here win).
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<std::path::PathBuf>,
    /// Log each test as one JSON line on stderr instead of text.
    #[arg(long)]
    pub(crate) json: bool,
    /// The peer-protocol servers (netchar_engine::protocols::LISTENERS): `--iperf3`,
    /// `--iperf3-port`, ...
    #[command(flatten)]
    pub(crate) peers: PeerServerArgs,
}

/// Plots and the HTML report of a test, suite or plan, written when it finishes.
#[derive(Debug, Args, Clone, Default)]
pub(crate) struct FinishArgs {
    /// Write the plots (SVG and PNG, as `netchar report --format svg|png`) into DIR when the
    /// test, suite or plan finishes.
    #[arg(long = "plot", value_name = "DIR")]
    pub(crate) plot: Option<std::path::PathBuf>,
    /// Write the self-contained HTML report (as `netchar report --format html`) to FILE when
    /// the test, suite or plan finishes.
    #[arg(long = "report", value_name = "FILE")]
    pub(crate) report: Option<std::path::PathBuf>,
    /// `--store`, `--label`, `--expect-no-regression`: the runs kept in the results store.
    #[command(flatten)]
    pub(crate) store: crate::store::StoreArgs,
}

/// Flags every client test shares.
#[derive(Debug, Args)]
pub(crate) struct CommonArgs {
    #[command(flatten)]
    pub(crate) finish: FinishArgs,
    /// Server as HOST, HOST:PORT, [IPV6]:PORT or a bare IPv6 address.
    pub(crate) host: String,
    /// Server port (overrides a port in HOST).
    #[arg(short = 'p', long)]
    pub(crate) port: Option<u16>,
    /// Seconds to send (default 10).
    #[arg(short = 't', long = "time", allow_negative_numbers = true, conflicts_with = "bytes")]
    pub(crate) time: Option<String>,
    /// Send exactly this many bytes per direction, split across streams (e.g. 100M, 1Gi).
    #[arg(short = 'n', long = "bytes", allow_negative_numbers = true)]
    pub(crate) bytes: Option<String>,
    /// Parallel streams per direction.
    #[arg(short = 'P', long = "parallel", default_value = "1", allow_negative_numbers = true)]
    pub(crate) parallel: String,
    /// Reverse: the server sends, the client receives.
    #[arg(short = 'R', long, conflicts_with = "bidir")]
    pub(crate) reverse: bool,
    /// Both directions at once.
    #[arg(long)]
    pub(crate) bidir: bool,
    /// iperf2's dual test (`--proto iperf2`, TCP): both directions at once, the server
    /// connecting back to a port this client opens for its direction.
    #[arg(short = 'd', long = "dualtest", conflicts_with_all = ["reverse", "bidir", "tradeoff"])]
    pub(crate) dualtest: bool,
    /// iperf2's tradeoff test (`--proto iperf2`, TCP): this client's direction, then the
    /// server connecting back to a port this client opens and sending for the same time.
    #[arg(short = 'r', long = "tradeoff", conflicts_with_all = ["reverse", "bidir"])]
    pub(crate) tradeoff: bool,
    /// Pin the client's workers to CPU, and the server's to SERVERCPU: -A CPU[,SERVERCPU].
    #[arg(short = 'A', long = "affinity")]
    pub(crate) affinity: Option<String>,
    /// Seconds between interval reports; 0 = none.
    #[arg(short = 'i', long = "interval", default_value = "1", allow_negative_numbers = true)]
    pub(crate) interval: String,
    /// Seconds of warm-up excluded from the summary.
    #[arg(short = 'O', long = "omit", default_value = "0", allow_negative_numbers = true)]
    pub(crate) omit: String,
    /// IPv4 only.
    #[arg(short = '4', long = "ipv4", conflicts_with = "ipv6")]
    pub(crate) ipv4: bool,
    /// IPv6 only.
    #[arg(short = '6', long = "ipv6")]
    pub(crate) ipv6: bool,
    /// Print the result as JSON on stdout instead of text.
    #[arg(long)]
    pub(crate) json: bool,
    /// Also write the JSON result to FILE (text still goes to stdout).
    #[arg(long = "json-out", value_name = "FILE")]
    pub(crate) json_out: Option<std::path::PathBuf>,
    /// A title recorded in the result.
    #[arg(long)]
    pub(crate) title: Option<String>,
    /// Rate unit: k m g (bit/s) or K M G (bytes/s, 2^10 based); default picks a prefix.
    #[arg(short = 'f', long = "format")]
    pub(crate) format: Option<String>,
    /// Seconds to wait for each TCP connection.
    #[arg(long = "connect-timeout", default_value = "5")]
    pub(crate) connect_timeout: String,
    /// Seconds to keep retrying while the server is busy.
    #[arg(long = "busy-wait", default_value = "0")]
    pub(crate) busy_wait: String,
    /// Run the test N times (after --warmup runs) and report mean ± confidence interval.
    #[arg(long, default_value = "1", allow_negative_numbers = true)]
    pub(crate) repeat: String,
    /// Before each run (warm-up and counted): run this shell command (`sh -c`; a target's
    /// reboot), then wait until the server accepts a connection again; both are recorded in
    /// the run's result (`reset`). A failing command is recorded, and the run still goes.
    #[arg(long = "reset-cmd", value_name = "CMD")]
    pub(crate) reset_cmd: Option<String>,
    /// With --reset-cmd: seconds the command and the wait for the server together may take.
    #[arg(long = "reset-timeout", value_name = "SECS", default_value = "120", requires = "reset_cmd")]
    pub(crate) reset_timeout: String,
    /// Runs before the counted ones, not kept in the statistics.
    #[arg(long, default_value = "0", allow_negative_numbers = true)]
    pub(crate) warmup: String,
    /// Write every counted run as a JSON file into DIR (atomically), for `netchar compare`.
    #[arg(long, value_name = "DIR")]
    pub(crate) save: Option<std::path::PathBuf>,
    /// A CI gate, e.g. 'up.receiver.bits_per_second >= 400M' or 'rr.latency_us.p99 <= 200'
    /// (repeatable; with --repeat, the mean is judged). A miss exits 1.
    #[arg(long, value_name = "EXPR")]
    pub(crate) expect: Vec<String>,
    /// A previous result (file of one run or of repeated runs) to compare the headline figure with.
    #[arg(long, value_name = "FILE")]
    pub(crate) baseline: Option<std::path::PathBuf>,
    /// With --baseline: the fields of the method (docs/statistics.md) in which this run may
    /// differ from the baseline's; any other difference is refused.
    #[arg(long = "accept-difference", value_name = "FIELD[,FIELD]", requires = "baseline")]
    pub(crate) accept_difference: Vec<String>,
    /// Ask the server to run a calibrated background CPU load, % of one CPU per thread.
    #[arg(long = "server-load", value_name = "PCT")]
    pub(crate) server_load: Option<f64>,
    /// Threads of that background load.
    #[arg(long = "server-load-threads", default_value_t = 1)]
    pub(crate) server_load_threads: u32,
    /// Measure idle headroom on both ends (idle-priority counters calibrated before the test).
    #[arg(long)]
    pub(crate) idle: bool,
    /// The far end's nanoseconds per instruction, for a target that reports its own figures
    /// (the C responder on a board; 32 under QEMU's `-icount shift=5`): its busy time per
    /// byte, datagram or transaction is then also given in instructions.
    #[arg(long = "target-ns-per-instruction", value_name = "NS")]
    pub(crate) target_ns_per_instruction: Option<f64>,
    /// The target's console, read around each test.
    #[command(flatten)]
    pub(crate) console_args: ConsoleArgs,
    /// With --baseline: fail (exit 1) if the headline figure is this much worse, e.g. 5%.
    #[arg(long = "max-regression", value_name = "PCT")]
    pub(crate) max_regression: Option<String>,
    /// Authenticate with a pre-shared key from FILE (lines USER:SECRET; the first is used
    /// unless --psk-user names another).
    #[arg(long = "psk-file", value_name = "FILE")]
    pub(crate) psk_file: Option<std::path::PathBuf>,
    /// The user of --psk-file to authenticate as.
    #[arg(long = "psk-user", value_name = "USER", requires = "psk_file")]
    pub(crate) psk_user: Option<String>,
    /// Read the counters of this nftables chain of the client's host ('FAMILY TABLE CHAIN',
    /// or 'TABLE CHAIN' in family inet) before and after each run, into the result's evidence:
    /// ground truth beside the test's own counts (repeatable).
    #[arg(long = "nft-counter", value_name = "CHAIN")]
    pub(crate) nft_counter: Vec<String>,
    /// The server's protocol (-p defaults to its port): auto (netchar's own, or the peer
    /// protocol the server answers in), or one of the protocols below.
    #[arg(long = "proto", value_name = "PROTO", default_value = "auto", value_parser = ProtoParser)]
    pub(crate) proto: ProtoChoice,
    /// With --proto nc-test: the slave's data port (default 8770); its control port is -p
    /// (default 7777).
    #[arg(long = "nc-test-data-port", value_name = "PORT")]
    pub(crate) nc_test_data_port: Option<u16>,
    /// How the test's packets are marked and routed: TOS, flow label, don't-fragment, binding.
    #[command(flatten)]
    pub(crate) traffic: TrafficArgs,
    /// What the senders write and whether the receivers check it.
    #[command(flatten)]
    pub(crate) payload: PayloadArgs,
}

/// The IP options of a test's data sockets (set on both ends, so both directions carry them)
/// and where the client's sockets are bound.
#[derive(Debug, Args, Clone, Default)]
pub(crate) struct TrafficArgs {
    /// TOS byte (IPv4) or traffic class (IPv6) of every data packet, both ways: 0-255, e.g.
    /// 0xb8 (the server marks its packets too).
    #[arg(long, value_name = "VALUE", conflicts_with = "dscp")]
    pub(crate) tos: Option<String>,
    /// DSCP of every data packet, both ways: ef, af11-af43, cs0-cs7, va, le, or 0-63 (the TOS
    /// byte is DSCP << 2).
    #[arg(long, value_name = "NAME|NUMBER")]
    pub(crate) dscp: Option<String>,
    /// IPv6 flow label of every data packet, 1-0xFFFFF (the client's packets, and the server's
    /// UDP datagrams).
    #[arg(long, value_name = "N")]
    pub(crate) flowlabel: Option<String>,
    /// Don't fragment (IP_PMTUDISC_DO, IPV6_DONTFRAG): UDP datagrams above the path MTU are
    /// refused and counted as send errors; each stream reports the path MTU the kernel learned.
    #[arg(long)]
    pub(crate) df: bool,
    /// Source address of the control and data sockets; with :PORT, stream n sends from
    /// PORT + n - 1.
    #[arg(short = 'B', long = "bind", value_name = "ADDR[:PORT]")]
    pub(crate) bind: Option<String>,
    /// Send and receive through this interface only (SO_BINDTODEVICE).
    #[arg(long = "bind-dev", value_name = "IF")]
    pub(crate) bind_dev: Option<String>,
}

impl TrafficArgs {
    /// Whether any of them was given.
    pub(crate) fn given(&self) -> bool {
        self.tos.is_some()
            || self.dscp.is_some()
            || self.flowlabel.is_some()
            || self.df
            || self.bind.is_some()
            || self.bind_dev.is_some()
    }
}

/// `--payload` and `--verify`.
#[derive(Debug, Args, Clone, Default)]
pub(crate) struct PayloadArgs {
    /// What the senders write: zeros, pattern (netchar's 0123456789, the default),
    /// random[:SEED], or stackthru[:SEED] (random bytes 32-255 between stackthru's
    /// `##### BEGIN #####` and `##### END #####`, a block every -l bytes or every datagram);
    /// without a SEED one is drawn, and the result records it.
    #[arg(long, value_name = "KIND[:SEED]")]
    pub(crate) payload: Option<String>,
    /// Receivers compare every byte with the sender's generator and report corrupted bytes
    /// (UDP: and datagrams) and the first bad offset; rr and echo compare what came back.
    #[arg(long)]
    pub(crate) verify: bool,
}

impl PayloadArgs {
    /// Whether either was given.
    pub(crate) fn given(&self) -> bool {
        self.payload.is_some() || self.verify
    }
}

/// `netchar tcp`.
#[derive(Debug, Args)]
pub(crate) struct TcpArgs {
    #[command(flatten)]
    pub(crate) common: CommonArgs,
    /// Bytes per write and read [default: 512Ki; 128Ki with -b and with a peer's --proto].
    #[arg(short = 'l', long = "length", allow_negative_numbers = true)]
    pub(crate) length: Option<String>,
    /// Socket buffer size (SO_SNDBUF/SO_RCVBUF) on both ends; default leaves autotuning on.
    #[arg(short = 'w', long = "window")]
    pub(crate) window: Option<String>,
    /// TCP maximum segment size.
    #[arg(short = 'M', long = "set-mss")]
    pub(crate) mss: Option<String>,
    /// Disable Nagle's algorithm (TCP_NODELAY).
    #[arg(short = 'N', long = "no-delay")]
    pub(crate) nodelay: bool,
    /// Congestion control algorithm (e.g. cubic, bbr).
    #[arg(short = 'C', long = "congestion")]
    pub(crate) congestion: Option<String>,
    /// Send with MSG_ZEROCOPY (falls back to copying sends where unsupported).
    #[arg(long)]
    pub(crate) zerocopy: bool,
    /// TCP receivers discard the payload in the kernel (recv with MSG_TRUNC) instead of
    /// copying it out; byte counts stay exact.
    #[arg(long)]
    pub(crate) skip_rx_copy: bool,
    /// TCP receivers are woken for every arriving segment, as iperf3's are, instead of once
    /// per batch of about 0.5 ms of data (SO_RCVLOWAT); for comparing the two.
    #[arg(long)]
    pub(crate) rx_wake_per_segment: bool,
    /// Cap each stream's send rate, bits per second (e.g. 100M).
    #[arg(short = 'b', long = "bitrate", allow_negative_numbers = true)]
    pub(crate) bitrate: Option<String>,
}

/// `netchar udp`.
#[derive(Debug, Args)]
pub(crate) struct UdpArgs {
    #[command(flatten)]
    pub(crate) common: CommonArgs,
    /// Payload bytes per datagram (default 1472 over IPv4, 1452 over IPv6; at least 24).
    #[arg(short = 'l', long = "length", allow_negative_numbers = true)]
    pub(crate) length: Option<String>,
    /// Target rate in bit/s of payload for the whole test (default 1M); 0 = as fast as possible.
    #[arg(short = 'b', long = "bitrate", conflicts_with = "pps", allow_negative_numbers = true)]
    pub(crate) bitrate: Option<String>,
    /// Target rate in datagrams per second, instead of -b.
    #[arg(long)]
    pub(crate) pps: Option<String>,
    /// -b / --pps apply to each stream rather than to the whole test.
    #[arg(long = "per-stream")]
    pub(crate) per_stream: bool,
    /// Burst/gap pattern and exact datagram lists: 10@10ms, 640x1024, 640x1024,10@10ms.
    #[arg(long)]
    pub(crate) pattern: Option<String>,
    /// How long receivers keep listening after the last datagram was sent (e.g. 250ms, 1s).
    #[arg(long, default_value = "250ms")]
    pub(crate) grace: String,
    /// Paced sending: send the datagrams due within this window together, as one batch (e.g.
    /// 50us). Default 0: every datagram at its own time, spinning for gaps under 40 µs.
    #[arg(long = "pacing-quantum", default_value = "0")]
    pub(crate) pacing_quantum: String,
    /// Do not use UDP GSO on the sender (one datagram per kernel send path).
    #[arg(long = "no-gso")]
    pub(crate) no_gso: bool,
    /// Use UDP GRO on the receiver; received figures are then labelled coalesced.
    #[arg(long)]
    pub(crate) gro: bool,
    /// RFC 2544-style search for the highest rate whose loss stays at or under --loss; each
    /// trial lasts -t seconds (default 2). -b, if given, is the highest rate tried.
    #[arg(long = "find-max-rate")]
    pub(crate) find_max_rate: bool,
    /// With --find-max-rate: the loss allowed, in percent.
    #[arg(long, default_value = "0")]
    pub(crate) loss: f64,
    /// With --find-max-rate: --step-cmd runs around each trial.
    #[command(flatten)]
    pub(crate) step: StepArgs,
    /// Send datagrams with a UDP checksum of zero (SO_NO_CHECK; IPv4 only), both ways.
    #[arg(long = "no-udp-checksum")]
    pub(crate) no_udp_checksum: bool,
    /// Send through an AF_XDP socket on this interface (and queue, default 0): whole frames
    /// built in user space, past the kernel's UDP and IP send path. Needs root; the
    /// interface is the one the route to HOST leaves by; with -P N, stream k sends on queue
    /// QUEUE+k-1. Client to server only.
    #[arg(long, value_name = "IFACE[:QUEUE]")]
    pub(crate) xdp: Option<String>,
    /// With --xdp: send through the kernel's XDP live-frames mode instead of an AF_XDP socket:
    /// an XDP program writes each frame's sequence number and send time and redirects it to
    /// the interface, with no socket buffer per frame. IPv4 with --no-udp-checksum, one
    /// datagram length, netchar's constant payload.
    #[arg(long = "xdp-live", requires = "xdp")]
    pub(crate) xdp_live: bool,
}

/// `netchar rr`.
#[derive(Debug, Args)]
pub(crate) struct RrArgs {
    #[command(flatten)]
    pub(crate) common: CommonArgs,
    /// Transactions over UDP instead of TCP.
    #[arg(long)]
    pub(crate) udp: bool,
    /// Request size in bytes.
    #[arg(short = 'l', long = "length", default_value = "1", allow_negative_numbers = true)]
    pub(crate) length: String,
    /// Response size in bytes (default: the request size).
    #[arg(long)]
    pub(crate) response: Option<String>,
    /// Transactions outstanding per connection.
    #[arg(long, default_value = "1", allow_negative_numbers = true)]
    pub(crate) inflight: String,
    /// UDP: a request without a response after this long is lost (e.g. 1s, 200ms).
    #[arg(long, default_value = "1s")]
    pub(crate) timeout: String,
    /// Spin on non-blocking receives instead of sleeping (burns a CPU per connection).
    #[arg(long = "busy-poll")]
    pub(crate) busy_poll: bool,
    /// UDP: stamp every answer in the kernel and report how much of the round trip was the
    /// wait to be woken (costs ~4% of a transaction on one core).
    #[arg(long = "wakeup-stamps")]
    pub(crate) wakeup_stamps: bool,
    /// Measure latency idle, then under load on the same path: rrul (TCP up and down in each of
    /// BE, BK, CS5, EF, one latency probe per class), or flows separated by commas, each
    /// tcp-up, tcp-down, tcp-bidir or udp-up:RATE with an optional :dscp=CLASS
    /// (tcp-up:dscp=ef,tcp-down:dscp=cs1,udp-up:100M); one probe per class of the flows.
    #[arg(long = "under-load", value_name = "LOAD")]
    pub(crate) under_load: Option<String>,
}

/// `netchar echo`.
#[derive(Debug, Args)]
pub(crate) struct EchoArgs {
    #[command(flatten)]
    pub(crate) common: CommonArgs,
    /// Echo over UDP instead of TCP.
    #[arg(long)]
    pub(crate) udp: bool,
    /// Buffers to echo and pauses: COUNTxSIZE[,COUNTxSIZE...][,BURST@GAP].
    #[arg(long, default_value = "640x1024")]
    pub(crate) pattern: String,
    /// UDP: a buffer not echoed within this long is lost.
    #[arg(long, default_value = "1s")]
    pub(crate) timeout: String,
}

/// `netchar compare`.
#[derive(Debug, Args)]
pub(crate) struct CompareArgs {
    /// Files: netchar JSON results (one run, or an array of repeated runs) or plain text with
    /// one number per line. The first is the baseline.
    #[arg(required = true, num_args = 1..)]
    pub(crate) files: Vec<std::path::PathBuf>,
    /// The figure to compare in JSON results: bps, pps, tx-bps, tx-pps, loss, jitter,
    /// retransmits (the first flow's), tps, rtt-min, rtt-mean, rtt-p50, rtt-p90, rtt-p99,
    /// rtt-p999, rtt-max, or a path such as down.receiver.packets_per_second (default: the
    /// headline, receiver bit/s or transactions/s).
    #[arg(long)]
    pub(crate) metric: Option<String>,
    /// Confidence level in percent: 80, 90, 95, 98, 99 or 99.5.
    #[arg(short = 'c', long = "confidence", default_value = "95")]
    pub(crate) confidence: f64,
    /// Welch's t test (unequal variances) instead of Student's pooled t.
    #[arg(long)]
    pub(crate) welch: bool,
    /// Compare sets whose runs differ in these fields of their method (what you set out to
    /// compare, e.g. udp_checksum or streams); sets that sent or received differently in any
    /// other field are refused (docs/statistics.md).
    #[arg(long = "accept-difference", value_name = "FIELD[,FIELD]")]
    pub(crate) accept_difference: Vec<String>,
}

/// `netchar report`.
#[derive(Debug, Args)]
pub(crate) struct ReportArgs {
    /// Saved results: a test's `--json` output, a `--repeat` or suite array, or a `--save`
    /// directory (every *.json in it).
    #[arg(required = true, num_args = 1..)]
    pub(crate) files: Vec<std::path::PathBuf>,
    /// Output format.
    /// svg and png write every plot (throughput over time, sweeps, latency, block sizes,
    /// compare sets) into the directory -o names; html writes one self-contained report.
    #[arg(long, default_value = "text", value_parser = ["text", "markdown", "csv", "json", "svg", "png", "html"])]
    pub(crate) format: String,
    /// CSV: one row per stream, end and interval instead of the summaries.
    #[arg(long)]
    pub(crate) intervals: bool,
    /// Write to FILE instead of standard output (atomically); with --format svg or png, the
    /// directory.
    #[arg(short = 'o', long = "output")]
    pub(crate) output: Option<std::path::PathBuf>,
    /// Text and markdown: rate unit, the letters of a test's -f (k m g: bit/s; K M G: bytes/s;
    /// a: a prefix picked per value). CSV is always bit/s.
    #[arg(long = "unit", default_value = "a")]
    pub(crate) rate: String,
}

/// `netchar completions`.
#[derive(Debug, Args)]
pub(crate) struct CompletionsArgs {
    /// The shell.
    pub(crate) shell: clap_complete::Shell,
}

/// `netchar man`.
#[derive(Debug, Args)]
pub(crate) struct ManArgs {
    /// A command (tcp, udp, report, ...) for its own page with all its options; a command of a
    /// command as two words (`suite bwsweep`), or as its page's name (`suite-bwsweep`).
    #[arg(num_args = 0..)]
    pub(crate) command: Vec<String>,
}

/// `netchar suite`: the built-in suites. Each is its own command with only the flags it
/// honours, so `netchar suite NAME --help` lists what it takes and anything else is refused.
#[derive(Debug, Subcommand)]
pub(crate) enum SuiteCommand {
    /// The eCos nc6_test_master sequence, printed as it printed it: echo, send (the server
    /// sends) and recv (the server receives), the server under 0-50% compute load, the pause
    /// patterns with the idle shares.
    Ecos(EcosSuiteArgs),
    /// netio's block-size table: TCP and UDP, client to server (tx) and back (rx), MB/s (2^20).
    Netio(NetioSuiteArgs),
    /// stackthru's block-size sweep, client sending: timed, or a fixed transfer per size (-n).
    Sizes(SizesSuiteArgs),
    /// The bwtest.sh UDP rate sweep in both directions, the knee where loss starts marked.
    Bwsweep(BwsweepSuiteArgs),
}

impl SuiteCommand {
    /// The suite's name, as on the command line (its plots and report are named after it).
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Self::Ecos(_) => "ecos",
            Self::Netio(_) => "netio",
            Self::Sizes(_) => "sizes",
            Self::Bwsweep(_) => "bwsweep",
        }
    }

    /// The flags every suite shares.
    pub(crate) fn target(&self) -> &SuiteTarget {
        match self {
            Self::Ecos(a) => &a.target,
            Self::Netio(a) => &a.target,
            Self::Sizes(a) => &a.target,
            Self::Bwsweep(a) => &a.target,
        }
    }
}

/// What every suite takes: the server, JSON, the plots and the report, the target's console.
#[derive(Debug, Args)]
pub(crate) struct SuiteTarget {
    /// Server as HOST, HOST:PORT or [IPV6]:PORT.
    pub(crate) host: String,
    /// Server port (overrides a port in HOST).
    #[arg(short = 'p', long)]
    pub(crate) port: Option<u16>,
    /// Print the results as one JSON array.
    #[arg(long)]
    pub(crate) json: bool,
    /// Also write the results as one JSON array to FILE (text still goes to stdout).
    #[arg(long = "json-out", value_name = "FILE")]
    pub(crate) json_out: Option<std::path::PathBuf>,
    /// Seconds to wait for each TCP connection (default 5).
    #[arg(long = "connect-timeout", value_name = "SECS")]
    pub(crate) connect_timeout: Option<String>,
    #[command(flatten)]
    pub(crate) step: StepArgs,
    #[command(flatten)]
    pub(crate) finish: FinishArgs,
    /// The target's console, read around each test of the suite.
    #[command(flatten)]
    pub(crate) console_args: ConsoleArgs,
}

/// `--console`, `--console-cmd`: the target's console, read around each test (docs/console.md).
#[derive(Debug, Args, Clone, Default)]
pub(crate) struct ConsoleArgs {
    /// Read the target's console from this serial port (8N1; BAUD 115200 unless given) from
    /// before the test to just after it: its lines, on the test's clock and with error lines
    /// flagged, go in the result.
    #[arg(long = "console", value_name = "DEVICE[:BAUD]", conflicts_with = "console_cmd")]
    pub(crate) console: Option<String>,
    /// The target's console as the output of CMD (run with `sh -c`, ended after the test),
    /// e.g. 'ssh board dmesg -w'.
    #[arg(long = "console-cmd", value_name = "CMD")]
    pub(crate) console_cmd: Option<String>,
}

impl ConsoleArgs {
    /// Whether either flag was given.
    pub(crate) fn given(&self) -> bool {
        self.console.is_some() || self.console_cmd.is_some()
    }
}

/// `--step-cmd`: a user's command before and after each step of a sweep, suite or plan.
#[derive(Debug, Args, Clone, Default)]
pub(crate) struct StepArgs {
    /// Run this shell command (`sh -c`) before and after each step, with the step in its
    /// environment (NETCHAR_STEP, NETCHAR_PHASE=before|after, NETCHAR_RATE_BPS,
    /// NETCHAR_BLOCK_BYTES, NETCHAR_DIRECTION, NETCHAR_PROTOCOL); its output and exit status
    /// go into the step's result. A failing command is recorded; the sweep goes on.
    #[arg(long = "step-cmd", value_name = "CMD")]
    pub(crate) step_cmd: Option<String>,
    /// With --step-cmd: seconds each run of the command may take before it is killed.
    #[arg(long = "step-timeout", value_name = "SECS", default_value = "30", requires = "step_cmd")]
    pub(crate) step_timeout: String,
}

/// `netchar suite ecos`.
#[derive(Debug, Args)]
pub(crate) struct EcosSuiteArgs {
    #[command(flatten)]
    pub(crate) target: SuiteTarget,
    /// A short form: loads of 0 and 50% with 256 buffers per load test, two of the five pause
    /// patterns (and against an nc_test slave a 1 s idle calibration).
    #[arg(long)]
    pub(crate) quick: bool,
    /// The server's protocol: auto (netchar's own: `netchar server` or the C responder, the
    /// nc6_test_master sequence), nc-test for an eCos nc_test_slave (nc_test_master's
    /// sequence, control on UDP 7777 unless -p) or nc6-test (nc6_test_master's sequence).
    #[arg(long = "proto", value_name = "PROTO", default_value = "auto", value_parser = SuiteProtoParser(SuiteProto::Ecos))]
    pub(crate) proto: ProtoChoice,
    /// With --proto nc-test or nc6-test: the slave's data port (default 8770); its control
    /// port is -p (default 7777).
    #[arg(long = "nc-test-data-port", value_name = "PORT")]
    pub(crate) nc_test_data_port: Option<u16>,
    /// Not taken: the eCos sequence runs counts of buffers, not for a time. The other suites'
    /// per-step `-t` is refused here in one line that says so and names what to use instead.
    #[arg(short = 't', long = "time", visible_alias = "duration", value_name = "SECS", hide = true, value_parser = refuse_ecos_time)]
    pub(crate) time: Option<String>,
}

/// `suite ecos -t SECS`: always refused (as `echo -t` is), naming the short form and the
/// suites that run for a time.
fn refuse_ecos_time(secs: &str) -> Result<String, String> {
    Err(format!(
        "the ecos suite runs nc6_test_master's counts of buffers, not for a time; --quick runs a short form, and \
         bwsweep, netio and sizes take -t {secs} for each step"
    ))
}

/// `netchar suite netio`.
#[derive(Debug, Args)]
pub(crate) struct NetioSuiteArgs {
    #[command(flatten)]
    pub(crate) target: SuiteTarget,
    /// Block sizes, comma-separated, in bytes or NUMk (NUM times 1024, as netio's -b):
    /// `-b 256,1k,1440,2000,4000`. Default: netio's 1k, 2k, 4k, 8k, 16k, 32767.
    #[arg(short = 'b', long = "block", value_name = "SIZES", conflicts_with = "preset")]
    pub(crate) block: Option<String>,
    /// A named list of block sizes: netio (netio's own, the default) or mdk (256, 1024, 1440,
    /// 2000 and 4000: the Keil MDK netio server's published table).
    #[arg(long, value_name = "NAME", value_parser = ["netio", "mdk"])]
    pub(crate) preset: Option<String>,
    /// TCP (with -u as well: both). Without either: both, or TCP only with --proto netio.
    #[arg(long)]
    pub(crate) tcp: bool,
    /// UDP (with --tcp as well: both). With --proto netio: control on port+1, datagrams to and
    /// from port+1.
    #[arg(short = 'u', long = "udp")]
    pub(crate) udp: bool,
    /// Client to server (tx) only: for a sink server (lwIP's contrib netio never sends).
    #[arg(long = "tx-only")]
    pub(crate) tx_only: bool,
    /// Seconds per test and direction (default 2; with --proto netio, netio's 6).
    #[arg(short = 't', long = "time", visible_aliases = ["duration", "netio-interval"], value_name = "SECS")]
    pub(crate) duration: Option<String>,
    /// With --proto netio: seconds without data before Rx gives up and the rest runs Tx only
    /// (default 10).
    #[arg(long = "rx-timeout", value_name = "SECS")]
    pub(crate) rx_timeout: Option<String>,
    /// The server's protocol: auto (netchar's own) or netio (a netio server: `netio -s`,
    /// Keil MDK's, lwIP's, the C responder's; port 18767 unless -p).
    #[arg(long = "proto", value_name = "PROTO", default_value = "auto", value_parser = SuiteProtoParser(SuiteProto::Netio))]
    pub(crate) proto: ProtoChoice,
}

/// `netchar suite sizes`.
#[derive(Debug, Args)]
pub(crate) struct SizesSuiteArgs {
    #[command(flatten)]
    pub(crate) target: SuiteTarget,
    /// Seconds per block size and protocol (default 2).
    #[arg(short = 't', long = "time", visible_alias = "duration", value_name = "SECS", conflicts_with = "bytes")]
    pub(crate) duration: Option<String>,
    /// Transfer exactly this many bytes per block size and protocol instead, as stackthru's
    /// DATASIZE (its 256 MB is 256Mi); the table then shows the blocks and the last, shorter
    /// block (X-Block).
    #[arg(short = 'n', long = "bytes", value_name = "BYTES")]
    pub(crate) bytes: Option<String>,
    /// Block sizes, comma-separated, instead of the default list (64 to 65507, with the jumbo
    /// frame sizes where the path's MTU allows them).
    #[arg(short = 'b', long = "block", value_name = "SIZES")]
    pub(crate) block: Option<String>,
}

/// `netchar suite bwsweep`.
#[derive(Debug, Args)]
pub(crate) struct BwsweepSuiteArgs {
    #[command(flatten)]
    pub(crate) target: SuiteTarget,
    /// First rate.
    #[arg(long, default_value = "50M")]
    pub(crate) from: String,
    /// Last rate.
    #[arg(long, default_value = "1G")]
    pub(crate) to: String,
    /// Rate step.
    #[arg(long, default_value = "50M")]
    pub(crate) step: String,
    /// Seconds per rate and direction.
    #[arg(short = 't', long = "time", visible_alias = "duration", value_name = "SECS", default_value = "2")]
    pub(crate) duration: String,
    /// The knee is the first rate of a direction that loses more than this share of its
    /// datagrams, in percent (`0.1%` or `0.1`); `0` marks the first rate that loses any.
    #[arg(long = "knee-loss", value_name = "PCT", default_value = "0.1%")]
    pub(crate) knee_loss: String,
}

/// The suites with a `--proto`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum SuiteProto {
    Ecos,
    Netio,
}

/// A suite's `--proto`: `auto` or a protocol of the registry that runs the suite; only those
/// are in its help and its errors.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SuiteProtoParser(pub(crate) SuiteProto);

impl SuiteProtoParser {
    fn protocols(self) -> impl Iterator<Item = &'static netchar_engine::protocols::ProtocolDef> {
        use netchar_engine::protocols::Command as C;
        let command = match self.0 {
            SuiteProto::Ecos => C::SuiteEcos,
            SuiteProto::Netio => C::SuiteNetio,
        };
        PROTOCOLS.iter().filter(move |p| p.commands.contains(&command))
    }
}

impl clap::builder::TypedValueParser for SuiteProtoParser {
    type Value = ProtoChoice;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<ProtoChoice, clap::Error> {
        use clap::error::{ContextKind, ContextValue, ErrorKind};
        let text = value.to_str().unwrap_or_default();
        let known = |p: &&netchar_engine::protocols::ProtocolDef| p.name == text || p.aliases.contains(&text);
        match ProtoChoice::parse(text) {
            Ok(choice) if text == "auto" || self.protocols().any(|p| known(&p)) => Ok(choice),
            _ => {
                let mut e = clap::Error::new(ErrorKind::InvalidValue).with_cmd(cmd);
                e.insert(
                    ContextKind::InvalidArg,
                    ContextValue::String(arg.map_or("--proto".into(), |a| a.to_string())),
                );
                e.insert(ContextKind::InvalidValue, ContextValue::String(text.to_string()));
                let names = std::iter::once("auto").chain(self.protocols().map(|p| p.name)).map(String::from).collect();
                e.insert(ContextKind::ValidValue, ContextValue::Strings(names));
                Err(e)
            }
        }
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        use clap::builder::PossibleValue;
        let auto = PossibleValue::new("auto").help("netchar's own");
        let all = self.protocols().map(|p| PossibleValue::new(p.name).aliases(p.aliases.iter().copied()).help(p.about));
        Some(Box::new(std::iter::once(auto).chain(all)))
    }
}

impl UdpArgs {
    /// The UDP arguments a suite runs with: defaults, its server and connect timeout,
    /// `seconds` per test.
    pub(crate) fn for_suite(target: &SuiteTarget, seconds: f64) -> Self {
        let mut argv =
            vec!["udp".to_string(), target.host.clone(), "-t".into(), seconds.to_string(), "-i".into(), "0".into()];
        if let Some(p) = target.port {
            argv.extend(["-p".into(), p.to_string()]);
        }
        if let Some(t) = &target.connect_timeout {
            argv.extend(["--connect-timeout".into(), t.clone()]);
        }
        #[derive(Parser)]
        struct Wrapper {
            #[command(flatten)]
            udp: UdpArgs,
        }
        // The suite's own flags were validated already; these are fixed and always parse.
        Wrapper::parse_from(argv).udp
    }
}

/// `netchar run`.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The plan file.
    pub(crate) plan: std::path::PathBuf,
    /// The server, for tests that do not name one.
    pub(crate) host: Option<String>,
    /// Server port for tests that do not name a server (overrides a port in HOST).
    #[arg(short = 'p', long, requires = "host")]
    pub(crate) port: Option<u16>,
    /// Seconds to wait for each TCP connection of every test (default 5).
    #[arg(long = "connect-timeout", value_name = "SECS")]
    pub(crate) connect_timeout: Option<String>,
    /// Print every test's results as one JSON array at the end.
    #[arg(long)]
    pub(crate) json: bool,
    /// Also write every test's results as one JSON array to FILE (text still goes to stdout).
    #[arg(long = "json-out", value_name = "FILE")]
    pub(crate) json_out: Option<std::path::PathBuf>,
    /// --step-cmd runs around each test of the plan (each --repeat run).
    #[command(flatten)]
    pub(crate) step: StepArgs,
    #[command(flatten)]
    pub(crate) finish: FinishArgs,
}

/// `--proto`: `auto` or a protocol of the registry (netchar_engine::protocols), parsed once;
/// its possible values, in help and errors, are the registry's.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ProtoParser;

impl clap::builder::TypedValueParser for ProtoParser {
    type Value = ProtoChoice;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<ProtoChoice, clap::Error> {
        let text = value.to_str().unwrap_or_default();
        ProtoChoice::parse(text).map_err(|_| {
            let mut e = clap::Error::new(clap::error::ErrorKind::InvalidValue).with_cmd(cmd);
            use clap::error::{ContextKind, ContextValue};
            e.insert(ContextKind::InvalidArg, ContextValue::String(arg.map_or("--proto".into(), |a| a.to_string())));
            e.insert(ContextKind::InvalidValue, ContextValue::String(text.to_string()));
            let names = std::iter::once("auto").chain(PROTOCOLS.iter().map(|p| p.name)).map(String::from).collect();
            e.insert(ContextKind::ValidValue, ContextValue::Strings(names));
            e
        })
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        use clap::builder::PossibleValue;
        let auto = PossibleValue::new("auto").help("netchar's own, or the peer protocol the server answers in");
        let all = PROTOCOLS.iter().map(|p| {
            let commands: Vec<&str> = p.commands.iter().map(|c| c.name()).collect();
            PossibleValue::new(p.name).aliases(p.aliases.iter().copied()).help(format!(
                "{} (port {}; {})",
                p.about,
                p.default_port,
                commands.join(", ")
            ))
        });
        Some(Box::new(std::iter::once(auto).chain(all)))
    }
}

/// `netchar server`'s flags for the peer-protocol servers, made from the registry's
/// LISTENERS: `--FLAG` turns one on, `--PORT-FLAG` sets a port (and turns it on).
#[derive(Debug, Clone, Default)]
pub(crate) struct PeerServerArgs {
    /// Per listener, in the table's order: its flag given, and each port given.
    pub(crate) given: Vec<(bool, Vec<Option<u16>>)>,
}

impl clap::FromArgMatches for PeerServerArgs {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let given = LISTENERS
            .iter()
            .map(|l| (m.get_flag(l.flag), l.ports.iter().map(|p| m.get_one::<u16>(p.flag).copied()).collect()))
            .collect();
        Ok(Self { given })
    }

    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl clap::Args for PeerServerArgs {
    fn augment_args(mut cmd: clap::Command) -> clap::Command {
        use clap::{Arg, ArgAction};
        for l in LISTENERS {
            cmd = cmd.arg(Arg::new(l.flag).long(l.flag).action(ArgAction::SetTrue).help(capitalised(l.about)));
            for p in l.ports {
                cmd = cmd.arg(
                    Arg::new(p.flag)
                        .long(p.flag)
                        .value_name("PORT")
                        .value_parser(clap::value_parser!(u16))
                        .help(format!("--{}: {} (default {})", l.flag, p.about, p.default)),
                );
            }
        }
        cmd
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    c.next().map_or_else(String::new, |f| f.to_uppercase().chain(c).collect())
}
