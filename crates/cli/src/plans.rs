//! Test plans (`netchar run PLAN.toml [HOST]`, docs/plans.md): a list of tests, each with
//! parameters; any parameter given as a list is a loop, and a test with several loops runs
//! their cross product. Each expanded test fills the typed flags of its command (the structs
//! clap fills from a command line, args.rs) field by field, with no command line in between,
//! and goes through the same validation as a typed command (plan.rs), so a plan can say
//! nothing the command line cannot, and every bad value is reported (with its line and field)
//! before any traffic. The plan then runs as the engine's plan job
//! (netchar_engine::jobs::plan), each of its tests a repeat job (repeat.rs).

use crate::args::{CommonArgs, EchoArgs, RrArgs, TcpArgs, UdpArgs};
use crate::figure_files::FigureFiles;
use crate::progress::Progress;
use crate::reporters::Reporters;
use crate::store::Labels;
use anyhow::{bail, Result};
use netchar_engine::jobs::plan::{self as plan_job, PlanStep, Status};
use netchar_engine::jobs::sink::JobEvent;
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
    for mut t in tests {
        let common = t.args.common_mut();
        common.json = a.json;
        if let Some(timeout) = &a.connect_timeout {
            common.connect_timeout.clone_from(timeout);
        }
        let plans = t.args.plans().map_err(|e| anyhow::anyhow!("{file}:{}: {}: {e}", t.line, t.name))?;
        let pause = Duration::from_secs_f64(t.pause_seconds);
        // The plan's file names the plan among the labels of the stored runs.
        let mut labels = t.labels.clone();
        if let Some(stem) = a.plan.file_stem() {
            labels.insert("plan".into(), stem.to_string_lossy().into_owned());
        }
        planned.extend(plans.into_iter().map(|mut p| {
            p.step = steps.clone();
            PlanStep { name: t.name.clone(), pause, test: (p, labels.clone()) }
        }));
    }
    let expected = planned.iter().map(|s| crate::repeat::expected_length(&s.test.0)).sum::<Option<Duration>>();
    let progress = Progress::start(a.json, true, expected);
    // The plan's own reporters: a heading per test (text), one array of every result (JSON).
    // Each test's figures come from the test's own reporters (the figure files' too).
    let mut reporters = if a.json {
        Reporters::of(Box::new(JobJsonReporter))
    } else {
        Reporters::of(Box::new(TextReporter::new(RateFormat::AutoBits)))
    };
    let mut results = Vec::new();
    let run_step = |step: &PlanStep<(crate::plan::TcpPlan, Labels)>| -> Result<Status> {
        let (test, labels) = &step.test;
        figures.label_next_results(labels.clone());
        let code = crate::repeat::run_collecting(test, figures, stop, Some(&mut results), &progress)?;
        Ok(match code {
            crate::exit::OK => Status::Passed,
            crate::exit::GATE => Status::GateMissed,
            crate::exit::INTERRUPTED => Status::Interrupted,
            _ => Status::Failed,
        })
    };
    let mut on_event = |event: JobEvent<'_>| -> Result<()> {
        match event {
            JobEvent::Progress(what) => progress.set_current(what),
            JobEvent::Section(title) => reporters.emit(&progress, |r| r.on_section(title))?,
            // Each test reports its own runs.
            _ => {}
        }
        Ok(())
    };
    let outcome = plan_job::run(&planned, stop, run_step, &mut on_event);
    // The results so far also when a test failed: the error follows them.
    reporters.emit(&progress, |r| r.on_job_end(&results))?;
    Ok(match outcome? {
        Status::Passed => crate::exit::OK,
        Status::GateMissed => crate::exit::GATE,
        Status::Failed => crate::exit::ERROR,
        Status::Interrupted => crate::exit::INTERRUPTED,
    })
}

