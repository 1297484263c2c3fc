//! The block-size tables of the suites, as the tools they stand for printed them: netio's
//! (`netchar suite netio`: per block size the receiving end's rate, TCP and UDP, each way, in
//! MB/s of 2^20 bytes, laid out as the Keil MDK netio write-up's) and stackthru's (`netchar suite sizes`: per protocol and block size,
//! real and system time, MB/s, Mbit/s and frames/s, client sending), and netio's own client
//! lines when netchar is the client of a netio server (`--proto netio`).

use netchar_model::{Flow, FlowSummary, TestInfo, TestKind, TestResult};
use std::fmt::Write;

/// A column of netio's table: a protocol, one way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetioColumn {
    /// TCP or UDP.
    pub kind: TestKind,
    /// Client to server (netio's Tx) or back (Rx).
    pub flow: Flow,
}

impl NetioColumn {
    /// Every column in netio's order: TCP-tx, TCP-rx, UDP-tx, UDP-rx.
    pub const ALL: [NetioColumn; 4] = [
        NetioColumn { kind: TestKind::Tcp, flow: Flow::Up },
        NetioColumn { kind: TestKind::Tcp, flow: Flow::Down },
        NetioColumn { kind: TestKind::Udp, flow: Flow::Up },
        NetioColumn { kind: TestKind::Udp, flow: Flow::Down },
    ];

    fn title(&self) -> String {
        let way = if self.flow == Flow::Up { "tx" } else { "rx" };
        format!("{}-{way}", self.kind.name().to_uppercase())
    }
}

/// A flow's rate for the table, bits per second: the receiving end's where it measured one,
/// else the sending end's (a TCP netio server reports nothing, so netio's own Tx figure).
fn flow_bps(f: &FlowSummary) -> f64 {
    if f.receiver.total_bytes > 0 {
        f.receiver.bits_per_second
    } else {
        f.sender.bits_per_second
    }
}

/// The cells a result fills: (column, rate in bits per second), a flow each. A native test runs
/// one way; a netio client's result holds both ways of a size.
fn netio_cells(r: &TestResult) -> Vec<(NetioColumn, f64)> {
    let kind = r.test.spec.kind;
    [(Flow::Up, &r.summary.up), (Flow::Down, &r.summary.down)]
        .into_iter()
        .filter_map(|(flow, f)| f.as_ref().map(|f| (NetioColumn { kind, flow }, flow_bps(f))))
        .collect()
}

/// netio's table, as the Keil MDK netio write-up lays it out: a row per block size, a column
/// per protocol and direction that runs (TCP-tx, TCP-rx, UDP-tx, UDP-rx), in MB/s of 2^20
/// bytes; `---` where a size has no figure for the column (it did not run there, or failed).
/// Rows are printed as they complete (`live`: each size's tests run together, netchar's own
/// suite) or all at the job's end (a netio client runs each protocol's sizes in turn).
#[derive(Debug)]
pub struct NetioTableReporter {
    columns: Vec<NetioColumn>,
    live: bool,
    header_done: bool,
    /// Sizes not printed yet, in their order, with their cells (bits per second).
    rows: Vec<(u64, Vec<Option<f64>>)>,
}

impl NetioTableReporter {
    /// A table of `columns` (in netio's order whatever the order given); `live`: print each
    /// row once its cells are in.
    pub fn new(columns: &[NetioColumn], live: bool) -> Self {
        let columns = NetioColumn::ALL.into_iter().filter(|c| columns.contains(c)).collect();
        Self { columns, live, header_done: false, rows: Vec::new() }
    }

    fn header(&mut self) -> String {
        if std::mem::replace(&mut self.header_done, true) {
            return String::new();
        }
        let titles: String = self.columns.iter().map(|c| format!("   {:<10}|", c.title())).collect();
        let rules: String = self.columns.iter().map(|_| " ----------- |").collect();
        format!("| Packet size |{titles}\n| ----------- |{rules}\n")
    }

