//! The block-size tables of the suites, as the tools they stand for printed them: netio's
//! (`netchar suite netio`: per block size the receiving end's rate, TCP and UDP, each way, in
//! MB/s of 2^20 bytes) and stackthru's (`netchar suite sizes`: per protocol and block size,
//! real and system time, MB/s, Mbit/s and frames/s, client sending), and netio's own client
//! lines when netchar is the client of a netio server (`--proto netio`).

use netchar_model::{TestInfo, TestResult};
use std::fmt::Write;

/// The receiving end's rate of the one flow of a one-way test.
fn receiver_bps(r: &TestResult) -> f64 {
    r.summary.up.as_ref().or(r.summary.down.as_ref()).map_or(0.0, |f| f.receiver.bits_per_second)
}

/// netio's table: a row per block size once its four tests (TCP tx, rx, UDP tx, rx) end.
#[derive(Debug, Default)]
pub struct NetioTableReporter {
    header_done: bool,
    cells: Vec<String>,
}

impl NetioTableReporter {
    fn header(&mut self) -> String {
        if std::mem::replace(&mut self.header_done, true) {
            return String::new();
        }
        "| Packet size |   TCP-tx    |   TCP-rx    |   UDP-tx    |   UDP-rx    |\n\
         | ----------- | ----------- | ----------- | ----------- | ----------- |\n"
            .to_string()
    }

    fn cell(&mut self, r: &TestResult) -> String {
        self.cells.push(format!("{:>6.1} MB/s", receiver_bps(r) / 8.0 / 1048576.0));
        if self.cells.len() < 4 {
            return String::new();
        }
        let row = format!("| {:>5} bytes | {} |\n", r.test.spec.block_bytes, self.cells.join(" | "));
        self.cells.clear();
        row
    }

    fn footer() -> String {
        "(receiving end's rate; UDP at maximum rate, so UDP figures include what the receiver could take)\n".into()
    }
}

impl crate::Reporter for NetioTableReporter {
    fn on_start(&mut self, _: &TestInfo) -> String {
        self.header()
    }
    fn on_finish(&mut self, result: &TestResult) -> String {
        self.cell(result)
    }
    fn on_job_end(&mut self, _: &[TestResult]) -> String {
        Self::footer()
    }
    fn on_results(&mut self, results: &[crate::Saved]) -> String {
        let mut out = self.header();
        for s in results {
            out.push_str(&self.cell(&s.result));
        }
        out + &Self::footer()
    }
}

/// stackthru's table: a row per test as it ends.
#[derive(Debug, Default)]
pub struct SizesTableReporter {
    header_done: bool,
}

impl SizesTableReporter {
    fn header(&mut self) -> String {
        if std::mem::replace(&mut self.header_done, true) {
            return String::new();
        }
        format!(
            "{:<5} {:>7} {:>9} {:>9} {:>12} {:>13} {:>13}\n",
            "proto", "block", "real s", "sys s", "MB/s (2^20)", "Mbit/s (10^6)", "frames/s"
        )
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
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<5} {size:>7} {:>9.3} {:>9.3} {:>12.3} {:>13.3} {:>13.0}",
            r.test.spec.kind.name().to_uppercase(),
            f.receiver.seconds,
            sys,
            bps / 8.0 / 1048576.0,
            bps / 1e6,
            frames
        );
        out
    }
}

impl crate::Reporter for SizesTableReporter {
    fn on_start(&mut self, _: &TestInfo) -> String {
        self.header()
    }
    fn on_finish(&mut self, result: &TestResult) -> String {
        Self::row(result)
    }
    fn on_results(&mut self, results: &[crate::Saved]) -> String {
        let mut out = self.header();
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
    /// The error (netio's note) each size's line showed, to tell a run that failed afterwards.
    shown: Vec<Option<String>>,
}

impl NetioLinesReporter {
    fn header(&mut self, info: &TestInfo) -> String {
        if std::mem::replace(&mut self.header_done, true) {
            return String::new();
        }
        let proto = info.spec.kind.name().to_uppercase();
        let tx_only = if info.spec.direction == netchar_model::Direction::Up { ", Tx only" } else { "" };
        format!(
            "netchar {}: netio client of {} ({proto}{tx_only})\n\n{proto} connection established.\n",
            env!("CARGO_PKG_VERSION"),
            info.remote
        )
    }

    fn line(&mut self, r: &TestResult) -> String {
        self.shown.push(r.error.clone());
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
            && results.len() == self.shown.len()
            && results.iter().zip(&self.shown).all(|(r, shown)| r.error == *shown);
        if ended_well {
            "Done.\n".into()
        } else {
            String::new()
        }
    }
    fn on_results(&mut self, results: &[crate::Saved]) -> String {
        let mut out = results.first().map(|s| self.header(&s.result.test)).unwrap_or_default();
        for s in results {
            out.push_str(&self.line(&s.result));
        }
        out
    }
}
