//! `netchar rr --under-load` end to end over loopback: the RRUL shape (TCP up and down in each
//! of BE, BK, CS5 and EF, one latency probe per class) against one server. Each flow's bytes
//! are checked with both ends' counters, each probe's transactions counted, the CDF of the
//! whole histogram read back from the JSON, and the HTML report's time-axis plot found. The
//! DSCP marks on the wire are checked in a namespace pair (netns_traffic.rs).

#[path = "support/loopback.rs"]
mod common;

use common::*;
use serde_json::Value;

/// The CDF of `rr` (a `summary.rr`-shaped object): bounded, quantiles rising, latency never
/// falling, from the minimum to the maximum the percentiles report.
fn check_cdf(rr: &Value, what: &str) {
    let cdf = rr["latency_cdf"].as_array().unwrap_or_else(|| panic!("{what}: no latency_cdf in {rr}"));
    assert!((100..=200).contains(&cdf.len()), "{what}: {} CDF points", cdf.len());
    for w in cdf.windows(2) {
        assert!(f(&w[0]["quantile"]) < f(&w[1]["quantile"]), "{what}: quantiles must rise: {w:?}");
        assert!(f(&w[0]["us"]) <= f(&w[1]["us"]), "{what}: latency must not fall: {w:?}");
    }
    let (first, last) = (&cdf[0], &cdf[cdf.len() - 1]);
    assert_eq!((f(&first["quantile"]), f(&last["quantile"])), (0.0, 1.0), "{what}");
    assert_eq!(f(&first["us"]), f(&rr["latency_us"]["min"]), "{what}: the CDF starts at the minimum");
    assert_eq!(f(&last["us"]), f(&rr["latency_us"]["max"]), "{what}: the CDF ends at the histogram's maximum");
}

/// The flow of `flow` ("up"/"down"): both ends' byte counters agree and are not zero, and its
/// receiver's intervals add up to them. Returns the bytes.
fn check_flow_bytes(flow: &Value, dir: &str) -> u64 {
    let s = &flow[dir];
    assert!(s.is_object(), "{dir} missing in {flow}");
    let (sent, received) = (u(&s["sender"]["total_bytes"]), u(&s["receiver"]["total_bytes"]));
    assert!(sent > 0, "no bytes sent {dir}: {flow}");
    assert_eq!(sent, received, "{dir}: the receiver's counter must equal the sender's (TCP): {s}");
    assert_eq!(s["bytes_match"], true);
    let iv: u64 =
        flow["intervals"].as_array().unwrap().iter().filter(|i| i["flow"] == dir).map(|i| u(&i["bytes"])).sum();
    assert_eq!(iv, u(&s["receiver"]["bytes"]), "{dir}: interval bytes against the receiver's total: {flow}");
    received
}

