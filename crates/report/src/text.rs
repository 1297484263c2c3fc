//! The human-readable report: a header, one line per interval and stream, a summary.

use netchar_model::units::{format_bytes, format_si, RateFormat};
use netchar_model::{
    Caveat, CaveatWhen, CpuUsage, EndCondition, FarEnd, Flow, FlowSummary, IntervalRecord, Role, RrFigures,
    TargetReport, TestInfo, TestKind, TestResult, TestSpec, UdpOptions, UdpRate, UnderLoad,
};
use std::fmt::Write;

use crate::caveats::{caveat, caveats};
use crate::cost::cost_figure;
pub use crate::hooks::{hook_lines, hook_text};
use crate::loss::loss_breakdown_lines;

/// The text reporter.
#[derive(Debug, Default)]
pub struct TextReporter {
    /// How rates are printed (`-f`).
    pub format: RateFormat,
    header_done: bool,
    /// The end of the last interval printed: an interval starting before it begins a new
    /// phase of the test (`rr --under-load`: the probe again, now beside the load flows).
    last_end: f64,
}

impl TextReporter {
    /// A reporter printing rates in `format`.
    pub fn new(format: RateFormat) -> Self {
        Self { format, header_done: false, last_end: 0.0 }
    }
}

/// The interval header for the kind of test the interval's streams show: TCP's retransmits,
/// window and RTT; UDP's datagrams, loss and jitter; request/response transactions and
/// latency.
fn interval_header(iv: &IntervalRecord) -> &'static str {
    let sample = iv.streams.first().map(|s| &s.sample);
    if sample.is_some_and(|x| x.rr.is_some()) {
        "[ ID] Flow Role      Interval        Transfer      Bitrate            Trans     Trans/s     p50 us     p99 us\n"
    } else if sample.is_some_and(|x| x.udp_sent.is_some() || x.udp_received.is_some()) {
        "[ ID] Flow Role      Interval        Transfer      Bitrate        Datagrams  Lost so far   Jitter ms  (p99 ms)\n"
    } else {
        "[ ID] Flow Role      Interval        Transfer      Bitrate         Retr     Cwnd      RTT\n"
    }
}

fn role_name(r: Role) -> &'static str {
    match r {
        Role::Sender => "sender",
        Role::Receiver => "receiver",
    }
}

/// One line describing the test, with the exact parsed values.
pub fn describe_test(info: &TestInfo) -> String {
    let s = &info.spec;
    let dir = match s.direction {
        netchar_model::Direction::Up => "up (client sends)",
        netchar_model::Direction::Down => "down (server sends, -R)",
        netchar_model::Direction::Bidir => "bidir (both send)",
    };
    let end = match s.end {
        EndCondition::Seconds(t) => format!("{t} s"),
        EndCondition::Bytes(n) => format!("{n} bytes"),
    };
    let peer = if info.protocol == netchar_model::NATIVE_PROTOCOL {
        String::new()
    } else {
        format!("{} server ", info.protocol)
    };
    let family = match info.family.as_str() {
        "ipv4" | "ipv6" => format!(" ({})", info.family),
        _ => String::new(),
    };
    let (kind, unit) = match s.kind {
        TestKind::Tcp => ("TCP", "block"),
        TestKind::Udp => ("UDP", "payload"),
        TestKind::Rr => ("request/response", "request"),
    };
    let dir = match (s.kind, &info.far_end) {
        (TestKind::Rr, _) => "",
        // A far end of a fixed shape decides the direction, whatever the spec says before the run.
        (_, FarEnd::Echoes) => "echo (client sends, the server returns it)",
        (_, FarEnd::Sink) => "up (client sends)",
        (_, FarEnd::Source) => "down (server sends)",
        _ => dir,
    };
    // A UDP payload left at 0 is chosen once the address family is known (1472 B over IPv4,
    // 1452 B over IPv6: a 1500-byte MTU either way); this header may be printed before that.
    let size = match (s.kind, s.block_bytes, info.family.as_str()) {
        (TestKind::Udp, 0, "ipv4") => "1472 bytes".to_string(),
        (TestKind::Udp, 0, "ipv6") => "1452 bytes".to_string(),
        (TestKind::Udp, 0, _) => "1472 bytes over IPv4, 1452 over IPv6".to_string(),
        (_, n, _) => format!("{n} bytes"),
    };
    let mut line = format!(
        "{kind}{}{dir} with {peer}{}{family}, {} stream{}, {end}, {unit} {size}",
        if dir.is_empty() { "" } else { " " },
        info.remote,
        s.streams,
        if s.streams == 1 { "" } else { "s" },
    );
    if let Some(u) = &s.udp {
        describe_udp(s, u, info.family == "ipv6", &mut line);
    }
    if let Some(r) = &s.rr {
        let _ = write!(
            line,
            " over {}, response {} bytes, {} in flight per connection{}",
            match (r.udp, r.connect_per_transaction) {
                (true, _) => "UDP",
                (false, true) => "a new TCP connection per transaction",
                (false, false) => "TCP",
            },
            r.response_bytes,
            r.inflight,
            if r.busy_poll { ", busy-polling" } else { "" }
        );
        if r.udp {
            let _ = write!(line, ", timeout {} s", r.timeout_seconds);
        }
    }
    describe_options(s, &mut line);
    if let Some(t) = &info.title {
        let _ = write!(line, " [{t}]");
    }
    line
}

fn describe_udp(s: &TestSpec, u: &UdpOptions, v6: bool, line: &mut String) {
    // Ethernet frame: payload + UDP 8 + IP 20/40 + Ethernet header 14 + FCS 4; the default
    // payload fills a 1500-byte MTU in either family.
    let frame = if s.block_bytes == 0 { 1518 } else { s.block_bytes + 8 + if v6 { 40 } else { 20 } + 18 };
    let _ = write!(line, " ({frame}-byte Ethernet frames)");
    let scope = if u.per_stream { "per stream" } else { "in all" };
    match u.rate {
        UdpRate::BitsPerSecond(b) => {
            let _ = write!(line, ", {b} bit/s {scope}");
        }
        UdpRate::PacketsPerSecond(p) => {
            let _ = write!(line, ", {p} datagrams/s {scope}");
        }
        UdpRate::Unlimited => line.push_str(", as fast as possible"),
    }
    if let Some(p) = &u.pattern {
        for (count, size) in &p.sizes {
            let _ = write!(line, ", {count} datagrams of {size} bytes");
        }
        if let Some(b) = p.burst {
            let _ = write!(line, ", bursts of {b} then {} s pause", p.gap_seconds);
        }
    }
    // Without checksums the options below say why GSO is off too.
    if !u.gso && !u.no_checksum {
        line.push_str(", no GSO");
    }
    if u.gro {
        line.push_str(", GRO on the receiver");
    }
}