/// The server for the plan's tests that do not name one: HOST, with `-p` as its port.
pub(crate) fn default_host(a: &crate::args::RunArgs) -> Option<String> {
    let host = a.host.as_deref()?;
    let Some(p) = a.port else { return Some(host.to_string()) };
    let bare = crate::plan::split_host(host).map_or_else(|_| host.to_string(), |(h, _)| h);
    Some(if bare.contains(':') { format!("[{bare}]:{p}") } else { format!("{bare}:{p}") })
}

/// The fields a `[[test]]` may have. Each fills the flag of the same meaning
/// ([`TestArgs::set`]); `kind`, `name`, `labels`, `host` and `pause` are the plan's own.
const KEYS: &[&str] = &[
    "kind",
    "name",
    "labels",
    "host",
    "pause",
    "direction",
    "udp",
    "port",
    "duration",
    "bytes",
    "transactions",
    "streams",
    "length",
    "block",
    "rate",
    "pps",
    "per_stream",
    "pattern",
    "grace",
    "window",
    "mss",
    "nodelay",
    "congestion",
    "zerocopy",
    "skip_rx_copy",
    "rx_wake_per_segment",
    "affinity",
    "interval",
    "omit",
    "response",
    "inflight",
    "timeout",
    "busy_poll",
    "wakeup_stamps",
    "under_load",
    "repeat",
    "warmup",
    "expect",
    "title",
    "pacing_quantum",
    "no_gso",
    "gro",
    "server_load",
    "server_load_threads",
    "idle",
    "tos",
    "dscp",
    "flowlabel",
    "df",
    "no_udp_checksum",
    "bind",
    "bind_dev",
    "proto",
    "save",
    "nft_counter",
];

/// The longest pause a plan may ask for between tests (a day).
const MAX_PAUSE_SECONDS: f64 = 86_400.0;
/// Tests one plan entry may expand to.
const MAX_EXPANDED_TESTS: usize = 10_000;

/// One expanded test: its display name, the typed flags of its command, the pause after it,
/// and where in the file it came from.
#[derive(Debug)]
pub(crate) struct PlannedTest {
    pub(crate) name: String,
    /// The labels its runs are stored with (`--store`): `test` (its entry's name), the values
    /// of its loops by field, and the entry's `labels`.
    pub(crate) labels: Labels,
    pub(crate) args: TestArgs,
    pub(crate) pause_seconds: f64,
    pub(crate) line: usize,
}

/// A plan's test as the typed flags of its command.
#[derive(Debug)]
pub(crate) enum TestArgs {
    Tcp(TcpArgs),
    Udp(UdpArgs),
    Rr(RrArgs),
    Crr(RrArgs),
    Echo(EchoArgs),
}

/// A text value: a string, or a number written as one.
fn text(value: &Value) -> Result<String, String> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Integer(i) => Ok(i.to_string()),
        Value::Float(f) => Ok(f.to_string()),
        _ => Err("expected text or a number".into()),
    }
}

/// A switch: true turns the flag on, false leaves it off.
fn switch(value: &Value) -> Result<bool, String> {
    value.as_bool().ok_or_else(|| "expected true or false".into())
}

/// A whole number of the field's type.
fn whole<T: TryFrom<i64>>(value: &Value) -> Result<T, String> {
    let n = value.as_integer().ok_or("expected a whole number")?;
    T::try_from(n).map_err(|_| format!("{n} is out of range"))
}

impl TestArgs {
    /// `kind`'s command with its flags' defaults (declared once, in args.rs, and filled by
    /// clap from the command alone) towards `host`; every other field is the plan's to set.
    fn defaults(kind: &str, host: &str) -> Result<Self, String> {
        use clap::Parser;
        let cli = crate::args::Cli::try_parse_from(["netchar", kind, "--", host])
            .map_err(|e| e.to_string().lines().next().unwrap_or("").trim_start_matches("error: ").to_string())?;
        match cli.command {
            Some(crate::args::Command::Tcp(a)) => Ok(Self::Tcp(a)),
            Some(crate::args::Command::Udp(a)) => Ok(Self::Udp(a)),
            Some(crate::args::Command::Rr(a)) => Ok(Self::Rr(a)),
            Some(crate::args::Command::Crr(a)) => Ok(Self::Crr(a)),
            Some(crate::args::Command::Echo(a)) => Ok(Self::Echo(a)),
            _ => Err(format!("kind {kind:?}: not a test")),
        }
    }

