//! Test plans (`netchar run PLAN.toml [HOST]`, docs/plans.md): a list of tests, each with
//! parameters; any parameter given as a list is a loop, and a test with several loops runs
//! their cross product. Each expanded test becomes the command line it stands for and goes
//! through the same flag parsing and validation as a typed command, so a plan can say nothing
//! the command line cannot, and every bad value is reported (with its line and field) before
//! any traffic.

use crate::figure_files::FigureFiles;
use crate::progress::Progress;
use crate::reporters::Reporters;
use anyhow::{bail, Result};
use clap::Parser;
use netchar_engine::StopFlag;
use netchar_model::units::RateFormat;
use netchar_report::json::JobJsonReporter;
use netchar_report::text::TextReporter;
use std::time::Duration;
use toml::Value;

/// `netchar run PLAN [HOST]`: every test of the plan validated first, then run in order.
pub(crate) fn run(a: &crate::args::RunArgs, figures: &FigureFiles, stop: &StopFlag) -> Result<u8> {
    let file = a.plan.display().to_string();
    let text = crate::files::read_text(&a.plan, crate::files::SMALL_FILE_CAP)
        .map_err(|e| anyhow::anyhow!("the plan {file}: {e}"))?;
    let tests = expand(&text, &file, a.host.as_deref())?;
    let steps = crate::hooks::StepCommand::new(crate::hooks::UserCommand::of_step(&a.step)?);
    // Validate every test before any traffic.
    let mut planned = Vec::new();
    for t in &tests {
        let mut argv = t.argv.clone();
        if a.json {
            argv.push("--json".into());
        }
        if let Some(t) = &a.connect_timeout {
            argv.extend(["--connect-timeout".into(), t.clone()]);
        }
        let where_ = || format!("{file}:{}: {}", t.line, t.name);
        let cli = crate::args::Cli::try_parse_from(&argv).map_err(|e| {
            let first = e.to_string().lines().next().unwrap_or("").trim_start_matches("error: ").to_string();
            anyhow::anyhow!("{}: {first}", where_())
        })?;
        let plans = match cli.command {
            Some(crate::args::Command::Tcp(x)) => crate::plan::TcpPlan::from_args(&x).map(|p| vec![p]),
            Some(crate::args::Command::Udp(x)) => crate::plan::TcpPlan::from_udp_args(&x).map(|p| vec![p]),
            Some(crate::args::Command::Rr(x)) => crate::plan::TcpPlan::from_rr_args(&x).map(|p| vec![p]),
            Some(crate::args::Command::Crr(x)) => crate::plan::TcpPlan::from_crr_args(&x).map(|p| vec![p]),
            Some(crate::args::Command::Echo(x)) => crate::plan::TcpPlan::from_echo_args(&x),
            _ => anyhow::bail!("{}: not a test", where_()),
        }
        .map_err(|e| anyhow::anyhow!("{}: {e}", where_()))?;
        planned.extend(plans.into_iter().map(|mut p| {
            p.step = steps.clone();
            (t, p)
        }));
    }
    let expected = planned.iter().map(|(_, p)| crate::repeat::expected_length(p)).sum::<Option<Duration>>();
    let progress = Progress::start(a.json, true, expected);
    // The plan's own reporters: a heading per test (text), one array of every result (JSON).
    // Each test's figures come from the test's own reporters (the figure files' too).
    let mut reporters = if a.json {
        Reporters::of(Box::new(JobJsonReporter))
    } else {
        Reporters::of(Box::new(TextReporter::new(RateFormat::AutoBits)))
    };
    let mut results = Vec::new();
    let mut worst = crate::exit::OK;
    let mut failed = None;
    for (i, (t, plan)) in planned.iter().enumerate() {
        if stop.is_raised() {
            worst = crate::exit::INTERRUPTED;
            break;
        }
        let what = format!("{} of {}: {}", i + 1, planned.len(), t.name);
        progress.set_current(what.clone());
        reporters.emit(&progress, |r| r.on_section(&what))?;
        let code = match crate::repeat::run_collecting(plan, figures, stop, Some(&mut results), &progress) {
            Ok(code) => code,
            Err(e) => {
                failed = Some(e);
                break;
            }
        };
        if code == crate::exit::INTERRUPTED {
            worst = code;
            break;
        }
        worst = worst.max(code);
        if t.pause_seconds > 0.0 && i + 1 < planned.len() {
            std::thread::sleep(std::time::Duration::from_secs_f64(t.pause_seconds));
        }
    }
    // The results so far also when a test failed: the error follows them.
    reporters.emit(&progress, |r| r.on_job_end(&results))?;
    match failed {
        Some(e) => Err(e),
        None => Ok(worst),
    }
}