    fn add(&mut self, r: &TestResult) {
        let size = r.test.spec.block_bytes;
        let n = self.columns.len();
        let at = match self.rows.iter().position(|(s, _)| *s == size) {
            Some(i) => i,
            None => {
                self.rows.push((size, vec![None; n]));
                self.rows.len() - 1
            }
        };
        for (column, bps) in netio_cells(r) {
            if let Some(c) = self.columns.iter().position(|k| *k == column) {
                self.rows[at].1[c] = Some(bps);
            }
        }
    }

    fn row(size: u64, cells: &[Option<f64>]) -> String {
        let cells: Vec<String> = cells
            .iter()
            .map(|c| c.map_or_else(|| format!("{:^11}", "---"), |bps| format!("{:>6.1} MB/s", bps / 8.0 / 1048576.0)))
            .collect();
        format!("| {size:>5} bytes | {} |\n", cells.join(" | "))
    }

    /// The rows whose cells are all in (with `all`, every row), taken out of the table.
    fn take_rows(&mut self, all: bool) -> String {
        let mut out = String::new();
        while let Some((size, cells)) = self.rows.first() {
            if !all && cells.iter().any(Option::is_none) {
                break;
            }
            out.push_str(&Self::row(*size, cells));
            self.rows.remove(0);
        }
        out
    }

    /// The header (unless shown), every row left and the footer.
    fn table(&mut self) -> String {
        let mut out = self.header();
        out.push_str(&self.take_rows(true));
        out + &self.footer()
    }

    fn footer(&self) -> String {
        let udp = self.columns.iter().any(|c| c.kind == TestKind::Udp);
        let mut out = "(receiving end's rate".to_string();
        if udp {
            out.push_str("; UDP at maximum rate, so UDP figures include what the receiver could take");
        }
        out + ")\n"
    }
}

impl Default for NetioTableReporter {
    /// netio's four columns, rows as they complete.
    fn default() -> Self {
        Self::new(&NetioColumn::ALL, true)
    }
}

impl crate::Reporter for NetioTableReporter {
    fn on_start(&mut self, _: &TestInfo) -> String {
        if self.live {
            self.header()
        } else {
            String::new()
        }
    }
    fn on_finish(&mut self, result: &TestResult) -> String {
        self.add(result);
        if self.live {
            self.take_rows(false)
        } else {
            String::new()
        }
    }
    /// The rows not shown yet and the footer; a table shown only now (after a netio client's
    /// lines) after an empty line.
    /// Then the user's commands around each test (`--step-cmd`), a line each.
    fn on_job_end(&mut self, results: &[TestResult]) -> String {
        let gap = if self.header_done { "" } else { "\n" };
        format!("{gap}{}{}", self.table(), netio_hook_lines(results.iter()))
    }
    fn on_results(&mut self, results: &[crate::Saved]) -> String {
        let ran: Vec<NetioColumn> = results.iter().flat_map(|s| netio_cells(&s.result)).map(|(c, _)| c).collect();
        let mut table = Self::new(&ran, false);
        for s in results {
            table.add(&s.result);
        }
        table.table() + &netio_hook_lines(results.iter().map(|s| &s.result))
    }
}

/// The step commands of a netio table's tests, a line each with the test they ran around (a
/// row of the table holds four tests).
fn netio_hook_lines<'a>(results: impl Iterator<Item = &'a TestResult>) -> String {
    let mut out = String::new();
    for r in results {
        let lines = crate::hooks::hook_lines(r);
        let way = if r.test.spec.direction == netchar_model::Direction::Down { "rx" } else { "tx" };
        let kind = r.test.spec.kind.name().to_uppercase();
        for line in lines {
            out.push_str(&format!("{line} ({} bytes, {kind}-{way})\n", r.test.spec.block_bytes));
        }
    }
    out
}

/// stackthru's table: a row per test as it ends. A transfer of a fixed size (`suite sizes -n`)
/// adds stackthru's transfer figures: the bytes sent, the whole blocks (Transfer.Blocks) and
/// the last, shorter block (Transfer.Size.X-Block, 0 when the size divides the transfer) and
/// the bytes received.
#[derive(Debug, Default)]
pub struct SizesTableReporter {
    header_done: bool,
}

