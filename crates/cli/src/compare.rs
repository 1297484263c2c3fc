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
    let mut sets = Vec::new();
    let mut metric = a.metric.clone();
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
            let path = metric.get_or_insert_with(|| crate::metrics::headline(first).to_string()).clone();
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
                let path = metric.get_or_insert_with(|| crate::metrics::headline(&first).to_string()).clone();
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