fn describe_options(s: &TestSpec, line: &mut String) {
    let o = &s.tcp;
    if s.omit_seconds > 0.0 {
        let _ = write!(line, ", warm-up {} s omitted", s.omit_seconds);
    }
    if let Some(p) = s.payload {
        let _ = write!(line, ", payload {}", p.describe());
    }
    if s.verify {
        line.push_str(", every byte verified");
    }
    if let Some(r) = o.rate_bps_per_stream {
        let _ = write!(line, ", capped at {r} bit/s per stream");
    }
    if let Some(w) = o.window_bytes {
        let _ = write!(line, ", socket buffer {w} bytes");
    }
    if let Some(m) = o.mss {
        let _ = write!(line, ", MSS {m}");
    }
    if o.nodelay {
        line.push_str(", no-delay");
    }
    if let Some(c) = &o.congestion {
        let _ = write!(line, ", congestion control {c}");
    }
    if o.zerocopy {
        line.push_str(", MSG_ZEROCOPY");
    }
    if o.skip_rx_copy {
        line.push_str(", receive without copy (MSG_TRUNC)");
    }
    if o.wake_per_segment {
        line.push_str(", receiver woken per segment");
    }
    if let Some(tos) = s.ip.tos {
        let _ = write!(line, ", TOS {tos:#04x}");
        if let Some(name) = netchar_model::spec::dscp_name(tos >> 2) {
            let _ = write!(line, " (DSCP {name})");
        }
    }
    if let Some(l) = s.ip.flowlabel {
        let _ = write!(line, ", flow label {l:#x}");
    }
    if s.ip.dont_fragment {
        line.push_str(", don't fragment");
    }
    if s.udp.as_ref().is_some_and(|u| u.no_checksum) {
        // The kernel refuses GSO on a socket without checksums: a rate measured so is also a
        // rate without GSO, and a --no-gso run is its like-for-like reference.
        line.push_str(
            ", UDP checksums off, so no GSO (the kernel refuses it without them; compare with a --no-gso run)",
        );
    }
}

impl crate::Reporter for TextReporter {
    fn on_section(&mut self, title: &str) -> String {
        format!("=== {title}\n")
    }

    fn on_start(&mut self, info: &TestInfo) -> String {
        // A reporter lives for a job of several tests: each has its own interval header.
        self.header_done = false;
        self.last_end = 0.0;
        format!("netchar {}: {}\n", env!("CARGO_PKG_VERSION"), describe_test(info))
    }

    fn on_interval(&mut self, iv: &IntervalRecord) -> String {
        let mut out = String::new();
        // The clock starting again within one test: its second phase (`rr --under-load`
        // measures the probe idle, then again under load, each on its own clock).
        if self.header_done && iv.start + 1e-9 < self.last_end {
            out.push_str(
                "under load (the lines above: idle, the probe alone; below: the probe beside the load flows)\n",
            );
            self.header_done = false;
        }
        self.last_end = iv.end;
        if !self.header_done {
            self.header_done = true;
            out.push_str(interval_header(iv));
        }
        let many = iv.streams.len() > iv.sum.len();
        for s in &iv.streams {
            let x = &s.sample;
            let _ = write!(
                out,
                "[{:>3}] {:<4} {:<8} {:>6.2}-{:<6.2} s  {:>11}  {:>15}",
                s.id,
                s.flow.name(),
                role_name(s.role),
                x.start,
                x.end,
                format_bytes(x.bytes),
                self.format.format(x.bits_per_second)
            );
            if let (Some(r), Some(c), Some(rtt)) = (x.retransmits, x.cwnd_bytes, x.rtt_us) {
                let _ = write!(out, "  {r:>5}  {:>9}  {rtt:>5} us", format_bytes(c));
            }
            if let Some(u) = &x.udp_sent {
                let _ = write!(out, "  {:>11}", u.packets);
                if u.send_errors > 0 {
                    let _ = write!(out, "  ({} refused)", u.send_errors);
                }
            }
            if let Some(r) = &x.rr {
                let _ = write!(
                    out,
                    "  {:>11} {:>11.0} {:>10.1} {:>10.1}",
                    r.transactions, r.transactions_per_second, r.latency_us.p50, r.latency_us.p99
                );
                if r.lost > 0 || r.late > 0 {
                    let _ = write!(out, "  ({} lost, {} late)", r.lost, r.late);
                }
            }
            if let Some(u) = &x.udp_received {
                let _ = write!(
                    out,
                    "  {:>11} {:>12} {:>11.3} {:>9}",
                    u.packets,
                    u.lost,
                    u.jitter_ms,
                    format!("({:.3})", u.jitter_p99_ms)
                );
                if u.out_of_order > 0 || u.duplicates > 0 {
                    let _ = write!(out, "  ({} late, {} dup)", u.out_of_order, u.duplicates);
                }
            }
            if x.omitted {
                out.push_str("  (omitted)");
            }
            out.push('\n');
        }
        if many {
            for sum in &iv.sum {
                let _ = write!(
                    out,
                    "[SUM] {:<4} {:<8} {:>6.2}-{:<6.2} s  {:>11}  {:>15}",
                    sum.flow.name(),
                    role_name(sum.role),
                    iv.start,
                    iv.end,
                    format_bytes(sum.bytes),
                    self.format.format(sum.bits_per_second)
                );
                if let Some(r) = sum.retransmits {
                    let _ = write!(out, "  {r:>5}");
                }
                out.push('\n');
            }
        }
        out
    }

    fn on_finish(&mut self, r: &TestResult) -> String {
        summary(r, self.format)
    }

    fn on_results(&mut self, results: &[crate::Saved]) -> String {
        table(results, self.format)
    }
}

