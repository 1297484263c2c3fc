//! `netchar udp` end to end over loopback: rates against their targets, the datagram identity
//! sent = received + lost on every stream, patterns, directions and bad flags.

#[path = "support/loopback.rs"]
mod common;
#[path = "support/require.rs"]
mod require;

use common::*;
use serde_json::Value;

/// Checks one flow of a UDP result and returns (sender, receiver) summary objects.
fn check_udp_flow<'a>(r: &'a Value, flow: &str, streams: u64) -> (&'a Value, &'a Value) {
    assert!(r["error"].is_null(), "error: {}", r["error"]);
    let s = &r["summary"][flow];
    assert!(s.is_object(), "summary.{flow} missing: {r}");
    assert_eq!(s["packets_accounted"], true, "{s}");
    let (tx, rx) = (&s["sender"], &s["receiver"]);
    assert_eq!(u(&tx["packets"]), u(&rx["packets"]) + u(&rx["lost"]), "sent = received + lost: {s}");
    // Every stream on its own, from the raw records of both ends.
    let records: Vec<&Value> = r["streams"].as_array().unwrap().iter().filter(|x| x["flow"] == flow).collect();
    assert_eq!(records.len() as u64, 2 * streams);
    for tx_rec in records.iter().filter(|x| x["role"] == "sender") {
        let rx_rec = records.iter().find(|x| x["role"] == "receiver" && x["id"] == tx_rec["id"]).unwrap();
        let sent = u(&tx_rec["udp_sent"]["packets"]);
        let (got, lost) = (u(&rx_rec["udp_received"]["packets"]), u(&rx_rec["udp_received"]["lost"]));
        assert_eq!(sent, got + lost, "stream {}: sent {sent} != received {got} + lost {lost}", tx_rec["id"]);
        // Interval counts add up to the stream's totals exactly, loss included.
        let ivs = rx_rec["intervals"].as_array().unwrap();
        if !ivs.is_empty() {
            let sum = |k: &str| ivs.iter().map(|i| u(&i["udp_received"][k])).sum::<u64>();
            assert_eq!(sum("packets"), got, "interval packets of stream {}", tx_rec["id"]);
            assert_eq!(sum("lost"), lost, "interval loss of stream {}", tx_rec["id"]);
        }
    }
    // A side that moved nothing has no time and no rate (a trial whose sender a busy machine
    // kept off the CPU for all of its 0.3 s: its slots are all behind its schedule).
    for side in [tx, rx].into_iter().filter(|side| f(&side["seconds"]) > 0.0) {
        let expect = 8.0 * u(&side["bytes"]) as f64 / f(&side["seconds"]);
        assert!((f(&side["bits_per_second"]) - expect).abs() <= 1e-3 * expect.max(1.0), "bits per second: {side}");
    }
    (tx, rx)
}

fn rate_within(measured: f64, target: f64, tolerance: f64) -> bool {
    (measured - target).abs() <= tolerance * target
}

/// Whether a paced sender's summary `tx` kept a schedule of `target` bit/s for `seconds`:
/// its rate within `tolerance`, or, when it fell behind its schedule (a busy machine kept it
/// off the CPU: `behind_schedule`), its datagrams sent plus the slots it reports missing are
/// the schedule's slots (within 2 of them). The second is the truth a starved sender still
/// owes; a pacing fault moves it in every run. Returns whether the sender fell behind.
fn on_schedule(tx: &Value, target: f64, seconds: f64, tolerance: f64) -> bool {
    let sent = u(&tx["packets"]);
    let behind = tx["behind_schedule"].as_u64().unwrap_or(0);
    if rate_within(f(&tx["bits_per_second"]), target, tolerance) {
        return false;
    }
    assert!(behind > 0 && sent > 0, "the sender missed {target} bit/s without falling behind its schedule: {tx}");
    let payload = u(&tx["bytes"]) as f64 / sent as f64;
    let slots = target * seconds / (8.0 * payload);
    assert!(
        ((sent + behind) as f64 - slots).abs() <= 2.0,
        "sent {sent} + behind {behind} != the schedule's {slots:.1} slots of {payload} B: {tx}"
    );
    eprintln!("the sender fell {behind} datagrams behind its schedule (a busy machine): checked sent + behind = slots");
    true
}

