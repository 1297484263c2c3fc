//! `netchar report --format html|png` end to end over the plot fixtures
//! (crates/report/tests/fixtures-plots: a UDP sweep, the netio suite, rr under load, two
//! `--save` sets, a three-stream TCP test; and a UDP test of the C responder on a board, with
//! its target figures): the HTML's structure, then the report opened in
//! Debian's chromium (headless), which must lay out every plot and table, log nothing to the
//! console and request nothing from the network. A page that does both is checked too, so
//! that the checks are known to catch them.

#[path = "support/loopback.rs"]
mod loopback;
#[path = "support/require.rs"]
mod require;

use assert_cmd::Command;
use std::path::{Path, PathBuf};
use std::process::Stdio;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../report/tests/fixtures-plots")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("netchar-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

const INPUTS: [&str; 8] = [
    "base-16k",
    "new-128k",
    "rr-under-load.json",
    "suite-bwsweep-knee.json",
    "suite-netio.json",
    "tcp-p3-intervals.json",
    "../fixtures/tcp-bidir-p2.json",
    "../fixtures-target/board-udp.json",
];

/// Writes the HTML report of every fixture into `dir`, returning its path and text.
fn write_report(dir: &Path) -> (PathBuf, String) {
    let out = dir.join("report.html");
    Command::cargo_bin("netchar")
        .unwrap()
        .current_dir(fixtures())
        .arg("report")
        .args(INPUTS)
        .args(["--format", "html", "-o"])
        .arg(&out)
        .assert()
        .success()
        .stdout("");
    let text = std::fs::read_to_string(&out).unwrap();
    (out, text)
}

fn count(text: &str, needle: &str) -> usize {
    text.matches(needle).count()
}

