//! `netchar compare`: ministat's report over result files, `--save` directories or plain
//! number files.

use anyhow::Result;
use std::io::Write;

/// One set of `netchar compare`: the runs of a result file or a `--save` directory, or a
/// plain number file's values.
enum Set {
    Runs(Vec<netchar_model::TestResult>),
    Numbers(Vec<f64>),
}

impl Set {
    /// Reads `file`: a directory written by --save (every JSON result in it is one run), a
    /// JSON result file (one run or an array), or one number per line.
    fn read(file: &std::path::Path) -> Result<Self> {
        use anyhow::Context;
        if file.is_dir() {
            let mut entries: Vec<_> = std::fs::read_dir(file)
                .with_context(|| format!("cannot read {}", file.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .collect();
            entries.sort();
            let mut runs = Vec::new();
            for p in entries {
                let text = crate::files::read_text(&p, crate::files::RESULT_FILE_CAP)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
                let saved = netchar_report::parse_saved(&text, &p.display().to_string()).map_err(anyhow::Error::msg)?;
                runs.extend(saved.into_iter().map(|s| s.result));
            }
            if runs.is_empty() {
                anyhow::bail!("{} holds no JSON results", file.display());
            }
            return Ok(Self::Runs(runs));
        }
        let text = crate::files::read_text(file, crate::files::RESULT_FILE_CAP)
            .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
        // A JSON object or array is results, read as results; anything else is ministat's input.
        if text.trim_start().starts_with(['{', '[']) {
            let saved = netchar_report::parse_saved(&text, &file.display().to_string()).map_err(anyhow::Error::msg)?;
            return Ok(Self::Runs(saved.into_iter().map(|s| s.result).collect()));
        }
        Ok(Self::Numbers(
            plain_numbers(&text)
                .with_context(|| format!("{}: neither a netchar result nor numbers", file.display()))?,
        ))
    }

    fn runs(&self) -> &[netchar_model::TestResult] {
        match self {
            Self::Runs(r) => r,
            Self::Numbers(_) => &[],
        }
    }
}

/// `netchar compare`: ministat's report over result files or plain number files.
pub(crate) fn run(a: &crate::args::CompareArgs) -> Result<u8> {
    if !netchar_stats::compare::CONFIDENCES.contains(&a.confidence) {
        anyhow::bail!("-c {}: use one of 80, 90, 95, 98, 99, 99.5", a.confidence);
    }
    let accepted = crate::same_method::accepted_fields(&a.accept_difference).map_err(|e| anyhow::anyhow!(e))?;
    let named: Vec<(String, Set)> =
        a.files.iter().map(|f| Ok((f.display().to_string(), Set::read(f)?))).collect::<Result<_>>()?;
    // The figure's path, from the first result: a name (`pps`) picks its first flow.
    let path = match named.iter().find_map(|(_, s)| s.runs().first()) {
        None => None,
        Some(first) => Some(match &a.metric {
            Some(m) => first.metric_path(m).map_err(|e| anyhow::anyhow!(e))?,
            None => first.headline_path().to_string(),
        }),
    };
    let mut sets = Vec::new();
    for (name, set) in &named {
        let values = match (set, &path) {
            (Set::Numbers(v), _) => v.clone(),
            (Set::Runs(runs), Some(path)) => {
                let v = netchar_model::figures::figures(runs, path);
                if v.is_empty() {
                    anyhow::bail!("{name}: no {path} in it (choose one with --metric)");
                }
                v
            }
            (Set::Runs(_), None) => unreachable!("a set of runs gives the path"),
        };
        if values.len() < 3 {
            // As ministat: too few points for a meaningful interval.
            let of = path.as_deref().filter(|_| matches!(set, Set::Runs(_))).map(|p| format!(" of {p}"));
            anyhow::bail!("{name} has {} values{}: a set needs at least 3", values.len(), of.unwrap_or_default());
        }
        sets.push((name.clone(), values));
    }
    // Two sets measured two ways compare the methods, not what the user changed: refused
    // unless the user named the difference.
    let methods: Vec<(String, Vec<netchar_model::Method>)> =
        named.iter().map(|(name, set)| (name.clone(), set.runs().iter().map(|r| r.method()).collect())).collect();
    let verdict = crate::same_method::check(&methods, &accepted);
    if let Some(refusal) = verdict.refused {
        anyhow::bail!(refusal);
    }
    for difference in verdict.accepted {
        eprintln!("netchar: note: the sets differ in {difference}, as accepted");
    }
    let runs: Vec<(String, &[netchar_model::TestResult])> =
        named.iter().map(|(name, set)| (name.clone(), set.runs())).collect();
    for warning in identity_warnings(&runs) {
        eprintln!("netchar: warning: {warning}");
    }
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(netchar_stats::compare::report(&sets, a.confidence, a.welch).as_bytes())?;
    Ok(crate::exit::OK)
}

/// ministat's input: the first number of each line; blank lines and `#` comments skipped.
fn plain_numbers(text: &str) -> Result<Vec<f64>> {
    let mut v = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let first = line.split_whitespace().next().unwrap_or("");
        v.push(first.parse::<f64>().map_err(|_| anyhow::anyhow!("line {}: {first:?} is not a number", n + 1))?);
    }
    Ok(v)
}

/// The settings of one end of a run that shape what it measures: its kernel (a target's
/// build, for the C responder) and its identity (docs/json.md, `host.identity`).
#[derive(PartialEq)]
struct EndSetup {
    kernel: Option<String>,
    identity: Option<netchar_model::HostIdentity>,
}

impl EndSetup {
    fn of(host: Option<&netchar_model::HostInfo>) -> Self {
        Self {
            kernel: host.map(|h| h.kernel.clone()).filter(|k| !k.is_empty()),
            identity: host.and_then(|h| h.identity.clone()),
        }
    }

