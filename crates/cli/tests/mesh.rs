//! `netchar mesh`: the Kubernetes renders (golden files in deploy/kubernetes/ and structural
//! checks of the parsed YAML), then "processes as nodes": four `netchar server`s on loopback, one
//! per node, and the four Jobs' commands exactly as rendered (node name substituted) run side by
//! side; every ordered pair is measured exactly once, no node is in two tests at once, and the
//! lines make a complete matrix.

#[path = "support/loopback.rs"]
mod common;
#[path = "support/mesh.rs"]
mod mesh_checks;

use common::*;
use serde_json::Value as Json;
use serde_yaml::Value;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn render(args: &[&str]) -> String {
    let out = Command::new(BIN).args(["mesh", "render"]).args(args).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn parse_docs(yaml: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(yaml).map(|d| Value::deserialize(d).unwrap()).collect()
}

use serde::Deserialize;

fn golden(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/kubernetes").join(name)
}

/// Compares with the golden file; NETCHAR_BLESS=1 rewrites it.
fn check_golden(name: &str, text: &str) {
    let path = golden(name);
    if std::env::var("NETCHAR_BLESS").is_ok() {
        std::fs::write(&path, text).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(want == text, "{} differs from the render (NETCHAR_BLESS=1 to update):\n{text}", path.display());
}

fn s<'a>(v: &'a Value, path: &[&str]) -> &'a Value {
    path.iter().fold(v, |v, k| &v[*k])
}

fn command(container: &Value) -> Vec<String> {
    container["command"].as_sequence().unwrap().iter().map(|c| c.as_str().unwrap().to_string()).collect()
}

#[test]
fn cronjob_renders_match_the_golden_files() {
    let nodes = "--nodes=node-a,node-b,node-c,node-d";
    check_golden("mesh-cronjob.yaml", &render(&[nodes, "--schedule", "0 */4 * * *"]));
    check_golden("mesh-cronjob-hostnetwork.yaml", &render(&[nodes, "--schedule", "0 */4 * * *", "--host-network"]));
}

