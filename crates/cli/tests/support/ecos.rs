//! The eCos suite's short form (`suite ecos --quick`) as both modes must print it, and a reader
//! of its text: shared by the tests of the native suite (against `netchar server` and the C
//! responder) and of `--proto nc6-test`.
#![allow(dead_code, unreachable_pub)]

use serde_json::Value;

/// Every test's `Start` line of nc6_test_master's sequence in its short form, in order: the
/// no-load section at 640 × 1024 (and TCP echo 64 × 10240), UDP and TCP echo at the slave
/// loads 0 and 50%, then without pauses and with 10 ms after 10 buffers.
pub const QUICK_STARTS: [&str; 15] = [
    "Start UDP echo [640,1024] - no delays",
    "Start UDP send [640,1024] - no delays",
    "Start UDP recv [640,1024] - no delays",
    "Start TCP echo [640,1024] - no delays",
    "Start TCP send [640,1024] - no delays",
    "Start TCP recv [640,1024] - no delays",
    "Start TCP echo [64,10240] - no delays",
    "Start UDP echo [256,1024] - no delays",
    "Start TCP echo [256,1024] - no delays",
    "Start UDP echo [256,1024] - no delays",
    "Start TCP echo [256,1024] - no delays",
    "Start UDP echo [256,1024] - no delays",
    "Start TCP echo [256,1024] - no delays",
    "Start UDP echo [256,1024] - 10ms delay after 10 packets",
    "Start TCP echo [256,1024] - 10ms delay after 10 packets",
];

/// One test of the suite's text: its `Start` line, its result line, the slave's counts
/// (sent, received) and netchar's figures line.
#[derive(Debug)]
pub struct TextTest {
    pub start: String,
    pub result: String,
    pub slave: Option<(u64, u64)>,
    pub figures: String,
}

impl TextTest {
    /// "UDP send", "TCP echo", ...
    pub fn name(&self) -> &str {
        self.start.trim_start_matches("Start ").split(" [").next().unwrap()
    }

    /// Buffers asked for.
    pub fn nbufs(&self) -> u64 {
        self.start.split('[').nth(1).and_then(|c| c.split(',').next()).unwrap().parse().unwrap()
    }
}

/// The tests of a suite's text output, in order.
pub fn text_tests(stdout: &str) -> Vec<TextTest> {
    let mut tests: Vec<TextTest> = Vec::new();
    for line in stdout.lines() {
        if line.starts_with("Start ") {
            let t = TextTest { start: line.into(), result: String::new(), slave: None, figures: String::new() };
            tests.push(t);
        } else if let Some(t) = tests.last_mut() {
            if let Some(rest) = line.strip_prefix("   slave sent ") {
                let (sent, recvd) = rest.split_once(", recvd ").unwrap();
                t.slave = Some((sent.parse().unwrap(), recvd.parse().unwrap()));
            } else if line.starts_with("    netchar: ") {
                t.figures = line.into();
            } else if t.result.is_empty() && line.starts_with(t.name()) {
                t.result = line.into();
            }
        }
    }
    tests
}

/// Checks a `--quick` run's text, whichever the mode: the tests and their words in the
/// stock master's order, a result line in the stock format under each, and slave counts
/// that say who sent: in "send" only the slave (the server) sends, in "recv" only the master,
/// in "echo" both. TCP counts are exact; UDP ones at most the buffers asked for.
pub fn check_quick_text(stdout: &str, mode: &str) {
    let tests = text_tests(stdout);
    let starts: Vec<&str> = tests.iter().map(|t| t.start.as_str()).collect();
    assert_eq!(starts, QUICK_STARTS, "{mode}:\n{stdout}");
    for t in &tests {
        let what = format!("{mode}: {}", t.start);
        let n = t.nbufs();
        let exact = t.name().starts_with("TCP");
        let (sent, recvd) = t.slave.unwrap_or_else(|| panic!("{what}: no slave counts\n{stdout}"));
        let fits = |got: u64| if exact { got == n } else { got > 0 && got <= n };
        match t.name().rsplit(' ').next().unwrap() {
            "send" => assert!(fits(sent) && recvd == 0, "{what}: slave sent {sent}, recvd {recvd}"),
            "recv" => assert!(sent == 0 && fits(recvd), "{what}: slave sent {sent}, recvd {recvd}"),
            _ => assert!(fits(sent) && fits(recvd), "{what}: slave sent {sent}, recvd {recvd}"),
        }
        // "TCP echo - 1280 bufs of 1024 bytes in 0.02 seconds - ... Mbit/S (M = 10^6)"
        let bufs = if t.name().ends_with("echo") { 2 * n } else { n };
        let stock = if exact { format!("{} - {bufs} bufs of ", t.name()) } else { format!("{} - ", t.name()) };
        assert!(t.result.starts_with(&stock) && t.result.contains(" Mbit/S (M = 10^6)"), "{what}: {}", t.result);
        assert!(t.figures.starts_with("    netchar: "), "{what}: {}", t.figures);
        let (words, is_send) = (t.name().ends_with("send"), t.figures.contains("buffers: slave sent "));
        assert_eq!(words, is_send, "{what}: {}", t.figures);
    }
}

/// The direction of each result of a `--json` run: what "send" and "recv" were, on the wire.
pub fn directions(doc: &Value) -> Vec<String> {
    doc.as_array()
        .expect("one JSON array")
        .iter()
        .map(|r| {
            let spec = &r["test"];
            let kind = spec["kind"].as_str().unwrap_or_default();
            let echo = !spec["rr"].is_null() || kind == "rr" || kind == "echo";
            if echo {
                "echo".to_string()
            } else {
                spec["direction"].as_str().unwrap_or_default().to_string()
            }
        })
        .collect()
}

/// The directions `QUICK_STARTS` name: the server ("slave") sends in "send" (the flow is
/// down), receives in "recv" (up).
pub fn quick_directions() -> Vec<String> {
    QUICK_STARTS
        .iter()
        .map(|s| {
            if s.contains(" send ") {
                "down"
            } else if s.contains(" recv ") {
                "up"
            } else {
                "echo"
            }
            .to_string()
        })
        .collect()
}