    pub(crate) fn common(&self) -> &CommonArgs {
        match self {
            Self::Tcp(a) => &a.common,
            Self::Udp(a) => &a.common,
            Self::Rr(a) | Self::Crr(a) => &a.common,
            Self::Echo(a) => &a.common,
        }
    }

    fn common_mut(&mut self) -> &mut CommonArgs {
        match self {
            Self::Tcp(a) => &mut a.common,
            Self::Udp(a) => &mut a.common,
            Self::Rr(a) | Self::Crr(a) => &mut a.common,
            Self::Echo(a) => &mut a.common,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Self::Tcp(_) => "tcp",
            Self::Udp(_) => "udp",
            Self::Rr(_) => "rr",
            Self::Crr(_) => "crr",
            Self::Echo(_) => "echo",
        }
    }

    /// The tests the flags stand for, validated as the command's own flags are.
    fn plans(&self) -> Result<Vec<crate::plan::TcpPlan>, crate::plan::UsageError> {
        use crate::plan::TcpPlan;
        match self {
            Self::Tcp(a) => TcpPlan::from_args(a).map(|p| vec![p]),
            Self::Udp(a) => TcpPlan::from_udp_args(a).map(|p| vec![p]),
            Self::Rr(a) => TcpPlan::from_rr_args(a).map(|p| vec![p]),
            Self::Crr(a) => TcpPlan::from_crr_args(a).map(|p| vec![p]),
            Self::Echo(a) => TcpPlan::from_echo_args(a),
        }
    }

    /// Sets the flag of plan field `key` (one of [`KEYS`]) to `value`; a field the test's
    /// command has no flag for is refused, naming the commands that have one.
    fn set(&mut self, key: &str, value: &Value) -> Result<(), String> {
        let kind = self.kind();
        let only = |kinds: &str| Err(format!("a {kind} test has no {key} ({kinds} only)"));
        let c = self.common_mut();
        match key {
            "direction" => match value.as_str() {
                Some("up") => {}
                Some("down") => c.reverse = true,
                Some("bidir") => c.bidir = true,
                _ => return Err("must be up, down or bidir".into()),
            },
            "port" => c.port = Some(whole(value)?),
            "duration" => c.time = Some(text(value)?),
            "bytes" | "transactions" => c.bytes = Some(text(value)?),
            "streams" => c.parallel = text(value)?,
            "affinity" => c.affinity = Some(text(value)?),
            "interval" => c.interval = text(value)?,
            "omit" => c.omit = text(value)?,
            "repeat" => c.repeat = text(value)?,
            "warmup" => c.warmup = text(value)?,
            "expect" => c.expect.push(text(value)?),
            "title" => c.title = Some(text(value)?),
            "server_load" => {
                c.server_load =
                    Some(value.as_float().or(value.as_integer().map(|i| i as f64)).ok_or("expected a percentage")?)
            }
            "server_load_threads" => c.server_load_threads = whole(value)?,
            "idle" => c.idle = switch(value)?,
            "tos" => c.traffic.tos = Some(text(value)?),
            "dscp" => c.traffic.dscp = Some(text(value)?),
            "flowlabel" => c.traffic.flowlabel = Some(text(value)?),
            "df" => c.traffic.df = switch(value)?,
            "bind" => c.traffic.bind = Some(text(value)?),
            "bind_dev" => c.traffic.bind_dev = Some(text(value)?),
            "proto" => {
                c.proto = netchar_engine::protocols::ProtoChoice::parse(&text(value)?).map_err(|e| e.to_string())?
            }
            "save" => c.save = Some(text(value)?.into()),
            "nft_counter" => c.nft_counter.push(text(value)?),
            _ => return self.set_own(key, value).unwrap_or_else(|| only(owners(key))),
        }
        Ok(())
    }