/// The text of the element `<tag id="id">...</tag>`, HTML entities decoded.
fn element_text(html: &str, open: &str, close: &str) -> String {
    let start = html.find(open).unwrap_or_else(|| panic!("no {open}")) + open.len();
    let end = start + html[start..].find(close).unwrap();
    html[start..end]
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

#[test]
fn html_report_is_one_self_contained_file() {
    let dir = scratch("html");
    let (_, html) = write_report(&dir);
    assert!(html.starts_with("<!DOCTYPE html>\n<html lang=\"en\">"));
    assert!(html.trim_end().ends_with("</html>"));
    // Nothing is loaded from anywhere, and the policy forbids it.
    assert!(html.contains("content=\"default-src 'none';"), "a Content-Security-Policy");
    for banned in ["<link", "<img", "<iframe", " src=", "@import", "url("] {
        assert!(!html.contains(banned), "the report holds {banned:?}");
    }
    // Any scheme's address: "://" with what stands before and after it.
    let addresses: Vec<&str> =
        html.match_indices("://").map(|(i, _)| &html[i.saturating_sub(4)..(i + 22).min(html.len())]).collect();
    assert!(!addresses.is_empty());
    assert!(
        addresses.iter().all(|a| *a == "http://www.w3.org/2000/svg"),
        "only the SVG namespace is an address: {addresses:?}"
    );
    // Every plot inline, one per figure: the sweep, blocks, compare, latency and throughput.
    let figures = count(&html, "<figure class=\"plot\"");
    assert_eq!(figures, count(&html, "<svg "), "one inline SVG per figure");
    for id in [
        "plot-sweep-suite-bwsweep-knee_json",
        "plot-blocks-suite-netio_json",
        "plot-compare-tcp",
        "-rr-under-load_json-latency\"",
        "-rr-under-load_json-latency-cdf\"",
        "-tcp-p3-intervals_json\"",
    ] {
        assert!(html.contains(id), "no figure {id}");
    }
    // The tables: summary, latency, and both ends' hosts.
    for id in ["<table id=\"summary\">", "<table id=\"latency\">", "<table id=\"hosts-1\">"] {
        assert!(html.contains(id), "no {id}");
    }
    assert!(html.contains("client (this end)") && html.contains("server (far end)"));
    assert!(html.contains("<td>kernel</td>"));
    // The board's own figures: one table, its build as the caption, the drop counter marked.
    assert_eq!(count(&html, "<table id=\"target-"), 1);
    assert!(html.contains("build lwIP 2.1.3 NO_SYS=1, gcc 12.2.1 -Os, lwipopts 809da5f523f1</caption>"));
    assert!(html.contains("<tr class=\"trouble\"><td>nic_near_full</td><td class=\"n\">113</td></tr>"));
    // The raw JSON reads back as every result, the same as --format json writes them.
    let raw: serde_json::Value =
        serde_json::from_str(&element_text(&html, "<pre id=\"raw-json\">", "</pre>")).expect("the embedded JSON");
    let json = Command::cargo_bin("netchar")
        .unwrap()
        .current_dir(fixtures())
        .arg("report")
        .args(INPUTS)
        .args(["--format", "json"])
        .output()
        .unwrap();
    let want: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(raw, want);
    assert_eq!(raw.as_array().unwrap().len(), 4 + 4 + 1 + 12 + 24 + 1 + 1 + 1);
    assert!(html.contains("<a id=\"download\" download=\"netchar-results.json\""));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn png_plots_have_the_chart_size() {
    let dir = scratch("png");
    Command::cargo_bin("netchar")
        .unwrap()
        .current_dir(fixtures())
        .args(["report", "suite-bwsweep-knee.json", "rr-under-load.json", "--format", "png", "-o"])
        .arg(&dir)
        .assert()
        .success();
    let mut names: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "013-rr-under-load_json-latency-cdf.png",
            "013-rr-under-load_json-latency.png",
            "sweep-suite-bwsweep-knee_json.png"
        ]
    );
    for n in &names {
        let png = std::fs::read(dir.join(n)).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{n}");
        assert_eq!(&png[12..16], b"IHDR");
        let be = |at: usize| u32::from_be_bytes(png[at..at + 4].try_into().unwrap());
        assert_eq!((be(16), be(20)), (900, 420), "{n}: width and height");
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// Debian's chromium, or None (the caller skips through [`require::unavailable`]).
fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser"].into_iter().find(|b| {
        std::process::Command::new(b)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// What chromium saw of a page: the DOM after its scripts ran, its console lines, and the
/// network requests the page made (from chromium's net log: requests whose isolation key is
/// the page's file:// site, leaving out the browser's own background traffic).
struct Visit {
    dom: String,
    console: Vec<String>,
    requests: Vec<String>,
}

fn visit(browser: &str, page: &Path, work: &Path, screenshot: Option<&Path>) -> Visit {
    let net_log = work.join("net-log.json");
    let _ = std::fs::remove_file(&net_log);
    let mut cmd = std::process::Command::new(browser);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--enable-logging=stderr",
        "--v=0",
        "--window-size=1000,1400",
    ])
    .arg(format!("--user-data-dir={}", work.join("profile").display()))
    .arg(format!("--log-net-log={}", net_log.display()));
    match screenshot {
        Some(png) => cmd.arg(format!("--screenshot={}", png.display())),
        None => cmd.arg("--dump-dom"),
    };
    let mut child = cmd
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {browser}: {e}"));
    let read = |mut pipe: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            let _ = pipe.read_to_end(&mut text);
            text
        })
    };
    let stdout = read(Box::new(child.stdout.take().unwrap()));
    let stderr = read(Box::new(child.stderr.take().unwrap()));
    // A browser that hangs must not hang the test run: killed after a minute (a safety net,
    // not a measurement).
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            panic!("{browser} did not finish within a minute");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let out = std::process::Output { status, stdout: stdout.join().unwrap(), stderr: stderr.join().unwrap() };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{browser} failed: {stderr}");
    let console = stderr.lines().filter(|l| l.contains(":CONSOLE")).map(str::to_string).collect();
    let log = std::fs::read_to_string(&net_log).unwrap_or_default();
    // A net log cut short by the exit lacks its closing brackets.
    let doc: serde_json::Value = serde_json::from_str(&log)
        .or_else(|_| serde_json::from_str(&format!("{}]}}", log.trim_end().trim_end_matches(','))))
        .unwrap_or_else(|e| panic!("the net log does not parse: {e}"));
    let mut requests: Vec<String> = doc["events"]
        .as_array()
        .map(|events| {
            events
                .iter()
                .filter_map(|e| {
                    let p = &e["params"];
                    let url = p["url"].as_str()?;
                    let from_page = p["network_isolation_key"].as_str().is_some_and(|k| k.contains("file://"));
                    let local = ["file:", "data:", "blob:"].iter().any(|s| url.starts_with(s));
                    (from_page && !local).then(|| url.to_string())
                })
                .collect()
        })
        .unwrap_or_default();
    requests.dedup();
    Visit { dom: String::from_utf8_lossy(&out.stdout).into_owned(), console, requests }
}

fn attribute<'a>(dom: &'a str, name: &str) -> Option<&'a str> {
    let at = dom.find(&format!("{name}=\""))? + name.len() + 2;
    Some(&dom[at..at + dom[at..].find('"')?])
}

