//! Results written to files as they are measured: `--save DIR` (one file per counted run) and
//! `--json-out FILE`. Each is written to a temporary name and renamed, so a reader never sees
//! half a file.

use anyhow::Result;

/// `--save DIR`: one file per counted run, written to a temporary name and renamed.
pub(crate) fn save_run(dir: &std::path::Path, r: &netchar_model::TestResult, index: u32) -> Result<()> {
    use anyhow::Context;
    std::fs::create_dir_all(dir).with_context(|| format!("--save: cannot create {}", dir.display()))?;
    let stamp: String = r.started_at.chars().filter(|c| c.is_ascii_alphanumeric()).collect();
    let path = dir.join(format!("{stamp}-{}-{index:03}.json", r.test.spec.kind.name()));
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, netchar_report::json::to_json(r))
        .with_context(|| format!("--save: cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("--save: cannot rename to {}", path.display()))?;
    Ok(())
}

/// Writes `--json-out` atomically: a temporary file beside it, then a rename.
pub(crate) fn save_json(out: &crate::plan::Output, result: &netchar_model::TestResult) -> Result<()> {
    match &out.json_out {
        Some(path) => write_json_out(path, &netchar_report::json::to_json(result)),
        None => Ok(()),
    }
}

/// `--json-out FILE` of a suite or a plan: every result as one JSON array, as `--json` prints it.
pub(crate) fn save_json_array(path: &std::path::Path, results: &[netchar_model::TestResult]) -> Result<()> {
    write_json_out(path, &netchar_report::json::many_to_json(results))
}

/// `text` into `path`, atomically.
fn write_json_out(path: &std::path::Path, text: &str) -> Result<()> {
    use anyhow::Context;
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text).with_context(|| format!("--json-out: cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("--json-out: cannot rename to {}", path.display()))?;
    Ok(())
}