    /// The fields of one command's own flags; None where this test's command has no such flag.
    fn set_own(&mut self, key: &str, value: &Value) -> Option<Result<(), String>> {
        use TestArgs::{Crr, Echo, Rr, Tcp, Udp};
        let set = |field: &mut String| text(value).map(|v| *field = v);
        let set_some = |field: &mut Option<String>| text(value).map(|v| *field = Some(v));
        let on = |field: &mut bool| switch(value).map(|v| *field = v);
        Some(match (self, key) {
            (Tcp(a), "length" | "block") => set_some(&mut a.length),
            (Udp(a), "length" | "block") => set_some(&mut a.length),
            (Rr(a) | Crr(a), "length" | "block") => set(&mut a.length),
            (Tcp(a), "rate") => set_some(&mut a.bitrate),
            (Udp(a), "rate") => set_some(&mut a.bitrate),
            (Tcp(a), "window") => set_some(&mut a.window),
            (Tcp(a), "mss") => set_some(&mut a.mss),
            (Tcp(a), "nodelay") => on(&mut a.nodelay),
            (Tcp(a), "congestion") => set_some(&mut a.congestion),
            (Tcp(a), "zerocopy") => on(&mut a.zerocopy),
            (Tcp(a), "skip_rx_copy") => on(&mut a.skip_rx_copy),
            (Tcp(a), "rx_wake_per_segment") => on(&mut a.rx_wake_per_segment),
            (Udp(a), "pps") => set_some(&mut a.pps),
            (Udp(a), "per_stream") => on(&mut a.per_stream),
            (Udp(a), "pattern") => set_some(&mut a.pattern),
            (Echo(a), "pattern") => set(&mut a.pattern),
            (Udp(a), "grace") => set(&mut a.grace),
            (Udp(a), "pacing_quantum") => set(&mut a.pacing_quantum),
            (Udp(a), "no_gso") => on(&mut a.no_gso),
            (Udp(a), "gro") => on(&mut a.gro),
            (Udp(a), "no_udp_checksum") => on(&mut a.no_udp_checksum),
            (Rr(a) | Crr(a), "udp") => on(&mut a.udp),
            (Echo(a), "udp") => on(&mut a.udp),
            (Rr(a) | Crr(a), "response") => set_some(&mut a.response),
            (Rr(a) | Crr(a), "inflight") => set(&mut a.inflight),
            (Rr(a) | Crr(a), "timeout") => set(&mut a.timeout),
            (Echo(a), "timeout") => set(&mut a.timeout),
            (Rr(a) | Crr(a), "busy_poll") => on(&mut a.busy_poll),
            (Rr(a) | Crr(a), "wakeup_stamps") => on(&mut a.wakeup_stamps),
            (Rr(a) | Crr(a), "under_load") => set_some(&mut a.under_load),
            _ => return None,
        })
    }

    /// Fields that name one flag twice, which clap refuses on a command line.
    fn check_conflicts(&self) -> Result<(), String> {
        let c = self.common();
        let udp_rates = matches!(self, Self::Udp(a) if a.bitrate.is_some() && a.pps.is_some());
        for (both, keys) in [
            (c.time.is_some() && c.bytes.is_some(), "duration and bytes (or transactions)"),
            (c.traffic.tos.is_some() && c.traffic.dscp.is_some(), "tos and dscp"),
            (udp_rates, "rate and pps"),
        ] {
            if both {
                return Err(format!("{keys}: give one"));
            }
        }
        Ok(())
    }
}