/// The summary table of saved results: one row per test and flow, columns aligned, errors
/// under it.
pub fn table(results: &[crate::Saved], format: RateFormat) -> String {
    let t = crate::rows::human_table(results, format);
    let mut widths: Vec<usize> = t.headers.iter().map(|h| h.chars().count()).collect();
    for row in &t.cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    let line = |cells: &[String], out: &mut String| {
        let mut l = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i > 0 {
                l.push_str("  ");
            }
            let pad = widths[i] - c.chars().count();
            if t.numeric[i] {
                l.push_str(&" ".repeat(pad));
                l.push_str(c);
            } else {
                l.push_str(c);
                l.push_str(&" ".repeat(pad));
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    let headers: Vec<String> = t.headers.iter().map(|h| h.to_string()).collect();
    line(&headers, &mut out);
    for row in &t.cells {
        line(row, &mut out);
    }
    for (source, e) in &t.errors {
        let _ = writeln!(out, "{source}: error: {e}");
    }
    out
}

/// The summary block of one test.
pub fn summary(r: &TestResult, format: RateFormat) -> String {
    let mut out = String::new();
    let omit = r.test.spec.omit_seconds;
    let _ = writeln!(out, "- - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - -");
    let warm = if omit > 0.0 { format!(", first {omit} s omitted") } else { String::new() };
    if r.summary.up.is_some() || r.summary.down.is_some() {
        let _ = writeln!(out, "Summary{warm}:          bytes        seconds   bitrate          retransmits");
    }
    let fixed_shape = matches!(r.test.far_end, FarEnd::Echoes | FarEnd::Sink | FarEnd::Source);
    if fixed_shape {
        near_end_summary(r, format, &mut out);
    }
    for flow in [Flow::Up, Flow::Down] {
        let Some(f) = r.summary.flow(flow).filter(|_| !fixed_shape) else {
            continue;
        };
        let (send_end, recv_end) = match flow {
            Flow::Up => ("client", "server"),
            Flow::Down => ("server", "client"),
        };
        // A far end that reports nothing for this flow (iperf2 over TCP, or sending UDP):
        // its side is unknown here, and the protocol's caveat says so.
        let far_unknown = r.test.far_end.silent_on(flow);
        for (role, side, end) in [("sender", &f.sender, send_end), ("receiver", &f.receiver, recv_end)] {
            if far_unknown && end == "server" {
                continue;
            }
            let _ = write!(
                out,
                "{:<4} {role:<8} ({end}) {:>15} {:>9.3} s {:>16}",
                flow.name(),
                side.bytes,
                side.seconds,
                format.format(side.bits_per_second)
            );
            if let Some(rt) = side.retransmits {
                let _ = write!(out, "  {rt}");
            }
            out.push('\n');
        }
        udp_summary(f, caveat(r, flow, CaveatWhen::DatagramsShort), &mut out);
        let short = caveat(r, flow, CaveatWhen::ReceiverShort);
        if far_unknown {
            // The far end's silence is the protocol's to explain (its caveats, below).
            for c in caveats(r, Some(flow), CaveatWhen::Always) {
                let _ = writeln!(out, "     {}", c.text);
            }
        } else if f.packets_accounted.is_some() {
            // UDP may lose bytes by design; the datagram identity above is the check.
        } else if f.bytes_match {
            let _ = writeln!(
                out,
                "     every byte arrived: {} bytes written = {} bytes read",
                f.sender.total_bytes, f.receiver.total_bytes
            );
        } else if let Some(c) = short.filter(|_| f.receiver.total_bytes < f.sender.total_bytes) {
            // A far end that stops counting early (iperf3 at TEST_END) says what is in none
            // of its figures.
            let _ = writeln!(out, "     {}", c.render(f.sender.total_bytes, f.receiver.total_bytes));
        } else {
            let _ = writeln!(
                out,
                "     BYTES DIFFER: {} written, {} read ({} missing)",
                f.sender.total_bytes,
                f.receiver.total_bytes,
                f.sender.total_bytes as i128 - f.receiver.total_bytes as i128
            );
        }
    }
    if !fixed_shape {
        // About the whole test (the near end's summary above prints them for those shapes).
        for c in caveats(r, None, CaveatWhen::Always) {
            let _ = writeln!(out, "{}", c.text);
        }
    }
    path_lines(r, &mut out);
    for s in r.streams.iter().filter(|s| s.zerocopy.is_some()).take(1) {
        let z = s.zerocopy.as_ref().expect("filtered");
        let mut how = match z.method.as_str() {
            "splice" => format!("vmsplice/splice of the payload's pages ({} splice calls)", z.splice_sends),
            "copy" => format!("plain copying sends ({} calls)", z.copy_sends),
            _ => format!(
                "MSG_ZEROCOPY: {} sends, {} of {} completions copied by the kernel",
                z.zerocopy_sends, z.copied, z.completed
            ),
        };
        if !z.tried.is_empty() {
            let rates: Vec<String> = z
                .tried
                .iter()
                .map(|t| {
                    let copied = t.copied_share.map_or(String::new(), |c| format!(", {:.0}% copied", c * 100.0));
                    format!("{} {:.2} Gbit/s{copied}", t.method, t.bits_per_second / 1e9)
                })
                .collect();
            how = format!("{how}; chosen by measurement: {}", rates.join(", "));
        }
        let _ = writeln!(out, "--zerocopy (stream {}): {how}", s.id);
    }
    verify_lines(r, &mut out);
    out.push_str(&hook_text(r));
    if let (Some(idle), Some(loaded)) = (&r.summary.rr_idle, &r.summary.rr_loaded) {
        under_load_summary(idle, loaded, r, format, &mut out);
    } else if let Some(rr) = &r.summary.rr {
        rr_summary(rr, r.summary.placement.as_deref(), &mut out);
    }
    if let Some(c) = &r.cpu.local {
        let _ = writeln!(out, "CPU  client: {}", cpu_line(c));
    }
    if let Some(c) = &r.cpu.remote {
        let _ = writeln!(out, "CPU  server: {}", cpu_line(c));
    }
    if let Some(t) = &r.target {
        target_lines(t, &mut out);
    }
    // --nft-counter: the counted rules the user named, over the test.
    for n in r.evidence.iter().flat_map(|e| &e.nft) {
        let _ = writeln!(out, "nft  {} [{}] {}: {} packets, {} bytes", n.chain, n.handle, n.rule, n.packets, n.bytes);
    }
    if let Some(why) = r.evidence.as_ref().and_then(|e| e.unavailable.get("nft")) {
        let _ = writeln!(out, "nft  not read after the test: {why}");
    }
    if let Some(c) = &r.console {
        out.push_str(&crate::console::console_lines(c));
    }
    // Under load, the load flows and the other probes are this test's companions, admitted
    // with it as one test: only tests beyond them are other tests.
    let companions = r.summary.under_load.as_ref().map_or(0, |u| u.flows.len() + u.probes.len().saturating_sub(1));
    let others = (r.test.concurrent_tests as usize).saturating_sub(1 + companions);
    if others > 0 {
        let besides = if companions > 0 {
            format!(" besides this one and its {companions} load flows and probes")
        } else {
            String::new()
        };
        let _ = writeln!(out, "note: the server ran {others} other test(s) at once{besides} during this one");
    }
    if let Some(e) = &r.error {
        let _ = writeln!(out, "error: {e}");
    }
    out
}

/// `--verify`: per flow (rr: requests and responses), what the receivers found when they
/// compared every byte with the sender's generator.
fn verify_lines(r: &TestResult, out: &mut String) {
    let rr = r.summary.rr_verify.as_ref();
    let parts = [
        ("up", r.summary.up.as_ref().and_then(|f| f.verify.as_ref())),
        ("down", r.summary.down.as_ref().and_then(|f| f.verify.as_ref())),
        ("requests", rr.and_then(|v| v.requests.as_ref())),
        ("responses", rr.and_then(|v| v.responses.as_ref())),
    ];
    for (what, v) in parts.iter().filter_map(|(w, v)| v.map(|v| (w, v))) {
        let _ = writeln!(out, "verify {what:<9} {}", integrity_line(v));
    }
}

/// One `--verify` record in words.
fn integrity_line(v: &netchar_model::Integrity) -> String {
    let datagrams = v.checked_datagrams.map(|n| format!(" in {n} datagrams")).unwrap_or_default();
    if v.intact() {
        return format!("intact: {} bytes{datagrams} compared, none differed", v.checked_bytes);
    }
    let mut line = match v.corrupted_datagrams {
        Some(d) => format!(
            "CORRUPTED: {} bytes in {d} datagrams differed ({} bytes{datagrams} compared)",
            v.corrupted_bytes, v.checked_bytes
        ),
        None => format!("CORRUPTED: {} of {} bytes compared differed", v.corrupted_bytes, v.checked_bytes),
    };
    let mut first = Vec::new();
    if let Some(s) = v.first_bad_stream {
        first.push(format!("stream {s}"));
    }
    match (v.first_bad_datagram, v.first_bad_offset) {
        (Some(d), Some(o)) => first.push(format!("datagram {d}, byte {o}")),
        (None, Some(o)) => first.push(format!("offset {o}")),
        _ => {}
    }
    if let Some(t) = v.first_bad_seconds {
        first.push(format!("at {t:.3} s"));
    }
    if !first.is_empty() {
        let _ = write!(line, "; first: {}", first.join(", "));
    }
    line
}

/// A far end of a fixed shape that reports nothing (echo, discard, chargen): only this end
/// measures, so only its sides are shown, with the protocol's caveats.
fn near_end_summary(r: &TestResult, format: RateFormat, out: &mut String) {
    let row = |out: &mut String, label: &str, side: &netchar_model::SideTotals| {
        let _ = write!(
            out,
            "{label:<22} {:>15} {:>9.3} s {:>16}",
            side.bytes,
            side.seconds,
            format.format(side.bits_per_second)
        );
        if let Some(rt) = side.retransmits {
            let _ = write!(out, "  {rt}");
        }
        out.push('\n');
    };
    let up = r.summary.up.as_ref();
    let down = r.summary.down.as_ref();
    let notes = |out: &mut String, flow: Option<Flow>| {
        for c in caveats(r, flow, CaveatWhen::Always) {
            let _ = writeln!(out, "     {}", c.text);
        }
    };
    match r.test.far_end {
        FarEnd::Sink => {
            if let Some(f) = up {
                row(out, "up   sender   (client)", &f.sender);
                if let Some(s) = &f.sender.udp_sent {
                    let _ = writeln!(
                        out,
                        "     sender: {} datagrams sent, {} refused by the kernel{}",
                        s.packets,
                        s.send_errors,
                        by_errno(s)
                    );
                }
                notes(out, Some(Flow::Up));
            }
        }
        FarEnd::Echoes => {
            if let (Some(u), Some(d)) = (up, down) {
                row(out, "up   sender   (client)", &u.sender);
                row(out, "back receiver (client)", &d.receiver);
                udp_summary(
                    &FlowSummary { sender: Default::default(), packets_accounted: None, ..d.clone() },
                    None,
                    out,
                );
                if let (Some(s), Some(b)) = (&u.sender.udp_sent, &d.receiver.udp_received) {
                    let ok = s.packets == b.packets + b.lost;
                    let _ = writeln!(
                        out,
                        "     {}: {} datagrams sent = {} echoed back + {} lost",
                        if ok { "every datagram accounted for" } else { "DATAGRAMS UNACCOUNTED" },
                        s.packets,
                        b.packets,
                        b.lost
                    );
                } else {
                    if d.receiver.total_bytes == u.sender.total_bytes {
                        let _ = writeln!(
                            out,
                            "     every byte came back: {} bytes sent = {} bytes echoed",
                            u.sender.total_bytes, d.receiver.total_bytes
                        );
                    } else {
                        let _ = writeln!(
                            out,
                            "     ECHO SHORT: {} bytes sent, {} echoed back ({} missing)",
                            u.sender.total_bytes,
                            d.receiver.total_bytes,
                            u.sender.total_bytes as i128 - d.receiver.total_bytes as i128
                        );
                    }
                }
                notes(out, None);
            }
        }
        _ => {
            if let Some(f) = down {
                row(out, "down receiver (client)", &f.receiver);
                notes(out, Some(Flow::Down));
            }
        }
    }
}

/// Where the client's sockets were bound (`-B`, `--bind-dev`), and each end's path MTU
/// (`--df`; the smallest and largest of its streams when they differ).
fn path_lines(r: &TestResult, out: &mut String) {
    if let Some(b) = &r.bind {
        let mut parts = Vec::new();
        if let Some(ip) = b.address {
            parts.push(format!("source {ip}"));
        }
        if let Some(p) = b.port {
            parts.push(format!("data streams from port {p} up"));
        }
        if let Some(d) = &b.device {
            parts.push(format!("interface {d}"));
        }
        let _ = writeln!(out, "client bound: {}", parts.join(", "));
    }
    let mut ends = Vec::new();
    for who in [netchar_model::Endpoint::Client, netchar_model::Endpoint::Server] {
        let mtus: Vec<u32> = r.streams.iter().filter(|s| s.measured_by == who).filter_map(|s| s.path_mtu).collect();
        let (Some(lo), Some(hi)) = (mtus.iter().min(), mtus.iter().max()) else { continue };
        let name = if who == netchar_model::Endpoint::Client { "client" } else { "server" };
        ends.push(if lo == hi { format!("{name} {lo}") } else { format!("{name} {lo} to {hi}") });
    }
    if !ends.is_empty() {
        let _ = writeln!(out, "path MTU (don't fragment): {} bytes", ends.join(", "));
    }
}

/// A UDP flow's sender and receiver lines and its accounting; `short`: the protocol's caveat
/// for a receiver that counted fewer datagrams than were sent.
/// ` (ENOBUFS 12, EPERM 3)`: the refused sends by cause, or nothing when none was refused or
/// the causes were not counted.
fn by_errno(s: &netchar_model::UdpSent) -> String {
    if s.send_errors_by_errno.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = s.send_errors_by_errno.iter().map(|(e, n)| format!("{e} {n}")).collect();
    format!(" ({})", parts.join(", "))
}

fn udp_summary(f: &FlowSummary, short: Option<&Caveat>, out: &mut String) {
    if let Some(s) = &f.sender.udp_sent {
        let _ = write!(out, "     sender: {} datagrams sent", s.packets);
        if let Some(pps) = f.sender.packets_per_second {
            let _ = write!(out, " ({}/s)", format_si(pps, "").trim());
        }
        let _ = write!(out, ", {} refused by the kernel{}", s.send_errors, by_errno(s));
        if let (Some(mean), Some(p99)) = (s.gap_mean_us, s.gap_p99_us) {
            let _ = write!(out, "; gap mean {mean:.2} us, p99 {p99:.2} us");
        }
        if s.sends > 0 {
            let _ = write!(out, "; {:.1} datagrams per send", s.packets as f64 / s.sends as f64);
        }
        let _ = writeln!(out, "{}", if s.gso { " (GSO)" } else { "" });
        // Said once it moves the rate by 0.1% or more: a sender that wakes a few µs late for
        // the slot just before the deadline owes one datagram, which JSON keeps exactly.
        if let Some(n) = s.behind_schedule.filter(|&n| n > 0 && n * 1000 >= s.packets + n) {
            let _ = writeln!(
                out,
                "     sender fell behind its schedule: {n} datagrams due before the end were never sent (it did not get the CPU in time); that shortfall is the sender's, not the network's"
            );
        }
        // A stall longer than the search's own tolerance (0.5% of the test): its catch-up went
        // out at up to twice the rate, a burst a shaper may drop.
        if let Some(ms) = s.late_max_ms.filter(|&ms| ms * 1e-3 > 0.005 * f.sender.seconds) {
            let _ = writeln!(
                out,
                "     sender stalled: a datagram went out {ms:.1} ms after its slot (it did not get the CPU); what it owed went out at up to twice the rate"
            );
        }
    }
    if let Some(r) = &f.receiver.udp_received {
        let rate =
            f.receiver.packets_per_second.map(|p| format!(" ({}/s)", format_si(p, "").trim())).unwrap_or_default();
        let _ = writeln!(
            out,
            "     receiver: {} datagrams{rate}, {} lost ({:.4}%, {} of them dropped by the receiving socket), {} late, {} duplicate, reorder extent max {}",
            r.packets, r.lost, r.loss_percent, r.kernel_drops, r.out_of_order, r.duplicates, r.reorder_extent_max
        );
        let _ = writeln!(
            out,
            "     jitter {:.4} ms (RFC 3550); transit variation p50 {:.4} ms, p99 {:.4} ms{}",
            r.jitter_ms,
            r.jitter_p50_ms,
            r.jitter_p99_ms,
            if r.coalesced { "; GRO: coalesced deliveries" } else { "" }
        );
    }
    if let Some(b) = f.loss_breakdown.as_ref().filter(|b| b.lost > 0) {
        for line in loss_breakdown_lines(b) {
            let _ = writeln!(out, "     {line}");
        }
    }
    match f.packets_accounted {
        Some(true) => {
            let _ = writeln!(out, "     every datagram accounted for: sent = received + lost on every stream");
        }
        Some(false) => {
            let counted = f.receiver.udp_received.as_ref().map(|r| r.packets + r.lost);
            match (short, f.sender.udp_sent.as_ref(), counted) {
                // A far end that stops counting early (iperf3 at TEST_END): datagrams still
                // queued for it then are neither received nor lost in its figures.
                (Some(c), Some(s), Some(n)) if n < s.packets => {
                    let _ = writeln!(out, "     {}", c.render(s.packets, n));
                }
                _ => {
                    let _ = writeln!(out, "     DATAGRAMS UNACCOUNTED: sent != received + lost on some stream");
                }
            }
        }
        None => {}
    }
}

fn rr_summary(rr: &RrFigures, placement: Option<&str>, out: &mut String) {
    let _ = writeln!(
        out,
        "transactions: {} in all, {:.0}/s{}",
        rr.transactions,
        rr.transactions_per_second,
        if rr.lost > 0 || rr.late > 0 { format!(", {} lost, {} late", rr.lost, rr.late) } else { String::new() }
    );
    let l = &rr.latency_us;
    let _ = writeln!(
        out,
        "round trip, us: min {:.2}  mean {:.2}  stddev {:.2}  p50 {:.2}  p90 {:.2}  p99 {:.2}  p99.9 {:.2}  max {:.2}",
        l.min, l.mean, l.stddev, l.p50, l.p90, l.p99, l.p999, l.max
    );
    if let Some(c) = &rr.connect_latency_us {
        let _ = writeln!(
            out,
            "connect, us:    min {:.2}  mean {:.2}  stddev {:.2}  p50 {:.2}  p90 {:.2}  p99 {:.2}  p99.9 {:.2}  max {:.2}",
            c.min, c.mean, c.stddev, c.p50, c.p90, c.p99, c.p999, c.max
        );
    }
    if let Some(w) = &rr.receive_wakeup_us {
        let share = if rr.latency_us.p50 > 0.0 { 100.0 * w.p50 / rr.latency_us.p50 } else { 0.0 };
        let _ = writeln!(
            out,
            "of which kernel receive to requester (wakeup), us: p50 {:.2}  p99 {:.2} ({share:.0}% of the median round trip)",
            w.p50, w.p99
        );
    }
    if let Some(o) = &rr.one_way {
        for (name, d) in [("send", &o.send_delay_us), ("receive", &o.receive_delay_us)] {
            let _ = writeln!(
                out,
                "{name} delay ({} clock), us: min {:.2}  mean {:.2}  p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2}",
                o.clock, d.min, d.mean, d.p50, d.p90, d.p99, d.max
            );
        }
        let _ = writeln!(
            out,
            "lost: {} up (request), {} down (answer), {} not known which way; the far end received {}",
            o.lost_up, o.lost_down, o.lost_unknown, o.peer_received
        );
    }
    if let Some(p) = placement {
        let _ = writeln!(out, "placement: {p}");
    }
}

fn under_load_summary(idle: &RrFigures, loaded: &RrFigures, r: &TestResult, format: RateFormat, out: &mut String) {
    let _ = writeln!(out, "latency under load     trans/s     p50 us     p90 us     p99 us   p99.9 us     max us");
    for (name, x) in [("idle", idle), ("loaded", loaded)] {
        let l = &x.latency_us;
        let _ = writeln!(
            out,
            "{name:<18} {:>11.0} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.1}",
            x.transactions_per_second, l.p50, l.p90, l.p99, l.p999, l.max
        );
    }
    let ratio = if idle.latency_us.p99 > 0.0 { loaded.latency_us.p99 / idle.latency_us.p99 } else { 0.0 };
    let _ = writeln!(
        out,
        "under load the p99 round trip is {ratio:.1}x the idle one ({:+.1} us){}",
        loaded.latency_us.p99 - idle.latency_us.p99,
        if ratio > 1.5 { load_delay_cause(r) } else { String::new() }
    );
    if let Some(u) = &r.summary.under_load {
        under_load_flows(u, format, out);
    } else if let Some(load) = &r.summary.load {
        for flow in [Flow::Up, Flow::Down] {
            if let Some(f) = load.flow(flow) {
                let _ = writeln!(out, "load {:<4} receiver {}", flow.name(), format.format(f.receiver.bits_per_second));
            }
        }
    }
    if let Some(p) = &r.summary.placement {
        let _ = writeln!(out, "placement: {p}");
    }
}

/// What made the probes slower under load, as far as the result shows it: a queue in the path
/// (bufferbloat) only where a qdisc's counters show one (drops or a backlog); on one machine
/// (loopback), the load and the probes contending for its CPUs; otherwise, not shown.
fn load_delay_cause(r: &TestResult) -> String {
    let qdiscs =
        r.evidence.iter().flat_map(|e| [&e.local, &e.remote]).flatten().flat_map(|e| e.qdiscs.iter().flatten());
    let (drops, backlog) = qdiscs.fold((0, 0), |(d, b), q| (d + q.drops, b + q.backlog_packets));
    if drops > 0 || backlog > 0 {
        return format!(
            ": a queue in the path (bufferbloat): the qdiscs dropped {drops} and held a backlog of {backlog} packets"
        );
    }
    if on_one_machine(&r.test.remote) {
        return ": contention on one machine (loopback: the load flows and the probes share its CPUs), not a queue in a path".into();
    }
    ": the load delays the probes (a queue in the path or contention at the ends; no qdisc counters show a queue)"
        .into()
}

/// Whether the server's address (`HOST:PORT`, `[V6]:PORT`) is this machine's loopback.
fn on_one_machine(remote: &str) -> bool {
    let host = remote.rsplit_once(':').map_or(remote, |(h, _)| h).trim_start_matches('[').trim_end_matches(']');
    host.parse::<std::net::IpAddr>().is_ok_and(|a| a.is_loopback()) || host == "localhost"
}

/// Each load flow (direction, class, what its receiver got) and each probe (class, p50 and
/// p99 idle against loaded).
fn under_load_flows(u: &UnderLoad, format: RateFormat, out: &mut String) {
    let _ = writeln!(out, "load flow        class         receiver");
    for f in &u.flows {
        for flow in f.direction.flows() {
            let Some(s) = (match flow {
                Flow::Up => &f.up,
                Flow::Down => &f.down,
            }) else {
                continue;
            };
            let what = format!("{} {}", f.protocol, flow.name());
            let failed = f.error.as_deref().map_or(String::new(), |e| format!("  (failed: {e})"));
            let rate = format.format(s.receiver.bits_per_second);
            let _ = writeln!(out, "{what:<16} {:<9} {rate:>12}{failed}", f.class);
        }
    }
    let _ = writeln!(out, "latency probe   idle p50 us  loaded p50 us   idle p99 us  loaded p99 us  p99 loaded/idle");
    for p in &u.probes {
        let (Some(idle), Some(loaded)) = (&p.idle, &p.loaded) else {
            let why = p.error.as_deref().unwrap_or("no figures");
            let _ = writeln!(out, "{:<15} (failed: {why})", p.class);
            continue;
        };
        let (i, l) = (&idle.latency_us, &loaded.latency_us);
        let ratio = if i.p99 > 0.0 { format!("{:.1}x", l.p99 / i.p99) } else { "-".into() };
        let _ = writeln!(
            out,
            "{:<15} {:>11.2} {:>14.2} {:>13.2} {:>14.2} {ratio:>16}",
            p.class, i.p50, l.p50, i.p99, l.p99
        );
    }
}

fn cpu_line(c: &CpuUsage) -> String {
    let mut s = format!("{:.1}% of one CPU (user {:.1}%, system {:.1}%)", c.total_pct, c.user_pct, c.system_pct);
    // A peer that reports only its process (iperf3) says nothing of its machine.
    if c.cpus > 0 {
        let _ =
            write!(s, "; machine busy {:.1}% of {} CPUs (softirq {:.1}%)", c.host_busy_pct, c.cpus, c.host_softirq_pct);
    }
    if let Some(idle) = c.idle_pct {
        let _ = write!(s, "; idle headroom {idle:.1}%");
    }
    if let Some(load) = c.background_load_pct {
        let _ = write!(s, "; background load achieved {load:.1}% of a CPU per thread");
    }
    s
}

/// The far end's own figures (a target's): its idle share and its cost per unit of work on
/// one line, the build they are of on the next, then its counters, and the ones that count
/// trouble once more on a line of their own when any moved.
fn target_lines(t: &TargetReport, out: &mut String) {
    let mut parts = Vec::new();
    if let Some(idle) = t.idle_pct {
        parts.push(format!("idle {idle:.1}% (idle loop)"));
    }
    if let (Some(ns), Some(unit)) = (t.busy_ns_per_unit(), t.unit) {
        let mut cost = format!("busy {} ns per {}", cost_figure(ns), unit.name());
        if let (Some(i), Some(at)) = (t.instructions_per_unit(), t.ns_per_instruction) {
            let _ = write!(cost, " = {} instructions at {at} ns", cost_figure(i));
        }
        parts.push(cost);
    } else if let Some(busy) = t.busy_seconds {
        parts.push(format!("busy {busy:.3} s"));
    }
    if !parts.is_empty() {
        let _ = writeln!(out, "target: {}", parts.join("; "));
    }
    if let Some(b) = &t.build {
        let _ = writeln!(out, "target build: {b}");
    }
    let counters: Vec<String> = t.figures.counters.iter().map(|(n, v)| format!("{n} {v}")).collect();
    if !counters.is_empty() {
        let _ = writeln!(out, "target counters: {}", counters.join(", "));
    }
    let trouble: Vec<String> = t.figures.trouble().map(|(n, v)| format!("{n} {v}")).collect();
    if !trouble.is_empty() {
        let _ = writeln!(out, "target drops: {}", trouble.join(", "));
    }
}

/// The table of the quick characterization (`netchar` with no arguments): one row per test.
pub fn quick_table(rows: &[(String, TestResult)], format: RateFormat) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<10} {:<5} {:>15} {:>15} {:>12} {:>22} {:>8}",
        "test", "flow", "sender", "receiver", "datagrams/s", "retransmits / lost", "cpu"
    );
    for (name, r) in rows {
        for flow in [Flow::Up, Flow::Down] {
            let Some(f) = r.summary.flow(flow) else {
                continue;
            };
            let pps = f.receiver.udp_received.as_ref().map_or("-".to_string(), |u| {
                format_si(u.packets as f64 / f.receiver.seconds.max(1e-9), "").trim().to_string()
            });
            let lost = match (&f.receiver.udp_received, f.sender.retransmits) {
                (Some(u), _) => format!("{} ({:.3}%)", u.lost, u.loss_percent),
                (None, Some(r)) => r.to_string(),
                (None, None) => "-".to_string(),
            };
            let cpu = r.cpu.local.as_ref().map_or("-".to_string(), |c| format!("{:.0}%", c.total_pct));
            let exact = match f.packets_accounted {
                Some(false) => "  datagrams unaccounted!",
                None if !f.bytes_match => "  bytes differ!",
                _ => "",
            };
            let _ = writeln!(
                out,
                "{:<10} {:<5} {:>15} {:>15} {:>12} {:>22} {:>8}{exact}",
                name,
                flow.name(),
                format.format(f.sender.bits_per_second),
                format.format(f.receiver.bits_per_second),
                pps,
                lost,
                cpu,
            );
        }
        if let Some(e) = &r.error {
            let _ = writeln!(out, "{name:<10} error: {e}");
        }
    }
    let _ = writeln!(
        out,
        "(rates over each test's active time; cpu: the netchar process, user+system, % of one CPU: client and in-process server together)"
    );
    let latency: Vec<_> = rows.iter().filter_map(|(n, r)| r.summary.rr.as_ref().map(|rr| (n, rr, r))).collect();
    if !latency.is_empty() {
        let _ = writeln!(
            out,
            "\n{:<10} {:>12} {:>9} {:>9} {:>9} {:>9}  placement",
            "latency", "trans/s", "p50 us", "p99 us", "p99.9 us", "max us"
        );
        for (name, rr, r) in latency {
            let l = &rr.latency_us;
            let _ = writeln!(
                out,
                "{name:<10} {:>12.0} {:>9.2} {:>9.2} {:>9.2} {:>9.1}  {}",
                rr.transactions_per_second,
                l.p50,
                l.p99,
                l.p999,
                l.max,
                r.summary.placement.as_deref().unwrap_or("-")
            );
        }
    }
    out
}

