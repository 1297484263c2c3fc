//! `netchar compare`: ministat's report over result files, `--save` directories or plain
//! number files.

use anyhow::Result;
use std::io::Write;

/// `netchar compare`: ministat's report over result files or plain number files.
pub(crate) fn run(a: &crate::args::CompareArgs) -> Result<u8> {
    use anyhow::Context;
    if !netchar_stats::compare::CONFIDENCES.contains(&a.confidence) {
        anyhow::bail!("-c {}: use one of 80, 90, 95, 98, 99, 99.5", a.confidence);
    }
    let accepted = crate::same_method::accepted_fields(&a.accept_difference).map_err(|e| anyhow::anyhow!(e))?;
    let mut sets = Vec::new();
    // The figure's path, from the first result: a name (`pps`) picks its first flow.
    let mut metric: Option<String> = None;
    let path_in = |doc: &serde_json::Value| match &a.metric {
        Some(m) => crate::metrics::metric_path(m, doc).map_err(|e| anyhow::anyhow!(e)),
        None => Ok(crate::metrics::headline(doc).to_string()),
    };
    for file in &a.files {
        if file.is_dir() {
            // A directory written by --save: every JSON result in it is one run of the set.
            let mut docs = Vec::new();
            let mut entries: Vec<_> = std::fs::read_dir(file)
                .with_context(|| format!("cannot read {}", file.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .collect();
            entries.sort();
            for p in entries {
                let text = crate::files::read_text(&p, crate::files::RESULT_FILE_CAP)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
                docs.push(
                    serde_json::from_str::<serde_json::Value>(&text)
                        .with_context(|| format!("{} is not JSON", p.display()))?,
                );
            }
            let Some(first) = docs.first() else { anyhow::bail!("{} holds no JSON results", file.display()) };
            let path = match metric.clone() {
                Some(p) => p,
                None => metric.insert(path_in(first)?).clone(),
            };
            let values = crate::metrics::collect(&docs, &path);
            if values.len() < 3 {
                anyhow::bail!("{} has {} values of {path}: a set needs at least 3", file.display(), values.len());
            }
            sets.push((file.display().to_string(), values));
            continue;
        }
        let text = crate::files::read_text(file, crate::files::RESULT_FILE_CAP)
            .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
        let values = match serde_json::from_str::<serde_json::Value>(&text) {
            Ok(doc) if doc.is_object() || doc.is_array() => {
                let first = if doc.is_array() { doc[0].clone() } else { doc.clone() };
                let path = match metric.clone() {
                    Some(p) => p,
                    None => metric.insert(path_in(&first)?).clone(),
                };
                let v = crate::metrics::collect(std::slice::from_ref(&doc), &path);
                if v.is_empty() {
                    anyhow::bail!("{}: no {path} in it (choose one with --metric)", file.display());
                }
                v
            }
            _ => plain_numbers(&text)
                .with_context(|| format!("{}: neither a netchar result nor numbers", file.display()))?,
        };
        if values.len() < 3 {
            // As ministat: too few points for a meaningful interval.
            anyhow::bail!("{} has {} values: a set needs at least 3", file.display(), values.len());
        }
        sets.push((file.display().to_string(), values));
    }
    // Two sets measured two ways compare the methods, not what the user changed: refused
    // unless the user named the difference.
    let methods: Vec<(String, Vec<netchar_model::Method>)> =
        a.files.iter().map(|f| (f.display().to_string(), crate::same_method::methods_of(&set_results(f)))).collect();
    let verdict = crate::same_method::check(&methods, &accepted);
    if let Some(refusal) = verdict.refused {
        anyhow::bail!(refusal);
    }
    for difference in verdict.accepted {
        eprintln!("netchar: note: the sets differ in {difference}, as accepted");
    }
    for warning in identity_warnings(&a.files) {
        eprintln!("netchar: warning: {warning}");
    }
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(netchar_stats::compare::report(&sets, a.confidence, a.welch).as_bytes())?;
    Ok(crate::EXIT_OK)
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
    fn of(host: &serde_json::Value) -> Self {
        Self {
            kernel: host.get("kernel").and_then(|k| k.as_str()).filter(|k| !k.is_empty()).map(str::to_string),
            identity: host.get("identity").and_then(|i| serde_json::from_value(i.clone()).ok()),
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

/// The JSON results of a set: a `--save` directory's files, or a file's object or array
/// (plain number files and unreadable files have none).
fn set_results(file: &std::path::Path) -> Vec<serde_json::Value> {
    let read = |p: &std::path::Path| {
        crate::files::read_text(p, crate::files::RESULT_FILE_CAP)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
    };
    let docs: Vec<serde_json::Value> = if file.is_dir() {
        let mut paths: Vec<_> =
            std::fs::read_dir(file).map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect()).unwrap_or_default();
        paths.retain(|p| p.extension().is_some_and(|x| x == "json"));
        paths.sort();
        paths.iter().filter_map(|p| read(p)).collect()
    } else {
        read(file).into_iter().collect()
    };
    docs.into_iter()
        .flat_map(|d| match d {
            serde_json::Value::Array(a) => a,
            other => vec![other],
        })
        .filter(|d| d.get("host").is_some())
        .collect()
}

/// What `netchar compare` warns about before its report: each set whose runs' hosts were set
/// up differently from the first set's first run (its kernel, kernel command line, the test's
/// interfaces' drivers, firmware, offloads and coalescing, CPU frequency governors, on either
/// end), and each set whose own runs differ so (issue 23). A difference in these can explain a
/// difference in the figures.
fn identity_warnings(files: &[std::path::PathBuf]) -> Vec<String> {
    let ends = |doc: &serde_json::Value| {
        let null = serde_json::Value::Null;
        [("client", EndSetup::of(&doc["host"])), ("server", EndSetup::of(doc.get("remote_host").unwrap_or(&null)))]
    };
    let sets: Vec<(String, Vec<serde_json::Value>)> =
        files.iter().map(|f| (f.display().to_string(), set_results(f))).collect();
    let Some((base_name, base)) = sets.iter().find(|(_, docs)| !docs.is_empty()) else { return Vec::new() };
    let reference = ends(&base[0]);
    let mut warnings = Vec::new();
    for (name, docs) in &sets {
        let mut differences = Vec::new();
        for doc in docs {
            for ((end, setup), (_, base_setup)) in ends(doc).iter().zip(&reference) {
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
    use serde_json::json;

    /// A result whose client has `cmdline` and GRO `gro` on eth0, and whose server runs `kernel`.
    fn run(cmdline: &str, gro: bool, kernel: &str) -> serde_json::Value {
        json!({
            "host": {"kernel": "Linux 6.1", "identity": {
                "kernel_cmdline": cmdline,
                "interfaces": [{"name": "eth0", "driver": "ixgbe", "offloads": {"rx-gro": gro}}]
            }},
            "remote_host": {"kernel": kernel},
            "summary": {}
        })
    }

    #[test]
    fn sets_on_differently_set_up_hosts_are_named_with_what_differs() {
        let dir = std::env::temp_dir().join(format!("netchar-compare-identity-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("saved")).unwrap();
        let write = |name: &str, v: serde_json::Value| {
            let p = dir.join(name);
            std::fs::write(&p, v.to_string()).unwrap();
            p
        };
        let board = "lwIP 2.1.3 NO_SYS=1, gcc 12.2.1 -Os, lwipopts 809da5f523f1";
        let before = write("before.json", json!([run("quiet", true, board), run("quiet", true, board)]));
        let same = write("same.json", json!([run("quiet", true, board)]));
        let after = write("after.json", json!([run("quiet", false, "lwIP 2.1.3 NO_SYS=1, gcc 12.2.1 -O2")]));
        write("saved/1.json", run("quiet", true, board));
        write("saved/2.json", run("quiet mitigations=off", true, board));
        let numbers = write("numbers.txt", json!(null)); // neither results nor numbers: no setup
        let warnings = identity_warnings(&[before.clone(), same, after.clone(), dir.join("saved"), numbers]);
        assert_eq!(
            warnings,
            [
                format!(
                    "{} ran on hosts set up differently from {}: client eth0 offload rx-gro: on vs off; server kernel: \
                     {board} vs lwIP 2.1.3 NO_SYS=1, gcc 12.2.1 -O2",
                    after.display(),
                    before.display()
                ),
                format!(
                    "{} ran on hosts set up differently from {}: client kernel_cmdline: quiet vs quiet mitigations=off",
                    dir.join("saved").display(),
                    before.display()
                ),
            ]
        );
        // Results without identities (an older netchar) are not compared.
        let old = write("old.json", json!([{"host": {}, "summary": {}}]));
        assert!(identity_warnings(&[before, old]).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