/// The commands with a flag for plan field `key`.
fn owners(key: &str) -> &'static str {
    match key {
        "length" | "block" => "tcp, udp, rr, crr",
        "rate" => "tcp, udp",
        "pattern" => "udp, echo",
        "udp" | "timeout" => "rr, crr, echo",
        "pps" | "per_stream" | "grace" | "pacing_quantum" | "no_gso" | "gro" | "no_udp_checksum" => "udp",
        "response" | "inflight" | "busy_poll" | "wakeup_stamps" | "under_load" => "rr, crr",
        _ => "tcp",
    }
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
    if let Some(key) = doc.keys().find(|k| *k != "defaults" && *k != "test") {
        bail!("{file}: unknown top-level key {key:?} (a plan has [defaults] and [[test]] entries)");
    }
    let Some(Value::Array(tests)) = doc.get("test") else {
        bail!("{file}: no [[test]] entries");
    };
    let mut out = Vec::new();
    for (index, test) in tests.iter().enumerate() {
        let Value::Table(t) = test else { bail!("{file}:{}: a [[test]] must be a table", line_of(text, index, None)) };
        let mut fields = defaults.clone();
        fields.extend(t.clone());
        out.extend(Entry { text, file, index, fields: &fields }.expand(host)?);
    }
    Ok(out)
}

/// One `[[test]]` entry, its defaults merged in, and where it stands in the file.
struct Entry<'a> {
    text: &'a str,
    file: &'a str,
    index: usize,
    fields: &'a toml::Table,
}

