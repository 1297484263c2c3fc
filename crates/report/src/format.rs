//! The formats `netchar report` writes, and the reporter of each: the one module that knows
//! every format, above them all; no format reaches back to it.

use crate::{csv, html, json, markdown, svg, text, Reporter};

/// The formats `netchar report` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Aligned text tables.
    Text,
    /// GitHub-flavoured markdown tables.
    Markdown,
    /// Comma-separated values, SI base units.
    Csv,
    /// The results as one JSON array.
    Json,
    /// Plots, one SVG per chart.
    Svg,
    /// Plots, one PNG per chart.
    Png,
    /// One self-contained HTML report: tables, plots, hosts and the raw JSON.
    Html,
}

impl Format {
    /// Parses a `--format` value.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "text" => Self::Text,
            "markdown" | "md" => Self::Markdown,
            "csv" => Self::Csv,
            "json" => Self::Json,
            "svg" => Self::Svg,
            "png" => Self::Png,
            "html" => Self::Html,
            _ => return None,
        })
    }

    /// The reporter for this format; `intervals` asks for per-interval rows where the format
    /// has them (CSV).
    pub fn reporter(self, rate: netchar_model::units::RateFormat, intervals: bool) -> Box<dyn Reporter> {
        match self {
            Self::Text => Box::new(text::TextReporter::new(rate)),
            Self::Markdown => Box::new(markdown::MarkdownReporter::new(rate)),
            Self::Csv => Box::new(csv::CsvReporter::new(intervals)),
            Self::Json => Box::new(json::JsonReporter),
            Self::Svg => Box::new(svg::SvgReporter { png: false }),
            Self::Png => Box::new(svg::SvgReporter { png: true }),
            Self::Html => Box::new(html::HtmlReporter::new(rate)),
        }
    }
}
