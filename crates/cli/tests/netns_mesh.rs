//! `netchar mesh`, "namespaces as nodes": four network namespaces on a Linux bridge stand for
//! four Kubernetes nodes with host networking. Each runs the DaemonSet's server command and its
//! Job's `mesh run` command exactly as `mesh render` wrote them (the node name and the key's
//! path substituted, the slot shortened). Every ordered pair must be measured exactly once,
//! every server must see one test from each other node and never two at once (its own log),
//! no node may be in two tests at once, and the Jobs' lines must make a complete matrix (and
//! heat map).
//!
//! Needs root and `ip`; otherwise it prints "skipping netns test: <reason>" and passes, unless
//! NETCHAR_REQUIRE_ALL=1, in which case it fails.

#[path = "support/mesh.rs"]
mod mesh_checks;
#[path = "support/netns.rs"]
mod netns;

use netns::*;
use serde::Deserialize;
use serde_json::Value as Json;
use serde_yaml::Value;
use std::collections::HashSet;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const BIN: &str = env!("CARGO_BIN_EXE_netchar");
/// Where the rendered manifests mount the key.
const RENDERED_PSK: &str = "/etc/netchar/psk/keys";

fn command(container: &Value) -> Vec<String> {
    container["command"].as_sequence().unwrap().iter().map(|c| c.as_str().unwrap().to_string()).collect()
}

