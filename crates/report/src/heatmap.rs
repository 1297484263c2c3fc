//! The heat map of a mesh (`netchar mesh matrix --format html`): an N×N grid of one figure per
//! ordered pair of nodes, rows the sources and columns the destinations, drawn as plain inline
//! SVG (rectangles and text, nothing to load). Each cell is shaded on a scale from the
//! smallest figure to the largest, darker being better (more throughput, less latency), and
//! also prints its figure, so the map reads without colour too. A pair without a figure (its
//! test failed or is missing from the logs) is hatched grey and says so.

use crate::markup::escape;
use std::fmt::Write;

/// One figure per ordered pair of nodes.
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    /// What the figure is: `throughput`, `rtt`, `latency`.
    pub metric: String,
    /// Its unit: `Mbit/s`, `µs`.
    pub unit: String,
    /// Whether larger is better (throughput) or worse (latency): which end of the scale is dark.
    pub higher_is_better: bool,
    /// The nodes, in the order of the rows and of the columns.
    pub names: Vec<String>,
    /// `cells[source][destination]`; None where there is no figure (and on the diagonal).
    pub cells: Vec<Vec<Option<f64>>>,
}

const CELL: u32 = 64;
const FONT_SIZE: u32 = 12;

/// Pixels of the row labels' column: the longest name at about 0.62 em per character.
fn label_width(names: &[String]) -> u32 {
    let longest = names.iter().map(|n| n.chars().count()).max().unwrap_or(0) as u32;
    (longest * FONT_SIZE * 62 / 100 + 16).max(48)
}

/// A figure as the cell prints it: three significant digits or so.
fn short(v: f64) -> String {
    match v.abs() {
        a if a >= 100.0 => format!("{v:.0}"),
        a if a >= 10.0 => format!("{v:.1}"),
        _ => format!("{v:.2}"),
    }
}

/// The shade of `v` on the scale `lo..=hi`: from a pale to a dark blue, dark at the better end.
fn shade(v: f64, lo: f64, hi: f64, higher_is_better: bool) -> (String, bool) {
    let mut t = if hi > lo { (v - lo) / (hi - lo) } else { 1.0 };
    if !higher_is_better {
        t = 1.0 - t;
    }
    let t = t.clamp(0.0, 1.0);
    let mix = |a: f64, b: f64| (a + (b - a) * t).round() as u8;
    let (pale, dark) = ((232.0, 240.0, 250.0), (8.0, 48.0, 107.0)); // #e8f0fa to #08306b
    let colour = format!("#{:02x}{:02x}{:02x}", mix(pale.0, dark.0), mix(pale.1, dark.1), mix(pale.2, dark.2));
    (colour, t > 0.5)
}

/// The heat map as one `<svg>` element. Every cell is a `<rect class="cell">` carrying
/// `data-source`, `data-destination` and, where there is a figure, `data-value` (the figure in
/// full, as `mesh matrix --csv` writes it), with a `<title>` a browser shows on hover.
pub fn svg(m: &Matrix) -> String {
    let n = m.names.len() as u32;
    let left = label_width(&m.names);
    let top = left + 24; // the column labels are turned upright; room for the axis title above
    let figures: Vec<f64> = m.cells.iter().flatten().flatten().copied().filter(|v| v.is_finite()).collect();
    let lo = figures.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = figures.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let scale = if figures.is_empty() {
        "no figures".to_string()
    } else {
        let (dark_end, pale_end) = if m.higher_is_better { (hi, lo) } else { (lo, hi) };
        format!("{} {unit} (pale) to {} {unit} (dark)", short(pale_end), short(dark_end), unit = m.unit)
    };
    let scale = format!("{} ({}): {scale}", m.metric, m.unit);
    // Wide enough for the grid and for the scale's line below it (about 0.62 em a character).
    let scale_width = left + scale.chars().count() as u32 * FONT_SIZE * 62 / 100 + 8;
    let (width, height) = ((left + n * CELL + 8).max(scale_width), top + n * CELL + 28);
    let mut out = String::new();
    let _ = write!(
        out,
        "<svg class=\"heatmap\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" \
         xmlns=\"http://www.w3.org/2000/svg\" font-family=\"sans-serif\" font-size=\"{FONT_SIZE}\" \
         role=\"img\" aria-label=\"{metric} ({unit}) from each source node (row) to each destination node (column)\">\n\
         <defs><pattern id=\"missing-{metric}\" width=\"8\" height=\"8\" patternUnits=\"userSpaceOnUse\">\
         <rect width=\"8\" height=\"8\" fill=\"#eee\"/><path d=\"M0,8 L8,0\" stroke=\"#bbb\"/></pattern></defs>\n\
         <text x=\"{cx}\" y=\"14\" text-anchor=\"middle\" font-weight=\"bold\">destination</text>\n\
         <text x=\"12\" y=\"{cy}\" text-anchor=\"middle\" font-weight=\"bold\" transform=\"rotate(-90 12 {cy})\">source</text>\n",
        metric = escape(&m.metric),
        unit = escape(&m.unit),
        cx = left + n * CELL / 2,
        cy = top + n * CELL / 2,
    );
    for (j, name) in m.names.iter().enumerate() {
        let x = left + j as u32 * CELL + CELL / 2;
        let y = top - 6;
        let _ = writeln!(
            out,
            "<text class=\"column\" x=\"{x}\" y=\"{y}\" transform=\"rotate(-90 {x} {y})\" dominant-baseline=\"middle\">{}</text>",
            escape(name)
        );
    }
    for (i, source) in m.names.iter().enumerate() {
        let y = top + i as u32 * CELL;
        let _ = writeln!(
            out,
            "<text class=\"row\" x=\"{}\" y=\"{}\" text-anchor=\"end\" dominant-baseline=\"middle\">{}</text>",
            left - 6,
            y + CELL / 2,
            escape(source)
        );
        for (j, destination) in m.names.iter().enumerate() {
            let x = left + j as u32 * CELL;
            let value = m.cells.get(i).and_then(|r| r.get(j)).copied().flatten().filter(|v| v.is_finite());
            let (fill, label, dark, data, title) = match value {
                _ if i == j => {
                    ("#fff".to_string(), "–".to_string(), false, String::new(), "the node itself".to_string())
                }
                Some(v) => {
                    let (fill, dark) = shade(v, lo, hi, m.higher_is_better);
                    (fill, short(v), dark, format!(" data-value=\"{v}\""), format!("{} {}", short(v), m.unit))
                }
                None => (
                    format!("url(#missing-{})", escape(&m.metric)),
                    "missing".to_string(),
                    false,
                    String::new(),
                    "no result".to_string(),
                ),
            };
            let _ = writeln!(
                out,
                "<rect class=\"cell\" x=\"{x}\" y=\"{y}\" width=\"{CELL}\" height=\"{CELL}\" fill=\"{fill}\" stroke=\"#fff\" \
                 data-source=\"{s}\" data-destination=\"{d}\"{data}><title>{s} → {d}: {title}</title></rect>\
                 <text x=\"{tx}\" y=\"{ty}\" text-anchor=\"middle\" dominant-baseline=\"middle\" fill=\"{ink}\">{label}</text>",
                s = escape(source),
                d = escape(destination),
                title = escape(&title),
                tx = x + CELL / 2,
                ty = y + CELL / 2,
                ink = if dark { "#fff" } else { "#222" },
                label = escape(&label),
            );
        }
    }
    let _ = write!(
        out,
        "<text class=\"scale\" x=\"{left}\" y=\"{}\">{}</text>\n</svg>",
        top + n * CELL + 18,
        escape(&scale)
    );
    out
}