/// The server for the plan's tests that do not name one: HOST, with `-p` as its port.
pub(crate) fn default_host(a: &crate::args::RunArgs) -> Option<String> {
    let host = a.host.as_deref()?;
    let Some(p) = a.port else { return Some(host.to_string()) };
    let bare = crate::plan::split_host(host).map_or_else(|_| host.to_string(), |(h, _)| h);
    Some(if bare.contains(':') { format!("[{bare}]:{p}") } else { format!("{bare}:{p}") })
}

/// The keys a `[[test]]` may have, and the flag each becomes (`""`: handled specially).
const KEYS: &[(&str, &str)] = &[
    ("kind", ""),
    ("name", ""),
    ("host", ""),
    ("pause", ""),
    ("direction", ""),
    ("udp", "--udp"),
    ("port", "-p"),
    ("duration", "-t"),
    ("bytes", "-n"),
    ("transactions", "-n"),
    ("streams", "-P"),
    ("length", "-l"),
    ("block", "-l"),
    ("rate", "-b"),
    ("pps", "--pps"),
    ("per_stream", "--per-stream"),
    ("pattern", "--pattern"),
    ("grace", "--grace"),
    ("window", "-w"),
    ("mss", "-M"),
    ("nodelay", "-N"),
    ("congestion", "-C"),
    ("zerocopy", "--zerocopy"),
    ("skip_rx_copy", "--skip-rx-copy"),
    ("rx_wake_per_segment", "--rx-wake-per-segment"),
    ("affinity", "-A"),
    ("interval", "-i"),
    ("omit", "-O"),
    ("response", "--response"),
    ("inflight", "--inflight"),
    ("timeout", "--timeout"),
    ("busy_poll", "--busy-poll"),
    ("wakeup_stamps", "--wakeup-stamps"),
    ("under_load", "--under-load"),
    ("repeat", "--repeat"),
    ("warmup", "--warmup"),
    ("expect", "--expect"),
    ("title", "--title"),
    ("pacing_quantum", "--pacing-quantum"),
    ("no_gso", "--no-gso"),
    ("gro", "--gro"),
    ("server_load", "--server-load"),
    ("server_load_threads", "--server-load-threads"),
    ("idle", "--idle"),
    ("tos", "--tos"),
    ("dscp", "--dscp"),
    ("flowlabel", "--flowlabel"),
    ("df", "--df"),
    ("no_udp_checksum", "--no-udp-checksum"),
    ("bind", "-B"),
    ("bind_dev", "--bind-dev"),
    ("proto", "--proto"),
    ("save", "--save"),
    ("nft_counter", "--nft-counter"),
];

/// The longest pause a plan may ask for between tests (a day).
const MAX_PAUSE_SECONDS: f64 = 86_400.0;
/// Tests one plan entry may expand to.
const MAX_EXPANDED_TESTS: usize = 10_000;

/// One expanded test: its display name, the argv it stands for, the pause after it, and
/// where in the file it came from.
#[derive(Debug, Clone)]
pub(crate) struct PlannedTest {
    pub(crate) name: String,
    pub(crate) argv: Vec<String>,
    pub(crate) pause_seconds: f64,
    pub(crate) line: usize,
}