/// `netchar report --format csv` of a saved under-load result: a row per load flow and
/// direction with both ends' bytes, and a row per probe idle and loaded with its
/// transactions/s, each the JSON's figure exactly; markdown names the same rows.
fn check_csv_rows(r: &Value, saved: &std::path::Path) {
    let run = netchar(&["report", saved.to_str().unwrap(), "--format", "csv"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let mut lines = run.stdout.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap_or_else(|| panic!("no {name} column"));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let row = |suffix: &str| -> &Vec<&str> {
        let mut found = rows.iter().filter(|c| c[col("source")].ends_with(suffix));
        let row = found.next().unwrap_or_else(|| panic!("no row {suffix:?} in\n{}", run.stdout));
        assert!(found.next().is_none(), "two rows {suffix:?}");
        row
    };
    let ul = &r["summary"]["under_load"];
    for flow in ul["flows"].as_array().unwrap() {
        let (dir, class) = (flow["direction"].as_str().unwrap(), flow["class"].as_str().unwrap());
        let cells = row(&format!(" load {class} tcp {dir}"));
        assert_eq!((cells[col("kind")], cells[col("flow")]), ("tcp", dir));
        for (side, column) in [("sender", "sender_bytes"), ("receiver", "receiver_bytes")] {
            assert_eq!(cells[col(column)], u(&flow[dir][side]["bytes"]).to_string(), "{class} {dir} {side}");
        }
    }
    for probe in ul["probes"].as_array().unwrap() {
        let class = probe["class"].as_str().unwrap();
        for when in ["idle", "loaded"] {
            let cells = row(&format!(" probe {class} {when}"));
            let tps: f64 = cells[col("transactions_per_second")].parse().unwrap();
            assert_eq!(tps, f(&probe[when]["transactions_per_second"]), "{class} {when}");
        }
    }
    let md = netchar(&["report", saved.to_str().unwrap(), "--format", "markdown"]);
    assert!(md.stdout.contains(" load EF tcp down |") && md.stdout.contains(" probe CS5 loaded |"), "{}", md.stdout);
}

#[test]
fn rrul_runs_every_flow_in_its_direction_and_every_probe_in_its_class() {
    let s = Server::start(&[]);
    let r = client_json("rr", &s, "127.0.0.1", &["-t", "1", "-i", "0", "--under-load", "rrul"]);
    assert!(r["error"].is_null(), "{}", r["error"]);
    let ul = &r["summary"]["under_load"];
    assert_eq!(ul["load"], "rrul");
    let flows = ul["flows"].as_array().unwrap();
    let shape: Vec<(String, String)> = flows
        .iter()
        .map(|f| (f["direction"].as_str().unwrap().to_string(), f["class"].as_str().unwrap().to_string()))
        .collect();
    let want: Vec<(String, String)> = ["BE", "BK", "CS5", "EF"]
        .iter()
        .flat_map(|c| [("up".to_string(), c.to_string()), ("down".to_string(), c.to_string())])
        .collect();
    assert_eq!(shape, want);
    for flow in flows {
        assert!(flow["error"].is_null(), "{flow}");
        let (dir, other) = if flow["direction"] == "up" { ("up", "down") } else { ("down", "up") };
        check_flow_bytes(flow, dir);
        assert!(flow[other].is_null(), "a {dir} flow carried nothing {other}: {flow}");
        assert!(f(&flow["start"]) >= 0.0);
    }
    let probes = ul["probes"].as_array().unwrap();
    let classes: Vec<&str> = probes.iter().map(|p| p["class"].as_str().unwrap()).collect();
    assert_eq!(classes, ["BE", "BK", "CS5", "EF"]);
    let dscp: Vec<u64> = probes.iter().map(|p| u(&p["dscp"])).collect();
    assert_eq!(dscp, [0, 8, 40, 46]);
    for p in probes {
        assert!(p["error"].is_null(), "{p}");
        for phase in ["idle", "loaded"] {
            assert!(u(&p[phase]["transactions"]) > 0, "{} {phase}: {p}", p["class"]);
            check_cdf(&p[phase], &format!("{} {phase}", p["class"]));
        }
        let intervals = p["intervals"].as_array().unwrap();
        assert!(!intervals.is_empty(), "{} probe: no latency over time", p["class"]);
        let counted: u64 = intervals.iter().map(|i| u(&i["transactions"])).sum();
        assert_eq!(counted, u(&p["loaded"]["transactions"]), "{}: intervals against the whole", p["class"]);
        // The probes ran beside the load: after the first flow started.
        assert!(f(&p["start"]) > 0.0, "{p}");
    }
    // The top level is the first probe's loaded run.
    check_cdf(&r["summary"]["rr"], "summary.rr");
    assert_eq!(r["summary"]["rr_loaded"], probes[0]["loaded"]);
    assert_eq!(r["summary"]["rr_idle"], probes[0]["idle"]);
    assert!(r["summary"]["load"].is_null(), "with several flows, summary.under_load holds them");

    // The HTML report draws the flows and probes on one time axis, and the CDF from the JSON.
    let dir = std::env::temp_dir().join(format!("netchar-rrul-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let saved = dir.join("rrul.json");
    std::fs::write(&saved, serde_json::to_string(&r).unwrap()).unwrap();
    let html = dir.join("report.html");
    let run = netchar(&["report", saved.to_str().unwrap(), "--format", "html", "-o", html.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let html = std::fs::read_to_string(html).unwrap();
    assert_eq!(html.matches("<figure class=\"plot\"").count(), html.matches("<svg ").count());
    let start = html.find("-rrul_json-under-load-time\"").expect("the time-axis figure");
    let figure = &html[start..start + html[start..].find("</figure>").unwrap()];
    for legend in ["tcp up BE", "tcp down EF", "CS5 probe p50", "time (s)", "median round trip"] {
        assert!(figure.contains(legend), "the time-axis plot has no {legend:?}");
    }
    let start = html.find("-rrul_json-latency-cdf\"").expect("the CDF figure");
    let figure = &html[start..start + html[start..].find("</figure>").unwrap()];
    assert!(figure.contains("every round trip") && figure.contains("EF under load"), "the CDF of the histogram");
    check_csv_rows(&r, &saved);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_single_load_keeps_summary_load_and_adds_its_flow_and_probe() {
    let s = Server::start(&[]);
    let r = client_json("rr", &s, "127.0.0.1", &["-t", "1", "-i", "0", "--under-load", "tcp-down"]);
    assert!(r["error"].is_null(), "{}", r["error"]);
    let sm = &r["summary"];
    let flow = &sm["under_load"]["flows"][0];
    assert_eq!((flow["class"].as_str(), flow["dscp"].is_null()), (Some("unmarked"), true));
    let bytes = check_flow_bytes(flow, "down");
    assert_eq!(u(&sm["load"]["down"]["receiver"]["total_bytes"]), bytes);
    assert_eq!(sm["under_load"]["probes"].as_array().unwrap().len(), 1);
    assert!(u(&sm["rr_idle"]["transactions"]) > 0 && u(&sm["rr_loaded"]["transactions"]) > 0);
}

#[test]
fn bad_load_lists_are_refused_in_one_line() {
    for (load, says) in [
        ("tcp-up:dscp=zz", "dscp=zz: expected a DSCP name"),
        ("tcp-up,udp-up", "udp-up needs a rate"),
        ("tcp-sideways", "expected tcp-up"),
    ] {
        let run = netchar(&["rr", "127.0.0.1", "-p", "1", "-t", "1", "--under-load", load]);
        assert_eq!(run.code, 2, "{load}: {}", run.stderr);
        assert!(run.stderr.contains(says) && run.stderr.trim_end().lines().count() == 1, "{load}: {}", run.stderr);
    }
}