/// One echo test as the eCos nc_test master printed it, plus the latency percentiles:
/// `TCP echo - 1280 bufs of 1024 bytes in 2.03 seconds - 630.54 KB/S - 5.1654 Mbit/S`.
pub fn echo_line(r: &TestResult) -> String {
    let spec = &r.test.spec;
    let Some(opts) = &spec.rr else { return String::new() };
    let Some(rr) = &r.summary.rr else { return String::new() };
    let seconds = r.streams.iter().filter(|s| s.role == Role::Sender).map(|s| s.seconds).fold(0.0, f64::max);
    // Both directions count: each transaction moves the buffer there and back.
    let bufs = 2 * rr.transactions;
    let bytes = bufs as f64 * opts.request_bytes as f64;
    let kbps = if seconds > 0.0 { bytes / seconds / 1024.0 } else { 0.0 };
    let mbps = if seconds > 0.0 { bytes * 8.0 / seconds / 1e6 } else { 0.0 };
    let mut line = format!(
        "{} echo - {bufs} bufs of {} bytes in {seconds:.2} seconds - {kbps:.2} KB/S - {mbps:.4} Mbit/S (M = 10^6)",
        if opts.udp { "UDP" } else { "TCP" },
        opts.request_bytes
    );
    if let Some(n) = opts.pause_every {
        let _ = write!(line, " - {:.0}ms delay after {n} packets", opts.pause_seconds * 1e3);
    }
    let _ = write!(
        line,
        ", {} out of sequence, {} lost; round trip p50 {:.1} us, p99 {:.1} us, max {:.1} us",
        rr.late, rr.lost, rr.latency_us.p50, rr.latency_us.p99, rr.latency_us.max
    );
    if let Some(p) = &r.summary.placement {
        let _ = write!(line, " [{p}]");
    }
    line.push('\n');
    verify_lines(r, &mut line);
    line
}

