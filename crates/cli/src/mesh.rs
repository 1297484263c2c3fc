//! `netchar mesh`: measuring every ordered pair of a set of nodes without an orchestrator.
//! Every node runs a server (a Kubernetes DaemonSet); every node also runs `mesh run` (one Job
//! per node), and all of them follow the same round-robin slot plan from the same start time:
//! in each round every node is in at most one test, so no test shares a node with another and
//! the servers' one-test-at-a-time rule is only a safety net. `mesh render` writes the
//! manifests, `mesh matrix` turns the JSON lines the Jobs print into the N×N matrix. The lines
//! and the matrix's formats are `netchar_report::mesh`'s; this module renders, schedules, runs
//! the clients and reads and writes files.

use crate::pscheduler::run_with_limit;
use anyhow::{anyhow, bail, Context, Result};
use netchar_report::mesh::{Format, MeshLine, Metric, TestOutput};
use std::fmt::Write as _;
use std::io::BufRead;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// `netchar mesh`.
#[derive(Debug, clap::Args)]
pub(crate) struct MeshArgs {
    #[command(subcommand)]
    pub(crate) command: MeshCommand,
}

#[derive(Debug, clap::Subcommand)]
pub(crate) enum MeshCommand {
    /// Print the Kubernetes manifests for NODES (YAML documents on stdout).
    Render(RenderArgs),
    /// Run this node's tests of the slot plan; one JSON line per test on stdout.
    Run(RunArgs),
    /// Turn `mesh run` lines (files, or - for stdin) into the N×N matrix.
    Matrix(MatrixArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct RenderArgs {
    /// Nodes, comma separated: NAME (the Kubernetes node name, also its address) or NAME=ADDRESS.
    #[arg(long, value_delimiter = ',', required = true)]
    pub(crate) nodes: Vec<String>,
    /// Namespace of everything rendered.
    #[arg(long, default_value = "netchar")]
    pub(crate) namespace: String,
    /// Container image with netchar on PATH; the default is the image packaging/build-image.sh
    /// builds (docs/install.md), which runs as UID 65532.
    #[arg(long, default_value = concat!("localhost/netchar:", env!("CARGO_PKG_VERSION")))]
    pub(crate) image: String,
    /// Server port (TCP and UDP), on the node's address (hostPort, or the host's own with --host-network).
    #[arg(long, default_value_t = 5300)]
    pub(crate) port: u16,
    /// Servers and clients in the nodes' network namespace instead of the pod network.
    #[arg(long)]
    pub(crate) host_network: bool,
    /// Seconds each test sends.
    #[arg(long, default_value_t = 10)]
    pub(crate) duration: u32,
    /// Start of round 0, Unix seconds (Jobs start together and sleep to their slot). Default: now + 120 s.
    #[arg(long, conflicts_with = "schedule")]
    pub(crate) start: Option<u64>,
    /// Render CronJobs on this schedule (e.g. "0 */4 * * *") instead of Jobs; each run starts
    /// 60 s after its scheduled minute (read from the Job's name).
    #[arg(long)]
    pub(crate) schedule: Option<String>,
}

#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// This node's name (in Kubernetes: $(NODE_NAME), from spec.nodeName).
    #[arg(long)]
    pub(crate) node: String,
    /// Every node of the mesh, in the same order everywhere: NAME or NAME=HOST[:PORT].
    #[arg(long, value_delimiter = ',', required = true)]
    pub(crate) nodes: Vec<String>,
    /// Start of round 0 in Unix seconds.
    #[arg(long, required_unless_present = "start_from_job_name")]
    pub(crate) start: Option<f64>,
    /// Start from a CronJob's Job name (`NAME-MINUTES`: the scheduled minute) plus --start-delay.
    #[arg(long, value_name = "JOB_NAME")]
    pub(crate) start_from_job_name: Option<String>,
    /// Seconds after the scheduled minute that round 0 starts (with --start-from-job-name).
    #[arg(long, default_value_t = 60)]
    pub(crate) start_delay: u64,
    /// Seconds per round; a test still running at the end of its round is stopped.
    #[arg(long)]
    pub(crate) slot: f64,
    /// Server port where a node entry names none.
    #[arg(long, default_value_t = 5300)]
    pub(crate) port: u16,
    /// The test each pair runs.
    #[arg(long, default_value = "tcp", value_parser = ["tcp", "udp", "rr"])]
    pub(crate) test: String,
    /// Authenticate with a pre-shared key from FILE.
    #[arg(long, value_name = "FILE")]
    pub(crate) psk_file: Option<PathBuf>,
    /// Flags for each test's client after `--` (default: -t 10).
    #[arg(last = true)]
    pub(crate) client_args: Vec<String>,
}

#[derive(Debug, clap::Args)]
pub(crate) struct MatrixArgs {
    /// Files of `mesh run` lines (`kubectl logs --prefix` lines are fine); - for stdin.
    #[arg(required = true)]
    pub(crate) logs: Vec<PathBuf>,
    /// CSV instead of a text table (as --format csv).
    #[arg(long, conflicts_with_all = ["html", "format"])]
    pub(crate) csv: bool,
    /// The HTML report's heat map, one self-contained page (as --format html).
    #[arg(long, conflicts_with = "format")]
    pub(crate) html: bool,
    /// text (a table), csv, or html (heat maps of throughput, and of the latency with
    /// --metric rtt|latency).
    #[arg(long, value_parser = ["text", "csv", "html"])]
    pub(crate) format: Option<String>,
    /// Write to FILE instead of stdout.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub(crate) output: Option<PathBuf>,
    /// The figure: throughput (receiver, Mbit/s), rtt (TCP sender's mean smoothed RTT, µs) or
    /// latency (rr median, µs).
    #[arg(long, default_value = "throughput", value_parser = ["throughput", "rtt", "latency"])]
    pub(crate) metric: String,
}

pub(crate) fn run(args: MeshArgs) -> Result<u8> {
    match args.command {
        MeshCommand::Render(a) => {
            let yaml = render(&a, now_secs())?;
            print!("{yaml}");
            Ok(0)
        }
        MeshCommand::Run(a) => run_node(&a),
        MeshCommand::Matrix(a) => matrix(&a),
    }
}

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// The round-robin ("circle") plan for `n` nodes: rounds of (source, destination) index pairs.
/// Every ordered pair appears exactly once and no node is in two tests of one round. With an
/// even `n` that takes 2(n−1) rounds, the fewest possible; with an odd `n` one node sits out
/// each round and it takes 2n rounds, again the fewest (each round holds at most (n−1)/2 tests).
pub(crate) fn round_robin(n: usize) -> Vec<Vec<(usize, usize)>> {
    if n < 2 {
        return Vec::new();
    }
    let m = n + n % 2; // a "bye" seat for odd n
    let mut seats: Vec<usize> = (0..m).collect();
    let mut half = Vec::with_capacity(m - 1);
    for _ in 0..m - 1 {
        let mut round = Vec::new();
        for i in 0..m / 2 {
            let (a, b) = (seats[i], seats[m - 1 - i]);
            if a < n && b < n {
                round.push((a, b));
            }
        }
        half.push(round);
        // Seat 0 stays; the others turn one place.
        let last = seats.pop().expect("m >= 2");
        seats.insert(1, last);
    }
    let reversed: Vec<Vec<(usize, usize)>> = half.iter().map(|r| r.iter().map(|&(a, b)| (b, a)).collect()).collect();
    half.into_iter().chain(reversed).collect()
}

/// A node of `--nodes`: its name and the address its server answers on.
#[derive(Debug, Clone, PartialEq)]
struct Node {
    name: String,
    host: String,
    port: Option<u16>,
}

fn parse_nodes(specs: &[String]) -> Result<Vec<Node>> {
    let mut nodes = Vec::new();
    for spec in specs.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        let (name, addr) = spec.split_once('=').unwrap_or((spec, spec));
        if !valid_node_name(name) {
            bail!("--nodes {name}: not a Kubernetes node name (lowercase letters, digits, '-' and '.')");
        }
        let (host, port) = match addr.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') || h.starts_with('[') => (
                h.trim_matches(['[', ']']).to_string(),
                Some(p.parse::<u16>().map_err(|_| anyhow!("--nodes {spec}: bad port {p}"))?),
            ),
            _ => (addr.trim_matches(['[', ']']).to_string(), None),
        };
        if host.is_empty() || !host.chars().all(|c| c.is_ascii_alphanumeric() || ".-:_".contains(c)) {
            bail!("--nodes {spec}: not a host name or address");
        }
        if nodes.iter().any(|n: &Node| n.name == name) {
            bail!("--nodes: {name} is listed twice");
        }
        nodes.push(Node { name: name.into(), host, port });
    }
    if nodes.len() < 2 {
        bail!("--nodes: a mesh needs at least two nodes");
    }
    Ok(nodes)
}

