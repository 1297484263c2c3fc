//! One chart, described apart from how it is drawn: [`crate::plots`] turns results into
//! [`Chart`]s (and picks the units), this file draws a chart with plotters as SVG text or as
//! a PNG image. Text in both is laid out with the font bundled in `fonts/` (DejaVu Sans,
//! reduced to the characters labels use), so a PNG looks the same on a machine with no fonts
//! installed, as CI is; an SVG names `sans-serif` and the viewer draws it.

use plotters::coord::Shift;
use plotters::prelude::*;
use std::sync::Once;

/// Width and height of one chart, pixels.
pub const CHART_SIZE: (u32, u32) = (900, 420);

/// The font every chart's text is measured and (in PNGs) drawn with.
const FONT: &[u8] = include_bytes!("../fonts/DejaVuSans-subset.ttf");

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A line through the points.
    Line,
    /// A line through the points, each point marked.
    LineAndPoints,
    /// A dashed reference line (the "received = offered" diagonal).
    Reference,
}

/// One named series.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Its legend entry: `up stream 1`, `down sum`, `up loss %`, ...
    pub name: String,
    /// (x, y) in the axes' units.
    pub points: Vec<(f64, f64)>,
    /// How it is drawn.
    pub shape: Shape,
    /// Drawn against the right-hand axis ([`Chart::y2`]).
    pub right_axis: bool,
    /// Drawn thick and black (a sum over streams).
    pub emphasis: bool,
    /// The palette colour; None: the series' position.
    pub colour: Option<usize>,
}

impl Series {
    /// A plain line on the left axis.
    pub fn line(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Self { name: name.into(), points, shape: Shape::Line, right_axis: false, emphasis: false, colour: None }
    }
}

/// An axis: its label (with the unit) and whether it is logarithmic.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    /// `time (s)`, `throughput (Mbit/s)`, ...
    pub label: String,
    /// Logarithmic, base 2 (values must be > 0): the ticks fall on powers of two, as block
    /// sizes do.
    pub log: bool,
    /// Names for the values 0, 1, 2, ... (an x axis of categories, not numbers).
    pub categories: Vec<String>,
    /// A y axis from just below the smallest value, not from 0: a trend's small steps show.
    pub fitted: bool,
}

impl Axis {
    /// A linear axis.
    pub fn linear(label: impl Into<String>) -> Self {
        Self { label: label.into(), log: false, categories: vec![], fitted: false }
    }
    /// A logarithmic axis.
    pub fn log(label: impl Into<String>) -> Self {
        Self { label: label.into(), log: true, categories: vec![], fitted: false }
    }
    /// The axis fitted to its values ([`Axis::fitted`]).
    pub fn fitted(self) -> Self {
        Self { fitted: true, ..self }
    }
    /// An axis of named categories at 0, 1, 2, ...
    pub fn categories(label: impl Into<String>, names: &[impl AsRef<str>]) -> Self {
        Self {
            label: label.into(),
            log: false,
            categories: names.iter().map(|n| n.as_ref().to_string()).collect(),
            fitted: false,
        }
    }
}

/// A vertical line at `x` with a label (a sweep's knee).
#[derive(Debug, Clone, PartialEq)]
pub struct Marker {
    /// Where, in x units.
    pub x: f64,
    /// What it marks.
    pub label: String,
}

/// One set of a box/strip plot: its values, quartiles and the confidence interval of its
/// mean.
#[derive(Debug, Clone, PartialEq)]
pub struct BoxSet {
    /// The set's name (the x axis category).
    pub name: String,
    /// Every value, in y units.
    pub values: Vec<f64>,
    /// Smallest, lower quartile, median, upper quartile, largest.
    pub five: [f64; 5],
    /// Mean and the half-width of its confidence interval.
    pub mean: f64,
    /// Half-width of the mean's confidence interval (0 for one value).
    pub ci_half: f64,
}