    /// Where `self` and `other` differ, as `what: left vs right`; what only one side
    /// reports is no difference (an older result has no identity).
    fn differences(&self, other: &Self) -> Vec<String> {
        let mut out = Vec::new();
        if let (Some(a), Some(b)) = (&self.kernel, &other.kernel) {
            if a != b {
                out.push(format!("kernel: {a} vs {b}"));
            }
        }
        if let (Some(a), Some(b)) = (&self.identity, &other.identity) {
            let shown = |v: &Option<String>| v.clone().unwrap_or_else(|| "not reported".into());
            out.extend(
                a.differences(b).iter().map(|d| format!("{}: {} vs {}", d.what, shown(&d.left), shown(&d.right))),
            );
        }
        out
    }
}

/// What `netchar compare` warns about before its report: each set whose runs' hosts were set
/// up differently from the first set's first run (its kernel, kernel command line, the test's
/// interfaces' drivers, firmware, offloads and coalescing, CPU frequency governors, on either
/// end), and each set whose own runs differ so (issue 23). A difference in these can explain a
/// difference in the figures.
fn identity_warnings(sets: &[(String, &[netchar_model::TestResult])]) -> Vec<String> {
    let ends = |r: &netchar_model::TestResult| {
        [("client", EndSetup::of(Some(&r.host))), ("server", EndSetup::of(r.remote_host.as_ref()))]
    };
    let Some((base_name, base)) = sets.iter().find(|(_, runs)| !runs.is_empty()) else { return Vec::new() };
    let reference = ends(&base[0]);
    let mut warnings = Vec::new();
    for (name, runs) in sets {
        let mut differences = Vec::new();
        for run in runs.iter() {
            for ((end, setup), (_, base_setup)) in ends(run).iter().zip(&reference) {
                for d in base_setup.differences(setup) {
                    let d = format!("{end} {d}");
                    if !differences.contains(&d) {
                        differences.push(d);
                    }
                }
            }
        }
        if differences.is_empty() {
            continue;
        }
        const SHOWN: usize = 8;
        let more = differences.len().saturating_sub(SHOWN);
        differences.truncate(SHOWN);
        let mut line = if name == base_name {
            format!("the runs of {name} ran on hosts set up differently: {}", differences.join("; "))
        } else {
            format!("{name} ran on hosts set up differently from {base_name}: {}", differences.join("; "))
        };
        if more > 0 {
            line.push_str(&format!("; and {more} more"));
        }
        warnings.push(line);
    }
    warnings
}

#[cfg(test)]
mod identity_tests {
    use super::identity_warnings;
    use netchar_model::{CpuReport, HostInfo, ResultHeader, TestInfo, TestResult, TestSpec};
    use serde_json::json;

    /// A result whose client has `cmdline` and GRO `gro` on eth0, and whose server runs `kernel`.
    fn run(cmdline: &str, gro: bool, kernel: &str) -> TestResult {
        let identity = json!({
            "kernel_cmdline": cmdline,
            "interfaces": [{"name": "eth0", "driver": "ixgbe", "offloads": {"rx-gro": gro}}]
        });
        let host = HostInfo {
            kernel: "Linux 6.1".into(),
            identity: Some(serde_json::from_value(identity).unwrap()),
            ..HostInfo::default()
        };
        let header = ResultHeader {
            host,
            remote_host: Some(HostInfo { kernel: kernel.into(), ..HostInfo::default() }),
            ..ResultHeader::new(TestInfo::new(TestSpec::tcp_default(), "192.0.2.7:5300"))
        };
        TestResult::assemble(header, Vec::new(), CpuReport::default(), None)
    }

    #[test]
    fn sets_on_differently_set_up_hosts_are_named_with_what_differs() {
        let board = "lwIP 2.1.3 NO_SYS=1, gcc 12.2.1 -Os, lwipopts 809da5f523f1";
        let before = vec![run("quiet", true, board), run("quiet", true, board)];
        let same = vec![run("quiet", true, board)];
        let after = vec![run("quiet", false, "lwIP 2.1.3 NO_SYS=1, gcc 12.2.1 -O2")];
        let saved = vec![run("quiet", true, board), run("quiet mitigations=off", true, board)];
        let set = |name: &str, runs: &'static [TestResult]| (name.to_string(), runs);
        let leak = |v: Vec<TestResult>| -> &'static [TestResult] { Box::leak(v.into_boxed_slice()) };
        let (before, same, after, saved) = (leak(before), leak(same), leak(after), leak(saved));
        // A number file has no runs and no setup.
        let sets = [set("before", before), set("same", same), set("after", after), set("saved", saved), set("n", &[])];
        assert_eq!(
            identity_warnings(&sets),
            [
                format!(
                    "after ran on hosts set up differently from before: client eth0 offload rx-gro: on vs off; server \
                     kernel: {board} vs lwIP 2.1.3 NO_SYS=1, gcc 12.2.1 -O2"
                ),
                "saved ran on hosts set up differently from before: client kernel_cmdline: quiet vs quiet \
                 mitigations=off"
                    .to_string(),
            ]
        );
        // Results without identities (an older netchar) are not compared.
        let mut old = run("quiet", true, board);
        old.host.identity = None;
        old.remote_host = None;
        assert!(identity_warnings(&[set("before", before), set("old", leak(vec![old]))]).is_empty());
    }
}