#[test]
fn html_report_renders_in_chromium_without_errors_or_requests() {
    let Some(browser) = chromium() else {
        return require::unavailable("the browser test", "chromium is not installed (apt-get install chromium)");
    };
    let dir = scratch("browser");
    let (page, html) = write_report(&dir);

    let seen = visit(browser, &page, &dir, None);
    assert_eq!(attribute(&seen.dom, "data-ready"), Some("1"), "the page's script ran to its end");
    let figures = count(&html, "<figure class=\"plot\"");
    let tables = count(&html, "<table id=");
    assert!(figures >= 8 && tables >= 3, "{figures} plots, {tables} tables");
    assert_eq!(attribute(&seen.dom, "data-plots"), Some(figures.to_string().as_str()), "every plot laid out");
    assert_eq!(attribute(&seen.dom, "data-tables"), Some(tables.to_string().as_str()), "every table laid out");
    let href = attribute(&seen.dom[seen.dom.find("id=\"download\"").unwrap()..], "href").unwrap();
    assert!(href.starts_with("blob:"), "the download link is the embedded JSON: {href}");
    assert_eq!(seen.console, Vec::<String>::new(), "console messages");
    assert_eq!(seen.requests, Vec::<String>::new(), "network requests");

    // The same page as a screenshot: a PNG of the window's size.
    let shot = dir.join("report.png");
    visit(browser, &page, &dir, Some(&shot));
    let png = std::fs::read(&shot).expect("chromium wrote the screenshot");
    let be = |at: usize| u32::from_be_bytes(png[at..at + 4].try_into().unwrap());
    assert_eq!(&png[12..16], b"IHDR");
    assert_eq!((be(16), be(20)), (1000, 1400));

    // A page that logs, throws and fetches: the checks above must see all three.
    let bad = dir.join("bad.html");
    std::fs::write(
        &bad,
        "<!DOCTYPE html><html><body><script>console.error('boom');\
         fetch('http://netchar-test.invalid/x').catch(function(){});missing();</script></body></html>",
    )
    .unwrap();
    let seen = visit(browser, &bad, &dir, None);
    assert!(seen.console.iter().any(|l| l.contains("boom")), "{:?}", seen.console);
    assert!(seen.console.iter().any(|l| l.contains("Uncaught")), "{:?}", seen.console);
    assert_eq!(seen.requests, ["http://netchar-test.invalid/x"]);
    let _ = std::fs::remove_dir_all(dir);
}