/// A chart: axes, series, markers, or box sets (then the x axis names the sets).
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// A file name without extension: letters, digits, `-` and `_`.
    pub stem: String,
    /// The caption.
    pub title: String,
    /// x axis.
    pub x: Axis,
    /// Left y axis.
    pub y: Axis,
    /// Right y axis, for series with `right_axis`.
    pub y2: Option<Axis>,
    /// The lines.
    pub series: Vec<Series>,
    /// Vertical markers.
    pub markers: Vec<Marker>,
    /// Box/strip sets; when not empty the chart is a box plot and `series` is ignored.
    pub boxes: Vec<BoxSet>,
}

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The font is part of this crate and parsed in its tests: it cannot be invalid.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

/// The (low, high) of `values` on an axis, padded; a log axis keeps to positive values.
fn range(values: impl Iterator<Item = f64>, log: bool, from_zero: bool) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite() && (!log || *v > 0.0)) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if log {
        let (l, h) = (lo.log2(), hi.log2());
        let pad = ((h - l) * 0.05).max(0.1);
        return (l - pad, h + pad);
    }
    if from_zero && lo >= 0.0 {
        lo = 0.0;
    }
    if hi - lo < 1e-12 {
        hi = lo + 1.0;
    }
    (lo, hi + (hi - lo) * 0.08)
}

/// A number as axis labels show it: short, no trailing zeros.
pub fn tick(v: f64) -> String {
    let a = v.abs();
    let s = if a >= 1000.0 || a == 0.0 || (a - a.round()).abs() < 1e-9 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 0.1 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

fn colour(i: usize, s: &Series) -> RGBAColor {
    if s.emphasis {
        BLACK.to_rgba()
    } else if s.shape == Shape::Reference {
        RGBColor(128, 128, 128).to_rgba()
    } else {
        Palette99::pick(s.colour.unwrap_or(i)).to_rgba()
    }
}

fn draw<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, c: &Chart) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    area.fill(&WHITE).map_err(e)?;
    if !c.boxes.is_empty() {
        return draw_boxes(area, c);
    }
    let lx = |v: f64| if c.x.log { v.log2() } else { v };
    let ly = |v: f64| if c.y.log { v.log2() } else { v };
    let left = c.series.iter().filter(|s| !s.right_axis);
    let (x0, x1) = if c.x.categories.is_empty() {
        range(c.series.iter().flat_map(|s| s.points.iter().map(|p| p.0)), c.x.log, false)
    } else {
        (-0.5, c.x.categories.len() as f64 - 0.5)
    };
    let (mut y0, y1) = range(left.flat_map(|s| s.points.iter().map(|p| p.1)), c.y.log, !c.y.fitted);
    if c.y.fitted && !c.y.log {
        // As much room below the lowest value as above the highest.
        y0 -= (y1 - y0) * 0.08;
    }
    let chart = ChartBuilder::on(area)
        .caption(&c.title, ("sans-serif", 17))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(70)
        .right_y_label_area_size(if c.y2.is_some() { 60 } else { 0 })
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(e)?;
    // Always a second coordinate system, so that both kinds of chart are one type; it gets
    // an axis only when the chart has one.
    let (r0, r1) =
        range(c.series.iter().filter(|s| s.right_axis).flat_map(|s| s.points.iter().map(|p| p.1)), false, true);
    let mut chart = chart.set_secondary_coord(x0..x1, r0..r1);
    // The primary mesh after the secondary coordinates: these take the right-hand label area,
    // which the primary axis would otherwise label too.
    let xlog = c.x.log;
    let ylog = c.y.log;
    let cats = c.x.categories.clone();
    let fx =
        move |v: &f64| if cats.is_empty() { tick(if xlog { 2f64.powf(*v) } else { *v }) } else { category(&cats, *v) };
    let fy = move |v: &f64| tick(if ylog { 2f64.powf(*v) } else { *v });
    let mut mesh = chart.configure_mesh();
    if !c.x.categories.is_empty() {
        // One label per category and one between each: the ones between stay blank.
        mesh.x_labels(c.x.categories.len() * 2 + 1).disable_x_mesh();
    }
    mesh.x_desc(&c.x.label)
        .y_desc(&c.y.label)
        .x_label_formatter(&fx)
        .y_label_formatter(&fy)
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .draw()
        .map_err(e)?;
    if let Some(axis) = &c.y2 {
        chart
            .configure_secondary_axes()
            .y_desc(&axis.label)
            .y_label_formatter(&|v: &f64| tick(*v))
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 14))
            .draw()
            .map_err(e)?;
    }
    for (i, m) in c.markers.iter().enumerate() {
        let x = lx(m.x);
        let style = RGBColor(200, 0, 0).stroke_width(2);
        chart.draw_series(std::iter::once(PathElement::new(vec![(x, y0), (x, y1)], style))).map_err(e)?;
        chart
            .draw_series(std::iter::once(Text::new(
                m.label.clone(),
                // One below the other, so that knees close together stay readable.
                (x, y1 - (y1 - y0) * (0.02 + 0.06 * i as f64)),
                ("sans-serif", 13).into_font().color(&RGBColor(200, 0, 0)),
            )))
            .map_err(e)?;
    }
    for (i, s) in c.series.iter().enumerate() {
        let col = colour(i, s);
        let width = if s.emphasis { 3 } else { 2 };
        let style = col.stroke_width(width);
        let pts: Vec<(f64, f64)> =
            s.points.iter().map(|&(x, y)| (lx(x), if s.right_axis { y } else { ly(y) })).collect();
        let legend = move |(px, py): (i32, i32)| PathElement::new(vec![(px, py), (px + 20, py)], style);
        let anno = if s.shape == Shape::Reference {
            let dashed = DashedLineSeries::new(pts.clone(), 6, 4, col.stroke_width(1));
            if s.right_axis {
                chart.draw_secondary_series(dashed).map_err(e)?
            } else {
                chart.draw_series(dashed).map_err(e)?
            }
        } else if s.right_axis {
            // Right-axis series dashed, so that the two scales' lines stay apart.
            let legend = move |(px, py): (i32, i32)| PathElement::new(vec![(px, py), (px + 8, py)], style);
            let anno = chart.draw_secondary_series(DashedLineSeries::new(pts.clone(), 8, 5, style)).map_err(e)?;
            anno.label(s.name.clone()).legend(legend);
            if s.shape == Shape::LineAndPoints {
                chart.draw_secondary_series(pts.iter().map(|&p| TriangleMarker::new(p, 5, col.filled()))).map_err(e)?;
            }
            continue;
        } else {
            chart.draw_series(LineSeries::new(pts.clone(), style)).map_err(e)?
        };
        anno.label(s.name.clone()).legend(legend);
        if s.shape == Shape::LineAndPoints {
            let dots = pts.iter().map(|&p| Circle::new(p, 3, col.filled()));
            if s.right_axis {
                chart.draw_secondary_series(dots).map_err(e)?;
            } else {
                chart.draw_series(dots).map_err(e)?;
            }
        }
    }
    if !c.series.is_empty() {
        chart
            .configure_series_labels()
            .label_font(("sans-serif", 13))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(e)?;
    }
    Ok(())
}

