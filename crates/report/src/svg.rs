//! SVG and PNG plots: every chart [`crate::plots`] makes of the results, one file each
//! (`-o DIR`), drawn by [`crate::chart`]. A running test's plot is its throughput over time.

use crate::chart::{self, Chart};
use crate::{plots, Saved};
use netchar_model::TestResult;

pub use crate::chart::CHART_SIZE;
pub use crate::plots::throughput_series;

/// The SVG reporter (`png` false) or the PNG one.
#[derive(Debug, Default)]
pub struct SvgReporter {
    /// Write PNG images instead of SVG documents.
    pub png: bool,
}

/// Every chart of `results` in one SVG document, one below the other (each a nested `<svg>`).
pub fn plot(results: &[Saved]) -> Result<String, String> {
    let charts = plots::charts(results);
    let (w, h) = CHART_SIZE;
    let total = h * charts.len().max(1) as u32;
    let mut out = format!(
        "<svg width=\"{w}\" height=\"{total}\" viewBox=\"0 0 {w} {total}\" xmlns=\"http://www.w3.org/2000/svg\">\n"
    );
    for (i, c) in charts.iter().enumerate() {
        let one = chart::to_svg(c)?;
        let one = one.trim_start_matches(|c: char| c != '<');
        // Placed by its y offset; the inner document keeps its own size and view box.
        out.push_str(&one.replacen("<svg ", &format!("<svg y=\"{}\" ", h * i as u32), 1));
        out.push('\n');
    }
    out.push_str("</svg>\n");
    Ok(out)
}

/// Every chart of `results` as (file name, bytes): `NAME.svg` or `NAME.png`.
pub fn files(results: &[Saved], png: bool) -> Result<crate::NamedFiles, String> {
    plots::charts(results).iter().map(|c| render(c, png)).collect()
}

/// One chart as (file name, bytes).
pub fn render(c: &Chart, png: bool) -> Result<(String, Vec<u8>), String> {
    Ok(if png {
        (format!("{}.png", c.stem), chart::to_png(c)?)
    } else {
        (format!("{}.svg", c.stem), chart::to_svg(c)?.into_bytes())
    })
}

/// A file name for a result's throughput plot: its position and its label, letters and
/// digits only.
pub fn file_name(index: usize, label: &str) -> String {
    format!("{:03}-{}.svg", index + 1, plots::slug(label))
}

impl crate::Reporter for SvgReporter {
    fn on_finish(&mut self, result: &TestResult) -> String {
        self.on_results(&[Saved { label: "-".into(), result: result.clone() }])
    }
    fn on_results(&mut self, results: &[Saved]) -> String {
        plot(results).unwrap_or_else(|e| format!("<!-- plot failed: {e} -->\n"))
    }
    fn on_results_files(&mut self, results: &[Saved]) -> Option<Vec<(String, String)>> {
        let files = files(results, false).unwrap_or_default();
        Some(files.into_iter().map(|(n, b)| (n, String::from_utf8(b).unwrap_or_default())).collect())
    }
    fn on_results_binary_files(&mut self, results: &[Saved]) -> Option<Result<crate::NamedFiles, String>> {
        Some(files(results, self.png))
    }
}