/// The line (1-based) of the `index`-th `[[test]]` header and of `key` inside it, for errors.
fn line_of(text: &str, index: usize, key: Option<&str>) -> usize {
    let mut seen = 0;
    let mut in_test = false;
    for (n, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.starts_with("[[test]]") {
            in_test = seen == index;
            seen += 1;
            if in_test && key.is_none() {
                return n + 1;
            }
            continue;
        }
        if t.starts_with('[') {
            in_test = false;
        }
        if in_test {
            if let Some(k) = key {
                if t.split('=').next().is_some_and(|lhs| lhs.trim() == k) {
                    return n + 1;
                }
            }
        }
    }
    0
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Integer(i) => Some(i.to_string()),
        Value::Float(f) => Some(f.to_string()),
        Value::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Reads and expands a plan. `host` (from the command line) fills tests without one.
pub(crate) fn expand(text: &str, file: &str, host: Option<&str>) -> Result<Vec<PlannedTest>> {
    let doc: toml::Table =
        text.parse().map_err(|e: toml::de::Error| anyhow::anyhow!("{file}: {}", e.to_string().trim()))?;
    let defaults = match doc.get("defaults") {
        Some(Value::Table(t)) => t.clone(),
        Some(_) => bail!(
            "{file}:{}: [defaults] must be a table",
            text.lines().position(|l| l.trim() == "defaults").unwrap_or(0) + 1
        ),
        None => toml::Table::new(),
    };
    for key in doc.keys() {
        if key != "defaults" && key != "test" {
            bail!("{file}: unknown top-level key {key:?} (a plan has [defaults] and [[test]] entries)");
        }
    }
    let Some(Value::Array(tests)) = doc.get("test") else {
        bail!("{file}: no [[test]] entries");
    };
    let mut out = Vec::new();
    for (index, test) in tests.iter().enumerate() {
        let Value::Table(t) = test else { bail!("{file}:{}: a [[test]] must be a table", line_of(text, index, None)) };
        let mut merged = defaults.clone();
        merged.extend(t.clone());
        let at = |key: &str| line_of(text, index, Some(key)).max(line_of(text, index, None));
        for key in merged.keys() {
            if !KEYS.iter().any(|(k, _)| k == key) {
                bail!("{file}:{}: test {}: unknown field {key:?}", at(key), index + 1);
            }
        }
        let kind = match merged.get("kind").and_then(Value::as_str) {
            Some(k @ ("tcp" | "udp" | "rr" | "crr" | "echo")) => k.to_string(),
            Some(other) => {
                bail!("{file}:{}: test {}: kind {other:?}: use tcp, udp, rr, crr or echo", at("kind"), index + 1)
            }
            None => bail!(
                "{file}:{}: test {}: field \"kind\" is missing (tcp, udp, rr, crr or echo)",
                at("kind"),
                index + 1
            ),
        };
        let target = match (merged.get("host").and_then(Value::as_str), host) {
            (Some(h), _) => h.to_string(),
            (None, Some(h)) => h.to_string(),
            (None, None) => bail!(
                "{file}:{}: test {}: no host (give one on the command line or as host = ...)",
                at("host"),
                index + 1
            ),
        };
        let pause = match merged.get("pause") {
            None => 0.0,
            Some(v) => v
                .as_float()
                .or_else(|| v.as_integer().map(|i| i as f64))
                .filter(|p| (0.0..=MAX_PAUSE_SECONDS).contains(p))
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "{file}:{}: test {}: pause must be 0 to {MAX_PAUSE_SECONDS} seconds",
                        at("pause"),
                        index + 1
                    )
                })?,
        };
        // The loops: every list-valued field except `expect` (a list of gates, not a loop).
        let mut variants: Vec<Vec<(String, Value)>> = vec![Vec::new()];
        for (key, value) in &merged {
            if matches!(key.as_str(), "kind" | "host" | "pause" | "name") {
                continue;
            }
            let choices: Vec<Value> = match value {
                Value::Array(items) if key != "expect" => items.clone(),
                v => vec![v.clone()],
            };
            if choices.is_empty() {
                bail!("{file}:{}: test {}: {key} is an empty list", at(key), index + 1);
            }
            // Eight lists of ten are 10^8 tests: refuse before building them.
            if variants.len().saturating_mul(choices.len()) > MAX_EXPANDED_TESTS {
                bail!(
                    "{file}:{}: test {}: its loops expand to more than {MAX_EXPANDED_TESTS} tests; split the plan",
                    at(key),
                    index + 1
                );
            }
            variants = variants
                .into_iter()
                .flat_map(|v| {
                    choices.iter().map(move |c| {
                        let mut v = v.clone();
                        v.push((key.clone(), c.clone()));
                        v
                    })
                })
                .collect();
        }
        for variant in variants {
            let mut argv = vec!["netchar".to_string(), kind.clone(), target.clone()];
            let mut label = Vec::new();
            // A gate on one flow's figure (`up.…`, `down.…`) applies to the tests that run
            // that flow; the others of the loop do not have it.
            let direction = variant.iter().find(|(k, _)| k == "direction").and_then(|(_, v)| v.as_str());
            let flows: &[&str] = match direction {
                Some("down") => &["down"],
                Some("bidir") => &["up", "down"],
                _ => &["up"],
            };
            let applies = |gate: &str| match gate.trim_start().split(['.', ' ', '<', '>', '=']).next() {
                Some(flow @ ("up" | "down")) => flows.contains(&flow),
                _ => true,
            };
            for (key, value) in &variant {
                let flag = KEYS.iter().find(|(k, _)| k == key).map(|(_, f)| *f).unwrap_or("");
                if key == "direction" {
                    match value.as_str() {
                        Some("up") => {}
                        Some("down") => argv.push("-R".into()),
                        Some("bidir") => argv.push("--bidir".into()),
                        _ => bail!("{file}:{}: test {}: direction must be up, down or bidir", at(key), index + 1),
                    }
                    label.push(value.as_str().unwrap_or("").to_string());
                    continue;
                }
                match value {
                    Value::Boolean(true) => argv.push(flag.to_string()),
                    Value::Boolean(false) => {}
                    Value::Array(items) => {
                        for item in items {
                            let s = scalar(item).ok_or_else(|| {
                                anyhow::anyhow!(
                                    "{file}:{}: test {}: {key}: expected text or numbers",
                                    at(key),
                                    index + 1
                                )
                            })?;
                            if key == "expect" && !applies(&s) {
                                continue;
                            }
                            argv.extend([flag.to_string(), s]);
                        }
                    }
                    v => {
                        let s = scalar(v).ok_or_else(|| {
                            anyhow::anyhow!(
                                "{file}:{}: test {}: {key}: expected text, a number or a list",
                                at(key),
                                index + 1
                            )
                        })?;
                        if merged.get(key).is_some_and(Value::is_array) {
                            label.push(format!("{key}={s}"));
                        }
                        argv.extend([flag.to_string(), s]);
                    }
                }
            }
            let base = merged
                .get("name")
                .and_then(Value::as_str)
                .map_or_else(|| format!("test {} ({kind})", index + 1), str::to_string);
            let name = if label.is_empty() { base } else { format!("{base} [{}]", label.join(", ")) };
            out.push(PlannedTest { name, argv, pause_seconds: pause, line: line_of(text, index, None) });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loops_expand_to_their_cross_product() {
        let plan = r#"
[defaults]
duration = 1

[[test]]
name = "tcp"
kind = "tcp"
direction = ["up", "down"]
streams = [1, 4]
expect = ["up.receiver.bits_per_second >= 1M", "up.sender.retransmits <= 1000"]

[[test]]
kind = "udp"
rate = "10M"
"#;
        let tests = expand(plan, "p.toml", Some("127.0.0.1")).unwrap();
        assert_eq!(tests.len(), 5);
        assert_eq!(tests[0].name, "tcp [up, streams=1]");
        assert!(tests[1].argv.contains(&"-P".to_string()) && tests[1].argv.contains(&"4".to_string()));
        assert!(tests[2].argv.contains(&"-R".to_string()));
        assert_eq!(tests[0].argv.iter().filter(|a| *a == "--expect").count(), 2);
        assert_eq!(tests[4].argv[..3], ["netchar", "udp", "127.0.0.1"]);
        assert!(tests[4].argv.windows(2).any(|w| w == ["-t", "1"]));
        assert_eq!(tests[4].line, 12);
    }

    #[test]
    fn bad_plans_name_the_line_and_field() {
        let e = expand("[[test]]\nkind = \"tcp\"\nstreems = 2\n", "p.toml", Some("h")).unwrap_err().to_string();
        assert!(e.contains("p.toml:3") && e.contains("\"streems\""), "{e}");
        let e = expand("[[test]]\nkind = \"ftp\"\n", "p.toml", Some("h")).unwrap_err().to_string();
        assert!(e.contains("p.toml:2") && e.contains("ftp"), "{e}");
        let e = expand("[[test]]\nkind = \"tcp\"\n", "p.toml", None).unwrap_err().to_string();
        assert!(e.contains("no host"), "{e}");
        let e = expand("[[test]\n", "p.toml", Some("h")).unwrap_err().to_string();
        assert!(e.contains("p.toml"), "{e}");
        let e = expand("[[test]]\nkind = \"tcp\"\ndirection = \"sideways\"\n", "p.toml", Some("h"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("p.toml:3"), "{e}");
    }

    #[test]
    fn traffic_options_become_their_flags_and_loop() {
        let plan = r#"
[[test]]
kind = "udp"
dscp = ["ef", "af41"]
df = true
no_udp_checksum = true
bind = "10.0.0.3:7000"
bind_dev = "eth1"
flowlabel = 7
"#;
        let tests = expand(plan, "p.toml", Some("h")).unwrap();
        assert_eq!(tests.len(), 2);
        let argv = &tests[1].argv;
        for pair in [["--dscp", "af41"], ["-B", "10.0.0.3:7000"], ["--bind-dev", "eth1"], ["--flowlabel", "7"]] {
            assert!(argv.windows(2).any(|w| w == pair), "{pair:?} in {argv:?}");
        }
        assert!(argv.contains(&"--df".to_string()) && argv.contains(&"--no-udp-checksum".to_string()), "{argv:?}");
    }
}