/// The name of the category at `v` (0, 1, ...), blank between them.
fn category(names: &[String], v: f64) -> String {
    let i = v.round();
    if (v - i).abs() < 1e-6 && i >= 0.0 {
        names.get(i as usize).cloned().unwrap_or_default()
    } else {
        String::new()
    }
}

/// A box plot: per set a box from the lower to the upper quartile, the median across it,
/// whiskers to the extremes, every value as a dot beside it, and the mean with its
/// confidence interval as a red bar.
fn draw_boxes<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, c: &Chart) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let all = c.boxes.iter().flat_map(|b| b.values.iter().copied().chain([b.mean - b.ci_half, b.mean + b.ci_half]));
    let (y0, y1) = range(all, false, true);
    let n = c.boxes.len() as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(&c.title, ("sans-serif", 17))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5..n - 0.5, y0..y1)
        .map_err(e)?;
    let names = c.x.categories.clone();
    let fx = move |v: &f64| category(&names, *v);
    chart
        .configure_mesh()
        .x_labels(c.boxes.len() * 2 + 1)
        .disable_x_mesh()
        .x_desc(&c.x.label)
        .y_desc(&c.y.label)
        .x_label_formatter(&fx)
        .y_label_formatter(&|v: &f64| tick(*v))
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .draw()
        .map_err(e)?;
    let blue = RGBColor(40, 90, 170);
    let red = RGBColor(200, 0, 0);
    for (i, b) in c.boxes.iter().enumerate() {
        let x = i as f64;
        let [min, q1, med, q3, max] = b.five;
        let w = 0.18;
        chart.draw_series([Rectangle::new([(x - w, q1), (x + w, q3)], blue.mix(0.25).filled())]).map_err(e)?;
        chart.draw_series([Rectangle::new([(x - w, q1), (x + w, q3)], blue.stroke_width(1))]).map_err(e)?;
        let lines = [
            vec![(x - w, med), (x + w, med)],
            vec![(x, q3), (x, max)],
            vec![(x, q1), (x, min)],
            vec![(x - w / 2.0, max), (x + w / 2.0, max)],
            vec![(x - w / 2.0, min), (x + w / 2.0, min)],
        ];
        chart.draw_series(lines.into_iter().map(|l| PathElement::new(l, blue.stroke_width(2)))).map_err(e)?;
        // The values as a strip to the right of the box, spread so that equal values show.
        let k = b.values.len().max(1) as f64;
        chart
            .draw_series(
                b.values
                    .iter()
                    .enumerate()
                    .map(|(j, &v)| Circle::new((x + w + 0.06 + 0.1 * (j as f64 / k), v), 3, BLACK.filled())),
            )
            .map_err(e)?;
        let xm = x - w - 0.08;
        let ci = [
            vec![(xm, b.mean - b.ci_half), (xm, b.mean + b.ci_half)],
            vec![(xm - 0.03, b.mean - b.ci_half), (xm + 0.03, b.mean - b.ci_half)],
            vec![(xm - 0.03, b.mean + b.ci_half), (xm + 0.03, b.mean + b.ci_half)],
        ];
        chart.draw_series(ci.into_iter().map(|l| PathElement::new(l, red.stroke_width(2)))).map_err(e)?;
        chart.draw_series([Circle::new((xm, b.mean), 4, red.filled())]).map_err(e)?;
    }
    Ok(())
}