#[test]
fn four_namespaces_on_a_bridge_measure_every_ordered_pair_once_from_the_rendered_commands() {
    let Some(segment) = Bridged::create_or_skip(4) else { return };
    let names = ["node-a", "node-b", "node-c", "node-d"];
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys");
    std::fs::write(&keys, "mesh:0123456789abcdef0123456789abcdef\n").unwrap();
    let keys_arg = keys.to_str().unwrap();

    let node_list: Vec<String> = names.iter().zip(&segment.ips).map(|(n, ip)| format!("{n}={ip}")).collect();
    let start = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() + 3;
    let out = Command::new(BIN)
        .args(["mesh", "render", "--host-network", "--duration", "1", "--start", &start.to_string()])
        .args(["--nodes", &node_list.join(",")])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let docs: Vec<Value> = serde_yaml::Deserializer::from_str(std::str::from_utf8(&out.stdout).unwrap())
        .map(|d| Value::deserialize(d).unwrap())
        .collect();
    let substitute = |cmd: Vec<String>, node: &str| -> Vec<String> {
        cmd.into_iter().map(|a| a.replace("$(NODE_NAME)", node).replace(RENDERED_PSK, keys_arg)).collect()
    };
    let daemonset = docs.iter().find(|d| d["kind"] == "DaemonSet").unwrap();
    let server_cmd = command(&daemonset["spec"]["template"]["spec"]["containers"][0]);
    assert_eq!(server_cmd[..2], ["netchar", "server"]);

    // The DaemonSet: one server per node, on the rendered port of the node's own address.
    let servers: Vec<Server> = segment
        .nodes
        .iter()
        .zip(names)
        .map(|(ns, name)| {
            let mut cmd = ns.command(BIN);
            cmd.args(&substitute(server_cmd.clone(), name)[1..]);
            Server::spawn(cmd, "limits:", Duration::from_secs(10)).unwrap_or_else(|e| panic!("{name}: {e}"))
        })
        .collect();

    // The Jobs, started together; each sleeps to its slots.
    let jobs: Vec<&Value> = docs.iter().filter(|d| d["kind"] == "Job").collect();
    assert_eq!(jobs.len(), 4);
    let mut runs = Vec::new();
    for ((job, name), ns) in jobs.iter().zip(names).zip(&segment.nodes) {
        let pod = &job["spec"]["template"]["spec"];
        assert_eq!(pod["nodeSelector"]["kubernetes.io/hostname"], name);
        assert_eq!(pod["hostNetwork"], true);
        let mut cmd = substitute(command(&pod["containers"][0]), name);
        assert_eq!(cmd[..3], ["netchar", "mesh", "run"]);
        // Rendered rounds are 6 s for 1 s tests (room for pods on a real cluster); 3 s is room
        // enough between namespaces and keeps the 6 rounds short.
        let slot = cmd.iter().position(|a| a == "--slot").unwrap() + 1;
        assert_eq!(cmd[slot], "6");
        cmd[slot] = "3".into();
        let mut c = ns.command(BIN);
        c.args(&cmd[1..]);
        runs.push(std::thread::spawn(move || run_with_timeout(c, Duration::from_secs(90))));
    }
    let mut lines: Vec<Json> = Vec::new();
    let mut all_text = String::new();
    for (run, name) in runs.into_iter().zip(names) {
        let run = run.join().unwrap().unwrap();
        let stderrs: String = servers.iter().map(|s| s.stderr()).collect();
        assert!(
            run.status.is_some_and(|s| s.success()),
            "{name}'s job: {:?}\n{}\n{}\nservers:\n{stderrs}",
            run.status,
            run.stdout,
            run.stderr
        );
        all_text.push_str(&run.stdout);
        lines.extend(run.stdout.lines().map(|l| serde_json::from_str::<Json>(l).unwrap()));
    }

    // Every ordered pair exactly once, each a complete test in one of the 2(N-1) rounds.
    assert_eq!(lines.len(), 12, "4 × 3 ordered pairs:\n{all_text}");
    let pairs: HashSet<(&str, &str)> =
        lines.iter().map(|l| (l["source"].as_str().unwrap(), l["destination"].as_str().unwrap())).collect();
    assert_eq!(pairs.len(), 12, "every ordered pair exactly once:\n{all_text}");
    for l in &lines {
        assert!(l["error"].is_null() && l["result"]["error"].is_null(), "{l}");
        assert!(l["round"].as_u64().unwrap() < 6, "{l}");
    }
    // 3 tests as source and 3 as destination per node, never two at once.
    mesh_checks::assert_no_node_in_two_tests_at_once(&lines, &names, 6);

    // The servers' own logs: each saw one test from every other node's address on the bridge,
    // never refused one, never had another running beside it, and counted exactly the bytes
    // the Job's client reported.
    for (i, server) in servers.iter().enumerate() {
        let log = server.stderr();
        let tests: Vec<Json> = log
            .lines()
            .filter_map(|l| serde_json::from_str::<Json>(l).ok())
            .inspect(|v| assert_ne!(v["event"], "rejected", "{}: {v}", names[i]))
            .filter(|v| v["event"] == "test")
            .collect();
        assert_eq!(tests.len(), 3, "{}'s server log:\n{log}", names[i]);
        let mut peers: Vec<String> = Vec::new();
        for t in &tests {
            assert!(t["error"].is_null(), "{t}");
            assert_eq!(t["concurrent_tests"], 1, "{} ran two tests at once: {t}", names[i]);
            let peer: std::net::SocketAddr = t["peer"].as_str().unwrap().parse().unwrap();
            // The server listens dual-stack: an IPv4 client shows as ::ffff:a.b.c.d.
            let peer_ip = match peer.ip() {
                std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().map(std::net::IpAddr::V4).unwrap_or(peer.ip()),
                v4 => v4,
            };
            let src = segment
                .ips
                .iter()
                .position(|ip| std::net::IpAddr::V4(*ip) == peer_ip)
                .unwrap_or_else(|| panic!("{}: a test from {peer}, not a node of the bridge", names[i]));
            peers.push(names[src].to_string());
            let line = lines
                .iter()
                .find(|l| l["source"] == names[src] && l["destination"] == names[i])
                .expect("the client's line of this test");
            let client_sent = line["result"]["summary"]["up"]["sender"]["bytes"].as_u64().unwrap();
            let server_received: u64 =
                t["flows"].as_array().unwrap().iter().map(|f| f["bytes"].as_u64().unwrap()).sum();
            assert_eq!(server_received, client_sent, "{}: {t}\n{line}", names[i]);
        }
        peers.sort();
        let others: Vec<String> = names.iter().filter(|n| **n != names[i]).map(|n| n.to_string()).collect();
        assert_eq!(peers, others, "{}: one test from every other node", names[i]);
    }

    // The matrix from the Jobs' lines, as `kubectl logs --prefix` shows them.
    let prefixed: String = all_text.lines().map(|l| format!("[pod/netchar-mesh-x/mesh] {l}\n")).collect();
    let log = dir.path().join("mesh.log");
    std::fs::write(&log, prefixed).unwrap();
    let out = Command::new(BIN).args(["mesh", "matrix", "--csv"]).arg(&log).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let csv = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(rows[0], ["source", "node-a", "node-b", "node-c", "node-d"]);
    for (i, row) in rows[1..].iter().enumerate() {
        for (j, cell) in row[1..].iter().enumerate() {
            if i == j {
                assert!(cell.is_empty(), "{csv}");
            } else {
                assert!(cell.parse::<f64>().is_ok_and(|v| v > 0.0), "row {i} column {j}: {csv}");
            }
        }
    }
    // And its heat map: every pair but a node with itself is a cell with the CSV's figure.
    let out = Command::new(BIN).args(["mesh", "matrix", "--format", "html"]).arg(&log).output().unwrap();
    let html = String::from_utf8(out.stdout).unwrap();
    let start = html.find("<svg class=\"heatmap\"").expect("a heat map");
    let end = start + html[start..].find("</svg>").unwrap() + "</svg>".len();
    let svg = roxmltree::Document::parse(&html[start..end]).unwrap();
    let values: Vec<&str> = svg
        .descendants()
        .filter(|n| n.has_tag_name("rect") && n.attribute("class") == Some("cell"))
        .map(|n| n.attribute("data-value").unwrap_or(""))
        .collect();
    let from_csv: Vec<&str> = rows[1..].iter().flat_map(|r| r[1..].iter().copied()).collect();
    assert_eq!(values, from_csv, "4 × 4 cells, row by row");
}