#[test]
fn paced_rates_hit_their_targets() {
    let s = Server::start(&[]);
    for (rate, target) in [("1M", 1e6), ("10M", 10e6), ("100M", 100e6)] {
        // A sender kept off the CPU in one interval catches up in the next (at twice the
        // rate, without falling behind its schedule): its whole run is still on target, but
        // that interval is not. Such a run is tried again, up to three times; a pacing fault
        // misses an interval in every run.
        for attempt in 1..=3 {
            let r = client_json("udp", &s, "127.0.0.1", &["-b", rate, "-t", "2"]);
            let (tx, rx) = check_udp_flow(&r, "up", 1);
            let behind = on_schedule(tx, target, 2.0, 0.005);
            // Loopback drops nothing on the way; only a receiver held off the CPU (a busy
            // machine) lets its socket buffer overflow, and the kernel counts each such datagram.
            assert_eq!(
                u(&rx["lost"]),
                u(&rx["kernel_drops"]),
                "loopback at {rate}: every loss is a socket overflow: {rx}"
            );
            // Each full one-second interval of the sender is on target too, unless the sender
            // fell behind its schedule (then the slot count above is the check).
            let rec = r["streams"].as_array().unwrap().iter().find(|x| x["role"] == "sender").unwrap();
            let off: Vec<&Value> = rec["intervals"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|iv| !behind && f(&iv["end"]) - f(&iv["start"]) >= 0.999)
                .filter(|iv| !rate_within(f(&iv["bits_per_second"]), target, 0.005))
                .collect();
            if off.is_empty() {
                break;
            }
            assert!(attempt < 3, "-b {rate}: an interval off target in all 3 runs, the last: {off:?}");
            eprintln!("-b {rate}: attempt {attempt}: an interval off target ({:?}); trying again", off[0]);
        }
    }
}

