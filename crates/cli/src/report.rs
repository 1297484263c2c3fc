//! `netchar report FILES...`: reads saved results (a test's `--json`, `--repeat` and suite
//! arrays, `--save` directories) and writes them through one reporter.

use crate::args::ReportArgs;
use crate::files;
use anyhow::{anyhow, bail, Context, Result};
use netchar_model::units::RateFormat;
use netchar_report::Saved;
use std::io::Write;
use std::path::Path;

/// Runs `netchar report`.
pub(crate) fn run(a: &ReportArgs) -> Result<u8> {
    let format = netchar_report::Format::parse(&a.format)
        .ok_or_else(|| anyhow!("--format {}: one of text, markdown, csv, json, svg, png, html", a.format))?;
    let rate = RateFormat::from_letter(&a.rate).ok_or_else(|| anyhow!("--unit {}: one of k m g K M G a", a.rate))?;
    if a.intervals && format != netchar_report::Format::Csv {
        bail!("--intervals: only with --format csv");
    }
    let mut saved = Vec::new();
    for path in &a.files {
        load(path, &mut saved)?;
    }
    let mut reporter = format.reporter(rate, a.intervals);
    if let Some(files) = reporter.on_results_binary_files(&saved) {
        let Some(dir) = &a.output else { bail!("--format {}: give the directory to write into with -o DIR", a.format) };
        let files = files.map_err(|e| anyhow!("--format {}: {e}", a.format))?;
        std::fs::create_dir_all(dir).with_context(|| format!("-o: cannot create {}", dir.display()))?;
        for (name, bytes) in files {
            write_atomically(&dir.join(name), &bytes)?;
        }
        return Ok(crate::exit::OK);
    }
    let text = reporter.on_results(&saved);
    match &a.output {
        None => std::io::stdout().lock().write_all(text.as_bytes())?,
        Some(out) => write_atomically(out, &text)?,
    }
    Ok(crate::exit::OK)
}

pub(crate) use crate::files::write_atomically;

/// Appends the results in `path` (a file, or a directory of `*.json` files read in name order).
fn load(path: &Path, saved: &mut Vec<Saved>) -> Result<()> {
    if path.is_dir() {
        let mut entries: Vec<_> = std::fs::read_dir(path)
            .with_context(|| format!("cannot read {}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json") && p.is_file())
            .collect();
        entries.sort();
        if entries.is_empty() {
            bail!("{} holds no *.json results", path.display());
        }
        for p in entries {
            load_file(&p, saved)?;
        }
        return Ok(());
    }
    load_file(path, saved)
}

fn load_file(path: &Path, saved: &mut Vec<Saved>) -> Result<()> {
    let name = path.display().to_string();
    let text = files::read_text(path, files::RESULT_FILE_CAP).map_err(|e| anyhow!("{name}: {e}"))?;
    saved.extend(netchar_report::parse_saved(&text, &name).map_err(|e| anyhow!(e))?);
    Ok(())
}