/// One one-way transfer as the eCos nc_test master printed it:
/// `UDP send - 628 bufs of 1024 bytes in 1.46 seconds - 430.14 KB/S - 3.5237 Mbit/S`, counted
/// at the receiving end, with out-of-sequence and lost datagrams for UDP.
pub fn transfer_line(r: &TestResult, what: &str) -> String {
    let Some(f) = r.summary.up.as_ref().or(r.summary.down.as_ref()) else { return String::new() };
    // A datagram list (--pattern 640x1024) sets the size; otherwise the block.
    let listed = r.test.spec.udp.as_ref().and_then(|u| u.pattern.as_ref()).and_then(|p| p.sizes.first().map(|s| s.1));
    let size = listed.unwrap_or(r.test.spec.block_bytes).max(1);
    let rx = &f.receiver;
    let bufs = rx.udp_received.as_ref().map_or(rx.total_bytes / size, |u| u.packets);
    let secs = rx.seconds + r.test.spec.omit_seconds;
    let kbps = if secs > 0.0 { rx.total_bytes as f64 / secs / 1024.0 } else { 0.0 };
    let mbps = if secs > 0.0 { rx.total_bytes as f64 * 8.0 / secs / 1e6 } else { 0.0 };
    let mut line = format!(
        "{what} - {bufs} bufs of {size} bytes in {secs:.2} seconds - {kbps:.2} KB/S - {mbps:.4} Mbit/S (M = 10^6)"
    );
    if let Some(u) = &rx.udp_received {
        let _ = write!(line, ", {} out of sequence, {} lost", u.out_of_order, u.lost);
    }
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{peer_result, short_caveat};
    use crate::Reporter;
    use netchar_model::{IntervalStream, LossBreakdown, UdpSent};

    fn sender_lines(sent: u64, behind: Option<u64>) -> String {
        let mut f = FlowSummary::default();
        f.sender.udp_sent = Some(UdpSent { packets: sent, behind_schedule: behind, ..Default::default() });
        let mut out = String::new();
        udp_summary(&f, None, &mut out);
        out
    }

    #[test]
    fn a_silent_far_end_shows_only_this_ends_rows_and_the_protocols_caveat() {
        let note = Caveat::always(Some(Flow::Up), "the peer reports nothing back over TCP");
        let r = peer_result(FarEnd::SilentOn(vec![Flow::Up, Flow::Down]), vec![note]);
        let out = summary(&r, RateFormat::AutoBits);
        assert!(out.contains("up   sender   (client)"), "{out}");
        assert!(!out.contains("(server)"), "the silent far end's row is shown:\n{out}");
        assert!(out.contains("     the peer reports nothing back over TCP\n"), "{out}");
        assert!(!out.contains("every byte arrived"), "{out}");
        // The same figures from a far end that reports: both rows, the byte check.
        let out = summary(&peer_result(FarEnd::Reports, Vec::new()), RateFormat::AutoBits);
        assert!(out.contains("receiver (server)") && out.contains("every byte arrived"), "{out}");
    }

    #[test]
    fn traffic_options_the_binding_and_the_path_mtu_are_said() {
        let note = Caveat::always(None, "--tos applies to this end's packets only");
        let mut r = peer_result(FarEnd::Reports, vec![note]);
        r.test.spec.ip = netchar_model::IpOptions { tos: Some(0xb8), flowlabel: Some(0x12345), dont_fragment: true };
        r.bind = Some(netchar_model::LocalBinding {
            address: Some("10.0.0.3".parse().unwrap()),
            port: Some(7000),
            device: Some("eth1".into()),
        });
        for (i, s) in r.streams.iter_mut().enumerate() {
            s.path_mtu = Some(1280 + 100 * i as u32);
        }
        let head = describe_test(&r.test);
        assert!(head.ends_with(", TOS 0xb8 (DSCP ef), flow label 0x12345, don't fragment"), "{head}");
        let out = summary(&r, RateFormat::AutoBits);
        assert!(out.contains("\n--tos applies to this end's packets only\n"), "{out}");
        assert!(
            out.contains("client bound: source 10.0.0.3, data streams from port 7000 up, interface eth1\n"),
            "{out}"
        );
        assert!(out.contains("path MTU (don't fragment): client 1280, server 1380 bytes\n"), "{out}");
    }

    #[test]
    fn a_short_receivers_caveat_is_said_with_the_figures_only_when_short() {
        let short = crate::text::tests::short_caveat();
        let mut r = peer_result(FarEnd::Reports, vec![short]);
        let f = r.summary.up.as_mut().unwrap();
        f.bytes_match = false;
        f.receiver.total_bytes = f.sender.total_bytes - 1000;
        let (sent, counted) = (f.sender.total_bytes, f.receiver.total_bytes);
        let out = summary(&r, RateFormat::AutoBits);
        assert!(out.contains(&format!("{sent} written, {counted} counted by the peer, 1000 in flight")), "{out}");
        assert!(!out.contains("BYTES DIFFER"), "{out}");
        // Longer than sent is no case of the caveat's.
        let f = r.summary.up.as_mut().unwrap();
        f.receiver.total_bytes = f.sender.total_bytes + 5;
        let out = summary(&r, RateFormat::AutoBits);
        assert!(out.contains("BYTES DIFFER") && !out.contains("in flight"), "{out}");
    }

    #[test]
    fn udp_sides_say_their_datagrams_per_second() {
        let f = FlowSummary {
            sender: netchar_model::SideTotals {
                packets_per_second: Some(850_000.0),
                udp_sent: Some(netchar_model::UdpSent { packets: 850_000, ..Default::default() }),
                ..Default::default()
            },
            receiver: netchar_model::SideTotals {
                packets_per_second: Some(849.5),
                udp_received: Some(netchar_model::UdpReceived { packets: 849, ..Default::default() }),
                ..Default::default()
            },
            ..Default::default()
        };
        let mut out = String::new();
        udp_summary(&f, None, &mut out);
        assert!(out.contains("sender: 850000 datagrams sent (850 k/s), 0 refused"), "{out}");
        assert!(out.contains("receiver: 849 datagrams (850/s), 0 lost"), "{out}");
    }

    #[test]
    fn fixed_shape_far_ends_name_their_direction_and_show_their_caveats() {
        let sink = Caveat::always(Some(Flow::Up), "the sink reports nothing");
        let r = peer_result(FarEnd::Sink, vec![sink]);
        assert!(describe_test(&r.test).starts_with("TCP up (client sends) with some-peer server"));
        let out = summary(&r, RateFormat::AutoBits);
        assert!(out.contains("up   sender   (client)") && out.contains("     the sink reports nothing\n"), "{out}");
        assert!(!out.contains("receiver"), "{out}");
        let mut echo = peer_result(FarEnd::Echoes, Vec::new());
        echo.test.spec.direction = netchar_model::Direction::Up;
        assert!(describe_test(&echo.test).starts_with("TCP echo (client sends, the server returns it)"));
    }

    #[test]
    fn a_sender_behind_its_schedule_is_named_once_it_moves_the_rate() {
        let said = sender_lines(3277, Some(2724));
        assert!(said.contains("sender fell behind its schedule: 2724 datagrams"), "{said}");
        // One datagram owed at the deadline of 42,459 is 0.002%: JSON has it, the text does not.
        for quiet in [sender_lines(42_459, Some(1)), sender_lines(42_459, Some(0)), sender_lines(42_459, None)] {
            assert!(!quiet.contains("behind"), "{quiet}");
        }
    }

    #[test]
    fn the_loss_breakdown_is_said_under_the_receiver_with_what_is_not_known() {
        let mut f = FlowSummary::default();
        f.receiver.udp_received = Some(netchar_model::UdpReceived { packets: 600, lost: 400, ..Default::default() });
        let mut b = LossBreakdown::split(
            400,
            [("sender_qdisc", Some(397)), ("sender_interface", Some(0)), ("receiver_socket", None)],
        );
        f.loss_breakdown = Some(b.clone());
        let mut out = String::new();
        udp_summary(&f, None, &mut out);
        assert!(
            out.contains(
                "     where the 400 lost went: sender's qdisc 397, sender's interface 0, unexplained 3 (between the \
                 ends, or where no counter sees); not known: receiver's interface, receiver's stack, receiver's socket\n"
            ),
            "{out}"
        );
        assert!(!out.contains("approximate"), "{out}");
        b.approximate = true;
        b.notes = vec!["the sender used UDP GSO".into()];
        f.loss_breakdown = Some(b);
        let mut out = String::new();
        udp_summary(&f, None, &mut out);
        assert!(out.contains("     approximate: the sender used UDP GSO\n"), "{out}");
        // Nothing lost: nothing to say.
        f.loss_breakdown = Some(LossBreakdown::split(0, [("sender_qdisc", Some(0))]));
        let mut out = String::new();
        udp_summary(&f, None, &mut out);
        assert!(!out.contains("lost went"), "{out}");
    }

    /// One interval of one stream: `kind` is `tcp`, `udp` or `rr`.
    fn interval(kind: &str, start: f64) -> IntervalRecord {
        let mut sample = serde_json::json!({
            "start": start, "end": start + 1.0, "bytes": 1000, "bits_per_second": 8000.0, "omitted": false,
        });
        match kind {
            "udp" => {
                sample["udp_received"] = serde_json::to_value(netchar_model::UdpReceived {
                    packets: 40,
                    lost: 2,
                    jitter_ms: 0.25,
                    ..Default::default()
                })
                .unwrap()
            }
            "rr" => {
                let mut rr = RrFigures { transactions: 1234, transactions_per_second: 1234.0, ..Default::default() };
                rr.latency_us.p50 = 41.5;
                sample["rr"] = serde_json::to_value(rr).unwrap();
            }
            _ => {
                sample["retransmits"] = 3.into();
                sample["cwnd_bytes"] = 65536.into();
                sample["rtt_us"] = 100.into();
            }
        }
        let stream = IntervalStream {
            id: 1,
            flow: Flow::Up,
            role: Role::Receiver,
            sample: serde_json::from_value(sample).unwrap(),
        };
        IntervalRecord { start, end: start + 1.0, omitted: false, streams: vec![stream], sum: vec![] }
    }

    #[test]
    fn interval_headers_fit_the_test_kind() {
        let header = |kind: &str| TextReporter::new(RateFormat::default()).on_interval(&interval(kind, 0.0));
        let tcp = header("tcp");
        assert!(tcp.starts_with("[ ID] Flow Role      Interval        Transfer      Bitrate         Retr"), "{tcp}");
        let udp = header("udp");
        assert!(udp.contains("Datagrams  Lost so far   Jitter ms"), "{udp}");
        assert!(!udp.contains("Retr") && !udp.contains("Cwnd"), "{udp}");
        assert!(udp.contains("           40            2       0.250   (0.000)\n"), "{udp}");
        let rr = header("rr");
        assert!(rr.contains("Trans     Trans/s     p50 us     p99 us"), "{rr}");
        assert!(!rr.contains("Retr") && !rr.contains("Cwnd"), "{rr}");
        assert!(rr.contains("         1234        1234       41.5        0.0\n"), "{rr}");
    }

    #[test]
    fn a_second_phase_of_intervals_is_labelled() {
        let mut rep = TextReporter::new(RateFormat::default());
        let first = rep.on_interval(&interval("rr", 0.0)) + &rep.on_interval(&interval("rr", 1.0));
        assert_eq!(first.matches("[ ID]").count(), 1, "{first}");
        assert!(!first.contains("under load"), "{first}");
        let second = rep.on_interval(&interval("rr", 0.0));
        assert!(
            second.starts_with(
                "under load (the lines above: idle, the probe alone; below: the probe beside the load flows)\n[ ID]"
            ),
            "{second}"
        );
    }

    fn under_load_result(remote: &str) -> TestResult {
        let mut r = peer_result(FarEnd::default(), vec![]);
        r.test.remote = remote.into();
        r.test.concurrent_tests = 9;
        let mut idle = RrFigures::default();
        idle.latency_us.p99 = 50.0;
        let mut loaded = RrFigures::default();
        loaded.latency_us.p99 = 500.0;
        r.summary.rr_idle = Some(idle.clone());
        r.summary.rr_loaded = Some(loaded.clone());
        r.summary.rr = Some(loaded);
        let flow: netchar_model::LoadFlow = serde_json::from_value(serde_json::json!({
            "protocol": "tcp", "direction": "up", "dscp": null, "class": "BE", "start": 1.0, "intervals": [], "error": null,
        }))
        .unwrap();
        r.summary.under_load = Some(Box::new(UnderLoad {
            load: "rrul".into(),
            flows: vec![flow; 8],
            probes: vec![netchar_model::LatencyProbe::default(); 4],
        }));
        r
    }

    #[test]
    fn under_load_names_contention_on_one_machine_and_a_queue_only_where_counters_show_one() {
        let r = under_load_result("127.0.0.1:5300");
        let out = summary(&r, RateFormat::default());
        assert!(out.contains("10.0x the idle one (+450.0 us): contention on one machine"), "{out}");
        assert!(!out.contains("bufferbloat"), "{out}");
        // The flows and probes are companions of one test, not other tests.
        assert!(!out.contains("tests at once") && !out.contains("other test"), "{out}");
        let out = summary(&under_load_result("192.0.2.7:5300"), RateFormat::default());
        assert!(out.contains("no qdisc counters show a queue"), "{out}");
        assert!(!out.contains("bufferbloat"), "{out}");
        let mut r = under_load_result("192.0.2.7:5300");
        let q: netchar_model::QdiscCounters = serde_json::from_value(serde_json::json!({
            "kind": "fq_codel", "handle": "0:", "parent": "root", "packets": 100, "bytes": 1, "drops": 7,
            "overlimits": 0, "requeues": 0, "backlog_bytes": 0, "backlog_packets": 0,
        }))
        .unwrap();
        let local = netchar_model::Evidence { qdiscs: Some(vec![q]), ..Default::default() };
        r.evidence = Some(netchar_model::EvidenceReport { local: Some(local), ..Default::default() });
        let out = summary(&r, RateFormat::default());
        assert!(out.contains("a queue in the path (bufferbloat): the qdiscs dropped 7"), "{out}");
        // Beyond its companions, another test is said as one.
        let mut r = under_load_result("127.0.0.1:5300");
        r.test.concurrent_tests = 13;
        let out = summary(&r, RateFormat::default());
        assert!(
            out.contains(
                "note: the server ran 1 other test(s) at once besides this one and its 11 load flows and probes"
            ),
            "{out}"
        );
    }

    #[test]
    fn no_loss_breakdown_for_no_loss_even_when_the_counters_moved() {
        let mut f = FlowSummary::default();
        f.receiver.udp_received = Some(netchar_model::UdpReceived { packets: 600, lost: 0, ..Default::default() });
        let b = LossBreakdown::split(0, [("receiver_interface", Some(8192))]);
        assert!(b.approximate && b.counted_beyond_lost == 8192, "{b:?}");
        f.loss_breakdown = Some(b);
        let mut out = String::new();
        udp_summary(&f, None, &mut out);
        assert!(!out.contains("lost went") && !out.contains("approximate"), "{out}");
    }
}