#[test]
fn a_pacing_quantum_batches_sends_and_keeps_the_rate() {
    let s = Server::start(&[]);
    // 200 Mbit/s of 1472-byte payloads is 16,984 datagrams/s, one every 58.9 µs: a 500 µs quantum
    // sends the one due plus the ~8.5 due within the quantum (more when the sender woke late);
    // the default sends one at a time.
    let per_send = |r: &Value| {
        let tx = &r["summary"]["up"]["sender"];
        u(&tx["packets"]) as f64 / u(&tx["sends"]) as f64
    };
    let batched = client_json("udp", &s, "127.0.0.1", &["-b", "200M", "-t", "2", "--pacing-quantum", "500us"]);
    let (tx, rx) = check_udp_flow(&batched, "up", 1);
    // A sender that went out later than one quantum after a slot (its own `late_max_ms`)
    // had a backlog to send, whether or not the whole run missed its rate.
    let stalled = on_schedule(tx, 200e6, 2.0, 0.005) | (f(&tx["late_max_ms"]) > 0.5);
    assert_eq!(u(&rx["lost"]), u(&rx["kernel_drops"]), "every loss on loopback is a counted socket overflow: {rx}");
    let b = per_send(&batched);
    // At most what a quantum holds at the catch-up rate (twice the target: 17 datagrams), the
    // bound a sender that woke late on a busy machine still keeps (13.2 seen in CI under load);
    // a sender that stalled for longer than a quantum sends its backlog in
    // batches of up to one GSO send (44 datagrams of 1472 B: 18.5 per send on average seen
    // with three spinning neighbours on two CPUs).
    let most = if stalled { 44.0 } else { 18.0 };
    assert!((4.0..=most).contains(&b), "{b} datagrams per send with a 500 us quantum: {tx}");
    let exact = client_json("udp", &s, "127.0.0.1", &["-b", "20M", "-t", "1"]);
    let (tx, _) = check_udp_flow(&exact, "up", 1);
    on_schedule(tx, 20e6, 1.0, 0.005);
    // One at a time, but for catch-up after the sender lost its CPU for over a gap (589 µs
    // here; seen for 6% of sends while the other tests of this binary loaded both cores, and
    // for half of them beside three spinning neighbours on two CPUs, 2.06 per send): what
    // the quantum adds is the batch of datagrams not yet due, so the batched run sends at
    // least twice as many per send as this one, whatever the machine's load.
    let one = per_send(&exact);
    assert!(one < 1.5 || one * 2.0 < b, "{one} datagrams per send without a quantum, {b} with one: {tx}");
    let bad = netchar(&["udp", "127.0.0.1", "-p", &s.port.to_string(), "--pacing-quantum", "20ms"]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(bad.stderr.contains("--pacing-quantum 20ms"), "{}", bad.stderr);
}

#[test]
fn pps_mode_and_per_stream_rates() {
    let s = Server::start(&[]);
    let r = client_json("udp", &s, "127.0.0.1", &["--pps", "2000", "-P", "2", "-t", "1", "-l", "100"]);
    let (tx, _) = check_udp_flow(&r, "up", 2);
    // 2000 datagrams/s of 100 bytes.
    on_schedule(tx, 2000.0 * 100.0 * 8.0, 1.0, 0.01);
    let r = client_json("udp", &s, "127.0.0.1", &["-b", "8M", "--per-stream", "-P", "2", "-t", "1", "-l", "1000"]);
    let (tx, _) = check_udp_flow(&r, "up", 2);
    on_schedule(tx, 16e6, 1.0, 0.01);
}

#[test]
fn unlimited_small_datagrams_are_counted_exactly() {
    let s = Server::start(&[]);
    for extra in [&["-b", "0", "-l", "64", "-t", "1"][..], &["-b", "0", "-l", "64", "-t", "1", "--no-gso"][..]] {
        let r = client_json("udp", &s, "127.0.0.1", extra);
        let (tx, rx) = check_udp_flow(&r, "up", 1);
        assert!(u(&rx["packets"]) > 10_000, "{extra:?}: {rx}");
        assert_eq!(tx["gso"], !extra.contains(&"--no-gso"), "{extra:?}: {tx}");
        assert!(u(&rx["kernel_drops"]) <= u(&rx["lost"]), "socket drops are part of the loss");
    }
}

#[test]
fn a_datagram_list_sends_exactly_that_many() {
    let s = Server::start(&[]);
    let r = client_json("udp", &s, "127.0.0.1", &["--pattern", "640x1024", "-b", "100M"]);
    let (tx, rx) = check_udp_flow(&r, "up", 1);
    assert_eq!(u(&tx["packets"]), 640);
    assert_eq!(u(&tx["bytes"]), 640 * 1024);
    assert_eq!(u(&rx["packets"]) + u(&rx["lost"]), 640);
    // Two sizes in order, then the test ends by itself.
    let r = client_json("udp", &s, "127.0.0.1", &["--pattern", "10x100,5x2000", "-b", "10M"]);
    let (tx, _) = check_udp_flow(&r, "up", 1);
    assert_eq!((u(&tx["packets"]), u(&tx["bytes"])), (15, 10 * 100 + 5 * 2000));
}

#[test]
fn bursts_are_separated_by_their_gaps() {
    let s = Server::start(&[]);
    // 50 datagrams in bursts of 10 with 20 ms pauses: at least 4 pauses = 80 ms.
    let r = client_json("udp", &s, "127.0.0.1", &["--pattern", "50x200,10@20ms", "-b", "0"]);
    let (tx, _) = check_udp_flow(&r, "up", 1);
    assert_eq!(u(&tx["packets"]), 50);
    let secs = f(&tx["seconds"]);
    assert!(secs >= 0.079, "four 20 ms gaps: {secs} s");
}

#[test]
fn reverse_and_bidir_account_for_every_stream() {
    let s = Server::start(&[]);
    let r = client_json("udp", &s, "127.0.0.1", &["-R", "-b", "20M", "-t", "1", "-P", "2"]);
    check_udp_flow(&r, "down", 2);
    let r = client_json("udp", &s, "127.0.0.1", &["--bidir", "-b", "20M", "-t", "1", "-P", "2"]);
    check_udp_flow(&r, "up", 2);
    check_udp_flow(&r, "down", 2);
}

#[test]
fn ipv6_udp_uses_the_ipv6_payload_default() {
    if !require::ipv6_loopback("ipv6_udp_uses_the_ipv6_payload_default") {
        return;
    }
    let s = Server::start_on("::", &[]);
    let r = client_json("udp", &s, "::1", &["-b", "10M", "-t", "1"]);
    check_udp_flow(&r, "up", 1);
    assert_eq!(r["test"]["block_bytes"], 1452);
    let r = client_json("udp", &s, "127.0.0.1", &["-b", "10M", "-t", "1"]);
    assert_eq!(r["test"]["block_bytes"], 1472);
}

#[test]
fn text_output_names_the_frame_size_and_the_loss() {
    let s = Server::start(&[]);
    let port = s.port.to_string();
    let run = netchar(&["udp", "127.0.0.1", "-p", &port, "-l", "1000", "-b", "10M", "-t", "1"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("payload 1000 bytes (1046-byte Ethernet frames)"), "{}", run.stdout);
    let default = netchar(&["udp", "127.0.0.1", "-p", &s.port.to_string(), "-t", "0.2"]);
    assert!(default.stdout.contains("payload 1472 bytes (1518-byte Ethernet frames)"), "{}", default.stdout);
    assert!(run.stdout.contains("10000000 bit/s in all"), "{}", run.stdout);
    assert!(run.stdout.contains("every datagram accounted for"), "{}", run.stdout);
    assert!(run.stdout.contains("jitter"), "{}", run.stdout);
}

#[test]
fn bad_udp_flags_exit_2_with_the_flag_named() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string();
    for (args, needle) in [
        (vec!["-l", "10"], "-l 10"),
        (vec!["--pps", "0"], "--pps 0"),
        (vec!["--pattern", "fast"], "--pattern fast"),
        (vec!["--pattern", "10@soon"], "--pattern 10@soon"),
        (vec!["--grace", "long"], "--grace long"),
        (vec!["-b", "1Q"], "-b 1Q"),
    ] {
        let mut full = vec!["udp", "127.0.0.1", "-p", &port];
        full.extend(args.iter());
        let run = netchar(&full);
        assert_eq!(run.code, 2, "{full:?}: {}", run.stderr);
        assert!(run.stderr.contains(needle), "{full:?}: {:?}", run.stderr);
        assert_eq!(run.stderr.trim().lines().count(), 1, "{:?}", run.stderr);
    }
}

#[test]
fn bwsweep_runs_every_rate_both_ways_and_find_max_rate_reports_its_trials() {
    let s = Server::start(&[]);
    let port = s.port.to_string();
    let run = netchar(&[
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
        "0.3",
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    let runs = v.as_array().unwrap();
    assert_eq!(runs.len(), 6, "3 rates × 2 directions");
    assert!(runs[..3].iter().all(|r| r["summary"]["up"].is_object()));
    assert!(runs[3..].iter().all(|r| r["summary"]["down"].is_object()));
    for (r, want) in runs.iter().zip([10e6, 20e6, 30e6, 10e6, 20e6, 30e6]) {
        let flow = if r["summary"]["up"].is_object() { "up" } else { "down" };
        let (tx, _) = check_udp_flow(r, flow, 1);
        on_schedule(tx, want, 0.3, 0.02);
    }
    let run = netchar(&["udp", "127.0.0.1", "-p", &port, "--find-max-rate", "-b", "50M", "-t", "0.3"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // 50 Mbit/s is loss-free on loopback, but on a busy machine a 0.3 s trial's receiver may
    // fall 1% behind it and the search goes on below: the first trial offers the ceiling, and
    // a rate at or under it is found.
    assert!(run.stdout.lines().nth(2).is_some_and(|l| l.contains(" 50.0 Mbit/s ")), "{}", run.stdout);
    assert!(run.stdout.contains("highest rate with loss <= 0%: "), "{}", run.stdout);
    let bad = netchar(&["suite", "nosuch", "127.0.0.1", "-p", &port]);
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("unrecognized subcommand 'nosuch'"), "{}", bad.stderr);
}

/// (offered, received, loss %) of a `--find-max-rate` trial from its JSON.
fn trial_figures(r: &Value) -> (u64, f64, f64) {
    let rx = &r["summary"]["up"]["receiver"];
    (u(&r["test"]["udp"]["rate"]["bits_per_second"]), f(&rx["bits_per_second"]), f(&rx["loss_percent"]))
}

#[test]
fn find_max_rate_json_is_one_document_of_the_trials_the_search_ran() {
    let s = Server::start(&[]);
    let port = s.port.to_string();
    // A ceiling loopback may or may not carry: whatever the verdicts, the array must hold the
    // trials of the binary search those verdicts steer, in order, and nothing else.
    let ceiling: u64 = 4_000_000_000;
    let run = netchar(&["udp", "127.0.0.1", "-p", &port, "--find-max-rate", "-b", "4G", "-t", "0.2", "--json"]);
    assert!(run.code == 0 || run.code == 1, "{}", run.stderr);
    let v: Value =
        serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("not one JSON document ({e}): {}", run.stdout));
    let trials = v.as_array().expect("an array of the trials");
    // 14 trials at most, and up to 6 more run again after a sender stall.
    assert!((1..=20).contains(&trials.len()), "{} trials", trials.len());
    let (mut lo, mut hi, mut rate) = (0u64, ceiling, ceiling);
    let mut found = false;
    let mut stalls = 0;
    for (n, t) in trials.iter().enumerate() {
        let (offered, received, loss) = trial_figures(t);
        assert_eq!(offered, rate, "trial {}: the rate the search's bracket gives", n + 1);
        assert_eq!(t["test"]["end"]["seconds"], 0.2, "trial {}: {}", n + 1, t["test"]);
        check_udp_flow(t, "up", 1);
        let pass = loss <= 0.0 && received >= 0.995 * offered as f64;
        // A failed trial whose sender went out more than 0.5% of the trial late is run again.
        let tx = &t["summary"]["up"]["sender"];
        let stalled = !pass && f(&tx["late_max_ms"]) * 1e-3 > 0.005 * f(&tx["seconds"]);
        if stalled && stalls < 6 {
            stalls += 1;
            assert!(n + 1 < trials.len(), "trial {}: a stalled trial is run again", n + 1);
            continue;
        }
        found |= pass;
        if pass {
            lo = rate;
        } else {
            hi = rate;
        }
        let last = pass && rate == ceiling || hi.saturating_sub(lo) <= hi / 100;
        assert_eq!(last, n + 1 == trials.len(), "trial {}: the search stops exactly when its rule says", n + 1);
        rate = lo + (hi - lo) / 2;
    }
    assert_eq!(run.code, if found { 0 } else { 1 });
}

#[test]
fn find_max_rate_text_table_shows_the_probe_and_each_trial_and_plots_one_trial() {
    let s = Server::start(&[]);
    let port = s.port.to_string();
    // No -b: a flat-out probe sets the ceiling, which the first trial offers.
    let run = netchar(&["udp", "127.0.0.1", "-p", &port, "--find-max-rate", "-t", "0.2"]);
    assert!(run.code == 0 || run.code == 1, "{}", run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    let probed =
        lines[0].strip_prefix("probe: as fast as possible, received ").unwrap_or_else(|| panic!("{}", run.stdout));
    assert!(
        lines[1].starts_with(&format!("searching 0 .. {probed} for the highest rate with loss <= 0% (0.2 s trials)"))
    );
    // The rows run to the line with the rate found; where the lost datagrams went, and a
    // sender's stalls, are said after it.
    let found = lines
        .iter()
        .position(|l| l.starts_with("highest rate") || l.starts_with("no rate tried"))
        .unwrap_or_else(|| panic!("no rate-found line: {}", run.stdout));
    let rows: Vec<&str> = lines[3..found].to_vec();
    assert!(!rows.is_empty(), "{}", run.stdout);
    for (n, row) in rows.iter().enumerate() {
        assert!(row.trim_start().starts_with(&format!("{} ", n + 1)), "{row}");
    }
    assert!(rows[0].contains(probed), "the first trial offers the probed rate: {}", run.stdout);
    let n = if rows.len() == 1 { "1 trial".to_string() } else { format!("{} trials", rows.len()) };
    assert!(lines[found].ends_with(&format!("({n})")), "{}", run.stdout);

    // 50 Mbit/s is loss-free on loopback: the first trial passes and ends the search (unless a
    // busy machine makes its receiver fall behind), and its one point is still plotted: the
    // chart has a point per trial, however many there were.
    let dir = tempfile::tempdir().unwrap();
    let plots = dir.path().join("plots");
    let html = dir.path().join("search.html");
    let run = netchar(&[
        "udp",
        "127.0.0.1",
        "-p",
        &port,
        "--find-max-rate",
        "-b",
        "50M",
        "-t",
        "0.3",
        "--plot",
        plots.to_str().unwrap(),
        "--report",
        html.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let rows = run.stdout.lines().filter(|l| l.trim_start().starts_with(char::is_numeric)).count();
    assert!(run.stdout.lines().nth(2).is_some_and(|l| l.contains(" 50.0 Mbit/s ")), "{}", run.stdout);
    let svg = std::fs::read_to_string(plots.join("sweep-find-max-rate.svg")).expect("the search's chart");
    let doc = roxmltree::Document::parse(&svg).expect("the SVG is well-formed XML");
    let texts: Vec<&str> = doc.descendants().filter(|n| n.has_tag_name("text")).filter_map(|n| n.text()).collect();
    for want in ["offered rate (Mbit/s)", "received rate (Mbit/s)", "loss (%)", "up received"] {
        assert!(texts.iter().any(|t| t.trim() == want), "no {want:?} in {texts:?}");
    }
    // A dot per trial on the received line (the loss line's points are triangles).
    let dots = doc.descendants().filter(|n| n.has_tag_name("circle")).count();
    assert_eq!(dots, rows, "{rows} trials: {}", run.stdout);
    assert!(plots.join("sweep-find-max-rate.png").is_file());
    // The HTML report draws the same chart.
    let report = std::fs::read_to_string(&html).unwrap();
    assert!(report.contains("id=\"plot-sweep-find-max-rate\""), "no search chart in the HTML report");
}

/// The live text shows every interval of a UDP sender and of an rr requester, the last one
/// included (their workers close it when the test ends, after the collector's last tick), each
/// under its own times: a stream's two intervals are never summed as one.
#[test]
fn live_text_shows_the_last_interval_of_udp_and_rr() {
    let s = Server::start(&[]);
    let port = s.port.to_string();
    for (kind, args, role, wanted) in [
        ("udp", &["-t", "3", "-i", "1", "--pps", "1000"][..], "up   sender", 3),
        ("rr", &["-t", "2", "-i", "1"][..], "up   sender", 2),
    ] {
        let mut all = vec![kind, "127.0.0.1", "-p", &port];
        all.extend_from_slice(args);
        let run = netchar(&all);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let lines: Vec<&str> = run.stdout.lines().filter(|l| l.starts_with("[  1]") && l.contains(role)).collect();
        let expected: Vec<String> = (0..wanted).map(|k| format!("{k}.00-{}.00", k + 1)).collect();
        let shown: Vec<bool> = expected.iter().map(|e| lines.iter().any(|l| l.contains(e.as_str()))).collect();
        assert!(shown.iter().all(|&x| x), "{kind}: intervals {expected:?} shown {shown:?}:\n{}", run.stdout);
        assert_eq!(lines.len(), wanted, "{kind}:\n{}", run.stdout);
        assert!(!run.stdout.contains("[SUM]"), "{kind}: one stream has no sum line:\n{}", run.stdout);
    }
}