/// The chart as one SVG document.
pub fn to_svg(c: &Chart) -> Result<String, String> {
    register_font();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, CHART_SIZE).into_drawing_area();
        draw(&root, c)?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

/// The chart as a PNG image of [`CHART_SIZE`] (8-bit RGB).
pub fn to_png(c: &Chart) -> Result<Vec<u8>, String> {
    register_font();
    let (w, h) = CHART_SIZE;
    let mut rgb = vec![255u8; (w * h * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, CHART_SIZE).into_drawing_area();
        draw(&root, c)?;
        root.present().map_err(|e| e.to_string())?;
    }
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        // Mostly white with few colours: the strongest compression is several times smaller.
        enc.set_compression(png::Compression::Best);
        let mut writer = enc.write_header().map_err(|e| e.to_string())?;
        writer.write_image_data(&rgb).map_err(|e| e.to_string())?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_short() {
        assert_eq!(tick(0.0), "0");
        assert_eq!(tick(2.5), "2.5");
        assert_eq!(tick(12.75), "12.8");
        assert_eq!(tick(1500.0), "1500");
        assert_eq!(tick(0.0125), "0.013");
    }

    #[test]
    fn the_bundled_font_parses() {
        register_font();
        let c = Chart {
            stem: "t".into(),
            title: "µs ≤ ±".into(),
            x: Axis::log("block (bytes)"),
            y: Axis::linear("rate"),
            y2: Some(Axis::linear("loss (%)")),
            series: vec![Series::line("a", vec![(1.0, 1.0), (1000.0, 2.0)])],
            markers: vec![Marker { x: 10.0, label: "knee".into() }],
            boxes: vec![],
        };
        assert!(to_svg(&c).unwrap().contains("block (bytes)"));
        assert!(to_png(&c).unwrap().starts_with(b"\x89PNG"));
    }
}