fn valid_node_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && !name.starts_with(['-', '.'])
        && !name.ends_with(['-', '.'])
}

/// A DNS-1123 label for the Job of `node`: Job names must be labels, node names may have dots.
fn job_name(node: &str) -> String {
    let mut s: String = node.chars().map(|c| if c == '.' { '-' } else { c }).collect();
    // Room for "netchar-mesh-" and a CronJob's "-MINUTES" suffix within 52 characters.
    s.truncate(30);
    format!("netchar-mesh-{}", s.trim_end_matches('-'))
}

fn node_list(nodes: &[Node]) -> String {
    nodes
        .iter()
        .map(|n| {
            if n.host == n.name && n.port.is_none() {
                n.name.clone()
            } else {
                format!("{}={}", n.name, addr_of(n, None))
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn addr_of(n: &Node, default_port: Option<u16>) -> String {
    let host = if n.host.contains(':') { format!("[{}]", n.host) } else { n.host.clone() };
    match n.port.or(default_port) {
        Some(p) => format!("{host}:{p}"),
        None => host,
    }
}

/// Seconds per round for a test of `duration` s: connection setup, results and a margin.
fn slot_secs(duration: u32) -> u32 {
    duration + 5
}

/// Where the key file is mounted in every pod.
const PSK_PATH: &str = "/etc/netchar/psk/keys";

fn yaml_list(items: &[String], indent: usize) -> String {
    let pad = " ".repeat(indent);
    items.iter().map(|i| format!("{pad}- {}\n", serde_json::to_string(i).unwrap_or_default())).collect()
}

/// The manifests: namespace, ServiceAccount (no RBAC: nothing here calls the API), the server
/// DaemonSet, a headless Service, and one Job (or CronJob) per source node.
pub(crate) fn render(a: &RenderArgs, now: u64) -> Result<String> {
    let nodes = parse_nodes(&a.nodes)?;
    if !valid_node_name(&a.namespace) || a.namespace.contains('.') {
        bail!("--namespace {}: not a Kubernetes namespace name", a.namespace);
    }
    if a.duration == 0 {
        bail!("--duration 0: a test must send for at least 1 s");
    }
    let ns = &a.namespace;
    let labels = "app.kubernetes.io/name: netchar\n    app.kubernetes.io/part-of: netchar-mesh";
    let mut y = String::new();
    let _ = write!(
        y,
        "# netchar mesh for {n} nodes: rendered by `netchar mesh render`. Create the key first:\n\
         #   kubectl -n {ns} create secret generic netchar-psk --from-literal=keys=mesh:$(openssl rand -hex 32)\n\
         apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n  labels:\n    {labels}\n\
         ---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: netchar\n  namespace: {ns}\n  labels:\n    {labels}\n\
         automountServiceAccountToken: false\n",
        n = nodes.len()
    );
    let host_net =
        if a.host_network { "      hostNetwork: true\n      dnsPolicy: ClusterFirstWithHostNet\n" } else { "" };
    let server_cmd = vec![
        "netchar".to_string(),
        "server".into(),
        "--json".into(),
        "--max-concurrent".into(),
        "1".into(),
        "-p".into(),
        a.port.to_string(),
        "--psk-file".into(),
        PSK_PATH.into(),
    ];
    let ports = if a.host_network {
        format!(
            "        ports:\n        - name: netchar-tcp\n          containerPort: {p}\n          protocol: TCP\n        - name: netchar-udp\n          containerPort: {p}\n          protocol: UDP\n",
            p = a.port
        )
    } else {
        format!(
            "        ports:\n        - name: netchar-tcp\n          containerPort: {p}\n          hostPort: {p}\n          protocol: TCP\n        - name: netchar-udp\n          containerPort: {p}\n          hostPort: {p}\n          protocol: UDP\n",
            p = a.port
        )
    };
    let node_env = "        env:\n        - name: NODE_NAME\n          valueFrom:\n            fieldRef:\n              fieldPath: spec.nodeName\n";
    let psk_mount =
        "        volumeMounts:\n        - name: psk\n          mountPath: /etc/netchar/psk\n          readOnly: true\n";
    let psk_volume = "      volumes:\n      - name: psk\n        secret:\n          secretName: netchar-psk\n          defaultMode: 288\n";
    // The image's user (UID and GID 65532) reads the key as the volume's group (fsGroup,
    // mode 0440); no container needs a capability, a writable root or privilege escalation.
    let pod_security = "      securityContext:\n        runAsNonRoot: true\n        runAsUser: 65532\n        runAsGroup: 65532\n        fsGroup: 65532\n";
    let container_security = "        securityContext:\n          allowPrivilegeEscalation: false\n          readOnlyRootFilesystem: true\n          capabilities:\n            drop:\n            - ALL\n";
    let _ = write!(
        y,
        "---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: netchar-server\n  namespace: {ns}\n  labels:\n    {labels}\n    app.kubernetes.io/component: server\n\
         spec:\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: netchar\n      app.kubernetes.io/component: server\n\
         \x20 template:\n    metadata:\n      labels:\n        app.kubernetes.io/name: netchar\n        app.kubernetes.io/component: server\n\
         \x20   spec:\n      serviceAccountName: netchar\n      automountServiceAccountToken: false\n{host_net}{pod_security}\
         \x20     containers:\n      - name: server\n        image: {image}\n        command:\n{cmd}{ports}{node_env}{container_security}{psk_mount}{psk_volume}",
        image = serde_json::to_string(&a.image)?,
        cmd = yaml_list(&server_cmd, 8),
    );
    let _ = write!(
        y,
        "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: netchar-server\n  namespace: {ns}\n  labels:\n    {labels}\n\
         spec:\n  clusterIP: None\n  selector:\n    app.kubernetes.io/name: netchar\n    app.kubernetes.io/component: server\n\
         \x20 ports:\n  - name: netchar-tcp\n    port: {p}\n    protocol: TCP\n  - name: netchar-udp\n    port: {p}\n    protocol: UDP\n",
        p = a.port
    );
    let plan = round_robin(nodes.len());
    let slot = slot_secs(a.duration);
    let start = a.start.unwrap_or(now + 120);
    // The wait for round 0 (a CronJob's is --start-delay), every round, and room to start pods.
    let wait = if a.schedule.is_some() { 60 } else { start.saturating_sub(now) };
    let deadline = wait + plan.len() as u64 * u64::from(slot) + 300;
    for node in &nodes {
        let mut cmd = vec![
            "netchar".to_string(),
            "mesh".into(),
            "run".into(),
            "--node".into(),
            "$(NODE_NAME)".into(),
            "--nodes".into(),
            node_list(&nodes),
            "--port".into(),
            a.port.to_string(),
            "--slot".into(),
            slot.to_string(),
            "--psk-file".into(),
            PSK_PATH.into(),
        ];
        let mut env = node_env.to_string();
        match &a.schedule {
            None => cmd.extend(["--start".into(), start.to_string()]),
            Some(_) => {
                cmd.extend(["--start-from-job-name".into(), "$(JOB_NAME)".into()]);
                env.push_str(
                    "        - name: JOB_NAME\n          valueFrom:\n            fieldRef:\n              fieldPath: metadata.labels['job-name']\n",
                );
            }
        }
        cmd.extend(["--".into(), "-t".into(), a.duration.to_string()]);
        let pod = format!(
            "serviceAccountName: netchar\nautomountServiceAccountToken: false\nrestartPolicy: Never\n{hn}{pod_sec}\
             nodeSelector:\n  kubernetes.io/hostname: {node}\ncontainers:\n- name: mesh\n  image: {image}\n  command:\n{cmd}{env}{sec}{mount}{vol}",
            hn = if a.host_network { "hostNetwork: true\ndnsPolicy: ClusterFirstWithHostNet\n" } else { "" },
            node = serde_json::to_string(&node.name)?,
            image = serde_json::to_string(&a.image)?,
            cmd = yaml_list(&cmd, 2),
            env = dedent(&env, 6),
            pod_sec = dedent(pod_security, 6),
            sec = dedent(container_security, 6),
            mount = dedent(psk_mount, 6),
            vol = dedent(psk_volume, 6),
        );
        let job_spec = format!(
            "backoffLimit: 0\nactiveDeadlineSeconds: {deadline}\nttlSecondsAfterFinished: 86400\ntemplate:\n  metadata:\n    labels:\n      app.kubernetes.io/name: netchar\n      app.kubernetes.io/component: mesh-client\n  spec:\n{pod}",
            pod = indent(&pod, 4)
        );
        let meta = format!(
            "metadata:\n  name: {name}\n  namespace: {ns}\n  labels:\n    {labels}\n    app.kubernetes.io/component: mesh-client\n  annotations:\n    netchar/source-node: {node}\n",
            name = job_name(&node.name),
            node = serde_json::to_string(&node.name)?,
        );
        match &a.schedule {
            None => {
                let _ = write!(y, "---\napiVersion: batch/v1\nkind: Job\n{meta}spec:\n{}", indent(&job_spec, 2));
            }
            Some(cron) => {
                let _ = write!(
                    y,
                    "---\napiVersion: batch/v1\nkind: CronJob\n{meta}spec:\n  schedule: {cron}\n  concurrencyPolicy: Forbid\n  startingDeadlineSeconds: 30\n  jobTemplate:\n    spec:\n{}",
                    indent(&job_spec, 6),
                    cron = serde_json::to_string(cron)?,
                );
            }
        }
    }
    Ok(y)
}

fn indent(text: &str, n: usize) -> String {
    let pad = " ".repeat(n);
    text.lines().map(|l| if l.is_empty() { "\n".to_string() } else { format!("{pad}{l}\n") }).collect()
}

fn dedent(text: &str, n: usize) -> String {
    text.lines().map(|l| format!("{}\n", l.get(n..).unwrap_or(l.trim_start()))).collect()
}

/// Runs this node's tests: for each round where it is the source, waits for the round, runs the
/// client against the destination (stopped at the round's end), prints one JSON line.
fn run_node(a: &RunArgs) -> Result<u8> {
    let nodes = parse_nodes(&a.nodes)?;
    let me = nodes.iter().position(|n| n.name == a.node).ok_or_else(|| anyhow!("--node {}: not in --nodes", a.node))?;
    let start = match (&a.start, &a.start_from_job_name) {
        (Some(s), _) => *s,
        (None, Some(job)) => {
            let minutes: u64 = job.rsplit('-').next().and_then(|m| m.parse().ok()).ok_or_else(|| {
                anyhow!("--start-from-job-name {job}: no scheduled minute at the end (a CronJob's Job is NAME-MINUTES)")
            })?;
            (minutes * 60 + a.start_delay) as f64
        }
        (None, None) => bail!("--start or --start-from-job-name is required"),
    };
    if !(a.slot.is_finite() && a.slot >= 1.0) {
        bail!("--slot {}: must be at least 1 second", a.slot);
    }
    let netchar = std::env::current_exe().context("finding the netchar executable")?;
    let client_args: Vec<String> =
        if a.client_args.is_empty() { vec!["-t".into(), "10".into()] } else { a.client_args.clone() };
    let plan = round_robin(nodes.len());
    let mut failures = 0;
    for (round, tests) in plan.iter().enumerate() {
        let Some(&(_, dst)) = tests.iter().find(|(src, _)| *src == me) else { continue };
        let begin = start + round as f64 * a.slot;
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0);
        if now > begin + a.slot / 2.0 {
            // Late by half a slot: running now would overlap the next round's tests.
            let missed = MeshLine {
                round: Some(round),
                source: a.node.clone(),
                destination: nodes[dst].name.clone(),
                started_unix: None,
                ended_unix: None,
                result: None,
                error: Some("missed the slot (started too late)".into()),
            };
            println!("{}", missed.to_json());
            failures += 1;
            continue;
        }
        if begin > now {
            std::thread::sleep(Duration::from_secs_f64(begin - now));
        }
        let target = &nodes[dst];
        let mut args = vec![a.test.clone(), addr_of(target, Some(a.port)), "--json".into()];
        if let Some(f) = &a.psk_file {
            args.extend(["--psk-file".into(), f.display().to_string()]);
        }
        args.extend(client_args.iter().cloned());
        let started = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0);
        let remaining = (begin + a.slot - started).max(0.5);
        let out = run_with_limit(&netchar, &args, Duration::from_secs_f64(remaining));
        let ended = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0);
        let mut line = MeshLine {
            round: Some(round),
            source: a.node.clone(),
            destination: target.name.clone(),
            started_unix: Some(started),
            ended_unix: Some(ended),
            result: None,
            error: None,
        };
        match out {
            Ok(o) => match serde_json::from_str::<TestOutput>(&o.stdout) {
                Ok(result) => {
                    if result.error().is_some() || o.timed_out {
                        failures += 1;
                    }
                    line.result = Some(result);
                }
                Err(_) => {
                    failures += 1;
                    let why = if o.timed_out {
                        "stopped at the end of its slot".to_string()
                    } else {
                        o.stderr.trim().to_string()
                    };
                    line.error = Some(why);
                }
            },
            Err(e) => {
                failures += 1;
                line.error = Some(format!("{e:#}"));
            }
        }
        println!("{}", line.to_json());
    }
    Ok(if failures == 0 { 0 } else { 2 })
}

/// Reads `mesh run` lines (anything before the first `{` on a line, such as kubectl's prefix,
/// is skipped) and prints the matrix: rows are sources, columns destinations.
fn matrix(a: &MatrixArgs) -> Result<u8> {
    let mut lines = Vec::new();
    let mut raw = String::new();
    for path in &a.logs {
        let reader: Box<dyn BufRead> = if path.as_os_str() == "-" {
            Box::new(std::io::stdin().lock())
        } else {
            Box::new(std::io::BufReader::new(std::fs::File::open(path).with_context(|| format!("{}", path.display()))?))
        };
        for line in reader.lines() {
            let line = line?;
            if let Some((l, json)) = MeshLine::parse(&line) {
                raw.push_str(json);
                raw.push('\n');
                lines.push(l);
            }
        }
    }
    if lines.is_empty() {
        bail!("no mesh run lines in {}; give the Jobs' logs (kubectl logs -l app.kubernetes.io/component=mesh-client --prefix)", a.logs.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "));
    }
    let format = match (&a.format, a.csv, a.html) {
        (Some(f), _, _) if f == "csv" => Format::Csv,
        (Some(f), _, _) if f == "html" => Format::Html,
        (Some(_), _, _) => Format::Text,
        (None, true, _) => Format::Csv,
        (None, _, true) => Format::Html,
        _ => Format::Text,
    };
    let metric =
        Metric::parse(&a.metric).ok_or_else(|| anyhow!("--metric {}: throughput, rtt or latency", a.metric))?;
    let out = netchar_report::mesh::matrix(&lines, &raw, metric, format);
    match &a.output {
        Some(path) => std::fs::write(path, out)
            .with_context(|| format!("cannot write {}; give -o a writable file", path.display()))?,
        None => print!("{out}"),
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    fn check_plan(n: usize) {
        let plan = round_robin(n);
        let want_rounds = if n.is_multiple_of(2) { 2 * (n - 1) } else { 2 * n };
        assert_eq!(plan.len(), want_rounds, "n = {n}");
        let mut seen = HashSet::new();
        for round in &plan {
            let mut busy = HashSet::new();
            for &(s, d) in round {
                assert!(s != d && s < n && d < n);
                assert!(busy.insert(s) && busy.insert(d), "a node in two tests of one round: {round:?}");
                assert!(seen.insert((s, d)), "({s}, {d}) twice");
            }
        }
        assert_eq!(seen.len(), n * (n - 1), "every ordered pair once");
    }

    proptest! {
        #[test]
        fn the_plan_covers_every_ordered_pair_with_one_test_per_node_per_round(n in 2usize..40) {
            check_plan(n);
        }
    }

    #[test]
    fn even_meshes_take_two_n_minus_one_rounds() {
        for n in [2, 4, 6, 8] {
            assert_eq!(round_robin(n).len(), 2 * (n - 1));
        }
        assert!(round_robin(1).is_empty());
    }

    #[test]
    fn node_lists() {
        let nodes = parse_nodes(&["a".into(), "b.example=10.0.0.2:5400".into(), "c=[fd00::3]:5300".into()]).unwrap();
        assert_eq!(nodes[1], Node { name: "b.example".into(), host: "10.0.0.2".into(), port: Some(5400) });
        assert_eq!(addr_of(&nodes[2], None), "[fd00::3]:5300");
        assert_eq!(addr_of(&nodes[0], Some(5300)), "a:5300");
        assert!(parse_nodes(&["a".into()]).is_err());
        assert!(parse_nodes(&["A".into(), "b".into()]).is_err());
        assert!(parse_nodes(&["a".into(), "a".into()]).is_err());
        assert_eq!(job_name("node-1.example.com"), "netchar-mesh-node-1-example-com");
    }
}