#[test]
fn rendered_manifests_have_the_structure_kubernetes_needs() {
    let yaml =
        render(&["--nodes", "node-a,node-b.example,node-c=10.0.0.3", "--start", "1800000000", "--duration", "5"]);
    let docs = parse_docs(&yaml);
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["Namespace", "ServiceAccount", "DaemonSet", "Service", "Job", "Job", "Job"]);
    let api: HashMap<&str, &str> = [
        ("Namespace", "v1"),
        ("ServiceAccount", "v1"),
        ("DaemonSet", "apps/v1"),
        ("Service", "v1"),
        ("Job", "batch/v1"),
    ]
    .into();
    for d in &docs {
        assert_eq!(d["apiVersion"].as_str(), Some(api[d["kind"].as_str().unwrap()]));
        if d["kind"] != "Namespace" {
            assert_eq!(d["metadata"]["namespace"], "netchar");
        }
    }
    assert_eq!(docs[1]["automountServiceAccountToken"], false);
    let ds = &docs[2];
    let pod = s(ds, &["spec", "template", "spec"]);
    assert_eq!(s(ds, &["spec", "selector", "matchLabels"]), s(ds, &["spec", "template", "metadata", "labels"]));
    let server = &pod["containers"][0];
    let cmd = command(server);
    assert_eq!(&cmd[..3], ["netchar", "server", "--json"]);
    assert!(cmd.windows(2).any(|w| w == ["--max-concurrent", "1"]));
    assert!(cmd.windows(2).any(|w| w == ["--psk-file", "/etc/netchar/psk/keys"]));
    assert_eq!(s(server, &["env"])[0]["name"], "NODE_NAME");
    assert_eq!(s(server, &["env"])[0]["valueFrom"]["fieldRef"]["fieldPath"], "spec.nodeName");
    assert_eq!(s(pod, &["volumes"])[0]["secret"]["secretName"], "netchar-psk");
    assert_eq!(server["ports"][0]["hostPort"], 5300);
    assert!(pod["hostNetwork"].is_null());
    // The image packaging/build-image.sh builds, and what its user (65532) needs to read the
    // key: the volume's group, readable by the group; no capability in any container.
    let image = concat!("localhost/netchar:", env!("CARGO_PKG_VERSION"));
    assert_eq!(server["image"], image);
    let build_image =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging/build-image.sh"))
            .expect("packaging/build-image.sh");
    assert!(build_image.contains("ref=${2:-localhost/netchar:$version}"), "build-image.sh names another image");
    for key in ["runAsUser", "runAsGroup", "fsGroup"] {
        assert_eq!(pod["securityContext"][key], 65532, "{key}");
    }
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(s(pod, &["volumes"])[0]["secret"]["defaultMode"], 0o440);
    assert_eq!(server["securityContext"]["capabilities"]["drop"][0], "ALL");
    assert_eq!(server["securityContext"]["allowPrivilegeEscalation"], false);
    let svc = &docs[3];
    assert_eq!(svc["spec"]["clusterIP"], "None");
    assert_eq!(svc["spec"]["selector"], s(ds, &["spec", "template", "metadata", "labels"]).clone());

    let nodes = ["node-a", "node-b.example", "node-c"];
    for (job, node) in docs[4..].iter().zip(nodes) {
        let spec = &job["spec"];
        assert_eq!(spec["backoffLimit"], 0);
        // 3 nodes: 6 rounds of 10 s (5 s tests), and the wait for the start.
        assert!(spec["activeDeadlineSeconds"].as_u64().unwrap() >= 60);
        let pod = s(spec, &["template", "spec"]);
        assert_eq!(pod["restartPolicy"], "Never");
        assert_eq!(pod["nodeSelector"]["kubernetes.io/hostname"], node);
        assert_eq!(job["metadata"]["annotations"]["netchar/source-node"], node);
        let c = &pod["containers"][0];
        assert_eq!(c["env"][0]["valueFrom"]["fieldRef"]["fieldPath"], "spec.nodeName");
        assert_eq!(c["image"], image);
        assert_eq!(pod["securityContext"]["fsGroup"], 65532);
        assert_eq!(c["securityContext"]["capabilities"]["drop"][0], "ALL");
        let cmd = command(c);
        assert_eq!(&cmd[..5], ["netchar", "mesh", "run", "--node", "$(NODE_NAME)"]);
        assert!(cmd.windows(2).any(|w| w == ["--nodes", "node-a,node-b.example,node-c=10.0.0.3"]));
        assert!(cmd.windows(2).any(|w| w == ["--start", "1800000000"]));
        assert!(cmd.windows(2).any(|w| w == ["--slot", "10"]));
        assert_eq!(cmd[cmd.len() - 3..], ["--", "-t", "5"]);
        let name = job["metadata"]["name"].as_str().unwrap();
        assert!(
            name.len() <= 52 && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
            "{name}"
        );
    }

    let host = parse_docs(&render(&["--nodes", "a,b", "--host-network", "--schedule", "*/30 * * * *"]));
    assert_eq!(s(&host[2], &["spec", "template", "spec", "hostNetwork"]), &Value::Bool(true));
    let cron = &host[4];
    assert_eq!(cron["kind"], "CronJob");
    assert_eq!(cron["spec"]["concurrencyPolicy"], "Forbid");
    let pod = s(cron, &["spec", "jobTemplate", "spec", "template", "spec"]);
    assert_eq!(pod["hostNetwork"], true);
    let env: Vec<&Value> = pod["containers"][0]["env"].as_sequence().unwrap().iter().collect();
    assert_eq!(env[1]["valueFrom"]["fieldRef"]["fieldPath"], "metadata.labels['job-name']");
    assert!(command(&pod["containers"][0]).windows(2).any(|w| w == ["--start-from-job-name", "$(JOB_NAME)"]));

    let bad = Command::new(BIN).args(["mesh", "render", "--nodes", "Node_A,b"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn four_nodes_measure_every_ordered_pair_once_and_never_two_tests_on_a_node() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys");
    std::fs::write(&keys, "mesh:0123456789abcdef0123456789abcdef\n").unwrap();
    let keys_arg = keys.to_str().unwrap();
    // One server per node, each allowing one test at a time: a test that overlapped another on
    // the same node would be refused as busy.
    let servers: Vec<Server> = (0..4).map(|_| Server::start(&["--json", "--psk-file", keys_arg])).collect();
    let names = ["n1", "n2", "n3", "n4"];
    let node_list: Vec<String> = names.iter().zip(&servers).map(|(n, s)| format!("{n}=127.0.0.1:{}", s.port)).collect();
    let start = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() + 2;
    let yaml = render(&["--nodes", &node_list.join(","), "--start", &start.to_string(), "--duration", "1"]);
    let jobs: Vec<Value> = parse_docs(&yaml).into_iter().filter(|d| d["kind"] == "Job").collect();
    assert_eq!(jobs.len(), 4);
    let mut children = Vec::new();
    for (job, name) in jobs.iter().zip(names) {
        let c = &s(job, &["spec", "template", "spec"])["containers"][0];
        let cmd: Vec<String> = command(c)
            .into_iter()
            .map(|a| a.replace("$(NODE_NAME)", name).replace("/etc/netchar/psk/keys", keys_arg))
            .collect();
        assert_eq!(cmd[0], "netchar");
        // Rounds of 6 s (1 s tests); the test keeps the rendered commands but a shorter slot.
        let mut cmd = cmd;
        let slot = cmd.iter().position(|a| a == "--slot").unwrap() + 1;
        assert_eq!(cmd[slot], "6");
        cmd[slot] = "3".into();
        children.push(Command::new(BIN).args(&cmd[1..]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap());
    }
    let mut lines: Vec<Json> = Vec::new();
    let mut all_text = String::new();
    for child in children {
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
        all_text.push_str(&text);
        lines.extend(text.lines().map(|l| serde_json::from_str::<Json>(l).unwrap()));
    }
    assert_eq!(lines.len(), 12, "4 × 3 ordered pairs");
    let pairs: HashSet<(String, String)> = lines
        .iter()
        .map(|l| (l["source"].as_str().unwrap().into(), l["destination"].as_str().unwrap().into()))
        .collect();
    assert_eq!(pairs.len(), 12, "every ordered pair exactly once");
    for l in &lines {
        assert!(l["result"]["error"].is_null(), "{l}");
        let received = l["result"]["summary"]["up"]["receiver"]["bytes"].as_u64().unwrap();
        assert_eq!(received, l["result"]["summary"]["up"]["sender"]["bytes"].as_u64().unwrap());
    }
    // 3 tests as source and 3 as destination per node, never two at once.
    let rounds = mesh_checks::assert_no_node_in_two_tests_at_once(&lines, &names, 6);
    assert_eq!(rounds, 6, "2(N-1) rounds");
    // From the servers' own logs: each ran exactly 3 tests, none refused.
    for s in &servers {
        let mut tests = 0;
        for l in s.log_lines(std::time::Duration::from_millis(500)) {
            if let Ok(v) = serde_json::from_str::<Json>(&l) {
                assert!(v["error"].is_null(), "{l}");
                tests += usize::from(v["event"] == "test");
            }
        }
        assert_eq!(tests, 3);
    }
    // The matrix from the lines (as `kubectl logs --prefix` shows them).
    let prefixed: String = all_text.lines().map(|l| format!("[pod/netchar-mesh-x/mesh] {l}\n")).collect();
    let log = dir.path().join("mesh.log");
    std::fs::write(&log, prefixed).unwrap();
    let out = Command::new(BIN).args(["mesh", "matrix", "--csv"]).arg(&log).output().unwrap();
    assert!(out.status.success());
    let csv = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(rows[0], ["source", "n1", "n2", "n3", "n4"]);
    for (i, row) in rows[1..].iter().enumerate() {
        for (j, cell) in row[1..].iter().enumerate() {
            assert_eq!(cell.is_empty(), i == j, "row {i} column {j}: {csv}");
        }
    }
    let text = Command::new(BIN).args(["mesh", "matrix"]).arg(&log).output().unwrap();
    assert!(!String::from_utf8(text.stdout).unwrap().contains("missing"));

    // The HTML report's heat map: N×N cells, each pair's receiver rate from its line.
    let html_file = dir.path().join("mesh.html");
    let out = Command::new(BIN).args(["mesh", "matrix", "--html", "-o"]).arg(&html_file).arg(&log).output().unwrap();
    assert!(out.status.success() && out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    let html = std::fs::read_to_string(&html_file).unwrap();
    let stdout = Command::new(BIN).args(["mesh", "matrix", "--format", "html"]).arg(&log).output().unwrap();
    assert_eq!(String::from_utf8(stdout.stdout).unwrap(), html, "--format html is --html");
    let start = html.find("<svg class=\"heatmap\"").expect("a heat map");
    let end = start + html[start..].find("</svg>").unwrap() + "</svg>".len();
    assert_eq!(html.matches("<svg class=\"heatmap\"").count(), 1, "throughput only");
    let svg = roxmltree::Document::parse(&html[start..end]).unwrap();
    let cells: Vec<roxmltree::Node> =
        svg.descendants().filter(|n| n.has_tag_name("rect") && n.attribute("class") == Some("cell")).collect();
    assert_eq!(cells.len(), 16, "4 × 4 cells");
    for (k, cell) in cells.iter().enumerate() {
        let (source, destination) = (names[k / 4], names[k % 4]);
        assert_eq!(cell.attribute("data-source"), Some(source));
        assert_eq!(cell.attribute("data-destination"), Some(destination));
        let value = cell.attribute("data-value").map(|v| v.parse::<f64>().unwrap());
        if source == destination {
            assert_eq!(value, None);
            continue;
        }
        let line = lines.iter().find(|l| l["source"] == source && l["destination"] == destination).unwrap();
        let bits = line["result"]["summary"]["up"]["receiver"]["bits_per_second"].as_f64().unwrap();
        assert_eq!(value, Some(bits / 1e6), "{source} → {destination}");
    }
}