/// `--plot DIR` and `--report FILE` on a test and on a suite: written when it finishes, with
/// the plots its results make and the report of all of them.
#[test]
fn plot_and_report_flags_write_when_a_test_or_suite_finishes() {
    let server = loopback::Server::start(&[]);
    let port = server.port.to_string();
    let dir = scratch("finish");
    let (plots, report) = (dir.join("tcp-plots"), dir.join("tcp.html"));
    let run = loopback::netchar(&[
        "tcp",
        "127.0.0.1",
        "-p",
        &port,
        "-t",
        "1",
        "-i",
        "0.25",
        "-P",
        "2",
        "--plot",
        plots.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let mut names: Vec<String> =
        std::fs::read_dir(&plots).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["001-tcp_1.png", "001-tcp_1.svg"]);
    let svg = std::fs::read_to_string(plots.join("001-tcp_1.svg")).unwrap();
    assert!(svg.contains("\nup stream 2\n") && svg.contains("\nup sum\n"), "both streams and their sum");
    let html = std::fs::read_to_string(&report).unwrap();
    assert_eq!(count(&html, "<figure class=\"plot\""), 1);
    assert!(html.contains("<table id=\"summary\">"));

    let (plots, report) = (dir.join("sweep-plots"), dir.join("sweep.html"));
    let run = loopback::netchar(&[
        "suite",
        "bwsweep",
        "127.0.0.1",
        "-p",
        &port,
        "--from",
        "10M",
        "--to",
        "30M",
        "--step",
        "10M",
        "--duration",
        "0.5",
        "--plot",
        plots.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let svg = std::fs::read_to_string(plots.join("sweep-bwsweep.svg")).expect("the sweep's plot");
    for label in ["\nup received\n", "\ndown loss %\n", "\noffered rate (Mbit/s)\n"] {
        assert!(svg.contains(label), "no {label}");
    }
    assert!(plots.join("sweep-bwsweep.png").is_file());
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(html.contains("id=\"plot-sweep-bwsweep\""));
    let raw: serde_json::Value = serde_json::from_str(&element_text(&html, "<pre id=\"raw-json\">", "</pre>")).unwrap();
    assert_eq!(raw.as_array().unwrap().len(), 6, "three rates, both directions");
    let _ = std::fs::remove_dir_all(dir);
}

/// The results in the raw JSON of an HTML report `--report` wrote.
fn reported_results(report: &Path) -> Vec<serde_json::Value> {
    let html = std::fs::read_to_string(report).unwrap_or_else(|e| panic!("{}: {e}", report.display()));
    let raw: serde_json::Value = serde_json::from_str(&element_text(&html, "<pre id=\"raw-json\">", "</pre>")).unwrap();
    raw.as_array().expect("an array of results").clone()
}

/// A plan's tests each keep their counted runs for `--plot` and `--report` (a test's
/// `--warmup` run is not counted, and a later test's runs do not replace an earlier test's),
/// and `netchar echo` keeps one result per pattern group.
#[test]
fn plot_and_report_keep_the_counted_runs_of_every_test_of_a_plan_and_of_echo() {
    let server = loopback::Server::start(&[]);
    let port = server.port.to_string();
    let dir = scratch("finish-plan");
    let plan = dir.join("two.toml");
    std::fs::write(
        &plan,
        format!(
            "[defaults]\nport = {port}\nduration = 0.3\n\n[[test]]\nname = \"once\"\nkind = \"tcp\"\n\n\
             [[test]]\nname = \"counted\"\nkind = \"tcp\"\nwarmup = 1\nrepeat = 2\n\n\
             [[test]]\nname = \"after\"\nkind = \"udp\"\nrate = \"10M\"\n"
        ),
    )
    .unwrap();
    let (plots, report) = (dir.join("plan-plots"), dir.join("plan.html"));
    let run = loopback::netchar(&[
        "run",
        plan.to_str().unwrap(),
        "127.0.0.1",
        "--plot",
        plots.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let results = reported_results(&report);
    let kinds: Vec<&str> = results.iter().map(|r| r["test"]["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["tcp", "tcp", "tcp", "udp"], "one run, two counted runs (no warm-up), one run");
    let mut names: Vec<String> =
        std::fs::read_dir(&plots).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert!(names.iter().any(|n| n.starts_with("001-two_1")) && names.iter().any(|n| n.starts_with("004-two_4")));
    assert!(!names.iter().any(|n| n.starts_with("005-")), "{names:?}");

    let report = dir.join("echo.html");
    let run = loopback::netchar(&[
        "echo",
        "127.0.0.1",
        "-p",
        &port,
        "--pattern",
        "20x512,10x1024",
        "--report",
        report.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(reported_results(&report).len(), 2, "a result per pattern group");
    let _ = std::fs::remove_dir_all(dir);
}

/// An interrupted test still gets its plots and report: the figures it measured until then.
#[test]
fn plot_and_report_are_written_for_an_interrupted_test() {
    let server = loopback::Server::start(&[]);
    let port = server.port.to_string();
    let dir = scratch("finish-interrupted");
    let (plots, report) = (dir.join("plots"), dir.join("tcp.html"));
    let child = std::process::Command::new(loopback::BIN)
        .args(["tcp", "127.0.0.1", "-p", &port, "-t", "30", "-i", "0.5", "--plot"])
        .arg(&plots)
        .arg("--report")
        .arg(&report)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", String::from_utf8_lossy(&out.stderr));
    let results = reported_results(&report);
    assert_eq!(results.len(), 1);
    assert!(results[0]["error"].as_str().unwrap().contains("interrupted"), "{}", results[0]["error"]);
    assert!(results[0]["summary"]["up"]["receiver"]["bytes"].as_u64().unwrap() > 0);
    assert!(plots.join("001-tcp_1.svg").is_file() && plots.join("001-tcp_1.png").is_file());
    let _ = std::fs::remove_dir_all(dir);
}

/// A store of 30 builds of a saved TCP result (tcp-p3-intervals.json), its receive rate set
/// to 1 Gbit/s with ±0.5% noise and lowered by 5% from build 1.0.18 on: a series whose one
/// change the test put there; and 8 builds of a saved UDP result, steady at 20 Mbit/s.
fn trend_store(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(fixtures().join("tcp-p3-intervals.json")).unwrap();
    let real: netchar_model::TestResult = serde_json::from_str(&text).unwrap();
    let db = dir.join("history.sqlite");
    let mut store = netchar_store::Store::open(&netchar_store::StoreUrl::Sqlite(db.clone())).unwrap();
    for i in 0..30u32 {
        let mut r = real.clone();
        r.started_at = format!("2020-01-01T00:00:{i:02}Z");
        let level = if i < 18 { 1e9 } else { 0.95e9 };
        let noise = 1.0 + 0.005 * [0.0, 0.7, -0.4, 1.0, -0.9, 0.3, -0.6][i as usize % 7];
        let flow = r.summary.up.as_mut().or(r.summary.down.as_mut()).unwrap();
        flow.receiver.bits_per_second = level * noise;
        let labels = [("build".to_string(), format!("1.0.{i}"))].into();
        store.record(&labels, &r).unwrap();
    }
    // A second series, another method (a UDP test) with no change: its own plot and tables.
    let text = std::fs::read_to_string(fixtures().join("../fixtures/udp.json")).unwrap();
    let udp: netchar_model::TestResult = serde_json::from_str(&text).unwrap();
    for i in 0..8u32 {
        let mut r = udp.clone();
        r.started_at = format!("2020-01-02T00:00:{i:02}Z");
        r.summary.up.as_mut().unwrap().receiver.bits_per_second = 20e6 * (1.0 + 0.001 * f64::from(i % 3));
        store.record(&[("build".to_string(), format!("1.0.{i}"))].into(), &r).unwrap();
    }
    db
}

/// `netchar history --format html`: one page with the series' trend plot (the change marked
/// at the build it starts at), its change points and runs as tables; opened in chromium, which
/// must lay out the plot and every table, log nothing and request nothing.
#[test]
fn history_trend_page_renders_in_chromium_without_errors_or_requests() {
    let dir = scratch("trend");
    let db = trend_store(&dir);
    let page = dir.join("trend.html");
    let args = ["history", "--store", db.to_str().unwrap(), "--metric", "bps", "--format", "html", "-o"];
    Command::cargo_bin("netchar").unwrap().args(args).arg(&page).assert().success().stdout("");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>") && html.contains("content=\"default-src 'none';"));
    assert_eq!(count(&html, "<figure class=\"plot\""), 2, "two series, a trend plot each");
    assert!(html.contains("<figure class=\"plot\" id=\"plot-trend-1\">"));
    // The series are in the order of their method hash: find the TCP one's number.
    let tcp = if html.find("<h2 id=\"series-1\">Series 1: netchar tcp").is_some() { 1 } else { 2 };
    let udp = 3 - tcp;
    assert!(
        html.contains(&format!("<p id=\"series-{udp}-no-change\">No change point: 2.00175e+07 ± ")),
        "the UDP series"
    );
    // The change where it was put, marked on the plot and in the table, with the segments.
    assert!(html.contains("-5.1% at 1.0.18"), "the plot's change marker");
    let changes = element_text(&html, &format!("<table id=\"series-{tcp}-changes\">"), "</table>");
    assert_eq!(count(&changes, "<tr><td class=\"n\">"), 1, "one change point: {changes}");
    assert!(changes.contains("<td class=\"n\">19</td><td>1.0.18</td>"), "{changes}");
    assert!(changes.contains("<td class=\"n\">18</td>") && changes.contains("<td class=\"n\">12</td>"), "{changes}");
    let runs = element_text(&html, &format!("<table id=\"series-{tcp}-runs\">"), "</table>");
    assert_eq!(count(&runs, "<tr>"), 31, "a header and 30 runs");
    let runs = element_text(&html, &format!("<table id=\"series-{udp}-runs\">"), "</table>");
    assert_eq!(count(&runs, "<tr>"), 9, "a header and 8 runs");
    // The same series as text says the same.
    let text = Command::cargo_bin("netchar")
        .unwrap()
        .args(["history", "--store", db.to_str().unwrap(), "--metric", "bps"])
        .output()
        .unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("at run 19 (build 1.0.18, 2020-01-01T00:00:18Z): -5."), "{text}");
    assert!(text.contains("The selection holds 2 series") && text.contains("No change point"), "{text}");

    let Some(browser) = chromium() else {
        return require::unavailable("the browser test", "chromium is not installed (apt-get install chromium)");
    };
    let seen = visit(browser, &page, &dir, None);
    assert_eq!(attribute(&seen.dom, "data-ready"), Some("1"), "the page's script ran to its end");
    assert_eq!(attribute(&seen.dom, "data-plots"), Some("2"), "both trend plots laid out");
    let tables = count(&html, "<table id=");
    assert_eq!(tables, 5, "facts and runs of each, the change points of one");
    assert_eq!(attribute(&seen.dom, "data-tables"), Some("5"), "every table laid out");
    assert_eq!(seen.console, Vec::<String>::new(), "console messages");
    assert_eq!(seen.requests, Vec::<String>::new(), "network requests");
    let _ = std::fs::remove_dir_all(dir);
}