impl Entry<'_> {
    /// An error at `key`'s line (the entry's header's if the key is not written there).
    fn error(&self, key: &str, message: impl std::fmt::Display) -> anyhow::Error {
        let line = line_of(self.text, self.index, Some(key)).max(line_of(self.text, self.index, None));
        anyhow::anyhow!("{}:{line}: test {}: {message}", self.file, self.index + 1)
    }

    /// The entry's tests: one per combination of its loops.
    fn expand(&self, host: Option<&str>) -> Result<Vec<PlannedTest>> {
        if let Some(key) = self.fields.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(self.error(key, format_args!("unknown field {key:?}")));
        }
        let kind = match self.fields.get("kind").and_then(Value::as_str) {
            Some(k @ ("tcp" | "udp" | "rr" | "crr" | "echo")) => k,
            Some(other) => {
                return Err(self.error("kind", format_args!("kind {other:?}: use tcp, udp, rr, crr or echo")))
            }
            None => return Err(self.error("kind", "field \"kind\" is missing (tcp, udp, rr, crr or echo)")),
        };
        let Some(target) = self.fields.get("host").and_then(Value::as_str).or(host) else {
            return Err(self.error("host", "no host (give one on the command line or as host = ...)"));
        };
        let pause = match self.fields.get("pause") {
            None => 0.0,
            Some(v) => v
                .as_float()
                .or_else(|| v.as_integer().map(|i| i as f64))
                .filter(|p| (0.0..=MAX_PAUSE_SECONDS).contains(p))
                .ok_or_else(|| self.error("pause", format_args!("pause must be 0 to {MAX_PAUSE_SECONDS} seconds")))?,
        };
        let line = line_of(self.text, self.index, None);
        let base = self.fields.get("name").and_then(Value::as_str);
        let base = base.map_or_else(|| format!("test {} ({kind})", self.index + 1), str::to_string);
        let mut own = self.labels()?;
        own.insert("test".into(), base.clone());
        let mut out = Vec::new();
        for variant in self.loops()? {
            let mut args = TestArgs::defaults(kind, target).map_err(|e| self.error("kind", e))?;
            let label = self.fill(&mut args, &variant)?;
            args.check_conflicts().map_err(|e| self.error("", e))?;
            let name = if label.is_empty() { base.clone() } else { format!("{base} [{}]", label.join(", ")) };
            // Each loop's value by its field: `--label streams=4` finds these runs again.
            let mut labels = own.clone();
            for (key, value) in &variant {
                if self.fields.get(*key).is_some_and(Value::is_array) && *key != "expect" {
                    labels.insert(key.to_string(), text(value).unwrap_or_else(|_| value.to_string()));
                }
            }
            out.push(PlannedTest { name, labels, args, pause_seconds: pause, line });
        }
        Ok(out)
    }

    /// The entry's `labels = { KEY = "VALUE", ... }`, checked as `--label`s are.
    fn labels(&self) -> Result<Labels> {
        let mut out = Labels::new();
        let Some(value) = self.fields.get("labels") else { return Ok(out) };
        let Value::Table(table) = value else {
            return Err(self.error("labels", "labels must be a table: labels = { board = \"rev-b\" }"));
        };
        for (key, value) in table {
            let value = text(value).map_err(|e| self.error("labels", format_args!("labels.{key}: {e}")))?;
            let (key, value) = netchar_store::parse_label(&format!("{key}={value}"))
                .map_err(|e| self.error("labels", format_args!("labels: {e}")))?;
            out.insert(key, value);
        }
        Ok(out)
    }

    /// The cross product of the loops: every list-valued field except `expect` (a list of
    /// gates, not a loop), in the order of the fields.
    fn loops(&self) -> Result<Vec<Vec<(&str, &Value)>>> {
        let mut variants: Vec<Vec<(&str, &Value)>> = vec![Vec::new()];
        for (key, value) in
            self.fields.iter().filter(|(k, _)| !matches!(k.as_str(), "kind" | "host" | "pause" | "name" | "labels"))
        {
            let choices: Vec<&Value> = match value {
                Value::Array(items) if key != "expect" => items.iter().collect(),
                v => vec![v],
            };
            if choices.is_empty() {
                return Err(self.error(key, format_args!("{key} is an empty list")));
            }
            // Eight lists of ten are 10^8 tests: refuse before building them.
            if variants.len().saturating_mul(choices.len()) > MAX_EXPANDED_TESTS {
                let why = format!("its loops expand to more than {MAX_EXPANDED_TESTS} tests; split the plan");
                return Err(self.error(key, why));
            }
            variants = variants
                .into_iter()
                .flat_map(|v| {
                    choices.iter().map(move |&c| {
                        let mut v = v.clone();
                        v.push((key.as_str(), c));
                        v
                    })
                })
                .collect();
        }
        Ok(variants)
    }

    /// Sets `args` from one combination; returns the labels of its looped values.
    fn fill(&self, args: &mut TestArgs, variant: &[(&str, &Value)]) -> Result<Vec<String>> {
        // A gate on one flow's figure (`up.…`, `down.…`) applies to the tests that run that
        // flow; the others of the loop do not have it.
        let flows: &[&str] = match variant.iter().find(|(k, _)| *k == "direction").and_then(|(_, v)| v.as_str()) {
            Some("down") => &["down"],
            Some("bidir") => &["up", "down"],
            _ => &["up"],
        };
        let applies = |gate: &Value| match gate.as_str().map(|g| g.trim_start().split(['.', ' ', '<', '>', '='])) {
            Some(mut words) => words.next().is_none_or(|w| !matches!(w, "up" | "down") || flows.contains(&w)),
            None => true,
        };
        let mut label = Vec::new();
        for &(key, value) in variant {
            let gates = match value {
                Value::Array(items) if key == "expect" => items.iter().collect(),
                v => vec![v],
            };
            for v in gates.into_iter().filter(|g| key != "expect" || applies(g)) {
                args.set(key, v).map_err(|e| self.error(key, format_args!("{key}: {e}")))?;
            }
            if key == "direction" {
                label.push(value.as_str().unwrap_or("").to_string());
            } else if self.fields.get(key).is_some_and(Value::is_array) && key != "expect" {
                label.push(format!("{key}={}", text(value).unwrap_or_else(|_| value.to_string())));
            }
        }
        Ok(label)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_is_labelled_by_its_name_its_loops_and_its_labels() {
        let plan = r#"
[defaults]
labels = { board = "rev-b", firmware = 7 }

[[test]]
name = "tcp"
kind = "tcp"
direction = ["up", "down"]
streams = 2

[[test]]
kind = "udp"
labels = { lab = "east" }
"#;
        let tests = expand(plan, "p.toml", Some("127.0.0.1")).unwrap();
        let pairs = |t: &PlannedTest| t.labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>();
        assert_eq!(pairs(&tests[0]), ["board=rev-b", "direction=up", "firmware=7", "test=tcp"]);
        assert_eq!(pairs(&tests[1]), ["board=rev-b", "direction=down", "firmware=7", "test=tcp"]);
        // A test's own labels replace the defaults', as any field's value does.
        assert_eq!(pairs(&tests[2]), ["lab=east", "test=test 2 (udp)"]);
        for (bad, why) in [
            ("labels = \"x\"", "labels must be a table"),
            ("labels = { \"a b\" = \"x\" }", "the key must be letters"),
            ("labels = { a = [1] }", "labels.a: expected text or a number"),
        ] {
            let e = expand(&format!("[[test]]\nkind = \"tcp\"\n{bad}\n"), "p.toml", Some("h")).unwrap_err();
            assert!(e.to_string().starts_with("p.toml:3: test 1: labels") && e.to_string().contains(why), "{e}");
        }
    }

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
        assert_eq!(tests[1].args.common().parallel, "4");
        assert!(tests[2].args.common().reverse && !tests[1].args.common().reverse);
        // Both gates are on the up flow: the down tests have none.
        assert_eq!(tests[0].args.common().expect.len(), 2);
        assert!(tests[2].args.common().expect.is_empty(), "{:?}", tests[2].args.common().expect);
        assert!(matches!(&tests[4].args, TestArgs::Udp(u) if u.bitrate.as_deref() == Some("10M")));
        assert_eq!(tests[4].args.common().host, "127.0.0.1");
        assert_eq!(tests[4].args.common().time.as_deref(), Some("1"));
        assert_eq!(tests[4].line, 12);
        // The defaults are the command's own: one interval per second, one run.
        assert_eq!((tests[4].args.common().interval.as_str(), tests[4].args.common().repeat.as_str()), ("1", "1"));
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
        let TestArgs::Udp(udp) = &tests[1].args else { panic!("a udp test: {:?}", tests[1].args) };
        let t = &udp.common.traffic;
        assert_eq!(t.dscp.as_deref(), Some("af41"));
        assert_eq!(
            (t.bind.as_deref(), t.bind_dev.as_deref(), t.flowlabel.as_deref()),
            (Some("10.0.0.3:7000"), Some("eth1"), Some("7"))
        );
        assert!(t.df && udp.no_udp_checksum);
    }

    #[test]
    fn a_field_goes_only_to_a_command_with_its_flag_and_only_once() {
        let error = |plan: &str| expand(plan, "p.toml", Some("h")).unwrap_err().to_string();
        let e = error("[[test]]\nkind = \"tcp\"\npps = 1000\n");
        assert!(e.starts_with("p.toml:3: test 1: pps: a tcp test has no pps (udp only)"), "{e}");
        let e = error("[[test]]\nkind = \"udp\"\nrate = \"1M\"\npps = 100\n");
        assert!(e.contains("rate and pps: give one"), "{e}");
        let e = error("[[test]]\nkind = \"tcp\"\nduration = 1\nbytes = \"1M\"\n");
        assert!(e.contains("duration and bytes (or transactions): give one"), "{e}");
        let e = error("[[test]]\nkind = \"tcp\"\nnodelay = \"yes\"\n");
        assert!(e.contains("p.toml:3: test 1: nodelay: expected true or false"), "{e}");
        let e = error("[[test]]\nkind = \"tcp\"\nport = 70000\n");
        assert!(e.contains("port: 70000 is out of range"), "{e}");
        // A host that looks like a flag is still the host.
        let tests = expand("[[test]]\nkind = \"rr\"\nudp = true\nlength = 64\n", "p.toml", Some("-x")).unwrap();
        let TestArgs::Rr(rr) = &tests[0].args else { panic!("an rr test") };
        assert_eq!((rr.common.host.as_str(), rr.udp, rr.length.as_str()), ("-x", true, "64"));
    }

    /// What the fuzz target on plan files checked, as a property over generated plans: the
    /// cli is a binary with no library target, so the planner, which fills the commands'
    /// clap flags, cannot be compiled into cargo-fuzz's crate, and is checked here, where CI
    /// runs it. Plans are made of the real keys (and a stranger) with values of every TOML
    /// type, lists among them (loops), so that most pass the parser and reach the expansion.
    mod generated_plans {
        use super::super::*;
        use proptest::prelude::*;

        fn value() -> impl Strategy<Value = String> {
            let scalar = prop_oneof![
                Just("\"tcp\"".to_owned()),
                Just("\"udp\"".to_owned()),
                Just("\"rr\"".to_owned()),
                Just("\"up\"".to_owned()),
                Just("\"10M\"".to_owned()),
                Just("\"1s\"".to_owned()),
                Just("\"\"".to_owned()),
                Just("true".to_owned()),
                Just("-1".to_owned()),
                Just("0".to_owned()),
                Just("1e308".to_owned()),
                Just("nan".to_owned()),
                Just("inf".to_owned()),
                Just("{ a = 1 }".to_owned()),
                any::<i64>().prop_map(|n| n.to_string()),
                (0.0f64..1e6).prop_map(|x| format!("{x:?}")),
                "[a-z0-9 ,.@x-]{0,12}".prop_map(|t| format!("{t:?}")),
            ];
            prop_oneof![
                3 => scalar.clone(),
                1 => proptest::collection::vec(scalar, 0..4).prop_map(|v| format!("[{}]", v.join(", "))),
            ]
        }

        fn field() -> impl Strategy<Value = String> {
            let key = prop_oneof![8 => proptest::sample::select(KEYS.to_vec()).prop_map(str::to_owned), 1 => Just("stranger".to_owned())];
            (key, value()).prop_map(|(k, v)| format!("{k} = {v}"))
        }

        fn plan() -> impl Strategy<Value = String> {
            // Most entries name a kind, as a plan's do; the rest test the error without one.
            let kind = prop_oneof![
                6 => proptest::sample::select(vec!["tcp", "udp", "rr", "crr", "echo"]).prop_map(|k| format!("kind = \"{k}\"\n")),
                1 => Just(String::new()),
            ];
            let entry = (kind, proptest::collection::vec(field(), 0..4))
                .prop_map(|(k, f)| format!("[[test]]\n{k}{}\n", f.join("\n")));
            (proptest::option::of(proptest::collection::vec(field(), 0..3)), proptest::collection::vec(entry, 0..4))
                .prop_map(|(defaults, entries)| {
                    let defaults = defaults.map(|f| format!("[defaults]\n{}\n", f.join("\n"))).unwrap_or_default();
                    format!("{defaults}{}", entries.concat())
                })
        }

        fn check(text: &str) -> Result<(), TestCaseError> {
            match expand(text, "plan.toml", Some("host")) {
                Err(e) => {
                    prop_assert!(e.to_string().starts_with("plan.toml"), "an error that does not name the file: {e}");
                }
                Ok(tests) => {
                    for t in &tests {
                        let d = Duration::try_from_secs_f64(t.pause_seconds);
                        prop_assert!(d.is_ok(), "test {:?} pauses {} s, not a Duration", t.name, t.pause_seconds);
                        prop_assert!(t.pause_seconds <= MAX_PAUSE_SECONDS);
                        prop_assert!(
                            t.line >= 1 && t.line <= text.lines().count().max(1),
                            "line {} of {text:?}",
                            t.line
                        );
                    }
                }
            }
            Ok(())
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2000))]
            #[test]
            fn a_generated_plan_expands_or_names_its_file(text in plan()) {
                check(&text)?;
            }

            #[test]
            fn any_text_expands_or_names_its_file(text in ".{0,200}") {
                check(&text)?;
            }
        }
    }
}