/// The transfer of a fixed size of a result: the bytes its sender wrote, its whole blocks and
/// the bytes of the shorter last block (0 for none). None for a timed test.
pub fn transfer_blocks(r: &TestResult) -> Option<(u64, u64, u64)> {
    let netchar_model::EndCondition::Bytes(_) = r.test.spec.end else { return None };
    let size = r.test.spec.block_bytes.max(1);
    let sent = r.summary.up.as_ref().or(r.summary.down.as_ref())?.sender.total_bytes;
    Some((sent, sent / size, sent % size))
}

impl SizesTableReporter {
    fn header(&mut self, transfer: bool) -> String {
        if std::mem::replace(&mut self.header_done, true) {
            return String::new();
        }
        let mut out = format!("{:<5} {:>7}", "proto", "block");
        if transfer {
            let _ = write!(out, " {:>12} {:>10} {:>7} {:>12}", "sent", "blocks", "x-block", "received");
        }
        let _ = writeln!(
            out,
            " {:>9} {:>9} {:>12} {:>13} {:>13}",
            "real s", "sys s", "MB/s (2^20)", "Mbit/s (10^6)", "frames/s"
        );
        out
    }

    /// The row of a client-sends test; nothing for a result without an up flow.
    fn row(r: &TestResult) -> String {
        let Some(f) = r.summary.up.as_ref() else { return String::new() };
        let size = r.test.spec.block_bytes;
        let bps = f.receiver.bits_per_second;
        let frames = match &f.receiver.udp_received {
            // UDP: one datagram per frame (payloads above the MTU are fragmented).
            Some(u) => u.packets as f64 / f.receiver.seconds.max(1e-9),
            // TCP: an estimate, as stackthru's: one frame per block, at most a full segment
            // of 1448 payload bytes (MTU 1500 with timestamps) each.
            None => bps / 8.0 / size.min(1448) as f64,
        };
        let sys = r.cpu.local.as_ref().map_or(0.0, |c| c.system_seconds);
        let mut out = format!("{:<5} {size:>7}", r.test.spec.kind.name().to_uppercase());
        if let Some((sent, blocks, rest)) = transfer_blocks(r) {
            let _ = write!(out, " {sent:>12} {blocks:>10} {rest:>7} {:>12}", f.receiver.total_bytes);
        }
        let _ = writeln!(
            out,
            " {:>9.3} {:>9.3} {:>12.3} {:>13.3} {:>13.0}",
            f.receiver.seconds,
            sys,
            bps / 8.0 / 1048576.0,
            bps / 1e6,
            frames
        );
        for line in crate::hooks::hook_lines(r) {
            let _ = writeln!(out, "{:>13} {line}", "");
        }
        out
    }
}

impl crate::Reporter for SizesTableReporter {
    fn on_start(&mut self, info: &TestInfo) -> String {
        self.header(matches!(info.spec.end, netchar_model::EndCondition::Bytes(_)))
    }
    fn on_finish(&mut self, result: &TestResult) -> String {
        Self::row(result)
    }
    fn on_results(&mut self, results: &[crate::Saved]) -> String {
        let transfer = results.first().is_some_and(|s| transfer_blocks(&s.result).is_some());
        let mut out = self.header(transfer);
        for s in results {
            out.push_str(&Self::row(&s.result));
        }
        out
    }
}

/// netchar as the client of a netio server (`netchar suite netio --proto netio`): netio's own
/// lines, a header, then per block size as it ends `Packet size  1k bytes:  52.23 MByte/s Tx,
/// 55.97 MByte/s Rx.` (the result's title) with a note in brackets, and `Done.` after a run
/// that ended well.
#[derive(Debug, Default)]
pub struct NetioLinesReporter {
    header_done: bool,
    /// The protocol whose lines are running: a run of TCP then UDP (`--tcp -u`) says when the
    /// second starts, as netio does.
    kind: Option<TestKind>,
    /// The error (netio's note) each size's line showed, to tell a run that failed afterwards.
    shown: Vec<Option<String>>,
    /// Lines shown since the last protocol started: none means it failed before any size.
    shown_of_kind: usize,
}

