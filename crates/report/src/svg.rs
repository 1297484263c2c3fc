//! SVG plots (plotters, SVG backend only, no fonts needed: the SVG names the font and the
//! viewer draws it). One chart per result: throughput over time at the receiving end, one
//! line per stream and, with more than one stream in a flow, their sum. Rates are the
//! intervals' own bit/s, drawn as steps: level over each interval, from its start to its end.

use crate::Saved;
use netchar_model::{Flow, IntervalRecord, Role, TestInfo, TestResult};
use plotters::prelude::*;

/// The SVG reporter.
#[derive(Debug, Default)]
pub struct SvgReporter;

/// Width and height of one chart, pixels.
pub const CHART_SIZE: (u32, u32) = (900, 420);

/// One line of a chart: its name and its (seconds, bit/s) points.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// `up stream 1`, `down sum`, ...
    pub name: String,
    /// (seconds, bit/s): each interval's start and end at its rate.
    pub points: Vec<(f64, f64)>,
}

/// The series of one result: per flow, each stream as its receiver measured it (its sender
/// where no receiver intervals exist, as with a peer that reports none), then the sum when
/// the flow has more than one stream.
pub fn throughput_series(r: &TestResult) -> Vec<Series> {
    let mut out = Vec::new();
    for flow in [Flow::Up, Flow::Down] {
        let has = |role: Role| r.intervals.iter().any(|iv| iv.streams.iter().any(|s| s.flow == flow && s.role == role));
        let role = if has(Role::Receiver) {
            Role::Receiver
        } else if has(Role::Sender) {
            Role::Sender
        } else {
            continue;
        };
        let mut ids: Vec<u32> = r
            .intervals
            .iter()
            .flat_map(|iv| &iv.streams)
            .filter(|s| s.flow == flow && s.role == role)
            .map(|s| s.id)
            .collect();
        ids.sort_unstable();
        ids.dedup();
        for &id in &ids {
            let points = r
                .intervals
                .iter()
                .flat_map(|iv| &iv.streams)
                .filter(|s| s.id == id && s.flow == flow && s.role == role)
                .flat_map(|s| [(s.sample.start, s.sample.bits_per_second), (s.sample.end, s.sample.bits_per_second)])
                .collect();
            out.push(Series { name: format!("{} stream {id}", flow.name()), points });
        }
        if ids.len() > 1 {
            let points = r
                .intervals
                .iter()
                .filter_map(|iv: &IntervalRecord| {
                    iv.sum.iter().find(|s| s.flow == flow && s.role == role).map(|s| (iv, s.bits_per_second))
                })
                .flat_map(|(iv, b)| [(iv.start, b), (iv.end, b)])
                .collect();
            out.push(Series { name: format!("{} sum", flow.name()), points });
        }
    }
    out
}

/// A unit that keeps the axis numbers short: (divisor, name).
fn rate_unit(max: f64) -> (f64, &'static str) {
    if max >= 1e9 {
        (1e9, "Gbit/s")
    } else if max >= 1e6 {
        (1e6, "Mbit/s")
    } else if max >= 1e3 {
        (1e3, "kbit/s")
    } else {
        (1.0, "bit/s")
    }
}

fn draw<DB: DrawingBackend>(area: &DrawingArea<DB, plotters::coord::Shift>, s: &Saved) -> Result<(), String> {
    let r = &s.result;
    let series = throughput_series(r);
    let t_max = series.iter().flat_map(|x| &x.points).map(|p| p.0).fold(0.0, f64::max).max(1e-3);
    let y_max = series.iter().flat_map(|x| &x.points).map(|p| p.1).fold(0.0, f64::max);
    let (div, unit) = rate_unit(y_max);
    let caption = format!("{}: {} {} throughput over time", s.label, r.test.protocol, r.test.spec.kind.name());
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    area.fill(&WHITE).map_err(e)?;
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..t_max * 1.02, 0.0..(y_max / div * 1.1).max(1e-3))
        .map_err(e)?;
    chart.configure_mesh().x_desc("time (s)").y_desc(format!("throughput ({unit})")).draw().map_err(e)?;
    for (i, x) in series.iter().enumerate() {
        let sum = x.name.ends_with(" sum");
        // The sum in black and thick, the streams in the palette's colours.
        let colour = if sum { BLACK.to_rgba() } else { Palette99::pick(i).to_rgba() };
        let width = if sum { 3 } else { 1 };
        chart
            .draw_series(LineSeries::new(x.points.iter().map(|&(t, b)| (t, b / div)), colour.stroke_width(width)))
            .map_err(e)?
            .label(x.name.clone())
            .legend(move |(lx, ly)| PathElement::new(vec![(lx, ly), (lx + 20, ly)], colour.stroke_width(width)));
    }
    if !series.is_empty() {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::LowerRight)
            .draw()
            .map_err(e)?;
    }
    Ok(())
}

/// One SVG document with a chart per result, stacked.
pub fn plot(results: &[Saved]) -> Result<String, String> {
    let mut svg = String::new();
    {
        let (w, h) = CHART_SIZE;
        let root = SVGBackend::with_string(&mut svg, (w, h * results.len().max(1) as u32)).into_drawing_area();
        for (area, s) in root.split_evenly((results.len().max(1), 1)).iter().zip(results) {
            draw(area, s)?;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

/// A file name for a result's plot: its position and its label, letters and digits only.
pub fn file_name(index: usize, label: &str) -> String {
    let base: String = label
        .rsplit('/')
        .next()
        .unwrap_or(label)
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' })
        .collect();
    format!("{:03}-{base}.svg", index + 1)
}

impl crate::Reporter for SvgReporter {
    fn on_start(&mut self, _: &TestInfo) -> String {
        String::new()
    }
    fn on_interval(&mut self, _: &IntervalRecord) -> String {
        String::new()
    }
    fn on_finish(&mut self, result: &TestResult) -> String {
        self.on_results(&[Saved { label: "-".into(), result: result.clone() }])
    }
    fn on_results(&mut self, results: &[Saved]) -> String {
        plot(results).unwrap_or_else(|e| format!("<!-- plot failed: {e} -->\n"))
    }
    fn on_results_files(&mut self, results: &[Saved]) -> Option<Vec<(String, String)>> {
        Some(
            results
                .iter()
                .enumerate()
                .map(|(i, s)| (file_name(i, &s.label), self.on_results(std::slice::from_ref(s))))
                .collect(),
        )
    }
}
