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
        return Ok(crate::EXIT_OK);
    }
    let text = reporter.on_results(&saved);
    match &a.output {
        None => std::io::stdout().lock().write_all(text.as_bytes())?,
        Some(out) => write_atomically(out, &text)?,
    }
    Ok(crate::EXIT_OK)
}

/// The results a command keeps for `--plot DIR` and `--report FILE` while it runs: set up
/// when the command has either flag, filled as each test finishes, written once at the end.
static KEPT: std::sync::Mutex<Option<Kept>> = std::sync::Mutex::new(None);

struct Kept {
    /// The command's name: the results' set (`bwsweep#1`, `bwsweep#2`, ...).
    label: String,
    outputs: crate::args::FinishArgs,
    results: Vec<netchar_model::TestResult>,
    /// The results are a `--find-max-rate` search's trials: plotted even at one rate.
    search: bool,
}

/// Starts keeping results for a test, suite, plan or the quick characterization's `--plot`
/// and `--report`, named after the command (a plan after its file).
pub(crate) fn keep_for_command(cli: &crate::args::Cli) {
    use crate::args::Command as C;
    let (label, finish) = match &cli.command {
        None => ("quick".to_string(), &cli.finish),
        Some(C::Tcp(a)) => ("tcp".to_string(), &a.common.finish),
        Some(C::Udp(a)) if a.find_max_rate => ("find-max-rate".into(), &a.common.finish),
        Some(C::Udp(a)) => ("udp".into(), &a.common.finish),
        Some(C::Rr(a)) => ("rr".into(), &a.common.finish),
        Some(C::Crr(a)) => ("crr".into(), &a.common.finish),
        Some(C::Echo(a)) => ("echo".into(), &a.common.finish),
        Some(C::Suite(a)) => (a.suite.clone(), &a.finish),
        Some(C::Run(a)) => (a.plan.file_stem().map_or("plan".into(), |s| s.to_string_lossy().into_owned()), &a.finish),
        _ => return,
    };
    keep_for(&label, finish);
}

/// Starts keeping results for `--plot` and `--report` (nothing without them).
fn keep_for(label: &str, outputs: &crate::args::FinishArgs) {
    if outputs.plot.is_some() || outputs.report.is_some() {
        let kept = Kept { label: label.to_string(), outputs: outputs.clone(), results: Vec::new(), search: false };
        *KEPT.lock().unwrap_or_else(|e| e.into_inner()) = Some(kept);
    }
}

/// Marks the kept results as a `--find-max-rate` search's trials, whose plot is drawn even
/// when the first trial passed and ended the search at one rate.
pub(crate) fn keep_as_search() {
    if let Some(k) = KEPT.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        k.search = true;
    }
}

/// Keeps a finished test's result, if the command writes plots or a report.
pub(crate) fn keep(result: &netchar_model::TestResult) {
    if let Some(k) = KEPT.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        k.results.push(result.clone());
    }
}

/// Writes the plots and the report of the kept results (also after a failed or interrupted
/// command: the figures so far).
pub(crate) fn write_kept() -> Result<()> {
    let Some(k) = KEPT.lock().unwrap_or_else(|e| e.into_inner()).take() else { return Ok(()) };
    if k.results.is_empty() {
        // No test finished: the command has said why, and there is nothing to draw.
        return Ok(());
    }
    let saved: Vec<Saved> = k
        .results
        .into_iter()
        .enumerate()
        .map(|(i, result)| Saved { label: format!("{}#{}", k.label, i + 1), result })
        .collect();
    let charts =
        if k.search { netchar_report::plots::search_charts(&saved) } else { netchar_report::plots::charts(&saved) };
    if let Some(dir) = &k.outputs.plot {
        std::fs::create_dir_all(dir).with_context(|| format!("--plot: cannot create {}", dir.display()))?;
        for png in [false, true] {
            for chart in &charts {
                let (name, bytes) = netchar_report::svg::render(chart, png).map_err(|e| anyhow!("--plot: {e}"))?;
                write_atomically(&dir.join(name), &bytes)?;
            }
        }
    }
    if let Some(file) = &k.outputs.report {
        write_atomically(file, netchar_report::html::document_with_charts(&saved, RateFormat::AutoBits, &charts))?;
    }
    Ok(())
}

/// A temporary file beside `path`, then a rename: a reader never sees half a report.
pub(crate) fn write_atomically(path: &Path, text: impl AsRef<[u8]>) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    std::fs::write(&tmp, text).with_context(|| format!("-o: cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("-o: cannot rename to {}", path.display()))?;
    Ok(())
}

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