impl NetioLinesReporter {
    fn header(&mut self, info: &TestInfo) -> String {
        let proto = info.spec.kind.name().to_uppercase();
        if std::mem::replace(&mut self.header_done, true) {
            if self.kind.replace(info.spec.kind).is_some_and(|k| k != info.spec.kind) {
                self.shown_of_kind = 0;
                return format!("\n{proto} connection established.\n");
            }
            return String::new();
        }
        self.kind = Some(info.spec.kind);
        let tx_only = if info.spec.direction == netchar_model::Direction::Up { ", Tx only" } else { "" };
        format!(
            "netchar {}: netio client of {} ({proto}{tx_only})\n\n{proto} connection established.\n",
            env!("CARGO_PKG_VERSION"),
            info.remote
        )
    }

    fn line(&mut self, r: &TestResult) -> String {
        self.shown.push(r.error.clone());
        self.shown_of_kind += 1;
        let note = r.error.as_ref().map(|n| format!("  ({n})")).unwrap_or_default();
        format!("{}{note}\n", r.test.title.as_deref().unwrap_or_default())
    }
}

impl crate::Reporter for NetioLinesReporter {
    fn on_start(&mut self, info: &TestInfo) -> String {
        self.header(info)
    }
    fn on_finish(&mut self, result: &TestResult) -> String {
        self.line(result)
    }
    /// `Done.`, unless the run failed: then the final results carry its error where their
    /// lines showed none (or no size ran at all).
    fn on_job_end(&mut self, results: &[TestResult]) -> String {
        let ended_well = !results.is_empty()
            && self.shown_of_kind > 0
            && results.len() == self.shown.len()
            && results.iter().zip(&self.shown).all(|(r, shown)| r.error == *shown);
        if ended_well {
            "Done.\n".into()
        } else {
            String::new()
        }
    }
    fn on_results(&mut self, results: &[crate::Saved]) -> String {
        let mut out = String::new();
        for s in results {
            out.push_str(&self.header(&s.result.test));
            out.push_str(&self.line(&s.result));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Reporter;
    use netchar_model::{EndCondition, SideTotals};

    /// A test of `kind` and `size` whose `flows` received at `mb` MB/s (2^20 bytes).
    fn result(kind: TestKind, size: u64, flows: &[(Flow, f64)]) -> TestResult {
        let mut r: TestResult = serde_json::from_str(include_str!("../tests/fixtures/tcp.json")).unwrap();
        r.test.spec.kind = kind;
        r.test.spec.block_bytes = size;
        r.summary.up = None;
        r.summary.down = None;
        for &(flow, mb) in flows {
            let receiver = SideTotals { total_bytes: 1, bits_per_second: mb * 8.0 * 1048576.0, ..Default::default() };
            let f = Some(FlowSummary { receiver, ..Default::default() });
            if flow == Flow::Up {
                r.summary.up = f;
            } else {
                r.summary.down = f;
            }
        }
        r
    }

    /// netchar's own suite with a size list: a row per size as its four tests end, `---`
    /// where a column did not run for the size.
    #[test]
    fn netio_table_has_a_row_per_size_and_a_column_per_way() {
        let (tcp, udp) = (TestKind::Tcp, TestKind::Udp);
        let mut t = NetioTableReporter::new(&NetioColumn::ALL, true);
        let info = result(tcp, 256, &[]).test;
        let mut out = t.on_start(&info);
        for r in [
            result(tcp, 256, &[(Flow::Up, 9.8)]),
            result(tcp, 256, &[(Flow::Down, 4.7)]),
            result(udp, 256, &[(Flow::Up, 3.0)]),
            result(udp, 256, &[(Flow::Down, 4.4)]),
            result(tcp, 4000, &[(Flow::Up, 8.0)]),
            result(tcp, 4000, &[(Flow::Down, 10.1)]),
        ] {
            out.push_str(&t.on_finish(&r));
        }
        out.push_str(&t.on_job_end(&[]));
        assert_eq!(
            out,
            "| Packet size |   TCP-tx    |   TCP-rx    |   UDP-tx    |   UDP-rx    |\n\
             | ----------- | ----------- | ----------- | ----------- | ----------- |\n\
             |   256 bytes |    9.8 MB/s |    4.7 MB/s |    3.0 MB/s |    4.4 MB/s |\n\
             |  4000 bytes |    8.0 MB/s |   10.1 MB/s |     ---     |     ---     |\n\
             (receiving end's rate; UDP at maximum rate, so UDP figures include what the receiver could take)\n"
        );
    }

    /// A netio client's results (both ways of a size in one result, TCP's sizes then UDP's)
    /// make one table at the end, after an empty line; Tx only has the tx columns.
    #[test]
    fn netio_table_of_a_netio_client_comes_at_the_end() {
        let (tcp, udp) = (TestKind::Tcp, TestKind::Udp);
        let cols = [NetioColumn { kind: tcp, flow: Flow::Up }, NetioColumn { kind: udp, flow: Flow::Up }];
        let mut t = NetioTableReporter::new(&cols, false);
        let mut out = String::new();
        for r in [result(tcp, 1024, &[(Flow::Up, 1.0)]), result(udp, 1024, &[(Flow::Up, 2.0)])] {
            out.push_str(&t.on_start(&r.test));
            out.push_str(&t.on_finish(&r));
        }
        out.push_str(&t.on_job_end(&[]));
        assert_eq!(
            out,
            "\n| Packet size |   TCP-tx    |   UDP-tx    |\n\
             | ----------- | ----------- | ----------- |\n\
             |  1024 bytes |    1.0 MB/s |    2.0 MB/s |\n\
             (receiving end's rate; UDP at maximum rate, so UDP figures include what the receiver could take)\n"
        );
    }

    /// A netio client's run of TCP then UDP: the second protocol says it started, as netio
    /// does, and `Done.` ends the run; a protocol that failed before any size leaves it out.
    #[test]
    fn netio_lines_of_two_protocols() {
        let (mut tcp, mut udp) = (result(TestKind::Tcp, 1024, &[]), result(TestKind::Udp, 1024, &[]));
        tcp.test.title = Some("Packet size  1k bytes: tcp".into());
        udp.test.title = Some("Packet size  1k bytes: udp".into());
        let mut r = NetioLinesReporter::default();
        let mut out = r.on_start(&tcp.test) + &r.on_finish(&tcp);
        out += &(r.on_start(&udp.test) + &r.on_finish(&udp));
        out += &r.on_job_end(&[tcp.clone(), udp.clone()]);
        let tail = "TCP connection established.\nPacket size  1k bytes: tcp\n\nUDP connection established.\n\
                    Packet size  1k bytes: udp\nDone.\n";
        assert!(out.ends_with(tail), "{out}");
        let mut r = NetioLinesReporter::default();
        let _ = r.on_start(&tcp.test) + &r.on_finish(&tcp) + &r.on_start(&udp.test);
        assert_eq!(r.on_job_end(std::slice::from_ref(&tcp)), "", "UDP ran no size");
    }

    /// stackthru's transfer figures of a 256 MB (2^28 bytes) transfer in 1448-byte blocks:
    /// 185383 whole blocks and a last one of 872 bytes (stackthru computes it from the blocks'
    /// fraction in floating point and printed 871).
    #[test]
    fn a_fixed_transfer_has_its_whole_blocks_and_the_last_shorter_one() {
        let mut r = result(TestKind::Tcp, 1448, &[(Flow::Up, 265.0)]);
        r.test.spec.end = EndCondition::Bytes(256 << 20);
        r.summary.up.as_mut().unwrap().sender.total_bytes = 256 << 20;
        assert_eq!(transfer_blocks(&r), Some((268_435_456, 185_383, 872)));
        let mut t = SizesTableReporter::default();
        let text = t.on_start(&r.test) + &t.on_finish(&r);
        assert!(text.lines().next().unwrap().contains("sent     blocks x-block     received"), "{text}");
        assert!(text.contains("TCP      1448    268435456     185383     872            1 "), "{text}");
        r.test.spec.end = EndCondition::Seconds(1.0);
        assert_eq!(transfer_blocks(&r), None);
    }
}
